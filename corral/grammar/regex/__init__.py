"""Regular expressions → byte-level DFAs.

``python_syntax`` reads Python ``re`` syntax into the shared tree of ``ast``; ``nfa`` and
``dfa`` turn a tree into a minimal DFA over UTF-8 bytes (:class:`ByteDFA`).
"""

from __future__ import annotations

import functools

import numpy as np

from .dfa import DEFAULT_MAX_DFA_STATES, ByteDFA, column_classes, nfa_to_byte_dfa
from .nfa import build_nfa
from .python_syntax import parse_python_regex
from .sparse import LONG_LITERAL_BYTES, SparseDFA

__all__ = ["ByteDFA", "literal_automaton", "literal_dfa", "python_regex_dfa"]


def python_regex_dfa(
    pattern: str,
    flags: int = 0,
    *,
    where: str = "",
    max_states: int = DEFAULT_MAX_DFA_STATES,
) -> ByteDFA:
    """The byte DFA of the language of ``re.fullmatch(pattern, s, flags)`` (a Python-syntax
    regex; for the lexemes of a Lark terminal, see :mod:`.leftmost`)."""
    node = parse_python_regex(pattern, flags, where=where)
    return nfa_to_byte_dfa(
        build_nfa(node), where=where or f"regex {pattern!r}", max_states=max_states
    )


SHARED_LITERAL_BYTES = 64
"""Literals of at most this many bytes of UTF-8 are built once a process (a least
recently used cache of :data:`SHARED_LITERALS`): keys, punctuation and enum values recur
across schemas."""
SHARED_LITERALS = 8192


def literal_dfa(text: str) -> ByteDFA:
    """The byte DFA accepting exactly the UTF-8 encoding of ``text``, in the compact form:
    a dead column (byte 0's) and a column for each distinct byte of the text, in byte
    order, which is the canonical order (:meth:`ByteDFA.columns`). Read-only, and shared
    for short texts."""
    if len(text.encode("utf-8")) <= SHARED_LITERAL_BYTES:
        return _shared_literal_dfa(text)
    return _literal_dfa(text)


@functools.lru_cache(maxsize=SHARED_LITERALS)
def _shared_literal_dfa(text: str) -> ByteDFA:
    return _literal_dfa(text)


def _literal_dfa(text: str) -> ByteDFA:
    from .literal import literal_columns

    data = text.encode("utf-8")
    table, classes, accept = literal_columns(np.frombuffer(data, np.uint8))
    if 0 in data:  # byte 0 has a live column: not the canonical order
        table, col_class = column_classes(table[:, classes])
        classes = col_class.astype(np.uint8)
    dfa = ByteDFA.from_columns(table, classes, accept)
    stored, classes = dfa.stored_columns()
    for a in (stored, classes, dfa.accept):
        a.setflags(write=False)
    return dfa


def literal_automaton(text: str) -> ByteDFA | SparseDFA:
    """The automaton of the one string ``text``: :func:`literal_dfa` up to
    :data:`~.sparse.LONG_LITERAL_BYTES` bytes of UTF-8, a chain of sparse rows
    (:meth:`SparseDFA.literal`) beyond."""
    data = text.encode("utf-8")
    return literal_dfa(text) if len(data) <= LONG_LITERAL_BYTES else SparseDFA.literal(data)
