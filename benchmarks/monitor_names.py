"""A monitor's names, from the callback's return to the first mask.

A monitor's callback returns names at a trigger (after ``obj.``); the generation waits for
the first mask of that region. This measures that wait for sets of real identifiers: every
distinct identifier of the Python standard library's top-level sources (shipped with
Python), a fresh random sample (seeded) for each repetition, so no repetition finds the
previous one's grammar in the compile cache. Each repetition is split into:

* ``names``: the callback's list to the region's constraint (encoding, the names' trie);
* ``grammar``: the segment grammar ``start: NAMES TEXT?``;
* ``compile``: its parser and lexer tables (``Compiler.compile``);
* ``mask``: the first mask (a walk of the vocabulary's token trie).

Usage (from the repository root)::

    python benchmarks/monitor_names.py --tokenizer llama3 [--sizes 100,1000,10000]

Prints a Markdown table (medians over ``--reps`` repetitions after ``--warm`` unmeasured
ones) and writes the JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent / "tests"))

PARTS = ("names", "grammar", "compile", "mask")


def identifiers() -> list[str]:
    """Every distinct identifier in the standard library's top-level ``.py`` files."""
    found: set[str] = set()
    for path in sorted(Path(os.__file__).parent.glob("*.py")):
        found.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", path.read_text("utf-8", "replace")))
    return sorted(found)


def measure(vocab: object, sizes: list[int], reps: int, warm: int, seed: int) -> list[dict]:
    import numpy as np

    import corral
    from corral.monitors.matcher import MonitoredMatcher
    from corral.monitors.region import region_constraint, region_grammar

    pool = identifiers()
    rng = random.Random(seed)
    monitor = corral.Monitor(trigger=r"\.", allowed=lambda ctx: None)
    base = MonitoredMatcher(vocab, [monitor])
    compiler, triggers = base._compiler, base.triggers
    row = np.zeros(base.compiled.words, np.uint32)
    rows = []
    for n in sizes:
        if n > len(pool):
            raise SystemExit(f"--sizes: {n} names asked, the pool has {len(pool)}")
        times: dict[str, list[float]] = {p: [] for p in (*PARTS, "total")}
        allowed = 0
        for r in range(warm + reps):
            names = rng.sample(pool, n)
            t0 = time.perf_counter()
            constraint = region_constraint(names)
            t1 = time.perf_counter()
            grammar = region_grammar(constraint, triggers, "identifier")
            t2 = time.perf_counter()
            compiled = compiler.compile(grammar)
            t3 = time.perf_counter()
            compiled.matcher().fill_row(row)
            t4 = time.perf_counter()
            if r >= warm:
                spans = (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)
                for k, v in zip((*PARTS, "total"), spans, strict=True):
                    times[k].append(v * 1e3)
                allowed = max(allowed, int(np.unpackbits(row.view(np.uint8)).sum()))
        out = {"names": n, "reps": reps, "tokens_allowed_max": allowed}
        for k, v in times.items():
            out[f"{k}_ms_median"] = statistics.median(v)
            out[f"{k}_ms_p90"] = sorted(v)[int(0.9 * (len(v) - 1))]
        rows.append(out)
        print(json.dumps(out), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warm", type=int, default=3, help="unmeasured repetitions first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "results")
    args = ap.parse_args()
    from support.tokenizers import load_vocab

    vocab = load_vocab(args.tokenizer)
    cpu0 = time.process_time()
    rows = measure(vocab, [int(x) for x in args.sizes.split(",")], args.reps, args.warm, args.seed)
    print(f"| names | {' | '.join(PARTS)} | total (median) | total p90 |")
    print("|--:|" + "--:|" * (len(PARTS) + 2))
    for r in rows:
        parts = " | ".join(f"{r[f'{p}_ms_median']:.2f}" for p in PARTS)
        print(
            f"| {r['names']:,} | {parts} | {r['total_ms_median']:.2f} | {r['total_ms_p90']:.2f} |"
        )
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"monitor-names-{args.tokenizer}-{stamp}.json"
    path.write_text(
        json.dumps(
            {"tokenizer": args.tokenizer, "cpu_s": time.process_time() - cpu0, "rows": rows},
            indent=1,
        )
        + "\n"
    )
    print(f"\nwrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
