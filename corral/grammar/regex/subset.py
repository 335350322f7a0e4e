"""The subset construction of a character automaton from an ε-NFA with guards, as a Numba
kernel (:func:`subset_construction`; the Python side and the meaning of guards are in
:mod:`corral.grammar.regex.dfa`).

A DFA state is a set of NFA states (those reached by the last character) and what the
guards need to know about that character (its *previous key*, an id given per block by
the caller; ``-1`` for the start, where there is no previous character). The ε-closure of
a set depends on the characters around the position only through the outcomes of the
guards on its ε-edges, so:

* the acceptance of a state is its closure before the end of the text;
* the blocks that may come next are grouped by the guards' outcomes (given the state's
  previous character), and each group's closure is taken once.

Sets are interned (sorted, hashed, checked exactly); construction steps are counted as
the Python construction counted them: the size of each distinct (set, guard outcomes)
closure, and ``1 + size`` for each new state.
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel
from .int_table import table_get, table_new, table_put
from .reach import co_reachable

OK = 0
TOO_MANY_STATES = 1
OUT_OF_STEPS = 2

# guard kinds, as the kernel numbers them (see ``ast.py``)
BEHIND, AHEAD, BOUNDARY, TEXT_START, TEXT_END, LINE_START, LINE_END = range(7)

_NONE = -1  # no character: the start or the end of the text
_FNV_PRIME = np.uint64(0x100000001B3)
_FNV_BASIS = np.uint64(0xCBF29CE484222325)


@kernel(nogil=True, inline="always")
def _holds(g, prev, nxt, g_kind, g_negate, g_member):  # type: ignore[no-untyped-def]
    """Whether guard ``g`` holds between the blocks ``prev`` and ``nxt`` (``-1``: none)."""
    k = g_kind[g]
    p = prev >= 0 and g_member[g, prev]
    n = nxt >= 0 and g_member[g, nxt]
    if k == BEHIND:
        r = p
    elif k == AHEAD:
        r = n
    elif k == BOUNDARY:
        r = p != n
    elif k == TEXT_START:
        r = prev < 0
    elif k == TEXT_END:
        r = nxt < 0
    elif k == LINE_START:
        r = prev < 0 or p
    else:  # LINE_END
        r = nxt < 0 or n
    return r != g_negate[g]


@kernel(nogil=True, inline="always")
def _signature(prev, nxt, g_kind, g_negate, g_member):  # type: ignore[no-untyped-def]
    """The outcomes of every guard between ``prev`` and ``nxt``, one bit each."""
    sig = np.int64(0)
    for g in range(g_kind.shape[0]):
        if _holds(g, prev, nxt, g_kind, g_negate, g_member):
            sig |= np.int64(1) << g
    return sig


@kernel(nogil=True, inline="always")
def _reaching(n, eps_ptr, eps_to, eps_guard, seed):  # type: ignore[no-untyped-def]
    """``bool [n]``: the states with a path of unguarded ε-edges to ``seed``."""
    m = eps_to.shape[0]
    src = np.empty(m, np.int64)
    dst = np.empty(m, np.int64)
    k = 0
    for s in range(n):
        for e in range(eps_ptr[s], eps_ptr[s + 1]):
            if eps_guard[e] < 0:
                src[k] = s
                dst[k] = eps_to[e]
                k += 1
    seeds = np.zeros(n, np.bool_)
    seeds[seed] = True
    return co_reachable(n, src, dst, k, seeds)


@kernel(nogil=True)
def subset_construction(  # type: ignore[no-untyped-def]
    start,
    final,
    eps_ptr,
    eps_to,
    eps_guard,
    chr_ptr,
    chr_target,
    cb_ptr,
    cb_block,
    n_blocks,
    g_kind,
    g_negate,
    g_member,
    prev_key,
    universal,
    whole,
    max_states,
    max_steps,
):
    """Determinise an ε-NFA over blocks of characters.

    Args:
        start, final: the NFA's start and (only) accepting state.
        eps_ptr, eps_to, eps_guard: ε-edges, CSR by source (``int64``); ``eps_guard[e]``
            is the edge's guard or ``-1``.
        chr_ptr, chr_target: character edges, CSR by source; ``cb_ptr``, ``cb_block``:
            the blocks each character edge reads, CSR by edge.
        n_blocks: the number of blocks.
        g_kind, g_negate, g_member: the distinct guards (at most 63): kind (this
            module's numbering), negation, and ``bool [G, n_blocks]`` membership of each
            block in the guard's characters (the newline for the line kinds).
        prev_key: ``int64 [n_blocks]``, what the guards remember of a previous character
            in that block; all ``0`` when there are no guards.
        universal, whole: ``bool [n_nfa]``, the states from which every text is accepted
            (``dfa.universal_targets``), and their representative (``-1``: none): a target
            set holding one of them becomes ``{whole}`` with no previous character. An
            empty ``universal`` with a representative: the states with an unguarded
            ε-path to it (``nfa.whole``), found here.
        max_states, max_steps: stop past this many states, or steps.

    Returns:
        ``(status, steps, n, edge_ptr, edge_block, edge_target, accept, live)``: the
        character DFA's transitions, CSR by state (state 0 is the start), its accepting
        states and the states that can reach one (valid when ``status`` is
        :data:`OK`; else the construction stopped, having spent ``steps``).
    """
    guard_free = g_kind.shape[0] == 0
    n_nfa = eps_ptr.shape[0] - 1
    if whole >= 0 and universal.shape[0] == 0:
        universal = _reaching(n_nfa, eps_ptr, eps_to, eps_guard, whole)
    elif whole < 0:
        universal = np.zeros(n_nfa, np.bool_)

    # interned NFA sets
    sets = np.empty(1024, np.int64)
    set_ptr = np.zeros(65, np.int64)
    set_next = np.full(65, -1, np.int64)  # as long as set_ptr
    heads_k, heads_v = table_new(1024)  # a set's hash -> the last set with it
    n_heads = 0
    n_sets = 0

    # DFA states: (set, previous key) -> state
    # (set, previous key + 1) -> state, the pair as one key: set * n_keys + key + 1
    n_keys = np.int64(prev_key.max() + 2) if prev_key.shape[0] else np.int64(2)
    index_k, index_v = table_new(1024)
    n_index = 0
    rep_set = np.empty(64, np.int64)
    rep_prev = np.empty(64, np.int64)  # a block of the previous character (-1: none)
    # the (set, guard outcomes) closures counted: set << 32 | the outcomes' number
    sig_k, sig_v = table_new(64)  # guard outcomes -> their number
    n_sigs = 0
    charged_k, charged_v = table_new(1024)
    n_charged = 0
    steps = np.int64(0)

    # transitions, in the order states are processed (= state order)
    e_ptr = np.zeros(65, np.int64)
    e_block = np.empty(256, np.int64)
    e_target = np.empty(256, np.int64)
    n_edges = 0
    accept = np.zeros(64, np.bool_)

    # scratch
    stamp = np.zeros(n_nfa, np.int64)
    cur_stamp = np.int64(0)
    stack = np.empty(n_nfa, np.int64)
    closure = np.empty(n_nfa, np.int64)
    group_of = np.full(max(n_blocks, 1), -1, np.int64)
    group_sig = np.empty(max(n_blocks, 1), np.int64)
    pairs = np.empty(256, np.int64)
    tgt = np.empty(n_nfa, np.int64)

    # the start state: {start}, no previous character
    sets[0] = start
    set_ptr[1] = 1
    h0 = (_FNV_BASIS ^ np.uint64(start)) * _FNV_PRIME
    heads_k, heads_v, n_heads = table_put(heads_k, heads_v, n_heads, np.int64(h0), 0)
    n_sets = 1
    index_k, index_v, n_index = table_put(index_k, index_v, n_index, np.int64(0), 0)
    rep_set[0] = 0
    rep_prev[0] = _NONE
    n = 1

    status = OK
    i = 0
    while i < n:
        sid = rep_set[i]
        prev = rep_prev[i]
        # the next characters grouped by the guards' outcomes after `prev`
        n_groups = 0
        if guard_free:
            n_groups = 1
            group_sig[0] = 0
            for b in range(n_blocks):
                group_of[b] = 0
        else:
            for b in range(n_blocks):
                sig = _signature(prev, b, g_kind, g_negate, g_member)
                gi = -1
                for x in range(n_groups):
                    if group_sig[x] == sig:
                        gi = x
                        break
                if gi < 0:
                    gi = n_groups
                    group_sig[gi] = sig
                    n_groups += 1
                group_of[b] = gi

        # acceptance, then each group's closure (group -1: the end of the text)
        n_pairs = 0
        for gi in range(-1, n_groups):
            if gi < 0 and guard_free:
                continue  # one closure serves acceptance and every block
            sig = _signature(prev, _NONE, g_kind, g_negate, g_member) if gi < 0 else group_sig[gi]
            # the closure of set `sid` under these outcomes
            cur_stamp += 1
            size = 0
            for x in range(set_ptr[sid], set_ptr[sid + 1]):
                s = sets[x]
                if stamp[s] != cur_stamp:
                    stamp[s] = cur_stamp
                    stack[size] = s
                    closure[size] = s
                    size += 1
            top = size
            while top > 0:
                top -= 1
                s = stack[top]
                for e in range(eps_ptr[s], eps_ptr[s + 1]):
                    t = eps_to[e]
                    if stamp[t] == cur_stamp:
                        continue
                    g = eps_guard[e]
                    if g >= 0 and not (sig >> g) & 1:
                        continue
                    stamp[t] = cur_stamp
                    stack[top] = t
                    top += 1
                    closure[size] = t
                    size += 1
            sig_id = table_get(sig_k, sig_v, sig)
            if sig_id < 0:
                sig_id = n_sigs
                sig_k, sig_v, n_sigs = table_put(sig_k, sig_v, n_sigs, sig, sig_id)
            key = (sid << 32) | sig_id
            if table_get(charged_k, charged_v, key) < 0:
                charged_k, charged_v, n_charged = table_put(charged_k, charged_v, n_charged, key, 1)
                steps += size
                if steps > max_steps:
                    return OUT_OF_STEPS, steps, n, e_ptr, e_block, e_target, accept, accept
            if gi < 0 or guard_free:
                accept[i] = stamp[final] == cur_stamp
            if gi < 0:
                continue
            # the (block, target) pairs this group reads
            for x in range(size):
                s = closure[x]
                for ce in range(chr_ptr[s], chr_ptr[s + 1]):
                    t = chr_target[ce]
                    for y in range(cb_ptr[ce], cb_ptr[ce + 1]):
                        b = cb_block[y]
                        if group_of[b] != gi:
                            continue
                        if n_pairs >= pairs.shape[0]:
                            grown = np.empty(2 * pairs.shape[0], np.int64)
                            grown[:n_pairs] = pairs[:n_pairs]
                            pairs = grown
                        pairs[n_pairs] = b * n_nfa + t
                        n_pairs += 1

        # one target set per block
        srt = np.sort(pairs[:n_pairs])
        x = 0
        while x < n_pairs:
            b = srt[x] // n_nfa
            y = x
            while y < n_pairs and srt[y] // n_nfa == b:
                y += 1
            # the distinct targets srt[x:y] % n_nfa, ascending; a set that accepts
            # every text is the representative alone, with no previous character
            cnt = 0
            last = -1
            whole_set = False
            for z in range(x, y):
                t = srt[z] % n_nfa
                if t != last:
                    tgt[cnt] = t
                    cnt += 1
                    last = t
                    if universal[t]:
                        whole_set = True
            if whole_set:
                tgt[0] = whole
                cnt = 1
            h = _FNV_BASIS
            for z in range(cnt):
                h = (h ^ np.uint64(tgt[z])) * _FNV_PRIME
            # find or intern the set
            found = -1
            cand = table_get(heads_k, heads_v, np.int64(h))
            while cand >= 0 and found < 0:
                if set_ptr[cand + 1] - set_ptr[cand] == cnt:
                    w = set_ptr[cand]
                    same = True
                    for z in range(cnt):
                        if sets[w + z] != tgt[z]:
                            same = False
                            break
                    if same:
                        found = cand
                if found < 0:
                    cand = set_next[cand]
            if found < 0:
                found = n_sets
                w = set_ptr[n_sets]
                if w + cnt > sets.shape[0]:
                    grown = np.empty(max(2 * sets.shape[0], w + cnt), np.int64)
                    grown[:w] = sets[:w]
                    sets = grown
                for z in range(cnt):
                    sets[w] = tgt[z]
                    w += 1
                if n_sets + 1 >= set_ptr.shape[0]:
                    grown = np.zeros(2 * set_ptr.shape[0], np.int64)
                    grown[: n_sets + 1] = set_ptr[: n_sets + 1]
                    set_ptr = grown
                    grown2 = np.full(set_ptr.shape[0], -1, np.int64)
                    grown2[:n_sets] = set_next[:n_sets]
                    set_next = grown2
                set_ptr[n_sets + 1] = w
                set_next[n_sets] = table_get(heads_k, heads_v, np.int64(h))
                heads_k, heads_v, n_heads = table_put(
                    heads_k, heads_v, n_heads, np.int64(h), n_sets
                )
                n_sets += 1
            # find or add the state
            skey = found * n_keys + (0 if whole_set else prev_key[b] + 1)
            j = table_get(index_k, index_v, skey)
            if j < 0:
                steps += 1 + cnt
                if steps > max_steps:
                    return OUT_OF_STEPS, steps, n, e_ptr, e_block, e_target, accept, accept
                if n >= max_states:
                    return TOO_MANY_STATES, steps, n, e_ptr, e_block, e_target, accept, accept
                if n >= rep_set.shape[0]:
                    cap = 2 * rep_set.shape[0]
                    g1 = np.empty(cap, np.int64)
                    g1[:n] = rep_set[:n]
                    rep_set = g1
                    g2 = np.empty(cap, np.int64)
                    g2[:n] = rep_prev[:n]
                    rep_prev = g2
                    g3 = np.zeros(cap, np.bool_)
                    g3[:n] = accept[:n]
                    accept = g3
                    g4 = np.zeros(cap + 1, np.int64)
                    g4[: n + 1] = e_ptr[: n + 1]
                    e_ptr = g4
                j = n
                index_k, index_v, n_index = table_put(index_k, index_v, n_index, skey, j)
                rep_set[j] = found
                rep_prev[j] = _NONE if whole_set else b
                n += 1
            if n_edges >= e_block.shape[0]:
                g5 = np.empty(2 * e_block.shape[0], np.int64)
                g5[:n_edges] = e_block[:n_edges]
                e_block = g5
                g6 = np.empty(2 * e_target.shape[0], np.int64)
                g6[:n_edges] = e_target[:n_edges]
                e_target = g6
            e_block[n_edges] = b
            e_target[n_edges] = j
            n_edges += 1
            x = y
        e_ptr[i + 1] = n_edges
        i += 1

    # the states that can reach an accepting one
    src = np.empty(n_edges, np.int64)
    for q in range(n):
        src[e_ptr[q] : e_ptr[q + 1]] = q
    live = co_reachable(n, src, e_target, n_edges, accept)
    return (
        status,
        steps,
        n,
        e_ptr[: n + 1].copy(),
        e_block[:n_edges].copy(),
        e_target[:n_edges].copy(),
        accept[:n].copy(),
        live,
    )
