"""MaskBench (real-world JSON Schemas with valid and invalid instances), forced through
matchers with the Llama-3 tokenizer.

Targets: no invalid instance accepted, no crash, no timeout at a 30 s compile budget, and
at least 90% of schemas passing (every instance classified right). A stratified subset of
about 300 schemas runs by default; the full corpus (8,044 schemas) with ``--run-slow``.
The full sweep's table is in ``docs/json_schema.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from support.schema_runner import (
    CRASH,
    FALSE_POSITIVE,
    MASKBENCH_DIR,
    TIMEOUT,
    maskbench_case,
    maskbench_files,
    run_schema,
    stratified_sample,
    summarise,
)


def _run(files: list[Path]) -> None:
    from support.tokenizers import load_tokenizer, load_vocab

    tok, vocab = load_tokenizer("llama3"), load_vocab("llama3")
    outcomes = []
    bad = []
    for f in files:
        name, schema, tests = maskbench_case(f)
        o = run_schema(name, schema, tests, vocab, tok)
        outcomes.append(o)
        if o.status in (CRASH, TIMEOUT) or FALSE_POSITIVE in o.tests:
            bad.append(f"{name}: {o.status} {o.tests} {o.detail[:300]}")
    s = summarise(outcomes)
    print(s)
    assert not bad, "\n".join(bad)
    assert s.get("passing", 0) >= 0.9 * s["schemas"], s


def _files() -> list[Path]:
    files = maskbench_files()
    if not files:
        pytest.skip(f"MaskBench is not at {MASKBENCH_DIR} (../shared missing)")
    return files


def test_maskbench_stratified_subset() -> None:
    _run(stratified_sample(_files(), 300))


@pytest.mark.slow
def test_maskbench_full() -> None:
    _run(_files())
