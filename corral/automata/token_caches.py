"""TokenCaches: one grammar's token caches of lexer states, as the mask kernels read them.

A lexer state's token cache says which tokens keep its lexeme alive (a dense bitmask in id
and rank space, or a sparse list of ranks) and where the lexeme can end inside a token
(its end-edge block); see ``kernels/mask.py``. The caches of one grammar are appended to a
few flat arrays indexed by ``cmeta`` (``int32 [G, CMETA_COLS]``, columns ``M_*`` of
``kernels/layout.py``), except the dense rows: those are the vocabulary's
(``dense_rows.py``), shared by every grammar and state that has the same row, and
``cmeta`` holds their row numbers there.

Entries are written under a lock and never change once written; a state's ``M_KIND`` is
set last, so a reader that sees it sees the whole entry. Growing an array builds a new
one and swaps it in, so a :meth:`TokenCaches.snapshot` taken earlier stays valid.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .dense_rows import DenseRow, DenseRows
from .kernels.layout import (
    CMETA_COLS,
    KIND_DENSE,
    KIND_MISSING,
    KIND_SPARSE,
    M_ENDS,
    M_IDX,
    M_KIND,
    M_LEN,
    M_NENDS,
)
from .state_cache import StateEntry


class TokenCaches:
    """The token caches of ``n_states`` lexer states, whose dense rows live in ``rows`` (the
    vocabulary's :class:`~.dense_rows.DenseRows`: ``words`` id words and ``rank_words`` rank
    words each).

    Thread-safe: entries are added under :attr:`lock`; readers take a :meth:`snapshot`.
    """

    def __init__(self, n_states: int, rows: DenseRows) -> None:
        self.rows = rows
        self.words = rows.words
        self.rank_words = rows.rank_words
        self.lock = threading.Lock()
        self._cmeta = np.zeros((n_states, CMETA_COLS), np.int32)
        # the dense rows this grammar refers to, by row: holding them keeps them in use
        self._held: dict[int, DenseRow] = {}
        self._retired: list[DenseRow] = []  # rows of caches replaced (see replace)
        self._sparse = np.zeros(1024, np.int32)
        self._n_sparse = 0
        self._ends = np.zeros(1024, np.int32)
        self._n_ends = 0

    def snapshot(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A consistent ``(cmeta, dense, dense_rank, sparse, ends)``, as the kernels take it
        (``dense`` and ``dense_rank`` are the vocabulary's shared rows)."""
        with self.lock:
            dense, dense_rank = self.rows.arrays()
            return self._cmeta, dense, dense_rank, self._sparse, self._ends

    def has(self, g: int) -> bool:
        """Whether lexer state ``g`` has a cache (call under :attr:`lock` to act on it)."""
        return bool(self._cmeta[g, M_KIND] != KIND_MISSING)

    def install(self, g: int, entry: StateEntry) -> None:
        """Make ``entry`` lexer state ``g``'s cache (the caller holds :attr:`lock`). A dense
        entry's row is referred to, not copied; a sparse entry is appended."""
        if entry.row is not None:
            if entry.row.pool is not self.rows:
                raise ValueError("a dense row of another vocabulary's pool")
            self._held[entry.row.row] = entry.row
            kind, idx, length = KIND_DENSE, entry.row.row, entry.n_tokens
        else:
            self._sparse = _append(self._sparse, self._n_sparse, entry.sparse)
            kind, idx, length = KIND_SPARSE, self._n_sparse, entry.sparse.shape[0]
            self._n_sparse += entry.sparse.shape[0]
        if entry.n_ends:
            self._ends = _append(self._ends, self._n_ends, entry.ends)
            ends, n_ends = self._n_ends, entry.n_ends
            self._n_ends += entry.ends.shape[0]
        else:
            ends, n_ends = 0, 0
        meta = self._cmeta
        meta[g, M_IDX], meta[g, M_LEN] = idx, length
        meta[g, M_ENDS], meta[g, M_NENDS] = ends, n_ends
        meta[g, M_KIND] = kind  # last: the entry is complete once it has a kind

    def stats(self) -> dict[str, int]:
        """``cached_states``, ``dense_masks`` (distinct dense rows referred to),
        ``sparse_ids``, ``end_edges`` and ``bytes``."""
        with self.lock:
            return {
                "cached_states": int((self._cmeta[:, M_KIND] != KIND_MISSING).sum()),
                "dense_masks": len(self._held),
                "sparse_ids": self._n_sparse,
                "end_edges": self._n_ends,
                "bytes": self.nbytes(),
            }

    def nbytes(self) -> int:
        """Bytes of the caches written so far (``stats()["bytes"]``, without the pass over
        every state that counts the cached ones); the dense rows it refers to count in full
        although other grammars may share them."""
        return int(
            len(self._held) * (self.words + self.rank_words) * 4
            + 4 * (self._n_sparse + self._n_ends)
        )

    # -- persistence (format: cache_file.py) ------------------------------------------------
    def export(self) -> dict[str, np.ndarray]:
        """The arrays a cache file holds, trimmed to what is used (a consistent copy), the
        dense rows numbered from 0 in the file."""
        with self.lock:
            cmeta = self._cmeta.copy()
            rows = sorted(self._held)
            dense_states = cmeta[:, M_KIND] == KIND_DENSE
            cmeta[dense_states, M_IDX] = np.searchsorted(rows, cmeta[dense_states, M_IDX])
            ids, ranks = self.rows.arrays()
            return {
                "cmeta": cmeta,
                "dense": ids[rows] if rows else np.zeros((0, self.words), np.uint32),
                "dense_rank": (ranks[rows] if rows else np.zeros((0, self.rank_words), np.uint32)),
                "sparse": self._sparse[: self._n_sparse],
                "ends": self._ends[: self._n_ends],
            }

    def replace(self, arrays: dict[str, np.ndarray]) -> None:
        """Take over the arrays of a cache file that passed :meth:`structure_problem` (its
        dense rows are added to the vocabulary's rows)."""
        dense, dense_rank = arrays["dense"], arrays["dense_rank"]
        added = [self.rows.add(dense[i], dense_rank[i]) for i in range(dense.shape[0])]
        cmeta = np.array(arrays["cmeta"], np.int32)  # a writable copy
        dense_states = np.flatnonzero(cmeta[:, M_KIND] == KIND_DENSE)
        if dense_states.size:
            to_row = np.array([h.row for h in added], np.int32)
            cmeta[dense_states, M_IDX] = to_row[cmeta[dense_states, M_IDX]]
        with self.lock:
            self._cmeta = cmeta
            # the rows replaced stay held: a snapshot taken before may still be read
            self._retired.extend(self._held.values())
            self._held = {h.row: h for h in added}
            self._sparse = arrays["sparse"]
            self._n_sparse = self._sparse.shape[0]
            self._ends = arrays["ends"]
            self._n_ends = self._ends.shape[0]

    def structure_problem(self, arrays: dict[str, np.ndarray], trie: Any) -> str:
        """``""`` when a file's arrays fit these caches and every reference stays inside
        them and ``trie`` (what the kernels index without bounds checks), else why not."""
        cmeta, dense, dense_rank = arrays["cmeta"], arrays["dense"], arrays["dense_rank"]
        sparse, ends = arrays["sparse"], arrays["ends"]
        if (
            cmeta.shape != self._cmeta.shape
            or dense.shape[1] != self.words
            or dense_rank.shape != (dense.shape[0], self.rank_words)
        ):
            return (
                f"array shapes cmeta {cmeta.shape}, dense {dense.shape}, dense_rank "
                f"{dense_rank.shape} do not fit {self._cmeta.shape[0]} lexer states and "
                f"{self.words}/{self.rank_words}-word masks"
            )
        kind, a, n, e0, ne = (
            cmeta[:, c].astype(np.int64) for c in (M_KIND, M_IDX, M_LEN, M_ENDS, M_NENDS)
        )
        dense_ok = (kind != KIND_DENSE) | ((a >= 0) & (a < dense.shape[0]))
        sparse_ok = (kind != KIND_SPARSE) | ((a >= 0) & (n >= 0) & (a + n <= sparse.shape[0]))
        ends_ok = (ne == 0) | ((e0 >= 0) & (ne > 0) & (e0 + 257 + 2 * ne <= ends.shape[0]))
        known = (kind == KIND_MISSING) | (kind == KIND_DENSE) | (kind == KIND_SPARSE)
        if not (
            np.all(known & dense_ok & sparse_ok & ends_ok)
            and (len(sparse) == 0 or (sparse.min() >= 0 and sparse.max() < trie.n_tokens))
            and (len(ends) == 0 or (ends.min() >= 0 and ends.max() < trie.n_nodes))
        ):
            return "a state's cache refers outside the file's arrays or the trie"
        built = (kind != KIND_MISSING) & (ne > 0)
        blocks = e0[built]
        if len(blocks):  # each end block: 257 offsets by child byte, from 0 up to its edges
            offsets = ends[blocks[:, None] + np.arange(257)]
            counts = ne[built]
            if not (
                np.all(offsets[:, 0] == 0)
                and np.all(np.diff(offsets, axis=1) >= 0)
                and np.all(offsets[:, 256] == counts)
            ):
                return "an end-edge block's offsets are inconsistent"
        # dense rows may hold trie tokens only (never special, EOS or padding ids)
        rank_tail = np.zeros(self.rank_words, np.uint32)
        if trie.n_tokens % 32:
            rank_tail[-1] = np.uint32(~((1 << (trie.n_tokens % 32)) - 1) & 0xFFFFFFFF)
        if np.any(dense & ~trie.all_ids) or np.any(dense_rank & rank_tail):
            return "a dense row allows tokens that are not in the trie"
        return ""


def _append(buf: np.ndarray, n: int, values: np.ndarray) -> np.ndarray:
    """``buf`` (its first ``n`` entries in use) with ``values`` written after them; a new
    array, half as long again (or as long as needed), when they do not fit. Half, not
    double: these arrays grow while a grammar's matchers advance, and doubling left 49 KB
    held for 35 KB of end edges in use a MaskBench schema."""
    need = n + values.shape[0]
    if need > buf.shape[0]:
        grown = np.zeros(max(need, buf.shape[0] * 3 // 2), buf.dtype)
        grown[:n] = buf[:n]
        buf = grown
    buf[n:need] = values
    return buf
