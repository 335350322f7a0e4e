"""Scratch arrays that belong to the calling thread.

Kernels that write large working arrays (the mask walk's memo and stacks, a token-cache
walk's output) get them here instead of from each matcher or grammar: one call runs to
its end before the next starts on the same thread, so every matcher and grammar of a
vocabulary can share them there. A thread's arrays go with the thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")

_LOCAL = threading.local()


def per_thread(key: Hashable, make: Callable[[], T]) -> T:
    """The calling thread's object for ``key``, made with ``make()`` the first time."""
    mine: dict[Hashable, object] | None = getattr(_LOCAL, "objects", None)
    if mine is None:
        mine = _LOCAL.objects = {}
    found = mine.get(key)
    if found is None:
        found = mine[key] = make()
    return found  # type: ignore[return-value]
