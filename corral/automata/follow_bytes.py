"""The bytes that may start the next lexeme after each terminal, as one Numba kernel.

The flat tables (``tables.py``, section ``H_FOLLOW_BYTES``) hold, for each terminal, the
first bytes of the terminals that may follow it (its FOLLOW set in the grammar, see
:mod:`corral.grammar.follow`), as a 256-bit set. A terminal's FOLLOW set matters there only
through those first bytes, and the first-byte map distributes over unions, so the
fixpoints are computed on 256-bit sets (four ``uint64`` words) directly instead of sets of
terminals: the same result as mapping :func:`~corral.grammar.follow.follow_terminals`
afterwards, with unions of four words however many terminals the grammar has.

Both fixpoints are closures ``v[i] = init[i] | v[j] for j in sources[i]``, solved per
strongly connected component of the ``j -> i`` graph in one pass (Tarjan's algorithm,
iterative), as :func:`~corral.grammar.follow.union_closure` does with Python ints.
"""

from __future__ import annotations

import numpy as np

from ..grammar.regex.reach import by_target
from ..jit import kernel

__all__ = ["follow_bytes"]

WORDS = 4  # uint64 words of a 256-bit set


@kernel(nogil=True)
def _closure(value: np.ndarray, start: np.ndarray, src: np.ndarray) -> None:
    """In place: the least ``value`` (``uint64 [n, 4]``, holding ``init``) with
    ``value[i] |= value[j]`` for each ``j`` in ``src[start[i]:start[i + 1]]``."""
    n = value.shape[0]
    index = np.full(n, -1, np.int64)
    low = np.zeros(n, np.int64)
    on_stack = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int64)
    frame_v = np.empty(n, np.int64)
    frame_e = np.empty(n, np.int64)
    acc = np.zeros(WORDS, np.uint64)
    sp = 0
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        index[root] = counter
        low[root] = counter
        counter += 1
        stack[sp] = root
        sp += 1
        on_stack[root] = True
        frame_v[0] = root
        frame_e[0] = start[root]
        fp = 1
        while fp:
            v = frame_v[fp - 1]
            e = frame_e[fp - 1]
            if e < start[v + 1]:
                frame_e[fp - 1] = e + 1
                w = src[e]
                if index[w] < 0:
                    index[w] = counter
                    low[w] = counter
                    counter += 1
                    stack[sp] = w
                    sp += 1
                    on_stack[w] = True
                    frame_v[fp] = w
                    frame_e[fp] = start[w]
                    fp += 1
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            fp -= 1
            if fp:
                u = frame_v[fp - 1]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] != index[v]:
                continue
            # v roots a component: its members are the stack above v, and their sources
            # outside it belong to components already final
            k = sp - 1
            while stack[k] != v:
                k -= 1
            for j in range(WORDS):
                acc[j] = 0
            for p in range(k, sp):
                m = stack[p]
                for j in range(WORDS):
                    acc[j] |= value[m, j]
                for f in range(start[m], start[m + 1]):
                    x = src[f]
                    if not on_stack[x]:
                        for j in range(WORDS):
                            acc[j] |= value[x, j]
            for p in range(k, sp):
                m = stack[p]
                on_stack[m] = False
                for j in range(WORDS):
                    value[m, j] = acc[j]
            sp = k


@kernel(nogil=True)
def _follow_bytes(
    item_sym: np.ndarray,
    item_lhs: np.ndarray,
    n_terms: int,
    nullable: np.ndarray,
    term_first: np.ndarray,
    ignore: np.ndarray,
    special: np.ndarray,
) -> np.ndarray:
    """See :func:`follow_bytes`."""
    NT = n_terms
    NN = nullable.shape[0]
    NI = item_sym.shape[0]
    # first bytes a terminal contributes to FOLLOW sets: none for special tokens' terminals
    counted = term_first.copy()
    for t in range(NT):
        if special[t]:
            for j in range(WORDS):
                counted[t, j] = 0
    # FIRST of each nonterminal: the first bytes of the terminals its rules begin with,
    # plus the FIRST of each nonterminal of a rule's nullable prefix (an edge)
    first = np.zeros((NN, WORDS), np.uint64)
    e_dst = np.empty(NI, np.int64)
    e_src = np.empty(NI, np.int64)
    ne = 0
    i = 0
    while i < NI:
        lhs = item_lhs[i]
        k = i
        while item_sym[k] >= 0:
            x = item_sym[k]
            if x < NT:
                for j in range(WORDS):
                    first[lhs, j] |= counted[x, j]
                break
            e_dst[ne] = lhs
            e_src[ne] = x - NT
            ne += 1
            if not nullable[x - NT]:
                break
            k += 1
        while item_sym[i] >= 0:
            i += 1
        i += 1  # past the production's end marker
    start, src = by_target(NN, e_src, e_dst, ne)
    _closure(first, start, src)
    # FOLLOW of each symbol (terminal t, nonterminal NT + a): what comes next in each rule,
    # plus the FOLLOW of the rule's lhs where the rest of the rule is nullable (an edge)
    follow = np.zeros((NT + NN, WORDS), np.uint64)
    f_dst = np.empty(NI, np.int64)
    f_src = np.empty(NI, np.int64)
    nf = 0
    rest = np.zeros(WORDS, np.uint64)
    i = 0
    while i < NI:
        end = i
        while item_sym[end] >= 0:
            end += 1
        lhs = item_lhs[i]
        for j in range(WORDS):
            rest[j] = 0
        rest_nullable = True
        for k in range(end - 1, i - 1, -1):
            x = item_sym[k]
            for j in range(WORDS):
                follow[x, j] |= rest[j]
            if rest_nullable:
                f_dst[nf] = x
                f_src[nf] = NT + lhs
                nf += 1
            if x < NT:
                for j in range(WORDS):
                    rest[j] = counted[x, j]
                rest_nullable = False
            else:
                a = x - NT
                if nullable[a]:
                    for j in range(WORDS):
                        rest[j] |= first[a, j]
                else:
                    for j in range(WORDS):
                        rest[j] = first[a, j]
                    rest_nullable = False
        i = end + 1
    start, src = by_target(NT + NN, f_src, f_dst, nf)
    _closure(follow, start, src)
    # ignored terminals may follow anything, and anything may follow them
    ign = np.zeros(WORDS, np.uint64)
    every = np.zeros(WORDS, np.uint64)
    for t in range(NT):
        for j in range(WORDS):
            if ignore[t]:
                ign[j] |= term_first[t, j]
            every[j] |= counted[t, j]
    out = np.zeros((NT, WORDS), np.uint64)
    for t in range(NT):
        for j in range(WORDS):
            out[t, j] = every[j] if ignore[t] else ign[j] | follow[t, j]
    return out


def follow_bytes(
    item_sym: np.ndarray,
    item_lhs: np.ndarray,
    n_terms: int,
    nullable: np.ndarray,
    term_first: np.ndarray,
    ignore: np.ndarray,
    special: np.ndarray,
) -> np.ndarray:
    """For each terminal, the bytes that may start a lexeme right after one of its lexemes,
    as ``int32 [NT * 8]`` bit sets (terminal ``t``'s 256 bits in ``[8 t, 8 t + 8)``,
    little-endian).

    Args:
        item_sym: the productions' symbols, each production ended by ``-1`` (the tables'
            ``H_ITEM_SYM``: terminals ``0 .. NT - 1``, nonterminal ``a`` as ``NT + a``).
        item_lhs: the lhs nonterminal ``a`` of each entry of ``item_sym``.
        n_terms: ``NT``.
        nullable: ``bool [NN]``, the nullable nonterminals.
        term_first: ``uint64 [NT, 4]``: the first bytes of each terminal.
        ignore, special: ``bool [NT]``: the ignored terminals, and those matched by a
            special token only (they add no bytes after others).

    An over-approximation from the grammar's FOLLOW sets: ignored terminals may follow
    anything and anything may follow them.
    """
    out = _follow_bytes(
        np.ascontiguousarray(item_sym, np.int32),
        np.ascontiguousarray(item_lhs, np.int32),
        int(n_terms),
        np.ascontiguousarray(nullable, np.bool_),
        np.ascontiguousarray(term_first, np.uint64),
        np.ascontiguousarray(ignore, np.bool_),
        np.ascontiguousarray(special, np.bool_),
    )
    return out.view(np.int32).reshape(-1)
