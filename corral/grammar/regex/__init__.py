"""Regular expressions → byte-level DFAs.

``python_syntax`` reads Python ``re`` syntax into the shared tree of ``ast``; ``nfa`` and
``dfa`` turn a tree into a minimal DFA over UTF-8 bytes (:class:`ByteDFA`).
"""

from __future__ import annotations

import numpy as np

from .ast import has_lazy
from .dfa import DEFAULT_MAX_DFA_STATES, ByteDFA, nfa_to_byte_dfa
from .nfa import build_nfa
from .python_syntax import parse_python_regex

__all__ = ["ByteDFA", "literal_dfa", "python_regex_dfa"]


def python_regex_dfa(
    pattern: str,
    flags: int = 0,
    *,
    mode: str = "text",
    where: str = "",
    max_states: int = DEFAULT_MAX_DFA_STATES,
) -> ByteDFA:
    """The byte DFA of a Python-syntax regex.

    ``mode="text"``: the language of ``re.fullmatch(pattern, s, flags)``.
    ``mode="terminal"``: the same, read as one lexeme of a Lark grammar: if the pattern has a
    lazy quantifier, only its shortest matches are kept (the lexeme ends at its first match,
    which is what Lark's matching does), and assertions may not look outside the lexeme.
    """
    node = parse_python_regex(pattern, flags, where=where)
    nfa = build_nfa(node)
    shortest = mode == "terminal" and has_lazy(node)
    return nfa_to_byte_dfa(
        nfa,
        mode=mode,
        shortest=shortest,
        where=where or f"regex {pattern!r}",
        max_states=max_states,
    )


def literal_dfa(text: str) -> ByteDFA:
    """The byte DFA accepting exactly the UTF-8 encoding of ``text``."""
    data = text.encode("utf-8")
    n = len(data) + 1
    trans = np.full((n, 256), -1, np.int32)
    for i, b in enumerate(data):
        trans[i, b] = i + 1
    accept = np.zeros(n, bool)
    accept[-1] = True
    return ByteDFA(trans, accept)
