"""Kernel: build the token trie as flat arrays in depth-first preorder."""

from __future__ import annotations

import numpy as np

from ...jit import kernel


@kernel(nogil=True)
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


@kernel(nogil=True)
def utf8_chars(
    node_byte: np.ndarray, parent: np.ndarray, plain: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode each token path into characters, for walks that skip whole characters.

    A *good* character is a plain byte (``plain[b] != 0``) or a valid multi-byte UTF-8
    character: a lead byte ``C2..F4`` all of whose descendants within the character's
    length carry valid continuation bytes (the second byte's range depends on the lead,
    which excludes overlong forms, surrogates and code points above U+10FFFF). A path may
    end inside a good character. Decoding goes from the root, one character after
    another; a node that starts something else (``"``, a control byte, a stray
    continuation byte, a lead with an invalid continuation somewhere below) is *bad*,
    and decoding starts afresh after it.

    Returns ``(skippable, boundary, chars)``, each of length ``n_nodes``:
    ``skippable[y]`` (``uint8``) is 1 when ``y`` lies inside a good character;
    ``boundary[y]`` (``uint8``) is 1 when decoding is between characters after ``y``
    (the root, bad nodes, and the last byte of a good character); ``chars[y]``
    (``int32``) counts the boundary nodes on the path from the root to ``y``. Between a
    boundary node ``x`` and a bad descendant ``y`` reached through skippable nodes only,
    the path holds ``chars[y] - 1 - chars[x]`` whole good characters.
    """
    n = node_byte.shape[0]
    bad_lead = np.zeros(n, np.uint8)
    for y in range(1, n):
        # check y against the leads up to three levels above it
        a = parent[y]
        k = 1
        while k <= 3 and a != 0:
            lead = node_byte[a]
            if _utf8_len(lead) > k:
                lo, hi = _utf8_range(lead, k)
                if node_byte[y] < lo or node_byte[y] > hi:
                    bad_lead[a] = 1
            a = parent[a]
            k += 1
    rem = np.zeros(n, np.int8)  # continuation bytes still to come after the node
    skippable = np.zeros(n, np.uint8)
    boundary = np.zeros(n, np.uint8)
    chars = np.zeros(n, np.int32)
    boundary[0] = 1
    for y in range(1, n):
        p = parent[y]
        b = node_byte[y]
        if rem[p] > 0:
            rem[y] = rem[p] - 1
            skippable[y] = 1
        elif plain[b] != 0:
            skippable[y] = 1
        elif _utf8_len(b) > 1 and bad_lead[y] == 0:
            rem[y] = _utf8_len(b) - 1
            skippable[y] = 1
        boundary[y] = 1 if rem[y] == 0 else 0
        chars[y] = chars[p] + boundary[y]
    return skippable, boundary, chars


# valid multi-byte UTF-8 characters, one row per form: lead byte range, second byte
# range (narrower after E0, ED, F0, F4: no overlong forms, surrogates or code points above
# U+10FFFF), length; the bytes after the second are 80..BF
UTF8_FORMS = np.array(
    [
        [0xC2, 0xDF, 0x80, 0xBF, 2],
        [0xE0, 0xE0, 0xA0, 0xBF, 3],
        [0xE1, 0xEC, 0x80, 0xBF, 3],
        [0xED, 0xED, 0x80, 0x9F, 3],
        [0xEE, 0xEF, 0x80, 0xBF, 3],
        [0xF0, 0xF0, 0x90, 0xBF, 4],
        [0xF1, 0xF3, 0x80, 0xBF, 4],
        [0xF4, 0xF4, 0x80, 0x8F, 4],
    ],
    np.int32,
)


@kernel(nogil=True, inline="always")
def _utf8_form(lead):  # type: ignore[no-untyped-def]
    """The ``UTF8_FORMS`` row a lead byte starts (-1: not a valid lead)."""
    for k in range(UTF8_FORMS.shape[0]):
        if UTF8_FORMS[k, 0] <= lead <= UTF8_FORMS[k, 1]:
            return k
    return -1


@kernel(nogil=True, inline="always")
def _utf8_len(lead):  # type: ignore[no-untyped-def]
    """Length of the UTF-8 character a lead byte starts (0: not a valid lead)."""
    k = _utf8_form(lead)
    return UTF8_FORMS[k, 4] if k >= 0 else 0


@kernel(nogil=True, inline="always")
def _utf8_range(lead, k):  # type: ignore[no-untyped-def]
    """Valid range of byte ``k`` (1: the one after the lead) of a character."""
    if k == 1:
        f = _utf8_form(lead)
        return UTF8_FORMS[f, 2], UTF8_FORMS[f, 3]
    return 0x80, 0xBF


@kernel(nogil=True)
def skip_frontier(
    parent: np.ndarray, subtree_end: np.ndarray, skippable: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The first non-skippable nodes below each node, and the longest skippable path.

    Node ``y``'s *frontier* is the set of its descendants that are not skippable
    (``skippable[d] == 0``) and whose path from ``y`` is skippable in between. Returns
    ``(nodes, begin, end, height)``: node ``x``'s frontier is ``nodes[begin[x] :
    end[x]]``, in preorder, and ``height[x]`` is the greatest sum of ``counts`` over the
    nodes of an all-skippable path down from ``x`` (with ``counts`` all ones: its
    length). ``nodes`` lists each non-skippable node once, grouped by its nearest proper
    ancestor that is the root or not skippable (its *owner*); a skippable node's frontier
    is a slice of its owner's list, since its subtree is a preorder range.
    """
    n = parent.shape[0]
    owner = np.zeros(n, np.int32)
    count = np.zeros(n + 1, np.int32)
    for y in range(1, n):
        p = parent[y]
        owner[y] = p if p == 0 or skippable[p] == 0 else owner[p]
        if skippable[y] == 0:
            count[owner[y] + 1] += 1
    start = np.zeros(n + 1, np.int32)
    for i in range(n):
        start[i + 1] = start[i] + count[i + 1]
    fill = start[:n].copy()
    nodes = np.zeros(start[n], np.int32)
    for y in range(1, n):
        if skippable[y] == 0:
            o = owner[y]
            nodes[fill[o]] = y
            fill[o] += 1
    begin = np.zeros(n, np.int32)
    end = np.zeros(n, np.int32)
    for x in range(n):
        if x == 0 or skippable[x] == 0:
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
        if skippable[y] != 0:
            p = parent[y]
            if h[y] + counts[y] > h[p]:
                h[p] = h[y] + counts[y]
    return nodes, begin, end, h


@kernel(nogil=True)
def ascii_below(node_byte: np.ndarray, parent: np.ndarray, skippable: np.ndarray) -> np.ndarray:
    """Per node, the ASCII bytes on its skippable paths down (up to its frontier).

    Returns ``int64 [n_nodes, 2]``: bit ``b`` of word ``b >> 6`` is set for node ``x``
    when some descendant ``y`` reached from ``x`` through skippable nodes only (``y``
    included) has byte ``b < 128``. Bytes from 128 up are not recorded.
    """
    n = node_byte.shape[0]
    below = np.zeros((n, 2), np.int64)
    for y in range(n - 1, 0, -1):
        if skippable[y] != 0:
            b = node_byte[y]
            p = parent[y]
            below[p, 0] |= below[y, 0]
            below[p, 1] |= below[y, 1]
            if b < 128:
                below[p, b >> 6] |= np.int64(1) << (b & 63)
    return below
