"""Side-by-side benchmark of corral, llguidance and XGrammar: mask time and compile time.

Usage (from the repository root)::

    python benchmarks/run.py [--tokenizer llama3] [--docs 200]
        [--workloads json,arithmetic,sql,clike,lisp]  # or sql-syncode,java-syncode,lark-lark,pddl
        [--engines corral,llguidance,xgrammar] [--out benchmarks/results]

For every engine and workload, in one single-threaded process:

1. *warm compile*: after one throwaway compile of a different small grammar (so the
   engine's code is loaded / JIT-compiled), compile the workload's grammar
   ``--compile-reps`` times from scratch (no compile cache) and report the median;
2. *first mask*: the first mask of a fresh matcher of the just-compiled grammar;
3. *per-token mask time*: replay every document's tokens; before each token, time only
   the engine's fill of the next-token bitmask (``time.perf_counter_ns``), then consume
   the token; at the end time the final mask (which must allow EOS). Documents an engine
   rejects are excluded from that engine's statistics and listed.

Then the masks are cross-checked between engines (popcount and identity per position) and,
in fresh subprocesses (``benchmarks/cold.py``, run twice, the second reported), the cold
start of each engine is timed. Results: a Markdown report on stdout and JSON under
``--out``.
"""

from __future__ import annotations

import single_thread  # noqa: F401  (first: one thread for every engine)

# isort: split
import argparse
import datetime
import gc
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from engines import (  # noqa: E402
    DEFAULT_ENGINES,
    ENGINES,
    Engine,
    GrammarCompileError,
    MatcherFactory,
    NotApplicableError,
)
from workloads import (  # noqa: E402
    ALL_WORKLOADS,
    DEFAULT_MASKBENCH_DIR,
    REPO_ROOT,
    Document,
    Workload,
)

DEFAULT_TOKENIZERS_DIR = REPO_ROOT.parent / "shared" / "tokenizers"
REFERENCE_ENGINE = "corral"


# ---------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------
def popcount(words: np.ndarray) -> int:
    """Number of set bits in a ``uint32`` array."""
    if hasattr(np, "bitwise_count"):
        return int(np.bitwise_count(words).sum())
    return int(np.unpackbits(words.view(np.uint8)).sum())  # pragma: no cover - numpy < 2


def bit_is_set(words: np.ndarray, token: int) -> bool:
    """Whether ``token``'s bit is set in a packed ``uint32`` mask."""
    return bool((int(words[token >> 5]) >> (token & 31)) & 1)


@dataclass
class DocRun:
    """One document replayed through one engine."""

    doc_id: str
    n_tokens: int
    accepted: bool
    reason: str = ""
    reject_position: int | None = None
    fill_ns: list[int] = field(default_factory=list)
    consume_ns: list[int] = field(default_factory=list)
    popcounts: np.ndarray | None = None
    mask_hashes: list[int] = field(default_factory=list)
    token_not_in_mask: int = 0
    matcher_new_ns: int = 0


def run_document(engine: Engine, factory: MatcherFactory, doc: Document) -> DocRun:
    """Replay ``doc`` through a fresh matcher, timing every mask fill (and consume).

    The timed region is exactly the engine's fill call (:meth:`Engine.bind_fill`); the
    checks (popcount, mask hash, whether the consumed token's bit is set) run outside it.
    """
    pc = time.perf_counter_ns
    t0 = pc()
    matcher = factory()
    matcher_new_ns = pc() - t0
    bitmask = engine.new_bitmask()
    words = engine.bitmask_words(bitmask)
    fill = engine.bind_fill(matcher, bitmask)
    consume = engine.consume
    n = len(doc.tokens)
    fill_ns = [0] * (n + 1)
    consume_ns = [0] * n
    pops = np.zeros(n + 1, np.int32)
    hashes: list[int] = []
    not_in_mask = 0
    run = DocRun(doc.doc_id, n, accepted=False, matcher_new_ns=matcher_new_ns)
    for i, tok in enumerate(doc.tokens):
        t0 = pc()
        fill()
        t1 = pc()
        fill_ns[i] = t1 - t0
        pops[i] = popcount(words)
        hashes.append(hash(words.tobytes()))
        if not bit_is_set(words, tok):
            not_in_mask += 1
        t0 = pc()
        ok = consume(matcher, tok)
        t1 = pc()
        consume_ns[i] = t1 - t0
        if not ok:
            run.reason = f"token {i} (id {tok}) rejected"
            run.reject_position = i
            run.token_not_in_mask = not_in_mask
            return run
    t0 = pc()
    fill()
    t1 = pc()
    fill_ns[n] = t1 - t0
    pops[n] = popcount(words)
    hashes.append(hash(words.tobytes()))
    run.fill_ns, run.consume_ns, run.popcounts, run.mask_hashes = fill_ns, consume_ns, pops, hashes
    run.token_not_in_mask = not_in_mask
    if not bit_is_set(words, engine.eos_id):
        run.reason = "EOS not allowed by the final mask"
        run.reject_position = n
    elif not engine.is_accepting(matcher):
        run.reason = "not accepting at the end"
        run.reject_position = n
    else:
        run.accepted = True
    return run


def mask_at(engine: Engine, factory: MatcherFactory, tokens: Sequence[int], pos: int) -> np.ndarray:
    """The engine's mask after consuming ``tokens[:pos]`` (untimed; for diff reports)."""
    matcher = factory()
    bitmask = engine.new_bitmask()
    for tok in tokens[:pos]:
        if not engine.consume(matcher, tok):
            raise RuntimeError(f"{engine.name} rejected a token while replaying for a diff")
    engine.fill(matcher, bitmask)
    return engine.bitmask_words(bitmask).copy()


def summarize_us(ns: Sequence[int]) -> dict[str, float] | None:
    """p50/p90/p99/max/mean in microseconds (and the count) of nanosecond timings."""
    if len(ns) == 0:
        return None
    a = np.asarray(ns, dtype=np.float64) / 1e3
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {
        "n": len(a),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": float(a.max()),
        "mean": float(a.mean()),
    }


@dataclass
class Cell:
    """The results of one engine on one workload."""

    engine: str
    workload: str
    grammar: str
    status: str = "ok"  # ok | n/a | compile error
    error: str = ""
    compile_ms: list[float] = field(default_factory=list)
    first_mask_us: float | None = None
    docs: list[DocRun] = field(default_factory=list)
    factory: MatcherFactory | None = None

    @property
    def accepted(self) -> list[DocRun]:
        return [d for d in self.docs if d.accepted]

    @property
    def rejected(self) -> list[DocRun]:
        return [d for d in self.docs if not d.accepted]

    def fill_ns(self) -> list[int]:
        return [t for d in self.accepted for t in d.fill_ns]

    def consume_ns(self) -> list[int]:
        return [t for d in self.accepted for t in d.consume_ns]

    def compile_median_ms(self) -> float | None:
        return float(np.median(self.compile_ms)) if self.compile_ms else None

    def slowest(self, k: int = 5) -> list[dict[str, Any]]:
        """The ``k`` slowest mask fills: document, position, microseconds."""
        items = [(t, d.doc_id, i) for d in self.accepted for i, t in enumerate(d.fill_ns)]
        items.sort(reverse=True)
        return [{"doc": doc, "position": i, "us": t / 1e3} for t, doc, i in items[:k]]


def run_cell(engine: Engine, workload: Workload, compile_reps: int) -> Cell:
    """Compile ``workload``'s grammar ``compile_reps`` times, then replay every document."""
    cell = Cell(engine.name, workload.name, engine.grammar_used(workload))
    factory: MatcherFactory | None = None
    for _ in range(compile_reps):
        gc.collect()
        t0 = time.perf_counter_ns()
        try:
            factory = engine.compile(workload.grammar_text(engine.name), workload.name)
        except NotApplicableError as e:
            cell.status, cell.error = "n/a", str(e)
            return cell
        except GrammarCompileError as e:
            cell.status, cell.error = "compile error", str(e)
            return cell
        cell.compile_ms.append((time.perf_counter_ns() - t0) / 1e6)
    assert factory is not None
    cell.factory = factory
    matcher = factory()
    bitmask = engine.new_bitmask()
    fill = engine.bind_fill(matcher, bitmask)
    t0 = time.perf_counter_ns()
    fill()
    cell.first_mask_us = (time.perf_counter_ns() - t0) / 1e3
    for doc in workload.documents:
        gc.collect()
        cell.docs.append(run_document(engine, factory, doc))
    return cell


# ---------------------------------------------------------------------------------------
# Cross-engine mask agreement
# ---------------------------------------------------------------------------------------
def compare_masks(
    ref: Cell,
    other: Cell,
    workload: Workload,
    engines: dict[str, Engine],
    tokenizer: Any,
    n_examples: int = 3,
) -> dict[str, Any]:
    """Compare two engines' masks position by position on the documents both accepted.

    Returns counts of positions with the same popcount and with identical masks, the
    largest popcount difference, and for the ``n_examples`` most different positions, the
    tokens allowed by one engine but not the other (recomputed untimed).
    """
    by_id = {d.doc_id: d for d in other.accepted}
    docs = {d.doc_id: d for d in workload.documents}
    positions = same_pop = same_mask = 0
    diffs: list[tuple[int, str, int, int, int]] = []
    for r in ref.accepted:
        o = by_id.get(r.doc_id)
        if o is None or r.popcounts is None or o.popcounts is None:
            continue
        positions += len(r.popcounts)
        same_pop += int((r.popcounts == o.popcounts).sum())
        same_mask += sum(a == b for a, b in zip(r.mask_hashes, o.mask_hashes, strict=False))
        delta = np.abs(r.popcounts.astype(np.int64) - o.popcounts)
        for i in np.flatnonzero(delta):
            diffs.append(
                (int(delta[i]), r.doc_id, int(i), int(r.popcounts[i]), int(o.popcounts[i]))
            )
    diffs.sort(key=lambda x: (-x[0], x[1], x[2]))
    examples = []
    for _d, doc_id, pos, pr, po in diffs[:n_examples]:
        doc = docs[doc_id]
        ex: dict[str, Any] = {
            "doc": doc_id,
            "position": pos,
            "prefix_tail": tokenizer.decode(list(doc.tokens[:pos]))[-60:],
            f"{ref.engine}_allowed": pr,
            f"{other.engine}_allowed": po,
        }
        try:
            assert ref.factory is not None and other.factory is not None
            a = mask_at(engines[ref.engine], ref.factory, doc.tokens, pos)
            b = mask_at(engines[other.engine], other.factory, doc.tokens, pos)
            n = min(len(a), len(b))
            only_a = np.flatnonzero(
                np.unpackbits((a[:n] & ~b[:n]).view(np.uint8), bitorder="little")
            )
            only_b = np.flatnonzero(
                np.unpackbits((b[:n] & ~a[:n]).view(np.uint8), bitorder="little")
            )
            ex[f"only_{ref.engine}"] = [tokenizer.decode([int(t)]) for t in only_a[:8]]
            ex[f"only_{ref.engine}_count"] = len(only_a)
            ex[f"only_{other.engine}"] = [tokenizer.decode([int(t)]) for t in only_b[:8]]
            ex[f"only_{other.engine}_count"] = len(only_b)
        except RuntimeError as e:
            ex["error"] = str(e)
        examples.append(ex)
    return {
        "reference": ref.engine,
        "engine": other.engine,
        "workload": workload.name,
        "positions": positions,
        "same_popcount": same_pop,
        "identical_mask": same_mask,
        "max_popcount_diff": diffs[0][0] if diffs else 0,
        "examples": examples,
    }


# ---------------------------------------------------------------------------------------
# Cold process
# ---------------------------------------------------------------------------------------
def run_cold(
    engine_name: str,
    tokenizer_path: Path,
    vocab_size: int,
    eos_id: int,
    runs: int = 2,
    *,
    schema: Path | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``cold.py`` ``runs`` times in fresh processes; the last run is the one reported
    (the first may populate Numba's on-disk cache). ``schema``: ``cold.py --schema``;
    ``env``: the processes' environment (default: this one's)."""
    cmd = [
        sys.executable,
        str(BENCH_DIR / "cold.py"),
        "--engine", engine_name,
        "--tokenizer-path", str(tokenizer_path),
        "--vocab-size", str(vocab_size),
        "--eos-id", str(eos_id),
    ]  # fmt: skip
    if schema is not None:
        cmd += ["--schema", str(schema)]
    results: list[dict[str, Any]] = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=dict(os.environ) if env is None else env
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            return {"engine": engine_name, "error": proc.stderr.strip()[-2000:], "runs": results}
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        res["process_wall_s"] = wall
        results.append(res)
    return {"engine": engine_name, "reported": results[-1], "runs": results}


# ---------------------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------------------
def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or platform.processor())."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def package_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_state() -> dict[str, Any]:
    """HEAD commit and the files changed under corral/ (others may be editing it)."""

    def git(*args: str) -> str:
        out = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        )
        return out.stdout.strip()

    dirty = [line for line in git("status", "--porcelain", "--", "corral").splitlines() if line]
    return {"commit": git("rev-parse", "HEAD") or None, "corral_changed_files": dirty}


PACKAGES = ("corral", "llguidance", "xgrammar", "numba", "numpy", "torch", "transformers",
            "tokenizers")  # fmt: skip


def environment(
    tokenizer_name: str, vocab_size: int, packages: Sequence[str] = PACKAGES
) -> dict[str, Any]:
    """Machine, interpreter and package versions."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": {d: package_version(d) for d in packages},
        "threads_env": {
            v: os.environ.get(v)
            for v in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "NUMBA_NUM_THREADS")
        },
        "tokenizer": tokenizer_name,
        "vocab_size": vocab_size,
        "git": git_state(),
        "timer_overhead_ns": timer_overhead_ns(),
    }


def timer_overhead_ns(n: int = 100_000) -> float:
    """Median cost of one back-to-back ``perf_counter_ns`` pair (included in every timing)."""
    pc = time.perf_counter_ns
    samples = []
    for _ in range(n):
        t0 = pc()
        samples.append(pc() - t0)
    return float(np.median(samples))


# ---------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------
def fmt(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def markdown_report(
    cells: list[Cell],
    workloads: list[Workload],
    setup: dict[str, dict[str, float]],
    cold: list[dict[str, Any]],
    agreement: list[dict[str, Any]],
    env: dict[str, Any],
    args: argparse.Namespace,
) -> str:
    """The human-readable report (Markdown)."""
    pk = env["packages"]
    lines = [
        f"# corral vs llguidance vs XGrammar: tokenizer {env['tokenizer']} "
        f"(V={env['vocab_size']:,}), {env['cpu_model']}, Python {env['python']}, "
        f"corral {pk['corral']}, llguidance {pk['llguidance']}, xgrammar {pk['xgrammar']}, "
        f"numba {pk['numba']}, numpy {pk['numpy']}; single thread; {env['date']}",
        "",
        f"Mask times in µs over every position of every accepted document (the final, "
        f"EOS-allowing mask included); compile: median of {args.compile_reps} compiles "
        f"in a warm process (after a throwaway compile of another grammar), no compile cache.",
        "",
        "| workload | engine | grammar | compile ms | 1st mask µs | p50 | p90 | p99 | max "
        "| mean | tokens | docs ok | rejected |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for wl in workloads:
        for c in (c for c in cells if c.workload == wl.name):
            if c.status != "ok":
                lines.append(
                    f"| {wl.name} | {c.engine} | {c.grammar} | {c.status} | | | | | | | | | |"
                )
                continue
            s = summarize_us(c.fill_ns()) or {}
            lines.append(
                f"| {wl.name} | {c.engine} | {c.grammar} | {fmt(c.compile_median_ms())} "
                f"| {fmt(c.first_mask_us)} | {fmt(s.get('p50'))} | {fmt(s.get('p90'))} "
                f"| {fmt(s.get('p99'))} | {fmt(s.get('max'))} | {fmt(s.get('mean'))} "
                f"| {s.get('n', 0):,} | {len(c.accepted)}/{len(c.docs)} | {len(c.rejected)} |"
            )
    # ratios
    others = [e for e in ("llguidance", "xgrammar") if any(c.engine == e for c in cells)]
    if REFERENCE_ENGINE in {c.engine for c in cells} and others:
        head = "| workload |"
        sep = "|---|"
        for e in others:
            head += f" p50 corral/{e} | p99 corral/{e} | compile corral/{e} |"
            sep += "--:|--:|--:|"
        lines += ["", "Ratios (< 1: corral faster):", "", head, sep]
        for wl in workloads:
            ref = next(
                (c for c in cells if c.engine == REFERENCE_ENGINE and c.workload == wl.name), None
            )
            row = f"| {wl.name} |"
            for e in others:
                oc = next((c for c in cells if c.engine == e and c.workload == wl.name), None)
                if ref is None or oc is None or ref.status != "ok" or oc.status != "ok":
                    row += " - | - | - |"
                    continue
                rs, os_ = summarize_us(ref.fill_ns()), summarize_us(oc.fill_ns())
                row += (
                    f" {ratio(rs and rs['p50'], os_ and os_['p50'])} "
                    f"| {ratio(rs and rs['p99'], os_ and os_['p99'])} "
                    f"| {ratio(ref.compile_median_ms(), oc.compile_median_ms())} |"
                )
            lines.append(row)
    # setup
    lines += [
        "",
        "Tokenizer setup in this process (ms; corral.Vocabulary.from_hf, "
        "llguidance.hf.from_tokenizer, xgrammar.TokenizerInfo + GrammarCompiler):",
        "",
        "| engine | import ms | setup ms |",
        "|---|--:|--:|",
    ]
    for name, s in setup.items():
        lines.append(f"| {name} | {fmt(s['import_ms'])} | {fmt(s['setup_ms'])} |")
    # cold
    if cold:
        lines += [
            "",
            "Cold process (fresh `python` per engine, run twice, second run shown; JSON grammar; "
            "tokenizer loaded before, untimed):",
            "",
            "| engine | import ms | setup ms | 1st compile ms | 1st mask µs | 1st doc ms "
            "| 2nd compile ms | process wall s |",
            "|---|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for cr in cold:
            r = cr.get("reported")
            if r is None:
                lines.append(f"| {cr['engine']} | error: {cr.get('error', '')[-200:]!r} |||||||")
                continue
            lines.append(
                f"| {cr['engine']} | {fmt(r['import_ms'])} | {fmt(r['setup_ms'])} "
                f"| {fmt(r['compile_ms'])} | {fmt(r['first_mask_us'])} "
                f"| {fmt(r['first_doc_ms'], 2)} "
                f"| {fmt(r['second_compile_ms'])} | {fmt(r['process_wall_s'], 2)} |"
            )
        first = [(cr["engine"], cr["runs"][0]) for cr in cold if cr.get("runs")]
        if first:
            lines.append("")
            lines.append(
                "First cold run (may populate Numba's cache): "
                + "; ".join(
                    f"{e}: import {r['import_ms']:.0f} ms, setup {r['setup_ms']:.0f} ms, "
                    f"compile {r['compile_ms']:.0f} ms, 1st mask {r['first_mask_us']:.0f} µs"
                    for e, r in first
                )
            )
    # agreement
    if agreement:
        lines += [
            "",
            f"Mask agreement with {REFERENCE_ENGINE} (positions of documents both accepted):",
            "",
            "| workload | engine | positions | same popcount | identical mask | max Δpopcount |",
            "|---|---|--:|--:|--:|--:|",
        ]
        for a in agreement:
            n = a["positions"] or 1
            lines.append(
                f"| {a['workload']} | {a['engine']} | {a['positions']:,} "
                f"| {100 * a['same_popcount'] / n:.1f}% | {100 * a['identical_mask'] / n:.1f}% "
                f"| {a['max_popcount_diff']:,} |"
            )
    # problems
    problems = [
        f"- {c.engine} / {c.workload}: grammar ported: {wl.dialect_texts[c.engine][1]}"
        for wl in workloads
        for c in cells
        if c.workload == wl.name and c.engine in wl.dialect_texts
    ]
    for c in cells:
        if c.status != "ok":
            problems.append(f"- {c.engine} / {c.workload}: {c.status}: {c.error[:300]}")
        for d in c.rejected:
            problems.append(f"- {c.engine} / {c.workload}: rejected {d.doc_id}: {d.reason}")
        misses = sum(d.token_not_in_mask for d in c.accepted)
        if misses:
            problems.append(
                f"- {c.engine} / {c.workload}: {misses} consumed tokens were not set in the "
                "preceding mask"
            )
    for wl in workloads:
        if wl.skipped:
            why = Counter(r.split(" (")[0] for r in wl.skipped.values())
            shown = ", ".join(f"{n} {reason}" for reason, n in why.most_common())
            problems.append(f"- {wl.name}: left out {len(wl.skipped)} candidates ({shown})")
    if problems:
        lines += ["", "Rejections and other notes:", "", *problems]
    return "\n".join(lines)


def cell_json(c: Cell) -> dict[str, Any]:
    """A cell's results for the JSON output (no raw per-token timings unless --raw)."""
    return {
        "engine": c.engine,
        "workload": c.workload,
        "grammar": c.grammar,
        "status": c.status,
        "error": c.error,
        "compile_ms": {
            "median": c.compile_median_ms(),
            "min": min(c.compile_ms) if c.compile_ms else None,
            "first": c.compile_ms[0] if c.compile_ms else None,
            "all": c.compile_ms,
        },
        "first_mask_us": c.first_mask_us,
        "mask_us": summarize_us(c.fill_ns()),
        "consume_us": summarize_us(c.consume_ns()),
        "matcher_new_us_median": (
            float(np.median([d.matcher_new_ns for d in c.docs])) / 1e3 if c.docs else None
        ),
        "docs_total": len(c.docs),
        "docs_accepted": len(c.accepted),
        "rejected": [
            {
                "doc": d.doc_id,
                "tokens": d.n_tokens,
                "position": d.reject_position,
                "reason": d.reason,
            }
            for d in c.rejected
        ],
        "consumed_tokens_not_in_mask": sum(d.token_not_in_mask for d in c.accepted),
        "slowest_masks": c.slowest(),
        "per_doc": [
            {
                "doc": d.doc_id,
                "tokens": d.n_tokens,
                "accepted": d.accepted,
                "mask_total_us": sum(d.fill_ns) / 1e3,
                "mask_max_us": max(d.fill_ns) / 1e3 if d.fill_ns else None,
            }
            for d in c.docs
        ],
    }


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Benchmark corral vs llguidance vs XGrammar (mask and compile times).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--tokenizer", default="llama3", help="name under --tokenizers-dir, or a path")
    ap.add_argument("--tokenizers-dir", type=Path, default=DEFAULT_TOKENIZERS_DIR)
    ap.add_argument("--docs", type=int, default=200, help="number of JSON documents")
    ap.add_argument("--max-tokens", type=int, default=2000, help="skip longer JSON documents")
    ap.add_argument("--sample", choices=("shuffle", "first"), default="shuffle",
                    help="MaskBench file order: shuffled with --seed, or sorted")  # fmt: skip
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--maskbench", type=Path, default=DEFAULT_MASKBENCH_DIR)
    ap.add_argument("--workloads", default=",".join(ALL_WORKLOADS))
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES),
                    help=f"comma-separated, from: {', '.join(ENGINES)}")  # fmt: skip
    ap.add_argument("--compile-reps", type=int, default=5, help="warm compiles per grammar")
    ap.add_argument(
        "--cold-runs", type=int, default=2, help="cold subprocesses per engine (0: skip)"
    )
    ap.add_argument("--cold-engines", default="corral",
                    help="engines timed in a cold process ('all': every engine)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "results")
    ap.add_argument("--raw", action="store_true", help="also write every per-token timing")
    return ap.parse_args(argv)


def resolve_tokenizer(name: str, tokenizers_dir: Path) -> tuple[str, Path]:
    """``(label, path)`` of a tokenizer given by name (under ``tokenizers_dir``) or path."""
    p = Path(name)
    if p.is_dir():
        return p.name, p
    p = tokenizers_dir / name
    if not p.is_dir():
        raise SystemExit(f"tokenizer {name!r} not found (looked in {tokenizers_dir})")
    return name, p


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    engine_names = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in engine_names:
        if e not in ENGINES:
            raise SystemExit(f"unknown engine {e!r}; known: {', '.join(ENGINES)}")
    workload_names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    tok_label, tok_path = resolve_tokenizer(args.tokenizer, args.tokenizers_dir)

    from transformers import AutoTokenizer
    from workloads import load_workloads

    tokenizer = AutoTokenizer.from_pretrained(str(tok_path))
    vocab_size = len(tokenizer)
    eos_id = tokenizer.eos_token_id
    if eos_id is None:
        raise SystemExit(f"tokenizer {tok_label} has no eos_token_id")
    workloads = load_workloads(
        workload_names,
        tokenizer,
        n_docs=args.docs,
        maskbench_dir=args.maskbench,
        max_tokens=args.max_tokens,
        sample=args.sample,
        seed=args.seed,
    )
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    for wl in workloads:
        log(f"workload {wl.name}: {len(wl.documents)} documents, {wl.n_tokens} tokens"
            + (f", {len(wl.skipped)} skipped" if wl.skipped else ""))  # fmt: skip

    available = []
    for name in engine_names:
        missing = ENGINES[name].missing_modules()
        if missing:
            log(f"skipping engine {name}: not installed ({', '.join(missing)})")
        else:
            available.append(name)

    # Cold processes first: the first one may populate Numba's on-disk cache.
    cold: list[dict[str, Any]] = []
    cold_names = available if args.cold_engines == "all" else [
        e.strip() for e in args.cold_engines.split(",") if e.strip() in available
    ]  # fmt: skip
    if args.cold_runs > 0:
        for name in cold_names:
            log(f"cold process x{args.cold_runs}: {name}")
            cold.append(run_cold(name, tok_path, vocab_size, eos_id, args.cold_runs))

    loadavg_start = os.getloadavg()
    cells: list[Cell] = []
    engines: dict[str, Engine] = {}
    setup: dict[str, dict[str, float]] = {}
    for name in available:
        cls = ENGINES[name]
        t0 = time.perf_counter()
        cls.import_modules()
        t1 = time.perf_counter()
        engine = cls(tokenizer, vocab_size, eos_id)
        t2 = time.perf_counter()
        setup[name] = {"import_ms": (t1 - t0) * 1e3, "setup_ms": (t2 - t1) * 1e3}
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
        log(f"{name}: setup {setup[name]['setup_ms']:.0f} ms; warm-up compile")
        engine.warmup(tokenizer)
        engines[name] = engine
        for wl in workloads:
            t = time.perf_counter()
            cell = run_cell(engine, wl, args.compile_reps)
            cells.append(cell)
            s = summarize_us(cell.fill_ns())
            log(
                f"  {name:>16} {wl.name:<10} {cell.status:<8} compile "
                f"{fmt(cell.compile_median_ms())} ms, p50 {fmt(s and s['p50'])} µs, "
                f"p99 {fmt(s and s['p99'])} µs, rejected {len(cell.rejected)} "
                f"({time.perf_counter() - t:.1f} s)"
            )
    loadavg_end = os.getloadavg()

    agreement: list[dict[str, Any]] = []
    if REFERENCE_ENGINE in engines:
        for wl in workloads:
            ref = next(c for c in cells if c.engine == REFERENCE_ENGINE and c.workload == wl.name)
            for c in cells:
                if c.workload != wl.name or c.engine == REFERENCE_ENGINE:
                    continue
                if ref.status == "ok" and c.status == "ok":
                    agreement.append(compare_masks(ref, c, wl, engines, tokenizer))

    now = datetime.datetime.now()
    env = environment(tok_label, vocab_size)
    env.update(
        date=now.isoformat(timespec="seconds"),
        loadavg_start=loadavg_start,
        loadavg_end=loadavg_end,
        command=" ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
    )
    report = markdown_report(cells, workloads, setup, cold, agreement, env, args)
    print(report)

    out = {
        "environment": env,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "engine_notes": {n: ENGINES[n].notes for n in available},
        "workloads": [
            {
                "name": wl.name,
                "grammar_file": wl.grammar_file,
                "source": wl.source,
                "documents": len(wl.documents),
                "tokens": wl.n_tokens,
                "doc_ids": [d.doc_id for d in wl.documents],
                "skipped": wl.skipped,
            }
            for wl in workloads
        ],
        "setup": setup,
        "cold": cold,
        "results": [cell_json(c) for c in cells],
        "agreement": agreement,
        "report_markdown": report,
    }
    if args.raw:
        out["raw_mask_ns"] = {
            f"{c.engine}/{c.workload}": {d.doc_id: d.fill_ns for d in c.accepted} for c in cells
        }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{tok_label}-{now.strftime('%Y-%m-%dT%H%M%S')}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=1, default=float), encoding="utf-8")
    tmp.replace(path)
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
