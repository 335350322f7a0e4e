"""The official JSON-Schema-Test-Suite (draft 2020-12 and draft 7), forced through matchers.

Every case's outcome is compared with ``tests/data/json_schema_suite_expected.json``: no
false positive (invalid instance accepted) is ever allowed, nothing may crash, and no case
that passed before may regress. Improvements are welcome: regenerate the file with
``python tests/test_json_schema_suite.py`` (from the repository root) and commit it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from support.schema_runner import (
    CRASH,
    DECIDED,
    FALSE_POSITIVE,
    SUITE_DIR,
    run_schema,
    suite_cases,
)

EXPECTED = Path(__file__).parent / "data" / "json_schema_suite_expected.json"
DRAFTS = ["draft2020-12", "draft7"]


def _outcomes(draft: str) -> dict[str, dict[str, object]]:
    from support.tokenizers import load_tokenizer, load_vocab

    tok, vocab = load_tokenizer("llama3"), load_vocab("llama3")
    out = {}
    for name, schema, tests in suite_cases(draft):
        o = run_schema(name, schema, tests, vocab, tok)
        out[name] = {"status": o.status, "tests": o.tests, "detail": o.detail[:200]}
    return out


@pytest.mark.parametrize("draft", DRAFTS)
def test_suite_never_regresses(draft: str) -> None:
    if not (SUITE_DIR / draft).is_dir():
        pytest.skip(f"the JSON-Schema-Test-Suite is not at {SUITE_DIR} (../shared missing)")
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))[draft]
    got = _outcomes(draft)
    problems = []
    for name, o in got.items():
        if o["status"] == CRASH:
            problems.append(f"{name}: crash: {o['detail']}")
        if FALSE_POSITIVE in o["tests"]:  # type: ignore[operator]
            problems.append(f"{name}: an invalid instance was accepted: {o['tests']}")
        e = expected.get(name)
        if e is None:
            continue
        was_ok = e["status"] in DECIDED and all(t == "pass" for t in e["tests"])
        now_ok = o["status"] in DECIDED and all(t == "pass" for t in o["tests"])  # type: ignore[union-attr]
        if was_ok and not now_ok:
            problems.append(f"{name}: regressed: {o['status']} {o['tests']} {o['detail']}")
        elif e["status"] in DECIDED and o["status"] in DECIDED:
            for i, (a, b) in enumerate(zip(e["tests"], o["tests"], strict=False)):  # type: ignore[arg-type]
                if a == "pass" and b != "pass":
                    problems.append(f"{name} test {i}: regressed to {b}")
    assert not problems, "\n".join(problems)
    passing = sum(
        o["status"] in DECIDED and all(t == "pass" for t in o["tests"])  # type: ignore[union-attr]
        for o in got.values()
    )
    print(f"{draft}: {passing}/{len(got)} cases pass")


if __name__ == "__main__":  # regenerate the expected results
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    EXPECTED.write_text(
        json.dumps({d: _outcomes(d) for d in DRAFTS}, indent=1, sort_keys=True) + "\n",
        encoding="utf-8",
    )
    print(f"wrote {EXPECTED}")
