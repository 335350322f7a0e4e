"""A fresh install's prebuilt kernels, or else ``corral warmup``, leave nothing for real use
to compile.

From an empty Numba cache (a fresh ``NUMBA_CACHE_DIR``), with the package's prebuilt
kernels, or without them after ``python -m corral warmup`` ran, a process does what users
do (a real tokenizer, a JSON Schema, the Lark JSON grammar, a regex, an entity set and a
span, a monitor's names, masks, consumes, fast-forward, batched masks on torch logits,
completion checks on dense and sparse lexers, token healing, DINGO) and every corral
kernel it calls must come from a cache: Numba counts a cache miss for each signature it
had to compile.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.processes import run_json
from support.tokenizers import tokenizer_path

TESTS = Path(__file__).resolve().parent

WORKLOAD = r"""
import gc, json, sys
import numpy as np, torch
import corral
from corral.automata.completion import MASK, MASK_OPT, CompletionChecker
from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(sys.argv[1])
vocab = corral.Vocabulary.from_hf(tok)
compiler = corral.Compiler(vocab)
schema = {"type": "object", "properties": {"id": {"type": "integer"},
          "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
          "kind": {"const": "user"}}, "required": ["id", "kind"]}
lark = open(sys.argv[2]).read()
spans = {"type": "object", "properties": {
         "c": {"type": "string", "x-corral-entities": "c"},
         "q": {"type": "string", "x-corral-span": True, "maxLength": 9}},
         "required": ["c", "q"]}
sources = {"source": "she moved to Wien", "entities": {"c": ["Wien", "Graz"]}}
docs = [(compiler.json_schema(schema), '{"id": 7, "tags": ["ab"], "kind": "user"}'),
        (compiler.lark(lark), '{"a": [1, 2.5e3, null, "x\\u00e9"]}'),
        (compiler.regex(r"\d{3}-\d{4}"), "555-1234"),
        (compiler.compile(spans, **sources), '{"c": "Wien", "q": "to Wien"}')]
mask = corral.allocate_bitmask(2, vocab.size)
for compiled, text in docs:
    m = compiled.matcher()
    for t in tok.encode(text, add_special_tokens=False):
        m.fill_bitmask(mask, 0)
        m.forced_tokens()
        m.consume(t)
    assert m.is_accepting()
    f = m.fork(); f.rollback(2); f.fill_bitmask(mask, 1)
    corral.fill_next_token_bitmasks([m, f], mask)
    logits = torch.zeros(2, vocab.size)
    corral.apply_token_bitmask_inplace(logits, mask, vocab.size)
    m.consume(vocab.eos_token_ids[0])
mon = corral.Monitor(trigger=r"\.", allowed=lambda ctx: ["path", "getcwd", "sep"])
m = corral.MonitoredMatcher(vocab, [mon], compiler=compiler)
for t in tok.encode("x = os.path(", add_special_tokens=False):
    m.fill_bitmask(mask, 0)
    m.consume(t)
checker = CompletionChecker(compiler.json_schema(schema, final_check=False))
ids = tok.encode('{"id": 7, "kind": "user"}', add_special_tokens=False)
slots = [ids[0]] + [MASK] * 6 + ids[3:] + [MASK] * 3
checker.check(slots)
checker.allowed_at(slots, 1)
checker.allowed_at(slots, 3)  # past unknown slots
# completion checks on sparse lexer rows (spans and entity sets): infill with source=
checker = CompletionChecker(compiler.compile(spans, **sources, final_check=False))
ids = tok.encode('{"c": "Wien", "q": "to Wien"}', add_special_tokens=False)
slots = [ids[0]] + [MASK] * 4 + ids[4:-1] + [MASK, MASK_OPT]
assert checker.check(slots)
checker.allowed_at(slots, 3)
# token healing (on by default in generate for text prompts), dense and sparse lexers
from corral.sampler.healing import HealingView, heal_prompt
_, healed = heal_prompt(vocab, tok.encode("Output: {", add_special_tokens=False))
assert healed
for compiled in (docs[0][0], docs[3][0]):
    HealingView(compiled.matcher(), healed).fill_bitmask(mask, 0)
# DINGO's block decoding under the regex's token-level DFA
from corral.automata.token_dfa import TokenDFA
from corral.sampler.dingo import dingo_argmax
dingo_argmax(np.zeros((3, vocab.size)), TokenDFA.from_compiled(docs[2][0]))

from numba.core.registry import CPUDispatcher
misses, hits = {}, 0
for o in gc.get_objects():
    if isinstance(o, CPUDispatcher) and o.py_func.__module__.startswith("corral"):
        hits += sum(o._cache_hits.values())
        if sum(o._cache_misses.values()):
            name = o.py_func.__module__ + "." + o.py_func.__name__
            misses[name] = [str(s) for s in o._cache_misses]
# loading cached code leaves Numba's compiler registries alone (corral/jit.py)
registries = "numba.np.polynomial.polynomial_core" in sys.modules
print(json.dumps({"misses": misses, "hits": hits, "registries": registries}))
"""


def _env(cache: Path, prebuilt: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_CPU", "CORRAL_PRE"))}
    env["NUMBA_CACHE_DIR"] = str(cache)
    env["CORRAL_PREBUILT"] = "1" if prebuilt else "0"
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS.parent), env.get("PYTHONPATH", "")])
    return env


def _workload(path: Path, cache: Path, prebuilt: bool) -> dict[str, object]:
    """Run :data:`WORKLOAD` in a fresh process; its counts of kernels loaded and compiled."""
    grammar = str(TESTS / "data/grammars/json.lark")
    counts: dict[str, object] = run_json(WORKLOAD, str(path), grammar, env=_env(cache, prebuilt))
    return counts


def test_a_fresh_install_compiles_nothing_for_real_use(tmp_path: Path) -> None:
    """With the package's prebuilt kernels (``corral/jit.py``) and an empty Numba cache,
    real use loads every kernel: the first masks of a fresh install compile nothing."""
    from corral.jit import prebuilt_dir

    if prebuilt_dir() is None:
        pytest.skip(
            "this corral has no prebuilt kernels for its sources and versions (built with "
            "CORRAL_NO_PREBUILD=1, an edited checkout, or another Numba than the build's)"
        )
    path = tokenizer_path("gpt2")
    if path is None:
        pytest.skip("tokenizer 'gpt2' unavailable (see tests/support/tokenizers.py)")
    counts = _workload(path, tmp_path / "empty", prebuilt=True)
    assert counts["hits"], "no corral kernel was loaded from the prebuilt kernels"
    assert counts["misses"] == {}, f"compiled on a fresh install: {counts['misses']}"
    assert counts["registries"] is False, "loading the kernels refreshed Numba's registries"
    assert not list((tmp_path / "empty").rglob("*.nbc"))


@pytest.mark.slow
def test_warmup_leaves_nothing_to_compile(tmp_path: Path) -> None:
    """Without prebuilt kernels (``CORRAL_PREBUILT=0``), ``corral warmup`` compiles into
    Numba's cache everything real use needs. Slow (it compiles every kernel, minutes on two
    cores); the default run checks the same workload against the prebuilt kernels, which
    the install builds by running the same warmup (the test above)."""
    path = tokenizer_path("gpt2")
    if path is None:
        pytest.skip("tokenizer 'gpt2' unavailable (see tests/support/tokenizers.py)")
    cache = tmp_path / "numba-cache"
    warm = subprocess.run(
        [sys.executable, "-m", "corral", "warmup"],
        env=_env(cache),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert warm.returncode == 0, warm.stderr
    assert "no prebuilt kernels" in warm.stderr
    assert any(cache.rglob("*.nbi")), "warmup wrote no Numba cache index"
    counts = _workload(path, cache, prebuilt=False)
    assert counts["hits"], "no corral kernel was loaded from Numba's cache"
    assert counts["misses"] == {}, f"compiled after warmup (not cached by it): {counts['misses']}"
    assert counts["registries"] is False, "loading the kernels refreshed Numba's registries"


def test_warmup_cli_progress_and_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    """In this (already warm) process: the command reports every step and a summary on
    stderr, and ``--quiet`` prints nothing."""
    from corral.integrations.cli import main
    from corral.warmup import STEPS

    assert main(["warmup"]) == 0
    err = capsys.readouterr().err
    for name in STEPS:
        assert f"kernels for: {name}" in err
    assert f"{len(STEPS)}/{len(STEPS)}" in err
    assert "corral warmup: every kernel ready in" in err
    assert main(["warmup", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
