"""Kernels: token masks.

A token is allowed iff some path through its bytes keeps the chart alive. Paths are split
by the lexeme item of the current set they start from:

1. the lexeme stays inside the same terminal for all of the token's bytes: this depends on
   the lexer state ``g`` only, so it is computed once per ``g`` by a trie walk and cached
   (the context-independent part). A byte that leads to the trap state (a lexeme end the
   terminal forbids, see ``tables``) kills the lexeme like one it cannot read;
2. the lexeme ends inside the token, at an "end edge" recorded for ``g`` (a trie node where
   the lexeme can end, and a child whose byte it cannot read): the chart after
   that completion depends on the parser, so it is built with one Earley step, and the
   subtree below the edge is walked with the DFA of each lexeme that may start there,
   recursing where that lexeme ends in turn. Parser work happens only at lexeme
   boundaries; a visited trie node costs one table lookup.

Pruning. Tokens are numbered by rank (their position in the trie's byte order), so every
trie subtree is a contiguous rank range. The mask is also kept in rank space, and a walk
skips any subtree whose tokens are all allowed already (typically by part 1: with
adjacent lexemes, ``ab`` is one identifier and also two). End edges are entered only
where a lexeme item of the set can start with the child's byte; a completion set is
reused while the set it came from is unchanged (versions per nesting level); and a memo
of explored (trie node, set hash, lexer state) triples keeps ambiguous splits (``a+ a+``)
polynomial. When the memo fills up the
kernel returns ``ERR_MEMO`` and the caller retries with a larger one: it never gives up
or guesses.

Cache metadata ``cmeta``: ``int32 [G, 5]``: kind (0 missing, 1 dense, 2 sparse), dense row
or sparse start, sparse length, start of the end-edge block in ``ends``, number of edges.
Dense rows exist in id space (``acc_dense``) and rank space (``acc_rank``); sparse entries
are ranks.
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel
from .borrow import borrow
from .earley import complete_state, end_lexemes, next_serial
from .layout import (
    C_SCRATCH2,
    C_VERSION,
    ERR_DEPTH,
    ERR_MEMO,
    F_CA,
    F_CG,
    F_CV,
    F_EC,
    F_ECE,
    F_END,
    F_FB,
    F_FBE,
    F_G,
    F_IDX,
    F_MODE,
    F_NEW,
    F_NV,
    F_NV_MAX,
    F_PS,
    F_V,
    F_VER,
    F_X,
    F_XS,
    H_BYTE_CLASS,
    H_FIRST_BYTES,
    H_FIRST_START,
    H_FOLLOW_BYTES,
    H_G,
    H_LEX_ACCEPT,
    H_LEX_IS_START,
    H_LEX_TERM,
    H_N_SPECIAL,
    H_NI,
    H_NN,
    H_SPECIAL_TERM,
    H_TRAP,
    KIND_DENSE,
    KIND_MISSING,
    L_LINK,
    L_STATE,
    M_ENDS,
    M_IDX,
    M_KIND,
    M_LEN,
    M_NENDS,
    MM_GEN,
    MM_KEY,
    MM_NODE,
    S_ACCEPT,
    S_HASH,
    S_L,
    SE_DEAD,
    SE_ENDS,
    SE_NDEAD,
    SE_NENDS,
    SM_ENTRIES,
    SM_GROW,
    SM_HITS,
    SM_USED,
    WC_BUILDS,
    WC_CHEAP,
    WC_ENTRIES,
    WC_GROW,
    WC_HASH,
    WC_HITS,
    WC_MIN_NODES,
    WC_PROBES,
    WC_SLOTS,
    WC_USED,
    WE_DEAD,
    WE_ENDS,
    WE_NDEAD,
    WE_NENDS,
    WG_ENTRIES,
    WG_STORE,
    WG_TABLE,
    WT_ENTRY,
    WT_KEY,
    SubtreeMemoArrays,
    TrieArrays,
    TrieRuns,
    WalkMemo,
)
from .lexer import lex_classes, lex_dense, lex_next
from .trie import UTF8_FORMS
from .wide import get64

_MIN_JUMP = 16  # skip plain runs only below nodes with a larger subtree (else walk them)
# plain bytes a state may send elsewhere and still skip runs of the others: 24 admits a
# digit or hex-digit class (the search states of an unanchored `\d{4}-\d{2}`)
MAX_EXCEPT = 24
MEMO_MIN = 48  # remember a walk's result below nodes with at least this many nodes
_MEMO_PROBES = 16


@kernel(nogil=True)
def lexer_state_walk(gt, lex, trie, runs, walk_memo, subtrees, g, dead, ends):  # type: ignore[no-untyped-def]
    """Walk the token trie from lexer state ``g``.

    Writes into ``dead`` (as ``lo, hi`` pairs of ranks, ascending and disjoint) the tokens
    whose bytes kill the lexeme: every other token keeps it alive. Writes into ``ends``
    (as ``x, child`` pairs) every edge where the lexeme can end: ``x`` (the root
    included) leaves it in an accepting state that cannot read the child's byte. Whether
    that byte may follow the terminal is decided where the edges are used (``_walk_below``
    only enters children whose byte a lexeme item of the parse can start with), so the
    result depends on the lexer state's transitions alone and is shared by the states
    of any grammar that read bytes alike. Returns ``(n_dead_pairs, n_end_pairs,
    n_alive)``. Arguments: ``trie``, ``runs``, ``walk_memo`` and ``subtrees``: the plain
    tuples of :class:`TrieArrays`, :class:`TrieRuns`, :class:`WalkMemo` and
    :class:`SubtreeMemoArrays`
    (``kernels/layout.py``); ``dead`` and ``ends``: ``int32 [2 * n_nodes]`` outputs.

    Tokens are decided by subtree, not one by one: a node where the lexeme dies kills its
    whole subtree, whose ranks are one range (``rank_at``, see ``TokenTrie``).

    Plain runs are skipped. Where every plain byte (``plain[b] != 0``) but a few
    *exceptions* (at most ``MAX_EXCEPT``) takes state ``s`` to one state ``f(s)``
    (inside a string, typically: ``f(s) = s``, or the next count under a ``maxLength``;
    exceptions: the space under ``\\S+``, ``/`` under ``[^/]+``), a plain path of length
    ``i`` that avoids the exceptions, below a node in state ``s``, ends in ``f^i(s)``.
    When those states live and do not accept for every ``i`` up to the longest plain
    path below the node (``plain_height``), and no byte on those paths
    (``plain_below``) is an exception of a state on the way, every token on such a path
    lives and no lexeme ends on one, so the walk jumps straight to the node's frontier,
    its first non-plain descendants, listed in ``frontier[frontier_begin[x] :
    frontier_end[x]]`` (``kernels.trie.skip_frontier``).

    Runs of whole characters are skipped the same way. Where, from every state ``f^i(s)``
    on the way, each valid multi-byte UTF-8 character also leads to ``f^{i+1}(s)``
    through live, non-accepting states (``_char_run``), a path of whole characters
    (``kernels.trie.utf8_chars``) lives and ends no lexeme, and so does a path that
    stops inside a character: the walk jumps from a node between characters to its
    ``char_frontier``, the nodes where such a run stops. ``char_height`` counts the
    characters on the longest run (``chars`` counts them from the root, which gives the
    state at a frontier node's parent) and ``char_below`` the ASCII bytes on the runs.
    ``mb`` (``int32 [G, 2]`` filled with -1 before the first walk, then kept) memoises
    per lexer state whether it takes multi-byte characters as it takes plain bytes
    (``_mb_like_plain``: 1 yes, 0 no) and how many states of its chain do (``_char_run``).

    ``run``, ``step``, ``excl`` and ``skip`` (``int32 [G]`` filled with -1, -3 and 0,
    and ``int64 [G, 2]`` zeros, before the first walk of a grammar, then kept) memoise
    per lexer state: how many plain steps ``f, f^2, ...`` stay alive and do not accept;
    ``f`` (-1: dead, -2: too many exceptions); the exceptions of the states on those
    steps, as a bit set of ASCII bytes; whether some state reachable from it starts a
    plain run (1 yes, 2 no).

    Subtrees are remembered across walks. The walk below a node depends only on the
    node and the lexer state there, and states of different walks often meet a byte or
    two down (an unanchored ``[a-f0-9]{24}`` counts hex digits: from every count, a
    non-hex byte leads back to count 0). Each large node (``large_index``: at least
    ``MEMO_MIN`` nodes below) remembers the state the last walk reached it in; a walk
    that reaches it in the same state again stores the dead ranges and end edges it finds
    below it in the grammar's subtree memo (``sm_*``, see ``memo_keep``), and later
    walks reaching it in that state copy them and jump over the subtree. Storing only on
    a repeat keeps walks whose states never meet (a ``maxLength`` count) from paying for
    it.
    """
    gt, lex, trie, runs, walk_memo, subtrees, dead, ends = borrow(
        (gt, lex, trie, runs, walk_memo, subtrees, dead, ends)
    )
    tr = TrieArrays(*trie)
    ru = TrieRuns(*runs)
    wm = WalkMemo(*walk_memo)
    sm = SubtreeMemoArrays(*subtrees)
    node_byte, subtree_end, rank_at = tr.node_byte, tr.subtree_end, tr.rank_at
    depth, max_depth, plain, large_index = ru.depth_small, ru.max_depth, ru.plain, ru.large_index
    frontier, frontier_begin, frontier_end = ru.frontier, ru.frontier_begin, ru.frontier_end
    plain_height, plain_below, chars = ru.plain_height, ru.plain_below, ru.chars
    char_frontier = ru.char_frontier
    char_begin, char_end = ru.char_frontier_begin, ru.char_frontier_end
    char_height, char_below = ru.char_height, ru.char_below
    run, step, excl, skip, mb = wm.run, wm.step, wm.excl, wm.skip, wm.mb
    sm_state, sm_entry, sm_ent, sm_store, sm_ctl = sm.state, sm.entry, sm.entries, sm.store, sm.ctl
    byte_class = gt[gt[H_BYTE_CLASS] : gt[H_BYTE_CLASS] + 256]
    n_states = gt[H_G]
    lex_accept = gt[gt[H_LEX_ACCEPT] : gt[H_LEX_ACCEPT] + n_states]
    trap = gt[H_TRAP]
    states = np.empty(max_depth + 2, np.int32)
    states[0] = g
    cap = max_depth + 1
    if skip[g] == 0:
        skip[g] = 1 if _may_skip(lex, byte_class, lex_accept, plain, run, step, excl, g, cap) else 2
    if skip[g] == 2:
        return _walk_all(lex, byte_class, lex_accept, tr, ru, sm, states, g, dead, ends, trap)
    # jumps in progress: node jumped from, frontier cursor and end, end of the subtree of
    # the frontier node being walked, which frontier
    own = np.empty(max_depth + 2, np.int32)
    cur = np.empty(max_depth + 2, np.int32)
    cend = np.empty(max_depth + 2, np.int32)
    lim = np.empty(max_depth + 2, np.int32)
    fk = np.empty(max_depth + 2, np.uint8)  # 0: plain frontier, 1: character frontier
    sp = 0
    # subtrees being remembered: node, state, first dead pair, first end pair
    open_ = np.empty((max_depth + 2, 4), np.int32)
    n_open = 0
    n_nodes = node_byte.shape[0]
    n_dead = 0
    n_dead_tok = 0
    n_ends = 0
    x = 0
    while True:
        while n_open > 0 and x >= subtree_end[open_[n_open - 1, 0]]:
            n_open -= 1
            memo_keep(large_index, sm_entry, sm_ent, sm_store, sm_ctl, open_[n_open], rank_at,
                      dead, n_dead, ends, n_ends)  # fmt: skip
        if sp > 0 and x >= lim[sp - 1]:
            o = own[sp - 1]
            c = cur[sp - 1] + 1
            if c < cend[sp - 1]:
                cur[sp - 1] = c
                s = states[depth[o]]
                if fk[sp - 1] == 0:
                    x = frontier[c]
                    if step[s] != s:
                        s = _power(step, s, depth[x] - 1 - depth[o])
                else:
                    x = char_frontier[c]
                    if step[s] != s:
                        s = _power(step, s, chars[x] - 1 - chars[o])
                lim[sp - 1] = subtree_end[x]
                states[depth[x] - 1] = s
            else:
                x = subtree_end[o]
                sp -= 1
                continue
        elif x >= n_nodes:
            break
        if x != 0:
            d = depth[x]
            s = lex_next(lex, states[d - 1], byte_class[node_byte[x]])
            if s < 0 or s == trap:
                n_dead, n_dead_tok = _add_dead(dead, n_dead, n_dead_tok, rank_at, x, subtree_end)
                x = subtree_end[x]
                continue
            states[d] = s
        else:
            s = g
        se = subtree_end[x]
        if se == x + 1:
            x += 1
            continue
        li = large_index[x]
        if li >= 0:
            e = _memo_at(sm_state, sm_entry, li, s)
            if e >= 0:
                n_dead, n_dead_tok, n_ends = memo_use(
                    sm_ent, sm_store, sm_ctl, e, dead, n_dead, n_dead_tok, ends, n_ends
                )
                x = se
                continue
            if e == -1:
                n_open = _memo_open(open_, n_open, x, s, dead, n_dead, n_ends, rank_at)
        if lex_accept[s] != 0:
            n_ends = _add_ends(lex, byte_class, node_byte, subtree_end, s, x, ends, n_ends)
        elif se - x > _MIN_JUMP:
            r = run[s]
            if r < 0:
                r = _plain_run(lex, byte_class, lex_accept, plain, run, step, excl, s, cap)
            h = char_height[x]
            kind = -1
            if (
                r >= h
                and (char_below[x, 0] & excl[s, 0]) == 0
                and (char_below[x, 1] & excl[s, 1]) == 0
                and _char_run(lex, byte_class, lex_accept, plain, step, excl, mb, s, cap) > h
            ):
                kind = 1
                cur[sp] = char_begin[x] - 1
                cend[sp] = char_end[x]
            elif (
                r >= plain_height[x]
                and (plain_below[x, 0] & excl[s, 0]) == 0
                and (plain_below[x, 1] & excl[s, 1]) == 0
            ):
                kind = 0
                cur[sp] = frontier_begin[x] - 1
                cend[sp] = frontier_end[x]
            if kind >= 0:
                own[sp] = x
                fk[sp] = kind
                lim[sp] = 0  # take the first frontier node next
                sp += 1
                continue
        x += 1
    return n_dead, n_ends, rank_at[n_nodes] - n_dead_tok


@kernel(nogil=True, inline="always")
def _add_ends(lex, byte_class, node_byte, subtree_end, s, x, ends, n_ends):  # type: ignore[no-untyped-def]
    """Record the end edges below node ``x`` (accepting state ``s``): each child whose
    byte the lexeme cannot read. Returns the count."""
    ch = x + 1
    while ch < subtree_end[x]:
        b = node_byte[ch]
        if lex_next(lex, s, byte_class[b]) < 0:
            ends[2 * n_ends] = x
            ends[2 * n_ends + 1] = ch
            n_ends += 1
        ch = subtree_end[ch]
    return n_ends


@kernel(nogil=True, inline="always")
def _add_dead(dead, n_dead, n_dead_tok, rank_at, x, subtree_end):  # type: ignore[no-untyped-def]
    """Record node ``x``'s subtree as dead ranks (merged with an adjacent last range);
    returns the new ``(pairs, tokens)`` counts."""
    lo = rank_at[x]
    hi = rank_at[subtree_end[x]]
    if lo < hi:
        n_dead_tok += hi - lo
        if n_dead > 0 and dead[2 * n_dead - 1] == lo:
            dead[2 * n_dead - 1] = hi
        else:
            dead[2 * n_dead] = lo
            dead[2 * n_dead + 1] = hi
            n_dead += 1
    return n_dead, n_dead_tok


@kernel(nogil=True)
def _may_skip(lex, byte_class, lex_accept, plain, run, step, excl, g, cap):  # type: ignore[no-untyped-def]
    """Whether some state the lexer can reach from ``g`` starts a plain run. Dense states
    (rows of ``lex``) reach only dense states; a sparse automaton is acyclic, so it
    has no runs."""
    dense = lex_dense(lex)
    if g >= dense.shape[0]:
        return False
    n_states = dense.shape[0]
    seen = np.zeros(n_states, np.uint8)
    todo = np.empty(n_states, np.int32)
    todo[0] = g
    seen[g] = 1
    n = 1
    while n > 0:
        n -= 1
        s = todo[n]
        if lex_accept[s] == 0:
            r = run[s]
            if r < 0:
                r = _plain_run(lex, byte_class, lex_accept, plain, run, step, excl, s, cap)
            if r > 0:
                return True
        for c in range(dense.shape[1]):
            s2 = dense[s, c]
            if s2 >= 0 and seen[s2] == 0:
                seen[s2] = 1
                todo[n] = s2
                n += 1
    return False


@kernel(nogil=True)
def _walk_all(lex, byte_class, lex_accept, tr, ru, sm, states, g, dead, ends, trap):  # type: ignore[no-untyped-def]
    """``lexer_state_walk`` without plain-run skipping (no state the walk can reach starts
    one): every live node is visited, except subtrees found in the memo. ``trap``: the
    trap state (dead, see ``tables``), or -1."""
    node_byte, depth, subtree_end = tr.node_byte, ru.depth_small, tr.subtree_end
    rank_at, large_index = tr.rank_at, ru.large_index
    sm_state, sm_entry, sm_ent, sm_store, sm_ctl = sm.state, sm.entry, sm.entries, sm.store, sm.ctl
    n_nodes = node_byte.shape[0]
    open_ = np.empty((states.shape[0], 4), np.int32)
    n_open = 0
    n_dead = 0
    n_dead_tok = 0
    n_ends = 0
    x = 0
    s = g
    while x < n_nodes:
        while n_open > 0 and x >= subtree_end[open_[n_open - 1, 0]]:
            n_open -= 1
            memo_keep(large_index, sm_entry, sm_ent, sm_store, sm_ctl, open_[n_open], rank_at,
                      dead, n_dead, ends, n_ends)  # fmt: skip
        if x != 0:
            d = depth[x]
            s = lex_next(lex, states[d - 1], byte_class[node_byte[x]])
            if s < 0 or s == trap:
                n_dead, n_dead_tok = _add_dead(dead, n_dead, n_dead_tok, rank_at, x, subtree_end)
                x = subtree_end[x]
                continue
            states[d] = s
            li = large_index[x]
            if li >= 0:
                e = _memo_at(sm_state, sm_entry, li, s)
                if e >= 0:
                    n_dead, n_dead_tok, n_ends = memo_use(
                        sm_ent, sm_store, sm_ctl, e, dead, n_dead, n_dead_tok, ends, n_ends
                    )
                    x = subtree_end[x]
                    continue
                if e == -1:
                    n_open = _memo_open(open_, n_open, x, s, dead, n_dead, n_ends, rank_at)
        if lex_accept[s] != 0 and subtree_end[x] > x + 1:
            n_ends = _add_ends(lex, byte_class, node_byte, subtree_end, s, x, ends, n_ends)
        x += 1
    while n_open > 0:
        n_open -= 1
        memo_keep(large_index, sm_entry, sm_ent, sm_store, sm_ctl, open_[n_open], rank_at,
                  dead, n_dead, ends, n_ends)  # fmt: skip
    return n_dead, n_ends, rank_at[n_nodes] - n_dead_tok


@kernel(nogil=True, inline="always")
def _memo_at(sm_state, sm_entry, i, s):  # type: ignore[no-untyped-def]
    """At large node ``i`` in state ``s``: the memo entry to copy (>= 0), -1 if this
    walk should store one (the node was last reached in ``s`` too), or -2 (the node is
    now marked with ``s``)."""
    if sm_state[i] == s:
        return sm_entry[i] if sm_entry[i] >= 0 else -1
    sm_state[i] = s
    sm_entry[i] = -1
    return -2


@kernel(nogil=True, inline="always")
def _memo_open(open_, n_open, x, s, dead, n_dead, n_ends, rank_at):  # type: ignore[no-untyped-def]
    """Start remembering the walk below node ``x`` (state ``s``); returns the open count.
    The first dead pair is the last one so far if the next dead subtree would extend it."""
    open_[n_open, 0] = x
    open_[n_open, 1] = s
    merge = n_dead > 0 and dead[2 * n_dead - 1] == rank_at[x]
    open_[n_open, 2] = n_dead - 1 if merge else n_dead
    open_[n_open, 3] = n_ends
    return n_open + 1


@kernel(nogil=True)
def memo_keep(
    large_index, sm_entry, sm_ent, sm_store, sm_ctl, op, rank_at, dead, n_dead, ends, n_ends
):  # type: ignore[no-untyped-def]
    """Store the walk below node ``op[0]`` (in state ``op[1]``): its dead pairs (from
    index ``op[2]``, clipped to the node's ranks) and end pairs (from ``op[3]``).

    Memo layout: per large node ``i`` (``large_index``), ``sm_state[i]``: the state it
    was last reached in (-1: never), ``sm_entry[i]``: the entry stored for it in that
    state (-1: none); ``sm_ent`` ``int32 [E, 4]``: first dead pair and count, first end
    pair and count, as offsets into ``sm_store``. When ``sm_ent`` or ``sm_store`` is full
    nothing is stored and ``sm_ctl[SM_GROW]`` is set: the caller grows them before the
    next walk.
    """
    x = op[0]
    lo_rank = rank_at[x]
    n_d = n_dead - op[2]
    n_e = n_ends - op[3]
    n_ent = sm_ctl[SM_ENTRIES]
    used = sm_ctl[SM_USED]
    if n_ent >= sm_ent.shape[0] or used + 2 * (n_d + n_e) > sm_store.shape[0]:
        sm_ctl[SM_GROW] = 1
        return
    d0 = used
    k = 0
    for i in range(op[2], n_dead):
        lo = max(dead[2 * i], lo_rank)
        hi = dead[2 * i + 1]
        if lo < hi:
            sm_store[used] = lo
            sm_store[used + 1] = hi
            used += 2
            k += 1
    e0 = used
    for i in range(op[3], n_ends):
        sm_store[used] = ends[2 * i]
        sm_store[used + 1] = ends[2 * i + 1]
        used += 2
    sm_ent[n_ent, SE_DEAD] = d0
    sm_ent[n_ent, SE_NDEAD] = k
    sm_ent[n_ent, SE_ENDS] = e0
    sm_ent[n_ent, SE_NENDS] = n_e
    sm_entry[large_index[x]] = n_ent
    sm_ctl[SM_ENTRIES] = n_ent + 1
    sm_ctl[SM_USED] = used


@kernel(nogil=True, inline="always")
def memo_use(sm_ent, sm_store, sm_ctl, e, dead, n_dead, n_dead_tok, ends, n_ends):  # type: ignore[no-untyped-def]
    """Append memo entry ``e``'s dead pairs and end pairs to the walk's output; returns
    the new ``(n_dead, n_dead_tok, n_ends)``."""
    sm_ctl[SM_HITS] += 1
    a = sm_ent[e, SE_DEAD]
    for i in range(sm_ent[e, SE_NDEAD]):
        lo = sm_store[a + 2 * i]
        hi = sm_store[a + 2 * i + 1]
        n_dead_tok += hi - lo
        if n_dead > 0 and dead[2 * n_dead - 1] == lo:
            dead[2 * n_dead - 1] = hi
        else:
            dead[2 * n_dead] = lo
            dead[2 * n_dead + 1] = hi
            n_dead += 1
    a = sm_ent[e, SE_ENDS]
    for i in range(sm_ent[e, SE_NENDS]):
        ends[2 * n_ends] = sm_store[a + 2 * i]
        ends[2 * n_ends + 1] = sm_store[a + 2 * i + 1]
        n_ends += 1
    return n_dead, n_dead_tok, n_ends


@kernel(nogil=True, inline="always")
def _plain_step(lex, byte_class, plain, step, excl, s):  # type: ignore[no-untyped-def]
    """The state ``f(s)`` that plain bytes take ``s`` to (-1: all die; -2: no one state
    takes all but ``MAX_EXCEPT`` of them). The plain bytes that go elsewhere (the
    *exceptions*) are written as a bit set into ``excl[s]``."""
    if step[s] == -3:
        f = -1
        best = 0
        for b in range(128):
            if plain[b] == 0:
                continue
            t = lex_next(lex, s, byte_class[b])
            if t < 0 or t == f:
                continue
            n = 0
            for b2 in range(128):
                if plain[b2] != 0 and lex_next(lex, s, byte_class[b2]) == t:
                    n += 1
            if n > best:
                best = n
                f = t
        n_plain = 0
        e0 = np.int64(0)
        e1 = np.int64(0)
        for b in range(128):
            if plain[b] != 0:
                n_plain += 1
                if f < 0 or lex_next(lex, s, byte_class[b]) != f:
                    if b < 64:
                        e0 |= np.int64(1) << b
                    else:
                        e1 |= np.int64(1) << (b - 64)
        excl[s, 0] = e0
        excl[s, 1] = e1
        if f >= 0 and n_plain - best > MAX_EXCEPT:
            f = -2
        step[s] = f
    return step[s]


@kernel(nogil=True)
def _plain_run(lex, byte_class, lex_accept, plain, run, step, excl, s, cap):  # type: ignore[no-untyped-def]
    """How many plain steps from ``s`` (up to ``cap``) reach live, non-accepting states
    by ``f``. Afterwards ``excl[s]`` holds the exceptions of every state on those steps:
    a plain path that avoids them follows ``f``."""
    if run[s] >= 0:
        return run[s]
    # follow the chain until it ends, repeats (a loop: unbounded) or reaches a known run
    n = 0
    t = s
    e0 = np.int64(0)
    e1 = np.int64(0)
    while n < cap:
        f = _plain_step(lex, byte_class, plain, step, excl, t)
        if f < 0 or lex_accept[f] != 0:
            break
        e0 |= excl[t, 0]
        e1 |= excl[t, 1]
        if run[f] >= 0:
            n = min(cap, n + 1 + run[f])
            e0 |= excl[f, 0]
            e1 |= excl[f, 1]
            break
        if f in (s, t):
            n = cap
            break
        n += 1
        t = f
    run[s] = n
    excl[s, 0] = e0
    excl[s, 1] = e1
    return n


_MB_SET = 64  # states a character's bytes may lead to, per position, before giving up


@kernel(nogil=True)
def _mb_like_plain(lex, byte_class, lex_accept, f, s):  # type: ignore[no-untyped-def]
    """Whether every valid multi-byte UTF-8 character takes ``s`` to ``f`` (>= 0) through
    live, non-accepting states. Decided on the sets of states each byte position can
    reach (``_MB_SET`` at most; more answers no)."""
    cur = np.empty(_MB_SET, np.int32)
    nxt = np.empty(_MB_SET, np.int32)
    for k in range(UTF8_FORMS.shape[0]):
        n = 1
        cur[0] = s
        length = UTF8_FORMS[k, 4]
        for pos in range(length):
            if pos == 0:
                lo = UTF8_FORMS[k, 0]
                hi = UTF8_FORMS[k, 1]
            elif pos == 1:
                lo = UTF8_FORMS[k, 2]
                hi = UTF8_FORMS[k, 3]
            else:
                lo = 0x80
                hi = 0xBF
            m = 0
            for i in range(n):
                for b in range(lo, hi + 1):
                    t = lex_next(lex, cur[i], byte_class[b])
                    if pos == length - 1:
                        if t != f:
                            return False
                        continue
                    if t < 0 or lex_accept[t] != 0:
                        return False
                    seen = False
                    for j in range(m):
                        if nxt[j] == t:
                            seen = True
                            break
                    if not seen:
                        if m == _MB_SET:
                            return False
                        nxt[m] = t
                        m += 1
            if pos < length - 1:
                n = m
                cur[:n] = nxt[:n]
    return True


@kernel(nogil=True)
def _char_run(lex, byte_class, lex_accept, plain, step, excl, mb, s, cap):  # type: ignore[no-untyped-def]
    """How many states ``s, f(s), f^2(s), ...`` (up to ``cap``) in a row take every
    valid multi-byte character where they take plain bytes (``_mb_like_plain``). Call
    only after ``_plain_run(s)``."""
    if mb[s, 1] >= 0:
        return mb[s, 1]
    n = 0
    t = s
    while n < cap:
        if mb[t, 0] < 0:
            f = _plain_step(lex, byte_class, plain, step, excl, t)
            like = f >= 0 and _mb_like_plain(lex, byte_class, lex_accept, f, t)
            mb[t, 0] = 1 if like else 0
        if mb[t, 0] == 0:
            break
        n += 1
        f = step[t]
        if f in (s, t):
            n = cap
            break
        if mb[f, 1] >= 0:
            n = min(cap, n + mb[f, 1])
            break
        t = f
    mb[s, 1] = n
    return n


@kernel(nogil=True, inline="always")
def _power(step, s, i):  # type: ignore[no-untyped-def]
    """``f^i(s)`` along a chain ``_plain_run`` has checked."""
    for _ in range(i):
        s = step[s]
    return s


@kernel(nogil=True)
def alive_ranks(dead, n_dead, n_tokens, out):  # type: ignore[no-untyped-def]
    """Write into ``out`` the ranks ``0 .. n_tokens`` outside the ``dead`` ranges (pairs,
    ascending); returns how many."""
    n = 0
    r = 0
    for k in range(n_dead + 1):
        hi = dead[2 * k] if k < n_dead else n_tokens
        while r < hi:
            out[n] = r
            n += 1
            r += 1
        if k < n_dead:
            r = dead[2 * k + 1]
    return n


@kernel(nogil=True, inline="always")
def _set_range(bits, lo, hi, value):  # type: ignore[no-untyped-def]
    """Set (``value`` 1) or clear (0) bits ``lo .. hi`` of ``bits``, whole words at a time."""
    r = lo
    while r < hi:
        if (r & 31) == 0 and r + 32 <= hi:
            bits[r >> 5] = np.uint32(0xFFFFFFFF) if value else np.uint32(0)
            r += 32
        else:
            m = np.uint32(1 << (r & 31))
            if value:
                bits[r >> 5] |= m
            else:
                bits[r >> 5] &= ~m
            r += 1


@kernel(nogil=True)
def dense_masks(dead, n_dead, n_tokens, token_ids, all_ids, out_ids, out_rank):  # type: ignore[no-untyped-def]
    """Bitmasks of the tokens outside the ``dead`` rank ranges: ``out_rank`` in rank space
    and ``out_ids`` in id space (``uint32``, zeroed by the caller). ``all_ids``: the id
    bitmask of every trie token. Works from the dead tokens or the alive ones, whichever
    are fewer; returns the number alive."""
    dead, token_ids, all_ids, out_ids, out_rank = borrow(
        (dead, token_ids, all_ids, out_ids, out_rank)
    )
    n_dead_tok = 0
    for k in range(n_dead):
        n_dead_tok += dead[2 * k + 1] - dead[2 * k]
    if 2 * n_dead_tok <= n_tokens:  # mostly alive: everything, minus the dead
        _set_range(out_rank, 0, n_tokens, 1)
        for w in range(all_ids.shape[0]):
            out_ids[w] = all_ids[w]
        for k in range(n_dead):
            _set_range(out_rank, dead[2 * k], dead[2 * k + 1], 0)
            for r in range(dead[2 * k], dead[2 * k + 1]):
                tid = token_ids[r]
                out_ids[tid >> 5] &= ~np.uint32(1 << (tid & 31))
    else:  # mostly dead: the ranges between dead ones
        lo = 0
        for k in range(n_dead + 1):
            hi = dead[2 * k] if k < n_dead else n_tokens
            _set_range(out_rank, lo, hi, 1)
            for r in range(lo, hi):
                tid = token_ids[r]
                out_ids[tid >> 5] |= np.uint32(1 << (tid & 31))
            if k < n_dead:
                lo = dead[2 * k + 1]
    return n_tokens - n_dead_tok


@kernel(nogil=True, inline="always")
def _mark(out, rk, token_ids, tok_start, tok_count, x):  # type: ignore[no-untyped-def]
    for r in range(tok_start[x], tok_start[x] + tok_count[x]):
        t = token_ids[r]
        out[t >> 5] |= np.uint32(1 << (t & 31))
        rk[r >> 5] |= np.uint32(1 << (r & 31))


@kernel(nogil=True, inline="always")
def _all_allowed(rk, lo, hi):  # type: ignore[no-untyped-def]
    """Whether every rank in ``[lo, hi)`` is set in the rank-space mask ``rk``."""
    if lo >= hi:
        return True
    wl = lo >> 5
    wh = (hi - 1) >> 5
    if wl == wh:
        m = ((0xFFFFFFFF >> (32 - (hi - lo))) << (lo & 31)) & 0xFFFFFFFF
        return (np.int64(rk[wl]) & m) == m
    m = (0xFFFFFFFF << (lo & 31)) & 0xFFFFFFFF
    if (np.int64(rk[wl]) & m) != m:
        return False
    for w in range(wl + 1, wh):
        if rk[w] != np.uint32(0xFFFFFFFF):
            return False
    m = 0xFFFFFFFF >> (31 - ((hi - 1) & 31))
    return (np.int64(rk[wh]) & m) == m


@kernel(nogil=True)
def _wc_build(  # type: ignore[no-untyped-def]
    gt, lex, node_byte, depth, subtree_end, rank_at, follow, entries, store, ctl, ch, g, n_depth
):
    """Walk the subtree of trie node ``ch`` with the lexeme in state ``g`` before ``ch``'s
    byte, and store what it finds as a walk-cache entry (``automata/walk_cache.py``):
    the dead subtrees' rank ranges, then the end pairs ``(node, state)`` where the lexeme
    accepts and a child's byte is one it cannot read and one that may follow its
    terminal. Returns the entry; ``WC_CHEAP`` if the lexeme lives through fewer than
    ``WC_MIN_NODES`` nodes (walking them costs less than reading an entry; nothing is
    kept); or -1 when the entries or the store are full (the bit of the full one is set
    in ``ctl[WC_GROW]``; nothing is kept). ``n_depth``: the trie's depth + 2."""
    byte_class = gt[H_BYTE_CLASS]
    lex_accept = gt[H_LEX_ACCEPT]
    t = gt[gt[H_LEX_TERM] + g]
    trap = gt[H_TRAP]
    n_ent = ctl[WC_ENTRIES]
    if n_ent >= entries.shape[0]:
        ctl[WC_GROW] |= WG_ENTRIES
        return -1
    cap = store.shape[0]
    used = ctl[WC_USED]
    dead0 = used
    n_d = 0
    ends = np.empty(64, np.int32)
    n_e = 0
    st = np.empty(n_depth, np.int32)
    st[depth[ch] - 1] = g
    x = ch
    end = subtree_end[ch]
    n_live = 0
    while x < end:
        sub = subtree_end[x]
        s = lex_next(lex, st[depth[x] - 1], gt[byte_class + node_byte[x]])
        if s < 0 or s == trap:
            lo = rank_at[x]
            hi = rank_at[sub]
            if lo < hi:
                if n_d > 0 and store[used - 1] == lo:
                    store[used - 1] = hi
                else:
                    if used + 2 > cap:
                        ctl[WC_GROW] |= WG_STORE
                        return -1
                    store[used] = lo
                    store[used + 1] = hi
                    used += 2
                    n_d += 1
            x = sub
            continue
        st[depth[x]] = s
        n_live += 1
        if gt[lex_accept + s] != 0 and sub > x + 1:
            c = x + 1
            while c < sub:
                b = node_byte[c]
                if (
                    lex_next(lex, s, gt[byte_class + b]) < 0
                    and (follow[t * 8 + (b >> 5)] >> (b & 31)) & 1
                ):
                    if 2 * n_e + 2 > ends.shape[0]:
                        grown = np.empty(2 * ends.shape[0], np.int32)
                        grown[: 2 * n_e] = ends[: 2 * n_e]
                        ends = grown
                    ends[2 * n_e] = x
                    ends[2 * n_e + 1] = s
                    n_e += 1
                    break
                c = subtree_end[c]
        x += 1
    if n_live < WC_MIN_NODES:
        return WC_CHEAP
    if used + 2 * n_e > cap:
        ctl[WC_GROW] |= WG_STORE
        return -1
    ends0 = used
    for i in range(2 * n_e):
        store[used + i] = ends[i]
    used += 2 * n_e
    entries[n_ent, WE_DEAD] = dead0
    entries[n_ent, WE_NDEAD] = n_d
    entries[n_ent, WE_ENDS] = ends0
    entries[n_ent, WE_NENDS] = n_e
    ctl[WC_ENTRIES] = n_ent + 1
    ctl[WC_USED] = used
    ctl[WC_BUILDS] += 1
    return n_ent


@kernel(nogil=True)
def rehash_walk_table(old, table):  # type: ignore[no-untyped-def]
    """Move the taken slots of walk-cache table ``old`` into the empty ``table`` (both
    ``int64 [T, 2]``, ``T`` a power of two), probing as ``_walk_below`` does."""
    n = table.shape[0]
    for i in range(old.shape[0]):
        k1 = old[i, WT_KEY]
        if k1 == 0:
            continue
        slot = (((k1 - 1) * WC_HASH) >> 32) & (n - 1)
        while table[slot, WT_KEY] != 0:
            slot = (slot + 1) & (n - 1)
        table[slot, WT_KEY] = k1
        table[slot, WT_ENTRY] = old[i, WT_ENTRY]


@kernel(nogil=True)
def _walk_below(  # type: ignore[no-untyped-def]
    gt, lex, P, L, S, stamp, sorig, ctx, k, ends, es,
    node_byte, depth, subtree_end, child_start, children, tok_start, tok_count, token_ids,
    rank_at,
    states, frames, memo, rk, wc_table, wc_entries, wc_store, wc_ctl,
    out,
):  # fmt: skip
    """Mark the tokens below the end edges of block ``es`` of ``ends`` whose bytes from the
    edge's child on start with a lexeme of a lexeme item of chart set ``k``.

    An end block is 257 offsets by child byte, then ``(end node, child)`` pairs sorted by
    the child's byte. The edges whose byte some lexeme item accepts, and whose subtree is
    not allowed entirely already, are collected as (lexeme, node, child) work and walked
    grouped by lexeme. Each lexeme is followed through the trie with its DFA alone. Where it
    can end with more bytes below, the chart set after that completion is built at ``k+1``
    (reused while the set it came from is unchanged) and nested walks start there, one per
    lexeme item. Walks run on an explicit stack: level ``r`` walks from set ``k+r``, keeps
    its DFA state per depth in ``states[r]`` and its cursor in ``frames[r]``.
    ``frames[0, F_VER]`` must hold the version of set ``k``. After the end block come the
    fields of :class:`TrieArrays` (``kernels/layout.py``) and :func:`fill_mask`'s
    scratch, as arguments (a named tuple passed to this function, which is not inlined,
    measured 2% slower on JSON masks). Returns 1, or a negative error.

    The helpers of the walk's inner loops are written out here, not called. They were
    written out when each call of an inlined helper cost two atomic reference-count
    operations per array (a quarter of the time of Lark's grammar's slowest masks); the
    arrays now arrive borrowed from :func:`fill_mask` (``kernels/borrow.py``), which
    removes those counts, and the written-out form stays as measured.
    """
    byte_class = gt[H_BYTE_CLASS]
    lex_accept = gt[H_LEX_ACCEPT]
    lex_term = gt[H_LEX_TERM]
    first_start = gt[H_FIRST_START]
    first_bytes = gt[H_FIRST_BYTES]
    follow = gt[gt[H_FOLLOW_BYTES] :]
    trap = gt[H_TRAP]
    l_lo = S[k, S_L]
    l_hi = S[k + 1, S_L]
    n_cls = lex_classes(lex)
    # byte classes that some lexeme item of set k can start with
    cls_ok = np.zeros(n_cls, np.uint8)
    for idx in range(l_lo, l_hi):
        if L[idx, L_LINK] >= 0:
            continue  # an earlier item of the set is in the same state
        g = L[idx, L_STATE]
        for c in range(n_cls):
            if lex_next(lex, g, c) >= 0:
                cls_ok[c] = 1
    # collect (lexer state, end node, child) for the end edges whose byte some item accepts
    work = np.empty((64, 3), np.int64)
    n_work = 0
    for b in range(256):
        c = gt[byte_class + b]
        if cls_ok[c] == 0:
            continue
        for i in range(ends[es + b], ends[es + b + 1]):
            x0 = ends[es + 257 + 2 * i]
            ch = ends[es + 258 + 2 * i]
            if _all_allowed(rk, rank_at[ch], rank_at[subtree_end[ch]]):
                continue
            for idx in range(l_lo, l_hi):
                g = L[idx, L_STATE]
                # L_LINK >= 0: an earlier item of the set is in the same state
                if L[idx, L_LINK] >= 0 or lex_next(lex, g, c) < 0:
                    continue
                if n_work == work.shape[0]:
                    grown = np.empty((2 * n_work, 3), np.int64)
                    grown[:n_work] = work
                    work = grown
                work[n_work, 0] = g
                work[n_work, 1] = x0
                work[n_work, 2] = ch
                n_work += 1
    # walk them grouped by lexer state, so each completion set is built once per state
    order = np.argsort(work[:n_work, 0], kind="mergesort")
    for wi in range(n_work):
        w = order[wi]
        g0 = work[w, 0]
        x0 = work[w, 1]
        ch0 = work[w, 2]
        level = 0
        frames[0, F_G] = g0
        frames[0, F_XS] = x0
        frames[0, F_FB] = 0  # no further children after ch0
        frames[0, F_FBE] = 0
        frames[0, F_MODE] = 0
        frames[0, F_X] = ch0
        frames[0, F_END] = subtree_end[ch0]
        frames[0, F_IDX] = -1
        frames[0, F_NEW] = 1
        frames[0, F_EC] = -1
        states[0, depth[x0]] = g0
        while level >= 0:
            fk = k + level
            if frames[level, F_IDX] >= 0:
                # start the next nested walk at node F_X, one per distinct lexeme state
                idx = frames[level, F_IDX]
                hi = S[fk + 2, S_L]
                xs = frames[level, F_X]
                ps = states[level, depth[xs]]
                nxt = -1
                nv = frames[level, F_NV]
                h = get64(S, fk + 1, S_HASH)
                gen = ctx[C_SCRATCH2]
                while idx < hi:
                    g2 = L[idx, L_STATE]
                    # an earlier item of the set in the same state (L_LINK): walked already
                    first = L[idx, L_LINK] < 0
                    idx += 1
                    if not first:
                        continue
                    # whether g2 can read one of the classes listed in the frame where
                    # the walk stopped at this end (an unlisted overflow, nv < 0, is yes)
                    may = nv < 0
                    for j in range(nv):
                        if lex_next(lex, g2, frames[level, F_V + j]) >= 0:
                            may = True
                            break
                    if not may:
                        continue
                    # record that a lexeme in state g2 was explored below node xs from
                    # a set with hash h in this call (generation gen): seen 1 if done
                    # already, 0 if not (now recorded), -1 if the memo is full here
                    key = h + g2 * 0x1F1F1F1F1F1F1F1
                    n_memo = memo.shape[0]
                    slot = (key ^ (xs * 0x1E3779B97F4A7C15)) & (n_memo - 1)
                    seen = -1
                    for _ in range(_MEMO_PROBES):
                        if memo[slot, MM_GEN] != gen:
                            memo[slot, MM_KEY] = key
                            memo[slot, MM_NODE] = xs
                            memo[slot, MM_GEN] = gen
                            seen = 0
                            break
                        if memo[slot, MM_KEY] == key and memo[slot, MM_NODE] == xs:
                            seen = 1
                            break
                        slot = (slot + 1) & (n_memo - 1)
                    if seen < 0:
                        return ERR_MEMO
                    if seen == 0:
                        nxt = g2
                        break
                frames[level, F_IDX] = idx
                if nxt >= 0:
                    if level + 2 >= frames.shape[0]:
                        return ERR_DEPTH
                    level += 1
                    frames[level, F_G] = nxt
                    frames[level, F_XS] = xs
                    frames[level, F_PS] = ps
                    n_first = gt[first_start + nxt + 1] - gt[first_start + nxt]
                    if child_start[xs + 1] - child_start[xs] <= 2 * n_first:
                        frames[level, F_MODE] = 1
                        frames[level, F_FB] = child_start[xs]
                        frames[level, F_FBE] = child_start[xs + 1]
                    else:
                        frames[level, F_MODE] = 0
                        frames[level, F_FB] = gt[first_start + nxt]
                        frames[level, F_FBE] = gt[first_start + nxt + 1]
                    frames[level, F_X] = 0
                    frames[level, F_END] = 0
                    frames[level, F_IDX] = -1
                    frames[level, F_NEW] = 0
                    frames[level, F_EC] = -1
                else:
                    frames[level, F_IDX] = -1
                    if frames[level, F_EC] < 0:
                        frames[level, F_X] += 1  # resume the walk after node F_X
                    # (from a walk-cache entry, F_EC is at the next end pair already)
                continue
            fg = frames[level, F_G]
            if frames[level, F_X] >= frames[level, F_END]:
                # enter the subtree of the next child that the lexeme can start with
                fb = frames[level, F_FB]
                if fb >= frames[level, F_FBE]:
                    level -= 1
                    continue
                frames[level, F_FB] = fb + 1
                xs = frames[level, F_XS]
                if frames[level, F_MODE] == 0:
                    # the child reached by the lexeme's first byte fb, if any (binary search)
                    b = gt[first_bytes + fb]
                    lo = child_start[xs]
                    hi = child_start[xs + 1]
                    while lo < hi:
                        mid = (lo + hi) >> 1
                        if node_byte[children[mid]] < b:
                            lo = mid + 1
                        else:
                            hi = mid
                    ch = -1
                    if lo < child_start[xs + 1] and node_byte[children[lo]] == b:
                        ch = children[lo]
                else:
                    ch = children[fb]
                    if lex_next(lex, fg, gt[byte_class + node_byte[ch]]) < 0:
                        ch = -1
                if ch >= 0:
                    # the previous lexeme must end here: not if it can read this byte
                    b = node_byte[ch]
                    pt = gt[lex_term + frames[level, F_PS]]
                    if (
                        lex_next(lex, frames[level, F_PS], gt[byte_class + b]) >= 0
                        or (follow[pt * 8 + (b >> 5)] >> (b & 31)) & 1 == 0
                    ):
                        ch = -1
                if ch >= 0:
                    frames[level, F_X] = ch
                    frames[level, F_END] = subtree_end[ch]
                    frames[level, F_NEW] = 1
                    states[level, depth[xs]] = fg
                continue
            t = gt[lex_term + fg]
            if frames[level, F_NEW] != 0:
                # a subtree walk about to start at node F_X: take it from the walk cache
                # if the (node, lexer state) pair is stored, else record or store it
                frames[level, F_NEW] = 0
                ch = frames[level, F_X]
                lo = rank_at[ch]
                hi_all = rank_at[subtree_end[ch]]
                e = -2
                if subtree_end[ch] - ch < WC_MIN_NODES:
                    pass  # a small subtree: walking it costs less than a lookup
                elif not _all_allowed(rk, lo, hi_all):
                    key = (np.int64(ch) << 32) | fg
                    n_slots = wc_table.shape[0]
                    slot = ((key * WC_HASH) >> 32) & (n_slots - 1)
                    found = False
                    for _ in range(WC_PROBES):
                        k1 = wc_table[slot, WT_KEY]
                        if k1 == key + 1:
                            e = wc_table[slot, WT_ENTRY]
                            found = True
                            break
                        if k1 == 0:
                            if 2 * (wc_ctl[WC_SLOTS] + 1) <= n_slots:
                                wc_table[slot, WT_KEY] = key + 1
                                wc_table[slot, WT_ENTRY] = -1
                                wc_ctl[WC_SLOTS] += 1
                            else:
                                wc_ctl[WC_GROW] |= WG_TABLE
                            found = True
                            break
                        slot = (slot + 1) & (n_slots - 1)
                    if not found:
                        wc_ctl[WC_GROW] |= WG_TABLE
                    if e == -1:  # seen once before: store it now
                        e = _wc_build(
                            gt, lex, node_byte, depth, subtree_end, rank_at, follow,
                            wc_entries, wc_store, wc_ctl, ch, fg, states.shape[1],
                        )  # fmt: skip
                        if e != -1:  # an entry, or WC_CHEAP (-1: full, try again later)
                            wc_table[slot, WT_ENTRY] = e
                    if e >= 0:
                        # mark the tokens the lexeme lives through: the subtree's ranks
                        # but the dead ranges; then visit only the end pairs
                        wc_ctl[WC_HITS] += 1
                        a = wc_entries[e, WE_DEAD]
                        n_d = wc_entries[e, WE_NDEAD]
                        for i in range(n_d + 1):
                            hi = wc_store[a + 2 * i] if i < n_d else hi_all
                            r = lo
                            while r < hi:
                                wd = r >> 5
                                full = (r & 31) == 0 and r + 32 <= hi
                                if full and rk[wd] == np.uint32(0xFFFFFFFF):
                                    r += 32
                                    continue
                                m = np.uint32(1 << (r & 31))
                                if rk[wd] & m == 0:
                                    rk[wd] |= m
                                    tid = token_ids[r]
                                    out[tid >> 5] |= np.uint32(1 << (tid & 31))
                                r += 1
                            if i < n_d:
                                lo = wc_store[a + 2 * i + 1]
                        frames[level, F_EC] = wc_entries[e, WE_ENDS]
                        frames[level, F_ECE] = wc_entries[e, WE_ENDS] + 2 * wc_entries[e, WE_NENDS]
                else:
                    frames[level, F_X] = frames[level, F_END]  # nothing new below
            x = frames[level, F_X]
            end = frames[level, F_END]
            ec = frames[level, F_EC]
            ece = frames[level, F_ECE]
            suspended = False
            while True:
                if ec >= 0:
                    # from a walk-cache entry: the next end pair
                    if ec >= ece:
                        break
                    x = wc_store[ec]
                    s = wc_store[ec + 1]
                    ec += 2
                    if _all_allowed(rk, rank_at[x], rank_at[subtree_end[x]]):
                        continue
                    states[level, depth[x]] = s
                else:
                    if x >= end:
                        break
                    sub = subtree_end[x]
                    if _all_allowed(rk, rank_at[x], rank_at[sub]):
                        x = sub  # nothing new to find below
                        continue
                    d = depth[x]
                    s = lex_next(lex, states[level, d - 1], gt[byte_class + node_byte[x]])
                    if s < 0 or s == trap:
                        x = sub
                        continue
                    states[level, d] = s
                    _mark(out, rk, token_ids, tok_start, tok_count, x)
                    # can the lexeme end here, before a child whose byte it cannot read
                    # and which may follow terminal t?
                    ends_here = False
                    if gt[lex_accept + s] != 0 and sub > x + 1:
                        ch = x + 1
                        while ch < sub:
                            b = node_byte[ch]
                            if (
                                lex_next(lex, s, gt[byte_class + b]) < 0
                                and (follow[t * 8 + (b >> 5)] >> (b & 31)) & 1
                            ):
                                ends_here = True
                                break
                            ch = subtree_end[ch]
                    if not ends_here:
                        x += 1
                        continue
                # the lexeme can end at node x, in state s
                # completion of `fg` from set fk, at fk+1: reuse while still valid
                if frames[level, F_CG] != fg or frames[level, F_CV] != frames[level, F_VER]:
                    r = complete_state(gt, lex, P, L, S, stamp, sorig, ctx, fk + 1, fg)
                    if r < 0:
                        return r
                    ctx[C_VERSION] += 1
                    frames[level + 1, F_VER] = ctx[C_VERSION]
                    frames[level, F_CG] = fg
                    frames[level, F_CV] = frames[level, F_VER]
                    frames[level, F_CA] = 1 if r > 0 else 0
                if frames[level, F_CA] == 0:
                    if ec < 0:
                        x += 1
                    continue
                # list in the frame (F_NV, F_V) the byte classes of x's children where
                # the lexeme ends (it cannot read the byte, which may follow t) and
                # below which some token is not allowed yet: where a nested lexeme
                # may start (F_NV -1: more than F_NV_MAX of them, not listed)
                nv = 0
                for i in range(child_start[x], child_start[x + 1]):
                    ch = children[i]
                    b = node_byte[ch]
                    c = gt[byte_class + b]
                    if (
                        lex_next(lex, s, c) >= 0
                        or (follow[t * 8 + (b >> 5)] >> (b & 31)) & 1 == 0
                        or _all_allowed(rk, rank_at[ch], rank_at[subtree_end[ch]])
                    ):
                        continue
                    dup = False
                    for j in range(nv):
                        if frames[level, F_V + j] == c:
                            dup = True
                            break
                    if dup:
                        continue
                    if nv == F_NV_MAX:
                        nv = -1
                        break
                    frames[level, F_V + nv] = c
                    nv += 1
                frames[level, F_NV] = nv
                if nv != 0:
                    frames[level, F_X] = x
                    frames[level, F_IDX] = S[fk + 1, S_L]
                    if ec >= 0:
                        frames[level, F_EC] = ec
                    suspended = True
                    break
                if ec < 0:
                    x += 1
            if not suspended:
                frames[level, F_X] = end
                frames[level, F_EC] = -1
    return 1


@kernel(nogil=True)
def fill_mask(  # type: ignore[no-untyped-def]
    gt, lex, P, L, S, stamp, sorig, ctx, n_sets,
    node_byte, depth, subtree_end, child_start, children, tok_start, tok_count, token_ids,
    rank_at,
    cmeta, acc_dense, acc_rank, acc_sparse, ends,
    eos_ids,
    states, frames, memo, rk, wc_table, wc_entries, wc_store, wc_ctl,
    out,
):  # fmt: skip
    """Write the allowed-token mask after the input (top set ``n_sets-1``) into ``out``.

    ``out``: ``uint32 [W]`` (id space). After the chart arrays and ``n_sets`` come the
    fields of :class:`TrieArrays` (``kernels/layout.py``), the grammar's token caches as
    ``TokenCaches.snapshot`` gives them (``cmeta`` with the ``M_*`` columns, dense rows in
    id and rank space, sparse ranks, end blocks), ``eos_ids`` (``int32 [k]``) and the
    matcher's scratch: ``states`` (``int32 [max_depth+2, max_depth+2]``), ``frames``
    (``int64 [max_depth+2, FRAME_COLS]``), ``memo`` (``int64 [2^k, MEMO_COLS]``), ``rk``
    (``uint32 [RW]``, the mask in rank space), then the calling thread's walk cache of
    this grammar (``WalkCache.kernel_arrays``, ``automata/walk_cache.py``; the caller grows
    its arrays afterwards if the kernel found them full). These are arguments, not tuples, because
    this kernel runs at every token and a tuple argument cost about 10 ns more per array
    than the same array passed alone. Returns 0 on success, ``g + 1`` if lexer
    state ``g`` has no cache yet (nothing written; the caller builds it and calls again), or
    a negative error: grow the chart, or the memo for ``ERR_MEMO``, and call again.
    """
    gt, lex, P, L, S, stamp, sorig, ctx = borrow((gt, lex, P, L, S, stamp, sorig, ctx))
    node_byte, depth, subtree_end, child_start, children, tok_start, tok_count, token_ids = borrow(
        (node_byte, depth, subtree_end, child_start, children, tok_start, tok_count, token_ids)
    )
    rank_at, cmeta, acc_dense, acc_rank, acc_sparse, ends, eos_ids = borrow(
        (rank_at, cmeta, acc_dense, acc_rank, acc_sparse, ends, eos_ids)
    )
    states, frames, memo, rk, wc_table, wc_entries, wc_store, wc_ctl, out = borrow(
        (states, frames, memo, rk, wc_table, wc_entries, wc_store, wc_ctl, out)
    )
    j = n_sets - 1
    ni = gt[H_NI]
    G = gt[H_G]
    seen = ni + G + gt[H_NN]
    lex_is_start = gt[H_LEX_IS_START]
    lex_term = gt[H_LEX_TERM]
    special_term = gt[H_SPECIAL_TERM]
    l_lo = S[j, S_L]
    l_hi = S[j + 1, S_L]
    for idx in range(l_lo, l_hi):
        if cmeta[L[idx, L_STATE], M_KIND] == KIND_MISSING:
            return L[idx, L_STATE] + 1
    for w in range(out.shape[0]):
        out[w] = 0
    for w in range(rk.shape[0]):
        rk[w] = 0
    if S[j, S_ACCEPT] != 0:
        for e in eos_ids:
            out[e >> 5] |= np.uint32(1 << (e & 31))
    # 1. tokens that stay inside the current lexeme: cached per lexer state
    ser = next_serial(stamp)
    n_words = out.shape[0]
    n_rwords = rk.shape[0]
    for idx in range(l_lo, l_hi):
        g = L[idx, L_STATE]
        if stamp[seen + g] == ser:
            continue
        stamp[seen + g] = ser
        kind = cmeta[g, M_KIND]
        if kind == KIND_DENSE:
            row = acc_dense[cmeta[g, M_IDX]]
            for w in range(n_words):
                out[w] |= row[w]
            rrow = acc_rank[cmeta[g, M_IDX]]
            for w in range(n_rwords):
                rk[w] |= rrow[w]
        else:
            a = cmeta[g, M_IDX]
            for i in range(a, a + cmeta[g, M_LEN]):
                r = acc_sparse[i]
                t = token_ids[r]
                out[t >> 5] |= np.uint32(1 << (t & 31))
                rk[r >> 5] |= np.uint32(1 << (r & 31))
        if gt[lex_is_start + g] != 0:
            sp = gt[special_term + gt[lex_term + g]]
            if sp >= 0:
                out[sp >> 5] |= np.uint32(1 << (sp & 31))
    # special tokens that may follow once the pending lexemes end
    if gt[H_N_SPECIAL] > 0:
        r = end_lexemes(gt, lex, P, L, S, stamp, sorig, ctx, j, n_sets, np.int64(-1), np.int64(-1))
        if r < 0:
            return r
        if r > 0:
            for idx in range(S[n_sets, S_L], S[n_sets + 1, S_L]):
                g = L[idx, L_STATE]
                if gt[lex_is_start + g] != 0:
                    sp = gt[special_term + gt[lex_term + g]]
                    if sp >= 0:
                        out[sp >> 5] |= np.uint32(1 << (sp & 31))
    # 2. tokens inside which the lexeme ends: walk on from the recorded end edges
    ser = next_serial(stamp)
    ctx[C_SCRATCH2] += 1  # memo generation
    k = n_sets
    for i in range(frames.shape[0]):
        frames[i, F_CG] = -1
    for idx in range(l_lo, l_hi):
        g = L[idx, L_STATE]
        if stamp[seen + g] == ser:
            continue
        stamp[seen + g] = ser
        if cmeta[g, M_NENDS] == 0:
            continue
        r = complete_state(gt, lex, P, L, S, stamp, sorig, ctx, k, g)
        if r < 0:
            return r
        if r == 0:
            continue
        ctx[C_VERSION] += 1
        frames[0, F_VER] = ctx[C_VERSION]
        r = _walk_below(
            gt, lex, P, L, S, stamp, sorig, ctx, k, ends, cmeta[g, M_ENDS],
            node_byte, depth, subtree_end, child_start, children, tok_start, tok_count,
            token_ids, rank_at,
            states, frames, memo, rk, wc_table, wc_entries, wc_store, wc_ctl,
            out,
        )  # fmt: skip
        if r < 0:
            return r
    return 0
