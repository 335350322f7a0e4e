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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .grammar_builder import GrammarBuilder

__all__ = ["CHAIN_MAX", "repeat"]

CHAIN_MAX = 16
"""Bounds up to which counts are written one rule per count (the fewest chart items)."""


def repeat(b: GrammarBuilder, unit: tuple[str, ...], lo: int, hi: int | None) -> str:
    """A new nonterminal deriving ``unit`` (a sequence of symbols) ``lo`` to ``hi`` times
    (``hi=None``: no upper bound), unambiguously, in ``O(log hi)`` rules (see the module
    docs). Requires ``0 <= lo`` and ``hi is None or lo <= hi``."""
    if lo < 0 or (hi is not None and hi < lo):
        raise ValueError(f"repeat({lo}, {hi}): not a count range")
    return _Repeat(b, unit).of(lo, hi)


class _Repeat:
    """The shared ``E_j`` and ``A_j`` of one unit, built on demand."""

    def __init__(self, b: GrammarBuilder, unit: tuple[str, ...]) -> None:
        self.b = b
        self.unit = unit
        self._exact: dict[int, tuple[str, ...]] = {0: unit}
        self._below: dict[int, str] = {}

    def of(self, lo: int, hi: int | None) -> str:
        b = self.b
        name = b.fresh("rep")
        if hi is None:
            loop = b.fresh("more")
            b.add(loop)
            b.add(loop, *self.unit, loop)
            b.add(name, *self.exactly(lo), loop)
        elif hi - lo == 0:
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
