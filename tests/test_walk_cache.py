"""The walk cache (``automata/walk_cache.py``): masks read from stored walks below lexeme
ends equal the masks walked node by node, at every position of random walks through
real grammars on real tokenizers, across masks that reuse entries; arrays that fill up
grow and a spent budget stops storing without changing a mask; each thread has its own
cache."""

from __future__ import annotations

import threading
from pathlib import Path

import lark
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.masks import allowed
from support.tokenizers import load_tokenizer, load_vocab

import corral
from corral.automata.kernels.layout import WC_BUILDS
from corral.automata.walk_cache import WalkCache

# Lark's own grammar: rule and token names glued together (``fooBar``), names after
# spaces and punctuation; the walks below lexeme ends that the cache keeps.
LARK_GRAMMAR = (Path(lark.__file__).parent / "grammars" / "lark.lark").read_text()
LARK_TEXT = (Path(lark.__file__).parent / "grammars" / "common.lark").read_text()[:1500]

# Names after every "(" (as in PDDL): the same walk from the space below "(" in each mask.
LISTS = r"""
start: item+
item: "(" NAME (NAME | item)* ")"
NAME: /[a-zA-Z][a-zA-Z0-9_-]*/
%ignore /[ \n]+/
"""

SPECS = {"lark.lark": LARK_GRAMMAR, "lists": LISTS}


def _compile(spec: str, vocab: corral.Vocabulary, walk_cache: bool) -> corral.CompiledGrammar:
    g = corral.compile(spec, vocab, cache=False)
    g.mask_cache.max_bytes = 0  # every mask from the kernel
    if not walk_cache:
        g.walk_cache_max_bytes = 0
    return g


@pytest.fixture(scope="module", params=["gpt2", "llama2"])
def pairs(request):  # type: ignore[no-untyped-def]
    """``{spec: (with walk cache, without)}`` for one tokenizer, kept for the module so
    that later examples read entries earlier ones stored."""
    vocab = load_vocab(request.param)
    out = {name: (_compile(s, vocab, True), _compile(s, vocab, False)) for name, s in SPECS.items()}
    out["tokenizer"] = request.param
    return out


@settings(max_examples=10, deadline=None)
@given(spec=st.sampled_from(sorted(SPECS)), seed=st.integers(0, 2**32 - 1))
def test_masks_from_stored_walks_equal_walked_masks(pairs, spec, seed) -> None:  # type: ignore[no-untyped-def]
    cached, plain = pairs[spec]
    rng = np.random.default_rng(seed)
    a, b = cached.matcher(), plain.matcher()
    eos = set(cached.vocab.eos_token_ids)
    for _ in range(30):
        got, want = allowed(a), allowed(b)
        assert np.array_equal(got, want)
        choices = [t for t in np.flatnonzero(want).tolist() if t not in eos]
        if not choices:
            break
        t = int(rng.choice(choices))
        a.consume(t)
        b.consume(t)
    assert plain.walk_cache().hits == 0 and len(plain.walk_cache().entries) == 0


def _replay(g: corral.CompiledGrammar, ids: list[int], times: int = 1) -> list[np.ndarray]:
    masks = []
    for _ in range(times):
        m = g.matcher()
        for t in ids:
            masks.append(allowed(m))
            m.consume(t)
    return masks


@pytest.mark.parametrize("tokenizer", ["gpt2", "llama2"])
def test_a_document_replayed_reads_stored_walks(tokenizer: str) -> None:
    """Lark's ``common.lark`` through Lark's grammar, twice: the second pass reads
    stored entries, and every mask equals the node-by-node walk's."""
    vocab, tok = load_vocab(tokenizer), load_tokenizer(tokenizer)
    ids = tok.encode(LARK_TEXT, add_special_tokens=False)
    g, plain = _compile(LARK_GRAMMAR, vocab, True), _compile(LARK_GRAMMAR, vocab, False)
    want = _replay(plain, ids, 2)
    got = _replay(g, ids, 2)
    assert all(np.array_equal(x, y) for x, y in zip(got, want, strict=True))
    wc = g.walk_cache()
    assert wc.hits > 0 and wc.ctl[WC_BUILDS] > 0  # entries built, and read


def test_full_arrays_grow_and_masks_stay_exact() -> None:
    """Start from arrays far too small: the kernel reports them full, they grow between
    masks, and no mask changes."""
    vocab, tok = load_vocab("gpt2"), load_tokenizer("gpt2")
    text = "(domain (types a-b c) (pred x obj) (and (at x) (not (at y-z))))\n"
    ids = tok.encode(text * 3, add_special_tokens=False)
    g, plain = _compile(LISTS, vocab, True), _compile(LISTS, vocab, False)
    wc = g.walk_cache()
    wc.table = np.zeros((2, 2), np.int64)
    wc.entries = np.zeros((1, 4), np.int32)
    wc.store = np.zeros(2, np.int32)
    got = _replay(g, ids, 2)
    want = _replay(plain, ids, 2)
    assert all(np.array_equal(x, y) for x, y in zip(got, want, strict=True))
    assert wc.table.shape[0] > 2 and wc.entries.shape[0] > 1 and wc.store.shape[0] > 2
    assert wc.hits > 0


def test_a_spent_budget_stops_storing() -> None:
    vocab, tok = load_vocab("gpt2"), load_tokenizer("gpt2")
    ids = tok.encode(LARK_TEXT, add_special_tokens=False)
    g, plain = _compile(LARK_GRAMMAR, vocab, True), _compile(LARK_GRAMMAR, vocab, False)
    g.walk_cache_max_bytes = 200_000
    got = _replay(g, ids, 2)
    want = _replay(plain, ids, 2)
    assert all(np.array_equal(x, y) for x, y in zip(got, want, strict=True))
    assert g.walk_cache().nbytes <= 200_000


def test_each_thread_has_its_own_cache() -> None:
    vocab, tok = load_vocab("gpt2"), load_tokenizer("gpt2")
    ids = tok.encode(LARK_TEXT[:300], add_special_tokens=False)
    g = _compile(LARK_GRAMMAR, vocab, True)
    mine = g.walk_cache()
    found: list[WalkCache] = []
    worker = threading.Thread(target=lambda: (_replay(g, ids), found.append(g.walk_cache())))
    worker.start()
    worker.join()
    assert found and found[0] is not mine
    assert g.walk_cache() is mine and len(found[0].table) > 1
