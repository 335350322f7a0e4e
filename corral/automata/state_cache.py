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

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

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


class StateCacheStore:
    """A thread-safe, byte-bounded LRU map from state digests to :class:`StateEntry`.

    ``max_bytes=0`` turns sharing off (every grammar builds its own caches).
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._entries: OrderedDict[bytes, StateEntry] = OrderedDict()
        self._lock = threading.Lock()
        self._bytes = 0
        self.max_bytes = int(max_bytes)
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def get(self, key: bytes) -> StateEntry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry

    def put(self, key: bytes, entry: StateEntry) -> None:
        size = entry.nbytes
        with self._lock:
            if size > self.max_bytes or key in self._entries:
                return
            self._entries[key] = entry
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, old = self._entries.popitem(last=False)
                self._bytes -= old.nbytes

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
