"""Monitor-guided decoding on code no one here wrote (Agrawal et al., 2023, section 4).

Cases are member accesses in the Python standard library's own sources (shipped with
Python): for each function of the modules below, each ``name.member`` whose ``name`` is a
plain name, cut just after the dot. The model (Gemma-3-270M, corral's default) sees the
last ``--context`` lines before the cut and completes a few tokens, greedy, with and
without :func:`corral.monitors.python.python_members` (jedi reads the whole file up to the
cut). Without the monitor the output is free text under ``regex="(?s:.*)"`` (corral's
same decoding loop, masks that allow every UTF-8 text), so the two runs differ only in the
monitor.

Three runs per case: free text; the monitor with jedi's inference alone
(``file_attributes=False``); the default monitor (jedi's names and those the file already
uses after a dot). Reported per run: the share of outputs whose first identifier is a
member jedi infers at the cut ("exists"), equals the source's own member ("match"), and
the time per token.

    python benchmarks/monitors.py --cases 40 --out benchmarks/results
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MODULES = ("json.decoder", "shutil", "argparse", "textwrap", "difflib", "csv", "configparser",
           "pathlib", "zipfile", "tarfile", "logging", "collections")  # fmt: skip
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Case:
    module: str
    line: int
    prefix: str  # the file up to and including the dot
    member: str  # what the source has after the dot


def cases(n: int, seed: int = 0) -> list[Case]:
    """``n`` member accesses drawn at random (seeded) from :data:`MODULES`' functions."""
    found: list[Case] = []
    for name in MODULES:
        mod = importlib.import_module(name)
        src = inspect.getsource(mod)
        offsets = [0]
        for line in src.splitlines(keepends=True):
            offsets.append(offsets[-1] + len(line))
        for node in ast.walk(ast.parse(src)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
                    v = sub.value
                    assert v.end_lineno is not None and v.end_col_offset is not None
                    # col offsets count UTF-8 bytes; the stdlib lines here are ASCII
                    at = offsets[v.end_lineno - 1] + v.end_col_offset
                    if src[at : at + 1] == "." and src[at + 1 :].startswith(sub.attr):
                        found.append(Case(name, v.end_lineno, src[: at + 1], sub.attr))
    random.Random(seed).shuffle(found)
    return found[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--context", type=int, default=30, help="lines of code the model sees")
    ap.add_argument("--max-new-tokens", type=int, default=6)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    import corral
    from corral.integrations.models import resolve_model
    from corral.monitors.monitor import MonitorContext
    from corral.monitors.python import python_members

    model, tok = resolve_model("gemma3-270m", None)
    rows = []
    for c in cases(args.cases):
        lines = c.prefix.split("\n")
        prompt = "\n".join(lines[-args.context :])
        head = c.prefix[: len(c.prefix) - len(prompt)]

        def source(ctx: MonitorContext, head: str = head) -> str:
            return head + ctx.prompt + ctx.text

        strict = python_members(source=source, file_attributes=False)
        mon = python_members(source=source)
        names = set(strict.allowed(MonitorContext(text="", prompt=prompt)) or ())
        row = {"module": c.module, "line": c.line, "member": c.member, "inferred": len(names)}
        arms = (("free", {"regex": r"(?s:.*)"}), ("jedi only", {"monitors": [strict]}),
                ("monitor", {"monitors": [mon]}))  # fmt: skip
        for label, kwargs in arms:
            t = time.perf_counter()
            try:
                g = corral.generate(model, prompt, tokenizer=tok, heal=False, details=True,
                                    max_new_tokens=args.max_new_tokens, **kwargs)  # fmt: skip
                text, n_tokens = g.text, len(g.token_ids)
            except corral.IncompleteGenerationError as e:  # a later region cut at the budget
                text, n_tokens = e.partial_text, len(e.token_ids)
            dt = time.perf_counter() - t
            m = _IDENT.match(text)
            ident = m.group(0) if m else ""
            row[label] = {
                "text": text,
                "ident": ident,
                "exists": ident in names,
                "match": ident == c.member,
                "s_per_token": dt / max(1, n_tokens),
            }
        rows.append(row)
        print(f"{c.module}:{c.line} {c.member!r}: free {row['free']['ident']!r} jedi only "
              f"{row['jedi only']['ident']!r} monitor {row['monitor']['ident']!r}",
              flush=True)  # fmt: skip
    summary = {
        label: {
            "exists": sum(r[label]["exists"] for r in rows) / len(rows),
            "match": sum(r[label]["match"] for r in rows) / len(rows),
            "ms_per_token": 1e3 * statistics.median(r[label]["s_per_token"] for r in rows),
        }
        for label, _ in arms
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H%M%S")
        path = args.out / f"monitors-gemma3-{stamp}.json"
        path.write_text(json.dumps({"summary": summary, "cases": rows,
                                    "python": sys.version.split()[0]}, indent=1))  # fmt: skip
        print("wrote", path)


if __name__ == "__main__":
    main()
