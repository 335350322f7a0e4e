"""Token caches of lexer states, shared by every grammar compiled for one vocabulary.

A lexer state's token cache (which tokens keep its lexeme alive, and where the lexeme can
end inside a token) depends only on what the state does to the first ``max_depth`` bytes
(``kernels/signature.py``). JSON Schemas repeat the same string, number and key automata
within a schema and across schemas, so the caches are kept per vocabulary under the
digest of that description, in a store bounded in bytes (least recently used entries are
dropped first). Each grammar copies the sparse parts of the entries it uses into its own
arrays and keeps the entries themselves, whose dense rows live once in the vocabulary's
:class:`~.dense_rows.DenseRows`, so dropping an entry never affects a compiled grammar.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ..caching import BoundedCache
from .dense_rows import DenseRow

DEFAULT_MAX_BYTES = 256 << 20


@dataclass(frozen=True)
class StateEntry:
    """The token cache of one lexer state.

    Attributes:
        n_tokens: number of tokens that keep the lexeme alive.
        row: the vocabulary's dense row of those tokens (``automata/dense_rows.py``), or
            ``None`` (sparse). The row is in use while this entry lives.
        sparse: ``int32`` ranks of those tokens (empty when dense).
        ends: end-edge block (257 offsets by child byte, then ``(node, child)`` pairs).
        n_ends: number of end edges (``0``: ``ends`` is empty).
    """

    n_tokens: int
    row: DenseRow | None
    sparse: np.ndarray
    ends: np.ndarray
    n_ends: int

    @property
    def dense(self) -> np.ndarray | None:
        """``uint32 [words]`` id-space bitmask of the tokens (read-only), or ``None``."""
        return None if self.row is None else self.row.ids

    @property
    def dense_rank(self) -> np.ndarray | None:
        """``uint32 [rank_words]`` the same set in rank space (read-only), or ``None``."""
        return None if self.row is None else self.row.ranks

    @property
    def nbytes(self) -> int:
        n = self.sparse.nbytes + self.ends.nbytes
        if self.row is not None:
            n += self.row.nbytes
        return n


def _entry_bytes(entry: StateEntry) -> int:
    return entry.nbytes


class StateCacheStore(BoundedCache[bytes, StateEntry]):
    """A thread-safe LRU map from state digests to :class:`StateEntry`, bounded by bytes
    alone (``max_bytes``, which may be changed at any time; ``0`` turns sharing off: every
    grammar builds its own caches). An entry larger than ``max_bytes`` is not kept; a key
    already present is left as it is (equal digests describe equal caches).
    """

    max_bytes: int

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        super().__init__(sys.maxsize, max_bytes=int(max_bytes), size_of=_entry_bytes)

    def put(self, key: bytes, entry: StateEntry) -> None:
        """Keep ``entry`` under ``key`` unless the key is present, then drop the least
        recently used entries until ``max_bytes`` holds."""
        if key not in self:
            super().put(key, entry)
