"""The walk cache: what a lexeme finds below a trie node, kept across masks.

Where a lexeme ends inside a token, the mask kernel (``kernels.mask._walk_below``) walks
the trie below that point with the DFA of each lexeme that may start there, recursing
where that lexeme ends in turn. What one such walk finds depends on the trie node ``ch``
it enters and the lexer state ``g`` it enters it from, and on nothing else: which tokens
below ``ch`` keep the lexeme alive (all but some *dead* subtrees, whose ranks are
ranges), and the nodes where it can end before a child (*end points*, each with its
lexer state there). Only what happens at the end points depends on the parse. The
kernel keeps those two lists per ``(ch, g)`` here and reuses them in later masks: the
tokens are marked from the ranges and only the end points are visited, where the walk
would visit every live node below ``ch``.

The same ``(ch, g)`` comes back in state after state: in Lark's own grammar, a rule name
may be followed by a token name (``fooBar``) wherever an expansion goes on; in PDDL, a
name may follow a space (`` foo``) after every ``(`` (about 117,000 trie nodes for
Llama-3's vocabulary, each of those masks). A walk records ``(ch, g)`` the first time it
enters it and stores the entry the second time, so pairs seen once (most of a JSON
document's) cost one table slot and no store.

One cache belongs to one compiled grammar on one thread (a mask runs to its end before
the next on the same thread; no lock). Nothing is allocated until a walk first records
a pair (8.7 KB then); the arrays grow when a walk reports them full (a flag the kernel
sets), doubling up to ``max_bytes``; past that, walks stop recording and storing, and
stored entries stay in use. Small walks are not worth an entry, nor a lookup, which
probes a table rarely in the CPU cache: subtrees of fewer than ``WC_MIN_NODES`` (32)
nodes are walked node by node, and a pair whose lexeme lives through fewer is marked
``WC_CHEAP`` and walked node by node after that. An entry is exact whatever the parse: it is
the trie walk of one DFA, which no mask changes.
"""

from __future__ import annotations

import numpy as np

from .kernels.layout import (
    WC_CTL_LEN,
    WC_ENTRIES,
    WC_GROW,
    WC_HITS,
    WC_SLOTS,
    WC_USED,
    WE_COLS,
    WG_ENTRIES,
    WG_STORE,
    WG_TABLE,
)

_START_SLOTS = 1 << 8  # table slots (16 bytes each) allocated when a walk first records
_START_ENTRIES = 32  # entries (16 bytes each) allocated when a walk first stores
_START_STORE = 1 << 10  # int32 slots of the pairs, the same
FIRST_ARRAYS_BYTES = _START_SLOTS * 16 + _START_ENTRIES * 16 + _START_STORE * 4
DEFAULT_MAX_BYTES = 32 << 20  # per grammar and thread (below FIRST_ARRAYS_BYTES: off)


class WalkCache:
    """The arrays of one grammar's walk cache on one thread.

    ``table`` (``int64 [T, 2]``, ``T`` a power of two): open addressing by ``(ch, g)``:
    the key ``ch << 32 | g`` plus one (0: an empty slot), and the entry (-1: seen once,
    not stored); ``entries`` (``int32 [E, 4]``): the first dead pair and their count,
    the first end pair and their count, as offsets into ``store`` (``int32``): dead
    pairs are rank ranges ``lo, hi`` in increasing order, end pairs ``node, state`` in
    the trie's order; ``ctl`` (``int64 [6]``): counters, see ``kernels.layout.WC_*``.
    """

    __slots__ = ("ctl", "entries", "max_bytes", "store", "table")

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        # nothing allocated yet: a one-slot table has no room for a first key, so the
        # first walk that would record one asks for the arrays (most JSON Schemas'
        # masks never do: their subtrees below lexeme ends are small)
        self.table = np.zeros((1, 2), np.int64)
        self.entries = np.zeros((0, WE_COLS), np.int32)
        self.store = np.zeros(0, np.int32)
        self.ctl = np.zeros(WC_CTL_LEN, np.int64)
        if max_bytes < FIRST_ARRAYS_BYTES:  # off: a taken slot that no key matches
            self.table[0, 0] = -1
            self.ctl[WC_SLOTS] = 1

    @property
    def nbytes(self) -> int:
        return int(self.table.nbytes + self.entries.nbytes + self.store.nbytes)

    @property
    def hits(self) -> int:
        """How many subtree walks were read from stored entries."""
        return int(self.ctl[WC_HITS])

    def kernel_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``table, entries, store, ctl`` as the mask kernel takes them (take them again
        after :meth:`grow_if_full`, which may replace arrays)."""
        return self.table, self.entries, self.store, self.ctl

    def grow_if_full(self) -> None:
        """After a mask: double the arrays the kernel found full (``ctl[WC_GROW]``, bits
        ``WG_*``), within ``max_bytes``. An entry that did not fit stays recorded as seen,
        so the next walk of its pair tries again with the larger store."""
        if not self.ctl[WC_GROW]:
            return
        full = int(self.ctl[WC_GROW])
        self.ctl[WC_GROW] = 0
        if self.max_bytes < FIRST_ARRAYS_BYTES:
            return
        if full & WG_TABLE:
            self.grow_table()
        if full & WG_ENTRIES:
            self.entries = self._doubled(self.entries, _START_ENTRIES, int(self.ctl[WC_ENTRIES]))
        if full & WG_STORE:
            self.store = self._doubled(self.store, _START_STORE, int(self.ctl[WC_USED]))

    def grow_table(self) -> None:
        """Double the table (to 256 slots at least), moving its slots, within
        ``max_bytes``."""
        size = max(2 * self.table.shape[0], _START_SLOTS)
        if self.max_bytes >= FIRST_ARRAYS_BYTES and self._fits(16 * size - self.table.nbytes):
            self._rehash(size)

    def _doubled(self, a: np.ndarray, start: int, n: int) -> np.ndarray:
        """``a`` with twice its rows (``start`` at least) and its first ``n`` kept, or
        ``a`` itself where that would pass ``max_bytes``."""
        size = max(2 * a.shape[0], start)
        row = a.itemsize * (a.shape[1] if a.ndim == 2 else 1)
        if not self._fits((size - a.shape[0]) * row):
            return a
        grown = np.zeros((size, *a.shape[1:]), a.dtype)
        grown[:n] = a[:n]
        return grown

    def _fits(self, more: int) -> bool:
        return self.nbytes + more <= self.max_bytes

    def _rehash(self, size: int) -> None:
        """Move the table's slots into a table of ``size`` slots."""
        from .kernels.mask import rehash_walk_table

        table = np.zeros((size, 2), np.int64)
        rehash_walk_table(self.table, table)
        self.table = table


__all__ = ["DEFAULT_MAX_BYTES", "WalkCache"]
