"""Kernel: build the token trie as flat arrays in depth-first preorder."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def build_trie(
    data: np.ndarray, offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Build a trie over byte strings given in sorted order.

    Args:
        data: ``uint8`` concatenation of the strings, sorted lexicographically.
        offsets: ``int64 [n+1]``; string ``k`` is ``data[offsets[k]:offsets[k+1]]`` (non-empty).

    Returns:
        ``(node_byte, depth, subtree_end, tok_start, tok_count, parent)``, each of length
        ``n_nodes``; node 0 is the root (its parent is 0). Node ``i``'s subtree is
        ``[i, subtree_end[i])``; strings ending at node ``i`` are
        ``tok_start[i] .. tok_start[i]+tok_count[i]`` in the sorted order.
    """
    n = offsets.shape[0] - 1
    cap = data.shape[0] + 1
    node_byte = np.zeros(cap, np.uint8)
    depth = np.zeros(cap, np.int32)
    subtree_end = np.zeros(cap, np.int32)
    tok_start = np.zeros(cap, np.int32)
    tok_count = np.zeros(cap, np.int32)
    parent = np.zeros(cap, np.int32)
    max_len = 0
    for k in range(n):
        ln = offsets[k + 1] - offsets[k]
        if ln > max_len:
            max_len = ln
    path = np.zeros(max_len + 1, np.int32)  # path[d] = node at depth d on the current path
    path[0] = 0
    path_len = 1
    n_nodes = 1
    prev_start = 0
    prev_len = 0
    for k in range(n):
        s = offsets[k]
        ln = offsets[k + 1] - s
        # longest common prefix with the previous string
        lcp = 0
        m = min(ln, prev_len)
        while lcp < m and data[s + lcp] == data[prev_start + lcp]:
            lcp += 1
        # close nodes deeper than lcp
        while path_len > lcp + 1:
            path_len -= 1
            subtree_end[path[path_len]] = n_nodes
        for d in range(lcp, ln):
            node = n_nodes
            n_nodes += 1
            node_byte[node] = data[s + d]
            depth[node] = d + 1
            parent[node] = path[path_len - 1]
            path[path_len] = node
            path_len += 1
        last = path[path_len - 1]
        if tok_count[last] == 0:
            tok_start[last] = k
        tok_count[last] += 1
        prev_start = s
        prev_len = ln
    while path_len > 0:
        path_len -= 1
        subtree_end[path[path_len]] = n_nodes
    return (
        node_byte[:n_nodes].copy(),
        depth[:n_nodes].copy(),
        subtree_end[:n_nodes].copy(),
        tok_start[:n_nodes].copy(),
        tok_count[:n_nodes].copy(),
        parent[:n_nodes].copy(),
    )


@njit(cache=True, nogil=True)
def plain_frontier(
    node_byte: np.ndarray, parent: np.ndarray, subtree_end: np.ndarray, plain: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The first non-plain nodes below each node, and the longest plain path below it.

    Node ``y``'s *frontier* is the set of its descendants whose byte is not plain
    (``plain[b] == 0``) and whose path from ``y`` is plain in between. Returns ``(nodes,
    begin, end, height)``: node ``x``'s frontier is ``nodes[begin[x] : end[x]]``, in
    preorder, and ``height[x]`` is the number of nodes on the longest all-plain path down
    from ``x``. ``nodes`` lists each non-plain node once, grouped by its nearest proper
    ancestor that is the root or not plain (its *owner*); a plain node's frontier is a
    slice of its owner's list, since its subtree is a preorder range.
    """
    n = node_byte.shape[0]
    owner = np.zeros(n, np.int32)
    count = np.zeros(n + 1, np.int32)
    for y in range(1, n):
        p = parent[y]
        owner[y] = p if p == 0 or plain[node_byte[p]] == 0 else owner[p]
        if plain[node_byte[y]] == 0:
            count[owner[y] + 1] += 1
    start = np.zeros(n + 1, np.int32)
    for i in range(n):
        start[i + 1] = start[i] + count[i + 1]
    fill = start[:n].copy()
    nodes = np.zeros(start[n], np.int32)
    for y in range(1, n):
        if plain[node_byte[y]] == 0:
            o = owner[y]
            nodes[fill[o]] = y
            fill[o] += 1
    begin = np.zeros(n, np.int32)
    end = np.zeros(n, np.int32)
    for x in range(n):
        if x == 0 or plain[node_byte[x]] == 0:
            begin[x] = start[x]
            end[x] = start[x + 1]
        else:
            o = owner[x]
            lo = start[o]
            hi = start[o + 1]
            begin[x] = lo + np.searchsorted(nodes[lo:hi], x)
            end[x] = lo + np.searchsorted(nodes[lo:hi], subtree_end[x])
    h = np.zeros(n, np.int32)
    for y in range(n - 1, 0, -1):
        if plain[node_byte[y]] != 0:
            p = parent[y]
            if h[y] + 1 > h[p]:
                h[p] = h[y] + 1
    return nodes, begin, end, h


@njit(cache=True, nogil=True)
def plain_bytes_below(node_byte: np.ndarray, parent: np.ndarray, plain: np.ndarray) -> np.ndarray:
    """Per node, the plain bytes on its plain paths down (up to its frontier).

    Returns ``int64 [n_nodes, 2]``: bit ``b`` of word ``b >> 6`` is set for node ``x``
    when some descendant ``y`` reached from ``x`` through plain nodes only (``y``
    included) has byte ``b``. Plain bytes are ASCII, so two words hold them.
    """
    n = node_byte.shape[0]
    below = np.zeros((n, 2), np.int64)
    for y in range(n - 1, 0, -1):
        b = node_byte[y]
        if plain[b] != 0:
            p = parent[y]
            below[p, 0] |= below[y, 0]
            below[p, 1] |= below[y, 1]
            below[p, b >> 6] |= np.int64(1) << (b & 63)
    return below
