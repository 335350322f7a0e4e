"""Sets of Unicode code points as sorted, disjoint, inclusive ranges.

A :class:`CharSet` is an immutable tuple of ``(lo, hi)`` pairs (inclusive, ``lo <= hi``),
sorted and with no two ranges overlapping or touching. The universe is every Unicode
scalar value: ``0..0x10FFFF`` without the surrogates ``0xD800..0xDFFF``, which UTF-8 text
cannot contain.

Python-``re`` semantics for the character classes that depend on Unicode tables (``\\d``,
``\\w``, ``\\s`` and case-insensitive matching) are computed by running Python's own ``re``
over the string of all code points once, so they agree with ``re`` exactly.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)

Range = tuple[int, int]


class CharSet:
    """An immutable set of code points stored as sorted disjoint inclusive ranges."""

    __slots__ = ("_hash", "_lows", "ranges")

    def __init__(self, ranges: Iterable[Range] = ()) -> None:
        self.ranges: tuple[Range, ...] = _normalize(ranges)
        self._lows = [lo for lo, _ in self.ranges]
        self._hash = hash(self.ranges)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def of(cls, *chars: str | int) -> CharSet:
        cps = [c if isinstance(c, int) else ord(c) for c in chars]
        return cls((c, c) for c in cps)

    @classmethod
    def of_points(cls, points: Iterable[int]) -> CharSet:
        """The set of the code points ``points`` (any order, repeats allowed), its ranges
        found from the sorted points in one pass."""
        ranges: list[list[int]] = []
        for c in sorted(points):
            if ranges and c <= ranges[-1][1] + 1:
                ranges[-1][1] = c
            else:
                ranges.append([c, c])
        return cls((lo, hi) for lo, hi in ranges)

    @classmethod
    def universe(cls) -> CharSet:
        return UNIVERSE

    # -- queries ------------------------------------------------------------------------
    def __contains__(self, cp: int) -> bool:
        i = bisect.bisect_right(self._lows, cp) - 1
        return i >= 0 and self.ranges[i][1] >= cp

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharSet) and self.ranges == other.ranges

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        parts = [f"{lo:#x}" if lo == hi else f"{lo:#x}-{hi:#x}" for lo, hi in self.ranges[:8]]
        more = "" if len(self.ranges) <= 8 else f", ... ({len(self.ranges)} ranges)"
        return f"CharSet({', '.join(parts)}{more})"

    def size(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.ranges)

    # -- algebra ------------------------------------------------------------------------
    def union(self, other: CharSet) -> CharSet:
        return CharSet(self.ranges + other.ranges)

    def complement(self) -> CharSet:
        out: list[Range] = []
        nxt = 0
        for lo, hi in self.ranges:
            if lo > nxt:
                out.append((nxt, lo - 1))
            nxt = hi + 1
        if nxt <= MAX_CODE_POINT:
            out.append((nxt, MAX_CODE_POINT))
        return CharSet(out)

    def intersection(self, other: CharSet) -> CharSet:
        out: list[Range] = []
        a, b = self.ranges, other.ranges
        i = j = 0
        while i < len(a) and j < len(b):
            lo = max(a[i][0], b[j][0])
            hi = min(a[i][1], b[j][1])
            if lo <= hi:
                out.append((lo, hi))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return CharSet(out)

    def difference(self, other: CharSet) -> CharSet:
        """The code points of ``self`` not in ``other``: each range of ``self`` cut by the
        ranges of ``other`` it overlaps, found by bisection (a small set minus a large one
        costs the small one's size, not the large one's)."""
        b = other.ranges
        if not self.ranges or not b:
            return self
        out: list[Range] = []
        for lo, hi in self.ranges:
            j = bisect.bisect_right(other._lows, lo) - 1
            if j < 0 or b[j][1] < lo:
                j += 1
            cur = lo
            while j < len(b) and b[j][0] <= hi:
                if b[j][0] > cur:
                    out.append((cur, b[j][0] - 1))
                cur = b[j][1] + 1
                if cur > hi:
                    break
                j += 1
            if cur <= hi:
                out.append((cur, hi))
        return CharSet(out)


def _normalize(ranges: Iterable[Range]) -> tuple[Range, ...]:
    """Sort, merge touching ranges, and remove the surrogate block."""
    rs = sorted((int(lo), int(hi)) for lo, hi in ranges)
    merged: list[list[int]] = []
    for lo, hi in rs:
        if lo > hi:
            raise ValueError(f"bad range {lo:#x}-{hi:#x}")
        if lo < 0 or hi > MAX_CODE_POINT:
            raise ValueError(f"code point out of range: {lo:#x}-{hi:#x}")
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    out: list[Range] = []
    s_lo, s_hi = SURROGATES
    for lo, hi in merged:
        if hi < s_lo or lo > s_hi:
            out.append((lo, hi))
            continue
        if lo < s_lo:
            out.append((lo, s_lo - 1))
        if hi > s_hi:
            out.append((s_hi + 1, hi))
    return tuple(out)


UNIVERSE = CharSet([(0, MAX_CODE_POINT)])
EMPTY = CharSet()
NEWLINE = CharSet.of("\n")


# -- Python `re` semantics, computed by `re` itself ----------------------------------------


@functools.lru_cache(maxsize=1)
def _all_code_points() -> str:
    """Every Unicode scalar value, in order, as one string (about 1.1M characters).

    Decoded from UTF-32 in one call: 15x faster than joining ``chr`` of each.
    """
    import numpy as np

    cps = np.concatenate(
        [np.arange(0xD800, dtype="<u4"), np.arange(0xE000, MAX_CODE_POINT + 1, dtype="<u4")]
    )
    return cps.tobytes().decode("utf-32-le")


def _index_to_cp(i: int) -> int:
    return i if i < 0xD800 else i + 0x800


@functools.lru_cache(maxsize=2048)
def python_class(source: str) -> CharSet:
    """The exact set of code points that the one-character Python regex ``source`` matches.

    ``source`` must match exactly one character (a literal, a class, or an escape such as
    ``\\w``) and may carry inline flags, e.g. ``(?i:[a-z])``. The set is found by letting
    ``re`` scan every code point, so it is exact for ``re``'s Unicode tables.
    """
    pat = re.compile(f"(?:{source})+")
    text = _all_code_points()
    return CharSet((_index_to_cp(m.start()), _index_to_cp(m.end() - 1)) for m in pat.finditer(text))


class CaseRelated:
    """The characters whose case-insensitive matching in ``re`` can differ from their
    plain matching (the cased ones, the lowercase of each, and ``re``'s case fixes), as
    :func:`python_class_ignorecase` asks ``re`` about them: their code points in order,
    the string of them, and their set. Compared and hashed by identity (one per
    process)."""

    __slots__ = ("chars", "code_points", "text")

    def __init__(self, chars: CharSet) -> None:
        self.chars = chars
        self.code_points = tuple(c for lo, hi in chars.ranges for c in range(lo, hi + 1))
        self.text = "".join(map(chr, self.code_points))


@functools.lru_cache(maxsize=2048)
def python_class_ignorecase(source: str, plain: CharSet, related: CaseRelated | None) -> CharSet:
    """The set of :func:`python_class` for a case-insensitive ``source``, found without
    scanning every code point.

    ``source`` is a one-character pattern under ``re.IGNORECASE`` (e.g. ``(?i:[a-z_])``)
    and ``plain`` the set the same pattern matches without that flag. ``re`` matches a
    character ``d`` case-insensitively by comparing ``tolower(d)`` with the lowered
    members of the class (plus a few extra equivalences, ``re``'s case fixes), where
    ``tolower`` is ``re``'s own simple lowercase mapping. So if ``d`` is not cased
    (``tolower(d) == toupper(d) == d``), is the lowercase of no other character and is not
    among the fixes, ``d`` matches exactly when it matches without the flag. Only the few
    thousand other characters (``related``: :func:`case_related`, or the same read from
    disk) are given to ``re``; the rest come from ``plain``. Where this Python's ``re``
    lacks what that needs (``related`` is ``None``), every code point is scanned as
    :func:`python_class` does.
    """
    if related is None:
        return python_class(source)
    pat = re.compile(f"(?:{source})+")
    cps = related.code_points
    hits = [cps[i] for m in pat.finditer(related.text) for i in range(m.start(), m.end())]
    return plain.difference(related.chars).union(CharSet((c, c) for c in hits))


CASED_BELOW = 0x20000
"""Every cased character (one with a lowercase or uppercase other than itself) lies below
this: Unicode puts the scripts with case in planes 0 and 1 (the last cased letters,
Adlam's, end at U+1E943; planes 2 and 3 hold ideographs, 14 tags and selectors, 15 and 16
private use), so :func:`case_related_points` asks ``re`` about those planes only, an
eighth of the code points (``tests/test_charset_ignorecase.py`` checks every code point on
the running Python)."""


@functools.lru_cache(maxsize=1)
def case_related() -> CaseRelated | None:
    """The characters whose case-insensitive matching in ``re`` can differ from their
    plain matching (:class:`CaseRelated`), found by asking ``re``'s own tables about
    planes 0 and 1 (5-10 ms, once a process); ``None`` where this Python's ``re`` does not
    expose them."""
    points = case_related_points()
    return None if points is None else CaseRelated(CharSet.of_points(points))


def case_related_points() -> set[int] | None:
    """The code points of :func:`case_related`, computed; ``None`` where this Python's
    ``re`` does not expose what that needs."""
    try:
        import _sre

        iscased, tolower = _sre.unicode_iscased, _sre.unicode_tolower
    except (ImportError, AttributeError):  # pragma: no cover - CPython has both
        return None
    fixes = _case_fixes()
    if fixes is None:  # pragma: no cover - CPython 3.10 to 3.13 have them
        return None
    flags = bytes(map(iscased, range(CASED_BELOW)))
    cased = [m.start() for m in re.finditer(b"\x01", flags)]
    return set(cased) | {tolower(c) for c in cased} | fixes


def _case_fixes() -> set[int] | None:
    """Every character in ``re``'s table of extra case-insensitive equivalences."""
    table = None
    try:
        from re import _casefix  # type: ignore[attr-defined]  # Python 3.11+

        table = _casefix._EXTRA_CASES
    except (ImportError, AttributeError):
        try:
            import sre_compile

            table = sre_compile._ignorecase_fixes  # type: ignore[attr-defined]
        except (ImportError, AttributeError):
            return None
    out: set[int] = set()
    for k, vs in table.items():
        out.add(int(k))
        out.update(int(v) for v in vs)
    return out


def ascii_class(name: str) -> CharSet:
    """The ASCII meaning of ``digit``, ``word`` or ``space``.

    As in ``re.ASCII`` (and ECMA-262 for ``digit`` and ``word``).
    """
    if name == "digit":
        return CharSet([(0x30, 0x39)])
    if name == "word":
        return CharSet([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
    if name == "space":
        return CharSet([(0x09, 0x0D), (0x20, 0x20)])
    raise KeyError(name)


def to_class_source(cs: CharSet) -> str:
    """A Python regex character class matching exactly ``cs`` (used to feed ``re``)."""
    if not cs:
        return "[^\\x00-\\U0010ffff]"
    parts = []
    for lo, hi in cs.ranges:
        parts.append(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}")
    return "[" + "".join(parts) + "]"
