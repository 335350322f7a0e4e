"""An open-addressing hash table from ``int64`` keys to non-negative ``int64`` values,
as plain arrays for Numba kernels (the determinisation kernels' indexes).

``(keys, vals)``: two ``int64`` arrays of a power-of-two length; an empty slot has value
``-1``; a key's home slot is its mixed bits, collisions probe linearly. Kept at most
half full. Numba's typed dictionary would do the same, but a kernel that uses one takes
several times longer to load from the cache, which a process pays at its first compile.
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel

_MIX = np.uint64(0x9E3779B97F4A7C15)


@kernel(nogil=True, inline="always")
def table_new(capacity):  # type: ignore[no-untyped-def]
    """An empty table with room for ``capacity`` (a power of two) slots."""
    return np.zeros(capacity, np.int64), np.full(capacity, -1, np.int64)


@kernel(nogil=True, inline="always")
def _home(key, mask):  # type: ignore[no-untyped-def]
    return np.int64((np.uint64(key) * _MIX) >> np.uint64(32)) & mask


@kernel(nogil=True, inline="always")
def table_get(keys, vals, key):  # type: ignore[no-untyped-def]
    """The value of ``key``, or ``-1``."""
    mask = keys.shape[0] - 1
    i = _home(key, mask)
    while vals[i] >= 0:
        if keys[i] == key:
            return vals[i]
        i = (i + 1) & mask
    return np.int64(-1)


@kernel(nogil=True, inline="always")
def table_put(keys, vals, count, key, value):  # type: ignore[no-untyped-def]
    """Set ``key`` to ``value`` (``>= 0``); returns ``(keys, vals, count)``, the arrays
    grown (and rehashed) when they would be more than half full."""
    if 2 * (count + 1) > keys.shape[0]:
        old_keys, old_vals = keys, vals
        keys, vals = table_new(2 * old_keys.shape[0])
        mask = keys.shape[0] - 1
        for j in range(old_keys.shape[0]):
            if old_vals[j] >= 0:
                i = _home(old_keys[j], mask)
                while vals[i] >= 0:
                    i = (i + 1) & mask
                keys[i] = old_keys[j]
                vals[i] = old_vals[j]
    mask = keys.shape[0] - 1
    i = _home(key, mask)
    while vals[i] >= 0:
        if keys[i] == key:
            vals[i] = value
            return keys, vals, count
        i = (i + 1) & mask
    keys[i] = key
    vals[i] = value
    return keys, vals, count + 1
