"""One lexer step: the kernels' only way to read a lexer transition.

A grammar's lexer reaches the kernels as ``lex``, in one of two forms:

* ``lex_trans``, an ``int16 [G, n_classes]`` array: every lexer state is a dense row
  (at most 32,767 states: nearly every grammar);
* ``(lex_trans, row_start, cls, dst)``, all ``int32``, when the grammar has sparse automata
  (a span, an entity set, a large enum: up to millions of states with one or two
  transitions each) or more dense states than ``int16`` holds: states ``0`` to ``D - 1``
  are the ``D`` rows of ``lex_trans``; state ``D + r`` has the transitions
  ``row_start[r]:row_start[r + 1]`` of ``cls`` (byte class, increasing within a row) and
  ``dst`` (next state); ``G - D`` may be 0. See ``corral/automata/tables.py``.

Numba compiles every kernel once per form, so the kernels of dense grammars read
``lex_trans[s, c]`` and nothing else. A branch on ``s < D`` in the one compiled form
made MaskBench masks 1.3-2x slower at the median and 3-4x at p99 although dense grammars
never take it (inlined or not): the hot walks pay for the code, not for running it.

Numba keys each kernel's disk cache by its own source file, and the functions here are
compiled into the kernels that use them: after editing this module in a checkout, clear
``corral/automata/kernels/__pycache__`` (an installed release has fresh files anyway).
"""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.extending import overload

from ...jit import kernel

__all__ = ["lex_classes", "lex_dense", "lex_next"]


def lex_next(lex, s, c):  # type: ignore[no-untyped-def]
    """The lexer state after a byte of class ``c`` in state ``s``, or ``-1`` (dead).

    Plain Python for callers outside kernels; kernels get the overloads below. These and
    their implementations are unannotated: Numba inlines an overload only where the
    signatures, annotations included, are the same."""
    if isinstance(lex, np.ndarray):
        return int(lex[s, c])
    dense, row_start, cls, dst = lex
    if s < dense.shape[0]:
        return int(dense[s, c])
    a, b = int(row_start[s - dense.shape[0]]), int(row_start[s - dense.shape[0] + 1])
    i = a + int(np.searchsorted(cls[a:b], c))
    return int(dst[i]) if i < b and cls[i] == c else -1


def lex_dense(lex):  # type: ignore[no-untyped-def]
    """The dense rows of ``lex``."""
    return lex if isinstance(lex, np.ndarray) else lex[0]


def lex_classes(lex):  # type: ignore[no-untyped-def]
    """The number of byte classes."""
    return int(lex_dense(lex).shape[1])


@kernel(nogil=True)
def _sparse_next(row_start, cls, dst, r, c):  # type: ignore[no-untyped-def]
    """Sparse row ``r``'s target for class ``c`` (binary search), or ``-1``. Out of line:
    inlined, its loop trips Numba's pedantic IR checks (``NumbaIRAssumptionWarning``)."""
    lo = row_start[r]
    hi = row_start[r + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        v = cls[mid]
        if v < c:
            lo = mid + 1
        elif v > c:
            hi = mid
        else:
            return dst[mid]
    return np.int32(-1)


@overload(lex_next, inline="always")
def _lex_next(lex, s, c):  # type: ignore[no-untyped-def]
    if isinstance(lex, types.Array):

        def dense(lex, s, c):  # type: ignore[no-untyped-def]
            return lex[s, c]

        return dense

    def mixed(lex, s, c):  # type: ignore[no-untyped-def]
        d = lex[0]
        if s < d.shape[0]:
            return d[s, c]
        return _sparse_next(lex[1], lex[2], lex[3], s - d.shape[0], c)

    return mixed


@overload(lex_dense, inline="always")
def _lex_dense(lex):  # type: ignore[no-untyped-def]
    if isinstance(lex, types.Array):
        return lambda lex: lex
    return lambda lex: lex[0]


@overload(lex_classes, inline="always")
def _lex_classes(lex):  # type: ignore[no-untyped-def]
    if isinstance(lex, types.Array):
        return lambda lex: lex.shape[1]
    return lambda lex: lex[0].shape[1]
