"""Masks of parse states seen before, shared by every matcher of one compiled grammar.

A token mask depends only on the chart's top set and, through its items' origins, on the
sets those items reach back to: exactly what the set's structural hash ``S[k, S_HASH]``
covers (``kernels/earley.py``: a hash of the set's parser and lexeme items, each with
the hash of its origin set, and of its accepting flag). Two positions whose top sets have
equal hashes therefore have equal masks, whatever came before them and in whichever
matcher: the state after ``name:`` in every rule of a grammar file, or inside every
string value of one schema's objects. The walk below a lexeme's end (a Lark grammar's
word tokens split into several lexemes, e.g. ``helloWorld`` as ``hello`` ``World``) can
cost milliseconds; a stored mask is found and copied in 2-3 µs (the median mask of
replays where most states come back).

The hash is the one the mask kernel's own memo already trusts to tell sets apart (64
bits). A collision would give a wrong mask, never a wrong output: :meth:`Matcher.consume`
parses every token itself and refuses one the grammar does not allow.

What is stored, within ``max_bytes`` per compiled grammar: a mask that took at least
``min_cost_ns`` (0.5 ms) to compute, at once; a cheaper one when its state comes back
(computed a second time), so that states seen once (most positions of a document under
a JSON Schema) cost no copy and do not fill the budget. When the budget is full the
oldest cheap entry goes first, then the oldest costly one. The mask stored is the
kernel's, before the grammar's final check (which depends on the text) is applied.
"""

from __future__ import annotations

import threading

import numpy as np

DEFAULT_MAX_BYTES = 16 << 20
DEFAULT_MIN_COST_NS = 500_000
_MAX_SEEN = 1 << 12


class MaskCache:
    """Token masks (``uint32 [words]``, id space) by the structural hash of the top set.

    Thread-safe: lookups are dict reads; stores and evictions take a lock.

    Attributes:
        masks: ``{key: mask}``, the stored masks (read-only arrays).
        max_bytes: the budget for stored masks (``0`` turns the cache off).
        min_cost_ns: store a mask at once if computing it took at least this long (else
            when its state comes back).
        hits, stores: counters since creation.
    """

    def __init__(
        self, words: int, max_bytes: int = DEFAULT_MAX_BYTES, min_cost_ns: int = DEFAULT_MIN_COST_NS
    ) -> None:
        self.words = words
        self.max_bytes = max_bytes
        self.min_cost_ns = min_cost_ns
        self.masks: dict[int, np.ndarray] = {}
        # the keys of ``masks`` by kind, oldest first (dicts as ordered sets)
        self._costly: dict[int, None] = {}
        self._cheap: dict[int, None] = {}
        self._seen: set[int] = set()  # keys of cheap masks computed once
        self._lock = threading.Lock()
        self.hits = 0
        self.stores = 0

    def __len__(self) -> int:
        return len(self.masks)

    @property
    def nbytes(self) -> int:
        """Bytes held by stored masks."""
        return len(self.masks) * 4 * self.words

    def get(self, key: int) -> np.ndarray | None:
        """The stored mask for top-set hash ``key`` (read-only), or ``None``."""
        found = self.masks.get(key)
        if found is not None:
            self.hits += 1
        return found

    def offer(self, key: int, mask: np.ndarray, cost_ns: int) -> None:
        """Store a copy of ``mask`` (``uint32 [words]``) for ``key``, computed in
        ``cost_ns``, if the policy above takes it."""
        entry = 4 * self.words
        if entry > self.max_bytes:
            return
        costly = cost_ns >= self.min_cost_ns
        if not costly and key not in self._seen:
            if len(self._seen) >= _MAX_SEEN:
                self._seen.clear()
            self._seen.add(key)
            return
        stored = mask.copy()
        stored.flags.writeable = False
        with self._lock:
            while self.masks and (len(self.masks) + 1) * entry > self.max_bytes:
                oldest = self._cheap if self._cheap else self._costly
                old = next(iter(oldest))
                del oldest[old]
                del self.masks[old]
            self.masks[key] = stored
            (self._costly if costly else self._cheap)[key] = None
            self._seen.discard(key)
            self.stores += 1

    def clear(self) -> None:
        """Drop every stored mask (the counters stay)."""
        with self._lock:
            self.masks.clear()
            self._costly.clear()
            self._cheap.clear()
            self._seen.clear()
