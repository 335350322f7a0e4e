"""Span constraints at document scale: compile time, memory and mask time.

Usage (from the repository root)::

    python benchmarks/spans.py --tokenizer llama3 [--sizes 1000,10000,100000]

For each size, the source is the first N characters of real English text: the docstrings
of a fixed list of standard-library modules (the same text on every machine with the same
Python). The schema is ``{"quote": <string with x-corral-span>}``. Measured, best of 3
unless said:

* ``automaton``: the span automaton alone (``corral.grammar.spans.span_dfa``);
* ``compile``: ``corral.compile(schema, vocab, source=doc, cache=False)``, everything
  (automaton, grammar, lexer tables, first token caches);
* ``table MB``: the lexer and parser tables of the compiled grammar (``Tables.nbytes``);
* masks: 20 quotes of 12 words taken from the document, each emitted token by token
  (the tokenizer's own tokens of ``{"quote": "...`` + ``"}``); one mask per token,
  timed, the first mask of a state included. The same outputs under the plain schema
  (``{"quote": {"type": "string"}}``) are the reference: "ordinary strings".

Prints a Markdown table and writes the JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(REPO_ROOT / "tests"))

MODULES = (
    "argparse", "collections", "typing", "unittest", "email", "http.client", "json",
    "logging", "pathlib", "subprocess", "threading", "asyncio", "decimal", "datetime",
    "functools", "itertools", "re", "socket", "sqlite3", "tarfile", "zipfile", "csv",
    "inspect", "pickle", "random", "statistics", "string", "textwrap", "urllib.parse",
)  # fmt: skip


def english_text(n: int) -> str:
    """The first ``n`` characters of the docstrings of :data:`MODULES` and their members."""
    import importlib

    parts: list[str] = []
    for name in MODULES:
        mod = importlib.import_module(name)
        parts.append(inspect.getdoc(mod) or "")
        for _, obj in sorted(vars(mod).items()):
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ == name:
                parts.append(inspect.getdoc(obj) or "")
        if sum(len(p) for p in parts) > n:
            break
    text = "\n\n".join(p for p in parts if p)
    if len(text) < n:
        raise SystemExit(f"only {len(text)} characters of text; ask for fewer")
    return text[:n]


def best(f, k: int = 3) -> float:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(k):
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return min(out)


def mask_times(compiled, tok, outputs: list[str]) -> list[float]:  # type: ignore[no-untyped-def]
    import numpy as np

    times: list[float] = []
    bm = np.zeros(compiled.words, np.int32)
    for out in outputs:
        ids = tok.encode(out, add_special_tokens=False)
        m = compiled.matcher()
        for t in ids:
            t0 = time.perf_counter()
            m.fill_bitmask(bm)
            times.append(time.perf_counter() - t0)
            m.consume(t)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--sizes", default="1000,10000,100000")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    from support.tokenizers import load_tokenizer

    import corral
    from corral.automata.vocabulary import Vocabulary
    from corral.grammar.spans import SpanOptions, span_dfa

    tok = load_tokenizer(args.tokenizer)
    vocab = Vocabulary.from_hf(tok)
    span = {
        "type": "object",
        "properties": {"quote": {"type": "string", "x-corral-span": True}},
        "required": ["quote"],
        "additionalProperties": False,
    }
    plain = {**span, "properties": {"quote": {"type": "string"}}}
    corral.compile(plain, vocab, source=None)  # kernels loaded before timing
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        doc = english_text(n)
        words = doc.split(" ")
        rng = random.Random(n)
        quotes = []
        while len(quotes) < 20:
            i = rng.randrange(max(1, len(words) - 12))
            q = " ".join(words[i : i + 12])
            if q and q in doc:
                quotes.append(json.dumps({"quote": q}, ensure_ascii=False))
        t_auto = best(lambda doc=doc: span_dfa([doc], SpanOptions(), encoding="json"))
        t_compile = best(lambda doc=doc: corral.compile(span, vocab, source=doc, cache=False))
        compiled = corral.compile(span, vocab, source=doc, cache=False)
        ref = corral.compile(plain, vocab, cache=False)
        for out in quotes:  # every quote is allowed (and the grammar accepts it)
            m = compiled.matcher()
            assert m.consume_bytes(out.encode()) and m.is_accepting(), out
        ms = np.array(mask_times(compiled, tok, quotes)) * 1e6
        mr = np.array(mask_times(ref, tok, quotes)) * 1e6
        row = {
            "chars": n,
            "automaton_s": t_auto,
            "compile_s": t_compile,
            "lexer_states": compiled.tables.n_lexer_states,
            "table_mb": compiled.tables.nbytes() / 1e6,
            "mask_us_p50": float(np.percentile(ms, 50)),
            "mask_us_p99": float(np.percentile(ms, 99)),
            "plain_mask_us_p50": float(np.percentile(mr, 50)),
            "plain_mask_us_p99": float(np.percentile(mr, 99)),
            "masks": int(ms.shape[0]),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print("| source chars | automaton | compile | lexer states | table | mask p50 / p99 "
          "| ordinary string p50 / p99 |")  # fmt: skip
    print("|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        print(
            f"| {r['chars']:,} | {r['automaton_s'] * 1e3:.0f} ms | {r['compile_s'] * 1e3:.0f} ms "
            f"| {r['lexer_states']:,} | {r['table_mb']:.1f} MB "
            f"| {r['mask_us_p50']:.0f} / {r['mask_us_p99']:.0f} µs "
            f"| {r['plain_mask_us_p50']:.0f} / {r['plain_mask_us_p99']:.0f} µs |"
        )
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    path = BENCH_DIR / "results" / f"spans-{args.tokenizer}-{stamp}.json"
    path.write_text(json.dumps({"tokenizer": args.tokenizer, "rows": rows}, indent=1))
    print(f"\nwrote {path.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
