"""Products and trimming of byte DFAs, as Numba kernels.

Both automata are given over the same byte classes (:func:`corral.grammar.regex.dfa.intersect`
refines their two compact forms into joint classes first), so a product state's row is one
entry per joint class, not per byte. Product states are pairs ``(x, y)``, numbered in the
order a breadth-first search from ``(0, 0)`` meets them (rows in order, classes in order
within a row), and found again through a hash table of the pairs' keys ``x * nb + y``
(``int_table.py``). :func:`live_states_of` is what trimming keeps: the states reachable from
state 0 that can reach an accepting state; :func:`compact_form` trims a table given over
columns and puts it in the compact form's canonical order in one call.
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel
from .int_table import table_get, table_new, table_put
from .partition import column_classes_of
from .reach import co_reachable

__all__ = [
    "compact_form",
    "keep_states",
    "live_states_of",
    "product_table",
    "trie_difference",
    "trie_product",
]


@kernel(nogil=True)
def product_table(
    ta: np.ndarray, tb: np.ndarray, acc_a: np.ndarray, acc_b: np.ndarray, max_states: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """The reachable part of the product of ``ta`` (``int32 [na, m]``) and ``tb`` (``int32
    [nb, m]``), ``-1`` for dead, both over the same ``m`` classes, from the pair of their
    state 0: ``(table int32 [n, m], accept bool [n], n)``, where a pair accepts when both
    of its states do (``acc_a``, ``acc_b``). With more than ``max_states`` pairs it stops
    and returns ``n == -1`` (and arrays of no meaning)."""
    nb = tb.shape[0]
    m = ta.shape[1]
    keys, ids = table_new(64)  # pair key x * nb + y -> its number
    keys, ids, n_keys = table_put(keys, ids, 0, 0, 0)  # the pair (0, 0)
    rows_cap = 64
    pair_a = np.zeros(rows_cap, np.int64)
    pair_b = np.zeros(rows_cap, np.int64)
    table = np.empty((rows_cap, m), np.int32)
    n = 1
    i = 0
    while i < n:
        x = pair_a[i]
        y = pair_b[i]
        for c in range(m):
            u = ta[x, c]
            v = tb[y, c]
            if u < 0 or v < 0:
                table[i, c] = -1
                continue
            key = np.int64(u) * nb + v
            j = table_get(keys, ids, key)
            if j >= 0:
                table[i, c] = j
                continue
            # a new pair
            if n >= max_states:
                return np.empty((0, m), np.int32), np.zeros(0, np.bool_), -1
            if n >= rows_cap:
                rows_cap *= 2
                grown = np.empty((rows_cap, m), np.int32)
                grown[:n] = table[:n]
                table = grown
                pa = np.zeros(rows_cap, np.int64)
                pa[:n] = pair_a[:n]
                pair_a = pa
                pb = np.zeros(rows_cap, np.int64)
                pb[:n] = pair_b[:n]
                pair_b = pb
            keys, ids, n_keys = table_put(keys, ids, n_keys, key, n)
            pair_a[n] = u
            pair_b[n] = v
            table[i, c] = n
            n += 1
        i += 1
    accept = np.empty(n, np.bool_)
    for j in range(n):
        accept[j] = acc_a[pair_a[j]] and acc_b[pair_b[j]]
    return table[:n].copy(), accept, n


@kernel(nogil=True)
def live_states_of(table: np.ndarray, accept: np.ndarray) -> np.ndarray:
    """``bool [n]``: the states of ``table`` (``int32 [n, m]``, ``-1`` dead) reachable from
    state 0 that can reach a state of ``accept`` (``bool [n]``)."""
    n, m = table.shape
    stack = np.empty(n, np.int64)
    reach = np.zeros(n, np.bool_)
    reach[0] = True
    stack[0] = 0
    top = 1
    n_edges = 0
    while top:
        top -= 1
        s = stack[top]
        prev = -1
        for c in range(m):
            t = table[s, c]
            if t >= 0 and t != prev:
                n_edges += 1  # an edge per distinct target in a run of the row
                if not reach[t]:
                    reach[t] = True
                    stack[top] = t
                    top += 1
            prev = t
    # the edges of the reachable states, and the search back from their accepting states
    src = np.empty(n_edges, np.int64)
    dst = np.empty(n_edges, np.int64)
    e = 0
    for s in range(n):
        if reach[s]:
            prev = -1
            for c in range(m):
                t = table[s, c]
                if t >= 0 and t != prev:
                    src[e] = s
                    dst[e] = t
                    e += 1
                prev = t
    return co_reachable(n, src, dst, n_edges, accept & reach)


@kernel(nogil=True)
def keep_states(
    table: np.ndarray, accept: np.ndarray, live: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The states of ``table`` (``int32 [n, m]``, ``-1`` dead) that ``live`` (``bool [n]``)
    marks, renumbered in order, with the edges into the others dead: ``(int32 [n', m],
    bool [n'])``, ``accept`` (``bool [n]``) kept for them."""
    n, m = table.shape
    new_id = np.full(n, -1, np.int32)
    kept = 0
    for s in range(n):
        if live[s]:
            new_id[s] = kept
            kept += 1
    out = np.empty((kept, m), np.int32)
    acc = np.empty(kept, np.bool_)
    for s in range(n):
        r = new_id[s]
        if r < 0:
            continue
        acc[r] = accept[s]
        for c in range(m):
            t = table[s, c]
            out[r, c] = new_id[t] if t >= 0 else -1
    return out, acc


@kernel(nogil=True)
def trie_product(
    table: np.ndarray,
    classes: np.ndarray,
    accept: np.ndarray,
    data: np.ndarray,
    offsets: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The product of an automaton (``table`` ``int32 [n, m]`` over the byte classes
    ``classes`` ``uint8 [256]``, ``accept`` ``bool [n]``) with the trie of words (word
    ``i`` is ``data[offsets[i]:offsets[i + 1]]``, ``uint8``), accepting what the automaton
    accepts but the words: see :func:`corral.grammar.regex.dfa.difference_of_literals`.

    Returns ``(trans int32 [k + n, m + e], byte_col int64 [256], accept bool [k + n])``:
    states ``0..k-1`` are the trie's nodes (a prefix of a word the automaton reads, in
    the order the words first reach them; node 0 the empty prefix), ``k..k+n-1`` the
    automaton's states; columns ``0..m-1`` are the automaton's classes, ``m..m+e-1`` one
    per byte that labels a trie edge (in byte order), and byte ``b`` reads column
    ``byte_col[b]``."""
    n, m = table.shape
    total = data.shape[0]
    # the trie as child lists: first child, next sibling, the byte into a node
    cap = total + 1
    first = np.full(cap, -1, np.int64)
    sibling = np.full(cap, -1, np.int64)
    label = np.zeros(cap, np.int64)
    state_of = np.zeros(cap, np.int64)
    is_word = np.zeros(cap, np.bool_)
    on_edge = np.zeros(256, np.bool_)
    k = 1
    for w in range(offsets.shape[0] - 1):
        node = 0
        s = 0
        whole = True
        for i in range(offsets[w], offsets[w + 1]):
            byte = data[i]
            s = table[s, classes[byte]]
            if s < 0:
                whole = False
                break
            c = first[node]
            while c >= 0 and label[c] != byte:
                c = sibling[c]
            if c < 0:
                c = k
                k += 1
                label[c] = byte
                state_of[c] = s
                sibling[c] = first[node]
                first[node] = c
                on_edge[byte] = True
            node = c
        if whole:
            is_word[node] = True
    byte_col = np.empty(256, np.int64)
    edge_cls = np.empty(256, np.int64)  # the class of each edge byte, by column - m
    e = 0
    for b in range(256):
        if on_edge[b]:
            byte_col[b] = m + e
            edge_cls[e] = classes[b]
            e += 1
        else:
            byte_col[b] = classes[b]
    trans = np.empty((k + n, m + e), np.int32)
    acc = np.empty(k + n, np.bool_)
    for r in range(k + n):
        src = state_of[r] if r < k else r - k
        for c in range(m):
            t = table[src, c]
            trans[r, c] = t + k if t >= 0 else -1
        for j in range(e):
            t = table[src, edge_cls[j]]
            trans[r, m + j] = t + k if t >= 0 else -1
        acc[r] = accept[src] and not (r < k and is_word[r])
    for x in range(k):  # the trie's edges: node -> child on its byte
        c = first[x]
        while c >= 0:
            trans[x, byte_col[label[c]]] = c
            c = sibling[c]
    return trans, byte_col, acc


@kernel(nogil=True)
def compact_form(
    trans: np.ndarray, byte_col: np.ndarray, accept: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The canonical compact form of the automaton given over columns (``trans`` ``int32
    [n, k]``, state 0 the start, ``-1`` dead; byte ``b`` reads column ``byte_col[b]``,
    ``int64 [256]``; ``accept`` ``bool [n]``): the columns no byte reads dropped, then the
    states trimmed as :func:`live_states_of` and :func:`keep_states` do (a path through a
    dropped column keeps no state alive), then the equal columns merged and numbered by
    their first byte.

    Returns ``(table int32 [n', k'], classes uint8 [256], accept bool [n'])`` with byte
    ``b``'s column ``classes[b]``; ``n' = 0`` (and ``k' = 1``) for the empty language."""
    n, k = trans.shape
    rank = np.full(k, -1, np.int64)
    used = np.empty(256, np.int64)  # the columns read, in the order of their first byte
    u = 0
    for b in range(256):
        c = byte_col[b]
        if rank[c] < 0:
            rank[c] = u
            used[u] = c
            u += 1
    read = np.empty((n, u), np.int32)
    for s in range(n):
        for j in range(u):
            read[s, j] = trans[s, used[j]]
    live = live_states_of(read, accept)
    if not live[0]:
        return np.zeros((0, 1), np.int32), np.zeros(256, np.uint8), np.zeros(0, np.bool_)
    all_live = True
    for s in range(n):
        if not live[s]:
            all_live = False
            break
    acc = accept.copy()
    if not all_live:
        read, acc = keep_states(read, accept, live)
    small, col_class = column_classes_of(read)
    classes = np.empty(256, np.uint8)
    for b in range(256):
        classes[b] = col_class[rank[byte_col[b]]]
    return small, classes, acc


@kernel(nogil=True)
def trie_difference(
    table: np.ndarray,
    classes: np.ndarray,
    accept: np.ndarray,
    data: np.ndarray,
    offsets: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`trie_product` (same arguments) in its canonical compact form
    (:func:`compact_form`), in one call: ``(table int32 [n', k'], classes uint8 [256],
    accept bool [n'], trie nodes)``."""
    trans, byte_col, acc = trie_product(table, classes, accept, data, offsets)
    small, cls, kept = compact_form(trans, byte_col, acc)
    return small, cls, kept, trans.shape[0] - table.shape[0]
