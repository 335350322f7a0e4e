"""Kernels: continuation classes of chart items, so that items of equal futures merge.

An Earley item ``(rule, dot, origin)`` depends on its origin set only through what
happens when its left-hand symbol completes there: which items of that set wait for the
symbol, and (recursively) what happens when *those* complete. Two origins that agree on
that *continuation* make the item behave the same, so one copy suffices. A lexeme item
``(state, origin)`` likewise depends on its origin only through the continuation of its
terminal there.

Every item carries a class (``P_CLASS``, ``L_CLASS``: 64 bits, ``kernels/wide.py``): items
with equal classes and equal rule (lexer state) behave the same wherever their origins lie, and the
chart keeps one of them. By default the class is ``-(origin + 1)``: identity, no merging.
In a set built with ``ctx[C_CLASSIFY]`` on (the completability check's gap runs, where
the sets would otherwise hold one copy of each item per byte position a lexeme or rule
could have started at), ``classify_set`` gives the items that originate in the set a hash of their
continuation instead:

    cont(k, X) = H{ (item after X, class) : item in set k waits for X }

where an item that itself originates in ``k`` stands in with ``cont(k, lhs)`` in place of
its class. That is a recursion inside set ``k`` that may loop (left recursion), so it is
unfolded depth first from ``X``, and a symbol met again on the current path is written as
a back reference (its distance up the path). A symbol's value is remembered only when its
unfolding refers to nothing above it, so a remembered value equals the one unfolded from
that symbol itself. Past a budget of expansions, the symbol keeps the identity class.

Equal hashes mean equal unfoldings (up to 64-bit hash collisions, the same assumption as
the chart's structural set hashes), and equal unfoldings mean the completions reach the
same items with the same classes, so merging is exact. Ignored terminals keep the
identity class: their completion also copies the origin set's fresh lexemes, which the
continuation does not describe. Set 0 is never classified, so its items (the only ones
that can complete the start rule) stay apart.
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel
from .layout import (
    H_G,
    H_ITEM_LHS,
    H_ITEM_SYM,
    H_LEX_TERM,
    H_NI,
    H_NN,
    H_NT,
    H_TERM_IGNORE,
    L_CLASS,
    L_ORIGIN,
    L_STATE,
    P_CLASS,
    P_ITEM,
    P_LINK,
    P_ORIGIN,
    S_L,
    S_P,
)
from .wide import get64, put64

MAX_DEPTH = 32  # frames of one unfolding
MAX_EXPANSIONS = 256  # symbols one unfolding may expand; past that the root keeps its identity
_K_ITEM = 0x100000001B3
_K_SYM = 0x2127599BF4325C37
_K_REF = 0x61C8864680B583EB


@kernel(nogil=True, inline="always")
def mix(x):  # type: ignore[no-untyped-def]
    """A 64-bit finaliser (splitmix64): spreads every input bit over the output."""
    x = (x ^ (x >> 31)) * 0x7FB5D329728EA185
    x = (x ^ (x >> 27)) * 0x1CE4E5B9BF58476D
    return x ^ (x >> 33)


def scratch_size(n_terminals: int, n_nonterminals: int) -> int:
    """Slots ``classify_set`` needs at the end of the chart's ``stamp`` array."""
    return 3 * (n_terminals + n_nonterminals) + 4 * MAX_DEPTH


@kernel(nogil=True)
def classify_set(gt, P, L, S, stamp, ser, k, p_end, l_end):  # type: ignore[no-untyped-def]
    """Give the items of set ``k`` (rows ``S[k, S_P]:p_end`` and ``S[k, S_L]:l_end``) that
    originate in ``k`` their continuation classes. ``ser``: the set's serial (stamps the
    scratch). Overwrites ``P[:, P_LINK]`` of the set (the dedupe links, dead once the set is
    built) with per-symbol chains."""
    NT = gt[H_NT]
    n_sym = NT + gt[H_NN]
    item_sym = gt[H_ITEM_SYM]
    item_lhs = gt[H_ITEM_LHS]
    base = gt[H_NI] + 2 * gt[H_G] + gt[H_NN]
    st_stamp = base  # [n_sym] == ser: the symbol has a chain (and maybe a value) here
    st_val = base + n_sym  # [n_sym] the remembered value, or 0 if none
    st_head = base + 2 * n_sym  # [n_sym] first row of the symbol's chain
    fr = base + 3 * n_sym  # frames: symbol, next row, hash, lowest frame referred to
    # chain the set's waiting items by the symbol they wait for
    for q in range(S[k, S_P], p_end):
        s = gt[item_sym + P[q, P_ITEM]]
        if s < 0:
            continue
        if stamp[st_stamp + s] == ser:
            P[q, P_LINK] = stamp[st_head + s]
        else:
            stamp[st_stamp + s] = ser
            stamp[st_val + s] = 0
            P[q, P_LINK] = -1
        stamp[st_head + s] = q
    for q in range(S[k, S_P], p_end):
        if P[q, P_ORIGIN] == k:
            v = _cont(gt, P, stamp, k, ser, NT + gt[item_lhs + P[q, P_ITEM]], fr)
            if v != 0:
                put64(P, q, P_CLASS, v)
    lex_term = gt[H_LEX_TERM]
    ignore = gt[H_TERM_IGNORE]
    for q in range(S[k, S_L], l_end):
        if L[q, L_ORIGIN] == k:
            t = gt[lex_term + L[q, L_STATE]]
            if gt[ignore + t] == 0:
                v = _cont(gt, P, stamp, k, ser, t, fr)
                if v != 0:
                    put64(L, q, L_CLASS, v)


@kernel(nogil=True)
def _cont(gt, P, stamp, k, ser, root, fr):  # type: ignore[no-untyped-def]
    """``cont(k, root)`` (never 0), or 0 if its unfolding is too large."""
    NT = gt[H_NT]
    n_sym = NT + gt[H_NN]
    item_lhs = gt[H_ITEM_LHS]
    base = gt[H_NI] + 2 * gt[H_G] + gt[H_NN]
    st_stamp = base
    st_val = base + n_sym
    st_head = base + 2 * n_sym
    if stamp[st_stamp + root] == ser and stamp[st_val + root] != 0:
        return stamp[st_val + root]
    if stamp[st_stamp + root] != ser:
        return _value(root, 0)  # nothing waits for it here: an empty continuation
    sp = 0
    expansions = 0
    # push root
    stamp[fr + 0] = root
    stamp[fr + 1] = stamp[st_head + root]
    stamp[fr + 2] = 0
    stamp[fr + 3] = MAX_DEPTH
    sp = 1
    while sp > 0:
        f = fr + 4 * (sp - 1)
        q = stamp[f + 1]
        descended = False
        while q >= 0:
            it = P[q, P_ITEM]
            if P[q, P_ORIGIN] != k:
                stamp[f + 2] += mix((it + 1) * _K_ITEM + get64(P, q, P_CLASS))
                q = P[q, P_LINK]
                continue
            y = NT + gt[item_lhs + it]
            d = -1
            for i in range(sp):
                if stamp[fr + 4 * i] == y:
                    d = i
                    break
            if d >= 0:  # a symbol on the path: a back reference
                stamp[f + 2] += mix((it + 1) * _K_ITEM + (sp - 1 - d + 1) * _K_REF)
                if d < stamp[f + 3]:
                    stamp[f + 3] = d
                q = P[q, P_LINK]
                continue
            if stamp[st_stamp + y] == ser and stamp[st_val + y] != 0:
                stamp[f + 2] += mix((it + 1) * _K_ITEM + stamp[st_val + y])
                q = P[q, P_LINK]
                continue
            if stamp[st_stamp + y] != ser:
                stamp[f + 2] += mix((it + 1) * _K_ITEM + _value(y, 0))
                q = P[q, P_LINK]
                continue
            expansions += 1
            if sp >= MAX_DEPTH or expansions > MAX_EXPANSIONS:
                return 0
            stamp[f + 1] = q  # resume here once the child's value is known
            g = fr + 4 * sp
            stamp[g + 0] = y
            stamp[g + 1] = stamp[st_head + y]
            stamp[g + 2] = 0
            stamp[g + 3] = MAX_DEPTH
            sp += 1
            descended = True
            break
        if descended:
            continue
        # the frame is done
        sym = stamp[f + 0]
        v = _value(sym, stamp[f + 2])
        low = stamp[f + 3]
        me = sp - 1
        if low >= me:  # refers to nothing above it: its value is its own
            stamp[st_val + sym] = v
        sp -= 1
        if sp == 0:
            return v
        pf = fr + 4 * (sp - 1)
        pq = stamp[pf + 1]
        stamp[pf + 2] += mix((P[pq, P_ITEM] + 1) * _K_ITEM + v)
        if low < stamp[pf + 3]:
            stamp[pf + 3] = low
        stamp[pf + 1] = P[pq, P_LINK]
    return 0  # pragma: no cover - the loop returns from the root frame


@kernel(nogil=True, inline="always")
def _value(sym, h):  # type: ignore[no-untyped-def]
    v = mix(h + (sym + 1) * _K_SYM)
    return v if v != 0 else 1


__all__ = ["MAX_DEPTH", "MAX_EXPANSIONS", "classify_set", "mix", "scratch_size"]

_ = np  # the kernels take NumPy arrays
