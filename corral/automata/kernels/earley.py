"""Kernels: the byte-level Earley chart (see ``corral.automata.tables`` for the model).

Lexemes are maximal: a lexeme item that can read the next byte does (it does not end
there), and one that cannot ends there if its state accepts. So reading a byte builds up
to two sets:

* a **completion set**, if some accepting lexeme item of the current set cannot read the
  byte: those lexemes end, the parser items of their origin sets advance (Earley
  completion, then prediction), and fresh lexeme items of the expected terminals appear;
* the **byte set**: every lexeme item of the current set and of that completion set that
  can read the byte, advanced by it. Byte sets hold lexeme items only. A lexeme whose
  terminal forbids it to end before the byte it cannot read reaches the trap state
  (``layout.H_TRAP``) instead: it is dropped like one that dies.

Chart layout (owned by one ``corral.automata.chart.Chart``; columns and slots are named
in ``kernels/layout.py``):

* ``P``: ``int32 [capP, 5]`` parser items ``(item, origin, link, class)`` (``P_*``; the
  class is 64 bits in two columns, read and written by ``kernels/wide.py``);
* ``L``: ``int32 [capL, 5]`` lexeme items ``(lexer state, origin, link, class)``
  (``L_*``); the origin is the completion set (or set 0) whose parser items the lexeme
  will advance; the class says which items behave the same (``kernels/continuation.py``):
  ``-(origin+1)`` unless the set was classified;
* ``S``: ``int32 [capS, 5]`` (``S_*``, the hash in two columns); set ``k`` holds parser items
  ``P[S[k, S_P] : S[k+1, S_P]]`` and lexeme items ``L[S[k, S_L] : S[k+1, S_L]]``;
  ``S[k, S_ACCEPT]`` = 1 if the input read so far is a complete word (for a byte set:
  once its pending lexemes end, i.e. if the text ended here); ``S_HASH`` (64 bits) is
  a structural hash of the set (its items, each origin replaced by the origin set's own
  hash), equal for sets that behave the same wherever they lie. ``S[n_sets, S_P]`` and
  ``S[n_sets, S_L]`` are always the ends of the last set.
* ``stamp``: ``int64 [NI + 2G + NN + scratch + 1]`` (or longer) dedupe stamps (and the
  scratch of ``classify_set``); ``sorig``: ``int32 [NI + G]`` (or longer), for a dotted
  rule (or lexer state) stamped in the set being built, the row of its last item there;
  ``link`` chains each item to the previous one of the same rule (state) in its set,
  ``-1`` ending the chain. An item is not added twice: nor again with another origin of
  the same class. Stamps are compared with the serial of the set being built, which
  ``next_serial`` takes from the stamp's own last slot: serials never repeat for one
  stamp array, so the two arrays are scratch that any number of charts (of any grammars)
  may share, one kernel call at a time (``chart.py`` shares them per thread).
* ``ctx``: ``int64 [CTX_LEN]`` cursors of the set being built and counters kept for
  callers (the ``C_*`` slots).

Sets form a stack: building set ``k`` overwrites whatever lay at ``k`` and above, so
popping is just lowering ``n_sets``. Builders return the new number of sets (the set is
alive), 0 (dead: nothing can continue) or a negative capacity error, in which case the
caller grows the arrays and retries (nothing below the first set built was modified).
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel
from .borrow import borrow
from .continuation import classify_set, mix, scratch_size
from .layout import (
    C_ACC,
    C_CLASSIFY,
    C_ERR,
    C_LC,
    C_OWNACC,
    C_PC,
    C_SERIAL,
    C_TERM,
    CTX_LEN,
    ERR_L,
    ERR_P,
    ERR_S,
    H_BYTE_CLASS,
    H_FINAL,
    H_G,
    H_IGNORE_LIST,
    H_ITEM_LHS,
    H_ITEM_SYM,
    H_LEX_ACCEPT,
    H_LEX_IS_START,
    H_LEX_TERM,
    H_N_IGNORE,
    H_NI,
    H_NT,
    H_NULLABLE,
    H_PRED_ITEMS,
    H_PRED_START,
    H_START,
    H_TERM_IGNORE,
    H_TERM_START,
    H_TRAP,
    ITEM_COLS,
    L_CLASS,
    L_LINK,
    L_ORIGIN,
    L_STATE,
    P_CLASS,
    P_ITEM,
    P_LINK,
    P_ORIGIN,
    S_ACCEPT,
    S_HASH,
    S_L,
    S_P,
    SET_COLS,
)
from .lexer import lex_next
from .wide import get64, put64

_SELF = 0x5BD1E995  # stands for "this set" as an origin in structural hashes
_ROOT = 0x3C6EF372FE94F82B  # marks set 0's hash


@kernel(nogil=True, inline="always")
def _add_p(P, stamp, sorig, ctx, it, o, cls):  # type: ignore[no-untyped-def]
    """Add parser item ``(it, o)`` of class ``cls`` to the set being built, unless an item
    of the same dotted rule and class is there already."""
    ser = ctx[C_SERIAL]
    prev = -1
    if stamp[it] == ser:
        prev = sorig[it]
        q = prev
        while q >= 0:  # the items of this set with the same dotted rule
            if get64(P, q, P_CLASS) == cls:
                return
            q = P[q, P_LINK]
    pc = ctx[C_PC]
    if pc >= P.shape[0]:
        ctx[C_ERR] = ERR_P
        return
    stamp[it] = ser  # with sorig below: a stamped rule's sorig is always this set's row
    P[pc, P_ITEM] = it
    P[pc, P_ORIGIN] = o
    P[pc, P_LINK] = prev
    put64(P, pc, P_CLASS, cls)
    sorig[it] = pc
    ctx[C_PC] = pc + 1


@kernel(nogil=True, inline="always")
def _add_l(L, stamp, sorig, ctx, ni, g, o, cls):  # type: ignore[no-untyped-def]
    """Add lexeme item ``(g, o)`` of class ``cls`` to the set being built, unless an item
    in the same lexer state and class is there already."""
    ser = ctx[C_SERIAL]
    prev = -1
    if stamp[ni + g] == ser:
        prev = sorig[ni + g]
        q = prev
        while q >= 0:  # the items of this set in the same lexer state
            if get64(L, q, L_CLASS) == cls:
                return
            q = L[q, L_LINK]
    lc = ctx[C_LC]
    if lc >= L.shape[0]:
        ctx[C_ERR] = ERR_L
        return
    stamp[ni + g] = ser
    L[lc, L_STATE] = g
    L[lc, L_ORIGIN] = o
    L[lc, L_LINK] = prev
    put64(L, lc, L_CLASS, cls)
    sorig[ni + g] = lc
    ctx[C_LC] = lc + 1


@kernel(nogil=True, inline="always")
def _complete_terminal(gt, P, L, S, stamp, sorig, ctx, t, o):  # type: ignore[no-untyped-def]
    """A lexeme of terminal ``t`` started for set ``o`` ends here: advance set ``o``'s items
    (and, for an ignored terminal, carry set ``o``'s fresh lexemes over)."""
    ni = gt[H_NI]
    if gt[gt[H_TERM_IGNORE] + t]:
        # An ignored lexeme: the parser stays where it was at `o`; copy o's fresh lexemes.
        is_start = gt[H_LEX_IS_START]
        for q in range(S[o, S_L], S[o + 1, S_L]):
            g = L[q, L_STATE]
            if L[q, L_ORIGIN] == o and gt[is_start + g]:
                _add_l(L, stamp, sorig, ctx, ni, g, o, get64(L, q, L_CLASS))
        if S[o, S_ACCEPT]:
            ctx[C_ACC] = 1
        # A terminal may be both ignored and named in rules (Lark merges equal literals):
        # it may then also advance the items that expect it, below.
    item_sym = gt[H_ITEM_SYM]
    for r in range(S[o, S_P], S[o + 1, S_P]):
        it = P[r, P_ITEM]
        if gt[item_sym + it] == t:
            _add_p(P, stamp, sorig, ctx, it + 1, P[r, P_ORIGIN], get64(P, r, P_CLASS))


@kernel(nogil=True, inline="always")
def next_serial(stamp):  # type: ignore[no-untyped-def]
    """A stamp value never handed out before for ``stamp``: its last slot counts them."""
    last = stamp.shape[0] - 1
    stamp[last] += 1
    return stamp[last]


@kernel(nogil=True, inline="always")
def _begin(S, stamp, ctx, k):  # type: ignore[no-untyped-def]
    ctx[C_PC] = S[k, S_P]
    ctx[C_LC] = S[k, S_L]
    ctx[C_SERIAL] = next_serial(stamp)
    ctx[C_ACC] = 0
    ctx[C_ERR] = 0
    ctx[C_TERM] = 0
    ctx[C_OWNACC] = 0


@kernel(nogil=True, inline="always")
def _seal(P, L, S, ctx, k):  # type: ignore[no-untyped-def]
    """Record set ``k``'s extent, accepting flag and structural hash."""
    p0 = S[k, S_P]
    l0 = S[k, S_L]
    pc = ctx[C_PC]
    lc = ctx[C_LC]
    S[k + 1, S_P] = pc
    S[k + 1, S_L] = lc
    S[k, S_ACCEPT] = ctx[C_ACC]
    h = ctx[C_ACC] * 0x2545F4914F6CDD1D
    for q in range(p0, pc):
        o = P[q, P_ORIGIN]
        oh = _SELF if o == k else get64(S, o, S_HASH)
        h += mix(P[q, P_ITEM] * 0x100000001B3 + oh)
    for q in range(l0, lc):
        o = L[q, L_ORIGIN]
        oh = _SELF if o == k else get64(S, o, S_HASH)
        h += mix(~(L[q, L_STATE] * 0x100000001B3 + oh))
    if k == 0:
        h ^= _ROOT  # only set 0 completes the start rule: no other set behaves as it does
    put64(S, k, S_HASH, h)


@kernel(nogil=True, inline="always")
def _close(gt, P, L, S, stamp, sorig, ctx, k):  # type: ignore[no-untyped-def]
    """Earley closure (predict / complete) of completion set ``k``; then seal it.

    Returns ``k + 1`` (alive: a lexeme may start, or the input is complete), 0 or an error.
    """
    NT = gt[H_NT]
    ni = gt[H_NI]
    G = gt[H_G]
    item_sym = gt[H_ITEM_SYM]
    item_lhs = gt[H_ITEM_LHS]
    pred_start = gt[H_PRED_START]
    pred_items = gt[H_PRED_ITEMS]
    nullable = gt[H_NULLABLE]
    term_start = gt[H_TERM_START]
    final = gt[H_FINAL]
    nt_stamp = ni + G
    p0 = S[k, S_P]
    l0 = S[k, S_L]
    ser = ctx[C_SERIAL]
    q = p0
    while q < ctx[C_PC]:
        if ctx[C_ERR] != 0:
            return ctx[C_ERR]
        it = P[q, P_ITEM]
        o = P[q, P_ORIGIN]
        q += 1
        s = gt[item_sym + it]
        if s < 0:
            if it == final and o == 0:
                ctx[C_ACC] = 1
                ctx[C_OWNACC] = 1
            if o == k:
                continue  # nullable completion: handled when predicting (Aycock-Horspool)
            a = gt[item_lhs + it] + NT
            for r in range(S[o, S_P], S[o + 1, S_P]):
                it2 = P[r, P_ITEM]
                if gt[item_sym + it2] == a:
                    _add_p(P, stamp, sorig, ctx, it2 + 1, P[r, P_ORIGIN], get64(P, r, P_CLASS))
        elif s < NT:
            _add_l(L, stamp, sorig, ctx, ni, gt[term_start + s], k, -(k + 1))
            ctx[C_TERM] = 1
        else:
            a = s - NT
            if stamp[nt_stamp + a] != ser:
                stamp[nt_stamp + a] = ser
                for r in range(gt[pred_start + a], gt[pred_start + a + 1]):
                    _add_p(P, stamp, sorig, ctx, gt[pred_items + r], k, -(k + 1))
            if gt[nullable + a]:
                _add_p(P, stamp, sorig, ctx, it + 1, o, get64(P, q - 1, P_CLASS))
    # Ignored lexemes may start here if this set expects a terminal or ends a parse. (A set
    # that is complete only because an ignored lexeme ended needs none: the origin set's
    # own ignore items were copied in.)
    if ctx[C_TERM] != 0 or ctx[C_OWNACC] != 0:
        ign = gt[H_IGNORE_LIST]
        for r in range(gt[H_N_IGNORE]):
            _add_l(L, stamp, sorig, ctx, ni, gt[term_start + gt[ign + r]], k, -(k + 1))
    if ctx[C_ERR] != 0:
        return ctx[C_ERR]
    if ctx[C_CLASSIFY] == 2 and k > 0:
        classify_set(gt, P, L, S, stamp, ser, k, ctx[C_PC], ctx[C_LC])
    _seal(P, L, S, ctx, k)
    if ctx[C_LC] > l0 or ctx[C_ACC] != 0:
        return k + 1
    return 0


@kernel(nogil=True)
def init_chart(gt, lex, P, L, S, stamp, sorig, ctx):  # type: ignore[no-untyped-def]
    """Build set 0 (before any input). Returns 1 or an error. (``lex`` is unused; it
    keeps the signature of the other chart kernels.)"""
    gt, lex, P, L, S, stamp, sorig, ctx = borrow((gt, lex, P, L, S, stamp, sorig, ctx))
    if S.shape[0] < 2:
        return ERR_S
    S[0, S_P] = 0
    S[0, S_L] = 0
    put64(S, 0, S_HASH, 0)
    _begin(S, stamp, ctx, 0)
    _add_p(P, stamp, sorig, ctx, gt[H_START], 0, -1)
    return _close(gt, P, L, S, stamp, sorig, ctx, 0)


@kernel(nogil=True, inline="always")
def _end_lexemes(gt, lex, P, L, S, stamp, sorig, ctx, j, k, cls, g_only):  # type: ignore[no-untyped-def]
    """``end_lexemes`` inlined, for the hot call sites (a lexeme ending before a byte, in
    masks). Each inlined copy of the closure costs seconds of first compilation: rarer
    call sites call ``end_lexemes``, with ``np.int64`` arguments (a literal argument
    compiles one copy of it per constant)."""
    lex_accept = gt[H_LEX_ACCEPT]
    lex_term = gt[H_LEX_TERM]
    any_end = False
    for idx in range(S[j, S_L], S[j + 1, S_L]):
        g = L[idx, L_STATE]
        if g_only >= 0:
            if g == g_only:
                any_end = True
                break
        elif gt[lex_accept + g] != 0 and (cls < 0 or lex_next(lex, g, cls) < 0):
            any_end = True
            break
    if not any_end:
        return 0
    if k + 1 >= S.shape[0]:
        return ERR_S
    _begin(S, stamp, ctx, k)
    for idx in range(S[j, S_L], S[j + 1, S_L]):
        g = L[idx, L_STATE]
        if g_only >= 0:
            ends = g == g_only
        else:
            ends = gt[lex_accept + g] != 0 and (cls < 0 or lex_next(lex, g, cls) < 0)
        if ends:
            _complete_terminal(gt, P, L, S, stamp, sorig, ctx, gt[lex_term + g], L[idx, L_ORIGIN])
    return _close(gt, P, L, S, stamp, sorig, ctx, k)


@kernel(nogil=True)
def end_lexemes(gt, lex, P, L, S, stamp, sorig, ctx, j, k, cls, g_only):  # type: ignore[no-untyped-def]
    """Build completion set ``k`` from set ``j``'s accepting lexeme items that end now.

    A lexeme ends if its state accepts and it cannot read byte class ``cls`` (``cls < 0``:
    the text ends). With ``g_only >= 0``, exactly the items in lexer state ``g_only`` end,
    whatever their state (the caller has read on to where that lexeme accepts).
    Returns ``k + 1``, 0 (nothing ends, or the completion leads nowhere) or an error.
    Called by kernels only, with their borrowed arrays.
    """
    return _end_lexemes(gt, lex, P, L, S, stamp, sorig, ctx, j, k, cls, g_only)


@kernel(nogil=True, inline="always")
def scan_byte(gt, lex, P, L, S, stamp, sorig, ctx, k, byte):  # type: ignore[no-untyped-def]
    """Read ``byte`` after set ``k-1`` (the top); build the new sets from index ``k``.

    Returns the new number of sets (``k+1`` or ``k+2``), 0 if nothing can read the byte,
    or an error.
    """
    j = k - 1
    cls = gt[gt[H_BYTE_CLASS] + byte]
    ni = gt[H_NI]
    trap = gt[H_TRAP]
    # 1. lexemes that end before this byte
    c = _end_lexemes(gt, lex, P, L, S, stamp, sorig, ctx, j, k, cls, -1)
    if c < 0:
        return c
    b = k + 1 if c > 0 else k
    if b + 1 >= S.shape[0]:
        return ERR_S
    # 2. the byte set: every lexeme item that reads the byte
    _begin(S, stamp, ctx, b)
    l0 = S[b, S_L]
    for idx in range(S[j, S_L], S[j + 1, S_L]):
        g2 = lex_next(lex, L[idx, L_STATE], cls)
        if g2 >= 0 and g2 != trap:
            _add_l(L, stamp, sorig, ctx, ni, g2, L[idx, L_ORIGIN], get64(L, idx, L_CLASS))
    if c > 0:
        for idx in range(S[k, S_L], S[k + 1, S_L]):
            g2 = lex_next(lex, L[idx, L_STATE], cls)
            if g2 >= 0 and g2 != trap:
                _add_l(L, stamp, sorig, ctx, ni, g2, L[idx, L_ORIGIN], get64(L, idx, L_CLASS))
    return seal_byte_set(gt, lex, P, L, S, stamp, sorig, ctx, b, l0)


@kernel(nogil=True, inline="always")
def seal_byte_set(gt, lex, P, L, S, stamp, sorig, ctx, b, l0):  # type: ignore[no-untyped-def]
    """Seal byte set ``b`` (its lexeme items built from ``l0``) and record whether the
    text would be complete if it ended there (its pending lexemes end). Returns ``b + 1``,
    0 if the set is empty, or an error."""
    lex_accept = gt[H_LEX_ACCEPT]
    if ctx[C_ERR] != 0:
        return ctx[C_ERR]
    _seal(P, L, S, ctx, b)
    if ctx[C_LC] == l0:
        return 0
    acc = 0
    for idx in range(l0, S[b + 1, S_L]):
        if gt[lex_accept + L[idx, L_STATE]] != 0:
            acc = 1
            break
    if acc:
        # (the loop above is the early exit: a lexeme of the set accepts)
        m1 = np.int64(-1)
        e = end_lexemes(gt, lex, P, L, S, stamp, sorig, ctx, np.int64(b), np.int64(b + 1), m1, m1)
        if e < 0:
            return e
        acc = 1 if e > 0 and S[b + 1, S_ACCEPT] != 0 else 0
    S[b, S_ACCEPT] = acc
    put64(S, b, S_HASH, get64(S, b, S_HASH) + acc * 0x2545F4914F6CDD1D)
    return b + 1


@kernel(nogil=True, inline="always")
def complete_state(gt, lex, P, L, S, stamp, sorig, ctx, k, g):  # type: ignore[no-untyped-def]
    """Build completion set ``k`` as if every lexeme item of set ``k-1`` in state ``g`` had
    read on to an accepting state and ended there. Returns ``k+1``, 0 or an error."""
    return _end_lexemes(gt, lex, P, L, S, stamp, sorig, ctx, k - 1, k, -1, g)


@kernel(nogil=True)
def consume_bytes(gt, lex, P, L, S, stamp, sorig, ctx, n_sets, data, start, stop):  # type: ignore[no-untyped-def]
    """Read ``data[start:stop]``; returns the new number of sets, 0 if rejected, or an error.

    On rejection or error nothing below ``n_sets`` changes, so the caller's state is intact.
    """
    gt, lex, P, L, S, stamp, sorig, ctx, data = borrow((gt, lex, P, L, S, stamp, sorig, ctx, data))
    k = n_sets
    for i in range(start, stop):
        st = scan_byte(gt, lex, P, L, S, stamp, sorig, ctx, k, data[i])
        if st <= 0:
            return st
        k = st
    return k


@kernel(nogil=True)
def allowed_bytes(gt, lex, P, L, S, stamp, sorig, ctx, n_sets, out):  # type: ignore[no-untyped-def]
    """``out[b] = 1`` for every byte that can follow the input; returns the count (or error)."""
    gt, lex, P, L, S, stamp, sorig, ctx, out = borrow((gt, lex, P, L, S, stamp, sorig, ctx, out))
    count = 0
    for b in range(256):
        st = scan_byte(gt, lex, P, L, S, stamp, sorig, ctx, n_sets, b)
        if st < 0:
            return st
        out[b] = 1 if st > 0 else 0
        count += out[b]
    return count


@kernel(nogil=True)
def consume_special(gt, lex, P, L, S, stamp, sorig, ctx, n_sets, g):  # type: ignore[no-untyped-def]
    """Read the special token whose terminal starts in lexer state ``g`` (a state with no
    byte transitions). Pending lexemes may end first (as at the end of a text); then the
    special terminal's fresh items complete. Returns the new number of sets, 0 if the token
    is not allowed here, or an error.
    """
    gt, lex, P, L, S, stamp, sorig, ctx = borrow((gt, lex, P, L, S, stamp, sorig, ctx))
    j = n_sets - 1
    m1 = np.int64(-1)
    e = end_lexemes(gt, lex, P, L, S, stamp, sorig, ctx, np.int64(j), np.int64(n_sets), m1, m1)
    if e < 0:
        return e
    k = n_sets + 1 if e > 0 else n_sets
    if k + 1 >= S.shape[0]:
        return ERR_S
    _begin(S, stamp, ctx, k)
    t = gt[gt[H_LEX_TERM] + g]
    for idx in range(S[j, S_L], S[j + 1, S_L]):
        if L[idx, L_STATE] == g:
            _complete_terminal(gt, P, L, S, stamp, sorig, ctx, t, L[idx, L_ORIGIN])
    if e > 0:
        for idx in range(S[n_sets, S_L], S[n_sets + 1, S_L]):
            if L[idx, L_STATE] == g:
                _complete_terminal(gt, P, L, S, stamp, sorig, ctx, t, L[idx, L_ORIGIN])
    return _close(gt, P, L, S, stamp, sorig, ctx, k)


def new_chart(cap_p: int, cap_l: int, cap_s: int) -> tuple[np.ndarray, ...]:
    """Fresh chart arrays ``(P, L, S, ctx)`` (see the module docs) with room for
    ``cap_p`` parser items, ``cap_l`` lexeme items and ``cap_s - 1`` sets."""
    P = np.zeros((cap_p, ITEM_COLS), np.int32)
    L = np.zeros((cap_l, ITEM_COLS), np.int32)
    S = np.zeros((cap_s, SET_COLS), np.int32)
    ctx = np.zeros(CTX_LEN, np.int64)
    return P, L, S, ctx


def scratch_sizes(ni: int, g: int, nt: int, nn: int) -> tuple[int, int]:
    """The least lengths of ``(stamp, sorig)`` for a grammar of ``ni`` dotted rules,
    ``g`` lexer states, ``nt`` terminals and ``nn`` nonterminals (the stamp's last slot
    included). Longer arrays do as well."""
    return ni + 2 * g + nn + scratch_size(nt, nn) + 1, ni + g


__all__ = [
    "allowed_bytes",
    "complete_state",
    "consume_bytes",
    "consume_special",
    "end_lexemes",
    "init_chart",
    "new_chart",
    "next_serial",
    "scan_byte",
    "scratch_sizes",
    "seal_byte_set",
]
