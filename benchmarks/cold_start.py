"""First use in a fresh process, side by side: corral (a fresh install with its prebuilt
kernels; nothing prebuilt and an empty Numba cache; a second process) against llguidance
and XGrammar.

Usage (from the repository root)::

    python benchmarks/cold_start.py --tokenizer llama3 [--engines corral,llguidance,xgrammar]

Each measurement is one fresh Python process (``benchmarks/cold.py --schema``): load the
tokenizer (untimed), import the engine, build its tokenizer tables, compile a small JSON
Schema (:data:`SCHEMA`), fill the first mask, then mask and consume its instance token by
token (the first document). corral's Numba cache is a fresh ``NUMBA_CACHE_DIR`` per
scenario, and so is its cache directory (``CORRAL_CACHE_DIR``, where the token trie is
stored), so neither a checkout's own ``__pycache__`` nor the user's cache ever helps:

* ``corral, fresh install``: the package's prebuilt kernels (``corral/jit.py``; built by
  ``pip install``, here by the editable install of this checkout) and nothing in Numba's
  cache; skipped, with a line saying so, where this checkout has none for its sources;
* ``corral, nothing prebuilt, empty cache``: ``CORRAL_PREBUILT=0``, nothing compiled (what
  a fresh install without prebuilt kernels pays);
* ``corral, nothing prebuilt, second process``: the cache that process filled;
* the same without jsonschema's format extras: ``rfc3987_syntax`` made unimportable in
  the process (as in an install of corral alone, whose dependencies do not pull it).

Then ``corral warmup`` from an empty Numba cache, wall and CPU time (with the prebuilt
kernels; ``--warmup-from-scratch`` also without them).

The peers have no JIT: one fresh process each. "to first mask" is import + tokenizer
tables + compile + first mask, what a new process waits before its first constrained
token. Prints a Markdown table and writes the JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

from run import DEFAULT_TOKENIZERS_DIR, environment, resolve_tokenizer, run_cold  # noqa: E402

#: A small JSON Schema (a person record) and a valid instance.
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
INSTANCE = {"name": "Ada Lovelace", "age": 36, "email": "ada@example.org", "tags": ["math"]}
#: what ``jsonschema[format-nongpl]`` adds that is slow to import: ``rfc3987-syntax`` builds
#: 38 Lark parsers when ``jsonschema`` is imported (corral's format checks are its own)
WITHOUT_EXTRAS = "rfc3987_syntax"


def _env(cache: Path, without: str = "", prebuilt: bool = True) -> dict[str, str]:
    """This environment with Numba's cache at ``cache`` and corral's cache directory (the
    stored token tries, ``corral/automata/trie_file.py``) in ``cache/corral``, this
    checkout importable, the modules ``without`` (comma-separated) treated as not installed
    (``cold.py``) and, unless ``prebuilt``, corral's prebuilt kernels ignored
    (``CORRAL_PREBUILT=0``).

    Python may write bytecode (``PYTHONDONTWRITEBYTECODE`` is removed): an installed
    package has its ``.pyc`` files (pip writes them when it installs a wheel, an editable
    install at its first import), so a process that recompiled every corral module from
    source (about 0.1 s here) would measure no user's process."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), HF_HUB_OFFLINE="1")
    env["CORRAL_CACHE_DIR"] = str(cache / "corral")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["CORRAL_PREBUILT"] = "1" if prebuilt else "0"
    env["CORRAL_BENCH_WITHOUT"] = without
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return env


def _cold(
    engine: str,
    tok: Path,
    vocab_size: int,
    eos: int,
    schema: Path,
    cache: Path,
    without: str = "",
    prebuilt: bool = True,
) -> dict[str, Any]:
    """One fresh ``cold.py --schema`` process; its row, with ``to_first_mask_ms``."""
    env = _env(cache, without, prebuilt)
    out = run_cold(engine, tok, vocab_size, eos, runs=1, schema=schema, env=env)
    if "error" in out:
        raise SystemExit(f"{engine}: cold.py failed:\n{out['error']}")
    row: dict[str, Any] = out["reported"]
    row["to_first_mask_ms"] = (
        row["import_ms"] + row["setup_ms"] + row["compile_ms"] + row["first_mask_us"] / 1e3
    )
    return row


def _warmup(cache: Path, prebuilt: bool) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds ``python -m corral warmup`` took with Numba's
    cache at ``cache``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "corral", "warmup", "--quiet"],
        env=_env(cache, prebuilt=prebuilt),
        check=True,
        timeout=3600,
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def _has_prebuilt() -> bool:
    """Whether the corral this benchmark runs has prebuilt kernels for its sources."""
    out = subprocess.run(
        [sys.executable, "-c", "from corral.jit import prebuilt_dir; print(prebuilt_dir())"],
        env=_env(Path(tempfile.gettempdir()) / "unused"),
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip() != "None"


def main() -> None:
    """Run the scenarios; print the table; write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--tokenizer", default="llama3", help="a name under ../shared/tokenizers, or a path"
    )
    ap.add_argument("--engines", default="corral,llguidance,xgrammar")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "results")
    ap.add_argument(
        "--warmup-from-scratch",
        action="store_true",
        help="also time `corral warmup` with the prebuilt kernels ignored (minutes)",
    )
    args = ap.parse_args()

    from transformers import AutoTokenizer

    label, tok_path = resolve_tokenizer(args.tokenizer, DEFAULT_TOKENIZERS_DIR)
    tok = AutoTokenizer.from_pretrained(str(tok_path))
    vocab_size = len(tok)
    eos = int(tok.eos_token_id)
    rows: list[dict[str, Any]] = []
    warmups: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        schema = Path(tmp) / "schema.json"
        schema.write_text(json.dumps({"schema": SCHEMA, "instance": INSTANCE}))
        for engine in args.engines.split(","):
            if engine != "corral":
                row = _cold(engine, tok_path, vocab_size, eos, schema, Path(tmp) / "none")
                rows.append({"scenario": engine, **row})
                print(json.dumps(rows[-1]), flush=True)
                continue
            scenarios: list[tuple[str, Path, bool, str]] = []
            if _has_prebuilt():
                # a fresh install: the package's prebuilt kernels, nothing in Numba's cache
                scenarios.append(("corral, fresh install", Path(tmp) / "numba-fresh", True, ""))
            else:
                print("no prebuilt kernels in this checkout (pip install -e . builds them)")
            cache = Path(tmp) / "numba-empty"
            scenarios += [
                ("corral, nothing prebuilt, empty cache", cache, False, ""),
                ("corral, nothing prebuilt, second process", cache, False, ""),
                (
                    "corral, nothing prebuilt, second process, without jsonschema's format extras",
                    cache,
                    False,
                    WITHOUT_EXTRAS,
                ),
            ]
            for name, where, prebuilt, without in scenarios:
                row = _cold(engine, tok_path, vocab_size, eos, schema, where, without, prebuilt)
                rows.append({"scenario": name, **row})
                print(json.dumps(rows[-1]), flush=True)
            # with prebuilt=True but none in this checkout, warmup compiles everything:
            # that is the from-scratch measurement, labelled as such only when asked for
            kinds = [True] if _has_prebuilt() else []
            if args.warmup_from_scratch:
                kinds.append(False)
            elif not kinds:
                print("`corral warmup` not timed: no prebuilt kernels (--warmup-from-scratch)")
            for prebuilt in kinds:
                wall, cpu = _warmup(Path(tmp) / f"numba-warmup-{prebuilt}", prebuilt)
                warmups.append({"prebuilt": prebuilt, "wall_s": wall, "cpu_s": cpu})
                print(json.dumps(warmups[-1]), flush=True)

    print()
    print(f"Cold start, {label} ({vocab_size:,} tokens), one fresh process per row")
    print()
    print(
        "| engine, scenario | import ms | tokenizer tables ms | compile ms | first mask ms "
        "| to first mask s | first document ms (tokens) |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        name = r["scenario"]
        print(
            f"| {name} | {r['import_ms']:,.0f} | {r['setup_ms']:,.0f} | {r['compile_ms']:,.0f} "
            f"| {r['first_mask_us'] / 1e3:,.1f} | {r['to_first_mask_ms'] / 1e3:,.2f} "
            f"| {r['first_doc_ms']:,.0f} ({r['first_doc_tokens']}) |"
        )
    for w in warmups:
        kind = "with the prebuilt kernels" if w["prebuilt"] else "nothing prebuilt"
        print(f"\n`corral warmup`, {kind}, empty Numba cache: {w['wall_s']:.1f} s wall, "
              f"{w['cpu_s']:.1f} s CPU")  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    path = args.out / f"cold-start-{label}-{stamp}.json"
    env = environment(label, vocab_size)
    path.write_text(
        json.dumps(
            {"environment": env, "tokenizer": label, "rows": rows, "warmups": warmups}, indent=1
        )
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
