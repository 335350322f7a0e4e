"""Regular expressions → byte-level DFAs.

``python_syntax`` reads Python ``re`` syntax into the shared tree of ``ast``; ``nfa`` and
``dfa`` turn a tree into a minimal DFA over UTF-8 bytes (:class:`ByteDFA`).
"""

from __future__ import annotations

import numpy as np

from .dfa import DEFAULT_MAX_DFA_STATES, ByteDFA, nfa_to_byte_dfa
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


def literal_dfa(text: str) -> ByteDFA:
    """The byte DFA accepting exactly the UTF-8 encoding of ``text`` (in the compact form:
    a column for each distinct byte of the text, one dead column for the others)."""
    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    n = data.shape[0] + 1
    used, column = np.unique(data, return_inverse=True)
    classes = np.zeros(256, np.uint8)
    classes[used] = np.arange(1, used.shape[0] + 1)
    table = np.full((n, used.shape[0] + 1), -1, np.int32)
    table[np.arange(n - 1), column.reshape(-1) + 1] = np.arange(1, n, dtype=np.int32)
    accept = np.zeros(n, bool)
    accept[-1] = True
    return ByteDFA.from_columns(table, classes, accept)


def literal_automaton(text: str) -> ByteDFA | SparseDFA:
    """The automaton of the one string ``text``: :func:`literal_dfa` up to
    :data:`~.sparse.LONG_LITERAL_BYTES` bytes of UTF-8, a chain of sparse rows
    (:meth:`SparseDFA.literal`) beyond."""
    data = text.encode("utf-8")
    return literal_dfa(text) if len(data) <= LONG_LITERAL_BYTES else SparseDFA.literal(data)
