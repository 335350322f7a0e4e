"""The parser's item arrays of a grammar's productions, by one Numba kernel.

:func:`~corral.automata.tables.build_tables` numbers a grammar's symbols and productions
(:func:`~corral.grammar.follow.numbered`: terminals ``0 .. NT - 1``, nonterminal ``a`` as
``NT + a``, the added ``S' -> start`` first) and lays out, from them, the Earley items
(each production's symbols followed by ``-1``, one entry per dotted position), the
productions each nonterminal predicts, and the nullable nonterminals. :func:`items_of`
computes all of them from the productions given as three flat arrays, the nullable
nonterminals by the same worklist as :func:`~corral.grammar.follow.nullable_nonterminals`.
"""

from __future__ import annotations

import numpy as np

from ..grammar.regex.reach import by_target
from ..jit import kernel

__all__ = ["items_of"]


@kernel(nogil=True)
def items_of(
    lhs: np.ndarray, lens: np.ndarray, rhs: np.ndarray, n_terms: int, n_nonterms: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(item_sym, item_lhs, first_item, pred_start, pred_items, nullable)``.

    The ``P`` productions: production ``p`` has lhs nonterminal ``lhs[p]`` (``int32``) and
    the ``lens[p]`` symbols (``int64``) that follow the previous productions' in ``rhs``
    (``int32``). ``n_terms``, ``n_nonterms``: ``NT`` and ``NN``.

    - ``item_sym``, ``item_lhs`` (``int32 [len(rhs) + P]``): each production's symbols
      then ``-1``, and the lhs of the production each entry belongs to;
    - ``first_item`` (``int32 [P]``): where each production's entries begin;
    - ``pred_start`` (``int64 [NN + 1]``), ``pred_items`` (``int64 [P]``): nonterminal
      ``a``'s productions' first items, in production order, are
      ``pred_items[pred_start[a]:pred_start[a + 1]]``;
    - ``nullable`` (``int32 [NN]``): 1 for the nonterminals that derive the empty string.
    """
    P = lhs.shape[0]
    NN = n_nonterms
    item_sym = np.empty(rhs.shape[0] + P, np.int32)
    item_lhs = np.empty(rhs.shape[0] + P, np.int32)
    first_item = np.empty(P, np.int32)
    rhs_start = np.empty(P + 1, np.int64)
    i = 0
    k = 0
    for p in range(P):
        first_item[p] = i
        rhs_start[p] = k
        for _ in range(lens[p]):
            item_sym[i] = rhs[k]
            item_lhs[i] = lhs[p]
            i += 1
            k += 1
        item_sym[i] = -1
        item_lhs[i] = lhs[p]
        i += 1
    rhs_start[P] = k
    # predictions: each production's first item, grouped by lhs (in production order)
    pred_start, pred_items = by_target(NN, first_item, lhs, P)
    # nullable: each production keeps the count of its symbols not yet known nullable
    # (-1: it reads a terminal, never nullable); a nonterminal found nullable lowers the
    # counts of the productions that use it (the edges a -> p, grouped by a)
    missing = np.empty(P, np.int64)
    e_prod = np.empty(rhs.shape[0], np.int64)
    e_sym = np.empty(rhs.shape[0], np.int64)
    ne = 0
    for p in range(P):
        missing[p] = lens[p]
        for j in range(rhs_start[p], rhs_start[p + 1]):
            if rhs[j] < n_terms:
                missing[p] = -1
                break
        if missing[p] > 0:
            for j in range(rhs_start[p], rhs_start[p + 1]):
                e_prod[ne] = p
                e_sym[ne] = rhs[j] - n_terms
                ne += 1
    n_users, users = by_target(NN, e_prod, e_sym, ne)
    nullable = np.zeros(NN, np.int32)
    work = np.empty(NN, np.int64)
    top = 0
    for p in range(P):
        if missing[p] == 0 and not nullable[lhs[p]]:
            nullable[lhs[p]] = 1
            work[top] = lhs[p]
            top += 1
    while top:
        top -= 1
        a = work[top]
        for u in range(n_users[a], n_users[a + 1]):
            p = users[u]
            missing[p] -= 1
            if missing[p] == 0 and not nullable[lhs[p]]:
                nullable[lhs[p]] = 1
                work[top] = lhs[p]
                top += 1
    return item_sym, item_lhs, first_item, pred_start, pred_items, nullable
