"""``kernels.borrow``: a kernel's array arguments without reference counting.

The borrowed arrays must read and write the caller's data, leave every reference count as
it was, and pass numbers and nested tuples through unchanged.
"""

from __future__ import annotations

import sys

import numba
import numpy as np
import pytest

from corral.automata.kernels.borrow import borrow


@numba.njit(inline="always")
def _push(P, stamp, ctx, it, o):  # type: ignore[no-untyped-def]
    """Append ``(it, o)`` to ``P`` unless ``it`` was stamped this round (a chart helper's
    shape: three arrays, called per item)."""
    if stamp[it] == ctx[0]:
        return
    stamp[it] = ctx[0]
    pc = ctx[1]
    P[pc, 0] = it
    P[pc, 1] = o
    ctx[1] = pc + 1


@numba.njit
def _fill_counted(P, stamp, ctx, n):  # type: ignore[no-untyped-def]
    for i in range(n):
        _push(P, stamp, ctx, (i * 7) % 97, i)
    return ctx[1]


@numba.njit
def _fill_borrowed(P, stamp, ctx, n):  # type: ignore[no-untyped-def]
    P, stamp, ctx = borrow((P, stamp, ctx))
    for i in range(n):
        _push(P, stamp, ctx, (i * 7) % 97, i)
    return ctx[1]


@numba.njit
def _nested(t):  # type: ignore[no-untyped-def]
    b = borrow(t)
    b[1][0][0] = 5  # writes the caller's array
    return b[0] + b[1][1] + b[1][0].sum() + b[2].shape[0]


@numba.njit
def _not_arrays(x):  # type: ignore[no-untyped-def]
    return borrow(x)


def _arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    P = np.full((200, 2), -1, np.int32)
    stamp = np.zeros(100, np.int64)
    ctx = np.array([1, 0], np.int64)
    return P, stamp, ctx


def test_borrowed_arrays_read_and_write_the_callers_data() -> None:
    a = _arrays()
    b = _arrays()
    assert _fill_counted(*a, 150) == _fill_borrowed(*b, 150) == 97
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x, y)


def test_reference_counts_are_left_as_they_were() -> None:
    P, stamp, ctx = _arrays()
    _fill_borrowed(P, stamp, ctx, 10)  # compiled
    before = [sys.getrefcount(x) for x in (P, stamp, ctx)]
    for _ in range(1000):
        ctx[1] = 0
        stamp[:] = 0
        _fill_borrowed(P, stamp, ctx, 150)
    assert [sys.getrefcount(x) for x in (P, stamp, ctx)] == before
    assert P[:97, 0].tolist() == [(i * 7) % 97 for i in range(97)]
    assert P[:97, 1].tolist() == list(range(97))


def test_numbers_and_nested_tuples_pass_through() -> None:
    inner = np.arange(4, dtype=np.int64)
    assert (
        _nested((np.int64(3), (inner, np.int64(10)), np.zeros(6))) == 3 + 10 + (5 + 1 + 2 + 3) + 6
    )
    assert inner[0] == 5


def test_anything_but_arrays_numbers_and_tuples_is_refused() -> None:
    with pytest.raises(numba.core.errors.TypingError):
        _not_arrays("text")
    with pytest.raises(numba.core.errors.TypingError):
        _not_arrays((np.zeros(2), "text"))


def test_importing_the_kernels_leaves_numbas_numpy_support_unimported() -> None:
    """``borrow`` is declared when the kernels are imported, but what its code generation
    needs (Numba's NumPy support, 40-100 ms to import) is imported only when a kernel
    compiles: a process that loads its kernels from a cache never needs it."""
    import subprocess

    code = (
        "import sys\n"
        "import corral.automata\n"
        "import corral.automata.kernels.mask\n"
        "print('numba.np.arrayobj' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
