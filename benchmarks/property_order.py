"""Properties in any order (``property_order="any"``) against schema order, on MaskBench.

For each schema (MaskBench files in shuffled order), both settings in turn, in one
process: the time to first mask (compile with no cache, then the first mask), the masks
while replaying the first valid instance, and the verdicts on every instance written as
given (compact ``json.dumps``, keys in the instance's own order): valid instances
accepted, invalid ones rejected. Instances are not reordered, so a valid instance whose
keys are out of schema order counts as rejected in schema order. Usage::

    python benchmarks/property_order.py --schemas 300 --tokenizer llama3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent / "tests"))

from run import environment, resolve_tokenizer  # noqa: E402
from support.schema_runner import serialise  # noqa: E402
from workloads import DEFAULT_MASKBENCH_DIR, maskbench_file_order  # noqa: E402

MODES = ("schema", "any")


def accepts(compiled: Any, ids: list[int]) -> bool:
    m = compiled.matcher()
    return all(m.try_consume(t) for t in ids) and m.is_accepting()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schemas", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default="llama3")
    shared = BENCH_DIR.parent.parent / "shared" / "tokenizers"
    ap.add_argument("--tokenizers-dir", type=Path, default=shared)
    ap.add_argument("--maskbench", type=Path, default=DEFAULT_MASKBENCH_DIR)
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "results")
    args = ap.parse_args(argv)

    from transformers import AutoTokenizer

    import corral

    label, path = resolve_tokenizer(args.tokenizer, args.tokenizers_dir)
    tok = AutoTokenizer.from_pretrained(str(path))
    vocab = corral.Vocabulary.from_hf(tok)
    bm = corral.allocate_bitmask(1, vocab.size)
    warm = corral.compile({"type": "object"}, vocab, cache=False)
    warm.matcher().fill_bitmask(bm)
    files = maskbench_file_order(list(args.maskbench.glob("*.json")), "shuffle", args.seed)
    files = files[: args.schemas]
    ttfm: dict[str, list[float]] = {m: [] for m in MODES}
    masks: dict[str, list[float]] = {m: [] for m in MODES}
    verdicts = {m: {"valid": 0, "valid_accepted": 0, "invalid": 0, "invalid_rejected": 0}
                for m in MODES}  # fmt: skip
    refused = dict.fromkeys(MODES, 0)
    for i, p in enumerate(files):
        data = json.loads(p.read_text())
        text = json.dumps(data["schema"])
        tests = [(serialise(t["data"]), bool(t["valid"])) for t in data.get("tests", [])]
        encoded = [(tok.encode(s, add_special_tokens=False), v) for s, v in tests]
        for mode in MODES:
            t0 = time.perf_counter()
            try:
                c = corral.compile(
                    text, vocab, cache=False, precompute=False, property_order=mode,
                    time_budget_s=30,
                )  # fmt: skip
                c.matcher().fill_bitmask(bm)
            except corral.CorralError:
                refused[mode] += 1
                continue
            ttfm[mode].append(time.perf_counter() - t0)
            first_valid = next((ids for ids, v in encoded if v), None)
            if first_valid is not None:
                m = c.matcher()
                for t in first_valid:
                    t1 = time.perf_counter()
                    m.fill_bitmask(bm)
                    masks[mode].append(time.perf_counter() - t1)
                    if not m.try_consume(t):
                        break
            for ids, valid in encoded:
                ok = accepts(c, ids)
                v = verdicts[mode]
                if valid:
                    v["valid"] += 1
                    v["valid_accepted"] += ok
                else:
                    v["invalid"] += 1
                    v["invalid_rejected"] += not ok
        if (i + 1) % 50 == 0:
            print(f"{i + 1} schemas", file=sys.stderr, flush=True)
    summary = {}
    for mode in MODES:
        summary[mode] = {
            "schemas": len(ttfm[mode]),
            "refused": refused[mode],
            "ttfm_ms": {
                q: 1e3 * pct(ttfm[mode], x) for q, x in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
            },
            "ttfm_total_s": sum(ttfm[mode]),
            "mask_us": {q: 1e6 * pct(masks[mode], x) for q, x in (("p50", 0.5), ("p99", 0.99))},
            "mask_mean_us": 1e6 * statistics.fmean(masks[mode]) if masks[mode] else None,
            **verdicts[mode],
        }
        print(mode, json.dumps(summary[mode]))
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"property-order-{label}-{time.strftime('%Y-%m-%dT%H%M%S')}.json"
    result = {"environment": environment(label, vocab.size), "summary": summary}
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
