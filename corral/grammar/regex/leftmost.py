"""Python ``re.match``'s matches as a byte DFA: the leftmost-first automaton of a regex.

Lark's Earley lexer matches a terminal at a position with Python's ``re.match``: a
backtracking search that tries alternatives in order, greedy quantifiers longest first and
lazy ones shortest first, and returns the first match it finds. :func:`leftmost_first_dfa`
builds the leftmost-first DFA of the pattern (the construction RE2 uses for Perl's
semantics): a state is the list of the NFA's threads in the order the backtracking search
would try them, and once a thread matches, every thread after it is dropped (it could only
lead to a match the search would not return). A lexeme then ends where this DFA accepts and
cannot read the next byte, which is Python's match unless Python would have to come back to
an earlier match after a longer attempt failed (corral does not backtrack inside a lexeme:
see :mod:`corral.grammar.lexeme_backtracking`).

Assertions: a lookbehind at the start of a pattern would look at text before the lexeme and
is refused; one-character lookahead at its end (``/[?](?![a-z])/``) is decided by the byte
after the lexeme, and becomes the ``end_blocked`` rows of
:class:`~corral.grammar.ir.Terminal`. A lookahead of several characters (``"(?!"")`` in
Lark's ``python.lark``: a string's opening quote not followed by two more) is exact: a thread
that passes it carries an obligation on the characters to come, checked as they are read,
and dies when it fails; where a thread matches while its obligation still looks one
character past the lexeme, that character decides the end as for a one-character
lookahead; two or more past it are refused.
"""

from __future__ import annotations

import bisect
import itertools

import numpy as np

from ...caching import BoundedCache
from ...errors import CompileBudgetError, UnsupportedFeatureError
from . import ast
from .charset import MAX_CODE_POINT, NEWLINE, SURROGATES, CharSet
from .dfa import (
    DEFAULT_MAX_DFA_STATES,
    ByteDFA,
    live_states,
    metered,
    minimize_with_blocked,
    spend,
    utf8_automaton,
)
from .python_syntax import parse_python_regex

__all__ = ["leftmost_first_dfa"]

Obligations = tuple[tuple[bool, tuple[CharSet, ...]], ...]

_MAX_NFA_STATES = 200_000


class _PriorityNFA:
    """A Thompson ε-NFA whose ε-edges out of each state are listed in the order Python's
    backtracking search tries them. A state has one character edge or ε-edges, not both."""

    def __init__(self, node: ast.Node) -> None:
        self.char: list[tuple[CharSet, int] | None] = []
        self.eps: list[list[tuple[int, ast.Assert | None]]] = []
        # Python ends a repeat after an iteration beyond ``min`` that read nothing, so the
        # search keeps, per repeat, whether its current iteration has read anything yet.
        # Repeats are numbered; recorded are the states where an iteration starts, where
        # the repeat is left, and where an iteration beyond ``min`` ends (-> the state after
        # the repeat).
        self.n_repeats = 0
        self.body_start: dict[int, int] = {}
        self.repeat_exit: dict[int, int] = {}
        self.iteration_end: dict[int, tuple[int, int]] = {}
        self.start, self.final = self._build(node)

    def _new(self) -> int:
        if len(self.char) >= _MAX_NFA_STATES:
            raise CompileBudgetError(
                f"regular expression needs more than {_MAX_NFA_STATES} automaton states "
                "(large repetition counts multiply the pattern); simplify it"
            )
        self.char.append(None)
        self.eps.append([])
        return len(self.char) - 1

    def _build(self, node: ast.Node) -> tuple[int, int]:
        if isinstance(node, ast.Chars):
            s, f = self._new(), self._new()
            if node.chars:
                self.char[s] = (node.chars, f)
            return s, f
        if isinstance(node, ast.Assert):
            s, f = self._new(), self._new()
            self.eps[s].append((f, node))
            return s, f
        if isinstance(node, ast.Concat):
            s = f = self._new()
            for item in node.items:
                s2, f2 = self._build(item)
                self.eps[f].append((s2, None))
                f = f2
            return s, f
        if isinstance(node, ast.Alt):
            s, f = self._new(), self._new()
            for item in node.items:
                s2, f2 = self._build(item)
                self.eps[s].append((s2, None))
                self.eps[f2].append((f, None))
            return s, f
        if isinstance(node, ast.Repeat):
            return self._repeat(node)
        raise TypeError(f"unknown regex node {node!r}")  # pragma: no cover

    def _repeat(self, node: ast.Repeat) -> tuple[int, int]:
        rep = self.n_repeats
        self.n_repeats += 1
        s = cur = self._new()
        f = self._new()
        self.repeat_exit[f] = rep

        def body() -> tuple[int, int]:
            s2, f2 = self._build(node.item)
            entry = self._new()  # a state of its own, reached only where an iteration starts
            self.eps[entry].append((s2, None))
            self.body_start[entry] = rep
            return entry, f2

        for _ in range(node.min):
            s2, f2 = body()
            self.eps[cur].append((s2, None))
            cur = f2
        # a lazy quantifier tries to stop first, a greedy one to go on; the zero-width rule
        # applies to the iterations beyond ``min`` (as in CPython's MAX_UNTIL / MIN_UNTIL)
        if node.max is None:
            s2, f2 = body()
            go, stop = (s2, None), (f, None)
            self.eps[cur] += [stop, go] if node.lazy else [go, stop]
            self.eps[f2].append((cur, None))
            self.iteration_end[f2] = (rep, f)
        else:
            for k in range(node.max - node.min):
                if k > 0:
                    self.iteration_end[cur] = (rep, f)
                s2, f2 = body()
                go, stop = (s2, None), (f, None)
                self.eps[cur] += [stop, go] if node.lazy else [go, stop]
                cur = f2
            self.eps[cur].append((f, None))
        return s, f


class _Blocks:
    """The code points split into blocks that no character edge or assertion of the NFA
    tells apart (characters outside every set form one block too)."""

    def __init__(self, nfa: _PriorityNFA) -> None:
        sets: list[CharSet] = list({e[0] for e in nfa.char if e is not None})
        for edges in nfa.eps:
            for _t, g in edges:
                if g is not None:
                    if g.chars is not None:
                        sets.append(g.chars)
                    sets += g.rest
                    if g.kind in (ast.LINE_START, ast.LINE_END):
                        sets.append(NEWLINE)
        sets = list(dict.fromkeys(sets))
        points = {0, SURROGATES[0], SURROGATES[1] + 1, MAX_CODE_POINT + 1}
        for cs in sets:
            for lo, hi in cs.ranges:
                points.update((lo, hi + 1))
        bounds = sorted(points)
        by_sig: dict[int, int] = {}
        self.ranges: list[list[tuple[int, int]]] = []
        self._starts: list[int] = []  # interval starts, for bisect
        self._block_at: list[int] = []
        for lo, nxt in itertools.pairwise(bounds):
            if SURROGATES[0] <= lo <= SURROGATES[1]:
                continue
            sig = 0
            for i, cs in enumerate(sets):
                if lo in cs:
                    sig |= 1 << i
            b = by_sig.setdefault(sig, len(by_sig))
            if b == len(self.ranges):
                self.ranges.append([])
            self.ranges[b].append((lo, nxt - 1))
            self._starts.append(lo)
            self._block_at.append(b)
        self.n = len(self.ranges)
        self.members: dict[CharSet, int] = {}
        for i, cs in enumerate(sets):
            m = 0
            for sig, b in by_sig.items():
                if sig >> i & 1:
                    m |= 1 << b
            self.members[cs] = m

    def has(self, block: int, cs: CharSet) -> bool:
        return block >= 0 and bool(self.members[cs] >> block & 1)

    def blocks_in(self, lo: int, hi: int) -> set[int]:
        """The blocks of the code points ``lo..hi`` (surrogates excluded)."""
        i = bisect.bisect_right(self._starts, lo) - 1
        out: set[int] = set()
        while i < len(self._starts) and self._starts[i] <= hi:
            out.add(self._block_at[i])
            i += 1
        return out


#: how many terminal automata the process keeps built (grammars repeat their terminals:
#: names, numbers, strings, whitespace, the keywords of a language)
_CACHE_SIZE = 1024
_CACHE: BoundedCache[tuple[str, int, int], tuple[ByteDFA, np.ndarray | None, int]] = BoundedCache(
    _CACHE_SIZE
)


def leftmost_first_dfa(
    pattern: str, flags: int = 0, *, where: str = "", max_states: int = DEFAULT_MAX_DFA_STATES
) -> tuple[ByteDFA, np.ndarray | None]:
    """The byte DFA of a Lark terminal's regex, read as Lark's lexer reads it.

    Its accepting states are where the match ``re.match(pattern, text, flags)`` returns can
    end: it keeps the strings Python's backtracking order reaches as a match before any
    match it prefers (``/a|ab/`` accepts ``a`` and never reads on; in ``/"(.*?)"/`` the
    lexeme ends at the first closing quote; ``/\\/(\\\\\\/|[^\\/])*?\\//`` reads ``\\/`` as an
    escape, not as the end). Returns the DFA and its ``end_blocked`` rows (see
    :class:`~corral.grammar.ir.Terminal`): ``None`` unless a lookahead at the end of the
    pattern forbids ending before some bytes.

    Raises:
        GrammarError: the pattern is not valid Python regex syntax.
        UnsupportedFeatureError: a construct corral cannot enforce (backreferences,
            lookbehind at the start, a lookahead at the end that needs a next character or
            tells apart characters that share their first byte).
        CompileBudgetError: more than ``max_states`` states.

    Built once per process for each ``(pattern, flags, max_states)`` (the last 1,024 kept):
    the automaton and its rows are shared, read-only, by every grammar that asks again, and
    each asking charges the active work budgets the steps of the first build
    (:func:`~corral.grammar.regex.dfa.metered`). Errors are not kept: a pattern that fails
    fails again, with the ``where`` of that call.
    """
    key = (pattern, flags, max_states)
    hit = _CACHE.get(key)
    if hit is None:
        (dfa, blocked), cost = metered(
            lambda: _build(pattern, flags, where=where, max_states=max_states),
            where or f"regex {pattern!r}",
        )
        dfa = dfa.compacted()
        dfa.accept.setflags(write=False)
        if blocked is not None:
            blocked.setflags(write=False)
        hit = (dfa, blocked, cost)
        _CACHE.put(key, hit)
    else:
        spend(hit[2], where or f"regex {pattern!r}")
    return hit[0], hit[1]


def _build(
    pattern: str, flags: int, *, where: str, max_states: int
) -> tuple[ByteDFA, np.ndarray | None]:
    """:func:`leftmost_first_dfa`, built now."""
    where = where or f"regex {pattern!r}"
    nfa = _PriorityNFA(parse_python_regex(pattern, flags, where=where, long_lookahead=True))
    blocks = _Blocks(nfa)
    guards = [g for edges in nfa.eps for _t, g in edges if g is not None]
    prev_sets = _guard_sets(guards, (ast.BEHIND, ast.BOUNDARY), ast.LINE_START)
    next_sets = _guard_sets(guards, (ast.AHEAD, ast.BOUNDARY), ast.LINE_END)
    next_sets += [cs for g in guards for cs in g.rest if cs not in next_sets]
    next_sets = list(dict.fromkeys(next_sets))
    next_dependent = any(g.kind in ast.NEEDS_NEXT for g in guards)

    # what the assertions can see of a neighbouring character: its membership in their sets
    def prev_key(block: int) -> tuple[bool, ...]:
        return tuple(blocks.has(block, cs) for cs in prev_sets)

    next_key = [tuple(blocks.has(b, cs) for cs in next_sets) for b in range(blocks.n)]

    def holds(g: ast.Assert, pk: tuple[bool, ...] | None, nk: tuple[bool, ...] | None) -> bool:
        k = g.kind
        if k in ast.NEEDS_PREV and pk is None:
            raise UnsupportedFeatureError(
                f"assertion {g.text or k} at the start of a terminal",
                location=where,
                detail="it would look at text before the lexeme; "
                "only assertions inside a terminal or a lookahead at its end can be enforced",
            )
        if k == ast.BEHIND:
            assert pk is not None and g.chars is not None
            r = pk[prev_sets.index(g.chars)]
        elif k == ast.AHEAD:
            assert g.chars is not None
            r = nk is not None and nk[next_sets.index(g.chars)]
        elif k == ast.BOUNDARY:
            assert pk is not None and g.chars is not None
            r = pk[prev_sets.index(g.chars)] != (nk is not None and nk[next_sets.index(g.chars)])
        elif k == ast.TEXT_START:
            r = False  # inside a lexeme there is always a character before
        elif k == ast.TEXT_END:
            r = nk is None
        elif k == ast.LINE_START:
            assert pk is not None
            r = pk[prev_sets.index(NEWLINE)]
        elif k == ast.LINE_END:
            r = nk is None or nk[next_sets.index(NEWLINE)]
        else:  # pragma: no cover
            raise AssertionError(k)
        return r != g.negate

    # A thread is an NFA state, and the lookaheads of several characters it has passed
    # that still look at characters to come (obligations: (negate, classes), the first
    # class for the next character). Threads without obligations are numbered as their
    # state; the others from n_nfa on.
    n_nfa = len(nfa.char)
    thread_of: dict[tuple[int, Obligations], int] = {}
    threads: list[tuple[int, Obligations]] = []

    def thread(s: int, ob: Obligations) -> int:
        if not ob:
            return s
        t = thread_of.get((s, ob))
        if t is None:
            t = thread_of[(s, ob)] = n_nfa + len(threads)
            threads.append((s, ob))
        return t

    def advance(ob: Obligations, nk: tuple[bool, ...] | None) -> Obligations | None:
        """The obligations once the next character (``nk``; ``None``: the text ends) is
        seen: ``None`` when one fails, so the thread dies."""
        out: list[tuple[bool, tuple[CharSet, ...]]] = []
        for negate, classes in ob:
            if nk is None or not nk[next_sets.index(classes[0])]:
                if negate:
                    continue  # the string is not there: the negative lookahead holds
                return None
            if len(classes) == 1:
                if negate:
                    return None  # the whole string is there
                continue
            out.append((negate, classes[1:]))
        return tuple(sorted(set(out), key=repr))

    closures: dict[tuple[object, ...], tuple[int, ...]] = {}
    pending_ends: set[tuple[object, ...]] = set()

    def closure(
        kernel: tuple[int, ...], pk: tuple[bool, ...] | None, nk: tuple[bool, ...] | None
    ) -> tuple[int, ...]:
        """The threads (states with a character edge, then the final state if some thread
        matches) in search order, given what the assertions see; cut after the match."""
        key = (kernel, pk, nk) if guards else (kernel,)
        out = closures.get(key)
        if out is not None:
            return out
        res: list[int] = []
        listed: set[int] = set()
        # depth-first, as Python searches; an item is a thread and the repeats whose
        # current iteration started at this position (a bit set): the search's future
        # depends on both
        seen: set[tuple[int, int]] = set()
        stack: list[tuple[int, int]] = []
        for tid in reversed(kernel):
            if tid >= n_nfa:
                s, ob = threads[tid - n_nfa]
                now = advance(ob, nk)
                if now is None:
                    continue
                tid = thread(s, now)
            stack.append((tid, 0))
        while stack:
            item = stack.pop()
            if item in seen:
                continue
            seen.add(item)
            tid, fresh = item
            s, ob = (tid, ()) if tid < n_nfa else threads[tid - n_nfa]
            if s == nfa.final:
                if ob:  # ending here depends on characters after the next one
                    pending_ends.add(key)
                res.append(s)
                break
            if nfa.char[s] is not None and tid not in listed:
                listed.add(tid)
                res.append(tid)
            rep = nfa.body_start.get(s)
            if rep is not None:
                fresh |= 1 << rep
            rep = nfa.repeat_exit.get(s)
            if rep is not None:
                fresh &= ~(1 << rep)
            it = nfa.iteration_end.get(s)
            if it is not None and fresh >> it[0] & 1:
                # the iteration ending here read nothing: Python leaves the repeat
                stack.append((thread(it[1], ob), fresh))
                continue
            for t, g in reversed(nfa.eps[s]):
                if g is None:
                    stack.append((thread(t, ob), fresh))
                elif g.rest:
                    now = advance(((g.negate, (g.chars, *g.rest)),), nk)  # type: ignore[arg-type]
                    if now is not None:
                        both = tuple(sorted(set(ob + now), key=repr))
                        stack.append((thread(t, both), fresh))
                elif holds(g, pk, nk):
                    stack.append((thread(t, ob), fresh))
        out = closures[key] = tuple(res)
        return out

    char_edges = [(blocks.members[e[0]], e[1]) if e is not None else (0, -1) for e in nfa.char]

    def edge_blocks_of(tid: int) -> tuple[int, int]:
        """The blocks a thread reads and the thread it becomes."""
        if tid < n_nfa:
            return char_edges[tid]
        s, ob = threads[tid - n_nfa]
        m, t = char_edges[s]
        return m, thread(t, ob)

    StateKey = tuple[tuple[int, ...], tuple[bool, ...] | None]
    reps: list[StateKey] = [((nfa.start,), None)]
    index: dict[StateKey, int] = {reps[0]: 0}
    trans: list[dict[int, int]] = []
    ends: list[int] = []  # per state: blocks before whose characters a lexeme may end
    end_eot: list[bool] = []
    groups: dict[tuple[bool, ...], int] = {}  # blocks the lookaheads cannot tell apart
    pending_checks: list[tuple[int, int]] = []  # (state, blocks) where ending needs 2+ more
    for b in range(blocks.n):
        groups[next_key[b]] = groups.get(next_key[b], 0) | (1 << b)
    i = 0
    while i < len(reps):
        kernel, pk = reps[i]
        i += 1
        end_eot.append(nfa.final in closure(kernel, pk, None))
        out: dict[int, int] = {}
        end_mask = 0
        for nk, gmask in groups.items():
            cl = closure(kernel, pk, nk)
            if cl and cl[-1] == nfa.final:
                end_mask |= gmask
            targets: dict[int, list[int]] = {}
            for s in cl:
                m, t = edge_blocks_of(s)
                m &= gmask
                while m:
                    low = m & -m
                    lst = targets.setdefault(low.bit_length() - 1, [])
                    if t not in lst:
                        lst.append(t)
                    m ^= low
            if (kernel, pk, nk) in pending_ends:  # the lexeme must read on: checked below
                pending_checks.append((i - 1, gmask))
            for b, lst in targets.items():
                key: StateKey = (tuple(lst), prev_key(b))
                j = index.get(key)
                if j is None:
                    if len(reps) >= max_states:
                        raise CompileBudgetError(
                            f"{where}: the automaton needs more than {max_states} states; "
                            "simplify the pattern"
                        )
                    j = index[key] = len(reps)
                    reps.append(key)
                out[b] = j
        trans.append(out)
        ends.append(end_mask)
    n_q = len(reps)
    for q in range(n_q):
        if ends[q] and not end_eot[q]:
            raise UnsupportedFeatureError(
                "lookahead at the end of a terminal that needs a next character",
                location=where,
                detail="a lexeme that may end only before certain characters, never at the "
                "end of the text, cannot be enforced; use a negative lookahead (?!...)",
            )
    live = live_states(trans, end_eot)  # can still reach a match
    for q, gmask in pending_checks:
        if gmask & ~sum(1 << b for b, j in trans[q].items() if live[j]):
            raise UnsupportedFeatureError(
                "lookahead reaching more than one character past the end of a terminal",
                location=where,
                detail="the end of a lexeme is decided on the next byte only",
            )
    if not live[0]:
        return ByteDFA.empty(), None
    byte_trans, accept, of_char = utf8_automaton(
        trans, end_eot, live, blocks.ranges, max_states * 4, where
    )
    blocked = None
    if next_dependent:
        blocked = np.zeros((byte_trans.shape[0], 256), bool)
        for j, q in enumerate(of_char.tolist()):
            if q >= 0 and accept[j]:
                for byte in np.flatnonzero(byte_trans[j] < 0).tolist():
                    blocked[j, byte] = not _may_end_before(byte, ends[q], blocks, where)
    return minimize_with_blocked(byte_trans, accept, blocked)


def _guard_sets(guards: list[ast.Assert], with_chars: tuple[str, ...], line: str) -> list[CharSet]:
    """The character sets some of ``guards`` test a neighbour against (``line``: the kind
    that tests for a newline)."""
    out: dict[CharSet, None] = {}
    for g in guards:
        if g.kind in with_chars and g.chars is not None:
            out[g.chars] = None
        elif g.kind == line:
            out[NEWLINE] = None
    return list(out)


def _may_end_before(byte: int, end_blocks: int, blocks: _Blocks, where: str) -> bool:
    """Whether a lexeme may end before a character that starts with ``byte``, given the
    blocks before whose characters it may end."""
    if byte < 0x80:
        lo = hi = byte
    elif 0xC2 <= byte <= 0xDF:
        lo, hi = (byte & 0x1F) << 6, ((byte & 0x1F) << 6) | 0x3F
    elif 0xE0 <= byte <= 0xEF:
        lo, hi = max(0x800, (byte & 0x0F) << 12), ((byte & 0x0F) << 12) | 0xFFF
    elif 0xF0 <= byte <= 0xF4:
        lo = max(0x10000, (byte & 0x07) << 18)
        hi = min(MAX_CODE_POINT, ((byte & 0x07) << 18) | 0x3FFFF)
    else:
        return True  # no character starts with this byte
    found = {bool(end_blocks >> b & 1) for b in blocks.blocks_in(lo, hi)}
    if len(found) > 1:
        raise UnsupportedFeatureError(
            "lookahead at the end of a terminal that tells apart characters with the same "
            f"first byte ({byte:#04x})",
            location=where,
            detail="the end of a lexeme is decided on the next byte; use a lookahead whose "
            "class holds either all or none of the characters that start with one byte "
            "(e.g. an ASCII class)",
        )
    return found.pop() if found else True
