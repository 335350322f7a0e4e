"""Every CorralError that has a position carries it as ``.location`` (a ``Location``):
line/column/snippet for Lark and regex text, a JSON pointer for schemas. The older
attributes (``.line``, ``.column``, ``.snippet``, ``.pointer``) read it, and the messages
are the ones users have always seen."""

from __future__ import annotations

import pickle

import pytest

from corral.errors import (
    CorralError,
    GrammarError,
    Location,
    TokenRejectedError,
    UnsupportedFeatureError,
)
from corral.grammar.ir import Grammar
from corral.grammar.json_schema.load import SchemaError


def _caret_column(snippet: str) -> int:
    """The 1-based column of the caret line of a snippet."""
    return snippet.splitlines()[-1].index("^") + 1


def test_malformed_lark_grammar_is_located() -> None:
    with pytest.raises(GrammarError) as info:
        Grammar.from_lark('start: "a" | \n  | B ]\nB: "b"\n')
    loc = info.value.location
    assert isinstance(info.value, CorralError) and isinstance(loc, Location)
    assert (loc.line, loc.column, loc.pointer) == (2, 7, None)
    assert loc.snippet.splitlines()[0] == "  | B ]" and _caret_column(loc.snippet) == 7
    assert loc == "line 2, column 7"
    # the message names the place as before, then shows the snippet
    assert str(info.value).splitlines()[0].endswith("(line 2, column 7)")
    assert str(info.value).endswith(loc.snippet)
    assert (info.value.line, info.value.column, info.value.snippet) == (2, 7, loc.snippet)


def test_undefined_symbol_in_lark_is_located() -> None:
    with pytest.raises(GrammarError) as info:
        Grammar.from_lark('start: "a"\n  | "b" foo\n')
    loc = info.value.location
    assert loc is not None and (loc.line, loc.column) == (2, 9)
    assert loc.snippet.splitlines()[0] == '  | "b" foo'


def test_invalid_regex_is_located() -> None:
    with pytest.raises(GrammarError) as info:
        Grammar.from_regex("ab(c")
    loc = info.value.location
    assert isinstance(loc, Location) and loc.line is None
    assert loc.column == 3  # where Python's parser stopped: the unclosed group
    assert loc.snippet.splitlines() == ["ab(c", "  ^"]
    assert "missing )" in str(info.value) and "(line" not in str(info.value)


def test_invalid_regex_inside_a_lark_terminal_is_located_in_the_grammar() -> None:
    with pytest.raises(GrammarError) as info:
        Grammar.from_lark("start: A\nA: /a(/\n")
    loc = info.value.location
    assert loc is not None and loc.line == 2 and loc.column is not None
    assert "A: /a(/" in loc.snippet


def test_unsupported_lark_construct_is_located() -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        Grammar.from_lark('start: "x" A\nA: /(a)\\1/\n')
    loc = info.value.location
    assert loc.line == 2 and loc.column is not None
    assert loc.startswith("terminal A (line 2")
    assert f"at {loc}:" in str(info.value)


def test_unsupported_schema_keyword_at_a_nested_pointer() -> None:
    schema = {
        "type": "object",
        "properties": {"host": {"type": "string", "format": "idn-hostname"}},
    }
    with pytest.raises(UnsupportedFeatureError) as info:
        Grammar.from_json_schema(schema)
    loc = info.value.location
    assert loc.pointer == "/properties/host/format" and loc == "/properties/host/format"
    assert (loc.line, loc.column, loc.snippet) == (None, None, "")
    message = "unsupported: format 'idn-hostname' at /properties/host/format:"
    assert str(info.value).startswith(message)


def test_keyword_refused_without_final_check_names_its_pointer() -> None:
    schema = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
    }
    with pytest.raises(UnsupportedFeatureError) as info:
        Grammar.from_json_schema(schema, final_check=False)
    assert info.value.feature == "uniqueItems"
    assert info.value.location.pointer == "/properties/tags/uniqueItems"


def test_unresolvable_reference_names_its_pointer() -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        Grammar.from_json_schema({"properties": {"a": {"items": {"$ref": "#/$defs/gone"}}}})
    assert info.value.location.pointer == "/properties/a/items/$ref"


def test_invalid_pattern_in_a_schema_has_pointer_and_column() -> None:
    with pytest.raises(GrammarError) as info:
        Grammar.from_json_schema({"properties": {"code": {"type": "string", "pattern": "[a-z"}}})
    loc = info.value.location
    assert loc is not None and loc.pointer == "/properties/code/pattern"
    assert loc.column is not None and _caret_column(loc.snippet) == loc.column
    assert f"column {loc.column}" in str(info.value)


def test_invalid_schema_has_pointer_and_json_text_has_line() -> None:
    with pytest.raises(SchemaError) as info:
        Grammar.from_json_schema({"properties": {"a": {"type": "objekt"}}})
    loc = info.value.location
    assert loc is not None and loc.pointer == "/properties/a/type" == info.value.pointer
    assert loc.line is None and "(line" not in str(info.value)
    with pytest.raises(SchemaError) as info2:
        Grammar.from_json_schema('{\n  "type": "object",\n}')
    loc2 = info2.value.location
    assert loc2 is not None and (loc2.line, loc2.pointer) == (3, None)
    assert info2.value.pointer == "" and info2.value.line == 3


def test_errors_without_a_position_have_no_location() -> None:
    assert TokenRejectedError(7).location is None
    assert GrammarError("start symbol 'x' is not defined").location is None
    assert GrammarError("x").line is None and GrammarError("x").snippet == ""


def test_location_is_immutable_and_pickles_with_its_parts() -> None:
    loc = Location(line=3, column=5, snippet="abc\n    ^")
    assert loc == "line 3, column 5"
    with pytest.raises(AttributeError):
        loc.line = 4  # type: ignore[misc]
    back = pickle.loads(pickle.dumps(loc))
    assert (back, back.line, back.column, back.pointer, back.snippet) == (
        loc,
        3,
        5,
        None,
        "abc\n    ^",
    )


def test_location_and_line_column_are_exclusive() -> None:
    with pytest.raises(TypeError):
        GrammarError("x", line=1, location=Location(line=1, column=1))


def test_errors_pickle_with_their_message_and_attributes() -> None:
    """Errors cross process boundaries (worker pools) unchanged: same class, message,
    location and attributes (the default Exception pickling called ``cls(message)``,
    which wrapped a message built in ``__init__`` again)."""
    import corral
    from corral.errors import TokenRejectedError, UnsupportedFeatureError
    from corral.grammar.json_schema.load import SchemaError

    errors: list[Exception] = []
    for spec in ({"type": "string", "format": "idn-hostname"}, '{"type": "string",'):
        try:
            corral.grammar.json_schema.grammar_from_json_schema(spec, final_check=False)
        except (UnsupportedFeatureError, SchemaError) as e:
            errors.append(e)
    try:
        corral.Grammar.from_lark('start: "a" B')
    except corral.GrammarError as e:
        errors.append(e)
    errors.append(TokenRejectedError(7, "token 7 is not allowed"))
    assert len(errors) == 4
    for e in errors:
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e) and back.args == e.args
        assert vars(back) == vars(e)
        if getattr(e, "location", None) is not None:
            assert back.location.pointer == e.location.pointer
            assert back.location.line == e.location.line


# Lark errors whose own exception names no position: each is found in the grammar text.
LARK_UNPLACED = [
    ('start: "abc', (1, 8)),  # an unclosed string
    ('start "a"', (1, 7)),  # a missing colon
    ('_t{a, b}: a b\nstart: _t{"x"}', (2, 8)),  # template arity
    ('start: "b".."a"', (1, 8)),  # a reversed range
    ('start: "ab".."c"', (1, 8)),  # a range of strings
    ('start: "a"~5..2', (1, 12)),  # a reversed repeat
    ('A: ""\nstart: A', (1, 4)),  # an empty terminal
    ('%override nope: "a"\nstart: "a"', (1, 11)),
    ('%extend nope: "a"\nstart: "a"', (1, 9)),
    ('b: "x"\nA: b\nstart: A', (2, 1)),  # a rule inside a terminal
    ('start: "\\uZZZZ"', (1, 9)),  # an escape Python cannot read
    ('A{x}: x\nstart: A{"a"}', (1, 2)),  # a template terminal
    ("%import .nonexistent (a)\nstart: a", (1, 10)),  # a file that is not there
]


@pytest.mark.parametrize(("text", "place"), LARK_UNPLACED)
def test_every_lark_error_has_line_column_and_caret(text: str, place: tuple[int, int]) -> None:
    with pytest.raises(GrammarError) as info:
        Grammar.from_lark(text)
    loc = info.value.location
    assert loc is not None and (loc.line, loc.column) == place, str(info.value)
    assert _caret_column(loc.snippet) == place[1]
