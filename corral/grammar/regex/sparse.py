"""DFAs over bytes stored as sparse rows, for automata too large for 256 columns a state.

A :class:`~corral.grammar.regex.dfa.ByteDFA` keeps one ``int32`` per (state, byte): 1 KB a
state. The automaton of every substring of a 100,000-character document (``spans.py``) has
about 170,000 states with 2.2 transitions each, and the minimal automaton of a million
place names (``dawg.py``) 1.7 million states with 1.5 each: as dense rows, 175 MB and
1.4 GB (even by byte class); as sparse rows, 3 MB and 29 MB. The lexer tables
(``corral/automata/tables.py``) keep them sparse too, and the kernels read them through
one function (``kernels/lexer.py``).

It supports what the grammar IR and the tables need (membership, first bytes, a
fingerprint); DFA algebra (intersection, minimisation) is only for :class:`ByteDFA`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SparseDFA"]


LONG_LITERAL_BYTES = 4096
"""Literals longer than this many bytes are built as chains of sparse rows
(:meth:`SparseDFA.literal`): a dense row of 256 transitions a byte would make a 1 MB
literal a gigabyte of lexer table."""


@dataclass(frozen=True)
class SparseDFA:
    """A trimmed DFA over bytes whose transitions are stored as sorted sparse rows.

    Attributes:
        row_start: ``int64 [n_states + 1]``; the transitions of state ``s`` are entries
            ``row_start[s]:row_start[s + 1]``.
        labels: ``uint8 [n_transitions]``: the byte of each transition, increasing within
            a row.
        targets: ``int32 [n_transitions]``: the state after it.
        accept: ``bool [n_states]``.
        preorder_trie: set by :func:`~corral.grammar.regex.dawg.trie_of` only: the
            automaton is a trie whose states are numbered in preorder, each state's
            children in increasing byte order. Its targets then follow from ``row_start``
            (a state's first child is the next state, each later child comes after the
            subtree of the one before), so a fingerprint need not hash them.

    Start state is ``0``; every state can reach an accepting state.
    """

    row_start: np.ndarray
    labels: np.ndarray
    targets: np.ndarray
    accept: np.ndarray
    preorder_trie: bool = False

    def __post_init__(self) -> None:
        if self.row_start.shape != (self.accept.shape[0] + 1,):
            raise ValueError("row_start must have one entry a state, plus one")
        if self.labels.shape != self.targets.shape or self.labels.dtype != np.uint8:
            raise ValueError("labels (uint8) and targets must have one entry a transition")

    @classmethod
    def from_edges(
        cls, n_states: int, src: np.ndarray, byte: np.ndarray, dst: np.ndarray, accept: np.ndarray
    ) -> SparseDFA:
        """The DFA of transitions ``src --byte--> dst`` (at most one per (src, byte))."""
        src = np.asarray(src, np.int64)
        byte = np.asarray(byte, np.int64)
        order = np.lexsort((byte, src))
        row_start = np.zeros(n_states + 1, np.int64)
        np.cumsum(np.bincount(src, minlength=n_states), out=row_start[1:])
        return cls(
            row_start,
            byte[order].astype(np.uint8),
            np.asarray(dst, np.int32)[order],
            np.asarray(accept, bool),
        )

    @classmethod
    def literal(cls, data: bytes) -> SparseDFA:
        """The automaton of the one string ``data``: a chain of ``len(data) + 1`` states."""
        n = len(data)
        accept = np.zeros(n + 1, bool)
        accept[n] = True
        return cls(
            np.concatenate([np.arange(n + 1, dtype=np.int64), [n]]),
            np.frombuffer(data, np.uint8).copy(),
            np.arange(1, n + 1, dtype=np.int32),
            accept,
        )

    @classmethod
    def empty(cls) -> SparseDFA:
        """The automaton of the empty language (no states)."""
        return cls(
            np.zeros(1, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.int32), np.zeros(0, bool)
        )

    @property
    def n_states(self) -> int:
        return int(self.accept.shape[0])

    @property
    def n_transitions(self) -> int:
        return int(self.labels.shape[0])

    def is_empty(self) -> bool:
        return self.n_states == 0

    def accepts_empty(self) -> bool:
        return self.n_states > 0 and bool(self.accept[0])

    def sources(self) -> np.ndarray:
        """``int64 [n_transitions]``: the state each transition leaves."""
        return np.repeat(np.arange(self.n_states, dtype=np.int64), np.diff(self.row_start))

    def row(self, s: int) -> np.ndarray:
        """The 256 next states of state ``s`` (``int32``, ``-1`` for dead bytes)."""
        out = np.full(256, -1, np.int32)
        a, b = int(self.row_start[s]), int(self.row_start[s + 1])
        out[self.labels[a:b]] = self.targets[a:b]
        return out

    def step(self, s: int, b: int) -> int:
        """The state after byte ``b`` from ``s``, or ``-1``."""
        a, e = int(self.row_start[s]), int(self.row_start[s + 1])
        i = a + int(np.searchsorted(self.labels[a:e], b))
        return int(self.targets[i]) if i < e and int(self.labels[i]) == b else -1

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` is in the language (reference implementation, for tests)."""
        if self.n_states == 0:
            return False
        s = 0
        for b in data:
            s = self.step(s, b)
            if s < 0:
                return False
        return bool(self.accept[s])
