"""Keywords a grammar cannot express in general, decided up front where they can be.

* Schemas that no value satisfies only through final-check keywords are refused at
  compile time (``EmptyLanguageError``), not left to dead-end during generation.
* Property counts, ``uniqueItems`` over a finite set of values, ``not``/``if`` on types
  are compiled exactly: the grammar accepts exactly what ``jsonschema`` accepts over
  enumerated documents, and random walks never reach a state with no allowed token.
* The grammar and the final check agree on exact decimal ``multipleOf``; a repeated name
  in an object is refused.
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import jsonschema
import numpy as np
import pytest
from support.tokenizers import load_tokenizer, load_vocab
from support.words import accepts as accepted

import corral
from corral import EmptyLanguageError, explain
from corral.grammar.json_schema import EXACT, FINAL_CHECK


@pytest.fixture(scope="module")
def llama3():  # type: ignore[no-untyped-def]
    return load_tokenizer("llama3"), load_vocab("llama3")


def status(schema: Any, keyword: str) -> str:
    found = [f.status for f in explain(schema).findings if f.keyword == keyword]
    assert found, keyword
    return FINAL_CHECK if FINAL_CHECK in found else found[0]


EMPTY = [
    {"not": {}},
    {"not": True},
    {"not": {"type": ["null", "boolean", "object", "array", "string", "number"]}},
    {"type": "string", "not": {"type": "string"}},
    {"type": "array", "contains": False},
    {"type": "array", "contains": {"not": {}}, "items": {"type": "integer"}},
    {"type": "array", "contains": {"type": "string"}, "minContains": 2, "maxContains": 1},
    {"type": "object", "minProperties": 3, "maxProperties": 1},
    {"type": "object", "required": ["a", "b"], "maxProperties": 1},
    {
        "type": "object",
        "properties": {"a": {}, "b": {}},
        "additionalProperties": False,
        "minProperties": 3,
    },
    {
        "type": "array",
        "prefixItems": [{"const": 1}, {"const": 1}],
        "minItems": 2,
        "uniqueItems": True,
    },
    {"type": "array", "items": {"type": "boolean"}, "minItems": 3, "uniqueItems": True},
    {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 3, "uniqueItems": True},
    {"oneOf": [{"type": "integer"}, {"type": "integer"}]},
    {"oneOf": [{"minimum": 2}, {"minimum": 2}, True, True]},
    {"if": {"minLength": 2}, "then": False, "else": False},
    {"if": {"type": "string"}, "then": False, "else": {"not": {}}},
    {"type": "string", "if": {"type": "string"}, "then": False},
    {"if": True, "then": False},
    {"type": "string", "minLength": 300, "maxLength": 299},
    {"type": "string", "minLength": 3, "maxLength": 2},
    {"type": "integer", "if": {"minimum": 0}, "then": {"maximum": -1}, "else": {"minimum": 0}},
    {"type": "string", "if": {"maxLength": 1}, "then": {"minLength": 2}, "else": {"maxLength": 1}},
    {
        "type": "array",
        "if": {"type": "array", "minItems": 1, "maxItems": 2},
        "then": {"minItems": 3},
        "else": {"maxItems": 2, "minItems": 1},
    },
]


@pytest.mark.parametrize("schema", EMPTY, ids=[json.dumps(s)[:60] for s in EMPTY])
def test_empty_languages_are_refused_up_front(schema: Any) -> None:
    with pytest.raises(EmptyLanguageError):
        corral.Grammar.from_json_schema(schema)
    # the refusal is right: the validator finds no value among many
    v = jsonschema.Draft202012Validator(schema)
    assert not any(v.is_valid(x) for x in _sample_values())


def _sample_values() -> list[Any]:
    scalars = [None, True, False, 0, 1, 2, -1, 1.5, "", "a", "ab", "abc", "x", "y"]
    arrays = [
        list(p) for n in range(4) for p in itertools.product([1, True, False, "x", "y"], repeat=n)
    ]
    objects = [{}, {"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}, {"z": None}]
    return scalars + arrays + objects


def _enumerate_docs(schema: Any) -> list[str]:
    values = [*_sample_values(), [1, 1], ["x", "x"], [True, True, False]]
    objects = []
    for n in range(4):
        for keys in itertools.combinations(["a", "b", "c"], n):  # schema order
            objects.append({k: i for i, k in enumerate(keys)})
    return [json.dumps(v, separators=(",", ":")) for v in values + objects]


EXACT_CASES = [
    (
        {"type": "object", "maxProperties": 2},
        ["maxProperties"],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "additionalProperties": False,
            "minProperties": 1,
        },
        ["minProperties"],
    ),
    (
        {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 1},
        ["maxProperties"],
    ),
    ({"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}, ["uniqueItems"]),
    (
        {"type": "array", "items": {"enum": [1, "x", True]}, "uniqueItems": True, "minItems": 2},
        ["uniqueItems"],
    ),
    ({"not": {"type": "string"}}, ["not"]),
    ({"type": ["string", "integer"], "not": {"type": "integer"}}, ["not"]),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "boolean"}}, ["if"]),
    (
        {"if": {"type": "array"}, "then": {"items": {"type": "boolean"}, "uniqueItems": True}},
        ["if"],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {}},
            "additionalProperties": False,
            "dependentRequired": {"a": ["b"], "c": ["a", "b"]},
        },
        ["dependentRequired"],
    ),
    (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "dependencies": {"b": ["a"]},
        },
        ["dependencies"],
    ),
    ({"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}}, ["contains"]),
    ({"type": "array", "contains": {"type": "boolean"}, "minContains": 2}, ["contains"]),
    # an `if` that only bounds one family of values splits it by the bound
    ({"if": {"minimum": 1}, "then": {"type": "integer"}, "else": {"type": "string"}}, ["if"]),
    ({"if": {"maxLength": 1}, "then": {"enum": ["a", "", 1]}, "else": {"minLength": 3}}, ["if"]),
    (
        {"if": {"type": "integer", "exclusiveMaximum": 2}, "then": {"minimum": 1}, "else": False},
        ["if"],
    ),
    (
        {"if": {"type": "array", "minItems": 1, "maxItems": 2}, "then": {"items": False}},
        ["if"],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {}, "b": {}, "c": {}},
            "additionalProperties": False,
            "if": {"maxProperties": 1},
            "then": {"required": ["a"]},
            "else": {"required": ["c"]},
        },
        ["if"],
    ),
]


@pytest.mark.parametrize(
    ("schema", "keywords"), EXACT_CASES, ids=[json.dumps(c[0])[:60] for c in EXACT_CASES]
)
def test_exact_where_expressible(llama3, schema: Any, keywords: list[str]) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    for kw in keywords:
        assert status(schema, kw) == EXACT, kw
    exact = corral.compile(schema, vocab)
    rules_only = corral.compile(schema, vocab, final_check=False)  # nothing left to a check
    v = jsonschema.validators.validator_for(schema)(schema)
    for text in _enumerate_docs(schema):
        want = v.is_valid(json.loads(text))
        assert accepted(exact, tok, text) == want, text
        assert accepted(rules_only, tok, text) == want, text


def test_min_properties_with_additional_names_counts_pairs(llama3) -> None:  # type: ignore[no-untyped-def]
    """With additional names a name could repeat: the grammar counts pairs (no walk ends
    early at ``{}``) and the final check refuses the repeated name."""
    tok, vocab = llama3
    schema = {"type": "object", "minProperties": 2}
    assert status(schema, "minProperties") == FINAL_CHECK
    c = corral.compile(schema, vocab)
    assert not accepted(c, tok, "{}")
    assert not accepted(c, tok, '{"a":1}')
    assert accepted(c, tok, '{"a":1,"b":2}')
    assert not accepted(c, tok, '{"a":1,"a":2}')
    m = c.matcher()
    m.consume_bytes(b"{}")  # closing after no pair is not even allowed by the grammar
    assert not m.is_accepting()


def test_repeated_names_are_refused(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    c = corral.compile(
        {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 1}, vocab
    )
    assert not accepted(c, tok, '{"b":1,"b":2}')
    c = corral.compile({"type": "object"}, vocab)
    assert not accepted(c, tok, '{"b":1,"b":2}')
    assert accepted(c, tok, '{"b":1,"c":2}')


@pytest.mark.parametrize(
    ("multiple", "lo", "hi", "values"),
    [
        (0.1, 0.05, 0.95, ["0.3", "0.7", "0.1", "0.9", "0.30"]),
        (0.01, 0, 1, ["0.07", "0.29", "0.57", "0.99"]),
    ],
)
def test_decimal_multiple_of_agrees_with_the_final_check(
    llama3, multiple: float, lo: float, hi: float, values: list[str]
) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    schema = {"type": "number", "minimum": lo, "maximum": hi, "multipleOf": multiple}
    # `not` puts the final check on every complete document
    checked = corral.compile({**schema, "not": {"const": 0.5}}, vocab)
    for text in values:
        assert accepted(checked, tok, text), text
    assert not accepted(checked, tok, "0.35" if multiple == 0.1 else "0.075")
    assert not accepted(checked, tok, "0.5")


DEAD_END_FREE = [
    {
        "type": "object",
        "minProperties": 1,
        "maxProperties": 2,
        "additionalProperties": False,
        "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "boolean"}},
    },
    {"type": "object", "additionalProperties": {"type": "boolean"}, "maxProperties": 1},
    {"type": "array", "items": {"enum": ["x", "y", "z"]}, "uniqueItems": True, "minItems": 1},
    {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True},
    {"if": {"type": "string"}, "then": {"enum": ["a", "b"]}, "else": {"type": "boolean"}},
]


@pytest.mark.parametrize("schema", DEAD_END_FREE, ids=[json.dumps(s)[:60] for s in DEAD_END_FREE])
def test_random_walks_never_dead_end(llama3, schema: Any) -> None:  # type: ignore[no-untyped-def]
    _, vocab = llama3
    c = corral.compile(schema, vocab)
    eos = set(c.eos_ids.tolist())
    rng = random.Random(0)
    mask = corral.allocate_bitmask(1, vocab.size)
    v = jsonschema.Draft202012Validator(schema)
    not_eos = np.ones(vocab.size, bool)
    not_eos[c.eos_ids] = False
    one_byte = not_eos & np.array([len(vocab.token_bytes(t)) == 1 for t in range(vocab.size)])
    for _ in range(20):
        m = c.matcher()
        out: list[int] = []
        for _ in range(60):
            m.fill_bitmask(mask)
            bits = np.unpackbits(mask.view(np.uint8)[0], bitorder="little")[: vocab.size]
            allowed = np.flatnonzero(bits)
            assert allowed.size, f"dead end after {vocab.decode(out)!r}"
            if eos & set(allowed.tolist()) and rng.random() < 0.3:
                assert v.is_valid(json.loads(vocab.decode(out)))
                break
            short = allowed[one_byte[allowed]].tolist()
            pool = short if short and rng.random() < 0.7 else allowed[not_eos[allowed]].tolist()
            if not pool:
                break
            t = rng.choice(pool)
            m.consume(t)
            out.append(t)


TAGGED = [
    {
        "type": "object",
        "properties": {"k": {"enum": ["a", "b"]}, "x": {"type": "integer"}},
        "required": ["k"],
        "additionalProperties": False,
        "if": {"properties": {"k": {"const": "a"}}},
        "then": {"required": ["x"]},
    },
    {
        "type": "object",
        "properties": {"k": {"enum": ["a", "b", "c"]}, "x": {"type": "integer"}},
        "additionalProperties": False,
        "if": {"properties": {"k": {"const": "a"}}, "required": ["k"]},
        "then": {"required": ["x"]},
        "else": {"properties": {"x": False}},
    },
    {
        "properties": {"k": {"enum": ["a", "b"]}},
        "if": {"properties": {"k": {"enum": ["a"]}}},
        "then": {"required": ["x"]},
        "else": {"maxProperties": 1},
    },
]


@pytest.mark.parametrize("schema", TAGGED, ids=["required tag", "optional tag", "open object"])
def test_if_on_a_tag_property_is_exact(llama3, schema: Any) -> None:  # type: ignore[no-untyped-def]
    """A tagged union's ``if``/``then``/``else`` splits the object by the tag's value."""
    tok, vocab = llama3
    assert status(schema, "if") == EXACT
    rules_only = corral.compile(schema, vocab, final_check=False)
    v = jsonschema.Draft202012Validator(schema)
    docs: list[Any] = [1, "s", None, []]
    for k, x, z in itertools.product([None, "a", "b", "c"], [None, 1], [None, 2]):
        d = {name: val for name, val in (("k", k), ("x", x), ("z", z)) if val is not None}
        docs.append(d)
    for d in docs:
        text = json.dumps(d, separators=(",", ":"))
        assert accepted(rules_only, tok, text) == v.is_valid(d), text


def test_dependent_required_in_any_order(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "integer"},
            "c": {"type": "integer"},
        },
        "additionalProperties": False,
        "dependentRequired": {"a": ["c"]},
    }
    c = corral.compile(schema, vocab, property_order="any", final_check=False)
    v = jsonschema.Draft202012Validator(schema)
    for n in range(4):
        for keys in itertools.permutations("abc", n):
            d = {k: 1 for k in keys}
            text = json.dumps(d, separators=(",", ":"))
            assert accepted(c, tok, text) == v.is_valid(d), text


def test_tag_values_compare_as_json_numbers(llama3) -> None:  # type: ignore[no-untyped-def]
    """``1`` and ``1.0`` are one JSON value: a tag equal to the tested value in another
    spelling takes the ``then`` branch only."""
    tok, vocab = llama3
    schema = {
        "type": "object",
        "properties": {"k": {"enum": [1, 2]}, "x": {"type": "integer"}},
        "required": ["k"],
        "additionalProperties": False,
        "if": {"properties": {"k": {"const": 1.0}}},
        "then": {"required": ["x"]},
    }
    rules_only = corral.compile(schema, vocab, final_check=False)
    v = jsonschema.Draft202012Validator(schema)
    for d in ({"k": 1}, {"k": 1, "x": 3}, {"k": 2}, {"k": 2, "x": 3}):
        text = json.dumps(d, separators=(",", ":"))
        assert accepted(rules_only, tok, text) == v.is_valid(d), text
