"""Filling the bitmasks of a whole batch in one call."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .bitmask import as_numpy_bitmask
from .matcher import Matcher

_POOL: ThreadPoolExecutor | None = None


def _pool(n: int) -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None or _POOL._max_workers < n:  # type: ignore[attr-defined]
        _POOL = ThreadPoolExecutor(max_workers=n, thread_name_prefix="corral-mask")
    return _POOL


def fill_next_token_bitmasks(
    matchers: Sequence[Matcher | None], bitmask: Any, *, num_threads: int | None = None
) -> None:
    """Fill row ``i`` of ``bitmask`` with the allowed tokens of ``matchers[i]``.

    ``bitmask``: ``int32 [batch, ceil(V/32)]`` with ``batch >= len(matchers)`` (NumPy or
    CPU torch). A ``None`` matcher leaves its row fully allowed (an unconstrained row).
    The mask kernels release the GIL, so rows are filled on ``num_threads`` threads
    (default: up to the number of CPUs); no Python runs per token.
    """
    if not matchers:
        return
    first = next((m for m in matchers if m is not None), None)
    if first is None:
        arr = np.asarray(bitmask)
        arr[: len(matchers)] = -1
        return
    vocab_size = first.vocab_size
    for m in matchers:
        if m is not None and m.vocab_size != vocab_size:
            raise ValueError(
                f"matchers disagree on the vocabulary size ({m.vocab_size} vs {vocab_size})"
            )
    arr = as_numpy_bitmask(bitmask, vocab_size)
    if arr.shape[0] < len(matchers):
        raise ValueError(f"bitmask has {arr.shape[0]} rows for {len(matchers)} matchers")

    def fill(i: int) -> None:
        m = matchers[i]
        if m is None:
            arr[i] = -1
        else:
            m.fill_row(arr[i].view(np.uint32))

    n = len(matchers)
    workers = num_threads if num_threads is not None else min(n, os.cpu_count() or 1)
    if workers <= 1 or n == 1:
        for i in range(n):
            fill(i)
        return
    list(_pool(workers).map(fill, range(n)))
