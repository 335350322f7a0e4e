"""Kernel: a canonical description of what a lexer state does to short byte strings.

Two lexer states whose descriptions are equal have equal token caches (``mask.py``,
part 1): the trie walk from a state reads at most ``max_depth`` bytes, and the
description records every transition a walk that long can take and which states accept.
(The FOLLOW bytes of the terminal are not part of it: the walk records every place where
a lexeme can end, whatever may follow it.) That holds
across grammars too, so token caches can be shared by every grammar compiled for one
vocabulary (``state_cache.py``).
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel
from .layout import (
    H_BYTE_CLASS,
    H_G,
    H_LEX_ACCEPT,
)
from .lexer import lex_classes, lex_dense, lex_next


@kernel(nogil=True)
def _too_many_states(lex, byte_class, g, max_depth, max_states):  # type: ignore[no-untyped-def]
    """Whether more than ``max_states`` states lie within ``max_depth`` bytes of ``g``
    (by byte class: a pass much cheaper than the description, which lists byte runs).
    Dense states (rows of ``lex``) reach only dense states; a sparse state always
    counts as too many (its automaton is large, and its own to one grammar)."""
    dense = lex_dense(lex)
    if g >= dense.shape[0]:
        return True
    n_states = dense.shape[0]
    used = np.zeros(dense.shape[1], np.uint8)  # classes some byte belongs to
    for b in range(256):
        used[byte_class[b]] = 1
    seen = np.zeros(n_states, np.uint8)
    queue = np.empty(max_states, np.int32)
    dist = np.empty(max_states, np.int32)
    queue[0] = g
    dist[0] = 0
    seen[g] = 1
    n = 1
    head = 0
    while head < n:
        s = queue[head]
        d = dist[head]
        head += 1
        if d >= max_depth:
            continue
        for c in range(dense.shape[1]):
            nxt = dense[s, c]
            if nxt >= 0 and used[c] != 0 and seen[nxt] == 0:
                if n >= max_states:
                    return True
                seen[nxt] = 1
                queue[n] = nxt
                dist[n] = d + 1
                n += 1
    return False


@kernel(nogil=True)
def state_signature(gt, lex, g, max_depth, max_states):  # type: ignore[no-untyped-def]
    """``int32`` description of lexer state ``g`` up to ``max_depth`` bytes.

    States reachable from ``g`` are numbered in breadth-first order (bytes ascending), so
    the numbering depends only on the language, not on how the grammar laid the states
    out. The output is, for each numbered state: its accepting flag and, if it lies less
    than ``max_depth`` bytes from ``g``, its transitions as runs ``(first byte, target
    number or -1)``, ended by ``256``.
    Returns an empty array when more than ``max_states`` states would be described (the
    description would cost more than it saves).
    """
    n_states = gt[H_G]
    n_classes = lex_classes(lex)
    byte_class = gt[gt[H_BYTE_CLASS] : gt[H_BYTE_CLASS] + 256]
    if _too_many_states(lex, byte_class, g, max_depth, max_states):
        return np.empty(0, np.int32)
    lex_accept = gt[H_LEX_ACCEPT]
    number = np.full(n_states, -1, np.int32)  # lexer state -> breadth-first number
    of_class = np.empty(n_classes, np.int32)
    run_start = np.empty(256, np.int32)
    n_runs = 0
    for b in range(256):
        if b == 0 or byte_class[b] != byte_class[b - 1]:
            run_start[n_runs] = b
            n_runs += 1
    queue = np.empty(16, np.int32)
    dist = np.empty(16, np.int32)
    queue[0] = g
    dist[0] = 0
    number[g] = 0
    n_queued = 1
    out = np.empty(64, np.int32)
    n_out = 0
    head = 0
    while head < n_queued:
        s = queue[head]
        d = dist[head]
        head += 1
        if n_out + 3 + 2 * 256 > out.shape[0]:
            grown = np.empty(2 * out.shape[0] + 2 * 256, np.int32)
            grown[:n_out] = out[:n_out]
            out = grown
        out[n_out] = gt[lex_accept + s]
        n_out += 1
        if d >= max_depth:
            continue
        of_class[:] = -2  # not looked up yet in this state
        prev = -2
        for i in range(n_runs):  # maximal runs of bytes of one class, in byte order
            b = run_start[i]
            c = byte_class[b]
            if of_class[c] == -2:
                nxt = lex_next(lex, s, c)
                if nxt < 0:
                    of_class[c] = -1
                elif number[nxt] >= 0:
                    of_class[c] = number[nxt]
                else:  # numbered at its first byte, so the numbering is layout-free
                    if n_queued >= max_states:
                        return out[:0]
                    of_class[c] = n_queued
                    number[nxt] = n_queued
                    if n_queued == queue.shape[0]:
                        q2 = np.empty(2 * n_queued, np.int32)
                        d2 = np.empty(2 * n_queued, np.int32)
                        q2[:n_queued] = queue
                        d2[:n_queued] = dist
                        queue, dist = q2, d2
                    queue[n_queued] = nxt
                    dist[n_queued] = d + 1
                    n_queued += 1
            k = of_class[c]
            if k != prev:
                out[n_out] = b
                out[n_out + 1] = k
                n_out += 2
                prev = k
        out[n_out] = 256
        n_out += 1
    return out[:n_out]
