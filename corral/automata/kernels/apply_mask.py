"""Applying filled bitmasks to logits rows in place (CPU float32 logits)."""

from __future__ import annotations

import numpy as np

from ...jit import kernel


@kernel(nogil=True)
def mask_rows(logits: np.ndarray, rows: np.ndarray, bitmask: np.ndarray, vocab_size: int) -> None:
    """``logits[rows[j], i] = -inf`` wherever bit ``i`` of ``bitmask[j]`` is 0, and for every
    ``i >= vocab_size``.

    ``logits``: ``float32 [B, V]`` (C-contiguous rows); ``rows``: ``int64 [k]``;
    ``bitmask``: ``int32 [>=k, ceil(vocab_size/32)]``. One pass over the rows' logits.
    """
    neg = np.float32(-np.inf)
    width = logits.shape[1]
    limit = min(width, vocab_size)
    for j in range(rows.shape[0]):
        row = logits[rows[j]]
        words = bitmask[j]
        for w in range((limit + 31) // 32):
            word = np.uint32(words[w])
            if word == np.uint32(0xFFFFFFFF):
                continue
            base = w * 32
            top = min(32, limit - base)
            for b in range(top):
                if not (word >> np.uint32(b)) & np.uint32(1):
                    row[base + b] = neg
        for i in range(limit, width):
            row[i] = neg
