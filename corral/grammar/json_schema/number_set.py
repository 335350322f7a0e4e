"""One automaton for a finite set of numbers: every spelling of each value without an
exponent (``1``, ``1.0``, ``1.00``... for 1; ``0``, ``-0``, ``0.0``... for 0), as
:func:`~corral.grammar.json_schema.numbers.number_dfa` gives for a one-value range.

An ``enum`` of thousands of numbers built as one range automaton per value cost a
millisecond per value and a terminal each (30,000 integers: 34 s, and hundreds of
thousands of lexer states). Here the values' *stems* (the canonical spelling, with no
trailing fraction zeros) go into one minimal acyclic automaton (``regex/dawg.py``), each
ending in a marker byte that says which *tail* may follow: ``(\\.0+)?`` after an integer,
``0*`` after a fraction. The result is that automaton with the markers replaced by the
tails, made deterministic by a walk over (stem state, tail states) pairs: linear in the
stems' total length, one terminal for the whole set.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

import numpy as np

from ...errors import CompileBudgetError
from ..regex.dawg import dawg
from ..regex.dfa import ByteDFA, minimal_dfa
from ..regex.sparse import SparseDFA

__all__ = ["MAX_STEM_BYTES", "number_set_dfa", "stems"]

MAX_STEM_BYTES = 64_000_000
"""Most bytes all stems may hold together (a value like ``1e300`` is spelled with 301
digits)."""

DENSE_STATES = 4096
"""Largest automaton kept as dense rows (1 KB a state); larger ones stay sparse."""

_INT, _FRAC = 0x00, 0x01  # marker bytes after a stem: which tail follows
_DOT, _ZERO = 0x2E, 0x30
# tail states, as bits of a set: after an integer stem (accepting; "." goes on), after its
# ".", in its zeros (accepting); after a fraction stem and in its zeros (accepting)
_I_END, _I_DOT, _I_ZEROS, _F_ZEROS = 1, 2, 4, 8
_ACCEPTING_TAILS = _I_END | _I_ZEROS | _F_ZEROS


def stems(values: Iterable[Decimal], *, max_bytes: int = MAX_STEM_BYTES) -> list[bytes]:
    """The marked stems of finite decimal ``values``: the spelling without exponent or
    trailing fraction zeros, then the marker of its tail (zero is ``0`` and ``-0``).

    Raises:
        CompileBudgetError: the stems would hold more than ``max_bytes`` bytes.
    """
    out: set[bytes] = set()
    total = 0
    for d in values:
        if d == 0:
            out.update((b"0\x00", b"-0\x00"))
            continue
        _, digits, exponent = d.as_tuple()
        assert isinstance(exponent, int)  # finite
        total += len(digits) + abs(exponent) + 3  # the spelling's length, at most
        if total > max_bytes:
            raise CompileBudgetError(
                f"the numbers of the enum are spelled with more than {max_bytes:,} "
                "digits in all (written without an exponent)"
            )
        text = format(d, "f").encode("ascii")
        if b"." in text:
            text = text.rstrip(b"0").rstrip(b".")
        out.add(text + bytes([_FRAC if b"." in text else _INT]))
    return sorted(out)


def _tail_step(tails: int, b: int) -> int:
    """The tail states after byte ``b``."""
    out = 0
    if tails & _I_END and b == _DOT:
        out |= _I_DOT
    if tails & (_I_DOT | _I_ZEROS) and b == _ZERO:
        out |= _I_ZEROS
    if tails & _F_ZEROS and b == _ZERO:
        out |= _F_ZEROS
    return out


def number_set_dfa(values: Iterable[Decimal]) -> ByteDFA | SparseDFA:
    """The automaton of every exponent-free spelling of each of ``values`` (finite
    decimals); dense and minimal up to :data:`DENSE_STATES` states, sparse beyond.

    Raises:
        CompileBudgetError: the stems hold more than :data:`MAX_STEM_BYTES` bytes.
    """
    words = stems(values)
    if not words:
        return ByteDFA.empty()
    stem = dawg(words)
    rows = [
        (stem.labels[stem.row_start[s] : stem.row_start[s + 1]].tolist(),
         stem.targets[stem.row_start[s] : stem.row_start[s + 1]].tolist())
        for s in range(stem.n_states)
    ]  # fmt: skip
    ends = [0] * stem.n_states  # the tail a marker edge starts at each stem state
    for s, (labels, _) in enumerate(rows):
        if labels and labels[0] == _INT:
            ends[s] = _I_END
        elif labels and labels[0] == _FRAC:
            ends[s] = _F_ZEROS
    index: dict[tuple[int, int], int] = {(0, 0): 0}
    pairs: list[tuple[int, int]] = [(0, 0)]
    src: list[int] = []
    byt: list[int] = []
    dst: list[int] = []
    i = 0
    while i < len(pairs):
        s, tails = pairs[i]
        nxt: dict[int, tuple[int, int]] = {}
        if s >= 0:
            labels, targets = rows[s]
            for b, t in zip(labels, targets, strict=True):
                if b > _FRAC:
                    nxt[b] = (t, ends[t])
        if tails:
            for b in (_DOT, _ZERO):
                more = _tail_step(tails, b)
                if more:
                    t, old = nxt.get(b, (-1, 0))
                    nxt[b] = (t, old | more)
        for b, key in nxt.items():
            j = index.get(key)
            if j is None:
                j = index[key] = len(pairs)
                pairs.append(key)
            src.append(i)
            byt.append(b)
            dst.append(j)
        i += 1
    accept = np.array([bool(tails & _ACCEPTING_TAILS) for _, tails in pairs])
    n = len(pairs)
    if n > DENSE_STATES:
        return SparseDFA.from_edges(n, np.asarray(src), np.asarray(byt), np.asarray(dst), accept)
    trans = np.full((n, 256), -1, np.int32)
    trans[np.asarray(src, np.int64), np.asarray(byt, np.int64)] = np.asarray(dst, np.int32)
    return minimal_dfa(trans, accept)
