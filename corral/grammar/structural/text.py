"""The automata of free text: text up to the first occurrence of a set of strings.

Free text in a structural tag (``any_text``, the text around triggered tags) is valid UTF-8
that contains none of a set of *patterns* (triggers, excluded strings and the strings that
can follow it), and ends at the first pattern that ends it. corral's lexer reads a
terminal greedily (a lexeme ends where its automaton cannot read on), so the free text and
the string that ends it are one terminal: ``x p``, where ``p`` is a trigger or a string
that can follow and no pattern occurs in ``x p`` before its end. Read byte by byte, the
automaton is an Aho-Corasick automaton of the patterns, run beside a UTF-8 decoder: every
byte is decided when it is read, so no token can cross into a trigger (``Call <tool`` then
``_call>``) without the walk knowing.

Patterns are checked first (:func:`check_patterns`): none may contain another, so that
the first pattern to complete is the only one that does.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from ..regex import ByteDFA
from ..regex.dfa import minimal_dfa, trim

__all__ = ["free_text_dfa", "overlap"]


@functools.lru_cache(maxsize=1)
def _utf8() -> ByteDFA:
    from ..regex import python_regex_dfa

    return python_regex_dfa(r"[\s\S]*")


def overlap(a: bytes, b: bytes) -> bool:
    """Whether one of two different patterns contains the other (then one of them can
    never be the first to occur, or both occur at once)."""
    return a != b and (a in b or b in a)


def _aho_corasick(patterns: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``(goto int32 [n, 256], hit int32 [n])``: the complete automaton; ``hit[s]`` is the
    index of the pattern that ends on reaching ``s``, or ``-1`` (no pattern contains
    another, so at most one does)."""
    children: list[dict[int, int]] = [{}]
    hit = [-1]
    for i, p in enumerate(patterns):
        s = 0
        for byte in p:
            t = children[s].get(byte)
            if t is None:
                t = len(children)
                children.append({})
                hit.append(-1)
                children[s][byte] = t
            s = t
        hit[s] = i
    n = len(children)
    goto = np.zeros((n, 256), np.int32)
    fail = [0] * n
    order = [0]
    for s in order:  # breadth first: a state's failure state is done before it
        if s:
            goto[s] = goto[fail[s]]
            if hit[s] < 0:
                hit[s] = hit[fail[s]]
        for byte, t in children[s].items():
            fail[t] = int(goto[s, byte]) if s else 0
            goto[s, byte] = t
            order.append(t)
    return goto, np.asarray(hit, np.int32)


def free_text_dfa(patterns: Sequence[bytes], stop: int | None) -> ByteDFA:
    """The automaton of free text that no pattern occurs in.

    ``patterns``: non-empty UTF-8 strings, none containing another (see :func:`overlap`).
    ``stop``: ``None`` for the text alone (valid UTF-8 with no pattern in it), or the
    index of the pattern that ends it: then the language is ``{x p}``, ``p =
    patterns[stop]``, with no pattern occurring before the end. Start state 0, trimmed
    and minimal.
    """
    goto, hit = _aho_corasick(patterns)
    u = _utf8()
    na, nu = goto.shape[0], u.n_states
    final = na * nu  # the state after the stop pattern: accepting, reads nothing
    a_next = np.repeat(goto, nu, axis=0)  # row a*nu + v
    u_next = np.tile(u.trans, (na, 1))
    hit_next = hit[a_next]
    trans = np.where(u_next < 0, -1, a_next * nu + u_next)
    if stop is None:
        trans = np.where(hit_next >= 0, -1, trans)
    else:
        trans = np.where(hit_next == stop, final, np.where(hit_next >= 0, -1, trans))
    trans = np.vstack([trans, np.full((1, 256), -1)]).astype(np.int32)
    accept = np.zeros(final + 1, bool)
    if stop is None:
        accept[:final] = np.tile(u.accept, na)
    else:
        accept[final] = True
    trans, accept = trim(trans, accept)
    if trans.shape[0] == 0:
        return ByteDFA.empty()
    return minimal_dfa(trans, accept)
