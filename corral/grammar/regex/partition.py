"""DFA minimisation by partition refinement, as a Numba kernel.

Valmari and Lehtinen's algorithm for partial transition functions ("Efficient
minimization of DFAs with partial transition functions", STACS 2008; the array form of
Valmari, "Fast brief practical DFA minimization", IPL 2012): states and transitions are
both kept in refinable partitions (*blocks* of states, *cords* of transitions, first by
label). Processing a cord splits the blocks by which states have a transition in it;
processing a block splits the cords by which transitions enter it; a set that splits
keeps its index and the smaller half gets a new one, so each element is processed
O(log n) times: O(m log n) for m transitions, with no sink state and no full table.

The kernel returns each state's block; :func:`corral.grammar.regex.dfa.minimize` numbers
the blocks and builds the table.
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel

__all__ = [
    "column_classes_of",
    "compared_reps",
    "equivalence_blocks",
    "hashed_reps",
    "minimal_table",
]


@kernel(nogil=True, inline="always")
def _one_set(size):  # type: ignore[no-untyped-def]
    """A refinable partition of ``size`` elements, all in set 0: ``(elems, loc, sidx,
    first, past, marked, touched)``, each ``int64``; the per-set arrays have room for
    ``size + 1`` sets."""
    past = np.zeros(size + 1, np.int64)
    past[0] = size
    return (
        np.arange(size, dtype=np.int64),
        np.arange(size, dtype=np.int64),
        np.zeros(size, np.int64),
        np.zeros(size + 1, np.int64),
        past,
        np.zeros(size + 1, np.int64),
        np.empty(size + 1, np.int64),
    )


@kernel(nogil=True, inline="always")
def _mark(e, elems, loc, sidx, first, marked, touched, n_touched):  # type: ignore[no-untyped-def]
    """Mark element ``e`` of a refinable partition: move it into the marked front part of
    its set; a set marked for the first time is pushed on ``touched``. Returns the new
    number of touched sets."""
    s = sidx[e]
    i = loc[e]
    j = first[s] + marked[s]
    if i >= j:  # not marked yet (marked elements lie in first[s] .. j-1)
        other = elems[j]
        elems[i] = other
        loc[other] = i
        elems[j] = e
        loc[e] = j
        if marked[s] == 0:
            touched[n_touched] = s
            n_touched += 1
        marked[s] += 1
    return n_touched


@kernel(nogil=True, inline="always")
def _split(elems, sidx, first, past, marked, touched, n_touched, z):  # type: ignore[no-untyped-def]
    """Split every touched set into its marked and unmarked parts; the smaller part gets
    the new index ``z`` (and the next ones). Returns the new number of sets."""
    while n_touched > 0:
        n_touched -= 1
        s = touched[n_touched]
        j = first[s] + marked[s]
        if j == past[s]:  # every element marked: no split
            marked[s] = 0
            continue
        if marked[s] <= past[s] - j:  # the marked part is the smaller: it moves
            first[z] = first[s]
            past[z] = j
            first[s] = j
        else:
            past[z] = past[s]
            first[z] = j
            past[s] = j
        for i in range(first[z], past[z]):
            sidx[elems[i]] = z
        marked[s] = 0
        marked[z] = 0
        z += 1
    return z


@kernel(nogil=True)
def equivalence_blocks(small, accept):  # type: ignore[no-untyped-def]
    """The Myhill-Nerode classes of a trimmed partial DFA.

    Args:
        small: ``int32 [n, k]``, transitions on ``k`` letters (byte classes), ``-1`` none.
        accept: ``bool [n]``.

    Returns:
        ``int64 [n]``: each state's block; two states share a block exactly when they
        accept the same language.
    """
    n, k = small.shape
    # transitions, ordered by label (the initial cords are the labels)
    m = 0
    for s in range(n):
        for c in range(k):
            if small[s, c] >= 0:
                m += 1
    tail = np.empty(m, np.int64)
    head = np.empty(m, np.int64)
    label = np.empty(m, np.int64)
    t = 0
    for c in range(k):
        for s in range(n):
            if small[s, c] >= 0:
                tail[t] = s
                head[t] = small[s, c]
                label[t] = c
                t += 1
    # incoming transitions of each state (CSR by head)
    in_start = np.zeros(n + 1, np.int64)
    for t in range(m):
        in_start[head[t] + 1] += 1
    for s in range(n):
        in_start[s + 1] += in_start[s]
    fill = in_start[:n].copy()
    incoming = np.empty(m, np.int64)
    for t in range(m):
        incoming[fill[head[t]]] = t
        fill[head[t]] += 1

    # blocks: one set of every state, then split accepting from not
    b_elems, b_loc, b_sidx, b_first, b_past, b_marked, b_touched = _one_set(n)
    bz = 1 if n > 0 else 0
    nt = 0
    for s in range(n):
        if accept[s]:
            nt = _mark(s, b_elems, b_loc, b_sidx, b_first, b_marked, b_touched, nt)
    bz = _split(b_elems, b_sidx, b_first, b_past, b_marked, b_touched, nt, bz)

    # cords: transitions by label
    c_elems, c_loc, c_sidx, c_first, c_past, c_marked, c_touched = _one_set(m)
    cz = 0
    for t in range(m):
        if t == 0 or label[t] != label[t - 1]:
            if t > 0:
                c_past[cz - 1] = t
            c_first[cz] = t
            cz += 1
        c_sidx[t] = cz - 1
    if m > 0:
        c_past[cz - 1] = m

    b = 1
    c = 0
    while c < cz:
        nt = 0
        for i in range(c_first[c], c_past[c]):
            nt = _mark(tail[c_elems[i]], b_elems, b_loc, b_sidx, b_first, b_marked, b_touched, nt)
        bz = _split(b_elems, b_sidx, b_first, b_past, b_marked, b_touched, nt, bz)
        c += 1
        while b < bz:
            nt = 0
            for i in range(b_first[b], b_past[b]):
                s = b_elems[i]
                for j in range(in_start[s], in_start[s + 1]):
                    nt = _mark(
                        incoming[j], c_elems, c_loc, c_sidx, c_first, c_marked, c_touched, nt
                    )
            cz = _split(c_elems, c_sidx, c_first, c_past, c_marked, c_touched, nt, cz)
            b += 1
    return b_sidx


@kernel(nogil=True)
def minimal_table(small, accept):  # type: ignore[no-untyped-def]
    """The minimal DFA of a trimmed partial DFA (``small``: ``int32 [n, k]``, ``-1``
    none; ``accept``: ``bool [n]``, ``n >= 1``), its states numbered in breadth-first order
    from the start state's class, letters in order: ``(int32 [m, k], bool [m])``."""
    n, k = small.shape
    block = equivalence_blocks(small, accept)
    nb = 0
    for s in range(n):
        if block[s] + 1 > nb:
            nb = block[s] + 1
    rep = np.full(nb, -1, np.int64)
    for s in range(n):
        if rep[block[s]] < 0:
            rep[block[s]] = s
    order = np.full(nb, -1, np.int64)
    queue = np.empty(nb, np.int64)
    order[block[0]] = 0
    queue[0] = block[0]
    head = 0
    size = 1
    while head < size:
        s = rep[queue[head]]
        head += 1
        for c in range(k):
            nxt = small[s, c]
            if nxt >= 0 and order[block[nxt]] < 0:
                order[block[nxt]] = size
                queue[size] = block[nxt]
                size += 1
    out = np.full((size, k), -1, np.int32)
    acc = np.zeros(size, np.bool_)
    for i in range(size):
        s = rep[queue[i]]
        acc[i] = accept[s]
        for c in range(k):
            nxt = small[s, c]
            if nxt >= 0:
                out[i, c] = order[block[nxt]]
    return out, acc


@kernel(nogil=True)
def hashed_reps(trans):  # type: ignore[no-untyped-def]
    """For each column of ``trans`` (``int32 [n, m]``), the first column with the same
    64-bit hash (``int64 [m]``), and whether every column equals that one (``False`` only
    if different columns share a hash). Two passes over the rows, in memory order."""
    n, m = trans.shape
    h = np.full(m, np.uint64(1469598103934665603), np.uint64)
    for s in range(n):
        for b in range(m):
            h[b] = (h[b] ^ np.uint64(trans[s, b] + 1)) * np.uint64(1099511628211)
    rep = np.empty(m, np.int64)
    for b in range(m):
        rep[b] = b
        for a in range(b):
            if rep[a] == a and h[a] == h[b]:
                rep[b] = a
                break
    exact = True
    for s in range(n):
        for b in range(m):
            if trans[s, b] != trans[s, rep[b]]:
                exact = False
    return rep, exact


@kernel(nogil=True)
def compared_reps(trans):  # type: ignore[no-untyped-def]
    """For each column of ``trans``, the first equal column (``int64 [m]``), by comparing
    columns entry by entry: what :func:`hashed_reps` gives when no hashes collide."""
    n, m = trans.shape
    rep = np.empty(m, np.int64)
    for b in range(m):
        rep[b] = b
        for a in range(b):
            if rep[a] != a:
                continue
            same = True
            for s in range(n):
                if trans[s, a] != trans[s, b]:
                    same = False
                    break
            if same:
                rep[b] = a
                break
    return rep


@kernel(nogil=True)
def column_classes_of(trans):  # type: ignore[no-untyped-def]
    """The distinct columns of ``trans`` (``int32 [n, m]``, C order) in order of first
    appearance: ``(small int32 [n, k], col_class int32 [m])`` with
    ``small[:, col_class] == trans``.

    Columns are grouped by hash (:func:`hashed_reps`); only if two different columns
    share a hash are they compared entry by entry (:func:`compared_reps`)."""
    n, m = trans.shape
    rep, exact = hashed_reps(trans)
    if not exact:  # a hash collision: compare columns entry by entry
        rep = compared_reps(trans)
    col_class = np.empty(m, np.int32)
    first = np.empty(m, np.int64)
    k = 0
    for b in range(m):
        if rep[b] == b:
            col_class[b] = k
            first[k] = b
            k += 1
        else:
            col_class[b] = col_class[rep[b]]
    small = np.empty((n, k), np.int32)
    for s in range(n):
        for c in range(k):
            small[s, c] = trans[s, first[c]]
    return small, col_class
