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

How a mask is stored: most masks are nearly empty (inside a key or a number, a few
tokens) or nearly full, so a mask whose words mostly equal 0 (or all ones) keeps only
the other words, with their positions (12 bytes a word, against 4 bytes for every word
of the vocabulary: 16 KB with Llama-3; copied out in 0.76 µs, a whole one in 0.69). The
others (inside a JSON string: every token without a quote, a backslash or a control
byte) are kept whole, and one copy of each distinct content serves every grammar of the
process: the same string states recur in every schema.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

DEFAULT_MAX_BYTES = 16 << 20
DEFAULT_MIN_COST_NS = 500_000
_MAX_SEEN = 1 << 12


class MaskCache:
    """Token masks (``uint32 [words]``, id space) by the structural hash of the top set.

    Thread-safe: lookups are dict reads; stores and evictions take a lock.

    Attributes:
        masks: ``{key: entry}``, the stored masks: a read-only ``uint32 [words]`` array,
            or a :class:`_Sparse` (the words that differ from a background word).
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
        self.masks: dict[int, np.ndarray | _Sparse] = {}
        # the keys of ``masks`` by kind, oldest first (dicts as ordered sets)
        self._costly: dict[int, None] = {}
        self._cheap: dict[int, None] = {}
        self._seen: set[int] = set()  # keys of cheap masks computed once
        self._lock = threading.Lock()
        self._nbytes = 0
        self.hits = 0
        self.stores = 0

    def __len__(self) -> int:
        return len(self.masks)

    @property
    def nbytes(self) -> int:
        """Bytes held by stored masks (a whole mask shared with other grammars counted
        in full)."""
        return self._nbytes

    def fill(self, key: int, dst: np.ndarray) -> bool:
        """Write the stored mask for top-set hash ``key`` into ``dst`` (``uint32
        [words]``) and return ``True``; ``False`` (``dst`` untouched) if none is stored."""
        found = self.masks.get(key)
        if found is None:
            return False
        self.hits += 1
        if type(found) is _Sparse:
            dst.fill(found.background)
            dst[found.where] = found.values
        else:
            dst[:] = found
        return True

    def get(self, key: int) -> np.ndarray | None:
        """A copy of the stored mask for top-set hash ``key``, or ``None``."""
        if key not in self.masks:
            return None
        out = np.empty(self.words, np.uint32)
        self.fill(key, out)
        return out

    def offer(self, key: int, mask: np.ndarray, cost_ns: int) -> None:
        """Store ``mask`` (``uint32 [words]``; the cache keeps its own copy) for ``key``,
        computed in ``cost_ns``, if the policy above takes it."""
        if 4 * self.words > self.max_bytes:
            return
        costly = cost_ns >= self.min_cost_ns
        if not costly and key not in self._seen:
            if len(self._seen) >= _MAX_SEEN:
                self._seen.clear()
            self._seen.add(key)
            return
        entry = _compact(mask)
        size = _size(entry)
        with self._lock:
            if key in self.masks:  # another thread stored it meanwhile
                return
            while self.masks and self._nbytes + size > self.max_bytes:
                oldest = self._cheap if self._cheap else self._costly
                old = next(iter(oldest))
                del oldest[old]
                self._nbytes -= _size(self.masks.pop(old))
            self.masks[key] = entry
            self._nbytes += size
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
            self._nbytes = 0


class _Sparse(NamedTuple):
    """A mask whose words equal ``background`` except at ``where`` (``intp [n]``), where
    they are ``values`` (``uint32 [n]``): 12 bytes a word, so stored when at most a sixth
    of the words differ (half the room of the whole mask, or less)."""

    background: np.uint32
    where: np.ndarray
    values: np.ndarray


_FULL = np.uint32(0xFFFFFFFF)
_SPARSE_AT = 6  # sparse when at most 1/_SPARSE_AT of the words differ from the background
# whole masks by content, shared by every grammar of the process while one holds them
_WHOLE: weakref.WeakValueDictionary[bytes, np.ndarray] = weakref.WeakValueDictionary()
_WHOLE_LOCK = threading.Lock()


def _compact(mask: np.ndarray) -> np.ndarray | _Sparse:
    """The stored form of ``mask`` (``uint32 [words]``): a :class:`_Sparse` if at most a
    sixth of its words differ from 0 (or from all ones), else a read-only whole copy,
    the one already held for the same content if there is one."""
    words = mask.shape[0]
    index = np.flatnonzero(mask)  # intp: NumPy scatters by it fastest (0.1 us, 3 words)
    background = np.uint32(0)
    if index.shape[0] * _SPARSE_AT > words:
        index = np.flatnonzero(mask != _FULL)
        background = _FULL
    if index.shape[0] * _SPARSE_AT <= words:
        return _Sparse(background, index, mask[index])
    digest = hashlib.blake2b(mask.data, digest_size=16).digest()
    with _WHOLE_LOCK:
        found = _WHOLE.get(digest)
        if found is not None and np.array_equal(found, mask):
            return found
        stored = mask.copy()
        stored.flags.writeable = False
        _WHOLE[digest] = stored
        return stored


def held_bytes(caches: Iterable[MaskCache]) -> int:
    """Bytes the stored masks of ``caches`` hold together: a whole mask that several of
    them share counted once (each cache's :attr:`MaskCache.nbytes` counts it in full)."""
    held: dict[int, int] = {}
    for cache in caches:
        for entry in list(cache.masks.values()):
            held[id(entry)] = _size(entry)
    return sum(held.values())


def _size(entry: np.ndarray | _Sparse) -> int:
    """Bytes of a stored entry."""
    if isinstance(entry, _Sparse):
        return int(entry.where.nbytes + entry.values.nbytes) + 64
    return int(entry.nbytes)
