"""Monitor-guided decoding on code no one here wrote (Agrawal et al., 2023, section 4).

Cases are member accesses in the Python standard library's own sources (shipped with
Python): for each function of the modules below, each ``name.member`` whose ``name`` is a
plain name, in a statement that fits on one line, cut just after the dot. The model
(Gemma-3-270M, corral's default) sees the last ``--context`` lines before the cut and
completes the line (the output is one line: ``regex=[^\n]*\n``, at most
``--max-new-tokens`` tokens), with and without
:func:`corral.monitors.python.python_members` (jedi reads the whole file up to the cut).
Every run has the same regex, so the runs differ only in the monitor.

Three runs per case: free text; the monitor with jedi's inference alone
(``file_attributes=False``); the default monitor (jedi's names and those the file already
uses after a dot); each greedy and sampled (``--temperature``, one seeded sample per
case). Reported per run: the share of outputs whose first identifier is a member jedi
infers at the cut ("exists"), whose completed line leaves the module compiling
("compiles": the rest of the source line replaced by the output, the whole file given
to :func:`compile`; an output cut by the token budget does not compile), whose first
identifier equals the source's own member ("match"), and the time per token.

    python benchmarks/monitors.py --cases 40 --out benchmarks/results \\
        --plot docs/results/monitors-eval.png
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
    suffix: str  # the file after the cut's line (from its newline on)

    def compiles(self, completion: str) -> bool:
        """Whether the module compiles with the rest of the cut's line replaced by
        ``completion`` (one line, its newline optional)."""
        try:
            compile(self.prefix + completion.rstrip("\n") + self.suffix, self.module, "exec")
        except (SyntaxError, ValueError):
            return False
        return True


def cases(n: int, seed: int = 0) -> list[Case]:
    """``n`` member accesses drawn at random (seeded) from :data:`MODULES`' functions,
    in statements that fit on one line."""
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
            for stmt in ast.walk(node):
                if not isinstance(stmt, ast.stmt) or isinstance(stmt, ast.FunctionDef):
                    continue
                head = stmt if stmt.end_lineno == stmt.lineno else None
                if head is None:  # a compound statement: its header line, if one line
                    continue
                for sub in ast.walk(stmt):
                    if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
                        v = sub.value
                        assert v.end_lineno is not None and v.end_col_offset is not None
                        # col offsets count UTF-8 bytes; the stdlib lines here are ASCII
                        at = offsets[v.end_lineno - 1] + v.end_col_offset
                        if src[at : at + 1] == "." and src[at + 1 :].startswith(sub.attr):
                            end = src.find("\n", at)
                            found.append(Case(name, v.end_lineno, src[: at + 1], sub.attr,
                                              src[end:] if end >= 0 else ""))  # fmt: skip
    found = sorted(set(found), key=lambda c: (c.module, c.line, len(c.prefix)))
    random.Random(seed).shuffle(found)
    return found[:n]


ARMS = ("free", "jedi only", "monitor")
MODES = ("greedy", "sampled")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--context", type=int, default=30, help="lines of code the model sees")
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--temperature", type=float, default=0.8, help="of the sampled runs")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--plot", type=Path, default=None, help="a PNG of the rates")
    args = ap.parse_args()

    import corral
    from corral.integrations.models import resolve_model
    from corral.monitors.monitor import MonitorContext
    from corral.monitors.python import python_members

    model, tok = resolve_model("gemma3-270m", None)
    rows = []
    for i, c in enumerate(cases(args.cases)):
        lines = c.prefix.split("\n")
        prompt = "\n".join(lines[-args.context :])
        head = c.prefix[: len(c.prefix) - len(prompt)]

        def source(ctx: MonitorContext, head: str = head) -> str:
            return head + ctx.prompt + ctx.text

        strict = python_members(source=source, file_attributes=False)
        mon = python_members(source=source)
        names = set(strict.allowed(MonitorContext(text="", prompt=prompt)) or ())
        row: dict = {"module": c.module, "line": c.line, "member": c.member,
                     "inferred": len(names)}  # fmt: skip
        arms = {"free": {}, "jedi only": {"monitors": [strict]}, "monitor": {"monitors": [mon]}}
        for mode in MODES:
            sampling = {"temperature": args.temperature, "seed": i} if mode == "sampled" else {}
            for label, kwargs in arms.items():
                t = time.perf_counter()
                complete = True
                try:
                    g = corral.generate(model, prompt, tokenizer=tok, heal=False, details=True,
                                        regex=r"[^\n]*\n", max_new_tokens=args.max_new_tokens,
                                        **kwargs, **sampling)  # fmt: skip
                    text, n_tokens = g.text, len(g.token_ids)
                except corral.IncompleteGenerationError as e:  # cut by the token budget
                    text, n_tokens, complete = e.partial_text, len(e.token_ids), False
                dt = time.perf_counter() - t
                m = _IDENT.match(text)
                ident = m.group(0) if m else ""
                row[f"{label}/{mode}"] = {
                    "text": text,
                    "ident": ident,
                    "exists": ident in names,
                    "compiles": complete and c.compiles(text),
                    "match": ident == c.member,
                    "s_per_token": dt / max(1, n_tokens),
                }
        rows.append(row)
        print(f"{c.module}:{c.line} {c.member!r}: "
              + "; ".join(f"{k} {row[k]['ident']!r}{'' if row[k]['compiles'] else ' (x)'}"
                          for k in row if "/" in k), flush=True)  # fmt: skip
    summary = {
        f"{label}/{mode}": {
            "exists": sum(r[f"{label}/{mode}"]["exists"] for r in rows) / len(rows),
            "compiles": sum(r[f"{label}/{mode}"]["compiles"] for r in rows) / len(rows),
            "match": sum(r[f"{label}/{mode}"]["match"] for r in rows) / len(rows),
            "ms_per_token": 1e3
            * statistics.median(r[f"{label}/{mode}"]["s_per_token"] for r in rows),
        }
        for mode in MODES
        for label in ARMS
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H%M%S")
        path = args.out / f"monitors-gemma3-{stamp}.json"
        settings = {k: v for k, v in vars(args).items() if k not in ("out", "plot")}
        record = {"summary": summary, "settings": settings, "cases": rows,
                  "python": sys.version.split()[0]}  # fmt: skip
        path.write_text(json.dumps(record, indent=1, default=str))
        print("wrote", path)
    if args.plot:
        plot(summary, len(rows), args.plot)


def plot(summary: dict, n_cases: int, path: Path) -> None:
    """Grouped bars: each rate, for each run, greedy and sampled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = ("exists", "compiles", "match")
    fig, axes = plt.subplots(1, len(MODES), figsize=(9, 3.4), sharey=True)
    for ax, mode in zip(axes, MODES, strict=True):
        for j, label in enumerate(ARMS):
            vals = [summary[f"{label}/{mode}"][m] for m in metrics]
            xs = [k + (j - 1) * 0.27 for k in range(len(metrics))]
            ax.bar(xs, vals, width=0.27, label=label)
        ax.set_xticks(range(len(metrics)), metrics)
        ax.set_title(mode)
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel(f"share of {n_cases} cases")
    axes[-1].legend(loc="upper right", fontsize=8)
    fig.suptitle("Gemma-3-270M completing member accesses in the standard library")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print("wrote", path)


if __name__ == "__main__":
    main()
