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

__all__ = [
    "byte_order",
    "concatenated",
    "dawg",
    "encoded",
    "sorted_unique",
    "trie",
    "trie_of",
    "trie_states",
]


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


_SMALL_RUN = 12  # runs shorter than this are sorted by insertion


@kernel(nogil=True, inline="always")
def _before(buf, a0, a1, b0, b1, d):  # type: ignore[no-untyped-def]
    """Whether the string ``buf[a0:a1]`` sorts before ``buf[b0:b1]`` (byte order, a
    prefix first), both equal on their first ``d`` bytes."""
    i = a0 + d
    j = b0 + d
    while i < a1 and j < b1:
        if buf[i] != buf[j]:
            return buf[i] < buf[j]
        i += 1
        j += 1
    return i == a1 and j < b1


@kernel(nogil=True)
def _byte_order(buf: np.ndarray, offs: np.ndarray, sep: int) -> np.ndarray:
    """``int64 [n]``: the strings ``buf[offs[i]:offs[i + 1] - sep]`` sorted (byte order,
    a prefix first; equal strings next to each other), as indices.

    Most significant byte first: a run of strings equal on their first ``d`` bytes is
    distributed by its next byte (a counting sort over the bytes the run holds; strings
    that end there come first and are done), and each bucket of several strings is a
    run one byte deeper. Runs shorter than :data:`_SMALL_RUN` are sorted by insertion."""
    n = offs.shape[0] - 1
    order = np.arange(n)
    tmp = np.empty(n, np.int64)
    key = np.empty(n, np.int64)  # 0: the string ended; else its next byte + 1
    cnt = np.zeros(257, np.int64)
    runs = np.empty((n + 1, 3), np.int64)  # (lo, hi, depth) of runs still to sort
    runs[0, 0] = 0
    runs[0, 1] = n
    runs[0, 2] = 0
    top = 1
    while top > 0:
        top -= 1
        lo = runs[top, 0]
        hi = runs[top, 1]
        d = runs[top, 2]
        if hi - lo < _SMALL_RUN:
            for t in range(lo + 1, hi):
                x = order[t]
                a0 = offs[x]
                a1 = offs[x + 1] - sep
                u = t
                while u > lo:
                    y = order[u - 1]
                    if not _before(buf, a0, a1, offs[y], offs[y + 1] - sep, d):
                        break
                    order[u] = y
                    u -= 1
                order[u] = x
            continue
        kmin = 257
        kmax = 0
        for t in range(lo, hi):
            x = order[t]
            p = offs[x] + d
            k = 0 if p >= offs[x + 1] - sep else np.int64(buf[p]) + 1
            key[t] = k
            kmin = min(kmin, k)
            kmax = max(kmax, k)
        if kmin == kmax:  # one bucket: one byte deeper, unless every string ended
            if kmin > 0:
                runs[top, 2] = d + 1
                top += 1
            continue
        for c in range(kmin, kmax + 1):
            cnt[c] = 0
        for t in range(lo, hi):
            cnt[key[t]] += 1
        start = 0
        for c in range(kmin, kmax + 1):  # each bucket's first place
            size = cnt[c]
            cnt[c] = start
            start += size
        for t in range(lo, hi):
            k = key[t]
            tmp[cnt[k]] = order[t]
            cnt[k] += 1
        order[lo:hi] = tmp[: hi - lo]
        start = 0
        for c in range(kmin, kmax + 1):  # cnt[c]: where bucket c ends now
            if c > 0 and cnt[c] - start > 1:
                runs[top, 0] = lo + start
                runs[top, 1] = lo + cnt[c]
                runs[top, 2] = d + 1
                top += 1
            start = cnt[c]
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


def byte_order(buf: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """``int64 [n]``: the strings ``buf[offs[i]:offs[i + 1]]`` sorted in byte order (a
    prefix first), as indices; equal strings keep their order (the sort is stable)."""
    return _byte_order(buf, offs, 0)


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
    return SparseDFA(*_trie_rows(buf, offs, sep), preorder_trie=True)


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
