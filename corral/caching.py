"""One bounded, thread-safe cache type for every in-memory cache of corral.

A :class:`BoundedCache` is a least-recently-used map bounded by its number of entries and,
when given a ``size_of`` function, by the bytes of its entries (measured once, when an
entry is stored). Compiled grammars, built grammars, token caches of lexer states, loaded
models and vocabularies all live in one of these, each owned by the object that uses it
(a :class:`corral.Compiler`, a generation session), so each can be sized and cleared on
its own.

This module imports nothing from the rest of the package but :mod:`corral.errors`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from .errors import InvalidArgumentError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

__all__ = ["BoundedCache"]


class BoundedCache(Generic[K, V]):
    """A thread-safe LRU map bounded by entries and (optionally) by bytes.

    Args:
        max_entries: most entries kept; ``0`` keeps nothing (every lookup misses).
        max_bytes: most bytes kept, as measured by ``size_of``; ``None``: no byte bound.
        size_of: the size in bytes of a value, called once when it is stored; required
            with ``max_bytes``. A value larger than ``max_bytes`` on its own is not kept.

    Attributes:
        hits, misses: lookups answered from the cache, and not.
    """

    def __init__(
        self,
        max_entries: int,
        *,
        max_bytes: int | None = None,
        size_of: Callable[[V], int] | None = None,
    ) -> None:
        if max_entries < 0:
            raise InvalidArgumentError(f"max_entries must be >= 0, got {max_entries}")
        if max_bytes is not None and max_bytes < 0:
            raise InvalidArgumentError(f"max_bytes must be >= 0, got {max_bytes}")
        if max_bytes is not None and size_of is None:
            raise InvalidArgumentError(
                f"max_bytes={max_bytes} needs size_of (a function giving a value's bytes), "
                "got size_of=None"
            )
        self.max_entries = int(max_entries)
        self.max_bytes = None if max_bytes is None else int(max_bytes)
        self._size_of = size_of
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @property
    def nbytes(self) -> int:
        """Bytes of the entries kept (0 without ``size_of``)."""
        return self._bytes

    def get(self, key: K) -> V | None:
        """The value stored under ``key`` (now the most recently used), or ``None``."""
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return hit[0]

    def put(self, key: K, value: V) -> None:
        """Store ``value`` under ``key`` (replacing any), then drop the least recently used
        entries until both bounds hold."""
        if self.max_entries == 0:
            return  # nothing is kept: do not even measure the value
        size = self._size_of(value) if self._size_of is not None else 0
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if self.max_bytes is not None and size > self.max_bytes:
                return
            self._items[key] = (value, size)
            self._bytes += size
            while len(self._items) > self.max_entries or (
                self.max_bytes is not None and self._bytes > self.max_bytes
            ):
                _, (_, s) = self._items.popitem(last=False)
                self._bytes -= s

    def get_or_build(self, key: K, build: Callable[[], V]) -> V:
        """The value under ``key``, built by ``build()`` and stored on a miss.

        ``build`` runs outside the lock: two threads missing the same key at once may both
        build it (the last one stored is kept; both results are equal by contract).
        """
        value = self.get(key)
        if value is None:
            value = build()
            self.put(key, value)
        return value

    def values(self) -> list[V]:
        """The values kept, least recently used first (a snapshot)."""
        with self._lock:
            return [v for v, _ in self._items.values()]

    def clear(self) -> None:
        """Drop every entry (the hit and miss counts are kept)."""
        with self._lock:
            self._items.clear()
            self._bytes = 0
