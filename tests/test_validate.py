"""``corral.validate``: re-validation with the semantics corral's grammar and final check
enforce, where ``jsonschema``'s differ (``multipleOf`` divides exactly)."""

from __future__ import annotations

import json
from decimal import Decimal

import jsonschema
import pytest

import corral

TENTH = {"type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.1}}}


@pytest.mark.parametrize("text", ['{"x":1.2}', '{"x":0.30000000000}', '{"x":0.3}'])
def test_exact_multiples_are_valid_where_jsonschema_divides_floats(text: str) -> None:
    value = json.loads(text)
    corral.validate(value, TENTH)
    corral.validate(json.loads(text, parse_float=Decimal), json.dumps(TENTH))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(value, TENTH)  # 1.2 / 0.1 == 11.999999999999998


def test_a_non_multiple_is_invalid_for_both() -> None:
    value = json.loads('{"x":0.35}')
    with pytest.raises(jsonschema.ValidationError, match=r"0\.35 is not a multiple of 0\.1"):
        corral.validate(value, TENTH)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(value, TENTH)


def test_a_decimal_counts_as_is_and_a_float_as_its_shortest_spelling() -> None:
    text = '{"x":0.20000000000000001}'  # json.loads reads the double of 0.2
    jsonschema.validate(json.loads(text), TENTH)
    corral.validate(json.loads(text), TENTH)
    with pytest.raises(jsonschema.ValidationError, match=r"not a multiple of 0\.1"):
        corral.validate(json.loads(text, parse_float=Decimal), TENTH)


def test_what_the_grammar_accepts_validates() -> None:
    """The grammar of a multipleOf schema accepts 0.0, 0.1, ..., 10.0 and corral.validate
    agrees; jsonschema refuses a third of them (the table in docs/json_schema.md)."""
    schema = {"type": "number", "multipleOf": 0.1, "minimum": 0, "maximum": 10}
    vocab = corral.Vocabulary([bytes([b]) for b in range(256)] + [b"<eos>"], eos_token_ids=[256])
    compiled = corral.compile(schema, vocab)
    refused_by_jsonschema = []
    for k in range(101):
        text = f"{k // 10}.{k % 10}"
        m = compiled.matcher()
        assert all(m.try_consume(b) for b in text.encode()) and m.is_accepting(), text
        corral.validate(json.loads(text), schema)
        if not jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)):
            refused_by_jsonschema.append(text)
    assert len(refused_by_jsonschema) == 33
    assert refused_by_jsonschema[:4] == ["0.3", "0.6", "0.7", "1.2"]
    m = compiled.matcher()
    assert not all(m.try_consume(b) for b in b"0.35")


def test_other_keywords_and_errors() -> None:
    schema = {"type": "string", "pattern": "^\\d+$", "format": "date"}
    with pytest.raises(jsonschema.ValidationError):
        corral.validate("٣", {"type": "string", "pattern": "^\\d$"})  # ECMA-262 \d is ASCII
    with pytest.raises(jsonschema.ValidationError):
        corral.validate("2024-13-01", {"type": "string", "format": "date"})  # formats checked
    corral.validate("2024-12-01", {"type": "string", "format": "date"})
    with pytest.raises(jsonschema.ValidationError):
        corral.validate("12", schema)
    with pytest.raises(corral.SchemaError):
        corral.validate(1, {"type": 5})
    with pytest.raises(jsonschema.ValidationError):
        corral.validate(True, {"type": "integer"})


def test_validate_loads_neither_numba_nor_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, corral\n"
        "corral.validate(1.2, {'multipleOf': 0.1})\n"
        "heavy = [m for m in ('numba', 'torch', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
