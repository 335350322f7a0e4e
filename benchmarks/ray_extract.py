"""Extraction on Ray against the single-process path: throughput and overhead.

Documents: the texts of ``extraction_quality/data.jsonl`` (42 short texts written for the
quality benchmark), repeated to ``--docs`` lines; schema: that benchmark's. Each
configuration extracts the same file with Gemma-3-270M, greedy, writing the output rows
``corral extract`` writes:

* ``single``: ``corral extract`` in this process (``--threads`` torch threads);
* ``ray-N``: ``--engine ray`` on a local Ray cluster with N workers (one CPU and one torch
  thread each), for each N of ``--workers``.

Reported per configuration: wall time (from the command's start: a Ray run includes
starting the cluster, its workers loading the model and compiling the schema), documents
per second, and whether its rows equal the single-process rows. Usage::

    python benchmarks/ray_extract.py --docs 210 --workers 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH / "extraction_quality"))

from run import SCHEMA  # noqa: E402  (the quality benchmark's schema)


def write_inputs(path: Path, n: int) -> None:
    texts = [
        json.loads(x)["text"]
        for x in (BENCH / "extraction_quality" / "data.jsonl").read_text().splitlines()
    ]
    lines = [json.dumps({"id": f"d{i}", "text": texts[i % len(texts)]}) for i in range(n)]
    path.write_text("\n".join(lines) + "\n")


def run(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=False, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=210)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--threads", type=int, default=2, help="torch threads, single process")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=None, help="JSON results file")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="corral-ray-bench-"))
    inp, schema = tmp / "docs.jsonl", tmp / "schema.json"
    write_inputs(inp, args.docs)
    schema.write_text(json.dumps(SCHEMA))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    base = [sys.executable, "-m", "corral", "extract", "--model", "gemma3-270m", "--schema",
            str(schema), "--input", str(inp), "--batch-size", str(args.batch_size),
            "--max-new-tokens", str(args.max_new_tokens), "--no-progress"]  # fmt: skip
    results = []
    single_out = tmp / "single.jsonl"
    wall = run(
        [*base, "--output", str(single_out)],
        {**env, "OMP_NUM_THREADS": str(args.threads)},
    )
    reference = single_out.read_bytes()
    results.append({"config": "single", "threads": args.threads, "wall_s": round(wall, 1)})
    for n in args.workers:
        out = tmp / f"ray-{n}.jsonl"
        wall = run([*base, "--output", str(out), "--engine", "ray", "--workers", str(n)], env)
        results.append(
            {"config": f"ray-{n}", "workers": n, "wall_s": round(wall, 1),
             "rows_equal_single": out.exists() and out.read_bytes() == reference}
        )  # fmt: skip
    for r in results:
        r["docs_per_s"] = round(args.docs / r["wall_s"], 2)
        print(json.dumps(r))
    if args.out:
        args.out.write_text(json.dumps({"docs": args.docs, "results": results}, indent=1))


if __name__ == "__main__":
    main()
