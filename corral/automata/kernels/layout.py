"""The layout of every array the kernels share with Python: slots, columns, kinds, codes.

This is the one place that says what index ``i`` of a kernel array means. Python code and
kernels name these constants and never index by number. Numba reads module-level integers
as compile-time constants, so naming a column costs nothing in a kernel.

The arrays themselves travel in a few groups, named tuples defined at the end: a
vocabulary's token trie, a grammar's token caches and walk memos, a matcher's mask
scratch; the grammar tables are ``gt`` and ``lex`` (``kernels/lexer.py``), the Earley
chart is the eight arrays ``Chart.run`` passes.

This module imports nothing of corral: it is the bottom of the package.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# -- grammar tables: header slots of `gt` (int32; built by corral.automata.tables) ----------
# A slot holds a count, or the offset in `gt` of a section (its length in brackets).
H_NT = 0  # number of terminals
H_NN = 1  # number of nonterminals
H_NI = 2  # number of dotted items
H_G = 3  # number of lexer states
H_FINAL = 4  # item S' -> start .
H_START = 5  # item S' -> . start
H_NCLS = 6  # number of byte classes
H_ITEM_SYM = 7  # [NI] next symbol: terminal t, or NT + nonterminal, or -1 (complete)
H_ITEM_LHS = 8  # [NI] left-hand nonterminal
H_PRED_START = 9  # [NN+1] CSR offsets into PRED_ITEMS
H_PRED_ITEMS = 10  # initial items of each nonterminal's productions
H_NULLABLE = 11  # [NN]
H_TERM_START = 12  # [NT] global lexer start state of each terminal
H_TERM_IGNORE = 13  # [NT] 1 if the terminal is ignored (%ignore)
H_LEX_TERM = 14  # [G] terminal of each lexer state
H_LEX_ACCEPT = 15  # [G] 1 if the lexer state accepts
H_BYTE_CLASS = 16  # [256] byte -> byte class
H_IGNORE_LIST = 17  # [N_IGNORE] ignored terminals
H_N_IGNORE = 18
H_LEX_IS_START = 19  # [G] 1 if the state is a terminal's start state
H_SPECIAL_TERM = 20  # [NT] special token id a terminal stands for, or -1
H_FOLLOW_BYTES = 21  # [NT * 8] 256-bit sets: bytes that may start a lexeme after terminal t
H_TRAP = 22  # the trap lexer state (a blocked lexeme end), or -1 if there is none
H_FIRST_START = 23  # [G+1] CSR offsets into FIRST_BYTES (empty unless a start state)
H_FIRST_BYTES = 24  # bytes a terminal's lexeme can start with, per start state
H_N_SPECIAL = 25  # number of terminals that stand for special tokens
HEADER_LEN = 32

# -- the Earley chart (kernels/earley.py) ----------------------------------------------------
# P: int32 [capP, 5] parser items; L: int32 [capL, 5] lexeme items. A class is 64 bits in
# two columns (CLASS and CLASS + 1: kernels/wide.py)
P_ITEM, P_ORIGIN, P_LINK, P_CLASS = 0, 1, 2, 3  # dotted rule, origin set, chain, class
L_STATE, L_ORIGIN, L_LINK, L_CLASS = 0, 1, 2, 3  # lexer state, origin set, chain, class
ITEM_COLS = 5
# S: int32 [capS, 5] per set: first row in P, first row in L, accepting, structural hash
# (64 bits in columns S_HASH and S_HASH + 1)
S_P, S_L, S_ACCEPT, S_HASH = 0, 1, 2, 3
SET_COLS = 5
# ctx: int64 [CTX_LEN] cursors of the set being built, and counters kept for callers
C_PC = 0  # parser cursor
C_LC = 1  # lexeme cursor
C_SERIAL = 2  # a new value per set
C_ACC = 3  # the set accepts
C_ERR = 4  # capacity error
C_TERM = 5  # a terminal was predicted
# slot 6 is free (serials for the stamp come from the stamp array itself: earley.py)
C_SCRATCH2 = 7  # scratch serial for callers (the generation of a mask's memo)
C_OWNACC = 8  # the start rule completed in this set
C_VERSION = 9  # version counter for callers (last set version handed out)
C_CLASSIFY = 10  # item classes: 0 off, 1 on for gap positions, 2 classify new sets
CTX_LEN = 12
# capacity errors of chart builders: grow that array and call again
ERR_P, ERR_L, ERR_S = -1, -2, -3

# -- token caches of lexer states (kernels/mask.py) -------------------------------------------
# cmeta: int32 [G, 5] per lexer state
M_KIND = 0  # KIND_*
M_IDX = 1  # dense row, or start of the sparse ranks
M_LEN = 2  # number of tokens that keep the lexeme alive (sparse length)
M_ENDS = 3  # start of the end-edge block in `ends`
M_NENDS = 4  # length of that block (0: no end edge)
CMETA_COLS = 5
KIND_MISSING, KIND_DENSE, KIND_SPARSE = 0, 1, 2

# -- mask walks (kernels/mask.py) -----------------------------------------------------------
ERR_DEPTH = -4  # nested walk deeper than the scratch (cannot happen: one level per byte)
ERR_MEMO = -5  # the memo is full: call again with a larger one
MEMO_SIZE = 4096  # initial slots of a thread's memo of explored (node, set hash, state)
MM_KEY, MM_NODE, MM_GEN = 0, 1, 2  # memo columns: hash of (set, state), node, generation
MEMO_COLS = 3
# frame columns (one frame per nesting level of walks): lexer state; anchor node whose
# children are entered; the children still to try, as a range of either the lexeme's first
# bytes (mode 0, looked up by binary search) or the anchor's children (mode 1, scanned);
# cursor and end of the current subtree; nested-walk index; version of the set walked
# from; cached completion (state, version, alive); the state in which the previous lexeme
# ended at the anchor (a child continuing that lexeme is not a place where it ends); the
# byte classes of the anchor's children where a nested lexeme may start, as a count and
# a list (count -1: more than F_NV_MAX of them, not listed); whether the walk of the
# current subtree is yet to start (1: look it up in the walk cache first); where the walk
# reads the current subtree's lexeme ends from a walk-cache entry, the cursor and end of
# its end pairs in the cache's store (cursor -1: the walk follows the trie instead)
F_G, F_XS, F_FB, F_FBE, F_MODE, F_X, F_END, F_IDX = 0, 1, 2, 3, 4, 5, 6, 7
F_VER, F_CG, F_CV, F_CA, F_PS, F_NEW, F_EC, F_ECE = 8, 9, 10, 11, 12, 13, 14, 15
F_NV, F_V = 16, 17
F_NV_MAX = 32
FRAME_COLS = F_V + F_NV_MAX
# walk cache (automata/walk_cache.py) of one grammar on one thread: control slots
# (int64 [WC_CTL_LEN]): entries, store used, table slots used, grow wanted, hits, builds
WC_ENTRIES, WC_USED, WC_SLOTS, WC_GROW, WC_HITS, WC_BUILDS = 0, 1, 2, 3, 4, 5
WC_CTL_LEN = 6
WG_TABLE, WG_ENTRIES, WG_STORE = 1, 2, 4  # bits of ctl[WC_GROW]: which array was full
WC_HASH = 0x1E3779B97F4A7C15  # slot of key: (key * WC_HASH, wrapping) >> 32, masked
# entry of a pair whose walk is too small to be worth an entry (or a lookup): below nodes
# with fewer than WC_MIN_NODES nodes, or where the lexeme lives through fewer
WC_CHEAP = -3
WC_MIN_NODES = 32
# its table (int64 [T, 2], T a power of two): key + 1 (0: empty slot), entry (-1: seen
# once, WC_CHEAP: not worth an entry)
WT_KEY, WT_ENTRY = 0, 1
WC_PROBES = 16
# its entries (int32 [E, WE_COLS]): first dead pair and count, first end pair and count
WE_DEAD, WE_NDEAD, WE_ENDS, WE_NENDS = 0, 1, 2, 3
WE_COLS = 4
# subtree memo control slots (int64 [4]): entries, store used, grow wanted, hits
SM_ENTRIES, SM_USED, SM_GROW, SM_HITS = 0, 1, 2, 3
SM_CTL_LEN = 4
# subtree memo entries (int32 [E, 4]): first dead pair and count, first end pair and count
SE_DEAD, SE_NDEAD, SE_ENDS, SE_NENDS = 0, 1, 2, 3
ENTRY_COLS = 4

# -- completability lattices (kernels/lattice.py) ----------------------------------------------
OP_GAP = 256  # a gap byte: any byte of the gap's classes
OP_OPT = 257  # an optional gap byte: a gap byte or nothing
OP_SPECIAL = 512  # OP_SPECIAL + g: the special token whose terminal starts in lexer state g


# -- array groups -------------------------------------------------------------------------
# Kernels take each group as a plain tuple in the field order below (a named tuple
# argument costs about a microsecond more per call from Python) and name it at once,
# e.g. ``tr = TrieArrays(*trie)``, passing the named tuple on to kernels they call.
# The per-token mask kernels (``fill_mask`` and ``_walk_below``) are the exception: they
# take the trie's arrays as arguments in ``TrieArrays`` order, star-unpacked by the
# caller, because a tuple argument cost about 10 ns more per array than the array
# passed alone, and a named tuple passed to a kernel that is not inlined cost 2% on
# JSON masks.


class TrieArrays(NamedTuple):
    """A vocabulary's token trie (``corral.automata.vocabulary.TokenTrie``, whose fields of
    the same names these are): what mask walks read.

    Nodes are numbered in depth-first order, so node ``x``'s subtree is ``x ..
    subtree_end[x] - 1`` and its tokens are ranks ``rank_at[x] .. rank_at[subtree_end[x]]
    - 1`` (tokens are ranked in the trie's byte order).
    """

    node_byte: np.ndarray  # uint8 [n_nodes]: the byte on the edge into the node
    depth: np.ndarray  # int32 [n_nodes]
    subtree_end: np.ndarray  # int32 [n_nodes]
    child_start: np.ndarray  # int32 [n_nodes + 1]: CSR offsets into children
    children: np.ndarray  # int32 [n_nodes - 1], sorted by byte under each node
    tok_start: np.ndarray  # int32 [n_nodes]: first index into token_ids of the node's tokens
    tok_count: np.ndarray  # int32 [n_nodes]: tokens spelled exactly by the node's path
    token_ids: np.ndarray  # int32 [n_tokens]: token ids in rank order
    rank_at: np.ndarray  # int32 [n_nodes + 1]: rank of the first token at or below a node


class TrieRuns(NamedTuple):
    """The trie's indexes for building token caches (``TokenTrie`` fields of the same
    names): where runs of plain bytes or of whole UTF-8 characters stop below each node
    (``kernels/trie.py``), and its large nodes (the subtree memo's keys). Mask walks do
    not need them, so they travel apart from :class:`TrieArrays` (each array passed from
    Python costs time at every call).
    """

    depth_small: np.ndarray  # depth as uint8 when every depth fits (faster walks), else depth
    max_depth: int  # the trie's greatest depth
    plain: np.ndarray  # uint8 [256]: 1 for the bytes a walk may skip runs of
    frontier: np.ndarray  # int32: non-plain nodes below each node
    frontier_begin: np.ndarray  # int32 [n_nodes]
    frontier_end: np.ndarray  # int32 [n_nodes]
    plain_height: np.ndarray  # int32 [n_nodes]: nodes on the longest plain path down
    plain_below: np.ndarray  # int64 [n_nodes, 2]: bit set of the bytes on those paths
    char_frontier: np.ndarray  # int32: nodes outside character runs below each node
    char_frontier_begin: np.ndarray  # int32 [n_nodes]
    char_frontier_end: np.ndarray  # int32 [n_nodes]
    char_height: np.ndarray  # int32 [n_nodes]: characters on the longest run down
    char_below: np.ndarray  # int64 [n_nodes, 2]: bit set of the ASCII bytes on those runs
    chars: np.ndarray  # int32 [n_nodes]: characters decoded on the path from the root
    large_index: np.ndarray  # int32 [n_nodes]: index among the large nodes, or -1


class WalkMemo(NamedTuple):
    """Per lexer state memos of a grammar's trie walks (``kernels/mask.py``).

    ``run`` (int32 [G], -1 unknown): plain steps that stay alive and do not accept;
    ``step`` (int32 [G], -3 unknown): the state a plain byte leads to (-1 dead, -2 too many
    exceptions); ``excl`` (int64 [G, 2]): exceptions of the states on those steps, as a
    bit set of ASCII bytes; ``skip`` (int32 [G], 0 unknown): whether a reachable state
    starts a plain run (1 yes, 2 no); ``mb`` (int32 [G, 2], -1 unknown): whether the state
    takes multi-byte characters as plain bytes, and how many states of its chain do.
    """

    run: np.ndarray
    step: np.ndarray
    excl: np.ndarray
    skip: np.ndarray
    mb: np.ndarray


class SubtreeMemoArrays(NamedTuple):
    """A grammar's subtree memo (``corral.automata.subtree_memo``)."""

    state: np.ndarray  # int32 [n_large]: state each large node was last reached in, or -1
    entry: np.ndarray  # int32 [n_large]: entry stored for it in that state, or -1
    entries: np.ndarray  # int32 [E, 4]: first dead pair, count, first end pair, count
    store: np.ndarray  # int32: the pairs
    ctl: np.ndarray  # int64 [SM_CTL_LEN] (SM_* slots)
