"""Restricting a sparse automaton to the quoted strings that a dense automaton and a
length bound also accept.

Span automata (every substring of a source) and entity-set automata (a million names) are
:class:`~corral.grammar.regex.sparse.SparseDFA`: too large for the dense products of
``dfa.py``. The keywords a schema puts beside them (``minLength``, ``maxLength``,
``pattern``, ``format``) are regular, so the grammar can enforce them exactly: the language
is the product of the sparse automaton, a dense :class:`~corral.grammar.regex.dfa.ByteDFA`
(the pattern and format, quoted) and a counter of the characters between the quotes.

The counter reads a quoted string as ``quote unit* quote``, each unit one character as a
prefix-free *unit automaton* spells it (for JSON: a UTF-8 character or an escape, see
``json_schema/strings.py``), and keeps the number of units read, up to the upper bound (or
saturating at the lower bound when there is none), so it has ``(top + 1) * units + 2``
states and is never built as a table.

Only the reachable triples are built (a depth-first walk in a Numba kernel), then the
states that cannot reach acceptance are dropped. The work is linear in the states built,
which a budget bounds; the result is refused (``None``) rather than truncated.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types

from ...jit import kernel
from .dfa import ByteDFA
from .reach import co_reachable
from .sparse import SparseDFA

__all__ = ["restrict_quoted"]

_PAIR = types.UniTuple(types.int64, 2)


def restrict_quoted(
    base: SparseDFA,
    *,
    dense: ByteDFA | None,
    unit: ByteDFA,
    lo: int,
    hi: int | None,
    max_states: int,
    quote: int = 0x22,
) -> SparseDFA | None:
    """The strings of ``base`` that ``dense`` accepts too (``None``: no such condition)
    and whose body, between the ``quote`` bytes, is ``lo`` to ``hi`` units of ``unit``
    (``hi=None``: no upper bound).

    ``base`` and ``dense`` must read strings framed by ``quote`` (a body never holds an
    unescaped ``quote``); ``unit`` is prefix-free with start state 0, which no ``quote``
    leaves. Returns ``None`` when the product needs more than ``max_states`` states (a
    budget on work: nothing is truncated), and the empty automaton when no string is left.
    """
    if base.is_empty() or (dense is not None and dense.is_empty()):
        return SparseDFA.empty()
    if hi is not None and lo > hi:
        return SparseDFA.empty()
    if dense is None:
        dtrans = np.zeros((1, 256), np.int32)
        daccept = np.ones(1, np.bool_)
    else:
        dtrans = np.ascontiguousarray(dense.trans, np.int32)
        daccept = np.ascontiguousarray(dense.accept, np.bool_)
    bounded = hi is not None
    top = int(hi) if hi is not None else int(lo)
    out = _product(
        np.ascontiguousarray(base.row_start, np.int64),
        np.ascontiguousarray(base.labels, np.uint8),
        np.ascontiguousarray(base.targets, np.int32),
        np.ascontiguousarray(base.accept, np.bool_),
        dtrans,
        daccept,
        np.ascontiguousarray(unit.trans, np.int32),
        np.ascontiguousarray(unit.accept, np.bool_),
        np.int64(quote),
        np.int64(lo),
        np.int64(top),
        bounded,
        np.int64(max_states),
    )
    n, src, lab, dst, accept = out
    if n < 0:
        return None
    if n == 0:
        return SparseDFA.empty()
    return SparseDFA.from_edges(n, src, lab, dst, accept)


@kernel(nogil=True, inline="always")
def _count(
    c: int,
    b: int,
    unit: np.ndarray,
    unit_done: np.ndarray,
    quote: int,
    lo: int,
    top: int,
    bounded: bool,
) -> int:
    """The counter after byte ``b`` from counter state ``c`` (-1: dead). States: 0 before
    the opening quote, 1 after the closing one, ``2 + k * nu + u`` inside the body with
    ``k`` units read and unit state ``u``."""
    if c == 0:
        return 2 if b == quote else -1
    if c == 1:
        return -1
    nu = unit.shape[0]
    x = c - 2
    k = x // nu
    u = x % nu
    if u == 0 and b == quote:
        return 1 if k >= lo else -1
    v = unit[u, b]
    if v < 0:
        return -1
    if unit_done[v]:
        k += 1
        if k > top:
            if bounded:
                return -1
            k = top
        v = 0
    return 2 + k * nu + v


@kernel(nogil=True)
def _grow(a: np.ndarray, n: int) -> np.ndarray:
    if n < a.shape[0]:
        return a
    out = np.empty(a.shape[0] * 2, a.dtype)
    out[: a.shape[0]] = a
    return out


@kernel(nogil=True)
def _product(
    row_start: np.ndarray,
    labels: np.ndarray,
    targets: np.ndarray,
    base_accept: np.ndarray,
    dtrans: np.ndarray,
    daccept: np.ndarray,
    unit: np.ndarray,
    unit_done: np.ndarray,
    quote: int,
    lo: int,
    top: int,
    bounded: bool,
    max_states: int,
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The trimmed product (see :func:`restrict_quoted`): ``(n_states, src, byte, dst,
    accept)``, states numbered in discovery order with the start first; ``n_states`` is
    ``-1`` past ``max_states`` and ``0`` for the empty language."""
    nc = 2 + (top + 1) * unit.shape[0]
    index = nb.typed.Dict.empty(key_type=_PAIR, value_type=types.int64)
    cap = 1024
    ps = np.empty(cap, np.int64)  # base state of each product state
    pa = np.empty(cap, np.int64)  # dense state * nc + counter state
    acc = np.zeros(cap, np.bool_)
    esrc = np.empty(cap, np.int64)
    elab = np.empty(cap, np.int64)
    edst = np.empty(cap, np.int64)
    ne = 0
    ps[0] = 0
    pa[0] = 0
    index[(np.int64(0), np.int64(0))] = 0
    n = 1
    stack = np.empty(cap, np.int64)
    stack[0] = 0
    top_of_stack = 1
    while top_of_stack > 0:
        top_of_stack -= 1
        i = stack[top_of_stack]
        s = ps[i]
        d = pa[i] // nc
        c = pa[i] % nc
        acc[i] = base_accept[s] and daccept[d] and c == 1
        for e in range(row_start[s], row_start[s + 1]):
            b = np.int64(labels[e])
            d2 = dtrans[d, b]
            if d2 < 0:
                continue
            c2 = _count(c, b, unit, unit_done, quote, lo, top, bounded)
            if c2 < 0:
                continue
            key = (np.int64(targets[e]), np.int64(d2) * nc + c2)
            j = index.get(key, -1)
            if j < 0:
                if n >= max_states:
                    empty = np.zeros(0, np.int64)
                    return -1, empty, empty, empty, np.zeros(0, np.bool_)
                j = n
                ps = _grow(ps, n)
                pa = _grow(pa, n)
                if n >= acc.shape[0]:
                    grown = np.zeros(acc.shape[0] * 2, np.bool_)
                    grown[: acc.shape[0]] = acc
                    acc = grown
                ps[n] = key[0]
                pa[n] = key[1]
                index[key] = n
                n += 1
                stack = _grow(stack, top_of_stack)
                stack[top_of_stack] = j
                top_of_stack += 1
            esrc = _grow(esrc, ne)
            elab = _grow(elab, ne)
            edst = _grow(edst, ne)
            esrc[ne] = i
            elab[ne] = b
            edst[ne] = j
            ne += 1
    # trim: the states that reach acceptance
    live = co_reachable(n, esrc, edst, ne, acc)
    if not live[0]:
        empty = np.zeros(0, np.int64)
        return 0, empty, empty, empty, np.zeros(0, np.bool_)
    new = np.full(n, -1, np.int64)
    m = 0
    for k in range(n):
        if live[k]:
            new[k] = m
            m += 1
    keep = 0
    for k in range(ne):
        if live[esrc[k]] and live[edst[k]]:
            keep += 1
    osrc = np.empty(keep, np.int64)
    olab = np.empty(keep, np.int64)
    odst = np.empty(keep, np.int64)
    w = 0
    for k in range(ne):
        if live[esrc[k]] and live[edst[k]]:
            osrc[w] = new[esrc[k]]
            olab[w] = elab[k]
            odst[w] = new[edst[k]]
            w += 1
    oacc = np.zeros(m, np.bool_)
    for k in range(n):
        if live[k]:
            oacc[new[k]] = acc[k]
    return m, osrc, olab, odst, oacc
