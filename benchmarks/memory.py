"""Memory side by side: resident memory per compiled JSON Schema and per live matcher.

Usage (from the repository root)::

    python benchmarks/memory.py --tokenizer llama3 [--schemas 100] [--matchers 1000]
        [--engines corral,llguidance,xgrammar]

Each engine runs in its own fresh process (this file with ``--child``), one after the
other, so that one engine's heap never counts against another's:

1. load the tokenizer, import the engine and build its tokenizer tables, compile and replay
   a small warm-up schema (code loading, JIT, lazily built tables): RSS ``base``;
2. compile MaskBench schemas (the files in the shuffled order of ``schemas.py``, seed 0)
   until ``--schemas`` of them compiled, passing over those the engine refuses, and fill
   each one's first mask: RSS ``compiled``; ``(compiled - base) / schemas`` is the memory
   per compiled schema (the automata and any per-schema caches the first mask builds);
3. make ``--matchers`` matchers, spread evenly over the compiled schemas, and advance each
   through the first half of its schema's first valid instance (serialised as
   ``schemas.py`` does, each token preceded by a mask fill, as in decoding), keeping them
   all alive: RSS ``live``; ``(live - compiled) / matchers`` is the memory per live matcher,
   including the lexer states and token caches that the masks built, and corral's masks
   stored by parse state (``automata/mask_cache.py``; reported apart, "stored masks").

RSS is the resident set size from ``/proc/self/statm`` after ``gc.collect()`` and glibc's
``malloc_trim(0)``. Prints a
Markdown table and writes JSON to ``benchmarks/results/memory-<tokenizer>-<date>.json``.
"""

from __future__ import annotations

import single_thread  # noqa: F401  (first: one thread for every engine)

# isort: split
import argparse
import contextlib
import ctypes
import datetime
import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from run import DEFAULT_TOKENIZERS_DIR, environment, resolve_tokenizer  # noqa: E402
from workloads import DEFAULT_MASKBENCH_DIR, encode, maskbench_file_order  # noqa: E402

POOL = 400  # MaskBench files tried, in order, to find --schemas that compile


def rss_bytes() -> int:
    """The resident set size of this process, after a full garbage collection and, with
    glibc, ``malloc_trim(0)`` (which returns freed heap pages to the system, so that memory
    allocated later shows as growth instead of reusing pages freed earlier, e.g. by the
    warm-up)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(args: argparse.Namespace) -> dict[str, Any]:
    """Steps 1-3 of the module docs for one engine, in this process."""
    from schemas import (
        SCHEMA_ENGINES,
        first_line,
        in_local_schema_order,
        property_rank,
        serialise,
    )
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(args.tokenizer_path))
    engine = SCHEMA_ENGINES[args.child](tok, len(tok), int(tok.eos_token_id))
    engine.warmup(tok)
    bm = engine.new_bitmask()
    files = maskbench_file_order(list(args.maskbench.glob("*.json")), "shuffle", 0)[:POOL]
    base = rss_bytes()

    compiled: list[tuple[str, Any, tuple[int, ...]]] = []
    refused: dict[str, str] = {}
    for path in files:
        if len(compiled) >= args.schemas:
            break
        spec = json.loads(path.read_text(encoding="utf-8"))
        schema = spec["schema"]
        valid = [t["data"] for t in spec.get("tests", []) if t.get("valid") is True]
        if not valid:
            continue
        rank = property_rank(schema)
        tokens = encode(tok, serialise(in_local_schema_order(valid[0], schema, schema, rank)))
        try:
            handle = engine.compile_schema(json.dumps(schema), 60.0)
            engine.fill(engine.start_matcher(handle), bm)
        except Exception as e:
            refused[path.stem] = first_line(e)
            continue
        compiled.append((path.stem, handle, tokens))
    after_compile = rss_bytes()

    live: list[Any] = []
    problems = 0
    for i in range(args.matchers):
        _, handle, tokens = compiled[i % len(compiled)]
        m = engine.new_matcher(handle)
        for t in tokens[: len(tokens) // 2]:
            engine.fill(m, bm)
            if not engine.consume(m, t):
                problems += 1
                break
        live.append(m)
    after_live = rss_bytes()
    # corral's masks stored by parse state (automata/mask_cache.py), part of "live"; a
    # whole mask shared by several grammars counted once
    caches = [h.mask_cache for _, h, _ in compiled if hasattr(h, "mask_cache")]
    mask_cache = 0
    if caches:
        from corral.automata.mask_cache import held_bytes

        mask_cache = held_bytes(caches)
    return {
        "engine": args.child,
        "vocab_size": len(tok),
        "schemas": len(compiled),
        "schema_names": [name for name, _, _ in compiled],
        "refused": refused,
        "matchers": len(live),
        "rejected_prefixes": problems,
        "tokens_consumed": sum(len(compiled[i % len(compiled)][2]) // 2 for i in range(len(live))),
        "rss_base_mb": base / 2**20,
        "rss_compiled_mb": after_compile / 2**20,
        "rss_live_mb": after_live / 2**20,
        "per_schema_kb": (after_compile - base) / len(compiled) / 1024,
        "per_matcher_kb": (after_live - after_compile) / len(live) / 1024,
        "mask_cache_mb": mask_cache / 2**20,
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    """The results as a Markdown table."""
    out = [
        "| engine | schemas | RSS after warm-up (MB) | per compiled schema (KB) "
        "| matchers | per live matcher (KB) | of which stored masks (MB) | RSS at the end (MB) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        out.append(
            f"| {r['engine']} | {r['schemas']} | {r['rss_base_mb']:.0f} "
            f"| {r['per_schema_kb']:.0f} | {r['matchers']} | {r['per_matcher_kb']:.1f} "
            f"| {r['mask_cache_mb']:.1f} | {r['rss_live_mb']:.0f} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokenizer", default="llama3", help="name under --tokenizers-dir, or a path")
    ap.add_argument("--tokenizers-dir", type=Path, default=DEFAULT_TOKENIZERS_DIR)
    ap.add_argument("--maskbench", type=Path, default=DEFAULT_MASKBENCH_DIR)
    ap.add_argument("--schemas", type=int, default=100)
    ap.add_argument("--matchers", type=int, default=1000)
    ap.add_argument("--engines", default="corral,llguidance,xgrammar")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "results")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--tokenizer-path", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return

    label, tok_path = resolve_tokenizer(args.tokenizer, args.tokenizers_dir)
    rows = []
    for engine in args.engines.split(","):
        cmd = [sys.executable, __file__, "--child", engine, "--tokenizer-path", str(tok_path)]
        cmd += ["--maskbench", str(args.maskbench), "--schemas", str(args.schemas)]
        cmd += ["--matchers", str(args.matchers)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
        if done.returncode != 0:
            raise SystemExit(f"{engine} failed:\n{done.stderr[-3000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "schema_names"}), flush=True)
    print()
    print(markdown(rows))
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"memory-{label}-{stamp}.json"
    env = environment(label, rows[0]["vocab_size"] if rows else 0)
    path.write_text(json.dumps({"environment": env, "rows": rows}, indent=1))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
