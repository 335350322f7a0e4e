"""Conformance runs of the JSON Schema compiler: the official test suite and MaskBench.

Each schema is compiled for a real vocabulary; each instance is serialised (compact
``json.dumps`` separators, non-ASCII written literally), tokenized by the tokenizer, and
forced through a matcher token by token. JSON objects are unordered and corral's grammars
write properties in schema order, so an instance counts as accepted if it is accepted with
its keys as given or in schema order (:func:`in_schema_order`); an invalid instance must
be rejected in both. Outcomes per instance:

``pass`` (valid accepted or invalid rejected), ``false_negative`` (valid rejected),
``false_positive`` (invalid accepted). Per schema: ``compiled``, ``empty`` (refused with
:class:`~corral.EmptyLanguageError`: every instance counts as rejected, which is right for
the invalid ones), ``refused`` (another clear corral error at compile), ``timeout``
(compile budget), ``crash`` (any other exception).

Run the full MaskBench sweep from ``tests/`` with ``python -m support.schema_runner maskbench``
(or ``draft2020-12`` / ``draft7`` for the test suite).
"""

from __future__ import annotations

import json
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parents[3] / "shared"
SUITE_DIR = SHARED / "data" / "json-schema-test-suite" / "tests"
MASKBENCH_DIR = SHARED / "data" / "maskbench"
PASS, FALSE_NEGATIVE, FALSE_POSITIVE = "pass", "false_negative", "false_positive"
REFUSED, TIMEOUT, CRASH, EMPTY = "refused", "timeout", "crash", "empty"
DECIDED = ("compiled", EMPTY)  # statuses whose instances are classified


@dataclass
class SchemaOutcome:
    name: str
    status: str  # "compiled", EMPTY, REFUSED, TIMEOUT, CRASH
    detail: str = ""
    tests: list[str] = field(default_factory=list)  # per instance outcome
    compile_s: float = 0.0

    @property
    def passing(self) -> bool:
        return self.status in DECIDED and all(t == PASS for t in self.tests)


def serialise(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def property_rank(schema: Any) -> dict[str, int]:
    """Property names in the order they first appear in the schema text (``properties``
    keys, then ``required`` names, then keys of objects in ``const``/``enum``)."""
    order: dict[str, int] = {}
    late: list[str] = []

    def walk(node: Any, in_value: bool = False) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if in_value:
                    late.append(k)
                    walk(v, True)
                elif k == "properties" and isinstance(v, dict):
                    for name in v:
                        order.setdefault(name, len(order))
                    walk(v)
                elif k == "required" and isinstance(v, list):
                    late.extend(x for x in v if isinstance(x, str))
                elif k in ("const", "enum", "default", "examples"):
                    walk(v, True)
                else:
                    walk(v)
        elif isinstance(node, list):
            for x in node:
                walk(x, in_value)

    walk(schema)
    for name in late:
        order.setdefault(name, len(order))
    return order


def in_schema_order(value: Any, rank: dict[str, int]) -> Any:
    """``value`` with every object's keys in schema order (unknown keys last, as given):
    the order corral's grammars write properties in (JSON objects are unordered)."""
    if isinstance(value, dict):
        keys = sorted(enumerate(value), key=lambda p: (rank.get(p[1], len(rank)), p[0]))
        return {k: in_schema_order(value[k], rank) for _, k in keys}
    if isinstance(value, list):
        return [in_schema_order(x, rank) for x in value]
    return value


class _AlarmError(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _AlarmError()


def run_schema(
    name: str,
    schema: Any,
    tests: list[tuple[Any, bool]],
    vocab: Any,
    tokenizer: Any,
    *,
    timeout_s: float = 30.0,
    options: dict[str, Any] | None = None,
) -> SchemaOutcome:
    """Compile ``schema`` and force every ``(instance, valid)`` through a matcher."""
    import corral
    from corral.errors import CompileBudgetError, CorralError, EmptyLanguageError

    t0 = time.perf_counter()
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        compiled = corral.compile(
            schema, vocab, cache=False, precompute=False, time_budget_s=timeout_s, **(options or {})
        )
    except (_AlarmError, CompileBudgetError) as e:
        return SchemaOutcome(name, TIMEOUT, str(e)[:300], compile_s=time.perf_counter() - t0)
    except EmptyLanguageError as e:
        verdicts = [FALSE_NEGATIVE if valid else PASS for _, valid in tests]
        return SchemaOutcome(name, EMPTY, f"{type(e).__name__}: {e}"[:300], verdicts)
    except CorralError as e:
        return SchemaOutcome(name, REFUSED, f"{type(e).__name__}: {e}"[:300])
    except Exception as e:
        detail = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"
        return SchemaOutcome(name, CRASH, detail[:2000])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    out = SchemaOutcome(name, "compiled", compile_s=time.perf_counter() - t0)
    rank = property_rank(schema)
    for value, valid in tests:
        texts = dict.fromkeys([serialise(value), serialise(in_schema_order(value, rank))])
        accepted = False
        for text in texts:
            ids = tokenizer.encode(text, add_special_tokens=False)
            m = compiled.matcher()
            try:
                accepted = all(m.try_consume(t) for t in ids) and m.is_accepting()
            except Exception as e:  # pragma: no cover - reported, never expected
                out.status = CRASH
                out.detail = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"[:2000]
                return out
            if accepted:
                break
        if accepted == valid:
            out.tests.append(PASS)
        else:
            out.tests.append(FALSE_POSITIVE if accepted else FALSE_NEGATIVE)
    return out


def suite_cases(draft: str) -> Iterator[tuple[str, Any, list[tuple[Any, bool]]]]:
    """``(name, schema, [(data, valid)])`` for every case of a draft's required tests."""
    folder = SUITE_DIR / draft
    for path in sorted(folder.glob("*.json")):
        for i, case in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            tests = [(t["data"], bool(t["valid"])) for t in case["tests"]]
            schema = case["schema"]
            if draft == "draft7" and isinstance(schema, dict) and "$schema" not in schema:
                schema = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
            yield f"{path.stem}#{i}", schema, tests


def maskbench_files() -> list[Path]:
    return sorted(MASKBENCH_DIR.glob("*.json"))


def maskbench_case(path: Path) -> tuple[str, Any, list[tuple[Any, bool]]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return path.stem, doc["schema"], [(t["data"], bool(t["valid"])) for t in doc["tests"]]


def stratified_sample(files: list[Path], n: int) -> list[Path]:
    """About ``n`` files spread over the corpus's sources (file name prefix), in order."""
    by_source: dict[str, list[Path]] = {}
    for f in files:
        by_source.setdefault(f.stem.rsplit("_", 1)[0].split("---")[0], []).append(f)
    out: list[Path] = []
    share = max(1, n // max(1, len(by_source)))
    for src in sorted(by_source):
        group = by_source[src]
        step = max(1, len(group) // share)
        out += group[::step][:share]
    return sorted(out)[:n] if len(out) > n else sorted(out)


def summarise(outcomes: list[SchemaOutcome]) -> dict[str, int]:
    c: Counter[str] = Counter()
    for o in outcomes:
        c["schemas"] += 1
        if o.status not in DECIDED:
            c[o.status] += 1
            continue
        if o.status == EMPTY:
            c[EMPTY] += 1
        if o.passing:
            c["passing"] += 1
        for t in o.tests:
            c[f"instances_{t}"] += 1
        if FALSE_NEGATIVE in o.tests:
            c["schemas_with_valid_rejected"] += 1
        if FALSE_POSITIVE in o.tests:
            c["schemas_with_invalid_accepted"] += 1
    return dict(c)


def _main(argv: list[str]) -> int:  # pragma: no cover - a command-line tool
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from support.tokenizers import load_tokenizer, load_vocab

    what = argv[0] if argv else "maskbench"
    tok, vocab = load_tokenizer("llama3"), load_vocab("llama3")
    if what == "maskbench":
        files = maskbench_files()
        if len(argv) > 1:
            files = stratified_sample(files, int(argv[1]))
        cases = (maskbench_case(f) for f in files)
    else:
        cases = suite_cases(what)
    outcomes = []
    t0 = time.time()
    for i, (name, schema, tests) in enumerate(cases):
        o = run_schema(name, schema, tests, vocab, tok)
        outcomes.append(o)
        if not o.passing:
            print(f"{name}: {o.status} {o.tests} {o.detail[:200]!r}", file=sys.stderr)
        if i % 100 == 99:
            print(f"... {i + 1} schemas, {time.time() - t0:.0f} s", file=sys.stderr)
    print(json.dumps(summarise(outcomes), indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(sys.argv[1:]))
