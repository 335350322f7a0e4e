"""corral alone, before and after a change: mask and consume time per position, interleaved.

For changes to the hot path (kernels, matcher, chart): replays real documents token by
token and records, at every position, the *minimum* of ``--reps`` fills of the next-token
bitmask (and of 3 consumes), which is robust to a machine shared with other work; then
the distribution over positions (mean, p50, p99). The compiled grammars' mask cache is
off, so every fill runs the kernel (a repeated fill would otherwise be a lookup); the
cache's own effect is measured by single fills, as ``run.py`` and ``schemas.py`` do.

Workloads (llama3 by default): ``--schemas`` MaskBench schemas, each compiled and replayed
on its first valid instance, and the first valid instances of ``--docs`` other MaskBench
files under ``tests/data/grammars/json.lark`` (cut at 800 tokens).

Usage (from the repository root)::

    # one measurement of the corral importable from PYTHONPATH
    python benchmarks/mask_replay.py run --out after.json

    # before/after: two checkouts (e.g. `git worktree add ../before HEAD~1`), alternated
    python benchmarks/mask_replay.py compare ../before . --rounds 3 --out benchmarks/results/X.json
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workloads import encode, first_valid_instance, maskbench_file_order, read_grammar

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SHARED = REPO_ROOT.parent / "shared"
_DOCS_FROM = 100  # json.lark documents come from the files after the first 100 (schemas')
METRICS = ("fill_mean", "fill_p50", "fill_p99", "consume_mean", "consume_p99")


def _kernel_only(compiled: Any) -> Any:
    """``compiled`` with its mask cache off (in checkouts that have one): every fill runs
    the kernel, so that the minimum of repeated fills is the kernel's time, not a lookup."""
    cache = getattr(compiled, "mask_cache", None)
    if cache is not None:
        cache.max_bytes = 0
    return compiled


def _documents(
    maskbench: Path, tok: Any, vocab: Any, n_schemas: int, n_docs: int
) -> dict[str, list[tuple[Any, list[int]]]]:
    """``{workload: [(compiled grammar, token ids)]}`` (see the module docs)."""
    import corral

    files = maskbench_file_order(list(maskbench.glob("*.json")), "shuffle", 1)
    schemas: list[tuple[Any, list[int]]] = []
    for i, f in enumerate(files):
        if len(schemas) >= n_schemas:
            break
        if i >= _DOCS_FROM:
            raise SystemExit(f"fewer than {n_schemas} schemas among the first {_DOCS_FROM} files")
        inst = first_valid_instance(f)
        if inst is None:
            continue
        try:
            compiled = _kernel_only(
                corral.compile(json.loads(f.read_text(encoding="utf-8"))["schema"], vocab)
            )
        except corral.CorralError:
            continue
        ids = list(encode(tok, json.dumps(inst)))
        if len(ids) <= 1500:
            schemas.append((compiled, ids))
    lark = _kernel_only(corral.compile(read_grammar("json"), vocab))
    docs: list[tuple[Any, list[int]]] = []
    for f in files[_DOCS_FROM : _DOCS_FROM + n_docs]:  # the valid instances among these files
        inst = first_valid_instance(f)
        if inst is not None:
            docs.append((lark, list(encode(tok, json.dumps(inst)))[:800]))
    return {"schemas": schemas, "json.lark": docs}


def measure(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """One replay of every workload; microseconds per position."""
    import numpy as np
    from transformers import AutoTokenizer

    import corral

    tok = AutoTokenizer.from_pretrained(str(args.tokenizer))
    vocab = corral.Vocabulary.from_hf(tok)
    bitmask = corral.allocate_bitmask(1, vocab.size)
    out: dict[str, dict[str, float]] = {}
    workloads = _documents(args.maskbench, tok, vocab, args.schemas, args.docs)
    for name, docs in workloads.items():
        fills: list[int] = []
        consumes: list[int] = []
        for compiled, ids in docs:
            m = compiled.matcher()
            m.fill_bitmask(bitmask, 0)  # builds what the first mask needs, untimed
            for t in ids:
                best = 1 << 62
                for _ in range(args.reps):
                    t0 = time.perf_counter_ns()
                    m.fill_bitmask(bitmask, 0)
                    best = min(best, time.perf_counter_ns() - t0)
                fills.append(best)
                best = 1 << 62
                for _ in range(3):
                    t0 = time.perf_counter_ns()
                    ok = m.try_consume(t)
                    best = min(best, time.perf_counter_ns() - t0)
                    if not ok:
                        break
                    m.rollback(1)
                if not m.try_consume(t):
                    break
                consumes.append(best)
        f = np.array(fills) / 1e3
        c = np.array(consumes) / 1e3
        out[name] = {
            "positions": float(len(f)),
            "fill_mean": float(f.mean()),
            "fill_p50": float(np.median(f)),
            "fill_p99": float(np.percentile(f, 99)),
            "consume_mean": float(c.mean()),
            "consume_p99": float(np.percentile(c, 99)),
        }
    return out


def compare(args: argparse.Namespace) -> None:
    """Alternate ``run`` between two checkouts and print the medians over rounds."""
    import numpy as np

    trees = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    runs: dict[str, list[dict[str, dict[str, float]]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for side in order:
                path = Path(tmp) / f"{side}-{r}.json"
                cmd = [sys.executable, __file__, "run", "--out", str(path), "--reps",
                       str(args.reps), "--schemas", str(args.schemas), "--docs",
                       str(args.docs), "--tokenizer", str(args.tokenizer), "--maskbench",
                       str(args.maskbench)]  # fmt: skip
                env = dict(os.environ, PYTHONPATH=str(trees[side]), HF_HUB_OFFLINE="1")
                subprocess.run(cmd, env=env, check=True)
                runs[side].append(json.loads(path.read_text()))
    print(f"us per position; median over {args.rounds} rounds (before -> after)")
    for w in runs["before"][0]:
        cells = []
        for m in METRICS:
            b = float(np.median([r[w][m] for r in runs["before"]]))
            a = float(np.median([r[w][m] for r in runs["after"]]))
            cells.append(f"{m} {b:.2f} -> {a:.2f} ({a / b:.2f}x)")
        print(f"{w} ({int(runs['before'][0][w]['positions'])} positions): " + "; ".join(cells))
    if args.out is not None:
        record = {"before": str(trees["before"]), "after": str(trees["after"]), "runs": runs}
        args.out.write_text(json.dumps(record, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "compare"):
        p = sub.add_parser(name)
        if name == "run":
            p.add_argument("--out", type=Path, required=True)
        else:
            p.add_argument("before")
            p.add_argument("after")
            p.add_argument("--rounds", type=int, default=3)
            p.add_argument("--out", type=Path, default=None, help="also write every round (JSON)")
        p.add_argument("--reps", type=int, default=7, help="fills per position (minimum kept)")
        p.add_argument("--schemas", type=int, default=30)
        p.add_argument("--docs", type=int, default=60)
        p.add_argument("--tokenizer", type=Path, default=DEFAULT_SHARED / "tokenizers/llama3")
        p.add_argument("--maskbench", type=Path, default=DEFAULT_SHARED / "data/maskbench")
    args = ap.parse_args()
    if args.cmd == "run":
        args.out.write_text(json.dumps(measure(args), indent=1))
    else:
        compare(args)


if __name__ == "__main__":
    main()
