"""Costs that grow with the input: the matcher on long outputs, and compiling wide or long
schemas.

Usage (from the repository root)::

    python benchmarks/long_inputs.py [--tokenizer llama3] [--sizes 500,1000,4000]

Measured, one process, the Numba cache warm (run ``corral warmup`` first):

* ``output``: for each case and size, the tokenizer's tokens of a valid output are fed to a
  fresh matcher one at a time, with a mask before each (``fill_bitmask``, then
  ``consume``); the total time and the masks' share. Cases: a JSON array of ``n``
  integers (``{"type": "array", "items": {"type": "integer"}}``), Lark's right-recursive
  ``start: "a" start | "a"`` over ``n`` bytes, and the ambiguous ``a: a a | "x" |`` over
  ``n // 8`` bytes (Earley's cubic case: kept small).
* ``compile``: ``corral.compile(schema, vocab, cache=False)`` of 5,000 optional integer
  properties, and of a ``const`` string of 1 MB (grammar and tables).

Prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--sizes", default="500,1000,4000")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from support.tokenizers import load_tokenizer

    import corral

    tok = load_tokenizer(args.tokenizer)
    vocab = corral.Vocabulary.from_hf(tok)

    def output(case: str, spec: object, text: str) -> None:
        m = corral.compile(spec, vocab, cache=False).matcher()
        mask = corral.allocate_bitmask(1, vocab.size)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        masks = 0.0
        t0 = time.perf_counter()
        for t in ids:
            a = time.perf_counter()
            m.fill_bitmask(mask)
            masks += time.perf_counter() - a
            m.consume(t)
        total = time.perf_counter() - t0
        assert m.is_accepting()
        row = {"output": case, "bytes": len(text), "tokens": len(ids), "total_s": total,
               "masks_s": masks}  # fmt: skip
        print(json.dumps(row), flush=True)

    for n in (int(x) for x in args.sizes.split(",")):
        ints = {"type": "array", "items": {"type": "integer"}}
        output(f"integer array of {n}", ints, json.dumps(list(range(n))))
        output(f"right recursion over {n} B", 'start: "a" start | "a"', "a" * n)
        output(f"ambiguous over {n // 8} B", 'start: a\na: a a | "x" |', "x" * (n // 8))

    wide = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(5000)}}
    for case, schema in [
        ("5,000 optional properties", wide),
        ("1 MB const", {"const": "x" * 10**6}),
    ]:
        t0 = time.perf_counter()
        g = corral.Grammar.from_json_schema(schema)
        t1 = time.perf_counter()
        corral.compile(g, vocab, cache=False)
        t2 = time.perf_counter()
        print(json.dumps({"compile": case, "grammar_s": t1 - t0, "tables_s": t2 - t1}), flush=True)


if __name__ == "__main__":
    main()
