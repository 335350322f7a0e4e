"""Extraction quality on a small labelled set: exact matches and invented values.

The data set (``data.jsonl`` next to this file, 42 records) was written for this
benchmark: short English texts (news snippets, staff announcements, event notices, product
notes, emails) with one label each, the first person the text mentions as
``{"name", "organization", "city", "role"}``. The labels were checked by hand, and every
non-null label value is machine-checked to be a verbatim substring of its text (by
``make_data.py`` when the file is written, and again here when it is read). A field is null
where the text does not state it; 28 of the 42 records have at least one null field.

For each text, Gemma-3-270M (greedy) writes the record under each condition:

* ``unconstrained``: the model's own generation from the same few-shot prompt, cut at the
  first newline (or once a complete JSON object is written), then parsed as JSON if it can.
* ``schema``: ``corral.generate(model, prompt, schema=SCHEMA)``.
* ``schema+spans``: the same schema with ``"x-corral-span": true`` on every string (for the
  nullable fields, on the ``{"type": "string"}`` branch) and ``source=text``: each string
  must be a verbatim substring of the text. When this corral has no span constraints (the
  first call raises ``TypeError``/``ValueError``, e.g. an unexpected keyword or an unknown
  schema keyword), the condition is reported as "not available" and skipped.

Each condition starts with one untimed warm-up call on a text outside the data set (it
compiles the schema, about a minute the first time with Gemma's 262k vocabulary); the
per-record times exclude it and the JSON reports it as ``warmup_seconds``.

Metrics per condition: JSON-valid rate (parses and validates against the schema);
exact match per field and per record; invented-value rate (non-null predicted string values
that are not substrings of the text, case-sensitive); missed-null rate (label null,
prediction non-null); wrong-null rate (label non-null, prediction null); mean seconds per
record. See README.md for the exact denominators.

Usage (from the repository root, with the virtual environment active)::

    python benchmarks/extraction_quality/run.py [--limit N] [--conditions a,b,c]
        [--model PATH] [--max-new-tokens N] [--out DIR]

Writes ``benchmarks/results/extraction-quality-<UTC timestamp>.json`` (metrics and every
record's prediction) and ``.svg`` (a grouped bar chart), and prints a Markdown table. Runs
on one CPU thread.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DATA = HERE / "data.jsonl"
FIELDS = ("name", "organization", "city", "role")
CONDITIONS = ("unconstrained", "schema", "schema+spans")

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "organization": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "city": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "role": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["name", "organization", "city", "role"],
}


def span_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``"x-corral-span": true`` on every ``{"type": "string"}`` (inside
    ``anyOf`` too)."""
    out = copy.deepcopy(schema)

    def mark(node: dict[str, Any]) -> None:
        if node.get("type") == "string":
            node["x-corral-span"] = True
        for branch in node.get("anyOf", []):
            mark(branch)

    for prop in out["properties"].values():
        mark(prop)
    return out


SPAN_SCHEMA = span_schema(SCHEMA)

# Few-shot prompt in the style of corral/demo.py; its examples are not in data.jsonl. The
# second example shows a record whose text states only the name (nulls for the rest).
PROMPT = """Extract the first person the text mentions as JSON. Write null for what the text does not say.
Text: Peter Novak, a pilot at Skyline Air, lives in Prague.
JSON: {{"name": "Peter Novak", "organization": "Skyline Air", "city": "Prague", "role": "pilot"}}
Text: Thanks to Ruth Adler for bringing cake to the team meeting.
JSON: {{"name": "Ruth Adler", "organization": null, "city": null, "role": null}}
Text: Our new accountant, Omar Said, has moved to Tunis.
JSON: {{"name": "Omar Said", "organization": null, "city": "Tunis", "role": "accountant"}}
Text: {text}
JSON:"""  # noqa: E501


#: The untimed warm-up call's text (not in data.jsonl).
WARMUP_TEXT = "Greta Lund, a baker from Oslo, opened her second shop at Kornhus Bakeri."


def load_data(limit: int | None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    for i, row in enumerate(rows):
        assert set(row["label"]) == set(FIELDS), f"record {i}: fields {sorted(row['label'])}"
        for field, value in row["label"].items():
            if value is not None and value not in row["text"]:
                raise SystemExit(f"record {i}: label {field}={value!r} is not in its text")
    return rows[:limit] if limit is not None else rows


def schema_valid(value: Any) -> bool:
    import jsonschema

    try:
        jsonschema.validate(value, SCHEMA)
    except jsonschema.ValidationError:
        return False
    return True


def first_json_object(text: str) -> Any:
    """The first JSON value starting at the first ``{`` of ``text``, or ``None``."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return None
    return value


class Runner:
    def __init__(self, model: Any, tok: Any, max_new_tokens: int) -> None:
        self.model, self.tok, self.max_new_tokens = model, tok, max_new_tokens

    def unconstrained(self, text: str) -> dict[str, Any]:
        from corral.integrations.generate import decode_steps, prompt_ids
        from corral.integrations.vocabularies import eos_ids_of
        from corral.sampler.decode import GenerationStats

        ids: list[int] = []
        out = ""
        for new in decode_steps(self.model, prompt_ids(self.tok, PROMPT.format(text=text)), None,
                                tokenizer=self.tok, eos_ids=eos_ids_of(self.model, self.tok),
                                stats=GenerationStats(),
                                max_new_tokens=self.max_new_tokens):  # fmt: skip
            ids.extend(new)
            out = self.tok.decode(ids)
            if "\n" in out.strip(" ") or first_json_object(out) is not None:
                break
        raw = out.strip(" ").split("\n")[0].strip()
        return {"raw": raw, "value": first_json_object(raw), "tokens": len(ids)}

    def constrained(self, text: str, spans: bool) -> dict[str, Any]:
        import corral

        kwargs: dict[str, Any] = {"source": text} if spans else {}
        try:
            result = corral.generate(self.model, PROMPT.format(text=text),
                                     schema=SPAN_SCHEMA if spans else SCHEMA, tokenizer=self.tok,
                                     details=True, max_new_tokens=self.max_new_tokens,
                                     **kwargs)  # fmt: skip
        except corral.IncompleteGenerationError as e:
            return {"raw": e.partial_text, "value": None, "error": "incomplete: budget spent"}
        return {"raw": result.text, "value": result.value, "tokens": result.stats.new_tokens,
                "forced_tokens": result.stats.forced_tokens}  # fmt: skip

    def run(self, condition: str, text: str) -> dict[str, Any]:
        if condition == "unconstrained":
            return self.unconstrained(text)
        return self.constrained(text, spans=condition == "schema+spans")


def score(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Metrics of one condition's records (each with ``text``, ``label``, ``value``,
    ``valid``, ``seconds``)."""
    n = len(records)
    field_hits = dict.fromkeys(FIELDS, 0)
    record_hits = 0
    strings = invented = 0
    label_null = missed_null = label_set = wrong_null = 0
    non_string = 0
    for r in records:
        pred = r["value"] if isinstance(r["value"], dict) else None
        label = r["label"]
        all_ok = pred is not None
        for f in FIELDS:
            has = pred is not None and f in pred
            got = pred.get(f) if pred is not None else None
            ok = has and got == label[f]
            field_hits[f] += ok
            all_ok = all_ok and ok
            if label[f] is None:
                label_null += 1
                missed_null += has and got is not None
            else:
                label_set += 1
                wrong_null += has and got is None
        record_hits += all_ok
        if pred is not None:
            for value in pred.values():
                if isinstance(value, str):
                    strings += 1
                    invented += value not in r["text"]
                elif value is not None:
                    non_string += 1
    return {
        "records": n,
        "json_valid": sum(r["valid"] for r in records) / n,
        "field_exact": {f: field_hits[f] / n for f in FIELDS},
        "record_exact": record_hits / n,
        "invented": invented / strings if strings else 0.0,
        "invented_count": invented,
        "string_values": strings,
        "non_string_values": non_string,
        "missed_null": missed_null / label_null if label_null else 0.0,
        "missed_null_count": missed_null,
        "label_null_fields": label_null,
        "wrong_null": wrong_null / label_set if label_set else 0.0,
        "wrong_null_count": wrong_null,
        "label_set_fields": label_set,
        "mean_seconds": sum(r["seconds"] for r in records) / n,
    }


# --- output -----------------------------------------------------------------------------

CHART_METRICS = [
    ("JSON valid", lambda m: m["json_valid"]),
    ("name", lambda m: m["field_exact"]["name"]),
    ("organization", lambda m: m["field_exact"]["organization"]),
    ("city", lambda m: m["field_exact"]["city"]),
    ("role", lambda m: m["field_exact"]["role"]),
    ("record exact", lambda m: m["record_exact"]),
    ("invented", lambda m: m["invented"]),
    ("missed null", lambda m: m["missed_null"]),
    ("wrong null", lambda m: m["wrong_null"]),
]
COLOURS = ["#8c8c8c", "#1f77b4", "#2ca02c", "#d62728"]


def esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg_chart(metrics: dict[str, dict[str, Any]], title: str, note: str) -> str:
    """A grouped bar chart (one group per metric, one bar per condition), by hand."""
    conds = list(metrics)
    left, top, plot_w, plot_h = 70, 60, 900, 320
    width, height = left + plot_w + 20, top + plot_h + 150
    group_w = plot_w / len(CHART_METRICS)
    bar_w = min(22.0, (group_w - 16) / max(1, len(conds)))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15" '
        f'font-weight="bold">{esc(title)}</text>',
        f'<text x="{width / 2}" y="40" text-anchor="middle" fill="#555">{esc(note)}</text>',
    ]
    for k in range(0, 11, 2):
        y = top + plot_h - plot_h * k / 10
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
                     f'stroke="#ddd"/>')  # fmt: skip
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{k * 10}%</text>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="black"/>')
    parts.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" '
                 f'y2="{top + plot_h}" stroke="black"/>')  # fmt: skip
    for g, (label, get) in enumerate(CHART_METRICS):
        gx = left + g * group_w + (group_w - bar_w * len(conds)) / 2
        for c, cond in enumerate(conds):
            v = get(metrics[cond])
            h = plot_h * v
            x = gx + c * bar_w
            parts.append(f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w - 2:.1f}" '
                         f'height="{h:.1f}" fill="{COLOURS[c % len(COLOURS)]}">'
                         f"<title>{esc(cond)}: {label} {v:.1%}</title></rect>")  # fmt: skip
            parts.append(f'<text x="{x + (bar_w - 2) / 2:.1f}" y="{top + plot_h - h - 3:.1f}" '
                         f'text-anchor="middle" font-size="8">{v * 100:.0f}</text>')  # fmt: skip
        parts.append(f'<text x="{left + (g + 0.5) * group_w:.1f}" y="{top + plot_h + 18}" '
                     f'text-anchor="middle">{esc(label)}</text>')  # fmt: skip
    parts.append(f'<text x="{left + plot_w / 2}" y="{top + plot_h + 40}" text-anchor="middle">'
                 "metric (field names: exact match of that field; record exact: all four; "
                 "invented, missed/wrong null: lower is better)</text>")  # fmt: skip
    parts.append(f'<text x="18" y="{top + plot_h / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 18 {top + plot_h / 2})">rate (% of records or values)'
                 "</text>")  # fmt: skip
    ly = top + plot_h + 62
    for c, cond in enumerate(conds):
        x = left + c * 260
        parts.append(f'<rect x="{x}" y="{ly}" width="14" height="14" '
                     f'fill="{COLOURS[c % len(COLOURS)]}"/>')  # fmt: skip
        parts.append(f'<text x="{x + 20}" y="{ly + 12}">{esc(cond)} '
                     f"({metrics[cond]['mean_seconds']:.2f} s/record)</text>")  # fmt: skip
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def markdown_table(metrics: dict[str, dict[str, Any]], unavailable: dict[str, str]) -> str:
    head = ("| condition | JSON valid | name | organization | city | role | record exact | "
            "invented | missed null | wrong null | s/record |")  # fmt: skip
    lines = [head, "|" + "---|" * 11]

    def share(count: int, total: int) -> str:
        return f"{count / total:.0%} ({count}/{total})" if total else "n/a (0/0)"

    for cond, m in metrics.items():
        f = m["field_exact"]
        lines.append(
            f"| {cond} | {m['json_valid']:.0%} | {f['name']:.0%} | {f['organization']:.0%} | "
            f"{f['city']:.0%} | {f['role']:.0%} | {m['record_exact']:.0%} | "
            f"{share(m['invented_count'], m['string_values'])} | "
            f"{share(m['missed_null_count'], m['label_null_fields'])} | "
            f"{share(m['wrong_null_count'], m['label_set_fields'])} | "
            f"{m['mean_seconds']:.2f} |"
        )
    for cond, why in unavailable.items():
        lines.append(f"| {cond} | not available: {why} |" + " |" * 9)
    return "\n".join(lines)


def git_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  check=False).stdout.rstrip("\n")  # fmt: skip
        except OSError:
            return ""

    import hashlib

    changed = git("status", "--porcelain", "--", "corral").splitlines()
    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain")),
        # uncommitted changes of the package (the run used the working tree as it was)
        "corral_changes": changed,
        "corral_diff_sha256": hashlib.sha256(
            git("diff", "HEAD", "--", "corral").encode()
        ).hexdigest()[:16],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="first N records only")
    parser.add_argument("--conditions", default=",".join(CONDITIONS),
                        help=f"comma-separated, from {', '.join(CONDITIONS)}")  # fmt: skip
    parser.add_argument("--model", default=None,
                        help="local Hugging Face model folder (default: Gemma-3-270M)")  # fmt: skip
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    for c in conditions:
        if c not in CONDITIONS:
            parser.error(f"unknown condition {c!r} (choose from {', '.join(CONDITIONS)})")

    import torch

    torch.set_num_threads(1)
    from corral.integrations.models import DEFAULT_MODEL, resolve_model

    rows = load_data(args.limit)
    t0 = time.perf_counter()
    model, tok = resolve_model(args.model or DEFAULT_MODEL)
    load_s = time.perf_counter() - t0
    print(f"model: {args.model or DEFAULT_MODEL} ({model.config.model_type}, loaded in "
          f"{load_s:.1f} s); {len(rows)} records; conditions: {', '.join(conditions)}",
          flush=True)  # fmt: skip
    runner = Runner(model, tok, args.max_new_tokens)

    started = dt.datetime.now(dt.timezone.utc)
    git = git_state()  # at the start: others may commit while the benchmark runs
    run_t0 = time.perf_counter()
    per_condition: dict[str, list[dict[str, Any]]] = {}
    unavailable: dict[str, str] = {}
    warmup_s: dict[str, float] = {}
    for cond in conditions:
        # Untimed warm-up on a text that is not in the data set: compiles the schema (cached
        # for the timed calls) and, for schema+spans, finds out whether source= exists.
        t = time.perf_counter()
        try:
            runner.run(cond, WARMUP_TEXT)
        except (TypeError, ValueError) as e:
            if cond != "schema+spans":
                raise
            why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            unavailable[cond] = why
            print(f"[{cond}] not available ({why}); skipped", flush=True)
            continue
        warmup_s[cond] = round(time.perf_counter() - t, 2)
        print(f"[{cond}] warm-up (compile, first call) {warmup_s[cond]:.1f} s", flush=True)
        records: list[dict[str, Any]] = []
        for i, row in enumerate(rows):
            t = time.perf_counter()
            try:
                out = runner.run(cond, row["text"])
            except (TypeError, ValueError) as e:
                out = {"raw": "", "value": None, "error": f"{type(e).__name__}: {e}"}
            seconds = time.perf_counter() - t
            value = out["value"]
            rec = {"index": i, "text": row["text"], "label": row["label"], "raw": out["raw"],
                   "value": value, "valid": value is not None and schema_valid(value),
                   "seconds": round(seconds, 4), "tokens": out.get("tokens"),
                   "forced_tokens": out.get("forced_tokens"),
                   "error": out.get("error")}  # fmt: skip
            rec["invented"] = [v for v in (value.values() if isinstance(value, dict) else [])
                               if isinstance(v, str) and v not in row["text"]]  # fmt: skip
            records.append(rec)
            mark = "ok " if value == row["label"] else "   "
            flag = f"  INVENTED {rec['invented']}" if rec["invented"] else ""
            print(f"[{cond}] {i:2d} {mark}{seconds:5.1f}s {out['raw'][:110]}{flag}", flush=True)
        per_condition[cond] = records
    total_s = time.perf_counter() - run_t0

    metrics = {cond: score(recs) for cond, recs in per_condition.items()}
    notes: list[str] = []
    if "schema+spans" in metrics and metrics["schema+spans"]["invented_count"]:
        notes.append(f"schema+spans produced {metrics['schema+spans']['invented_count']} "
                     "values that are not substrings of the text: the span constraint did "
                     "not hold")  # fmt: skip
    stamp = started.strftime("%Y-%m-%dT%H%M%S")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"extraction-quality-{stamp}.json"
    svg_path = out_dir / f"extraction-quality-{stamp}.svg"
    report = {
        "benchmark": "extraction_quality",
        "started_utc": started.isoformat(timespec="seconds"),
        "command": "python benchmarks/extraction_quality/run.py " + " ".join(sys.argv[1:]),
        "model": args.model or DEFAULT_MODEL,
        "model_load_seconds": round(load_s, 2),
        "torch_threads": torch.get_num_threads(),
        "max_new_tokens": args.max_new_tokens,
        "decoding": "greedy (temperature 0)",
        "records": len(rows),
        "conditions": conditions,
        "unavailable": unavailable,
        "warmup_seconds": warmup_s,
        "total_seconds": round(total_s, 1),
        "git": git,
        "schema": SCHEMA,
        "span_schema": SPAN_SCHEMA,
        "prompt": PROMPT,
        "metrics": metrics,
        "notes": notes,
        "predictions": per_condition,
    }
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n",
                         encoding="utf-8")  # fmt: skip
    note = (f"Gemma-3-270M, greedy, {len(rows)} hand-labelled records"
            + (f"; not available: {', '.join(unavailable)}" if unavailable else ""))  # fmt: skip
    svg_path.write_text(svg_chart(metrics, "Extraction quality by condition", note),
                        encoding="utf-8")  # fmt: skip
    print()
    print(markdown_table(metrics, unavailable))
    for line in notes:
        print(f"\nNOTE: {line}")
    print(f"\n{len(rows)} records, {len(per_condition)} conditions in {total_s:.0f} s "
          f"(model load {load_s:.1f} s)\nwrote {json_path}\nwrote {svg_path}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
