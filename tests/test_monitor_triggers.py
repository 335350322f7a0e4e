"""The trigger automaton against Python's ``re``: a trigger fires at the first position
where the text so far ends with a full match of it; the first monitor wins a tie; no
text runs past a fired trigger; invalid UTF-8 cannot be read."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.errors import InvalidArgumentError
from corral.monitors.trigger import search_dfa, trigger_automaton

TRIGGER_SETS = [
    [r"\."],
    [r"(?<![\w.])[A-Za-z_]\w*\."],
    [r"^import "],
    [r"\bfrom\s+\w+\s+import\s", r"\."],
    [r"(?i)select\b", r"\w+\("],
    [r"ab", r"b"],  # `b` fires inside `ab` too: the first monitor wins the tie
    [r"é\.$"],
]


def _reference(patterns: list[str], text: str) -> tuple[int, int] | None:
    """(character position, monitor) of the first firing, or None."""
    rx = [
        re.compile(rf"(?s:.*)(?:{p})")
        if not p.startswith("(?i)")
        else re.compile(rf"(?i)(?s:.*)(?:{p[4:]})")
        for p in patterns
    ]
    for end in range(1, len(text) + 1):
        for i, r in enumerate(rx):
            if r.fullmatch(text[:end]):
                return end, i
    return None


@pytest.mark.parametrize("patterns", TRIGGER_SETS, ids=lambda p: "|".join(p))
@given(text=st.text(alphabet="ab.é_ (\nSELECTimportfrsx", max_size=24))
@settings(max_examples=150, deadline=None)
def test_fires_where_re_first_matches(patterns: list[str], text: str) -> None:
    aut = _automaton(tuple(patterns))
    ref = _reference(patterns, text)
    state = 0
    for pos, ch in enumerate(text, start=1):
        state = aut.run(state, ch.encode())
        if ref is not None and pos == ref[0]:
            assert state >= 0 and int(aut.fired[state]) == ref[1], (text, pos)
            assert aut.run(state, text[pos : pos + 1].encode() or b"x") == -1
            return
        assert state >= 0 and int(aut.fired[state]) == -1, (text, pos)
    assert ref is None


_CACHE: dict[tuple[str, ...], object] = {}


def _automaton(patterns: tuple[str, ...]):  # type: ignore[no-untyped-def]
    if patterns not in _CACHE:
        _CACHE[patterns] = trigger_automaton(list(patterns))
    return _CACHE[patterns]


def test_every_state_accepts_and_invalid_utf8_is_refused() -> None:
    aut = trigger_automaton([r"\."])
    assert aut.dfa.accept.all()
    assert aut.run(0, b"\xff") == -1
    assert aut.run(0, b"\xc3") >= 0 and aut.run(0, b"\xc3(") == -1


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("", "non-empty"), (r"x*", "empty string"), (r"(", "trigger '('"), (r"a\1", "trigger")],
)
def test_bad_triggers_are_refused_by_name(pattern: str, why: str) -> None:
    with pytest.raises(InvalidArgumentError, match=re.escape(why)):
        search_dfa(pattern)
