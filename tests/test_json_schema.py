"""JSON Schema front end: keywords, options, errors, the final check, and random walks."""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.tokenizers import load_tokenizer, load_vocab
from support.words import accepts

import corral
from corral import (
    CompileBudgetError,
    EmptyLanguageError,
    Grammar,
    SchemaError,
    UnsupportedFeatureError,
    explain,
)
from corral.grammar.json_schema import ANNOTATION, EXACT, FINAL_CHECK


@pytest.fixture(scope="module")
def llama3():  # type: ignore[no-untyped-def]
    return load_tokenizer("llama3"), load_vocab("llama3")


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def test_object_keywords(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    c = corral.compile(PERSON, vocab)
    ok = [
        {"name": "Ann", "age": 30},
        {"name": "Ann", "age": 0, "tags": []},
        {"name": "Zoë", "age": 150, "email": "a.b@example.com", "tags": ["x", "y", "z"]},
    ]
    bad = [
        {"name": "Ann"},
        {"name": "", "age": 3},
        {"name": "Ann", "age": 151},
        {"name": "Ann", "age": -1},
        {"name": "Ann", "age": 3.5},
        {"name": "Ann", "age": 3, "extra": 1},
        {"name": "Ann", "age": 3, "tags": ["a", "b", "c", "d"]},
        {"name": "Ann", "age": 3, "email": "not an email"},
        {"name": "x" * 21, "age": 3},
    ]
    for v in ok:
        assert accepts(c, tok, json.dumps(v, ensure_ascii=False)), v
        assert accepts(c, tok, json.dumps(v, ensure_ascii=False, separators=(",", ":"))), v
    for v in bad:
        assert not accepts(c, tok, json.dumps(v)), v


def test_inputs_json_text_pydantic_and_grammar(llama3) -> None:  # type: ignore[no-untyped-def]
    pydantic = pytest.importorskip("pydantic")
    tok, vocab = llama3

    class Item(pydantic.BaseModel):
        name: str
        price: float
        tags: list[str] = pydantic.Field(default_factory=list)

    c1 = corral.compile(Item, vocab)
    assert accepts(c1, tok, '{"name": "pen", "price": 1.5, "tags": ["a"]}')
    assert not accepts(c1, tok, '{"name": "pen"}')
    c2 = corral.compile(json.dumps(PERSON), vocab)
    assert accepts(c2, tok, '{"name": "Ann", "age": 30}')
    g = Grammar.from_json_schema(PERSON)
    assert corral.compile(g, vocab).grammar.fingerprint == c2.grammar.fingerprint


def test_refs_recursion_and_combinators(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
                "required": ["value"],
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    }
    c = corral.compile(tree, vocab)
    deep: dict = {"value": 0}
    cur = deep
    for i in range(30):  # no depth cap
        cur["children"] = [{"value": i}]
        cur = cur["children"][0]
    assert accepts(c, tok, json.dumps(deep))
    assert not accepts(c, tok, json.dumps({"value": 1, "children": [{"children": []}]}))

    combo = {
        "anyOf": [
            {"type": "string", "pattern": "^[a-z]+$"},
            {"type": "integer", "multipleOf": 7},
        ],
        "allOf": [{"not": {"const": 14}}],
    }
    c = corral.compile(combo, vocab)
    for text, want in [('"abc"', True), ('"aBc"', False), ("21", True), ("22", False),
                       ("14", False), ("7.0", False)]:  # fmt: skip
        assert accepts(c, tok, text) == want, text


def test_numbers_exact(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    c = corral.compile({"type": "number", "exclusiveMinimum": 0.5, "maximum": 2}, vocab)
    for text, want in [("0.5", False), ("0.50001", True), ("2", True), ("2.0", True),
                       ("2.0001", False), ("1", True), ("-1", False)]:  # fmt: skip
        assert accepts(c, tok, text) == want, text
    c = corral.compile({"type": "number", "multipleOf": 0.01}, vocab)
    assert accepts(c, tok, "3.14") and not accepts(c, tok, "3.141")


def test_strings_escapes_and_lengths(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    c = corral.compile({"type": "string", "minLength": 2, "maxLength": 3}, vocab)
    for text, want in [('"ab"', True), ('"a"', False), ('"abcd"', False), ('"\\u00e9\\n"', True),
                       ('"😀😀"', True), ('"\\ud83d\\ude00x"', True), ('"\\ud83dxy"', False),
                       ('"a\\"b"', True)]:  # fmt: skip
        assert accepts(c, tok, text) == want, text
    c = corral.compile({"type": "string", "format": "date"}, vocab)
    assert accepts(c, tok, '"2024-02-29"') and not accepts(c, tok, '"2023-02-29"')


def test_final_check_keywords(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    c = corral.compile(schema, vocab)
    assert accepts(c, tok, "[1, 2, 3]")
    assert not accepts(c, tok, "[1, 2, 1]")
    # EOS is masked out where the final check fails
    m = c.matcher()
    for t in tok.encode("[1, 1]", add_special_tokens=False):
        m.consume(t)
    bm = corral.allocate_bitmask(1, vocab.size)
    m.fill_bitmask(bm)
    allowed = corral.bitmask_to_bool(bm, vocab.size)[0]
    assert not allowed[vocab.eos_token_ids].any()
    e = explain(schema)
    assert {(f.pointer, f.keyword, f.status) for f in e.findings} >= {
        ("/uniqueItems", "uniqueItems", FINAL_CHECK),
        ("/items", "items", EXACT),
    }
    with pytest.raises(UnsupportedFeatureError) as info:
        corral.compile(schema, vocab, final_check=False, cache=False)
    assert info.value.feature == "uniqueItems" and info.value.location == "/uniqueItems"


def test_explain_reports_every_keyword() -> None:
    e = explain({"title": "T", "type": "object", "properties": {"a": {"type": "string"}},
                 "dependentRequired": {"a": ["b"]}, "x-custom": 1})  # fmt: skip
    status = {(f.pointer, f.keyword): f.status for f in e.findings}
    assert status[("/title", "title")] == ANNOTATION
    assert status[("/properties", "properties")] == EXACT
    assert status[("/dependentRequired", "dependentRequired")] == FINAL_CHECK
    assert status[("/x-custom", "x-custom")] == ANNOTATION
    assert e.grammar_size["rules"] > 0
    assert "dependentRequired: final check" in str(e)


def test_options(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    pretty = json.dumps({"a": 1}, indent=2)
    assert not accepts(corral.compile(schema, vocab), tok, pretty)
    assert accepts(corral.compile(schema, vocab, whitespace="flexible"), tok, pretty)
    # additional properties: allowed by the spec unless overridden
    extra = '{"a": 1, "b": "x"}'
    assert accepts(corral.compile(schema, vocab), tok, extra)
    assert not accepts(corral.compile(schema, vocab, additional_properties=False), tok, extra)
    # property order chosen by the model: each property at most once, required ones present
    three = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}},
        "required": ["a", "b"],
    }
    c = corral.compile(three, vocab, property_order="any")
    for text, want in [('{"b": "x", "a": 1}', True), ('{"c": null, "a": 1, "b": "x"}', True),
                       ('{"a": 1}', False), ('{"a": 1, "a": 2, "b": "x"}', False),
                       ('{"z": 0, "b": "x", "a": 1}', True)]:  # fmt: skip
        assert accepts(c, tok, text) == want, text
    assert not accepts(corral.compile(three, vocab), tok, '{"b": "x", "a": 1}')
    with pytest.raises(ValueError, match="whitespace"):
        corral.compile(schema, vocab, whitespace="pretty")
    with pytest.raises(TypeError, match="JSON Schemas only"):
        corral.compile('start: "a"', vocab, whitespace="flexible")


def test_errors() -> None:
    with pytest.raises(SchemaError) as info:
        Grammar.from_json_schema('{\n  "type": "object",\n}')
    assert info.value.line == 3
    with pytest.raises(SchemaError) as info2:
        Grammar.from_json_schema({"properties": {"a": {"type": "objekt"}}})
    assert info2.value.pointer == "/properties/a/type"
    with pytest.raises(UnsupportedFeatureError, match="remote"):
        Grammar.from_json_schema({"$ref": "https://example.com/schema.json"})
    with pytest.raises(UnsupportedFeatureError) as info3:
        Grammar.from_json_schema({"properties": {"a": {"$ref": "#/$defs/missing"}}})
    assert info3.value.location == "/properties/a/$ref"
    with pytest.raises(EmptyLanguageError):
        Grammar.from_json_schema({"type": "integer", "minimum": 5, "maximum": 1})
    with pytest.raises(EmptyLanguageError):
        Grammar.from_json_schema({"type": "object", "required": ["a"],
                                  "additionalProperties": False})  # fmt: skip
    # a pattern that is not regular is left to the final check, or refused without it
    backref = {"type": "string", "pattern": "(a)\\1"}
    assert ("/pattern", FINAL_CHECK) in {(f.pointer, f.status) for f in explain(backref).findings}
    with pytest.raises(UnsupportedFeatureError) as info4:
        Grammar.from_json_schema(backref, final_check=False)
    assert info4.value.feature == "pattern" and "backreference" in str(info4.value)
    with pytest.raises(UnsupportedFeatureError, match="idn-hostname"):
        Grammar.from_json_schema({"type": "string", "format": "idn-hostname"})
    with pytest.raises(TypeError):
        Grammar.from_json_schema(42)


def test_budgets() -> None:
    # an enum's strings are one terminal at any size (past 4,096 trie states, their
    # minimal automaton as sparse rows, not bounded by max_states)
    big = {"enum": [f"value {i}" for i in range(5000)]}
    g = Grammar.from_json_schema(big, max_rules=1000, max_states=5000)
    assert len(g.rules) < 10 and len(g.terminals) == 1
    # the rule budget stops a schema of many rules
    wide = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(2000)}}
    with pytest.raises(CompileBudgetError, match="max_rules"):
        Grammar.from_json_schema(wide, max_rules=1000)
    nested: dict = {"type": "integer"}
    for _ in range(12):
        nested = {"anyOf": [nested, {"type": "array", "items": nested}]}
    with pytest.raises(CompileBudgetError):
        Grammar.from_json_schema(nested, time_budget_s=0.0)  # an opt-in wall-clock limit
    with pytest.raises(CompileBudgetError, match="max_work"):
        Grammar.from_json_schema(wide, max_work=50_000)
    for bad in ({"max_work": 0}, {"pattern_budget": 1.5}, {"time_budget_s": -1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Grammar.from_json_schema({"type": "integer"}, **bad)


def test_budgets_count_steps_so_a_schema_compiles_the_same_everywhere() -> None:
    """A pattern too large for its step budget is left to the final check, and a schema
    too large for the grammar's is refused, by counting construction steps: the outcome
    does not depend on the machine's speed or load (two runs, the second with the other
    core busy, give the same grammar and findings)."""
    import threading

    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "pattern": "^(?:[a-z0-9-]{1,63}\\.){1,8}[a-z]{2,12}$"},
            "b": {"type": "string", "pattern": "^[A-Z]{3}$"},
        },
    }
    small = {"pattern_budget": 20_000}
    outcomes = []
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            sum(i * i for i in range(10_000))

    for loaded in (False, True):
        worker = threading.Thread(target=busy) if loaded else None
        if worker:
            worker.start()
        try:
            g = Grammar.from_json_schema(schema, **small)
            found = {(f.pointer, f.status) for f in corral.explain(schema, **small).findings}
        finally:
            stop.set()
            if worker:
                worker.join()
        outcomes.append((g.fingerprint, found))
    assert outcomes[0] == outcomes[1]
    found = outcomes[0][1]
    assert ("/properties/a/pattern", "final check") in found  # about 43,000 steps
    assert ("/properties/b/pattern", "exact") in found
    assert ("/properties/a/pattern", "exact") in {
        (f.pointer, f.status) for f in corral.explain(schema).findings
    }


def test_a_large_numeric_enum_is_one_terminal(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    schema = {"enum": [*range(100_000), 2.5, -0.125]}
    g = Grammar.from_json_schema(schema)
    assert len(g.terminals) == 1
    c = corral.compile(schema, vocab)
    cases = [("99999", True), ("42.00", True), ("-0", True), ("2.50", True), ("-0.125", True)]
    cases += [("100000", False), ("2.4", False), ("1e3", False)]
    for text, want in cases:
        assert accepts(c, tok, text) == want, text


# -- generated instances and random walks ------------------------------------------------

SCHEMAS = [
    PERSON,
    {
        "type": "array",
        "items": {"anyOf": [{"type": "boolean"}, {"type": "number", "maximum": 10}]},
        "minItems": 1,
        "maxItems": 4,
    },
    {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"},
            "kind": {"enum": ["a", "b", None]},
        },
        "required": ["id"],
    },
]


def _text(alphabet: str = "", **kw: int) -> st.SearchStrategy[str]:
    chars = st.characters(codec="utf-8", exclude_categories=("Cs",))
    return st.text(alphabet or chars, **kw)  # type: ignore[arg-type]


# Instances of SCHEMAS (hypothesis-jsonschema does not run on current Hypothesis releases,
# so the strategies are written out; every draw is also checked with jsonschema).
INSTANCES = [
    st.fixed_dictionaries(
        {"name": _text(min_size=1, max_size=20), "age": st.integers(0, 150)},
        optional={
            "email": st.from_regex(
                r"[a-z0-9_+-]{1,10}(\.[a-z0-9_+-]{1,5})?@[a-z]{1,8}\.(com|org|co\.uk)",
                fullmatch=True,
            ),
            "tags": st.lists(_text(max_size=8), max_size=3),
        },
    ),
    # bounded numbers are written without an exponent (docs/json_schema.md)
    st.lists(
        st.one_of(
            st.booleans(),
            st.integers(-(10**6), 10),
            st.floats(-1e9, 10).filter(lambda x: "e" not in repr(x)),
        ),
        min_size=1,
        max_size=4,
    ),
    st.fixed_dictionaries(
        {"id": st.from_regex(r"[A-Z]{2}[0-9]+", fullmatch=True)},
        optional={"kind": st.sampled_from(["a", "b", None]), "more": st.integers()},
    ),
]


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_generated_instances_are_accepted(llama3, index: int) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    schema = SCHEMAS[index]
    c = corral.compile(schema, vocab)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(INSTANCES[index])
    def check(value):  # type: ignore[no-untyped-def]
        assert validator.is_valid(value), value
        if isinstance(value, dict) and "properties" in schema:
            order = list(schema["properties"])
            value = dict(sorted(value.items(), key=lambda kv: (
                order.index(kv[0]) if kv[0] in order else len(order))))  # fmt: skip
        text = json.dumps(value, ensure_ascii=False)
        assert accepts(c, tok, text), text

    check()


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_random_walks_stay_valid(llama3, index: int) -> None:  # type: ignore[no-untyped-def]
    """Random token walks through the mask never dead-end, and every output the matcher
    calls complete validates with ``jsonschema``."""
    _, vocab = llama3
    schema = SCHEMAS[index]
    c = corral.compile(schema, vocab)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    rng = random.Random(index)
    bm = corral.allocate_bitmask(1, vocab.size)
    eos = set(vocab.eos_token_ids)
    short = np.array([len(vocab.token_bytes(t)) <= 2 for t in range(vocab.size)])
    finished = 0
    for _ in range(10):
        m = c.matcher()
        ids: list[int] = []
        for _step in range(150):
            m.fill_bitmask(bm)
            allowed = np.flatnonzero(corral.bitmask_to_bool(bm, vocab.size)[0])
            assert allowed.size, f"dead end after {vocab.decode(ids)!r}"
            if any(t in eos for t in allowed.tolist()):
                text = vocab.decode(ids).decode("utf-8")
                assert validator.is_valid(json.loads(text)), text
                if rng.random() < 0.7:
                    finished += 1
                    break
            pool = [t for t in allowed.tolist() if t not in eos]
            if not pool:  # complete, and nothing may follow
                finished += 1
                break
            if rng.random() < 0.8:  # mostly short tokens, so that walks come to an end
                pool = [t for t in pool if short[t]] or pool
            t = rng.choice(pool)
            m.consume(t)
            ids.append(t)
    assert finished >= 3
