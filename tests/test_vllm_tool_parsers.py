"""vLLM's own tool parsers read the calls corral's tool-call formats let a model write.

For each model family, random walks through the compiled format (the walks of
``test_tool_calls.py``, real tokenizers with the family's markers) are decoded and given
to the vLLM parser a server would use for that family (``--tool-call-parser``); the calls
it returns (names and arguments) must equal those ``corral.parse_tool_calls`` reads. The
harmony format (gpt-oss) is left out: vLLM reads it with its harmony path, not a text
parser (its ``openai`` tool parser is a stub). Llama's bare calls with text around them
(XGrammar's ``llama`` format) are not read by ``llama3_json``, which reads an output made
of calls only; its ``<|python_tag|>`` form must be read. Runs where vLLM is installed.
"""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (the README's vLLM test step has it)")

import test_tool_calls as tc
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.tool_parsers import ToolParserManager

import corral

PARSER_OF = {
    "llama": "llama3_json",
    "qwen": "hermes",
    "qwen2_5": "hermes",
    "qwen3_coder": "qwen3_coder",
    "mistral": "mistral",
    "deepseek_r1": "deepseek_v3",
    "deepseek_v3_1": "deepseek_v31",
    "kimi": "kimi_k2",
}
CONFIGS = [{"tool_choice": "required"}, {}, {"tool_choice": "required", "parallel": False}]


@pytest.fixture(scope="module", autouse=True)
def _release_caches():
    yield
    for cached in (tc.env, tc.compiled, tc._walk_bias):
        cached.cache_clear()


def test_every_family_has_a_parser_here() -> None:
    assert set(PARSER_OF) == set(tc.FORMATS) - {"harmony"}


@pytest.mark.parametrize("family", sorted(PARSER_OF))
def test_vllms_parser_reads_the_calls_corral_reads(family: str) -> None:
    tok, vocab = tc.env(tc.SETUP_OF[family])
    parser_class = ToolParserManager.get_tool_parser(PARSER_OF[family])
    bias = tc._walk_bias(family)
    rng = random.Random(f"vllm-parsers-{family}")
    done = called = 0
    for kw in CONFIGS:
        comp = tc.compiled(family, **tc._key(kw))
        for _ in range(tc.WALKS):
            ids = tc._walk(comp, bias, rng)
            if ids is None:
                continue
            done += 1
            text = vocab.decode(ids).decode("utf-8")
            ours = corral.parse_tool_calls(text, family, tools=tc.TOOLS).tool_calls
            request = ChatCompletionRequest(
                model="m", messages=[{"role": "user", "content": "hi"}], tools=tc.TOOLS
            )
            parser = parser_class(tok, request.tools)
            request = parser.adjust_request(request)
            theirs = parser.extract_tool_calls(text, request)
            bare = family == "llama" and not text.startswith("<|python_tag|>")
            if bare and not theirs.tools_called:  # text around bare calls: returned as content
                assert theirs.content == text
                continue
            assert theirs.tools_called == bool(ours), text
            got = [(c.function.name, json.loads(c.function.arguments)) for c in theirs.tool_calls]
            assert got == [(c["name"], c["arguments"]) for c in ours], text
            called += bool(ours)
    assert done >= len(CONFIGS) * tc.WALKS // 2, f"only {done} walks finished"
    assert called >= tc.WALKS, f"only {called} walks called a tool"
