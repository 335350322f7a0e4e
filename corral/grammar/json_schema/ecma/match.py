"""ECMA-262 pattern matching with the specification's backtracking semantics.

:class:`Program` runs a parsed pattern (:mod:`.syntax`) on a string the way ECMA-262's
pattern semantics (22.2.2, with the ``u`` flag and no other flag) define it, including
what no finite automaton can do:

* **backreferences** (``\\1``, ``\\k<name>``) compare code points; a reference to a group
  that has not matched (or was cleared) matches the empty string;
* **captures are cleared at each iteration** of the quantifier that contains them;
* **an optional iteration that matches the empty string fails** (the empty check), so
  ``(a*)*`` terminates and ``(?:)*`` matches once;
* **lookahead and lookbehind of any length**, atomic: once the body matched, the match is
  not revisited; captures set inside a positive lookaround stay, those of a negative one
  do not; lookbehind bodies are matched right to left (their backreferences too);
* ``^``/``$`` are the text's start and end (no ``m`` flag); ``\\b`` compares ASCII word
  characters; alternatives are tried in order, greedy quantifiers longest first.

The matcher is an explicit-stack backtracking machine: choice points and the registers
they must restore (captures, quantifier counters) live on one stack, so text length
never turns into Python recursion depth. Every call has a step budget: a pattern that
backtracks exponentially raises :class:`MatchBudgetError` instead of hanging.
"""

from __future__ import annotations

from collections.abc import Callable

from ....errors import CorralError
from ...regex.charset import UNIVERSE, CharSet
from . import syntax as sx

__all__ = ["DEFAULT_MAX_STEPS", "MatchBudgetError", "Program"]

DEFAULT_MAX_STEPS = 1_000_000
"""Machine steps one search may take before :class:`MatchBudgetError`."""


class MatchBudgetError(CorralError):
    """A pattern needed more backtracking steps than allowed on one text (no answer)."""


# opcodes
_CHAR_F, _CHAR_B, _SPLIT, _JMP, _MATCH = 0, 1, 2, 3, 4
_GOPEN, _GCLOSE_F, _GCLOSE_B = 5, 6, 7
_ASSERT, _BACKREF_F, _BACKREF_B, _LOOK = 8, 9, 10, 11
_REPINIT, _REPLOOP, _REPSTART, _REPEND = 12, 13, 14, 15
_STAR_F, _STAR_B = 16, 17

# stack entry tags
_CHOICE, _UNDO, _RUN = 0, 1, 2

_WORD_ASCII = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")

Test = Callable[[int], bool]


def _char_test(cs: CharSet) -> Test:
    """A fast membership test for one code point."""
    if cs == UNIVERSE:
        return lambda cp: not 0xD800 <= cp <= 0xDFFF
    if len(cs.ranges) == 1 and cs.ranges[0][0] == cs.ranges[0][1]:
        only = cs.ranges[0][0]
        return lambda cp: cp == only
    if cs.size() <= 64:
        members = frozenset(cp for lo, hi in cs.ranges for cp in range(lo, hi + 1))
        return members.__contains__
    return cs.__contains__


class Program:
    """A compiled pattern: ``search(text)`` tells whether it matches somewhere in
    ``text`` (what JSON Schema's ``pattern`` asks), with ECMA-262 semantics."""

    def __init__(self, pattern: sx.Pattern) -> None:
        self.pattern = pattern
        g = pattern.n_groups
        # registers: capture slots (2 per group, group 0 unused), then each group's start,
        # then two per quantifier (iteration count, position where the iteration began)
        self.n_caps = 2 * (g + 1)
        self._loop_base = self.n_caps + g + 1
        self.code: list[tuple] = []
        self._looks: list[tuple[sx.Node, bool, int]] = []
        self._n_loops = 0
        self._emit(pattern.root, forward=True)
        self._op(_MATCH)
        while self._looks:  # lookaround bodies, each its own sub-program
            body, forward, at = self._looks.pop()
            start = len(self.code)
            self._emit(body, forward=forward)
            self._op(_MATCH)
            op, _, behind, negate = self.code[at]
            self.code[at] = (op, start, behind, negate)
        self.n_regs = self._loop_base + 2 * self._n_loops
        first, nullable = _first(pattern.root)
        self._first: Test | None = None if nullable or first is None else _char_test(first)
        self._anchored = _anchored(pattern.root)

    # -- compilation -------------------------------------------------------------------
    def _op(self, *ins: object) -> int:
        self.code.append(tuple(ins))
        return len(self.code) - 1

    def _patch(self, at: int, *ins: object) -> None:
        self.code[at] = tuple(ins)

    def _emit(self, node: sx.Node, *, forward: bool) -> None:
        if isinstance(node, sx.Chars):
            self._op(_CHAR_F if forward else _CHAR_B, _char_test(node.chars))
        elif isinstance(node, sx.Seq):
            for item in node.items if forward else reversed(node.items):
                self._emit(item, forward=forward)
        elif isinstance(node, sx.Alt):
            jumps = []
            for i, item in enumerate(node.items):
                if i < len(node.items) - 1:
                    split = self._op(_SPLIT, 0, 0)
                    self._emit(item, forward=forward)
                    jumps.append(self._op(_JMP, 0))
                    self._patch(split, _SPLIT, split + 1, len(self.code))
                else:
                    self._emit(item, forward=forward)
            for j in jumps:
                self._patch(j, _JMP, len(self.code))
        elif isinstance(node, sx.Group):
            self._op(_GOPEN, self.n_caps + node.index)
            self._emit(node.body, forward=forward)
            close = _GCLOSE_F if forward else _GCLOSE_B
            self._op(close, 2 * node.index, self.n_caps + node.index)
        elif isinstance(node, sx.Repeat):
            self._repeat(node, forward=forward)
        elif isinstance(node, sx.Anchor):
            self._op(_ASSERT, node.kind)
        elif isinstance(node, sx.Look):
            at = self._op(_LOOK, -1, node.behind, node.negate)
            self._looks.append((node.body, not node.behind, at))
        else:  # BackRef
            self._op(_BACKREF_F if forward else _BACKREF_B, 2 * node.index)

    def _repeat(self, node: sx.Repeat, *, forward: bool) -> None:
        if isinstance(node.body, sx.Chars) and node.greedy:
            # one character at a time: consume the longest run, give back on backtracking
            star = _STAR_F if forward else _STAR_B
            self._op(star, _char_test(node.body.chars), node.min, node.max)
            return
        if node.max == 0:
            return
        q = self._n_loops
        self._n_loops += 1
        count = self._loop_base + 2 * q
        start = count + 1
        self._op(_REPINIT, count)
        loop = self._op(_REPLOOP, 0, 0, 0, 0, 0, 0)
        self._op(_REPSTART, start, 2 * node.first_group, 2 * node.n_groups)
        self._emit(node.body, forward=forward)
        self._op(_REPEND, count, start, node.min, loop)
        exit_pc = len(self.code)
        self._patch(loop, _REPLOOP, count, node.min, node.max, node.greedy, loop + 1, exit_pc)

    # -- running -----------------------------------------------------------------------
    def search(self, text: str, *, max_steps: int = DEFAULT_MAX_STEPS) -> bool:
        """Whether the pattern matches ``text`` at some position (the first match found
        by ECMA-262's search from left to right exists iff any match exists).

        Raises:
            MatchBudgetError: more than ``max_steps`` machine steps were needed.
        """
        cps = [ord(c) for c in text]
        regs = [-1] * self.n_regs
        budget = [max_steps]
        starts = [0] if self._anchored else range(len(cps) + 1)
        first = self._first
        for s in starts:
            if first is not None and (s >= len(cps) or not first(cps[s])):
                continue
            if self._run(0, s, cps, regs, budget) is not None:
                return True
        return False

    def _run(
        self, pc: int, pos: int, cps: list[int], regs: list[int], budget: list[int]
    ) -> list[tuple] | None:
        """Run from ``pc`` at ``pos``; on a match, the undo entries of what the run set
        (the caller keeps or reverts them); ``None`` when nothing matched (the registers
        are then as they were)."""
        code = self.code
        n = len(cps)
        stack: list[tuple] = []
        steps = budget[0]
        while True:
            steps -= 1
            if steps < 0:
                raise MatchBudgetError(
                    f"{self.pattern.name}: more than the allowed backtracking steps"
                )
            ins = code[pc]
            op = ins[0]
            ok = True
            if op == _CHAR_F:
                if pos < n and ins[1](cps[pos]):
                    pos += 1
                    pc += 1
                else:
                    ok = False
            elif op == _CHAR_B:
                if pos > 0 and ins[1](cps[pos - 1]):
                    pos -= 1
                    pc += 1
                else:
                    ok = False
            elif op in (_STAR_F, _STAR_B):
                test, lo, hi = ins[1], ins[2], ins[3]
                k = 0
                limit = n - pos if op == _STAR_F else pos
                if hi is not None and hi < limit:
                    limit = hi
                if op == _STAR_F:
                    while k < limit and test(cps[pos + k]):
                        k += 1
                else:
                    while k < limit and test(cps[pos - 1 - k]):
                        k += 1
                if k < lo:
                    ok = False
                else:
                    step = 1 if op == _STAR_F else -1
                    if k > lo:  # positions to give back, nearest first
                        stack.append((_RUN, pc + 1, pos + step * lo, pos + step * (k - 1), step))
                    pos += step * k
                    pc += 1
            elif op == _SPLIT:
                stack.append((_CHOICE, ins[2], pos))
                pc = ins[1]
            elif op == _JMP:
                pc = ins[1]
            elif op == _MATCH:
                budget[0] = steps
                return [e for e in stack if e[0] == _UNDO]
            elif op == _GOPEN:
                r = ins[1]
                stack.append((_UNDO, r, regs[r]))
                regs[r] = pos
                pc += 1
            elif op in (_GCLOSE_F, _GCLOSE_B):
                c, r = ins[1], ins[2]
                stack.append((_UNDO, c, regs[c]))
                stack.append((_UNDO, c + 1, regs[c + 1]))
                if op == _GCLOSE_F:
                    regs[c], regs[c + 1] = regs[r], pos
                else:
                    regs[c], regs[c + 1] = pos, regs[r]
                pc += 1
            elif op == _REPINIT:
                r = ins[1]
                stack.append((_UNDO, r, regs[r]))
                regs[r] = 0
                pc += 1
            elif op == _REPLOOP:
                count = regs[ins[1]]
                lo, hi, greedy, body, out = ins[2], ins[3], ins[4], ins[5], ins[6]
                if count < lo:
                    pc = body
                elif hi is not None and count >= hi:
                    pc = out
                elif greedy:
                    stack.append((_CHOICE, out, pos))
                    pc = body
                else:
                    stack.append((_CHOICE, body, pos))
                    pc = out
            elif op == _REPSTART:
                r = ins[1]
                stack.append((_UNDO, r, regs[r]))
                regs[r] = pos
                for c in range(ins[2], ins[2] + ins[3]):  # each iteration clears its captures
                    if regs[c] != -1:
                        stack.append((_UNDO, c, regs[c]))
                        regs[c] = -1
                pc += 1
            elif op == _REPEND:
                r = ins[1]
                count = regs[r]
                if count >= ins[3] and pos == regs[ins[2]]:
                    ok = False  # an optional iteration matched the empty string
                else:
                    stack.append((_UNDO, r, count))
                    regs[r] = count + 1
                    pc = ins[4]
            elif op == _ASSERT:
                kind = ins[1]
                if kind == "^":
                    ok = pos == 0
                elif kind == "$":
                    ok = pos == n
                else:
                    a = pos > 0 and cps[pos - 1] in _WORD_ASCII
                    b = pos < n and cps[pos] in _WORD_ASCII
                    ok = (a != b) == (kind == "\\b")
                pc += 1
            elif op in (_BACKREF_F, _BACKREF_B):
                c = ins[1]
                s, e = regs[c], regs[c + 1]
                if s != -1 and e != -1:
                    length = e - s
                    if op == _BACKREF_F:
                        ok = pos + length <= n and cps[pos : pos + length] == cps[s:e]
                        if ok:
                            pos += length
                    else:
                        ok = pos - length >= 0 and cps[pos - length : pos] == cps[s:e]
                        if ok:
                            pos -= length
                pc += 1
            else:  # _LOOK
                budget[0] = steps
                kept = self._run(ins[1], pos, cps, regs, budget)
                steps = budget[0]
                if ins[3]:  # negative: holds when the body does not match
                    if kept is not None:
                        for _, r, old in reversed(kept):
                            regs[r] = old
                        ok = False
                elif kept is None:
                    ok = False
                else:
                    stack.extend(kept)  # the body's captures stay, undone on backtracking
                pc += 1
            if ok:
                continue
            # backtrack: undo registers down to the last choice point
            while True:
                if not stack:
                    budget[0] = steps
                    return None
                entry = stack.pop()
                tag = entry[0]
                if tag == _UNDO:
                    regs[entry[1]] = entry[2]
                elif tag == _CHOICE:
                    pc, pos = entry[1], entry[2]
                    break
                else:  # _RUN: give back one more character of a greedy run
                    _, nxt, last, cur, step = entry
                    if cur != last:
                        stack.append((_RUN, nxt, last, cur - step, step))
                    pc, pos = nxt, cur
                    break


def _first(node: sx.Node) -> tuple[CharSet | None, bool]:
    """The code points a match of ``node`` can start with (``None``: not known) and
    whether it can match the empty string (zero-width nodes count as empty)."""
    if isinstance(node, sx.Chars):
        return node.chars, False
    if isinstance(node, (sx.Anchor, sx.Look)):
        return CharSet(), True
    if isinstance(node, sx.BackRef):
        return None, True
    if isinstance(node, sx.Group):
        return _first(node.body)
    if isinstance(node, sx.Repeat):
        if node.max == 0:
            return CharSet(), True
        cs, nullable = _first(node.body)
        return cs, nullable or node.min == 0
    if isinstance(node, sx.Alt):
        acc = CharSet()
        any_nullable = False
        for item in node.items:
            cs, nullable = _first(item)
            if cs is None:
                return None, True
            acc = acc.union(cs)
            any_nullable = any_nullable or nullable
        return acc, any_nullable
    acc = CharSet()  # Seq
    for item in node.items:
        cs, nullable = _first(item)
        if cs is None:
            return None, True
        acc = acc.union(cs)
        if not nullable:
            return acc, False
    return acc, True


def _anchored(node: sx.Node) -> bool:
    """Whether every match must start at position 0 (the pattern begins with ``^``)."""
    if isinstance(node, sx.Anchor):
        return node.kind == "^"
    if isinstance(node, sx.Group):
        return _anchored(node.body)
    if isinstance(node, sx.Seq):
        return bool(node.items) and _anchored(node.items[0])
    if isinstance(node, sx.Alt):
        return all(_anchored(i) for i in node.items)
    return False
