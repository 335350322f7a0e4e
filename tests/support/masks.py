"""A matcher's next-token mask as a boolean array, for tests that compare masks."""

from __future__ import annotations

import numpy as np

import corral
from corral import allocate_bitmask, bitmask_to_bool


def allowed(m: corral.Matcher) -> np.ndarray:
    """``bool [V]``: the tokens ``m`` allows next (one fresh bitmask row)."""
    bm = allocate_bitmask(1, m.vocab_size)
    m.fill_bitmask(bm, 0)
    return bitmask_to_bool(bm, m.vocab_size)[0]
