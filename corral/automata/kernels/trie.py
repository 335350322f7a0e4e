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
