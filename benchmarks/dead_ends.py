"""Dead-end rates of random walks, per JSON Schema keyword.

A *dead end* is a point where a matcher allows no token at all (not even EOS): the
grammar let the output reach a state from which no valid completion exists. corral's
grammar is exact for most keywords; the keywords it leaves to the final check can dead-end
at the end of a document. This measures how often, for one schema per keyword.

Each walk starts a matcher and repeats: compute the mask; if EOS is allowed, stop with
probability 1/2 (a complete document); otherwise draw a token, with probability 1/2
among the allowed single-byte tokens (punctuation and short pieces, so that walks close
their values) and else among all allowed tokens. A walk that reaches ``--max-tokens``
is *unfinished*.

``python benchmarks/dead_ends.py [--walks 50] [--seed 0] [--tokenizer llama3]`` prints a
Markdown table (and ``--json PATH`` writes the counts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# (keyword, schema): the keyword is what the schema relies on the final check for
# (or did, before the grammar could express it).
CASES: list[tuple[str, dict[str, Any]]] = [
    ("minProperties", {"type": "object", "minProperties": 1}),
    (
        "minProperties (declared)",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
            "additionalProperties": False,
            "minProperties": 1,
        },
    ),
    (
        "maxProperties",
        {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 1},
    ),
    (
        "dependentRequired",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "additionalProperties": False,
            "dependentRequired": {"a": ["b"]},
        },
    ),
    ("uniqueItems", {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}),
    ("contains", {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}}),
    ("not (type)", {"not": {"type": ["string", "number", "object", "array"]}}),
    ("not (const)", {"type": "integer", "minimum": 0, "maximum": 3, "not": {"const": 0}}),
    (
        "if/then/else (type)",
        {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "boolean"}},
    ),
    (
        "if/then (property)",
        {
            "type": "object",
            "properties": {"k": {"enum": ["a", "b"]}, "x": {"type": "integer"}},
            "required": ["k"],
            "additionalProperties": False,
            "if": {"properties": {"k": {"const": "a"}}},
            "then": {"required": ["x"]},
        },
    ),
    ("oneOf", {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}),
    (
        "multipleOf (decimal, checked)",
        {
            "type": "number",
            "minimum": 0.05,
            "maximum": 0.95,
            "multipleOf": 0.1,
            "not": {"const": 0.5},
        },
    ),
]


def walk(compiled: Any, single: Any, rng: Any, max_tokens: int) -> str:
    """One random walk: ``"complete"``, ``"dead end"`` or ``"unfinished"``."""
    import numpy as np

    import corral

    m = compiled.matcher()
    mask = corral.allocate_bitmask(1, compiled.vocab_size)
    eos = set(compiled.eos_ids.tolist())
    for _ in range(max_tokens):
        m.fill_bitmask(mask)
        bits = np.unpackbits(mask.view(np.uint8)[0], bitorder="little")[: compiled.vocab_size]
        allowed = np.flatnonzero(bits)
        if allowed.size == 0:
            return "dead end"
        if eos & set(allowed.tolist()) and rng.random() < 0.5:
            return "complete"
        choices = np.array([t for t in allowed.tolist() if t not in eos])
        if choices.size == 0:
            return "complete"
        short = choices[single[choices]]
        pool = short if short.size and rng.random() < 0.5 else choices
        m.consume(int(pool[rng.integers(pool.size)]))
    return "unfinished"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--walks", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support.tokenizers import load_vocab

    import corral

    vocab = load_vocab(args.tokenizer)
    _, offsets = vocab.byte_table()
    single = np.zeros(vocab.size, bool)
    single[: len(offsets) - 1] = np.diff(offsets) == 1
    rows = []
    print("| keyword | walks | complete | dead ends | unfinished | compile ms |")
    print("|---|--:|--:|--:|--:|--:|")
    for name, schema in CASES:
        t0 = time.perf_counter()
        try:
            compiled = corral.compile(schema, vocab)
        except corral.CorralError as e:
            print(f"| {name} | refused: {type(e).__name__} | | | | |")
            rows.append({"keyword": name, "refused": type(e).__name__})
            continue
        ms = (time.perf_counter() - t0) * 1e3
        rng = np.random.default_rng(args.seed)
        counts = {"complete": 0, "dead end": 0, "unfinished": 0}
        for _ in range(args.walks):
            counts[walk(compiled, single, rng, args.max_tokens)] += 1
        rows.append({"keyword": name, "walks": args.walks, **counts, "compile_ms": ms})
        print(
            f"| {name} | {args.walks} | {counts['complete']} | {counts['dead end']} | "
            f"{counts['unfinished']} | {ms:.0f} |",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
