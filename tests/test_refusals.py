"""Inputs that must be refused cleanly: only corral's errors (with the place: a JSON
pointer, or a line and column) leave the front ends, whatever the input; nothing hangs,
nothing is taken as valid because a check could not run."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from support.tokenizers import load_vocab

import corral
from corral.errors import CompileBudgetError, GrammarError
from corral.grammar.json_schema.load import MAX_SCHEMA_DEPTH, SchemaError
from corral.grammar.json_schema.validation import FinalCheckWarning


def nested(kind: str, levels: int) -> dict[str, Any]:
    s: dict[str, Any] = {"type": "integer"}
    for _ in range(levels):
        if kind == "properties":
            s = {"type": "object", "properties": {"a": s}}
        elif kind == "anyOf":
            s = {"anyOf": [s, {"type": "null"}]}
        elif kind == "not":
            s = {"not": s}
        else:
            s = {"type": "array", "items": s}
    return s


@pytest.mark.parametrize("kind", ["properties", "anyOf", "not", "items"])
def test_deep_schemas_are_a_budget_error_naming_the_place(kind: str) -> None:
    with pytest.raises(CompileBudgetError, match=f"deeper than {MAX_SCHEMA_DEPTH} levels") as e:
        corral.Grammar.from_json_schema(nested(kind, 3000))
    assert str(e.value).startswith(f"/{kind}/")
    corral.Grammar.from_json_schema(nested(kind, 30))  # as deep as real schemas go: fine


def test_deep_texts_are_budget_errors() -> None:
    with pytest.raises(CompileBudgetError):
        corral.Grammar.from_json_schema("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CompileBudgetError, match="Lark grammar nests too deeply"):
        corral.Grammar.from_lark("start: " + "(" * 3000 + '"a"' + ")" * 3000)
    with pytest.raises(CompileBudgetError, match="regular expression nests too deeply"):
        corral.Grammar.from_regex("(" * 3000 + "a" + ")" * 3000)


def test_a_long_ref_chain_is_a_budget_error_not_an_unresolvable_ref() -> None:
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(5000)}
    defs["d5000"] = {"type": "integer"}
    with pytest.raises(CompileBudgetError, match=r"^/\$defs/d\d+: .*nest too deeply"):
        corral.Grammar.from_json_schema({"$defs": defs, "$ref": "#/$defs/d0"})
    short = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(50)}
    short["d50"] = {"type": "integer"}
    g = corral.Grammar.from_json_schema({"$defs": short, "$ref": "#/$defs/d0"})
    assert g.final_check is not None and g.final_check(b"7")


def test_a_schema_that_refers_to_its_own_negation_compiles() -> None:
    """Validating its enum values recurses without end (a Rust panic, a BaseException, in
    the reference library): the values are left to the final check, which refuses what
    it cannot decide."""
    g = corral.Grammar.from_json_schema({"enum": [1, 2], "not": {"$ref": "#"}})
    assert g.final_check is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FinalCheckWarning)
        assert not g.final_check(b"1")


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ('{"type": "number", "minimum": 1e400}', "/minimum"),
        ({"enum": [1, float("nan")]}, "/enum/1"),
        ({"const": float("-inf")}, "/const"),
        ({"properties": {"a": {"const": "\ud800"}}}, "/properties/a/const"),
        ({"properties": {"\udfff": {}}}, "/properties"),
    ],
)
def test_values_that_are_not_json_are_schema_errors(schema: Any, pointer: str) -> None:
    with pytest.raises(SchemaError) as e:
        corral.Grammar.from_json_schema(schema)
    assert e.value.pointer == pointer


def test_schema_text_that_is_not_json_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="not UTF-8"):
        corral.Grammar.from_json_schema(b'{"type": "\xff"}')
    with pytest.raises(SchemaError, match="NaN is not a JSON value"):
        corral.Grammar.from_json_schema('{"const": NaN}')
    # a repeated key: json.loads keeps the last, which the author may not have meant
    with pytest.raises(SchemaError, match="'type' twice"):
        corral.Grammar.from_json_schema('{"properties": {"a": {"type": "string", "type": 1}}}')
    assert corral.Grammar.from_json_schema('{"a": {"type": 1}, "b": {"type": 2}}') is not None


def test_huge_counts_are_budget_errors() -> None:
    with pytest.raises(CompileBudgetError, match=r"^/minItems: "):
        corral.Grammar.from_json_schema({"type": "array", "minItems": 10**30})


def test_a_missing_import_file_is_a_located_grammar_error() -> None:
    with pytest.raises(GrammarError) as e:
        corral.Grammar.from_lark("%import .nonexistent (a)\nstart: a")
    assert e.value.line == 1 and "nonexistent" in str(e.value)


def test_the_end_check_refuses_what_it_cannot_compile() -> None:
    """A named group (``(?<x>...)``, ECMA-262) and uniqueItems: the end check must refuse
    a repeated item, not count a failure to check as valid."""
    vocab = load_vocab("gpt2")
    schema = {
        "type": "array",
        "items": {"type": "string", "pattern": "^(?<x>[ab])$"},
        "uniqueItems": True,
    }
    m = corral.compile(schema, vocab).matcher()
    assert m.consume_bytes(b'["a","a"]') and not m.is_accepting()
    m = corral.compile(schema, vocab).matcher()
    assert m.consume_bytes(b'["a","b"]') and m.is_accepting()


def test_repeated_names_fail_the_end_check() -> None:
    g = corral.Grammar.from_json_schema(
        {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 1}
    )
    assert g.final_check is not None
    assert not g.final_check(b'{"b": 1, "b": 2}')
    assert g.final_check(b'{"b": 1}')


def test_integers_beyond_a_double_are_json_numbers_like_any_other() -> None:
    g = corral.Grammar.from_json_schema({"enum": [10**400, 1.5]})
    assert g.final_check is None or g.final_check(str(10**400).encode())
    m = corral.compile(g, load_vocab("gpt2")).matcher()
    assert m.consume_bytes(str(10**400).encode()) and m.is_accepting()
    with pytest.raises(CompileBudgetError, match=r"^/minContains: "):
        corral.Grammar.from_json_schema(
            {"type": "array", "contains": {"type": "integer"}, "minContains": 10**30}
        )
