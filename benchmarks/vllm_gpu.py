"""The GPU check of corral inside vLLM: Model Runner V2, speculative decoding, the peers.

One command on a machine with an NVIDIA GPU and vLLM (a CUDA build; not the CPU build of
the README's ``.venv-vllm``)::

    python benchmarks/vllm_gpu.py --model DIR [--speculative-tokens 4] [--max-tokens 192]
        [--configs corral,xgrammar,guidance,unconstrained] [--out benchmarks/results]

For each configuration, twice (without and with n-gram speculative decoding, vLLM's
``speculative_config={"method": "ngram", "num_speculative_tokens": K,
"prompt_lookup_max": 4}``), one fresh engine process runs :mod:`vllm` (this folder's
``vllm.py``, whose docstring has the workload): 64 extraction prompts over 16 MaskBench
schemas plus 16 requests without a constraint mixed into the same batch (every
configuration sends those 16 unconstrained), all submitted at once, greedy. Reported:
output tokens per second, TTFT p50/p99, single-request TTFT for a new and a repeated
schema, and validity (finish reason ``stop``, ``json.loads``, ``jsonschema``) of every
constrained output, with each invalid one listed. The engine's runner is recorded
(``model_runner_v2``: V2 is vLLM's default on GPUs; ``--runner v1`` sets
``VLLM_USE_V2_MODEL_RUNNER=0`` for a comparison).

Checks (the exit status is 1 when one fails): every corral engine ran Model Runner V2
(unless ``--runner v1``), and no corral output that ended is invalid.

vLLM refuses custom logits processors with speculative decoding under its V1 runner; under
V2 corral masks draft rows (``corral/integrations/vllm/runner_v2.py``). The script is
meant to run as is on a GPU machine; it has not run in this repository's CI, which has
no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # not ./vllm.py
VLLM_BENCH = HERE / "vllm.py"
CONFIGS = ("corral", "xgrammar", "guidance", "unconstrained")
FREE_EVERY = 4  # one unconstrained request per 4 constrained ones in the batch


def _items() -> list[dict[str, Any]]:
    """The workload of ``vllm.py`` with unconstrained requests mixed in."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("corral_vllm_bench", VLLM_BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    items: list[dict[str, Any]] = bench.workload()
    mixed: list[dict[str, Any]] = []
    for i, it in enumerate(items):
        mixed.append(it)
        if i % FREE_EVERY == FREE_EVERY - 1:
            mixed.append({**it, "free": True})
    return mixed


def _child(
    config: str, model: str, max_tokens: int, items: Path, extra: dict[str, Any], runner: str
) -> dict[str, Any] | str:
    env = dict(os.environ)
    if runner == "v1":
        env["VLLM_USE_V2_MODEL_RUNNER"] = "0"
    env.setdefault("BENCH_MEMORY_UTILIZATION", "0.5")
    cmd = [sys.executable, str(VLLM_BENCH), "--child", config, "--model", model,
           "--max-tokens", str(max_tokens), "--items", str(items),
           "--engine-json", json.dumps(extra)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        return proc.stderr[-4000:] or proc.stdout[-4000:]
    result: dict[str, Any] = json.loads(line[len("RESULT ") :])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="local model folder")
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--speculative-tokens", type=int, default=4)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--runner", choices=("default", "v1"), default="default")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: this check needs a GPU (vLLM's V2 runner needs Triton)")
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    items = _items()
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    items_path = args.out / f"vllm-gpu-items-{stamp}.tmp"
    items_path.write_text(json.dumps(items))
    spec = {"method": "ngram", "num_speculative_tokens": args.speculative_tokens,
            "prompt_lookup_max": 4, "prompt_lookup_min": 2}  # fmt: skip
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    for extra in ({}, {"speculative_config": spec}):
        for config in args.configs.split(","):
            out = _child(config, args.model, args.max_tokens, items_path, extra, args.runner)
            label = f"{config}{' + ngram' if extra else ''}"
            if isinstance(out, str):
                failures.append(f"{label}: the engine failed:\n{out}")
                print(failures[-1], file=sys.stderr, flush=True)
                continue
            out["label"] = label
            results.append(out)
            print(json.dumps({k: v for k, v in out.items() if k != "lengths"}), flush=True)
            if config == "corral":
                if args.runner == "default" and not out.get("model_runner_v2"):
                    failures.append(f"{label}: the engine did not run Model Runner V2")
                if out["ended_invalid"]:
                    failures.append(f"{label}: {len(out['ended_invalid'])} invalid outputs")
    items_path.unlink()
    report = {
        "model": args.model,
        "max_tokens": args.max_tokens,
        "speculative": spec,
        "runner": args.runner,
        "device": torch.cuda.get_device_name(0),
        "results": results,
        "failures": failures,
    }
    path = args.out / f"vllm-gpu-{stamp}.json"
    path.write_text(json.dumps(report, indent=1))
    print(_table(results))
    print(f"written {path}")
    for f in failures:
        print("FAILED:", f.splitlines()[0])
    return 1 if failures else 0


def _table(results: list[dict[str, Any]]) -> str:
    rows = [
        "| configuration | runner V2 | tokens/s | TTFT p50 / p99 s | valid / constrained "
        "| cut by max_tokens | ended invalid |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        p50, p99 = r.get("ttft_p50_s"), r.get("ttft_p99_s")
        ttft = f"{p50:.3f} / {p99:.3f}" if p50 is not None and p99 is not None else "-"
        rows.append(
            f"| {r['label']} | {r.get('model_runner_v2')} | {r['tokens_per_s']:.1f} | {ttft} "
            f"| {r['valid']}/{r['constrained_requests']} | {r['cut_by_max_tokens']} "
            f"| {len(r['ended_invalid'])} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
