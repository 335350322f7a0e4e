"""Kernels: the Earley chart over a *sausage* of byte positions (completability checks).

A partial output of fixed length, some of whose tokens are still unknown, spells a
sequence of byte positions, each either one known byte or a *gap byte*: any byte of a
given set (see ``corral/automata/completion.py`` for how tokens become positions). The
chart of ``kernels/earley.py`` parses such a sequence as it parses a text: a gap byte
builds one byte set holding every lexeme item that reads some byte of the set.

That union is exact. An item in a set only says that some path of bytes up to here leads
to it; what happens after depends on the item and the bytes that follow, never on the
path, because where a lexeme ends (it is maximal: it ends only where it cannot read the
next byte) is decided together with that next byte. So, for each byte class of the gap,
the lexemes that end before it complete in a completion set of their own (classes with
the same ending lexemes share one), and the byte set gathers what each class advances.
Positions are independent (any byte at one position goes with any at another), so every
combination of paths the chart joins is itself a path.

An *optional* gap byte (``OP_OPT``) is a gap byte or nothing. Its set is the union of the
set before it and the gap byte's set: the same argument makes the union exact (every item
in it has a path, through the gap byte or not, and what follows depends on the item
alone). So ``k`` optional gap bytes in a row read between 0 and ``k`` gap bytes in one
pass, instead of one pass per length.
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel
from .borrow import borrow
from .earley import (
    _add_l,
    _begin,
    _seal,
    consume_special,
    end_lexemes,
    scan_byte,
    seal_byte_set,
)
from .layout import (
    C_ACC,
    C_CLASSIFY,
    C_ERR,
    ERR_S,
    H_LEX_ACCEPT,
    H_NI,
    H_TRAP,
    L_CLASS,
    L_ORIGIN,
    L_STATE,
    OP_GAP,
    OP_OPT,
    OP_SPECIAL,
    S_ACCEPT,
    S_HASH,
    S_L,
)
from .lexer import lex_next
from .wide import get64


@kernel(nogil=True, inline="always")
def _same_ends(gt, lex, L, S, j, c1, c2):  # type: ignore[no-untyped-def]
    """Whether classes ``c1`` and ``c2`` end the same lexeme items of set ``j``."""
    lex_accept = gt[H_LEX_ACCEPT]
    for idx in range(S[j, S_L], S[j + 1, S_L]):
        g = L[idx, L_STATE]
        if gt[lex_accept + g] != 0 and (lex_next(lex, g, c1) < 0) != (lex_next(lex, g, c2) < 0):
            return False
    return True


@kernel(nogil=True)
def scan_gap(gt, lex, P, L, S, stamp, sorig, ctx, k, classes, comp):  # type: ignore[no-untyped-def]
    """Read one byte of any class in ``classes`` after set ``k-1`` (the top).

    ``comp``: ``int64`` scratch, one slot per class. Returns the new number of sets, 0 if
    no byte of the gap can be read here, or an error (see ``scan_byte``). Called by
    kernels only, with their borrowed arrays.
    """
    j = k - 1
    ni = gt[H_NI]
    lex_accept = gt[H_LEX_ACCEPT]
    n_c = classes.shape[0]
    nxt = k
    # 1. per class, the completion set of the lexemes that end before it (shared by
    #    classes that end the same ones); -1: none end, or their completion is dead
    for ci in range(n_c):
        c = classes[ci]
        comp[ci] = -1
        ends = False
        for idx in range(S[j, S_L], S[j + 1, S_L]):
            g = L[idx, L_STATE]
            if gt[lex_accept + g] != 0 and lex_next(lex, g, c) < 0:
                ends = True
                break
        if not ends:
            continue
        shared = -1
        for cj in range(ci):
            if _same_ends(gt, lex, L, S, j, c, classes[cj]):
                shared = cj
                break
        if shared >= 0:
            comp[ci] = comp[shared]
            continue
        if nxt + 2 >= S.shape[0]:
            return ERR_S
        ctx[C_CLASSIFY] *= 2  # classify this completion set if classes are on
        j64, nxt64, c64, m1 = np.int64(j), np.int64(nxt), np.int64(c), np.int64(-1)
        e = end_lexemes(gt, lex, P, L, S, stamp, sorig, ctx, j64, nxt64, c64, m1)
        ctx[C_CLASSIFY] //= 2
        if e < 0:
            return e
        if e > 0:
            comp[ci] = nxt
            nxt += 1
    # 2. the byte set: what each class advances, from set j and from its completion set;
    #    sealed with whether the text could end there
    b = nxt
    if b + 2 >= S.shape[0]:
        return ERR_S
    _begin(S, stamp, ctx, b)
    l0 = S[b, S_L]
    trap = gt[H_TRAP]  # a blocked lexeme end: dropped like a dead lexeme (see scan_byte)
    for ci in range(n_c):
        c = classes[ci]
        for idx in range(S[j, S_L], S[j + 1, S_L]):
            g2 = lex_next(lex, L[idx, L_STATE], c)
            if g2 >= 0 and g2 != trap:
                _add_l(L, stamp, sorig, ctx, ni, g2, L[idx, L_ORIGIN], get64(L, idx, L_CLASS))
        o = comp[ci]
        if o >= 0:
            for idx in range(S[o, S_L], S[o + 1, S_L]):
                g2 = lex_next(lex, L[idx, L_STATE], c)
                if g2 >= 0 and g2 != trap:
                    _add_l(L, stamp, sorig, ctx, ni, g2, L[idx, L_ORIGIN], get64(L, idx, L_CLASS))
    return seal_byte_set(gt, lex, P, L, S, stamp, sorig, ctx, b, l0)


@kernel(nogil=True)
def scan_opt(gt, lex, P, L, S, stamp, sorig, ctx, k, classes, comp):  # type: ignore[no-untyped-def]
    """Read one optional gap byte (a byte of any class in ``classes``, or nothing) after
    set ``k-1`` (the top).

    The new top is the union of set ``k-1`` and the gap byte's set (see the module docs),
    a byte set whose lexeme items are those of both, each kept with its origin and class,
    and which is complete where either is. Returns the new number of sets (``k`` itself
    when no gap byte can be read: the top stays), or an error; never 0, since reading
    nothing is always possible. Called by kernels only, with their borrowed arrays.
    """
    j = k - 1
    st = scan_gap(gt, lex, P, L, S, stamp, sorig, ctx, k, classes, comp)
    if st < 0:
        return st
    if st == 0:
        return k
    b = st - 1  # the gap byte's set; the sets above it are scratch
    u = st
    if u + 2 >= S.shape[0]:
        return ERR_S
    ni = gt[H_NI]
    _begin(S, stamp, ctx, u)
    for idx in range(S[j, S_L], S[j + 1, S_L]):
        _add_l(L, stamp, sorig, ctx, ni, L[idx, L_STATE], L[idx, L_ORIGIN], get64(L, idx, L_CLASS))
    for idx in range(S[b, S_L], S[b + 1, S_L]):
        _add_l(L, stamp, sorig, ctx, ni, L[idx, L_STATE], L[idx, L_ORIGIN], get64(L, idx, L_CLASS))
    if ctx[C_ERR] != 0:
        return ctx[C_ERR]
    ctx[C_ACC] = 1 if S[j, S_ACCEPT] != 0 or S[b, S_ACCEPT] != 0 else 0
    _seal(P, L, S, ctx, u)
    return u + 1


@kernel(nogil=True)
def scan_ops(  # type: ignore[no-untyped-def]
    gt, lex, P, L, S, stamp, sorig, ctx, n_sets, ops, n_ops, classes, comp, classify
):
    """Read ``ops[:n_ops]`` (a byte ``0..255``, ``OP_GAP``, ``OP_OPT`` or ``OP_SPECIAL + g``) after
    the text so far (sets ``0 .. n_sets-1``). Returns the new number of sets (the sets
    from ``n_sets`` on are scratch: the caller's chart is unchanged), 0 if the text
    cannot read them, or an error. With ``classify`` (1), the completion sets built at gap
    positions are classified (see ``kernels/continuation.py``): items whose origins differ
    only in where a gap's lexemes or rules started merge, which keeps the sets of a run of
    gaps from growing with its length."""
    gt, lex, P, L, S, stamp, sorig, ctx, ops, classes, comp = borrow(
        (gt, lex, P, L, S, stamp, sorig, ctx, ops, classes, comp)
    )
    ctx[C_CLASSIFY] = classify
    k = _scan_ops(gt, lex, P, L, S, stamp, sorig, ctx, n_sets, ops, n_ops, classes, comp)
    ctx[C_CLASSIFY] = 0
    return k


@kernel(nogil=True, inline="always")
def _scan_ops(gt, lex, P, L, S, stamp, sorig, ctx, n_sets, ops, n_ops, classes, comp):  # type: ignore[no-untyped-def]
    k = n_sets
    skip = False  # the optional gap bytes left in this run change nothing
    for i in range(n_ops):
        op = ops[i]
        if op == OP_OPT:
            if skip:
                continue
            before = get64(S, k - 1, S_HASH)
            st = scan_opt(gt, lex, P, L, S, stamp, sorig, ctx, k, classes, comp)
            if st < 0:
                return st
            # the same set again: the rest of the run would repeat it
            skip = st == k or get64(S, st - 1, S_HASH) == before
            k = st
            continue
        skip = False
        if op < OP_GAP:
            st = scan_byte(gt, lex, P, L, S, stamp, sorig, ctx, k, op)
        elif op == OP_GAP:
            st = scan_gap(gt, lex, P, L, S, stamp, sorig, ctx, k, classes, comp)
        else:
            st = consume_special(gt, lex, P, L, S, stamp, sorig, ctx, k, op - OP_SPECIAL)
        if st <= 0:
            return st
        k = st
    return k


@kernel(nogil=True)
def completable(
    gt, lex, P, L, S, stamp, sorig, ctx, n_sets, ops, n_req, n_opt, classes, comp, classify
):  # type: ignore[no-untyped-def]
    """Whether the text so far (sets ``0 .. n_sets-1``) continues into a complete word.

    The continuation reads ``ops[:n_req]`` (a byte ``0..255``, ``OP_GAP``, ``OP_OPT`` or
    ``OP_SPECIAL + g``), then at most ``n_opt`` gap bytes; it is complete where a set
    accepts. Returns 1, 0 (no such continuation) or an error. Sets at ``n_sets`` and above
    are scratch: the caller's chart is unchanged. ``classify``: as in ``scan_ops``.
    """
    gt, lex, P, L, S, stamp, sorig, ctx, ops, classes, comp = borrow(
        (gt, lex, P, L, S, stamp, sorig, ctx, ops, classes, comp)
    )
    ctx[C_CLASSIFY] = classify
    r = _completable(gt, lex, P, L, S, stamp, sorig, ctx, n_sets, ops, n_req, n_opt, classes, comp)
    ctx[C_CLASSIFY] = 0
    return r


@kernel(nogil=True, inline="always")
def _completable(gt, lex, P, L, S, stamp, sorig, ctx, n_sets, ops, n_req, n_opt, classes, comp):  # type: ignore[no-untyped-def]
    k = _scan_ops(gt, lex, P, L, S, stamp, sorig, ctx, n_sets, ops, n_req, classes, comp)
    if k <= 0:
        return k
    if S[k - 1, S_ACCEPT] != 0:
        return 1
    for _ in range(n_opt):
        before = get64(S, k - 1, S_HASH)
        st = scan_gap(gt, lex, P, L, S, stamp, sorig, ctx, k, classes, comp)
        if st <= 0:
            return st
        k = st
        if S[k - 1, S_ACCEPT] != 0:
            return 1
        if get64(S, k - 1, S_HASH) == before:
            return 0  # the same set again: more gap bytes change nothing
    return 0


__all__ = ["OP_GAP", "OP_OPT", "OP_SPECIAL", "completable", "scan_gap", "scan_ops", "scan_opt"]

_ = np  # the kernels take NumPy arrays
