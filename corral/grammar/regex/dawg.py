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

__all__ = ["concatenated", "dawg", "encoded", "sorted_unique", "trie", "trie_of", "trie_states"]


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
    return concatenated(sorted(set(strings)))


@kernel(nogil=True)
def _trie(
    buf: np.ndarray, offs: np.ndarray, order: np.ndarray, sep: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The trie of the strings ``buf[offs[i]:offs[i + 1] - sep]`` taken in the sorted
    ``order`` (byte order; equal strings next to each other): ``(parent, label, accept)``
    per node, node 0 the root (``parent[0] == -1``). Nodes are numbered in preorder, so a
    node's children come after it, in increasing byte order."""
    cap = buf.shape[0] + 1
    parent = np.empty(cap, np.int32)
    label = np.zeros(cap, np.uint8)
    accept = np.zeros(cap, np.bool_)
    parent[0] = -1
    max_len = 0
    for i in range(offs.shape[0] - 1):
        max_len = max(max_len, offs[i + 1] - sep - offs[i])
    path = np.zeros(max_len + 1, np.int32)  # path[k]: the node after k bytes of the word
    n = 1
    prev_a = 0
    prev_b = 0
    for i in order:
        a = offs[i]
        b = offs[i + 1] - sep
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


@kernel(nogil=True)
def _byte_order(buf: np.ndarray, offs: np.ndarray, sep: int) -> np.ndarray:
    """``int64 [n]``: the strings ``buf[offs[i]:offs[i + 1] - sep]`` sorted (byte order,
    a prefix first; equal strings next to each other), as indices.

    Eight bytes at a time: strings are sorted by their next 8 bytes packed in one
    integer, then by how many bytes they have left (0 to 8, or 9 for more); runs that
    tie with more left are sorted again on the following 8 bytes."""
    n = offs.shape[0] - 1
    order = np.arange(n)
    cnt = np.zeros(11, np.int64)
    tmp = np.empty(n, np.int64)
    work = [(0, n, 0)]
    while work:
        lo, hi, d = work.pop()
        m = hi - lo
        keys = np.empty(m, np.uint64)
        rest = np.empty(m, np.int64)
        for t in range(m):
            a = offs[order[lo + t]] + d
            b = offs[order[lo + t] + 1] - sep
            k = np.uint64(0)
            for j in range(8):
                k = k << np.uint64(8)
                if a + j < b:
                    k = k | np.uint64(buf[a + j])
            keys[t] = k
            rest[t] = min(b - a, 9)
        sub = np.argsort(keys)
        # rank by (key, rest): a run of equal keys is short or rare; sort it by rest
        seg = order[lo:hi][sub]
        ks = keys[sub]
        rs = rest[sub]
        t = 0
        while t < m:
            u = t + 1
            while u < m and ks[u] == ks[t]:
                u += 1
            if u - t > 1:
                # counting sort of the run by rest (0..9), stable
                cnt[:] = 0
                for v in range(t, u):
                    cnt[rs[v] + 1] += 1
                for c in range(10):
                    cnt[c + 1] += cnt[c]
                for v in range(t, u):
                    tmp[cnt[rs[v]]] = seg[v]
                    cnt[rs[v]] += 1
                seg[t:u] = tmp[: u - t]
                more = u - t - cnt[8]  # the run's strings with more than 8 bytes left
                if more > 1:
                    work.append((lo + u - more, lo + u, d + 8))
            t = u
        order[lo:hi] = seg
    return order


@kernel(nogil=True)
def _trie_rows(
    buf: np.ndarray, offs: np.ndarray, sep: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The trie of the strings ``buf[offs[i]:offs[i + 1] - sep]`` (any order, repeats
    allowed; ``sep``: 1 where each string is followed by a separator byte) as sparse DFA
    rows ``(row_start, labels, targets, accept)``, states in preorder with children by
    increasing byte: the same numbering whatever the strings' order.

    The strings are sorted (:func:`_byte_order`); a trie built from sorted strings
    creates its nodes in preorder and each node's children in byte order, so one
    counting sort of the nodes by parent gives the rows."""
    parent, label, accept = _trie(buf, offs, _byte_order(buf, offs, sep), sep)
    n = parent.shape[0]
    row_start = np.zeros(n + 1, np.int64)
    for x in range(1, n):
        row_start[parent[x] + 1] += 1
    for x in range(n):
        row_start[x + 1] += row_start[x]
    fill = row_start[:n].copy()
    labels = np.empty(n - 1, np.uint8)
    targets = np.empty(n - 1, np.int32)
    for x in range(1, n):
        e = fill[parent[x]]
        labels[e] = label[x]
        targets[e] = x
        fill[parent[x]] = e + 1
    return row_start, labels, targets, accept


def concatenated(strings: Iterable[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``(buf, offs)``: ``strings`` concatenated (``uint8``) with their ``int64 [n + 1]``
    offsets, in the given order."""
    words = strings if isinstance(strings, list) else list(strings)
    offs = np.zeros(len(words) + 1, np.int64)
    if words:
        np.cumsum(np.fromiter(map(len, words), np.int64, len(words)), out=offs[1:])
    return np.frombuffer(b"".join(words), np.uint8), offs


def encoded(names: list[str]) -> tuple[np.ndarray, np.ndarray, int]:
    """``(buf, offs, sep)``: ``names`` encoded as UTF-8, name ``i`` being
    ``buf[offs[i]:offs[i + 1] - sep]``. ASCII names without NUL are encoded in one go,
    each followed by a NUL (``sep == 1``), the offsets read off the NULs; others one by
    one (as :func:`concatenated`, ``sep == 0``).

    Raises:
        TypeError: a name is not a ``str``.
        UnicodeEncodeError: a name holds a lone surrogate.
    """
    text = "\0".join(names)
    if text.isascii():
        buf = np.frombuffer((text + "\0").encode("ascii"), np.uint8)
        nul = np.flatnonzero(buf == 0)
        if nul.shape[0] == len(names):  # no name holds a NUL
            offs = np.zeros(len(names) + 1, np.int64)
            offs[1:] = nul + 1
            return buf, offs, 1
    return (*concatenated([x.encode("utf-8") for x in names]), 0)


def trie(strings: Iterable[bytes]) -> SparseDFA:
    """The trie of ``strings`` as a DFA (not minimal: every prefix is a state of its own).
    Same language as :func:`dawg`, built several times faster (no merging), for sets used
    once; states in preorder, start state ``0``, the same whatever the strings' order."""
    return trie_of(*concatenated(strings))


def trie_of(buf: np.ndarray, offs: np.ndarray, sep: int = 0) -> SparseDFA:
    """:func:`trie` of the strings ``buf[offs[i]:offs[i + 1] - sep]`` (as :func:`encoded`
    or :func:`concatenated` give them)."""
    if offs.shape[0] == 1:
        return SparseDFA.empty()
    return SparseDFA(*_trie_rows(buf, offs, sep))


def dawg(strings: Iterable[bytes]) -> SparseDFA:
    """The minimal DFA accepting exactly ``strings`` (byte strings; the empty one makes
    the start state accepting). Start state ``0``, then states in the preorder of their
    first trie node; every state reaches acceptance.

    Time and memory are linear in the total length: the trie is built, then merged."""
    buf, offs = sorted_unique(strings)
    if offs.shape[0] == 1:
        return SparseDFA.empty()
    parent, label, accept = _trie(buf, offs, np.arange(offs.shape[0] - 1), 0)
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
