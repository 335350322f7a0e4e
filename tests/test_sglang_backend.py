"""corral as SGLang's grammar backend, driven by SGLang's own code on CPU: plugin
registration, compile through the backend's executor and cache, refusals, a mixed batch
through ``SamplingBatchInfo.update_regex_vocab_mask`` and ``GrammarMask.apply``, and the
speculative draft-tree walk. Runs where SGLang is installed (``docs/sglang.md``: its test
command); skipped otherwise."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from concurrent.futures import Future
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("sglang", reason="SGLang is not installed (docs/sglang.md: its test command)")

import jsonschema
import torch
from sglang.srt.constrained import base_grammar_backend as bgb
from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo
from support.tokenizers import load_tokenizer
from support.words import mask_of

from corral.integrations.sglang.backend import CorralGrammar, CorralGrammarBackend

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
REGEX = r"(yes|no)!"
TAG = {
    "type": "structural_tag",
    "format": {
        "type": "triggered_tags",
        "triggers": ["<call>"],
        "tags": [
            {
                "type": "tag",
                "begin": "<call>",
                "content": {"type": "json_schema", "json_schema": SCHEMA},
                "end": "</call>",
            }
        ],
        "at_least_one": True,
        "stop_after_first": True,
    },
}


@pytest.fixture(scope="module")
def setup():
    """A backend over Qwen2's tokenizer, logits padded past the vocabulary (as served)."""
    tok = load_tokenizer("qwen2")
    width = (len(tok) + 127) // 128 * 128 + 64
    eos = {tok.eos_token_id}
    return tok, width, eos, CorralGrammarBackend(tok, width, eos)


def _compile(backend: CorralGrammarBackend, key: tuple[str, str]) -> CorralGrammar:
    value, hit = backend.get_cached_or_future_value(key, False)
    if not hit:
        assert isinstance(value, Future)
        grammar = value.result()
        backend.set_cache(key, grammar.copy())  # as SGLang's GrammarManager does
        return grammar
    return value


def test_the_plugin_registers_in_a_fresh_process() -> None:
    """SGLang's schedulers are spawned: the entry point must register the backend there."""
    from importlib.metadata import entry_points

    if not any(e.value.startswith("corral.") for e in entry_points(group="sglang.srt.plugins")):
        pytest.skip("corral is not installed as a distribution here (no entry point)")
    code = (
        "from sglang.srt.plugins import load_plugins\n"
        "from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES\n"
        "from sglang.srt.constrained import base_grammar_backend as bgb\n"
        "assert 'corral' not in bgb.GRAMMAR_BACKEND_REGISTRY\n"
        "load_plugins()\n"
        "from corral.integrations.sglang import create_backend\n"
        "assert 'corral' in GRAMMAR_BACKEND_CHOICES, GRAMMAR_BACKEND_CHOICES\n"
        "assert bgb.GRAMMAR_BACKEND_REGISTRY['corral'] is create_backend\n"
        "import sys\n"
        "assert 'numba' not in sys.modules and 'corral.automata' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_cache_hit_is_a_fresh_matcher(setup) -> None:
    tok, _width, _eos, backend = setup
    key = ("json", json.dumps(SCHEMA))
    first = _compile(backend, key)
    first.accept_token(tok.encode('{"', add_special_tokens=False)[0])
    again, hit = backend.get_cached_or_future_value(key, False)
    assert hit and isinstance(again, CorralGrammar)
    assert again.matcher is not first.matcher and again.matcher.num_tokens == 0
    assert again.grammar_stats.is_cache_hit
    assert bool(again)  # SGLang tests grammars for truth


BAD_SCHEMA = {"type": "object", "properties": {"a": {"type": "integr"}}}
BAD_TAG = {"type": "structural_tag", "format": {"type": "nope"}}
BAD_LEGACY = {"type": "structural_tag", "structures": [], "triggers": []}


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (("json", json.dumps(BAD_SCHEMA)), "/properties/a/type"),
        (("json", "{not json"), "SchemaError"),
        (("regex", "a(b"), "GrammarError"),
        (("ebnf", 'root ::= "a"'), "GBNF"),
        (("structural_tag", json.dumps(BAD_TAG)), "/format/type"),
        (("structural_tag", json.dumps(BAD_LEGACY)), "/structures"),
    ],
)
def test_what_corral_refuses_is_an_invalid_grammar_with_its_message(setup, key, message) -> None:
    backend = setup[3]
    bad = backend._init_value_dispatch(key, False)  # what SGLang runs on its executor
    assert isinstance(bad, bgb.InvalidGrammarObject)
    assert message in bad.error_message


def test_a_mixed_batch_through_sglangs_mask_path(setup) -> None:
    """JSON, unconstrained, regex and structural-tag rows, masks built and applied by SGLang;
    every constrained row equals a fresh corral matcher's mask after the same tokens, the
    unconstrained row's logits are untouched, and every output is in its language."""
    tok, width, eos, backend = setup
    keys = [
        ("json", json.dumps(SCHEMA)),
        None,
        ("regex", REGEX),
        ("structural_tag", json.dumps(TAG)),
    ]
    grammars = [None if k is None else _compile(backend, k).copy() for k in keys]
    outputs: list[list[int]] = [[] for _ in keys]
    rng = torch.Generator().manual_seed(0)
    for _ in range(60):
        info = SimpleNamespace(
            grammars=grammars, temperatures=torch.ones(len(keys), 1), vocab_size=width,
            device="cpu", grammar_mask=None,
        )  # fmt: skip
        SamplingBatchInfo.update_regex_vocab_mask(info)
        mask = info.grammar_mask.vocab_mask
        assert mask.dtype == torch.int32 and tuple(mask.shape) == (len(keys), (width + 31) // 32)
        logits = torch.randn(len(keys), width, generator=rng)
        before = logits.clone()
        info.grammar_mask.apply(logits)
        assert torch.equal(logits[1], before[1])
        for row, (key, g) in enumerate(zip(keys, grammars, strict=True)):
            if g is None or g.is_terminated():
                continue
            ref = backend.compiler.compile(g.compiled.grammar).matcher()
            ref.consume_tokens(outputs[row])
            allowed = np.zeros(width, bool)
            allowed[: ref.vocab_size] = mask_of(ref)
            bits = (mask[row].numpy().view(np.uint32)[:, None] >> np.arange(32)) & 1
            assert np.array_equal(bits.reshape(-1)[:width].astype(bool), allowed), key
            token = int(torch.argmax(logits[row]))
            g.accept_token(token)
            outputs[row].append(token)
        if all(g is None or g.is_terminated() for g in grammars):
            break
    texts = [tok.decode([t for t in out if t not in eos]) for out in outputs]
    assert all(g is None or g.is_terminated() for g in grammars), texts
    jsonschema.validate(json.loads(texts[0]), SCHEMA)
    assert re.fullmatch(REGEX, texts[2]), texts[2]
    call = re.fullmatch(r"<call>(.*)</call>", texts[3], re.DOTALL)
    assert call, texts[3]
    jsonschema.validate(json.loads(call.group(1)), SCHEMA)


def test_tokens_roll_back_over_the_end_and_refusals_raise_value_error(setup) -> None:
    tok, _width, eos, backend = setup
    g = _compile(backend, ("regex", REGEX)).copy()
    for t in tok.encode("yes!", add_special_tokens=False):
        g.accept_token(t)
    assert not g.is_terminated()
    (end,) = eos
    g.accept_token(end)
    assert g.is_terminated() and g.current_token == end
    g.rollback(1)
    assert not g.is_terminated()
    g.accept_token(end)
    assert g.is_terminated()
    fresh = g.copy()
    with pytest.raises(ValueError):
        fresh.accept_token(tok.encode("maybe", add_special_tokens=False)[0])


def test_the_speculative_tree_walk(setup) -> None:
    """SGLang's own draft-tree walk (``spec_utils.generate_token_bitmask``) over two chains,
    one with a draft outside the grammar: the grammars end where they began, the rows of the
    valid chain equal direct fills, and below the bad draft nothing is filled."""
    try:
        from sglang.srt.speculative.spec_utils import GrammarTree, generate_token_bitmask
    except ImportError as e:  # it imports torchvision, absent from a CPU-only install
        pytest.skip(f"SGLang's speculative utilities do not import here: {e}")
    tok, width, _eos, backend = setup
    key = ("json", json.dumps(SCHEMA))
    draft = tok.encode('{"name": "x', add_special_tokens=False)[:4]
    bad = draft[:1] + tok.encode("]]", add_special_tokens=False)[:1] + draft[2:4]
    ids = torch.tensor([[0, *draft], [0, *bad]])
    tree = GrammarTree.from_linear_chain(ids)
    ok, wrong = _compile(backend, key).copy(), _compile(backend, key).copy()
    reqs = [SimpleNamespace(grammar=ok), SimpleNamespace(grammar=wrong)]
    mask, _ = generate_token_bitmask(reqs, *tree.resolve(), width)
    assert ok.matcher.num_tokens == 0 and wrong.matcher.num_tokens == 0
    ref = _compile(backend, key).copy()
    for i in range(5):
        row = ref.allocate_vocab_mask(width, 1, "cpu")
        ref.fill_vocab_mask(row, 0)
        assert torch.equal(row[0], mask[i]), i
        if i < 4:
            ref.accept_token(draft[i])
    assert torch.equal(mask[5], mask[0])  # the second chain's root: the same start state
    assert (mask[7:10] == -1).all()  # below the refused draft: left unconstrained, unused


@pytest.mark.parametrize("rows", [[0, 1], [1, 3]])
def test_the_batched_fill_writes_its_rows_only(setup, rows: list[int]) -> None:
    """Listed rows equal one-row fills; the rows not listed keep what they held."""
    tok, width, _eos, backend = setup
    grammars = [
        _compile(backend, k).copy() for k in (("json", json.dumps(SCHEMA)), ("regex", REGEX))
    ]
    grammars[1].accept_token(tok.encode("y", add_special_tokens=False)[0])
    mask = grammars[0].allocate_vocab_mask(width, 4, "cpu")
    mask.fill_(7)
    CorralGrammar.fill_vocab_mask_batched(
        [bgb.GrammarRow(r, g) for r, g in zip(rows, grammars, strict=True)], mask
    )
    for r, g in zip(rows, grammars, strict=True):
        one = g.allocate_vocab_mask(width, 1, "cpu")
        g.fill_vocab_mask(one, 0)
        assert torch.equal(mask[r], one[0]), r
    assert all((mask[r] == 7).all() for r in range(4) if r not in rows)
