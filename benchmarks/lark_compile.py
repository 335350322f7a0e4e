"""Compile time of Lark grammars, side by side: the first grammar of a process, and again.

Usage (from the repository root)::

    python benchmarks/lark_compile.py --tokenizer llama3
    python benchmarks/lark_compile.py --workloads sql-syncode,pddl --engines corral,llguidance

For every workload (``workloads.py``: the project's JSON grammar and the real grammars of
``real_grammars.py``) and engine, one fresh Python process loads the tokenizer and builds
the engine's tokenizer tables, then compiles the workload's grammar (in the engine's
dialect where it has one):

* ``setup_ms``: the engine's tokenizer tables, made once per tokenizer before any grammar
  (for llguidance, ``llguidance.hf.from_tokenizer``, its token trie included; for corral,
  ``Vocabulary.from_hf``, its token trie read from corral's cache folder included), its
  modules already imported;
* ``first_ms``: the first compile of the process (for corral: Lark's parser of grammars,
  the regex tables and the kernels loaded from Numba's on-disk cache, all paid here;
  choosing a real grammar's documents parses them with Lark first, so the process then
  forgets Lark's parser of grammars);
* ``again_ms``: the median of ``--reps`` further compiles of the same text, from scratch
  (no compile cache; automata that recur across grammars stay built, as in a server),
  measured in one more process per workload that holds every engine and alternates
  them compile by compile (the order reversed every round), so that the machine's
  drift, which on a shared machine moves a compile's time by up to 2x over minutes, hits
  every engine alike; ``again_alone_ms`` is the same median taken in the engine's own
  process, after its first compile.

Each compile is what ``run.py`` times (``Engine.compile``: for corral,
``corral.compile(text, vocab, cache=False)``). Prints a Markdown table with the ratios to
llguidance and writes the JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_WORKLOADS = "json,sql-syncode,java-syncode,lark-lark,pddl"


def _one_thread() -> None:
    for var in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[var] = "1"


def _load(workload: str, tokenizer_path: str) -> tuple[Any, Any]:
    """In a fresh child process: one thread, the tokenizer and the workload."""
    _one_thread()
    sys.path.insert(0, str(HERE))
    from transformers import AutoTokenizer
    from workloads import load_workloads

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    (wl,) = load_workloads([workload], tokenizer, n_docs=1)
    return tokenizer, wl


def _engine(name: str, tokenizer: Any, wl: Any) -> tuple[Any, str, float]:
    """Engine ``name`` with its tokenizer tables built, the workload's grammar text in its
    dialect, and the ms the tables took (the engine's modules imported before)."""
    from engines import ENGINES

    cls = ENGINES[name]
    cls.import_modules()
    t = time.perf_counter()
    engine = cls(tokenizer, len(tokenizer), tokenizer.eos_token_id)
    return engine, wl.grammar_text(name), (time.perf_counter() - t) * 1e3


def child_again(
    engine_names: list[str], workload: str, tokenizer_path: str, reps: int
) -> dict[str, list[float]]:
    """Run in a fresh process: every engine compiles the workload's grammar once, then
    ``reps`` rounds of one compile each, engines alternated (reversed every round)."""
    tokenizer, wl = _load(workload, tokenizer_path)
    engines = []
    for name in engine_names:
        engine, text, _ = _engine(name, tokenizer, wl)
        engine.compile(text, wl.name)
        engines.append((name, engine, text))
    times: dict[str, list[float]] = {name: [] for name in engine_names}
    for r in range(reps):
        for name, engine, text in engines if r % 2 == 0 else engines[::-1]:
            t = time.perf_counter()
            engine.compile(text, wl.name)
            times[name].append((time.perf_counter() - t) * 1e3)
    return times


def child(engine_name: str, workload: str, tokenizer_path: str, reps: int) -> dict[str, Any]:
    """Run in the fresh process: time the first and the later compiles."""
    tokenizer, wl = _load(workload, tokenizer_path)
    # choosing the real grammars' documents ran Lark's parser on them, which built Lark's
    # parser of grammars: forget it, so the first compile pays for it as in a new process
    import lark.load_grammar

    if hasattr(lark.load_grammar._get_parser, "cache"):
        del lark.load_grammar._get_parser.cache
    engine, text, setup_ms = _engine(engine_name, tokenizer, wl)
    c0, t0 = time.process_time(), time.perf_counter()
    engine.compile(text, wl.name)
    first = ((time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3)
    again = []
    for _ in range(reps):
        t = time.perf_counter()
        engine.compile(text, wl.name)
        again.append((time.perf_counter() - t) * 1e3)
    return {
        "engine": engine_name,
        "workload": workload,
        "setup_ms": setup_ms,
        "first_ms": first[0],
        "first_cpu_ms": first[1],
        "again_alone_ms": statistics.median(again),
        "again_alone_all_ms": again,
    }


def _bytecode_written() -> None:
    """Write the bytecode of corral's modules, as an install does: a first compile then
    reads it, also where ``PYTHONDONTWRITEBYTECODE`` is set or a module was just edited
    (compiling a large edited module from source took 100-150 ms of a first compile)."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("corral")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            compileall.compile_dir(folder, quiet=1)


def main() -> None:
    """Parse the arguments, run one process per (workload, engine), print and save."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default="llama3", help="a name under ../shared/tokenizers")
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS)
    ap.add_argument("--engines", default="corral,llguidance")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--child", nargs=2, metavar=("ENGINE", "WORKLOAD"), help=argparse.SUPPRESS)
    ap.add_argument(
        "--child-again", nargs=2, metavar=("ENGINES", "WORKLOAD"), help=argparse.SUPPRESS
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    tok = Path(args.tokenizer)
    if not tok.is_dir():
        tok = HERE.parent.parent / "shared" / "tokenizers" / args.tokenizer
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], str(tok), args.reps)))
        return
    if args.child_again:
        engines = args.child_again[0].split(",")
        print(json.dumps(child_again(engines, args.child_again[1], str(tok), args.reps)))
        return
    _bytecode_written()
    rows = []
    cmd = [sys.executable, __file__, "--tokenizer", str(tok), "--reps", str(args.reps)]
    for wl in args.workloads.split(","):
        got = []
        for eng in args.engines.split(","):
            out = subprocess.run(
                [*cmd, "--child", eng, wl], capture_output=True, text=True, check=False
            )
            if out.returncode != 0:
                print(f"{eng} {wl}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                continue
            got.append(json.loads(out.stdout.strip().splitlines()[-1]))
        if not got:
            continue
        names = ",".join(r["engine"] for r in got)
        out = subprocess.run(
            [*cmd, "--child-again", names, wl], capture_output=True, text=True, check=False
        )
        if out.returncode != 0:
            print(f"{wl} (again, alternated): failed\n{out.stderr[-2000:]}", file=sys.stderr)
            continue
        again = json.loads(out.stdout.strip().splitlines()[-1])
        for row in got:
            row["again_all_ms"] = again[row["engine"]]
            row["again_ms"] = statistics.median(again[row["engine"]])
            rows.append(row)
            print(
                f"{wl:14s} {row['engine']:12s} setup {row['setup_ms']:7.0f} ms  "
                f"first {row['first_ms']:8.1f} ms "
                f"(cpu {row['first_cpu_ms']:.0f})  again {row['again_ms']:8.1f} ms "
                f"(alone {row['again_alone_ms']:.1f})",
                file=sys.stderr,
                flush=True,
            )
    by = {(r["workload"], r["engine"]): r for r in rows}
    head = "| workload | engine | setup ms | first compile ms | again ms | first ÷ llguidance "
    print(head + "| again ÷ llguidance |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for r in rows:
        ref = by.get((r["workload"], "llguidance"))
        ratios = [
            f"{r[k] / ref[k]:.1f}×" if ref and ref[k] > 0 else "" for k in ("first_ms", "again_ms")
        ]
        print(
            f"| {r['workload']} | {r['engine']} | {r['setup_ms']:,.0f} | {r['first_ms']:,.1f} "
            f"| {r['again_ms']:,.1f} "
            f"| {ratios[0]} | {ratios[1]} |"
        )
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    out_path = args.out or HERE / "results" / f"lark-compile-{tok.name}-{stamp}.json"
    out_path.write_text(json.dumps({"tokenizer": tok.name, "rows": rows}, indent=1) + "\n")
    print(f"\nwrote {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
