"""Construction steps of the JSON Schema translation over the MaskBench corpus: what the
step budgets (``Options.max_work``, ``Options.pattern_budget``) are set from.

Usage (from the repository root)::

    python benchmarks/budgets.py [--limit N] [--data ../shared/data/maskbench]

For each schema, the grammar is translated (no vocabulary, no tables) with budgets too
large to run out, and three things are recorded: the steps the whole translation spent,
the most steps one string automaton (a pattern or format) spent, and the CPU seconds.
Prints the distribution, the schemas that spend the most, and the steps per CPU second
(the exchange rate between the budgets and time on this machine), as JSON lines.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_DATA = BENCH_DIR.parent.parent / "shared" / "data" / "maskbench"
UNLIMITED = 10**15


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--limit", type=int, default=0, help="first N schemas (0: all)")
    args = ap.parse_args()

    from corral.grammar.json_schema import options as options_module
    from corral.grammar.json_schema.emit import string as string_emitter
    from corral.grammar.json_schema.load import load_schema
    from corral.grammar.json_schema.translate import translate
    from corral.grammar.regex import dfa

    pattern_most = [0]
    real_budget = string_emitter.work_budget

    @contextlib.contextmanager
    def watched(units: int | None, what: str) -> Iterator[Any]:
        with real_budget(units, what) as b:
            try:
                yield b
            finally:
                if b is not None:
                    pattern_most[0] = max(pattern_most[0], b.units - b.left)

    string_emitter.work_budget = watched  # type: ignore[assignment]
    files = sorted(args.data.glob("*.json"))
    if args.limit:
        files = files[: args.limit]
    rows = []
    for path in files:
        schema = json.loads(path.read_text())["schema"]
        opts = options_module.Options(max_work=UNLIMITED, pattern_budget=UNLIMITED)
        pattern_most[0] = 0
        t = time.process_time()
        try:
            with dfa.work_budget(UNLIMITED, "the benchmark") as total:
                translate(load_schema(schema), opts)
            steps = UNLIMITED - total.left if total is not None else 0
            error = ""
        except Exception as e:  # a schema corral refuses: not part of the distribution
            steps, error = -1, type(e).__name__
        rows.append(
            {
                "schema": path.stem,
                "steps": steps,
                "pattern_steps": pattern_most[0],
                "cpu_s": round(time.process_time() - t, 4),
                "error": error,
            }
        )
    ok = [r for r in rows if r["steps"] >= 0]
    steps = sorted(r["steps"] for r in ok)
    patterns = sorted(r["pattern_steps"] for r in ok)

    def pct(xs: list[int], q: float) -> int:
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0

    defaults = options_module.Options()
    print(
        json.dumps(
            {
                "schemas": len(rows),
                "refused": len(rows) - len(ok),
                "steps_p50": pct(steps, 0.5),
                "steps_p99": pct(steps, 0.99),
                "steps_max": steps[-1] if steps else 0,
                "pattern_steps_p99": pct(patterns, 0.99),
                "pattern_steps_max": patterns[-1] if patterns else 0,
                "over_pattern_budget": sum(p > defaults.pattern_budget for p in patterns),
                "over_max_work": sum(s > defaults.max_work for s in steps),
                "max_work": defaults.max_work,
                "pattern_budget": defaults.pattern_budget,
                "steps_per_cpu_s": round(sum(steps) / max(1e-9, sum(r["cpu_s"] for r in ok))),
            }
        )
    )
    for r in sorted(ok, key=lambda r: -r["steps"])[:5]:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
