"""Character classes computed by ``re``: the case-insensitive sets read from the
case-related characters only (``charset.python_class_ignorecase``) equal ``re``'s answer
over every code point, and the text of every code point is built right."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.grammar.regex.charset import CASED_BELOW, MAX_CODE_POINT, case_related, python_class
from corral.grammar.regex.python_syntax import _Translator

try:  # Python 3.11+
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse  # type: ignore[no-redef]

# characters whose case behaviour is irregular: no simple one-to-one upper/lower pair,
# several characters folding together, titlecase, or case fixes in `re`
TRICKY = "ßẞſKkİıiIΣσςǅǄǆͅΙιΐΰﬀµΜμÅåÅθϑΘϴ"


def _set_of(pattern: str) -> object:
    """The set corral's regex translator gives the one-character ``pattern``."""
    parsed = sre_parse.parse(pattern, 0)
    (op, av) = parsed.data[0]
    flags = parsed.state.flags
    while op is sre_parse.SUBPATTERN:
        _g, add, dele, sub = av
        flags = (flags | add) & ~dele
        (op, av) = next(iter(sub))
    return _Translator(pattern, "").char_class(op, av, flags)


def _scan(pattern: str) -> object:
    """``re``'s set for ``pattern``, found by scanning every code point."""
    return python_class(pattern)


PATTERNS = [
    *(f"(?i:{c})" for c in "azAZ_09"),
    *(f"(?i:{c})" for c in TRICKY),
    *(f"(?i:[^{c}])" for c in "kKsß"),
    "(?i:[a-z])",
    "(?i:[^a-z])",
    "(?i:[A-Z0-9_-])",
    "(?i:[\\w])",
    "(?i:[^\\W\\d])",
    "(?i:[^\\s])",
    "(?i:\\d)",
    "(?i:[\u0100-\u017f])",
    "(?i:[\u0370-\u03ff])",
    "(?i:[\u10a0-\u10ff])",
    "(?i:[^\u0400-\u04ff])",
    "(?ia:[a-z])",
    "(?ia:k)",
    "(?ia:[^s])",
    "(?ia:[\\w])",
    "(?i:[" + TRICKY + "])",
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_case_insensitive_sets_equal_a_scan_of_every_code_point(pattern: str) -> None:
    assert _set_of(pattern) == _scan(pattern)


# code points where case matters, and some where it does not
_INTERESTING = sorted(
    set(case_related().code_points[::7]) | {ord(c) for c in TRICKY} | set(range(0x20, 0x80))  # type: ignore[union-attr]
)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(_INTERESTING), st.integers(0, 40)), min_size=1, max_size=4),
    st.booleans(),
)
def test_random_case_insensitive_classes_equal_a_scan(
    ranges: list[tuple[int, int]], negate: bool
) -> None:
    body = "".join(f"\\U{lo:08x}-\\U{min(lo + n, 0x10FFFF):08x}" for lo, n in ranges)
    pattern = f"(?i:[{'^' if negate else ''}{body}])"
    re.compile(pattern)
    assert _set_of(pattern) == _scan(pattern)


def test_the_text_of_every_code_point_is_every_scalar_value_in_order() -> None:
    from corral.grammar.regex.charset import _all_code_points

    expected = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))
    assert _all_code_points() == expected


def test_no_cased_character_past_the_scanned_planes() -> None:
    """``case_related_points`` scans planes 0 and 1 only: every code point this Python's ``re``
    calls cased, or gives another lowercase, lies below :data:`CASED_BELOW`."""
    import _sre

    past = range(CASED_BELOW, MAX_CODE_POINT + 1)
    assert not any(map(_sre.unicode_iscased, past))
    assert all(_sre.unicode_tolower(c) == c for c in past)
