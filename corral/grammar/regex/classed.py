"""DFAs over bytes stored by byte class, for automata too large for 256 columns a state.

A :class:`~corral.grammar.regex.dfa.ByteDFA` keeps one ``int32`` per (state, byte): 1 KB a
state. The automaton of every substring of a 100,000-character document (``spans.py``) has
about 170,000 states: 175 MB that way. A :class:`ClassedDFA` keeps one column per *byte
class* instead (for that English text, 93), and the lexer tables
(``corral/automata/tables.py``) lay it out in the same column form without ever
expanding it.

It supports what the grammar IR and the tables need (membership, first bytes, a
fingerprint); DFA algebra (intersection, minimisation) is only for :class:`ByteDFA`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ClassedDFA"]


@dataclass(frozen=True)
class ClassedDFA:
    """A trimmed DFA over bytes whose transitions are stored per byte class.

    Attributes:
        table: ``int32 [n_states, n_classes]``; ``table[s, byte_class[b]]`` is the state
            after byte ``b`` from ``s``, or ``-1`` (dead). Every state can reach an
            accepting state. Start state is ``0``.
        byte_class: ``int32 [256]``: the class of each byte.
        accept: ``bool [n_states]``.
    """

    table: np.ndarray
    byte_class: np.ndarray
    accept: np.ndarray

    def __post_init__(self) -> None:
        if self.byte_class.shape != (256,):
            raise ValueError("byte_class must have 256 entries")
        if self.table.ndim != 2 or self.table.shape[0] != self.accept.shape[0]:
            raise ValueError("table must be [n_states, n_classes] with one accept flag a state")
        if self.table.shape[0] and int(self.byte_class.max()) >= self.table.shape[1]:
            raise ValueError("a byte class has no column in the table")

    @property
    def n_states(self) -> int:
        return int(self.table.shape[0])

    def is_empty(self) -> bool:
        return self.n_states == 0

    def accepts_empty(self) -> bool:
        return self.n_states > 0 and bool(self.accept[0])

    def row(self, s: int) -> np.ndarray:
        """The 256 next states of state ``s`` (``int32``, ``-1`` for dead bytes)."""
        return self.table[s, self.byte_class]

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` is in the language (reference implementation, for tests)."""
        if self.n_states == 0:
            return False
        s = 0
        for b in data:
            s = int(self.table[s, self.byte_class[b]])
            if s < 0:
                return False
        return bool(self.accept[s])

    def content_bytes(self) -> bytes:
        """The bytes that identify the automaton (for grammar fingerprints)."""
        return b"classed" + self.byte_class.tobytes() + self.table.tobytes()
