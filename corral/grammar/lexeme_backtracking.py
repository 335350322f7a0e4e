"""Where Lark's lexer can find a lexeme that corral's cannot: backtracking inside a lexeme.

corral's lexer ends a lexeme where the terminal's leftmost-first automaton
(:mod:`corral.grammar.regex.leftmost`) accepts and cannot read the next byte; it never
comes back to an earlier match after reading on. Python's ``re.match``, which Lark uses,
does. :func:`backtracking_lexemes` finds the terminals of a grammar where this can make a
text that Lark accepts fail in corral, with an example each.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from .follow import follow_terminals, nullable_nonterminals, numbered
from .ir import Grammar
from .regex import ByteDFA

__all__ = ["LexemeBacktracking", "backtracking_lexemes"]


@dataclass(frozen=True)
class LexemeBacktracking:
    """A place where Lark's lexer may return a lexeme that corral's does not.

    ``re.match`` may return ``lexeme`` for ``terminal`` when ``follower`` comes next and no
    longer match goes through: the search comes back to ``lexeme``. corral's lexer does not
    go back: after ``lexeme`` it reads on into ``follower`` (a longer match could still
    follow) and fails where that attempt fails. ``follower`` is a character that can
    start a lexeme after the terminal in some rule (or an ignored one), so a text Lark
    accepts may be rejected; whether one exists depends on the rules around it.
    """

    terminal: str
    lexeme: bytes
    follower: bytes

    def describe(self) -> str:
        return (
            f"terminal {self.terminal}: after {self.lexeme!r}, {self.follower!r} starts a "
            "longer match; where no longer match goes through, Lark's lexer comes back to "
            f"{self.lexeme!r} and corral's does not"
        )


def backtracking_lexemes(grammar: Grammar) -> list[LexemeBacktracking]:
    """The terminals of ``grammar`` whose lexemes corral can miss where Lark's lexer finds
    them by backtracking (one example each, see :class:`LexemeBacktracking`).

    A terminal is listed when, from an accepting state of its automaton, a character that
    can start a lexeme after the terminal leads on into a state where the lexeme can fail
    (one that does not accept, or may not end before some byte; or the lexeme dies inside
    the character): if the text then goes on with no longer match, Python's ``re.match``
    returns the earlier match and Lark goes on from there, while corral's lexer has read
    past it and fails. The check follows the rules' FOLLOW sets, not the
    full context, so it may list a terminal whose rules never let this happen; an empty
    list means corral's lexemes are Lark's on every text."""
    follow = _follow_terminals(grammar)
    terms = grammar.terminals
    out: list[LexemeBacktracking] = []
    for name, t in terms.items():
        if t.special is not None or not isinstance(t.dfa, ByteDFA):
            continue  # a span automaton is corral's own terminal, not one of Lark's
        d = t.dfa
        dt = d.trans  # built on each access for a compact automaton: once
        # states where a lexeme can fail: it does not accept, or it may not end before some
        # bytes it cannot read
        fails = ~d.accept if t.end_blocked is None else ~d.accept | t.end_blocked.any(axis=1)
        nexts = [
            dfa.trans
            for u in sorted(follow[name])
            if terms[u].special is None and isinstance(dfa := terms[u].dfa, ByteDFA)
        ]
        for s in _bfs_order(dt):
            if not d.accept[s]:
                continue
            ch = next(
                (c for ut in nexts if (c := _char_past_match(dt, fails, s, ut)) is not None),
                None,
            )
            if ch is not None:
                out.append(LexemeBacktracking(name, _shortest_word(dt, s), ch))
                break
    return out


_UTF8_NEXT = {2: 1, 3: 2, 4: 3}


def _char_past_match(dt: np.ndarray, fails: np.ndarray, s: int, ut: np.ndarray) -> bytes | None:
    """A character the automaton ``ut`` can start with, whose first byte the automaton
    ``dt`` reads on from its accepting state ``s`` and after which ``dt`` is in a state
    where a lexeme can fail (``fails``) or has died inside the character; ``None`` if there
    is none. Printable ASCII is tried first. (``dt``, ``ut``: ``int32 [n, 256]``
    transitions.)"""
    firsts = sorted(
        np.flatnonzero((ut[0] >= 0) & (dt[s] >= 0)).tolist(),
        key=lambda b: (not 0x21 <= b <= 0x7E, b),
    )
    for b in firsts:
        if b < 0x80:
            if fails[dt[s, b]]:
                return bytes([b])
            continue
        n = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
        # depth-first over the continuation bytes, both automata in step
        stack = [(int(dt[s, b]), int(ut[0, b]), bytes([b]))]
        seen: set[tuple[int, int, int]] = set()
        while stack:
            q, r, word = stack.pop()
            if len(word) == n:
                if q < 0 or fails[q]:
                    return word
                continue
            if (q, r, len(word)) in seen:
                continue
            seen.add((q, r, len(word)))
            for c in np.flatnonzero(ut[r, 0x80:0xC0] >= 0).tolist():
                c += 0x80
                q2 = int(dt[q, c]) if q >= 0 else -1
                stack.append((q2, int(ut[r, c]), word + bytes([c])))
    return None


def _bfs_order(trans: np.ndarray) -> list[int]:
    """The states of the automaton ``trans`` (``int32 [n, 256]``) by distance from the
    start."""
    order, seen = [0], {0}
    for s in order:
        for t in trans[s].tolist():
            if t >= 0 and t not in seen:
                seen.add(t)
                order.append(t)
    return order


def _shortest_word(trans: np.ndarray, target: int) -> bytes:
    """A shortest byte string from the start state of the automaton ``trans`` (``int32 [n,
    256]``) to ``target`` (printable bytes first)."""
    prev: dict[int, tuple[int, int]] = {0: (-1, -1)}
    todo = deque([0])
    prefer = sorted(range(256), key=lambda b: (not 0x21 <= b <= 0x7E, b))
    while todo and target not in prev:
        s = todo.popleft()
        for b in prefer:
            t = int(trans[s, b])
            if t >= 0 and t not in prev:
                prev[t] = (s, b)
                todo.append(t)
    word = bytearray()
    s = target
    while prev[s][0] >= 0:
        s, b = prev[s]
        word.append(b)
    return bytes(reversed(word))


def _follow_terminals(grammar: Grammar) -> dict[str, set[str]]:
    """Per terminal, the terminals whose lexemes may come right after one of its lexemes:
    FOLLOW sets over the rules, plus the ignored terminals (which may follow anything and
    be followed by anything)."""
    term_names, nt_names, prods = numbered(grammar)
    NT, NN = len(term_names), len(nt_names)
    follow = follow_terminals(prods, NT, NN, nullable_nonterminals(prods, NT, NN))
    ignored = set(grammar.ignore)
    out = {}
    for t, name in enumerate(term_names):
        if name in ignored:
            out[name] = set(term_names)
            continue
        after = {term_names[u] for u in range(NT) if follow[t] >> u & 1}
        out[name] = after | ignored
    return out
