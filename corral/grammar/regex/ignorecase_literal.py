"""Case-insensitive strings (Lark's ``"select"i``) as byte DFAs, built as a chain.

The language of such a string is a sequence of character sets, one per character: the
characters ``re`` matches against it under ``re.IGNORECASE``
(:func:`.python_syntax.ignorecase_char_set`: ``s`` matches ``S``, ``s`` and ``ſ``, ``k``
the Kelvin sign too). Its automaton is a chain of states, one per character read, with the
UTF-8 encodings of each set's characters between them; minimisation merges what the
encodings share. That is the automaton :func:`.leftmost.leftmost_first_dfa` builds for
``re.escape(text)`` under ``re.IGNORECASE`` (a string has one match, so the leftmost-first
reading changes nothing), without parsing the pattern, its NFA or the subset construction:
36 µs for a keyword such as ``SELECT`` where the general construction takes 167, in a warm
process. SynCode's SQL grammar spells 118 such keywords; its first compile in a process
went from 45-51 to 38-41 ms of CPU. ``tests/test_ignorecase_literal.py`` checks that both
constructions give equal automata.
"""

from __future__ import annotations

import re

import numpy as np

from ...caching import BoundedCache
from ...errors import CompileBudgetError
from .charset import CharSet
from .dfa import DEFAULT_MAX_DFA_STATES, UTF8_ROW_STEPS, ByteDFA, metered, minimal_dfa, spend
from .leftmost import leftmost_first_dfa
from .python_syntax import ignorecase_char_set

__all__ = ["ignorecase_literal_dfa"]

MAX_SET = 16
"""A string with a character that matches more than this many characters (none does in
Python 3.11's tables: at most four, ``σ``'s) is built by the general construction."""

_CACHE: BoundedCache[tuple[str, int], tuple[ByteDFA, int]] = BoundedCache(1024)


def ignorecase_literal_dfa(
    text: str, *, where: str = "", max_states: int = DEFAULT_MAX_DFA_STATES
) -> ByteDFA:
    """The minimal byte DFA (compact form, read-only) of the strings ``text`` matches
    under ``re.IGNORECASE``: ``leftmost_first_dfa(re.escape(text), re.IGNORECASE)``'s.

    Built once per process for each ``(text, max_states)`` (the last 1,024 kept); each
    asking charges the active work budgets the steps of the first build, as
    :func:`.leftmost.leftmost_first_dfa` does.

    A string with a character that matches nothing (a surrogate: no UTF-8 encodes it) or
    more than :data:`MAX_SET` characters is built by that general construction.

    Raises:
        CompileBudgetError: more than ``max_states`` character states; the active work
            budget's :class:`~corral.errors.WorkBudgetError` when it runs out first.
    """
    key = (text, max_states)
    hit = _CACHE.get(key)
    label = where or f"string {text!r}i"
    if hit is None:
        sets = [ignorecase_char_set(ord(ch)) for ch in text]
        if not all(sets) or any(s.size() > MAX_SET for s in sets):
            pattern = re.escape(text)
            return leftmost_first_dfa(pattern, re.IGNORECASE, where=where, max_states=max_states)[0]
        dfa, cost = metered(lambda: _build(sets, max_states, label), label)
        dfa.accept.setflags(write=False)
        hit = (dfa, cost)
        _CACHE.put(key, hit)
    else:
        spend(hit[1], label)
    return hit[0]


def _build(sets: list[CharSet], max_states: int, where: str) -> ByteDFA:
    n = len(sets)
    if n + 1 > max_states:
        raise CompileBudgetError(
            f"{where}: the automaton needs more than {max_states} states; simplify the pattern"
        )
    # state i: i characters read; a character of several bytes passes through
    # intermediate states, one per distinct prefix of its encoding at that position
    rows: list[dict[int, int]] = [{} for _ in range(n + 1)]
    for i, chars in enumerate(sets):
        inner: dict[bytes, int] = {}
        for lo, hi in chars.ranges:
            for cp in range(lo, hi + 1):
                data = chr(cp).encode("utf-8")
                q = i
                for k in range(1, len(data)):
                    nxt = inner.get(data[:k])
                    if nxt is None:
                        nxt = inner[data[:k]] = len(rows)
                        rows.append({})
                    rows[q][data[k - 1]] = nxt
                    q = nxt
                rows[q][data[-1]] = i + 1
    spend(len(rows) * UTF8_ROW_STEPS, where)
    trans = np.full((len(rows), 256), -1, np.int32)
    for q, out in enumerate(rows):
        if out:
            trans[q, list(out)] = list(out.values())
    accept = np.zeros(len(rows), bool)
    accept[n] = True
    return minimal_dfa(trans, accept)
