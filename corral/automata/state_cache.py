"""Token caches of lexer states, shared by every grammar compiled for one vocabulary.

A lexer state's token cache (which tokens keep its lexeme alive, and where the lexeme can
end inside a token) depends only on what the state does to the first ``max_depth`` bytes
(``kernels/signature.py``). JSON Schemas repeat the same string, number and key automata
within a schema and across schemas, so the caches are kept per vocabulary under the
digest of that description, in a store bounded in bytes (least recently used entries are
dropped first). Each grammar copies the entries it uses into its own arrays, so dropping
an entry never affects a compiled grammar.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ..caching import BoundedCache

DEFAULT_MAX_BYTES = 256 << 20


@dataclass(frozen=True)
class StateEntry:
    """The token cache of one lexer state.

    Attributes:
        n_tokens: number of tokens that keep the lexeme alive.
        dense: ``uint32 [words]`` id-space bitmask of those tokens, or ``None`` (sparse).
        dense_rank: ``uint32 [rank_words]`` the same set in rank space, or ``None``.
        sparse: ``int32`` ranks of those tokens (empty when dense).
        ends: end-edge block (257 offsets by child byte, then ``(node, child)`` pairs).
        n_ends: number of end edges (``0``: ``ends`` is empty).
    """

    n_tokens: int
    dense: np.ndarray | None
    dense_rank: np.ndarray | None
    sparse: np.ndarray
    ends: np.ndarray
    n_ends: int

    @property
    def nbytes(self) -> int:
        n = self.sparse.nbytes + self.ends.nbytes
        if self.dense is not None and self.dense_rank is not None:
            n += self.dense.nbytes + self.dense_rank.nbytes
        return n


def _entry_bytes(entry: StateEntry) -> int:
    return entry.nbytes


class StateCacheStore:
    """A thread-safe, byte-bounded LRU map from state digests to :class:`StateEntry`.

    A :class:`~corral.caching.BoundedCache` bounded by bytes alone (``max_bytes``, which may
    be changed at any time); ``max_bytes=0`` turns sharing off (every grammar builds its
    own caches). An entry larger than ``max_bytes`` is not kept; a key already present is
    left as it is (equal digests describe equal caches).

    Attributes:
        hits, misses: lookups answered from the store, and not.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._cache: BoundedCache[bytes, StateEntry] = BoundedCache(
            sys.maxsize, max_bytes=int(max_bytes), size_of=_entry_bytes
        )

    @property
    def max_bytes(self) -> int:
        """Most bytes kept (``0``: sharing off)."""
        return self._cache.max_bytes or 0

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        if value < 0:
            raise ValueError(f"max_bytes must be >= 0, not {value}")
        self._cache.max_bytes = int(value)

    @property
    def hits(self) -> int:
        return self._cache.hits

    @property
    def misses(self) -> int:
        return self._cache.misses

    def __len__(self) -> int:
        return len(self._cache)

    @property
    def nbytes(self) -> int:
        """Bytes of the entries kept."""
        return self._cache.nbytes

    def get(self, key: bytes) -> StateEntry | None:
        """The entry of a state digest (now the most recently used), or ``None``."""
        return self._cache.get(key)

    def put(self, key: bytes, entry: StateEntry) -> None:
        """Keep ``entry`` under ``key`` unless the key is present, then drop the least
        recently used entries until ``max_bytes`` holds."""
        if key not in self._cache:
            self._cache.put(key, entry)

    def clear(self) -> None:
        """Drop every entry (the hit and miss counts are kept)."""
        self._cache.clear()
