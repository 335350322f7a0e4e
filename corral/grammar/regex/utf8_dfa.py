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

import numba as nb
import numpy as np
from numba import types

from ...jit import kernel

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
    cap = 64
    rows = np.full((cap, 256), -1, np.int32)
    acc = np.zeros(cap, np.bool_)
    of_char = np.full(cap, -1, np.int32)
    hnext = np.full(cap, -1, np.int64)  # next node with the same hash
    cptr = np.zeros(cap + 1, np.int64)  # description of node i: cont[cptr[i]:cptr[i+1]]
    cont = np.empty(256, np.int64)
    heads = nb.typed.Dict.empty(key_type=types.uint64, value_type=types.int64)
    uni = np.full((4, n_q), -1, np.int64)  # uni[0, q]: q's character node; uni[k, t]: U(k, t)
    n = 0
    status = OK

    queue = np.empty(n_q, np.int64)  # character states whose node is made, row not filled
    q_head = 0
    q_tail = 0

    # the pieces of the state being filled: sorted, disjoint, merged (lo, hi, target)
    pcap = 64
    plo = np.empty(pcap, np.int64)
    phi = np.empty(pcap, np.int64)
    pt = np.empty(pcap, np.int64)

    stack_node = np.empty(64, np.int64)  # intermediate nodes made, rows not filled
    stack_a = np.empty(64, np.int64)
    stack_k = np.empty(64, np.int64)
    stack_len = np.empty(64, np.int64)

    # the start state's character node is node 0
    uni[0, 0] = 0
    of_char[0] = 0
    acc[0] = accept[0]
    cptr[1] = 0
    n = 1
    queue[q_tail] = 0
    q_tail += 1

    while q_head < q_tail:
        q = queue[q_head]
        q_head += 1
        j = uni[0, q]

        # -- the pieces of q --------------------------------------------------------
        npc = 0
        for e in range(edge_ptr[q], edge_ptr[q + 1]):
            t = edge_target[e]
            if not live[t]:
                continue
            b = edge_block[e]
            for r in range(range_ptr[b], range_ptr[b + 1]):
                # no surrogates (the range is cut around them), nothing past U+10FFFF
                for w in range(2):
                    if w == 0:
                        a = range_lo[r]
                        z = min(range_hi[r], _SURROGATE_LO - 1)
                    else:
                        a = max(range_lo[r], _SURROGATE_HI + 1)
                        z = min(range_hi[r], _MAX_CP)
                    if a > z:
                        continue
                    if npc >= pcap:
                        pcap *= 2
                        g1 = np.empty(pcap, np.int64)
                        g2 = np.empty(pcap, np.int64)
                        g3 = np.empty(pcap, np.int64)
                        g1[:npc] = plo[:npc]
                        g2[:npc] = phi[:npc]
                        g3[:npc] = pt[:npc]
                        plo = g1
                        phi = g2
                        pt = g3
                    plo[npc] = a
                    phi[npc] = z
                    pt[npc] = t
                    npc += 1
        if npc > 1:
            order = np.argsort(plo[:npc], kind="mergesort")
            s_lo = plo[:npc][order]
            s_hi = phi[:npc][order]
            s_t = pt[:npc][order]
            m = 0
            for i in range(npc):
                if m > 0 and s_t[i] == pt[m - 1] and s_lo[i] == phi[m - 1] + 1:
                    phi[m - 1] = s_hi[i]
                else:
                    plo[m] = s_lo[i]
                    phi[m] = s_hi[i]
                    pt[m] = s_t[i]
                    m += 1
            npc = m

        # -- q's row, then the rows of the intermediate nodes it needs -------------
        # Work items: (node, first code point, continuation bytes left, encoded length);
        # node == j with k == -1 stands for q's own row (ASCII and lead bytes).
        sp = 0
        stack_node[0] = j
        stack_a[0] = 0
        stack_k[0] = -1
        stack_len[0] = 0
        sp = 1
        while sp > 0 and status == OK:
            sp -= 1
            node = stack_node[sp]
            base = stack_a[sp]
            k = stack_k[sp]
            length = stack_len[sp]
            if k == -1:
                first_byte = 0
                last_byte = 0xF4
            else:
                first_byte = 0x80
                last_byte = 0xBF
            for byte in range(first_byte, last_byte + 1):
                if k == -1:
                    if byte < 0x80:
                        ck = 0
                        a = byte
                        clen = 1
                    elif byte < 0xC2:
                        continue
                    elif byte < 0xE0:
                        ck = 1
                        a = (byte & 0x1F) << 6
                        clen = 2
                    elif byte < 0xF0:
                        ck = 2
                        a = (byte & 0x0F) << 12
                        clen = 3
                    else:
                        ck = 3
                        a = (byte & 0x07) << 18
                        clen = 4
                else:
                    ck = k - 1
                    a = base + (byte - 0x80) * (1 << (6 * ck))
                    clen = length
                size = 1 << (6 * ck)
                z = a + size - 1
                # the valid code points of this child: [va, vz]
                va = a
                vz = z
                if clen > 1 and va < _min_cp(clen):
                    va = _min_cp(clen)
                if vz > _MAX_CP:
                    vz = _MAX_CP
                if va > vz:
                    continue
                i0 = _first_overlapping(plo, phi, npc, va)
                if i0 >= npc or plo[i0] > vz:
                    continue  # no live target: dead
                if ck == 0 or (va == a and vz == z and plo[i0] <= a and phi[i0] >= z):
                    # one target for the whole child: U(ck, t)
                    t = pt[i0]
                    if uni[0, t] < 0:
                        if n >= max_nodes:
                            status = TOO_MANY_STATES
                            break
                        if (n + 1) * row_steps > max_steps:
                            status = OUT_OF_STEPS
                            break
                        if n >= rows.shape[0]:
                            rows, acc, of_char, hnext, cptr = _grow_nodes(
                                rows, acc, of_char, hnext, cptr
                            )
                        uni[0, t] = n
                        acc[n] = accept[t]
                        of_char[n] = t
                        cptr[n + 1] = cptr[n]
                        n += 1
                        queue[q_tail] = t
                        q_tail += 1
                    for kk in range(1, ck + 1):
                        if uni[kk, t] < 0:
                            if n >= max_nodes:
                                status = TOO_MANY_STATES
                                break
                            if (n + 1) * row_steps > max_steps:
                                status = OUT_OF_STEPS
                                break
                            if n >= rows.shape[0]:
                                rows, acc, of_char, hnext, cptr = _grow_nodes(
                                    rows, acc, of_char, hnext, cptr
                                )
                            uni[kk, t] = n
                            rows[n, 0x80:0xC0] = uni[kk - 1, t]
                            cptr[n + 1] = cptr[n]
                            n += 1
                    if status != OK:
                        break
                    rows[node, byte] = uni[ck, t]
                    continue
                # several targets, or a partly valid interval: a keyed intermediate node
                h = _FNV_BASIS
                h = (h ^ np.uint64(ck)) * _FNV_PRIME
                i = i0
                cnt = 0
                while i < npc and plo[i] <= vz:
                    lo = max(plo[i], va) - a
                    hi = min(phi[i], vz) - a
                    h = (h ^ np.uint64(lo)) * _FNV_PRIME
                    h = (h ^ np.uint64(hi)) * _FNV_PRIME
                    h = (h ^ np.uint64(pt[i])) * _FNV_PRIME
                    cnt += 1
                    i += 1
                found = -1
                cand = heads[h] if h in heads else -1  # noqa: SIM401 (typed Dict.get is Optional)
                while cand >= 0:
                    c0 = cptr[cand]
                    if cptr[cand + 1] - c0 == 1 + 3 * cnt and cont[c0] == ck:
                        same = True
                        i = i0
                        w = c0 + 1
                        while i < npc and plo[i] <= vz:
                            if (
                                cont[w] != max(plo[i], va) - a
                                or cont[w + 1] != min(phi[i], vz) - a
                                or cont[w + 2] != pt[i]
                            ):
                                same = False
                                break
                            w += 3
                            i += 1
                        if same:
                            found = cand
                            break
                    cand = hnext[cand]
                if found < 0:
                    if n >= max_nodes:
                        status = TOO_MANY_STATES
                        break
                    if (n + 1) * row_steps > max_steps:
                        status = OUT_OF_STEPS
                        break
                    if n >= rows.shape[0]:
                        rows, acc, of_char, hnext, cptr = _grow_nodes(
                            rows, acc, of_char, hnext, cptr
                        )
                    found = n
                    w = cptr[n]
                    need = w + 1 + 3 * cnt
                    if need > cont.shape[0]:
                        grown = np.empty(max(need, 2 * cont.shape[0]), np.int64)
                        grown[:w] = cont[:w]
                        cont = grown
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
                    hnext[n] = heads[h] if h in heads else -1  # noqa: SIM401 (typed Dict.get is Optional)
                    heads[h] = n
                    n += 1
                    if sp >= stack_node.shape[0]:
                        stack_node = _grow_stack(stack_node)
                        stack_a = _grow_stack(stack_a)
                        stack_k = _grow_stack(stack_k)
                        stack_len = _grow_stack(stack_len)
                    stack_node[sp] = found
                    stack_a[sp] = a
                    stack_k[sp] = ck
                    stack_len[sp] = clen
                    sp += 1
                rows[node, byte] = found
        if status != OK:
            break
    return status, n, rows, acc, of_char


@kernel(nogil=True)
def _grow_nodes(rows, acc, of_char, hnext, cptr):  # type: ignore[no-untyped-def]
    """The per-node arrays with twice the room (new rows dead, new flags false)."""
    cap = rows.shape[0]
    r2 = np.full((2 * cap, 256), -1, np.int32)
    r2[:cap] = rows
    a2 = np.zeros(2 * cap, np.bool_)
    a2[:cap] = acc
    o2 = np.full(2 * cap, -1, np.int32)
    o2[:cap] = of_char
    h2 = np.full(2 * cap, -1, np.int64)
    h2[:cap] = hnext
    c2 = np.zeros(2 * cap + 1, np.int64)
    c2[: cap + 1] = cptr
    return r2, a2, o2, h2, c2


@kernel(nogil=True)
def _grow_stack(a):  # type: ignore[no-untyped-def]
    out = np.empty(2 * a.shape[0], a.dtype)
    out[: a.shape[0]] = a
    return out
