"""Counted repetition: a unit ``lo`` to ``hi`` times in rules logarithmic in the bounds.

A chain of one nonterminal per count (``c_i -> ε | unit c_{i+1}``) is the grammar with the
fewest Earley items per position, but it costs two rules per count, and every later stage
(normalisation, the tables, the follow sets) pays for each: ``maxItems: 1000`` was 2,000
rules, two thirds of the compile of the schemas that have a few such arrays. Beyond
:data:`CHAIN_MAX` counts the repetition is written in binary instead:

- ``E_j``, exactly ``2^j`` units: ``E_0 = unit``, ``E_j -> E_{j-1} E_{j-1}``;
- ``A_j``, at most ``2^j - 1`` units: ``A_0 -> ε``, ``A_j -> A_{j-1} | E_{j-1} A_{j-1}``
  (fewer than ``2^{j-1}`` units match only the first alternative, more only the second);
- ``R(m)``, at most ``m`` units: ``A_j`` when ``m = 2^j - 1``, else, with ``2^k`` the
  highest power of two not above ``m``, ``R(m) -> A_k | E_k R(m - 2^k)``;
- exactly ``lo`` units: the ``E_j`` of the bits of ``lo``, highest first.

Every one of these grammars is unambiguous (the alternatives split on the count), so an
Earley parse keeps one derivation per count; an Earley set holds ``O(log² m)`` items of
the repetition where the chain holds one or two. The language is the same, and the
masks with it.

:class:`HitCounts` writes the same blocks for two units, an item and a *hit* (an array's
item that satisfies ``contains``), each block split by its class: how many hits it
holds, counted up to the fewest required (``minContains``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .grammar_builder import GrammarBuilder

__all__ = ["CHAIN_MAX", "HitCounts", "Repeat", "repeat"]

CHAIN_MAX = 16
"""Bounds up to which counts are written one rule per count (the fewest chart items)."""


def repeat(b: GrammarBuilder, unit: tuple[str, ...], lo: int, hi: int | None) -> str:
    """A new nonterminal deriving ``unit`` (a sequence of symbols) ``lo`` to ``hi`` times
    (``hi=None``: no upper bound), unambiguously, in ``O(log hi)`` rules (see the module
    docs). Requires ``0 <= lo`` and ``hi is None or lo <= hi``."""
    return Repeat(b, unit).of(lo, hi)


class Repeat:
    """Counted repetitions of one unit (:meth:`of`) sharing their blocks (``E_j``,
    ``A_j``), which are built on demand: for a grammar that needs several count ranges
    of the same unit."""

    def __init__(self, b: GrammarBuilder, unit: tuple[str, ...]) -> None:
        self.b = b
        self.unit = unit
        self._exact: dict[int, tuple[str, ...]] = {0: unit}
        self._below: dict[int, str] = {}

    def of(self, lo: int, hi: int | None) -> str:
        """A new nonterminal deriving the unit ``lo`` to ``hi`` times (as :func:`repeat`)."""
        if lo < 0 or (hi is not None and hi < lo):
            raise ValueError(f"repeat({lo}, {hi}): not a count range")
        b = self.b
        if hi is None:
            loop = b.fresh("more")
            b.add(loop)
            b.add(loop, *self.unit, loop)
            if not lo:
                return loop
            name = b.fresh("rep")
            b.add(name, *self.exactly(lo), loop)
            return name
        name = b.fresh("rep")
        if hi - lo == 0:
            b.add(name, *self.exactly(lo))
        else:
            b.add(name, *self.exactly(lo), self.at_most(hi - lo))
        return name

    def exactly(self, n: int) -> tuple[str, ...]:
        """The symbols of exactly ``n`` units: ``n`` copies up to :data:`CHAIN_MAX`,
        else the ``E_j`` of ``n``'s bits."""
        if n <= CHAIN_MAX:
            return self.unit * n
        out: tuple[str, ...] = ()
        for j in range(n.bit_length() - 1, -1, -1):
            if n >> j & 1:
                out += self._e(j)
        return out

    def at_most(self, m: int) -> str:
        """A nonterminal of ``0`` to ``m`` units (``m >= 0``)."""
        b = self.b
        if m <= CHAIN_MAX:
            names = [b.fresh("c") for _ in range(m + 1)]
            for i in range(m + 1):
                b.add(names[i])
                if i < m:
                    b.add(names[i], *self.unit, names[i + 1])
            return names[0]
        if (m + 1) & m == 0:  # m = 2^j - 1
            return self._a(m.bit_length())
        k = m.bit_length() - 1
        name = b.fresh("upto")
        b.add(name, self._a(k))
        b.add(name, *self._e(k), self.at_most(m - (1 << k)))
        return name

    def _e(self, j: int) -> tuple[str, ...]:
        """``E_j``: exactly ``2^j`` units (``E_0`` is the unit's symbols themselves)."""
        got = self._exact.get(j)
        if got is None:
            half = self._e(j - 1)
            name = self.b.fresh("exact")
            self.b.add(name, *half, *half)
            got = self._exact[j] = (name,)
        return got

    def _a(self, j: int) -> str:
        """``A_j``: at most ``2^j - 1`` units."""
        got = self._below.get(j)
        if got is None:
            got = self.b.fresh("below")
            if j:
                prev = self._a(j - 1)
                self.b.add(got, prev)
                self.b.add(got, *self._e(j - 1), prev)
            else:
                self.b.add(got)
            self._below[j] = got
        return got


_Syms = tuple[str, ...] | None  # the symbols of a block, or None where it is empty


class HitCounts:
    """Counts of two units, ``item`` and ``hit``, at least so many of them ``hit``: an
    array's items under ``contains``, in rules ``O(log hi x least²)`` (:meth:`of`).

    The blocks of :func:`repeat` (``E_j``, ``A_j``, at most ``m``, exactly ``n``) are each
    split by their *class*, the number of ``hit`` units in them counted up to ``least``
    (the class of two blocks read one after the other is the sum, capped at ``least``).
    Where ``item`` and ``hit`` share no string, every grammar written is unambiguous. The
    blocks are built on demand and shared by every :meth:`of`."""

    def __init__(
        self, b: GrammarBuilder, item: tuple[str, ...], hit: tuple[str, ...], least: int
    ) -> None:
        self.b = b
        self.item = item
        self.hit = hit
        self.least = least
        self._memo: dict[tuple[str, int, int], _Syms] = {}

    def _pairs(self, h: int) -> list[tuple[int, int]]:
        """The classes ``(h1, h2)`` of two blocks whose concatenation has class ``h``."""
        top = self.least
        return [(a, c) for a in range(top + 1) for c in range(top + 1) if min(a + c, top) == h]

    def _after_one(self, h: int) -> list[tuple[tuple[str, ...], int]]:
        """``(unit, class of the rest)`` for a block of class ``h`` that starts with one
        unit."""
        out: list[tuple[tuple[str, ...], int]] = [(self.item, h)]
        out += [(self.hit, r) for r in range(self.least + 1) if min(r + 1, self.least) == h]
        return out

    def _rule(self, key: tuple[str, int, int], alts: list[tuple[str, ...]]) -> _Syms:
        """Memoise ``key`` as a new nonterminal with ``alts`` (``None`` if there are
        none)."""
        if not alts:
            self._memo[key] = None
            return None
        name = self.b.fresh(key[0])
        for alt in alts:
            self.b.add(name, *alt)
        self._memo[key] = (name,)
        return (name,)

    def _seq(self, *parts: _Syms) -> tuple[str, ...] | None:
        out: tuple[str, ...] = ()
        for p in parts:
            if p is None:
                return None
            out += p
        return out

    def _alts(self, *cands: tuple[str, ...] | None) -> list[tuple[str, ...]]:
        return [c for c in cands if c is not None]

    def exact(self, j: int, h: int) -> _Syms:
        """``2^j`` units of class ``h``."""
        key = ("hexact", j, h)
        if key in self._memo:
            return self._memo[key]
        if j == 0:  # one unit: its symbols themselves where only one unit has class h
            alts = [u for u, r in self._after_one(h) if r == 0]
            if len(alts) == 1:
                self._memo[key] = alts[0]
                return alts[0]
            return self._rule(key, alts)
        cands = [self._seq(self.exact(j - 1, a), self.exact(j - 1, c)) for a, c in self._pairs(h)]
        return self._rule(key, self._alts(*cands))

    def below(self, j: int, h: int) -> _Syms:
        """At most ``2^j - 1`` units of class ``h``."""
        key = ("hbelow", j, h)
        if key in self._memo:
            return self._memo[key]
        if j == 0:
            return self._rule(key, [()] if h == 0 else [])
        cands = [self.below(j - 1, h)]
        cands += [self._seq(self.exact(j - 1, a), self.below(j - 1, c)) for a, c in self._pairs(h)]
        return self._rule(key, self._alts(*cands))

    def at_most(self, m: int, h: int) -> _Syms:
        """At most ``m`` units of class ``h``."""
        key = ("hupto", m, h)
        if key in self._memo:
            return self._memo[key]
        if m <= CHAIN_MAX:
            cands: list[tuple[str, ...] | None] = [() if h == 0 else None]
            if m:
                cands += [self._seq(u, self.at_most(m - 1, r)) for u, r in self._after_one(h)]
            return self._rule(key, self._alts(*cands))
        if (m + 1) & m == 0:
            got = self.below(m.bit_length(), h)
            self._memo[key] = got
            return got
        k = m.bit_length() - 1
        cands = [self.below(k, h)]
        cands += [
            self._seq(self.exact(k, a), self.at_most(m - (1 << k), c)) for a, c in self._pairs(h)
        ]
        return self._rule(key, self._alts(*cands))

    def exactly(self, n: int, h: int) -> _Syms:
        """Exactly ``n`` units of class ``h``."""
        key = ("hcount", n, h)
        if key in self._memo:
            return self._memo[key]
        if n == 0:
            got: _Syms = () if h == 0 else None
            self._memo[key] = got
            return got
        if n <= CHAIN_MAX:
            cands = [self._seq(u, self.exactly(n - 1, r)) for u, r in self._after_one(h)]
            return self._rule(key, self._alts(*cands))
        k = n.bit_length() - 1
        cands = [
            self._seq(self.exact(k, a), self.exactly(n - (1 << k), c)) for a, c in self._pairs(h)
        ]
        return self._rule(key, self._alts(*cands))

    def any_number(self, h: int) -> _Syms:
        """Any number of units, of class ``h``, read left to right (``M_h -> M_h item |
        M_h' hit``): every item of the repetition keeps the origin where it starts. Read
        right to left, each hit that may be the one counted would start its own rest of
        the repetition, one Earley item per hit so far, when every item is a hit."""
        key = ("hmore", 0, h)
        if key in self._memo:
            return self._memo[key]
        name = self.b.fresh("hmore")
        self._memo[key] = (name,)
        if h == 0:
            self.b.add(name)
        self.b.add(name, name, *self.item)
        for r in range(self.least + 1):
            if min(r + 1, self.least) == h:
                before = self.any_number(r) if r != h else (name,)
                assert before is not None
                self.b.add(name, *before, *self.hit)
        return (name,)

    def of(self, lo: int, hi: int | None, need: int | None = None) -> str:
        """A new nonterminal of ``lo`` to ``hi`` units, at least ``need`` (default and at
        most ``least``) of them ``hit``."""
        need = self.least if need is None else need
        if lo < 0 or (hi is not None and hi < lo) or not 0 <= need <= self.least:
            raise ValueError(f"{lo} to {hi} units, {need} of {self.least} hits: not a range")
        name = self.b.fresh("hrep")
        top = self.least
        for h in range(need, top + 1):
            for a, c in self._pairs(h):
                rest = self.any_number(c) if hi is None else self.at_most(hi - lo, c)
                alt = self._seq(self.exactly(lo, a), rest)
                if alt is not None:
                    self.b.add(name, *alt)
        return name
