"""GBNF grammars (llama.cpp's corpus) side by side: compile time and masks.

Every grammar of ``tests/data/gbnf/`` (llama.cpp's ``grammars/``), with documents:

* ``json`` and ``json_arr``: MaskBench instances (``json.dumps``; for ``json_arr`` an array
  of them written as the grammar asks, one element a line), kept when the grammar's
  character-level reading accepts them (``json.gbnf`` reads at most 16 digits and no
  ``0`` after an exponent's first digit);
* the others: sentences drawn from the grammar's character-level reading (the test
  suite's reference, ``tests/support/gbnf_reference.py``), seeded.

Engines: corral (``compile(text, vocab, format="gbnf")``), llguidance
(``gbnf_to_lark(text)``, then its Lark front end; the conversion is timed with the
compile) and XGrammar (``Grammar.from_ebnf(text)`` compiled, timed likewise). Each
document is replayed token by token (the tokenizer's encoding) through a fresh matcher,
timing every mask (``run.py``'s replay). Usage::

    python benchmarks/gbnf.py --tokenizer llama3 --docs 20
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent / "tests"))

from engines import (  # noqa: E402
    CorralEngine,
    GrammarCompileError,
    LLGuidanceEngine,
    MatcherFactory,
    XGrammarEngine,
)
from run import environment, resolve_tokenizer, run_cell, summarize_us  # noqa: E402
from workloads import (  # noqa: E402
    DEFAULT_MASKBENCH_DIR,
    Document,
    Workload,
    encode,
    first_valid_instance,
    maskbench_file_order,
)

GBNF_DIR = BENCH_DIR.parent / "tests" / "data" / "gbnf"


class CorralGbnf(CorralEngine):
    name = "corral"

    def compile(self, lark_text: str, workload: str) -> MatcherFactory:
        if workload == "warmup":  # the warm-up grammar is Lark text
            return super().compile(lark_text, workload)
        try:
            c = self._corral.compile(lark_text, self.vocab, cache=False, format="gbnf")
        except self._corral.CorralError as e:
            raise GrammarCompileError(str(e)) from e
        return c.matcher


class LLGuidanceGbnf(LLGuidanceEngine):
    name = "llguidance"

    def compile(self, lark_text: str, workload: str) -> MatcherFactory:
        if workload == "warmup":
            return super().compile(lark_text, workload)
        from llguidance.gbnf_to_lark import gbnf_to_lark

        try:
            lark = gbnf_to_lark(lark_text)
        except Exception as e:  # its parser's own errors (GbnfToLarkError, ValueError)
            raise GrammarCompileError(str(e)) from e
        return super().compile(lark, workload)


class XGrammarGbnf(XGrammarEngine):
    name = "xgrammar"

    def _compile(self, lark_text: str, workload: str) -> Any:
        if workload == "warmup":
            return super()._compile(lark_text, workload)
        return self.compiler.compile_grammar(self._xgr.Grammar.from_ebnf(lark_text))


ENGINES = {e.name: e for e in (CorralGbnf, LLGuidanceGbnf, XGrammarGbnf)}


def documents(name: str, text: str, n: int, tokenizer: Any, seed: int) -> list[Document]:
    from support.gbnf_reference import recognizes, sentence, to_bnf

    from corral.grammar.gbnf.syntax import parse_gbnf

    ref = to_bnf(parse_gbnf(text))
    out: list[Document] = []
    if name in ("json", "json_arr"):
        files = maskbench_file_order(list(DEFAULT_MASKBENCH_DIR.glob("*.json")), "shuffle", seed)
        for p in files:
            data = first_valid_instance(p)
            if data is None:
                continue
            if name == "json":
                if not isinstance(data, dict):
                    continue  # json.gbnf's root is an object
                doc = json.dumps(data)
            else:
                items = data if isinstance(data, list) and data else [data]
                doc = "[\n" + ",\n".join(json.dumps(x) for x in items) + "]"
            if len(doc) > 3000 or not recognizes(ref, doc):
                continue
            out.append(Document(p.stem, doc, encode(tokenizer, doc)))
            if len(out) >= n:
                break
        return out
    rng = random.Random(f"{name}/{seed}")
    seen: set[str] = set()
    for i in range(20 * n):
        doc = sentence(ref, rng, max_depth=10)
        if len(doc) < 8 or doc in seen:
            continue
        seen.add(doc)
        out.append(Document(f"{name}-{i}", doc, encode(tokenizer, doc)))
        if len(out) >= n:
            break
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default="llama3")
    shared = BENCH_DIR.parent.parent / "shared" / "tokenizers"
    ap.add_argument("--tokenizers-dir", type=Path, default=shared)
    ap.add_argument("--engines", default="corral,llguidance,xgrammar")
    ap.add_argument("--grammars", default=",".join(sorted(p.stem for p in GBNF_DIR.glob("*.gbnf"))))
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--compile-reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "results")
    args = ap.parse_args(argv)

    from transformers import AutoTokenizer

    label, path = resolve_tokenizer(args.tokenizer, args.tokenizers_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    vocab_size, eos = len(tokenizer), tokenizer.eos_token_id
    engines = []
    for name in args.engines.split(","):
        cls = ENGINES[name]
        cls.import_modules()
        engine = cls(tokenizer, vocab_size, eos)
        engine.warmup(tokenizer)
        engines.append(engine)
    rows: list[dict[str, Any]] = []
    for g in args.grammars.split(","):
        text = (GBNF_DIR / f"{g}.gbnf").read_text()
        docs = documents(g, text, args.docs, tokenizer, args.seed)
        wl = Workload(g, f"tests/data/gbnf/{g}.gbnf", text, docs, "see the module docs")
        for engine in engines:
            t0 = time.perf_counter()
            cell = run_cell(engine, wl, args.compile_reps)
            fills = summarize_us(cell.fill_ns())
            row = {
                "grammar": g,
                "engine": engine.name,
                "status": cell.status,
                "error": cell.error[:300],
                "compile_ms": cell.compile_median_ms(),
                "first_mask_us": cell.first_mask_us,
                "documents": len(docs),
                "tokens": sum(len(d.tokens) for d in docs),
                "accepted": len(cell.accepted),
                "rejected": [(d.doc_id, d.reason) for d in cell.rejected][:5],
                "mask_us": fills,
                "wall_s": time.perf_counter() - t0,
            }
            rows.append(row)
            p50 = f"{fills['p50']:.1f}" if fills else "-"
            p99 = f"{fills['p99']:.1f}" if fills else "-"
            cms = row["compile_ms"]
            print(
                f"{g:11} {engine.name:11} {cell.status:14} compile "
                f"{'-' if cms is None else f'{cms:8.2f}'} ms  mask p50 {p50:>8} us  "
                f"p99 {p99:>8} us  accepted {row['accepted']}/{len(docs)}",
                flush=True,
            )
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    out = args.out / f"gbnf-{label}-{stamp}.json"
    result = {"environment": environment(label, vocab_size), "rows": rows}
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
