"""corral.generate / corral.stream on tiny random models over real tokenizers: every
output satisfies its constraint, whatever the model prefers."""

from __future__ import annotations

import json

import jsonschema
import pytest
from support.tiny_models import tiny_llama
from support.tokenizers import load_tokenizer

import corral
from corral import IncompleteGenerationError

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def test_greedy_schema_output_validates(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2_model
    result = corral.generate(model, "Person:", schema=PERSON, tokenizer=tok, details=True)
    jsonschema.validate(result.value, PERSON)
    assert json.loads(result.text) == result.value
    st = result.stats
    assert st.new_tokens == len(result.token_ids) == st.sampled_tokens + st.forced_tokens
    assert st.forced_tokens > 0  # '{"name":"' is forced
    assert st.forward_passes <= st.sampled_tokens + 1


def test_sampling_many_seeds_all_valid(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2_model
    outputs = set()
    for seed in range(12):
        value = corral.generate(
            model, "Person:", schema=PERSON, tokenizer=tok, temperature=1.5, top_p=0.95,
            top_k=200, seed=seed, max_new_tokens=120,
        )  # fmt: skip
        jsonschema.validate(value, PERSON)
        outputs.add(json.dumps(value))
    assert len(outputs) > 1  # sampling does sample


def test_seed_reproduces(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2_model
    a = corral.generate(model, "x", regex=r"[a-z]{1,8}", tokenizer=tok, temperature=1, seed=3)
    b = corral.generate(model, "x", regex=r"[a-z]{1,8}", tokenizer=tok, temperature=1, seed=3)
    assert a == b


def test_regex_and_grammar_return_text(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    import re

    model, tok = gpt2_model
    for seed in range(5):
        text = corral.generate(model, "Date:", regex=r"[0-9]{4}-[0-9]{2}-[0-9]{2}", tokenizer=tok,
                               temperature=1.0, seed=seed)  # fmt: skip
        assert re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text)
    lark = 'start: "(" WORD ("," WORD)* ")"\nWORD: /[a-z]{1,5}/\n'
    out = corral.generate(model, "List:", grammar=lark, tokenizer=tok, max_new_tokens=200,
                          temperature=1.0, seed=0)  # fmt: skip
    assert re.fullmatch(r"\([a-z]{1,5}(,[a-z]{1,5})*\)", out)


def test_pydantic_class_gives_instance(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    from typing import Literal

    from pydantic import BaseModel, ConfigDict, Field

    class Item(BaseModel):
        # no extra fields: a random model would otherwise wander into extra properties
        model_config = ConfigDict(extra="forbid")
        kind: Literal["book", "pen"]
        count: int = Field(ge=1, le=9)

    model, tok = gpt2_model
    item = corral.generate(model, "Item:", schema=Item, tokenizer=tok, temperature=1, seed=1)
    assert isinstance(item, Item) and 1 <= item.count <= 9


def test_stream_pieces_concatenate_to_output(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2_model
    pieces = list(corral.stream(model, "Person:", schema=PERSON, tokenizer=tok, temperature=1,
                                seed=4))  # fmt: skip
    full = corral.generate(model, "Person:", schema=PERSON, tokenizer=tok, temperature=1, seed=4,
                           details=True)  # fmt: skip
    assert len(pieces) > 1 and "".join(pieces) == full.text


def test_budget_exhausted_raises_with_partial_text(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2_model
    with pytest.raises(IncompleteGenerationError) as e:
        corral.generate(model, "Person:", schema=PERSON, tokenizer=tok, max_new_tokens=4)
    assert e.value.partial_text.startswith('{"name":"')
    assert len(e.value.token_ids) == 4
    with pytest.raises(IncompleteGenerationError):  # stream raises at the end too
        list(corral.stream(model, "Person:", schema=PERSON, tokenizer=tok, max_new_tokens=4))


def test_padded_vocab_and_several_eos() -> None:
    tok = load_tokenizer("llama3")
    model = tiny_llama(tok, vocab_size=len(tok) + 63)  # output layer wider than the tokenizer
    eot = tok.convert_tokens_to_ids("<|eot_id|>")
    model.generation_config.eos_token_id = [tok.eos_token_id, eot]
    with __import__("torch").no_grad():  # make the padding ids the model's favourites
        model.lm_head.weight[len(tok) :] += 5.0
    for seed in range(4):
        r = corral.generate(model, "Person:", schema=PERSON, tokenizer=tok, temperature=1,
                            seed=seed, details=True)  # fmt: skip
        assert all(t < len(tok) for t in r.token_ids)
        jsonschema.validate(r.value, PERSON)
    from corral.integrations.vocabularies import vocabulary_for

    vocab = vocabulary_for(model, tok)
    assert set(vocab.eos_token_ids) == {tok.eos_token_id, eot}
    assert vocab.size == len(tok) + 63


def test_prompt_ending_mid_word(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2_model
    value = corral.generate(model, 'The record is {"na', schema=PERSON, tokenizer=tok)
    jsonschema.validate(value, PERSON)


def test_bad_arguments_are_clear(gpt2_model, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2_model
    with pytest.raises(ValueError, match="exactly one of"):
        corral.generate(model, "x", schema=PERSON, grammar='start: "a"', tokenizer=tok)
    with pytest.raises(ValueError, match="exactly one of"):
        corral.generate(model, "x", tokenizer=tok)
    with pytest.raises(TypeError, match="tokenizer="):
        corral.generate(model, "x", regex="a")
    with pytest.raises(corral.CorralError, match="does not exist"):
        corral.generate(str(tmp_path / "no-such-model"), "x", regex="a")
    with pytest.raises(ValueError, match="sampler"):
        corral.generate(model, "x", regex="a", tokenizer=tok, sampler="beam")
    with pytest.raises(ValueError, match="max_new_tokens"):
        corral.generate(model, "x", regex="a", tokenizer=tok, max_new_tokens=0)
    with pytest.raises(corral.SchemaError) as e:
        corral.generate(model, "x", schema={"type": "object", "minProperties": -1}, tokenizer=tok)
    assert "/minProperties" in str(e.value)
    with pytest.raises(corral.GrammarError) as g:
        corral.generate(model, "x", grammar='start: "a" b\n', tokenizer=tok)
    assert g.value.line is not None
    with pytest.raises(ValueError, match="chat template"):
        corral.generate(model, "x", regex="a", tokenizer=tok, chat=True)


def test_tokenizer_model_mismatch_is_refused() -> None:
    tok = load_tokenizer("llama3")
    small = tiny_llama(load_tokenizer("gpt2"))  # 50k logits, 128k tokenizer
    with pytest.raises(corral.TokenizerError):
        corral.generate(small, "x", regex="[a-z]+", tokenizer=tok)


def test_chat_template_wraps_the_prompt(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    import copy

    from corral.integrations.generate import prompt_ids

    model, tok = gpt2_model
    chat_tok = copy.deepcopy(tok)
    chat_tok.chat_template = (
        "{% for m in messages %}<user>{{ m['content'] }}</user>{% endfor %}"
        "{% if add_generation_prompt %}<bot>{% endif %}"
    )
    ids = prompt_ids(chat_tok, "Give a date", chat=True)
    assert chat_tok.decode(ids) == "<user>Give a date</user><bot>"
    text = corral.generate(model, "Give a date", regex=r"[0-9]{2}/[0-9]{2}", tokenizer=chat_tok,
                           chat=True)  # fmt: skip
    assert len(text) == 5 and text[2] == "/"


@pytest.mark.parametrize("sampler", ["awrs", "smc", "asap"])
def test_other_samplers_give_valid_outputs(gpt2_model, sampler, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2_model
    small = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
             "additionalProperties": False}  # fmt: skip
    extra = {"n_particles": 4} if sampler == "smc" else {}
    if sampler == "asap":
        extra = {"asap_path": str(tmp_path / "trie.json")}
    for seed in range(3):
        r = corral.generate(model, "Flag:", schema=small, tokenizer=tok, sampler=sampler,
                            temperature=1.0, seed=seed, details=True, **extra)  # fmt: skip
        jsonschema.validate(r.value, small)
    if sampler == "awrs":
        # each token is checked at most once per step (a random model spreads its mass over
        # the whole vocabulary, so many are; a trained model needs few: see benchmarks)
        assert 0 < r.stats.checks <= r.stats.sampled_tokens * 50_257
        greedy_mask = corral.generate(model, "Person:", schema=PERSON, tokenizer=tok)
        greedy_awrs = corral.generate(model, "Person:", schema=PERSON, tokenizer=tok,
                                      sampler="awrs")  # fmt: skip
        assert greedy_awrs == greedy_mask  # greedy by rejection = greedy by mask
    if sampler == "smc":
        assert r.log_z is not None and r.particles
        assert abs(sum(w for _, w in r.particles) - 1) < 1e-9
    if sampler == "asap":
        assert (tmp_path / "trie.json").exists()
        # a damaged trie file is ignored with a CacheWarning, and saved over
        from corral.sampler.sequence import ASAP_TRIES

        ASAP_TRIES.clear()
        (tmp_path / "trie.json").write_text('{"format": "corral-asap-1", "ro', encoding="utf-8")
        with pytest.warns(corral.errors.CacheWarning, match="cannot read the ASAp trie"):
            r = corral.generate(model, "Flag:", schema=small, tokenizer=tok, sampler=sampler,
                                temperature=1.0, seed=0, **extra)  # fmt: skip
        jsonschema.validate(r, small)
        assert json.loads((tmp_path / "trie.json").read_text(encoding="utf-8"))["samples"] == 1
    with pytest.raises(ValueError):
        corral.generate(model, "x", regex="a", tokenizer=tok, sampler=sampler, top_k=5,
                        temperature=1.0)  # fmt: skip
