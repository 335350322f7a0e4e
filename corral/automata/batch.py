"""Filling the bitmasks of a whole batch in one call."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..errors import VocabularyMismatchError
from .bitmask import as_int, as_numpy_bitmask
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
    (an integer >= 1; default: up to the number of CPUs); no Python runs per token.

    Raises:
        VocabularyMismatchError: the matchers' grammars were compiled for different
            vocabularies.
        ShapeError: a bitmask of another dtype, width, device or layout, or with fewer rows
            than matchers.
        InvalidArgumentError, ArgumentTypeError: ``num_threads`` below 1, or not an integer.
    """
    if num_threads is not None:
        num_threads = as_int(num_threads, "num_threads", minimum=1)
    n = len(matchers)
    rows_for = f" (a row per matcher: {n})"
    first = next((m for m in matchers if m is not None), None)
    if first is None:
        as_numpy_bitmask(bitmask, None, rows=n, rows_for=rows_for)[:n] = -1
        return
    vocab = first.compiled.vocab
    for i, m in enumerate(matchers):
        if m is not None and m.compiled.vocab is not vocab and m.compiled.vocab.hash != vocab.hash:
            raise VocabularyMismatchError(
                "the matchers must share one vocabulary, the first one's "
                f"({first.vocab_size} tokens, hash {vocab.hash[:12]}), got matcher {i} of "
                f"another ({m.vocab_size} tokens, hash {m.compiled.vocab.hash[:12]})"
            )
    arr = as_numpy_bitmask(bitmask, first.vocab_size, rows=n, rows_for=rows_for)

    def fill(i: int) -> None:
        m = matchers[i]
        if m is None:
            arr[i] = -1
        else:
            m.fill_row(arr[i].view(np.uint32))

    workers = num_threads if num_threads is not None else min(n, os.cpu_count() or 1)
    if workers <= 1 or n == 1:
        for i in range(n):
            fill(i)
        return
    list(_pool(workers).map(fill, range(n)))
