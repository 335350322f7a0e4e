"""Dense token-cache rows of one vocabulary: one copy of each for the whole process.

A lexer state in which most tokens keep the lexeme alive (inside a JSON string, under
``\\S+``) has a *dense* token cache: the set of those tokens as a bitmask in token-id space
(``words`` ``uint32``) and in trie-rank space (``rank_words``), 32 KB a state with
Llama-3's 128,257 tokens. JSON Schemas repeat the same string automata within a schema and
across schemas, so the same row is wanted by many lexer states of many grammars.

:class:`DenseRows` keeps such rows in two arrays shared by every grammar compiled for the
vocabulary, which is what the mask kernels index (``acc_dense[cmeta[g, M_IDX]]``). A row
belongs to a :class:`DenseRow` handle: the :class:`~.state_cache.StateEntry` that holds
the handle is referenced by the shared store (``Vocabulary.state_cache``) and by each
grammar that installed it, and when the last of them lets go the row is reused. Before,
each grammar copied the rows it used into arrays of its own, and the store kept one more
copy: on 100 MaskBench schemas with ten live matchers each, 538 rows were installed for
at most 198 distinct ones.

Rows are written once, under the pool's lock, before any grammar refers to them, and
never change while referenced. Growing builds new arrays and swaps the pair in with one
assignment, so arrays taken earlier stay valid for the rows they held (a freed row is
only rewritten in the arrays current at that time, and no live grammar refers to it).
"""

from __future__ import annotations

import threading

import numpy as np

_START_ROWS = 8


class DenseRows:
    """The dense rows of one vocabulary: ``words`` id-space and ``rank_words`` rank-space
    ``uint32`` words each. Thread-safe."""

    def __init__(self, words: int, rank_words: int) -> None:
        self.words = words
        self.rank_words = rank_words
        self._lock = threading.Lock()
        self._arrays = (
            np.zeros((_START_ROWS, words), np.uint32),
            np.zeros((_START_ROWS, rank_words), np.uint32),
        )
        self._high = 0  # rows ever handed out; those below it not in _free are in use
        self._free: list[int] = []
        # rows whose handles were collected: appended by DenseRow.__del__, which may run
        # in any thread at any allocation (this lock may be held), so it takes no lock
        self._released: list[int] = []

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, ranks)``: ``uint32 [R, words]`` and ``uint32 [R, rank_words]``, holding
        every row handed out so far (one consistent pair)."""
        return self._arrays

    def add(self, ids: np.ndarray, ranks: np.ndarray) -> DenseRow:
        """A new row holding ``ids`` (``uint32 [words]``) and ``ranks`` (``uint32
        [rank_words]``); it is reused once the returned handle is garbage."""
        with self._lock:
            while self._released:
                self._free.append(self._released.pop())
            if self._free:
                row = self._free.pop()
            else:
                row = self._high
                if row == self._arrays[0].shape[0]:
                    self._arrays = (_grow(self._arrays[0], row), _grow(self._arrays[1], row))
                self._high += 1
            a_ids, a_ranks = self._arrays
            a_ids[row] = ids
            a_ranks[row] = ranks
        return DenseRow(self, row)

    @property
    def rows_in_use(self) -> int:
        """Rows held by live handles (rows collected but not yet reused are not counted)."""
        with self._lock:
            return self._high - len(self._free) - len(self._released)

    def _release(self, row: int) -> None:
        self._released.append(row)


class DenseRow:
    """A row of a :class:`DenseRows`, in use while this handle lives."""

    __slots__ = ("pool", "row")

    def __init__(self, pool: DenseRows, row: int) -> None:
        self.pool = pool
        self.row = row

    @property
    def ids(self) -> np.ndarray:
        """``uint32 [words]``: the row in token-id space (a read-only view)."""
        return _read_only(self.pool.arrays()[0][self.row])

    @property
    def ranks(self) -> np.ndarray:
        """``uint32 [rank_words]``: the row in trie-rank space (a read-only view)."""
        return _read_only(self.pool.arrays()[1][self.row])

    @property
    def nbytes(self) -> int:
        return 4 * (self.pool.words + self.pool.rank_words)

    def __del__(self) -> None:
        self.pool._release(self.row)


def _grow(a: np.ndarray, n: int) -> np.ndarray:
    grown = np.zeros((2 * a.shape[0], a.shape[1]), a.dtype)
    grown[:n] = a[:n]
    return grown


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
