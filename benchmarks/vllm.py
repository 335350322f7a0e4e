"""corral inside vLLM against vLLM's built-in structured-output backends, in one run.

Four configurations, each in its own engine process, with the same model, prompts and
sampling settings (greedy, ``max_tokens``):

* ``unconstrained``: no constraint;
* ``corral``: :class:`corral.integrations.vllm.CorralLogitsProcessor`, the schema in
  ``extra_args["corral"]``;
* ``matched``: no constraint, but each prompt writes exactly as many tokens as corral
  wrote for it (``min_tokens = max_tokens``, ``ignore_eos``): the batch shrinks as
  corral's does, so corral's throughput against it is the constraint's own cost (runs
  after ``corral``);
* ``xgrammar`` and ``guidance``: vLLM's ``structured_outputs`` with that backend.

Workload: 64 extraction prompts over 16 MaskBench schemas (4 per schema). A schema is
taken, in the order of the sorted file names shuffled with a fixed seed, when it is an
object schema of at most 3 KB with a non-empty valid instance, vLLM admits it for both of
its backends, and corral, XGrammar and llguidance all compile it. Each prompt asks for
the record of a document that states a valid instance of the schema as ``key: value``
lines (MaskBench has one or two per schema; the four prompts of a schema take them in
turn and call the document text, notes, record and message).

Also per configuration: the time to first token of single requests on the idle engine,
for a schema it has not seen (``new_schema``: the compile is on the request's path) and
for one it has (``repeat_schema``).

Reported per configuration: output tokens per second (all output tokens over the wall time
of one ``LLM.generate`` of the 64 prompts, after one warm-up request per schema), time to
first token p50/p99 (vLLM's per-request ``first_token_latency``: all 64 requests arrive
at once, so it includes queueing, equally for every configuration), and the share of
outputs that are complete and valid under their schema (finish reason ``stop``,
``json.loads``, ``jsonschema``); outputs cut by ``max_tokens`` (finish reason
``length``) are counted apart, and every output that ended but does not validate is
listed in the JSON report.

Usage (in an environment with vLLM, e.g. the README's ``.venv-vllm``)::

    python benchmarks/vllm.py [--model DIR] [--max-tokens 192] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# this file is named like the vllm package: its folder must not shadow it
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
MASKBENCH = HERE.parent.parent / "shared" / "data" / "maskbench"
CONFIGS = ("unconstrained", "corral", "matched", "xgrammar", "guidance")
PROMPT = (
    "Extract the information in the {kind} as one JSON object that follows this JSON Schema.\n"
    "Schema: {schema}\n"
    "{Kind}:\n{document}\n"
    "JSON:"
)
KINDS = ("text", "notes", "record", "message")


def engines_compile(schema: dict[str, Any]) -> bool:
    """Whether corral, XGrammar and llguidance all compile ``schema``."""
    import llguidance
    import xgrammar

    import corral

    try:
        corral.Grammar.from_json_schema(schema)
        xgrammar.Grammar.from_json_schema(json.dumps(schema))
        grammar = llguidance.LLMatcher.grammar_from_json_schema(schema)
        is_error, _messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
        return not is_error
    except Exception:  # any engine refusing it excludes the schema
        return False


def _compiles_everywhere(schema: dict[str, Any]) -> bool:
    from vllm.v1.structured_output.backend_guidance import has_guidance_unsupported_json_features
    from vllm.v1.structured_output.backend_xgrammar import has_xgrammar_unsupported_json_features

    if has_xgrammar_unsupported_json_features(schema):
        return False  # vLLM refuses it for its xgrammar backend
    if has_guidance_unsupported_json_features(schema):
        return False
    return engines_compile(schema)


def _document(instance: dict[str, Any]) -> str:
    return "\n".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in instance.items())


def workload(
    n_schemas: int = 16,
    per_schema: int = 4,
    seed: int = 0,
    qualifies: Callable[[dict[str, Any]], bool] | None = None,
) -> list[dict[str, Any]]:
    """``[{"file", "schema", "prompt"}]``: ``n_schemas * per_schema`` prompts.
    ``qualifies``: which schemas every engine compared takes (default: vLLM's two
    backends and corral, XGrammar and llguidance)."""
    qualifies = qualifies or _compiles_everywhere
    files = sorted(MASKBENCH.glob("*.json"), key=lambda p: p.name)
    random.Random(seed).shuffle(files)
    out: list[dict[str, Any]] = []
    taken = 0
    for path in files:
        if taken == n_schemas:
            break
        data = json.loads(path.read_text())
        schema = data["schema"]
        text = json.dumps(schema, separators=(",", ":"))
        valid = [t["data"] for t in data["tests"] if t["valid"] and isinstance(t["data"], dict)]
        if not isinstance(schema, dict) or schema.get("type") != "object" or len(text) > 3000:
            continue
        if not any(valid) or not qualifies(schema):
            continue
        taken += 1
        for j in range(per_schema):  # the valid instances in turn, each prompt worded apart
            kind = KINDS[j % len(KINDS)]
            document = _document(valid[j % len(valid)])
            prompt = PROMPT.format(kind=kind, Kind=kind.title(), schema=text, document=document)
            out.append({"file": path.name, "schema": schema, "prompt": prompt})
    if taken < n_schemas:
        raise SystemExit(f"only {taken} schemas qualify")
    return out


def run_config(
    config: str,
    model: str,
    max_tokens: int,
    items: list[dict[str, Any]],
    engine_extra: dict[str, Any] | None = None,
) -> dict:
    """One engine, one configuration: the measurements. ``engine_extra``: more ``LLM``
    arguments (e.g. ``speculative_config``). Items with ``"free": true`` are sent without
    a constraint in every configuration (a mixed batch)."""
    import jsonschema
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from corral.integrations.vllm import CorralLogitsProcessor, sampling_params

    engine: dict[str, Any] = {
        "max_model_len": 2048,
        "gpu_memory_utilization": float(os.environ.get("BENCH_MEMORY_UTILIZATION", "0.3")),
        "seed": 0,
        "disable_log_stats": False,
    }
    if config == "corral":
        engine["logits_processors"] = [CorralLogitsProcessor]
    if config in ("xgrammar", "guidance"):
        engine["structured_outputs_config"] = {"backend": config}
    engine.update(engine_extra or {})
    t0 = time.perf_counter()
    llm = LLM(model, **engine)
    start_s = time.perf_counter() - t0

    def params(schema: dict[str, Any] | None, length: int | None = None) -> Any:
        if schema is None:  # a request without a constraint in a mixed batch
            return SamplingParams(max_tokens=max_tokens, temperature=0)
        if config == "corral":
            return sampling_params(schema=schema, max_tokens=max_tokens, temperature=0)
        if config == "unconstrained":
            return SamplingParams(max_tokens=max_tokens, temperature=0)
        if config == "matched":  # exactly as many tokens as corral wrote for the prompt
            n = max_tokens if length is None else max(1, length)
            return SamplingParams(max_tokens=n, min_tokens=n, ignore_eos=True, temperature=0)
        return SamplingParams(
            max_tokens=max_tokens,
            temperature=0,
            structured_outputs=StructuredOutputsParams(json=schema),
        )

    # warm-up: one short request per configuration (kernels, first compile of each backend)
    llm.generate([items[0]["prompt"]], params(items[0]["schema"]), use_tqdm=False)
    prompts = [it["prompt"] for it in items]
    all_params = [
        params(None if it.get("free") else it["schema"], it.get("corral_length")) for it in items
    ]
    t0 = time.perf_counter()
    outs = llm.generate(prompts, all_params, use_tqdm=False)
    wall = time.perf_counter() - t0
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    ttft = [
        float(o.metrics.first_token_latency)
        for o in outs
        if o.metrics is not None and getattr(o.metrics, "first_token_latency", 0)
    ]
    valid = cut = 0
    invalid: list[dict[str, Any]] = []
    for it, o in zip(items, outs, strict=True):
        if it.get("free"):
            continue
        if o.outputs[0].finish_reason != "stop":
            cut += 1
            continue
        try:
            jsonschema.validate(json.loads(o.outputs[0].text), it["schema"])
        except Exception as e:  # invalid JSON or invalid under the schema
            invalid.append({"file": it["file"], "text": o.outputs[0].text, "error": str(e)[:300]})
            continue
        valid += 1
    first_use = _single_request_ttft(llm, params, items)
    runner_v2 = getattr(getattr(llm.llm_engine, "vllm_config", None), "use_v2_model_runner", None)
    return {
        "model_runner_v2": runner_v2,
        "engine_extra": engine_extra or {},
        "lengths": [len(o.outputs[0].token_ids) for o in outs],
        "config": config,
        "single_request_ttft_s": first_use,
        "engine_start_s": start_s,
        "wall_s": wall,
        "output_tokens": tokens,
        "tokens_per_s": tokens / wall,
        "ttft_p50_s": statistics.median(ttft) if ttft else None,
        "ttft_p99_s": _quantile(ttft, 0.99) if ttft else None,
        "valid": valid,
        "cut_by_max_tokens": cut,
        "ended_invalid": invalid,
        "requests": len(items),
        "constrained_requests": sum(1 for it in items if not it.get("free")),
    }


def _single_request_ttft(llm: Any, params: Any, items: list[dict[str, Any]]) -> dict:
    """TTFT of one request alone, for 3 schemas of the workload: the first request of
    the schema after the batch run (its constraint already compiled: ``repeat``) and, for
    a schema never sent before (the schema with a new ``title``, which makes it another
    constraint), the first request (``new``)."""
    new, repeat = [], []
    for it in items[:12:4]:
        fresh = {**it["schema"], "title": f"fresh-{time.time_ns()}"}
        for schema, out in ((fresh, new), (fresh, repeat), (it["schema"], repeat)):
            o = llm.generate([it["prompt"]], params(schema), use_tqdm=False)[0]
            out.append(float(o.metrics.first_token_latency))
    return {"new_schema": new, "repeat_schema": repeat}


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="local model folder (default Gemma-3-270M)")
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--items", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--engine-json", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    if args.child:
        items = json.loads(args.items.read_text())
        extra = json.loads(args.engine_json)
        result = run_config(args.child, args.model, args.max_tokens, items, extra)
        print("RESULT " + json.dumps(result), flush=True)
        return
    if args.model is None:
        from corral.integrations.models import gemma3_270m_path

        args.model = str(gemma3_270m_path())
    items = workload()
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    items_path = args.out / f"vllm-items-{stamp}.tmp"
    items_path.write_text(json.dumps(items))
    results = []
    for config in args.configs.split(","):
        cmd = [sys.executable, __file__, "--child", config, "--model", args.model,
               "--max-tokens", str(args.max_tokens), "--items", str(items_path)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"{config}: failed\n{proc.stderr[-3000:]}", file=sys.stderr)
            continue
        results.append(json.loads(line[len("RESULT ") :]))
        if config == "corral":  # "matched" writes as many tokens per prompt
            for it, n in zip(items, results[-1]["lengths"], strict=True):
                it["corral_length"] = n
            items_path.write_text(json.dumps(items))
        print(json.dumps(results[-1]), flush=True)
    items_path.unlink()
    report = {
        "model": args.model,
        "max_tokens": args.max_tokens,
        "schemas": sorted({it["file"] for it in items}),
        "results": results,
    }
    path = args.out / f"vllm-{stamp}.json"
    path.write_text(json.dumps(report, indent=1))
    print(_table(results))
    print(f"written {path}")


def _table(results: list[dict[str, Any]]) -> str:
    base = next((r for r in results if r["config"] == "unconstrained"), None)
    matched = next((r for r in results if r["config"] == "matched"), None)
    lines = [
        "| configuration | output tokens/s | vs unconstrained | vs matched | TTFT p50 | TTFT p99 "
        "| valid | cut by max_tokens | single request TTFT: new schema / repeat |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rel = f"{r['tokens_per_s'] / base['tokens_per_s']:.0%}" if base else "-"
        rel_m = f"{r['tokens_per_s'] / matched['tokens_per_s']:.0%}" if matched else "-"
        p50 = f"{r['ttft_p50_s']:.2f} s" if r["ttft_p50_s"] is not None else "-"
        p99 = f"{r['ttft_p99_s']:.2f} s" if r["ttft_p99_s"] is not None else "-"
        single = r.get("single_request_ttft_s") or {}
        one = (
            f"{statistics.median(single['new_schema']):.2f} s / "
            f"{statistics.median(single['repeat_schema']):.2f} s"
            if single
            else "-"
        )
        lines.append(
            f"| {r['config']} | {r['tokens_per_s']:.1f} | {rel} | {rel_m} | {p50} | {p99} | "
            f"{r['valid']}/{r['requests']} | {r.get('cut_by_max_tokens', '-')} | {one} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
