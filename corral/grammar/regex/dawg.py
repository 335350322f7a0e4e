"""The minimal automaton of a finite set of byte strings (a DAWG), built for sets of
millions of strings.

A trie of the sorted strings is built in one pass (Numba), then minimised level by level
from the leaves up: two trie nodes are the same state exactly when they agree on
acceptance and on each outgoing byte's target state, and nodes of one height only point
at lower ones, so one exact ``np.unique`` over the rows of each (height, out-degree)
group merges them. The result is the minimal DFA of the set (no hashing, so no
collisions), returned as a :class:`~corral.grammar.regex.sparse.SparseDFA`.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ...jit import kernel
from .sparse import SparseDFA

__all__ = ["dawg", "sorted_unique", "trie", "trie_states"]


def trie_states(strings: list[bytes]) -> int:
    """States of the trie spelling ``strings``: one per distinct prefix."""
    n = 1
    prev = b""
    for w in sorted(strings):
        common = 0
        for a, c in zip(prev, w, strict=False):
            if a != c:
                break
            common += 1
        n += len(w) - common
        prev = w
    return n


def sorted_unique(strings: Iterable[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``(buf, offs)``: the distinct ``strings`` in byte order, concatenated (``uint8``)
    with their ``int64 [n + 1]`` offsets."""
    words = sorted(set(strings))
    offs = np.zeros(len(words) + 1, np.int64)
    if words:
        offs[1:] = np.cumsum([len(w) for w in words])
    buf = np.frombuffer(b"".join(words), np.uint8)
    return buf, offs


@kernel(nogil=True)
def _trie(buf: np.ndarray, offs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The trie of sorted distinct strings: ``(parent, label, accept)`` per node, node 0
    the root (``parent[0] == -1``). Nodes are numbered in preorder, so a node's children
    come after it, in increasing byte order."""
    n_words = offs.shape[0] - 1
    cap = buf.shape[0] + 1
    parent = np.empty(cap, np.int32)
    label = np.zeros(cap, np.uint8)
    accept = np.zeros(cap, np.bool_)
    parent[0] = -1
    max_len = 0
    for i in range(n_words):
        max_len = max(max_len, offs[i + 1] - offs[i])
    path = np.zeros(max_len + 1, np.int32)  # path[k]: the node after k bytes of the word
    n = 1
    prev_a = 0
    prev_b = 0
    for i in range(n_words):
        a = offs[i]
        b = offs[i + 1]
        common = 0
        while (
            common < b - a and common < prev_b - prev_a and buf[a + common] == buf[prev_a + common]
        ):
            common += 1
        for k in range(common, b - a):
            parent[n] = path[k]
            label[n] = buf[a + k]
            path[k + 1] = n
            n += 1
        accept[path[b - a]] = True
        prev_a = a
        prev_b = b
    return parent[:n], label[:n], accept[:n]


@kernel(nogil=True)
def _heights(parent: np.ndarray) -> np.ndarray:
    """The length of the longest path from each trie node down to a leaf."""
    h = np.zeros(parent.shape[0], np.int32)
    for x in range(parent.shape[0] - 1, 0, -1):  # children after parents
        p = parent[x]
        if h[x] + 1 > h[p]:
            h[p] = h[x] + 1
    return h


def _row_classes(rows: np.ndarray) -> np.ndarray:
    """``int64 [n]``: the same number for equal rows of ``rows`` (``[n, k]``), numbered
    from 0 (a lexicographic sort: several times faster than ``np.unique(axis=0)``)."""
    order = np.lexsort(rows.T[::-1])
    s = rows[order]
    new = np.ones(s.shape[0], bool)
    new[1:] = np.any(s[1:] != s[:-1], axis=1)
    out = np.empty(s.shape[0], np.int64)
    out[order] = np.cumsum(new) - 1
    return out


def trie(strings: Iterable[bytes]) -> SparseDFA:
    """The trie of ``strings`` as a DFA (not minimal: every prefix is a state of its own).
    Same language as :func:`dawg`, built several times faster (no merging), for sets used
    once; states in preorder, start state ``0``."""
    buf, offs = sorted_unique(strings)
    if offs.shape[0] == 1:
        return SparseDFA.empty()
    parent, label, accept = _trie(buf, offs)
    n = parent.shape[0]
    src = parent[1:].astype(np.int64)
    return SparseDFA.from_edges(n, src, label[1:], np.arange(1, n, dtype=np.int64), accept)


def dawg(strings: Iterable[bytes]) -> SparseDFA:
    """The minimal DFA accepting exactly ``strings`` (byte strings; the empty one makes
    the start state accepting). Start state ``0``, then states in the preorder of their
    first trie node; every state reaches acceptance.

    Time and memory are linear in the total length: the trie is built, then merged."""
    buf, offs = sorted_unique(strings)
    if offs.shape[0] == 1:
        return SparseDFA.empty()
    parent, label, accept = _trie(buf, offs)
    n = parent.shape[0]
    height = _heights(parent)
    # children of each node, in byte order: a stable sort of the edges by parent
    edge_child = np.argsort(parent[1:], kind="stable").astype(np.int64) + 1
    degree = np.bincount(parent[1:], minlength=n)
    first_edge = np.zeros(n + 1, np.int64)
    np.cumsum(degree, out=first_edge[1:])
    state = np.full(n, -1, np.int64)  # minimal state of each trie node
    n_states = 0
    order = np.argsort(height, kind="stable")
    bounds = np.searchsorted(height[order], np.arange(int(height.max()) + 2))
    for h in range(bounds.shape[0] - 1):
        nodes = order[bounds[h] : bounds[h + 1]]
        degs = degree[nodes]
        for d in np.unique(degs).tolist():
            group = nodes[degs == d]
            rows = np.empty((group.shape[0], 1 + 2 * d), np.int64)
            rows[:, 0] = accept[group]
            if d:
                kids = edge_child[first_edge[group][:, None] + np.arange(d)[None, :]]
                rows[:, 1::2] = label[kids]
                rows[:, 2::2] = state[kids]
            inv = _row_classes(rows)
            state[group] = inv + n_states
            n_states += int(inv.max()) + 1
    # number the states by their first trie node (the root's first), and read each
    # state's transitions off that node
    first_node = np.full(n_states, n, np.int64)
    np.minimum.at(first_node, state, np.arange(n))
    rank = np.empty(n_states, np.int64)
    rank[np.argsort(first_node, kind="stable")] = np.arange(n_states)
    st = rank[state]
    is_rep = np.zeros(n, bool)
    is_rep[first_node] = True
    kids = np.arange(1, n)[is_rep[parent[1:]]]
    acc = np.zeros(n_states, bool)
    acc[st[first_node]] = accept[first_node]
    return SparseDFA.from_edges(n_states, st[parent[kids]], label[kids], st[kids], acc)
