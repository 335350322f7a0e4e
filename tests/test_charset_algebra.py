"""The set algebra of ``grammar/regex/charset.py``'s :class:`CharSet`, against Python sets
of code points (on a small universe, plus the ends of the code space)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.grammar.regex.charset import MAX_CODE_POINT, SURROGATES, CharSet

_EDGES = [0, 1, 0xD7FF, 0xE000, MAX_CODE_POINT - 1, MAX_CODE_POINT]
_points = st.one_of(st.integers(0, 300), st.sampled_from(_EDGES))
_ranges = st.lists(
    st.tuples(_points, st.integers(0, 40)).map(lambda t: (t[0], min(t[0] + t[1], MAX_CODE_POINT))),
    max_size=8,
)


def _probe(a: CharSet, b: CharSet) -> set[int]:
    """The code points where the answer can change: every range end of both, and beside."""
    pts = {0, MAX_CODE_POINT, *SURROGATES}
    for lo, hi in a.ranges + b.ranges:
        pts |= {lo - 1, lo, lo + 1, hi - 1, hi, hi + 1}
    return {p for p in pts if 0 <= p <= MAX_CODE_POINT}


@given(_ranges, _ranges)
@settings(max_examples=500, deadline=None)
def test_difference_union_intersection_complement(ra: list, rb: list) -> None:  # type: ignore[type-arg]
    a, b = CharSet(ra), CharSet(rb)
    d, u, i = a.difference(b), a.union(b), a.intersection(b)
    for p in _probe(a, b):
        assert (p in d) == (p in a and p not in b), hex(p)
        assert (p in u) == (p in a or p in b), hex(p)
        assert (p in i) == (p in a and p in b), hex(p)
        assert (p in a.complement()) == (p not in a and not SURROGATES[0] <= p <= SURROGATES[1])
    assert d == a.intersection(b.complement())
    assert d.union(i) == a


@given(st.lists(_points, max_size=30))
@settings(max_examples=300, deadline=None)
def test_of_points_is_the_set_of_the_points(points: list[int]) -> None:
    cs = CharSet.of_points(points)
    assert cs == CharSet((c, c) for c in points)
