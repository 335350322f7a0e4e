"""A DFA over blocks of code points → the same automaton over UTF-8 bytes, as a Numba
kernel (:func:`encode_utf8`; the Python side is :func:`corral.grammar.regex.dfa.utf8_automaton`).

Each state ``q`` of the character automaton becomes a byte state (its *character node*)
whose transitions on bytes ``00``-``7F`` go straight to character nodes, and whose
transitions on a lead byte ``C2``-``F4`` go to an *intermediate* node standing for the
code points that start with that byte. An intermediate node is described by ``k``, the
continuation bytes left to read, and the function from its code points (an aligned
interval of ``64**k`` of them, relative to its first) to target states. Nodes are
hash-consed on that description, so the same shape after different lead bytes or
different states is built once:

* a *uniform* node (one target ``t`` for all its code points) is ``U(k, t)``: ``k``
  continuation bytes of any value, then ``t``'s character node;
* any other node is keyed by ``k`` and its pieces ``(lo, hi, t)`` relative to its first
  code point, checked exactly after a hash match.

Only valid UTF-8 is read: no overlong forms (a lead byte's code points below the least
that needs its length are dead), no surrogates, nothing past ``U+10FFFF``. Below a lead
byte, every child interval is wholly valid or wholly invalid, since those limits are
aligned to 64 code points.

The result has the same language as the Python construction it replaced (which keyed
intermediate nodes by their byte-range sequences); its states may differ before
minimisation, never after (the tests compare the two).
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel
from .int_table import table_get, table_new, table_put

OK = 0
TOO_MANY_STATES = 1
OUT_OF_STEPS = 2

_SURROGATE_LO = 0xD800
_SURROGATE_HI = 0xDFFF
_MAX_CP = 0x10FFFF
_FNV_PRIME = np.uint64(0x100000001B3)
_FNV_BASIS = np.uint64(0xCBF29CE484222325)


@kernel(nogil=True, inline="always")
def _min_cp(length):  # type: ignore[no-untyped-def]
    """The least code point whose UTF-8 encoding has ``length`` (2-4) bytes."""
    if length == 2:
        return 0x80
    if length == 3:
        return 0x800
    return 0x10000


@kernel(nogil=True, inline="always")
def _first_overlapping(plo, phi, n, a):  # type: ignore[no-untyped-def]
    """The first of the ``n`` sorted, disjoint pieces that ends at or after ``a``."""
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) >> 1
        if phi[mid] < a:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel(nogil=True)
def encode_utf8(  # type: ignore[no-untyped-def]
    edge_ptr,
    edge_block,
    edge_target,
    accept,
    live,
    range_ptr,
    range_lo,
    range_hi,
    max_nodes,
    max_steps,
    row_steps,
):
    """Encode a character automaton as a byte automaton.

    Args:
        edge_ptr, edge_block, edge_target: the character automaton's transitions, CSR by
            state (``int64 [n_q + 1]``, ``int64 [E]``, ``int64 [E]``): from state ``q``,
            block ``edge_block[e]`` leads to ``edge_target[e]`` for ``e`` in
            ``edge_ptr[q] .. edge_ptr[q + 1] - 1``.
        accept, live: ``bool [n_q]``; transitions into states that are not live are left
            out. State 0 is the start.
        range_ptr, range_lo, range_hi: each block's code points as inclusive ranges, CSR
            by block (``int64``).
        max_nodes: the most byte states allowed; max_steps: the most construction steps,
            ``row_steps`` per byte state.

    Returns:
        ``(status, n, rows, acc, of_char)``: ``status`` is :data:`OK`,
        :data:`TOO_MANY_STATES` or :data:`OUT_OF_STEPS` (the construction stopped there);
        ``rows`` is ``int32 [>= n, 256]`` (``-1``: dead), ``acc`` ``bool [>= n]`` and
        ``of_char`` ``int32 [>= n]`` (the character state a byte state stands for, ``-1``
        for intermediate ones), valid up to ``n``. Byte state 0 is the start.
    """
    n_q = accept.shape[0]
    rows = np.full((64, 256), -1, np.int32)
    acc = np.zeros(64, np.bool_)
    of_char = np.full(64, -1, np.int32)
    hnext = np.full(64, -1, np.int64)  # the previous node with the same hash
    cptr = np.zeros(65, np.int64)  # description of node i: cont[cptr[i]:cptr[i + 1]]
    cont = np.empty(256, np.int64)
    heads_k, heads_v = table_new(1024)  # a description's hash -> the last node with it
    n_heads = 0
    uni = np.full((4, n_q), -1, np.int64)  # uni[0, q]: q's character node; uni[k, t]: U(k, t)
    status = OK

    queue = np.empty(n_q, np.int64)  # character states whose node is made, row not filled
    q_head = 0
    q_tail = 0

    # the pieces of the state being filled: sorted, disjoint, merged (lo, hi, target)
    plo = np.empty(64, np.int64)
    phi = np.empty(64, np.int64)
    pt = np.empty(64, np.int64)
    keys = np.empty(64, np.int64)
    stack = np.empty((64, 4), np.int64)  # intermediate nodes made, rows not filled

    # the start state's character node is node 0
    uni[0, 0] = 0
    of_char[0] = 0
    acc[0] = accept[0]
    n = 1
    queue[q_tail] = 0
    q_tail += 1

    while q_head < q_tail and status == OK:
        q = queue[q_head]
        q_head += 1

        # -- the pieces of q: its live edges' ranges, no surrogates, nothing past U+10FFFF
        npc = 0
        for e in range(edge_ptr[q], edge_ptr[q + 1]):
            t = edge_target[e]
            if not live[t]:
                continue
            b = edge_block[e]
            for r in range(range_ptr[b], range_ptr[b + 1]):
                for w in range(2):  # below and above the surrogates
                    a = range_lo[r] if w == 0 else max(range_lo[r], _SURROGATE_HI + 1)
                    z = min(range_hi[r], _SURROGATE_LO - 1) if w == 0 else min(range_hi[r], _MAX_CP)
                    if a > z:
                        continue
                    if npc == plo.shape[0]:
                        plo = _grown(plo)
                        phi = _grown(phi)
                        pt = _grown(pt)
                    plo[npc] = a
                    phi[npc] = z
                    pt[npc] = t
                    npc += 1
        if npc > 1:  # sorted by first code point (packed with the piece's index), merged
            if keys.shape[0] < npc:
                keys = np.empty(plo.shape[0], np.int64)
            for i in range(npc):
                keys[i] = (plo[i] << 32) | i
            srt = np.sort(keys[:npc])
            s_lo = plo[:npc].copy()
            s_hi = phi[:npc].copy()
            s_t = pt[:npc].copy()
            m = 0
            for x in range(npc):
                i = srt[x] & 0xFFFFFFFF
                if m > 0 and s_t[i] == pt[m - 1] and s_lo[i] == phi[m - 1] + 1:
                    phi[m - 1] = s_hi[i]
                else:
                    plo[m] = s_lo[i]
                    phi[m] = s_hi[i]
                    pt[m] = s_t[i]
                    m += 1
            npc = m

        # Room for every node q's row can make: a character node and three uniform ones
        # a target, and per level of continuation bytes, at most two intermediate nodes
        # a piece (one at each end) and four where a lead byte is partly valid.
        room = n + 10 * npc + 16
        if room > rows.shape[0]:
            cap = max(room, 2 * rows.shape[0])
            rows = _grown2d(rows, cap)
            acc = _grown_to(acc, cap, False)
            of_char = _grown_to(of_char, cap, -1)
            hnext = _grown_to(hnext, cap, -1)
            cptr = _grown_to(cptr, cap + 1, 0)
        if 6 * npc + 16 > stack.shape[0]:
            stack = np.empty((6 * npc + 16, 4), np.int64)

        # -- q's row, then the rows of the intermediate nodes it needs ---------------
        # Work items: (node, first code point, continuation bytes left, encoded length);
        # continuation bytes left -1 stands for q's own row (ASCII and lead bytes).
        stack[0, 0] = uni[0, q]
        stack[0, 1] = 0
        stack[0, 2] = -1
        stack[0, 3] = 0
        sp = 1
        while sp > 0 and status == OK:
            sp -= 1
            node = stack[sp, 0]
            base = stack[sp, 1]
            k = stack[sp, 2]
            length = stack[sp, 3]
            first_byte = 0 if k == -1 else 0x80
            last_byte = 0xF4 if k == -1 else 0xBF
            for byte in range(first_byte, last_byte + 1):
                if k >= 0:
                    ck = k - 1
                    a = base + (byte - 0x80) * (1 << (6 * ck))
                    clen = length
                elif byte < 0x80:
                    ck = 0
                    a = byte
                    clen = 1
                elif byte < 0xC2:
                    continue
                else:
                    clen = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
                    ck = clen - 1
                    a = (byte & (0x7F >> clen)) << (6 * ck)
                z = a + (1 << (6 * ck)) - 1
                # the valid code points of this child: [va, vz]
                va = max(a, _min_cp(clen)) if clen > 1 else a
                vz = min(z, _MAX_CP)
                if va > vz:
                    continue
                i0 = _first_overlapping(plo, phi, npc, va)
                if i0 >= npc or plo[i0] > vz:
                    continue  # no live target: dead
                if ck == 0 or (va == a and vz == z and plo[i0] <= a and phi[i0] >= z):
                    # one target for the whole child: U(ck, t), made with what it needs
                    t = pt[i0]
                    for kk in range(ck + 1):
                        if uni[kk, t] >= 0:
                            continue
                        if n >= max_nodes or (n + 1) * row_steps > max_steps:
                            status = TOO_MANY_STATES if n >= max_nodes else OUT_OF_STEPS
                            break
                        uni[kk, t] = n
                        cptr[n + 1] = cptr[n]
                        if kk == 0:  # t's character node: its row comes later
                            acc[n] = accept[t]
                            of_char[n] = t
                            queue[q_tail] = t
                            q_tail += 1
                        else:
                            rows[n, 0x80:0xC0] = uni[kk - 1, t]
                        n += 1
                    if status != OK:
                        break
                    rows[node, byte] = uni[ck, t]
                    continue
                # several targets, or a partly valid interval: a node keyed by its
                # description (ck, then each piece relative to a), checked exactly
                h = (_FNV_BASIS ^ np.uint64(ck)) * _FNV_PRIME
                cnt = 0
                i = i0
                while i < npc and plo[i] <= vz:
                    h = (h ^ np.uint64(max(plo[i], va) - a)) * _FNV_PRIME
                    h = (h ^ np.uint64(min(phi[i], vz) - a)) * _FNV_PRIME
                    h = (h ^ np.uint64(pt[i])) * _FNV_PRIME
                    cnt += 1
                    i += 1
                found = -1
                cand = table_get(heads_k, heads_v, np.int64(h))
                while cand >= 0 and found < 0:
                    c0 = cptr[cand]
                    same = cptr[cand + 1] - c0 == 1 + 3 * cnt and cont[c0] == ck
                    w = c0 + 1
                    i = i0
                    while same and i < npc and plo[i] <= vz:
                        same = (
                            cont[w] == max(plo[i], va) - a
                            and cont[w + 1] == min(phi[i], vz) - a
                            and cont[w + 2] == pt[i]
                        )
                        w += 3
                        i += 1
                    if same:
                        found = cand
                    else:
                        cand = hnext[cand]
                if found < 0:
                    if n >= max_nodes or (n + 1) * row_steps > max_steps:
                        status = TOO_MANY_STATES if n >= max_nodes else OUT_OF_STEPS
                        break
                    found = n
                    w = cptr[n]
                    if w + 1 + 3 * cnt > cont.shape[0]:
                        cont = _grown_to(cont, max(w + 1 + 3 * cnt, 2 * cont.shape[0]), 0)
                    cont[w] = ck
                    w += 1
                    i = i0
                    while i < npc and plo[i] <= vz:
                        cont[w] = max(plo[i], va) - a
                        cont[w + 1] = min(phi[i], vz) - a
                        cont[w + 2] = pt[i]
                        w += 3
                        i += 1
                    cptr[n + 1] = w
                    hnext[n] = table_get(heads_k, heads_v, np.int64(h))
                    heads_k, heads_v, n_heads = table_put(heads_k, heads_v, n_heads, np.int64(h), n)
                    n += 1
                    stack[sp, 0] = found
                    stack[sp, 1] = a
                    stack[sp, 2] = ck
                    stack[sp, 3] = clen
                    sp += 1
                rows[node, byte] = found
    return status, n, rows, acc, of_char


@kernel(nogil=True, inline="always")
def _grown(a):  # type: ignore[no-untyped-def]
    """``a`` (1-D) with twice the room."""
    out = np.empty(2 * a.shape[0], a.dtype)
    out[: a.shape[0]] = a
    return out


@kernel(nogil=True, inline="always")
def _grown_to(a, size, fill):  # type: ignore[no-untyped-def]
    """``a`` (1-D) grown to ``size``, the new room set to ``fill``."""
    out = np.empty(size, a.dtype)
    out[: a.shape[0]] = a
    out[a.shape[0] :] = fill
    return out


@kernel(nogil=True, inline="always")
def _grown2d(a, size):  # type: ignore[no-untyped-def]
    """``a`` (rows of 256) grown to ``size`` rows, the new ones dead (-1)."""
    out = np.full((size, a.shape[1]), -1, a.dtype)
    out[: a.shape[0]] = a
    return out
