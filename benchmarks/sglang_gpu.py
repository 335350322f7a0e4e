"""The GPU check of corral as SGLang's grammar backend, against SGLang's own backends.

One command on a machine with an NVIDIA GPU, SGLang (its CUDA build: ``pip install
sglang``) and corral installed as a distribution (``pip install -e .``: the entry point
registers ``--grammar-backend corral``)::

    python benchmarks/sglang_gpu.py --model DIR [--backends corral,xgrammar,llguidance]
        [--speculative-tokens 4] [--max-tokens 192] [--out benchmarks/results]

For each backend, twice (without and with SGLang's n-gram speculative decoding,
``speculative_algorithm="NGRAM"``), one fresh process runs SGLang's offline engine
(``sglang.Engine(grammar_backend=...)``) on one batch, all submitted at once, greedy:

* 64 extraction prompts over 16 MaskBench schemas (4 per schema, ``json_schema``): a
  schema is taken, in the order of the sorted file names shuffled with a fixed seed, when
  it is an object schema of at most 3 KB with a non-empty valid instance that corral,
  XGrammar and llguidance all compile; each prompt states a valid instance as ``key:
  value`` lines and asks for the record;
* 8 ``regex`` requests (a phone number) and 8 ``structural_tag`` requests (free text,
  then one ``<call>{...}</call>`` of a small schema);
* 16 requests without a constraint, mixed into the same batch.

Reported: output tokens per second over the batch (after one warm-up request per
constraint), single-request latency to the first token (``max_new_tokens=1``) for a
constraint the engine has not seen and for one it has, and the validity of every
constrained output (finish reason ``stop``; ``json.loads`` and ``jsonschema``; the regex
matched in full; the call parsed and validated), each invalid one listed.

Checks (exit status 1 when one fails): every corral engine started and ran the batch,
and no corral output that ended is invalid. The script is meant to run as is on a GPU
machine; it has not run in this repository's CI, which has no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BACKENDS = ("corral", "xgrammar", "llguidance")
PHONE = r"\+?[0-9]{1,3}-[0-9]{3}-[0-9]{4}"
CALL_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}, "days": {"type": "integer"}},
    "required": ["city"],
    "additionalProperties": False,
}
TAG = {
    "type": "structural_tag",
    "format": {
        "type": "triggered_tags",
        "triggers": ["<call>"],
        "tags": [
            {
                "type": "tag",
                "begin": "<call>",
                "content": {"type": "json_schema", "json_schema": CALL_SCHEMA},
                "end": "</call>",
            }
        ],
        "at_least_one": True,
        "stop_after_first": True,
    },
}


def workload() -> list[dict[str, Any]]:
    """``[{"kind", "constraint", "prompt"}]``: the batch described in the module docs (the
    extraction prompts are those of ``vllm.py``, its schemas chosen by the engines here)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("corral_vllm_bench", HERE / "vllm.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    items: list[dict[str, Any]] = [
        {"kind": "json", "constraint": it["schema"], "prompt": it["prompt"]}
        for it in bench.workload(qualifies=bench.engines_compile)
    ]
    for i in range(8):
        items.append({"kind": "regex", "constraint": PHONE, "prompt": f"Office {i} phone: "})
        items.append(
            {
                "kind": "tag",
                "constraint": TAG,
                "prompt": f"Plan the trip number {i}, then call the weather tool as "
                '<call>{"city": ...}</call>: ',
            }
        )
    free = [{"kind": "free", "constraint": None, "prompt": f"Story {i}: Once upon a time"}]
    out: list[dict[str, Any]] = []
    for i, it in enumerate(items):
        out.append(it)
        if i % 5 == 4:
            out.extend(free)
    return out


def _params(item: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    p: dict[str, Any] = {"temperature": 0.0, "max_new_tokens": max_tokens}
    if item["kind"] == "json":
        p["json_schema"] = json.dumps(item["constraint"])
    elif item["kind"] == "regex":
        p["regex"] = item["constraint"]
    elif item["kind"] == "tag":
        p["structural_tag"] = json.dumps(item["constraint"])
    return p


def _invalid(item: dict[str, Any], text: str) -> str | None:
    """Why an output that ended is not in its constraint's language (``None``: it is)."""
    import jsonschema

    try:
        if item["kind"] == "json":
            jsonschema.validate(json.loads(text), item["constraint"])
        elif item["kind"] == "regex":
            if not re.fullmatch(item["constraint"], text):
                return "the regex does not match"
        elif item["kind"] == "tag":
            m = re.fullmatch(r"(.*?)<call>(.*)</call>", text, re.DOTALL)
            if m is None:
                return "no call"
            jsonschema.validate(json.loads(m.group(2)), CALL_SCHEMA)
    except Exception as e:  # json or jsonschema: the output is invalid
        return f"{type(e).__name__}: {e}"[:300]
    return None


def child(backend: str, model: str, max_tokens: int, items_path: Path, spec_tokens: int) -> None:
    """One engine, one batch; prints ``RESULT {json}``."""
    import sglang as sgl

    items = json.loads(items_path.read_text())
    extra: dict[str, Any] = {}
    if spec_tokens:
        extra = {"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": spec_tokens}
    t0 = time.perf_counter()
    engine = sgl.Engine(
        model_path=model, grammar_backend=backend, mem_fraction_static=0.5, random_seed=0, **extra
    )
    start_s = time.perf_counter() - t0
    first = next(it for it in items if it["kind"] == "json")
    fresh = {**first, "constraint": {**first["constraint"], "title": "never seen"}}
    ttft: dict[str, float] = {}
    for name, it in (("new_constraint", fresh), ("repeat_constraint", fresh)):
        t = time.perf_counter()
        engine.generate(prompt=it["prompt"], sampling_params=_params(it, 1))
        ttft[name] = time.perf_counter() - t
    seen: set[str] = set()
    for it in items:  # one warm-up request per constraint
        key = json.dumps(it["constraint"])
        if it["kind"] != "free" and key not in seen:
            seen.add(key)
            engine.generate(prompt=it["prompt"], sampling_params=_params(it, 4))
    t = time.perf_counter()
    outs = engine.generate(
        prompt=[it["prompt"] for it in items],
        sampling_params=[_params(it, max_tokens) for it in items],
    )
    wall = time.perf_counter() - t
    engine.shutdown()
    tokens = sum(int(o["meta_info"]["completion_tokens"]) for o in outs)
    ended = cut = 0
    invalid: list[dict[str, Any]] = []
    for it, o in zip(items, outs, strict=True):
        if it["kind"] == "free":
            continue
        reason = o["meta_info"]["finish_reason"]
        kind = reason.get("type") if isinstance(reason, dict) else str(reason)
        if kind == "length":
            cut += 1
            continue
        ended += 1
        why = _invalid(it, o["text"])
        if why is not None:
            invalid.append({"kind": it["kind"], "why": why, "text": o["text"][:500]})
    result = {
        "backend": backend,
        "speculative_tokens": spec_tokens,
        "engine_start_s": round(start_s, 1),
        "tokens_per_s": round(tokens / wall, 1),
        "ttft_s": {k: round(v, 4) for k, v in ttft.items()},
        "constrained": ended + cut,
        "ended": ended,
        "cut_by_max_tokens": cut,
        "invalid": invalid,
    }
    print("RESULT " + json.dumps(result), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--speculative-tokens", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--items", help=argparse.SUPPRESS)
    ap.add_argument("--spec", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.model, args.max_tokens, Path(args.items), args.spec)
        return 0
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    items_path = out_dir / f"sglang-gpu-items-{stamp}.json"
    items_path.write_text(json.dumps(workload()))
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    for backend in args.backends.split(","):
        for spec in (0, args.speculative_tokens):
            cmd = [sys.executable, __file__, "--child", backend, "--model", args.model,
                   "--max-tokens", str(args.max_tokens), "--items", str(items_path),
                   "--spec", str(spec)]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
            line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                failures.append(f"{backend} (speculative {spec}): {proc.stderr[-3000:]}")
                continue
            r = json.loads(line[len("RESULT ") :])
            results.append(r)
            print(json.dumps({k: v for k, v in r.items() if k != "invalid"}), flush=True)
            if backend == "corral" and r["invalid"]:
                failures.append(f"corral (speculative {spec}): {len(r['invalid'])} invalid")
    report = out_dir / f"sglang-gpu-{stamp}.json"
    report.write_text(json.dumps({"results": results, "failures": failures}, indent=1))
    print(f"report: {report}")
    for f in failures:
        print("FAILED:", f, file=sys.stderr)
    corral_failed = any(f.startswith("corral") for f in failures)
    return 1 if corral_failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
