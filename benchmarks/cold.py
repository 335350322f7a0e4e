"""Cold-process measurement, run by ``run.py`` and ``cold_start.py`` in a fresh subprocess
per engine.

``python benchmarks/cold.py --engine corral --tokenizer-path PATH --vocab-size V --eos-id E``
prints one JSON line with, in this order, for a process that has not touched the engine yet:

* ``import_ms``: importing the engine's modules (for corral: ``corral`` and
  ``corral.automata``, which pull in Numba and declare the kernels);
* ``setup_ms``: the engine's tokenizer preprocessing (``corral.Vocabulary.from_hf``,
  ``llguidance.hf.from_tokenizer``, ``xgrammar.TokenizerInfo.from_huggingface`` + compiler);
* ``compile_ms``: the first compile of the constraint in the process (the Lark JSON
  grammar; for corral this includes compiling, or loading from Numba's on-disk cache, the
  kernels the compile runs);
* ``first_mask_us``: the first mask of a fresh matcher (for corral, with the kernels the
  first mask runs);
* ``first_doc_ms``: masks and consumes of the first valid JSON example of ``examples.json``
  (for corral, with the kernels met first there);
* ``second_compile_ms``: compiling the same grammar again in the same, now warm, process.

With ``--schema FILE`` (a JSON file ``{"schema": ..., "instance": ...}``) the constraint is
that JSON Schema (compiled as ``benchmarks/schemas.py`` does) and the document its instance,
serialised compactly.

The tokenizer is loaded (``transformers`` imported) before any of this, untimed.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "NUMBA_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import sys  # noqa: E402

# modules to treat as not installed (comma-separated), e.g. ``rfc3987_syntax``: jsonschema
# imports it when present (its format extras) and it builds 38 Lark parsers at import
for _name in filter(None, os.environ.get("CORRAL_BENCH_WITHOUT", "").split(",")):
    sys.modules[_name] = None  # type: ignore[assignment]

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


def main() -> None:
    """Time one engine's cold start and print the result as JSON on stdout."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--tokenizer-path", required=True)
    ap.add_argument("--vocab-size", type=int, required=True)
    ap.add_argument("--eos-id", type=int, required=True)
    ap.add_argument("--schema", type=Path, default=None, help="JSON Schema workload (see above)")
    args = ap.parse_args()

    t = time.perf_counter()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_path)
    tokenizer_load_ms = (time.perf_counter() - t) * 1e3

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from engines import ENGINES
    from workloads import GRAMMAR_DIR, read_grammar

    if args.schema is None:
        cls = ENGINES[args.engine]
        spec_text = read_grammar("json")
        examples = json.loads((GRAMMAR_DIR / "examples.json").read_text(encoding="utf-8"))
        doc = examples["json"]["valid"][0]
    else:
        from schemas import SCHEMA_ENGINES

        cls = SCHEMA_ENGINES[args.engine]
        spec = json.loads(args.schema.read_text(encoding="utf-8"))
        spec_text = json.dumps(spec["schema"])
        doc = json.dumps(spec["instance"], separators=(",", ":"))
    tokens = [int(x) for x in tokenizer.encode(doc, add_special_tokens=False)]

    def compile_it() -> Any:
        if args.schema is None:
            return engine.compile(spec_text, "json")
        handle = engine.compile_schema(spec_text, 600.0)
        return lambda: engine.new_matcher(handle)

    pc = time.perf_counter_ns
    t_start = pc()
    cls.import_modules()
    t_import = pc()
    engine = cls(tokenizer, args.vocab_size, args.eos_id)
    t_setup = pc()
    factory = compile_it()
    t_compile = pc()
    matcher = factory()
    bitmask = engine.new_bitmask()
    t0 = pc()
    engine.fill(matcher, bitmask)
    t_first_mask = pc() - t0
    t_doc0 = pc()
    ok = True
    for i, tok in enumerate(tokens):
        if i:
            engine.fill(matcher, bitmask)
        if not engine.consume(matcher, tok):
            ok = False
            break
    engine.fill(matcher, bitmask)
    t_doc = pc() - t_doc0
    t_end = pc()
    t1 = pc()
    compile_it()
    second_compile = pc() - t1

    print(
        json.dumps(
            {
                "engine": args.engine,
                "tokenizer_load_ms": tokenizer_load_ms,
                "import_ms": (t_import - t_start) / 1e6,
                "setup_ms": (t_setup - t_import) / 1e6,
                "compile_ms": (t_compile - t_setup) / 1e6,
                "first_mask_us": t_first_mask / 1e3,
                "first_doc_ms": t_doc / 1e6,
                "first_doc_tokens": len(tokens),
                "first_doc_accepted": ok and engine.is_accepting(matcher),
                "total_ms": (t_end - t_start) / 1e6,
                "second_compile_ms": second_compile / 1e6,
            }
        )
    )


if __name__ == "__main__":
    main()
