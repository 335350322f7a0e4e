"""Syntax tree → ε-NFA over code points (Thompson construction).

Edges carry either a :class:`CharSet` (consume one character from the set) or nothing (an
ε-edge), and an ε-edge may carry a guard: a zero-width :class:`ast.Assert` that must hold for
the characters on either side of the position (see ``dfa.py`` for how guards are resolved).
"""

from __future__ import annotations

from ...errors import CompileBudgetError
from . import ast
from .charset import CharSet

DEFAULT_MAX_NFA_STATES = 200_000


class NFA:
    """A Thompson ε-NFA with a single start and a single final state.

    Attributes:
        chars: ``chars[s]`` lists ``(charset, t)`` edges out of state ``s``.
        eps: ``eps[s]`` lists ``(t, guard)`` ε-edges; ``guard`` is ``None`` or an ``Assert``.
        start, final: the start and the (only) accepting state.
        whole: ``None``, or a state from which the NFA accepts every text it could still
            accept from any set of states it is in together with ``whole`` (see
            :func:`build_search_nfa`); the subset construction then takes such a set as
            ``{whole}`` alone (``dfa.universal_targets``).
    """

    def __init__(self, max_states: int = DEFAULT_MAX_NFA_STATES) -> None:
        self.chars: list[list[tuple[CharSet, int]]] = []
        self.eps: list[list[tuple[int, ast.Assert | None]]] = []
        self.max_states = max_states
        self.start = 0
        self.final = 0
        self.whole: int | None = None

    @property
    def n_states(self) -> int:
        return len(self.chars)

    def new_state(self) -> int:
        if len(self.chars) >= self.max_states:
            raise CompileBudgetError(
                f"regular expression needs more than {self.max_states} automaton states "
                "(large repetition counts multiply the pattern); raise the budget or simplify it"
            )
        self.chars.append([])
        self.eps.append([])
        return len(self.chars) - 1

    def guards(self) -> list[ast.Assert]:
        return [g for edges in self.eps for _, g in edges if g is not None]


def build_nfa(node: ast.Node, *, max_states: int = DEFAULT_MAX_NFA_STATES) -> NFA:
    """Build the ε-NFA of ``node``."""
    nfa = NFA(max_states)
    s, f = _build(nfa, node)
    nfa.start, nfa.final = s, f
    return nfa


def build_search_nfa(
    head: ast.Node, tail: ast.Node, *, max_states: int = DEFAULT_MAX_NFA_STATES
) -> NFA:
    """The ε-NFA of ``head`` then ``tail``, where ``tail`` is ``X*`` for the one-character
    language ``X`` that every string of ``head`` is a sequence of (the characters of a
    search pattern's text, or their encoded forms, written by a uniquely decodable,
    prefix-free code), with no guard: a pattern found somewhere in a text, ``head``
    reading up to the end of a match, ``tail`` the rest of the text.

    Once ``tail``'s start is reached the text so far is a sequence of ``X``, and every
    continuation that is one is accepted, which is everything any other state reached
    with the same text could accept. ``whole`` is set to ``tail``'s start.
    """
    nfa = NFA(max_states)
    s, f = _build(nfa, head)
    ts, tf = _build(nfa, tail)
    nfa.eps[f].append((ts, None))
    nfa.start, nfa.final, nfa.whole = s, tf, ts
    return nfa


def _build(nfa: NFA, node: ast.Node) -> tuple[int, int]:
    if isinstance(node, ast.Chars):
        s, f = nfa.new_state(), nfa.new_state()
        if node.chars:
            nfa.chars[s].append((node.chars, f))
        return s, f
    if isinstance(node, ast.Assert):
        s, f = nfa.new_state(), nfa.new_state()
        nfa.eps[s].append((f, node))
        return s, f
    if isinstance(node, ast.Concat):
        if not node.items:
            s = nfa.new_state()
            return s, s
        s, f = _build(nfa, node.items[0])
        for item in node.items[1:]:
            s2, f2 = _build(nfa, item)
            nfa.eps[f].append((s2, None))
            f = f2
        return s, f
    if isinstance(node, ast.Alt):
        s, f = nfa.new_state(), nfa.new_state()
        for item in node.items:
            s2, f2 = _build(nfa, item)
            nfa.eps[s].append((s2, None))
            nfa.eps[f2].append((f, None))
        return s, f
    if isinstance(node, ast.Repeat):
        return _build_repeat(nfa, node)
    raise TypeError(f"unknown regex node {node!r}")  # pragma: no cover


def _build_repeat(nfa: NFA, node: ast.Repeat) -> tuple[int, int]:
    s = nfa.new_state()
    cur = s
    for _ in range(node.min):
        s2, f2 = _build(nfa, node.item)
        nfa.eps[cur].append((s2, None))
        cur = f2
    f = nfa.new_state()
    nfa.eps[cur].append((f, None))
    if node.max is None:
        s2, f2 = _build(nfa, node.item)
        nfa.eps[cur].append((s2, None))
        nfa.eps[f2].append((s2, None))
        nfa.eps[f2].append((f, None))
    else:
        for _ in range(node.max - node.min):
            s2, f2 = _build(nfa, node.item)
            nfa.eps[cur].append((s2, None))
            nfa.eps[f2].append((f, None))
            cur = f2
    return s, f
