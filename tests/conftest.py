"""Test configuration: the slow corpus sweeps run only with ``--run-slow``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

GRAMMAR_DIR = Path(__file__).parent / "data" / "grammars"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="run slow corpus sweeps")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow corpus sweep: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def gpt2_model():  # type: ignore[no-untyped-def]
    """A tiny random Llama whose logits cover the real GPT-2 tokenizer, and the tokenizer."""
    from support.tiny_models import tiny_llama
    from support.tokenizers import load_tokenizer

    tok = load_tokenizer("gpt2")
    return tiny_llama(tok), tok


def grammar_text(name: str) -> str:
    return (GRAMMAR_DIR / f"{name}.lark").read_text()
