"""The constraint a vLLM request carries (``extra_args["corral"]``): parsing, the wire form,
and the refusals with corral's own messages. Needs no vLLM."""

from __future__ import annotations

import json

import pytest

from corral import GrammarError, SchemaError
from corral.integrations.vllm.spec import ConstraintSpec, SpecError, spec_of

SCHEMA = {"type": "object", "properties": {"zip": {"type": "integer"}, "city": {"type": "string"}}}


def test_wire_form_round_trips_and_keeps_property_order() -> None:
    spec = ConstraintSpec.of(schema=SCHEMA, whitespace="flexible")
    text = spec.to_json()
    assert ConstraintSpec.parse(text) == spec
    assert list(json.loads(text)["schema"]["properties"]) == ["zip", "city"]
    assert spec_of({"corral": text}) == spec
    assert spec_of({"other": 1}) is None and spec_of(None) is None
    g = ConstraintSpec.of(grammar='s: "a"', start="s")
    assert ConstraintSpec.parse(g.to_json()) == g and g.options == (("start", "s"),)


def test_pydantic_models_become_schemas() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str
        age: int

    spec = ConstraintSpec.of(schema=Person)
    assert spec.kind == "schema" and json.loads(spec.source)["required"] == ["name", "age"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ({"schema": 1}, "JSON object or boolean"),
        ({"schema": {}, "regex": "a"}, "exactly one of"),
        ({}, "got none"),
        ({"regex": "a", "options": {}}, "'options' applies to a schema"),
        ({"regex": "a", "start": "s"}, "'start' applies to a grammar"),
        ({"schema": {}, "options": {"nope": 1}}, r"unknown schema option\(s\) \['nope'\]"),
        ({"schema": {}, "options": {"whitespace": ["x"]}}, "JSON scalar"),
        ({"grammar": 3}, "must be a string"),
        ({"grammar": "s: 'a'", "start": ""}, "rule name"),
        ({"foo": 1}, r"unknown key\(s\) \['foo'\]"),
    ],
)
def test_malformed_specs_are_refused(value, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        ConstraintSpec.parse(value)


def test_bad_constraints_fail_with_corrals_errors() -> None:
    with pytest.raises(SchemaError, match="/properties/a/type"):
        ConstraintSpec.of(schema={"properties": {"a": {"type": "integr"}}}).grammar()
    with pytest.raises(GrammarError, match="line 1 column"):
        ConstraintSpec.of(grammar='start: "a" (').grammar()
    with pytest.raises(SpecError, match="exactly one"):
        ConstraintSpec.of(schema=SCHEMA, regex="a")
    with pytest.raises(SpecError, match="apply to schema= only"):
        ConstraintSpec.of(regex="a", whitespace="compact")
