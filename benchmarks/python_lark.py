"""Lark's ``python.lark`` with Lark's ``PythonIndenter``: modules of Python's own standard
library, token by token.

The grammar is Lark's own, unmodified, with its post-lexer compiled into the rules
(``Grammar.from_lark(..., postlex=PythonIndenter())``). Files: the first ``--files``
modules of 1–16 KB of the standard library, by name, its top directory first, then its
packages (not ``test``, ``idlelib``, ``site-packages``). Each is encoded
with the tokenizer and replayed through a fresh matcher, every token checked against the
mask before it is read; Lark's LALR parser with the same post-lexer is the reference
verdict. Reported: build and compile time (CPU), files accepted by each, and mask times.
No peer engine reads ``python.lark`` with its post-lexer, so corral runs alone. Usage::

    python benchmarks/python_lark.py --tokenizer llama3 --files 100 --width 64
"""

from __future__ import annotations

import argparse
import json
import sys
import sysconfig
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent / "tests"))


def main() -> None:
    import lark
    import numpy as np
    from lark.indenter import PythonIndenter
    from support.tokenizers import load_tokenizer, load_vocab

    import corral

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--width", type=int, default=64, help="max_indent_width")
    ap.add_argument("--out", type=Path, default=None, help="JSON results file")
    args = ap.parse_args()

    text = (Path(lark.__file__).parent / "grammars" / "python.lark").read_text()
    t0 = time.process_time()
    g = corral.Grammar.from_lark(
        text, "file_input", postlex=PythonIndenter(), max_indent_width=args.width
    )
    t1 = time.process_time()
    vocab = load_vocab(args.tokenizer)
    tok = load_tokenizer(args.tokenizer)
    c = corral.compile(g, vocab)
    t2 = time.process_time()
    reference = lark.Lark(text, parser="lalr", postlex=PythonIndenter(), start="file_input")

    lib = Path(sysconfig.get_paths()["stdlib"])
    found = sorted(lib.glob("*.py")) + sorted(
        p for p in lib.glob("*/*.py") if p.parts[-2] not in ("test", "site-packages", "idlelib")
    )
    files = [p for p in found if 1000 < p.stat().st_size < 16000][: args.files]
    bm = corral.allocate_bitmask(1, vocab.size)
    times: list[float] = []
    rows = []
    for path in files:
        src = path.read_text()
        try:
            reference.parse(src)
            lark_ok = True
        except (lark.exceptions.LarkError, IndexError):
            lark_ok = False
        ids = tok.encode(src, add_special_tokens=False)
        m = c.matcher()
        ok = True
        for t in ids:
            a = time.perf_counter()
            m.fill_bitmask(bm)
            times.append(time.perf_counter() - a)
            row = corral.bitmask_to_bool(bm, vocab.size)[0]
            if not row[t]:
                ok = False
                break
            m.consume(t)
        ok = ok and m.is_accepting()
        rows.append({"file": path.name, "tokens": len(ids), "lark": lark_ok, "corral": ok})
        print(f"{path.name:28s} {len(ids):6d} tokens  lark {lark_ok}  corral {ok}", flush=True)
    ms = np.array(times) * 1e3
    summary = {
        "tokenizer": args.tokenizer,
        "max_indent_width": args.width,
        "grammar": g.summary(),
        "build_cpu_s": round(t1 - t0, 3),
        "compile_cpu_s": round(t2 - t1, 3),
        "files": len(rows),
        "lark_accepts": sum(r["lark"] for r in rows),
        "corral_accepts": sum(r["corral"] for r in rows),
        "agree": sum(r["lark"] == r["corral"] for r in rows),
        "masks": len(times),
        "mask_ms": {
            q: round(float(np.percentile(ms, p)), 3)
            for q, p in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))
        },
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "files": rows}, indent=1))


if __name__ == "__main__":
    main()
