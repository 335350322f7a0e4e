"""The compact automaton of one string, by one Numba kernel (see
:func:`corral.grammar.regex.literal_dfa`)."""

from __future__ import annotations

import numpy as np

from ...jit import kernel

__all__ = ["literal_columns"]


@kernel(nogil=True)
def literal_columns(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(table int32 [n + 1, k], classes uint8 [256], accept bool [n + 1])`` for the
    ``n`` bytes ``data`` (``uint8``): state ``i`` reads
    ``data[i]`` into state ``i + 1``, the last state accepts. Column 0 is dead (every
    byte the text does not hold reads it), then one column for each distinct byte of the
    text, in byte order; ``k`` is one more than the number of distinct bytes.
    """
    n = data.shape[0] + 1
    present = np.zeros(256, np.bool_)
    for i in range(data.shape[0]):
        present[data[i]] = True
    classes = np.zeros(256, np.uint8)
    k = 1
    for b in range(256):
        if present[b]:
            classes[b] = k
            k += 1
    table = np.full((n, k), -1, np.int32)
    for i in range(data.shape[0]):
        table[i, classes[data[i]]] = i + 1
    accept = np.zeros(n, np.bool_)
    accept[n - 1] = True
    return table, classes, accept
