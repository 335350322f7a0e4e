"""Which states of an automaton can reach acceptance, for Numba kernels that build
automata (the product of ``restrict.py``, the subset construction of ``subset.py``,
trimming in ``product.py``), and the grouping of edges by target it walks (also the
FOLLOW fixpoints' of ``corral/automata/follow_bytes.py``)."""

from __future__ import annotations

import numpy as np

from ...jit import kernel


@kernel(nogil=True, inline="always")
def by_target(n, src, dst, n_edges):  # type: ignore[no-untyped-def]
    """The first ``n_edges`` edges ``src[e] -> dst[e]`` between ``n`` nodes grouped by
    target: ``(start int64 [n + 1], sources int64 [n_edges])``, the sources of the edges
    into ``t`` being ``sources[start[t]:start[t + 1]]``."""
    start = np.zeros(n + 1, np.int64)
    for e in range(n_edges):
        start[dst[e] + 1] += 1
    for q in range(n):
        start[q + 1] += start[q]
    sources = np.empty(n_edges, np.int64)
    fill = start[:n].copy()
    for e in range(n_edges):
        t = dst[e]
        sources[fill[t]] = src[e]
        fill[t] += 1
    return start, sources


@kernel(nogil=True, inline="always")
def co_reachable(n, src, dst, n_edges, accept):  # type: ignore[no-untyped-def]
    """``bool [n]``: the states with a path to an accepting one (``accept``), along the
    first ``n_edges`` edges ``src[e] -> dst[e]``: a reverse walk from the accepting
    states over the edges grouped by target."""
    start, rev = by_target(n, src, dst, n_edges)
    live = np.zeros(n, np.bool_)
    work = np.empty(n, np.int64)
    top = 0
    for q in range(n):
        if accept[q]:
            live[q] = True
            work[top] = q
            top += 1
    while top > 0:
        top -= 1
        t = work[top]
        for e in range(start[t], start[t + 1]):
            q = rev[e]
            if not live[q]:
                live[q] = True
                work[top] = q
                top += 1
    return live
