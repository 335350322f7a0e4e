"""Kernels: 64-bit values kept in two columns of an ``int32`` array.

The chart's arrays are ``int32`` (``kernels/layout.py``): rule and lexer-state numbers,
set numbers and row numbers fit, and a row takes 20 bytes instead of 32. The two values
that need 64 bits, an item's continuation class and a set's structural hash, take two
adjacent columns: the low word (as unsigned) in column ``c`` and the high word in ``c + 1``.
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel


@kernel(nogil=True, inline="always")
def get64(a, r, c):  # type: ignore[no-untyped-def]
    """The 64-bit value in columns ``c`` (low word) and ``c + 1`` (high) of row ``r``."""
    return (np.int64(a[r, c + 1]) << 32) | (np.int64(a[r, c]) & 0xFFFFFFFF)


@kernel(nogil=True, inline="always")
def put64(a, r, c, v):  # type: ignore[no-untyped-def]
    """Store the 64-bit value ``v`` in columns ``c`` (low word) and ``c + 1`` of row ``r``."""
    a[r, c] = np.int32(np.int64(v) & 0xFFFFFFFF)
    a[r, c + 1] = np.int32(np.int64(v) >> 32)


def get64_py(a: np.ndarray, r: int, c: int) -> int:
    """:func:`get64` from Python (a Python ``int``, signed)."""
    return (a.item(r, c + 1) << 32) | (a.item(r, c) & 0xFFFFFFFF)
