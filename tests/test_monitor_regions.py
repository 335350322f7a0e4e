"""Segment grammars of monitors: the text before a trigger, and a region of what a callback
allowed followed by free text (``corral/monitors/region.py``), on a real vocabulary."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.tokenizers import load_vocab

import corral
from corral.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedFeatureError
from corral.monitors.region import (
    EmptyRegionError,
    outside_grammar,
    region_constraint,
    region_grammar,
)
from corral.monitors.trigger import trigger_automaton

DOT = trigger_automaton([r"\."])
NAMES = ["append", "app", "extend", "insert"]


def _reads(g: corral.Grammar, text: str) -> bool:
    m = corral.compile(g, load_vocab("llama3")).matcher()
    return m.consume_bytes(text.encode())


def test_outside_text_stops_at_the_trigger_and_no_token_crosses_it() -> None:
    v = load_vocab("llama3")
    m = corral.compile(outside_grammar(DOT), v).matcher()
    assert m.consume_bytes(b"x = obj") and m.is_accepting()
    allowed = set(m.allowed_token_ids().tolist())
    crossing = [t for t in range(v.size) if v.token_bytes(t)[:-1].count(b".")]
    assert crossing and not allowed & set(crossing)  # ".append", "x.y" end past a dot
    ending = [t for t in range(v.size) if v.token_bytes(t) in (b".", b"x.")]
    assert set(ending) <= allowed
    assert m.consume_bytes(b".") and m.allowed_token_ids().tolist() == list(v.eos_token_ids)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sets(st.text(alphabet="abé_", min_size=1, max_size=4), min_size=1, max_size=8),
        min_size=2,
        max_size=2,
    )
)
@example([{"a"}, {"b"}])  # one shape, other bytes
@example([{"ab", "b"}, {"ab", "a"}])
@example([{"ab", "a"}, {"ab", "a_"}])  # other accepting states
def test_names_are_one_grammar_exactly_when_they_are_one_set(sets) -> None:  # type: ignore[no-untyped-def]
    """The fingerprint of a region's grammar (which names it in the compile cache)
    tells any two sets of names apart, and only them."""
    a, b = (region_grammar(region_constraint(sorted(x)), DOT, "identifier") for x in sets)
    assert (a.fingerprint == b.fingerprint) == (sets[0] == sets[1])


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("append(x)", True),
        ("app", True),
        ("app(", True),
        ("appx", False),  # `app` ends an identifier only where no identifier byte follows
        ("appendix", False),
        ("app é", True),
        ("appé", False),  # non-ASCII continues an identifier
        ("extend.", True),  # the next trigger may follow at once
        ("pop()", False),
    ],
)
def test_names_end_where_an_identifier_ends(text: str, ok: bool) -> None:
    assert _reads(region_grammar(region_constraint(NAMES), DOT, "identifier"), text) == ok


def test_constraint_end_lets_any_byte_follow_the_longest_name() -> None:
    g = region_grammar(region_constraint(NAMES), DOT, "constraint")
    assert _reads(g, "appx")  # `app`, then text: `x` cannot continue a name
    assert not _reads(g, "apx")


def test_a_grammar_constrains_the_region_and_its_names_are_kept_apart() -> None:
    g = corral.Grammar.from_lark('start: MONITOR_TEXT "(" ")"\nMONITOR_TEXT: /[a-z]+/')
    region = region_grammar(region_constraint(g), DOT, "constraint")
    assert _reads(region, "abc() then free text")
    assert not _reads(region, "abc(x)")


def test_what_is_not_a_constraint_is_refused() -> None:
    with pytest.raises(EmptyRegionError):
        region_constraint([])
    for bad in ("append", b"append", 3, ["append", 3]):
        with pytest.raises(ArgumentTypeError):
            region_constraint(bad)
    with pytest.raises(InvalidArgumentError, match="not valid Unicode"):
        region_constraint(["append", "x\ud800"])  # a lone surrogate has no UTF-8 form
    assert region_constraint(None) is None


def test_the_same_names_in_any_order_are_one_grammar() -> None:
    """Names become their trie, numbered the same whatever the order the callback returned
    them in (repeats and non-ASCII names included), so a set returned again is found in
    the compile cache."""
    names = ["extend", "app", "é_x", "append", "insert", "app", "ab", "a"]
    grammars = [
        region_grammar(region_constraint(x), DOT, "identifier")
        for x in (names, sorted(names), reversed(names), set(names))
    ]
    assert len({g.fingerprint for g in grammars}) == 1
    assert region_constraint(names).count == 7
    m = corral.compile(grammars[0], load_vocab("llama3")).matcher()
    for text in ("a", "ab", "app", "append", "é_x", "extend", "", "abc", "é", "appen"):
        f = m.fork()
        whole = f.consume_bytes(text.encode()) and f.is_accepting()
        assert whole == (text in names), text


@pytest.mark.parametrize(
    "schema",
    [{"type": "integer"}, {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}],
)
def test_a_grammar_with_a_final_check_is_refused(schema: dict) -> None:  # type: ignore[type-arg]
    """A JSON Schema's grammar checks each complete value with the schema; a region is
    followed by more text, so the check has nothing to run on yet: refused, not dropped."""
    with pytest.raises(UnsupportedFeatureError, match="final check"):
        region_grammar(region_constraint(schema), DOT, "constraint")
