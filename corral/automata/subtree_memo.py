"""The subtree memo shared by one grammar's lexer-state walks.

A walk of the token trie below a node depends only on that node and the lexer state in
which the walk reaches it. Walks from different lexer states of one grammar often meet in
the same (node, state) pair a byte or two down: every count of an unanchored
``[a-f0-9]{24}`` goes back to count 0 on a non-hex byte. The walk kernel
(``kernels.mask.lexer_state_walk``) marks each large trie node with the state it reached
it in; when a walk reaches a node in its marked state again it stores what it found below
it, and later walks reaching it in that state copy that instead of walking the subtree.

The entry and pair arrays start empty (most grammars' first mask stores nothing: a walk
stores only below a node that an earlier walk reached in the same state) and grow when a
walk reports that they were full, to ``_START_ENTRIES`` entries first, then doubling, up
to ``max_bytes``; past that, walks stop storing (stored entries stay in use).
"""

from __future__ import annotations

import numpy as np

from .kernels.layout import ENTRY_COLS, SM_CTL_LEN, SM_ENTRIES, SM_GROW, SM_HITS, SM_USED

_START_ENTRIES = 256  # entries (16 bytes each) allocated on the first store
_START_STORE = 16 * _START_ENTRIES  # pairs' int32 slots allocated on the first store
FIRST_ARRAYS_BYTES = _START_ENTRIES * 16 + _START_STORE * 4  # both, as first allocated
DEFAULT_MAX_BYTES = 32 << 20  # per grammar


class SubtreeMemo:
    """Arrays of the subtree memo, for a trie with ``n_large`` large nodes.

    ``state`` and ``entry`` (``int32 [n_large]``): the lexer state each large node was
    last reached in (-1: never) and the entry stored for it in that state (-1: none);
    ``entries`` (``int32 [E, 4]``): first dead pair, count, first end pair, count, as
    offsets into ``store`` (``int32``, the pairs); ``ctl`` (``int64 [4]``): counters, see
    ``kernels.layout.SM_*``.
    """

    def __init__(self, n_large: int, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.state = np.full(n_large, -1, np.int32)
        self.entry = np.full(n_large, -1, np.int32)
        self.entries = np.zeros((0, ENTRY_COLS), np.int32)
        self.store = np.zeros(0, np.int32)
        self.ctl = np.zeros(SM_CTL_LEN, np.int64)

    @property
    def nbytes(self) -> int:
        return int(self.state.nbytes + self.entry.nbytes + self.entries.nbytes + self.store.nbytes)

    def kernel_arrays(self) -> tuple[np.ndarray, ...]:
        """The arrays as the walk kernel takes them: a plain tuple in the field order of
        :class:`~corral.automata.kernels.layout.SubtreeMemoArrays` (build it again after
        :meth:`grow_if_full`, which may replace arrays)."""
        return (self.state, self.entry, self.entries, self.store, self.ctl)

    @property
    def hits(self) -> int:
        """How many subtrees walks have copied from the memo."""
        return int(self.ctl[SM_HITS])

    def grow_if_full(self) -> None:
        """After a walk: allocate or double the arrays that filled up, within
        ``max_bytes``."""
        if not self.ctl[SM_GROW]:
            return
        self.ctl[SM_GROW] = 0
        n_ent = int(self.ctl[SM_ENTRIES])
        size = max(2 * self.entries.shape[0], _START_ENTRIES)
        more = size * ENTRY_COLS * 4 - self.entries.nbytes
        if 2 * n_ent >= self.entries.shape[0] and self.nbytes + more <= self.max_bytes:
            grown = np.zeros((size, ENTRY_COLS), np.int32)
            grown[:n_ent] = self.entries[:n_ent]
            self.entries = grown
        used = int(self.ctl[SM_USED])
        size = max(2 * self.store.shape[0], _START_STORE)
        more = size * 4 - self.store.nbytes
        if 2 * used >= self.store.shape[0] and self.nbytes + more <= self.max_bytes:
            grown_store = np.zeros(size, np.int32)
            grown_store[:used] = self.store[:used]
            self.store = grown_store
