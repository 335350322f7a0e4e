"""The mask cache (``automata/mask_cache.py``): a mask found by the top set's structural
hash equals the one the kernel computes, at every position of random walks through real
grammars on real tokenizers; the final check still decides EOS on a cached mask; the
budget and the storing policy hold. And the mask kernel's scratch, shared by matchers on
a thread: interleaved matchers and a memo that must grow keep masks exact."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import grammar_text
from hypothesis import given, settings
from hypothesis import strategies as st
from support.masks import allowed
from support.tokenizers import load_tokenizer, load_vocab

import corral
from corral.automata.mask_cache import MaskCache, held_bytes

# Words made of several lexemes (``helloWorld`` is RULE ``hello`` then TOKEN ``World``):
# the masks that walk below lexeme ends, as in Lark's own grammar.
SPLIT_WORDS = r"""
start: stmt+
stmt: (RULE | TOKEN) ":" expr+ _NL
expr: RULE | TOKEN | STRING | "(" expr+ ")" | expr "|" expr
RULE: /[a-z_][a-z0-9_]*/
TOKEN: /[A-Z][A-Z0-9_]*/
STRING: /"[^"\n]*"/
_NL: /\n+/
%ignore " "
"""

SPLIT_TEXT = 'start: helloWorld FOO_bar "x" | (aB)\nrule: TOKEN\n'  # a document of it

SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
                "required": ["name"],
            },
        },
        "tag": {"enum": ["a", "b", "c"]},
    },
    "required": ["items"],
}

SPECS = {"split-words": SPLIT_WORDS, "json.lark": grammar_text("json"), "schema": SCHEMA}


@pytest.fixture(scope="module", params=["gpt2", "llama2"])
def pairs(request):  # type: ignore[no-untyped-def]
    """``{spec: (cached, uncached)}`` compiled grammars for one tokenizer (each pair
    lives for the module, so later walks find what earlier ones stored), and
    ``"tokenizer"``: its name."""
    vocab = load_vocab(request.param)
    out = {}
    for name, spec in SPECS.items():
        cached = corral.compile(spec, vocab, cache=False)
        cached.mask_cache.min_cost_ns = 0  # store every mask whose state comes back
        uncached = corral.compile(spec, vocab, cache=False)
        uncached.mask_cache.max_bytes = 0
        out[name] = (cached, uncached)
    out["tokenizer"] = request.param
    return out


@settings(max_examples=12, deadline=None)
@given(spec=st.sampled_from(sorted(SPECS)), seed=st.integers(0, 2**32 - 1))
def test_cached_masks_equal_computed_masks(pairs, spec, seed) -> None:  # type: ignore[no-untyped-def]
    cached, uncached = pairs[spec]
    rng = np.random.default_rng(seed)
    a, b = cached.matcher(), uncached.matcher()
    eos = set(cached.vocab.eos_token_ids)
    for _ in range(40):
        got, want = allowed(a), allowed(b)
        assert np.array_equal(got, want)
        choices = [t for t in np.flatnonzero(want).tolist() if t not in eos]
        if not choices:
            break
        t = int(rng.choice(choices))
        a.consume(t)
        b.consume(t)
    assert uncached.mask_cache.hits == 0 and len(uncached.mask_cache) == 0


def test_walks_reuse_stored_masks(pairs) -> None:  # type: ignore[no-untyped-def]
    """The same document twice: the second pass finds every mask it needs stored."""
    cached, _ = pairs["split-words"]
    tok = load_tokenizer(pairs["tokenizer"])
    ids = tok.encode(SPLIT_TEXT, add_special_tokens=False)
    for _ in range(3):
        m = cached.matcher()
        for t in ids:
            allowed(m)
            m.consume(t)
    before = cached.mask_cache.hits
    m = cached.matcher()
    for t in ids:
        allowed(m)
        m.consume(t)
    assert cached.mask_cache.hits - before == len(ids)


@pytest.mark.parametrize("first", ["[1,2]", "[1,1]"])
def test_final_check_decides_eos_on_a_cached_mask(first: str) -> None:
    """``uniqueItems`` is checked on the text: ``[1,1]`` and ``[1,2]`` end in sets with the
    same hash, and the stored mask is the kernel's (EOS in), whichever came first."""
    tok, vocab = load_tokenizer("gpt2"), load_vocab("gpt2")
    g = corral.compile(
        {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, vocab, cache=False
    )
    g.mask_cache.min_cost_ns = 0
    eos = vocab.eos_token_ids[0]
    second = "[1,1]" if first == "[1,2]" else "[1,2]"
    seen = []
    for text in (first, second):
        m = g.matcher()
        m.consume_tokens(tok.encode(text, add_special_tokens=False))
        seen.append(bool(allowed(m)[eos]))
    assert g.mask_cache.hits >= 1
    assert seen == [first == "[1,2]", second == "[1,2]"]


def test_budget_and_policy() -> None:
    cache = MaskCache(words=4, max_bytes=3 * 16, min_cost_ns=100)
    masks = [np.full(4, i, np.uint32) for i in range(8)]
    cache.offer(1, masks[1], cost_ns=10)  # cheap, first sighting: not stored
    assert cache.get(1) is None
    cache.offer(1, masks[1], cost_ns=10)  # cheap, back again: stored
    for key in (2, 3, 4):
        cache.offer(key, masks[key], cost_ns=1000)  # costly: stored at once
    assert len(cache) == 3 and cache.nbytes <= cache.max_bytes
    assert cache.get(1) is None  # the cheap entry went first
    assert np.array_equal(cache.get(2), masks[2]) and np.array_equal(cache.get(4), masks[4])
    cache.offer(5, masks[5], cost_ns=1000)  # then the oldest costly one
    assert cache.get(2) is None and len(cache) == 3
    stored = cache.get(3)
    assert stored is not None
    masks[3][:] = 99  # the cache keeps its own copy
    stored[:] = 98  # and hands out copies
    assert np.array_equal(cache.get(3), np.full(4, 3, np.uint32))
    off = MaskCache(words=4, max_bytes=0)
    off.offer(5, masks[5], cost_ns=10**9)
    assert len(off) == 0 and off.get(5) is None


def _random_mask(rng: np.random.Generator, words: int, kind: str) -> np.ndarray:
    """A mask of ``words`` words: few tokens (set bits in at most an eighth of the words),
    nearly all tokens (the complement of such a mask), or random words."""
    if kind == "mixed":
        return rng.integers(0, 2**32, words, dtype=np.uint64).astype(np.uint32)
    mask = np.zeros(words, np.uint32)
    for t in rng.integers(0, 32 * words, int(rng.integers(0, words // 8 + 1))).tolist():
        mask[t >> 5] |= np.uint32(1 << (t & 31))
    return ~mask if kind == "full" else mask


@settings(max_examples=60, deadline=None)
@given(
    words=st.sampled_from([1, 3, 100, 4009, 8193]),
    kind=st.sampled_from(["few", "full", "mixed"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_stored_forms_give_back_the_mask(words: int, kind: str, seed: int) -> None:
    """Whatever form a mask is stored in (its few words that differ from 0 or from all
    ones, or whole), filling gives back exactly that mask, over whatever ``dst`` held;
    ``nbytes`` is what the forms hold, and nearly empty or full masks take less room."""
    rng = np.random.default_rng(seed)
    cache = MaskCache(words=words, min_cost_ns=0)
    masks = [_random_mask(rng, words, kind) for _ in range(4)]
    for key, mask in enumerate(masks):
        cache.offer(key, mask, cost_ns=1)
    assert len(cache) == 4
    total = 0
    for key, mask in enumerate(masks):
        dst = rng.integers(0, 2**32, words, dtype=np.uint64).astype(np.uint32)
        assert cache.fill(key, dst) and np.array_equal(dst, mask)
        entry = cache.masks[key]
        total += entry.nbytes if isinstance(entry, np.ndarray) else 0
    assert cache.nbytes >= total
    if kind != "mixed" and words >= 100:
        assert cache.nbytes < 4 * 4 * words
    assert not cache.fill(99, np.zeros(words, np.uint32))


def test_whole_masks_are_shared_between_grammars() -> None:
    """Two caches storing the same mixed mask hold one array; a different mask of the
    same size is not mistaken for it."""
    rng = np.random.default_rng(0)
    mask = _random_mask(rng, 4009, "mixed")
    a, b = MaskCache(words=4009, min_cost_ns=0), MaskCache(words=4009, min_cost_ns=0)
    a.offer(1, mask, cost_ns=1)
    b.offer(7, mask.copy(), cost_ns=1)
    assert a.masks[1] is b.masks[7]
    assert held_bytes([a, b]) == a.nbytes + b.nbytes - mask.nbytes  # the shared copy once
    other = mask.copy()
    other[5] ^= np.uint32(1)
    b.offer(8, other, cost_ns=1)
    assert b.masks[8] is not a.masks[1] and np.array_equal(b.get(8), other)


def test_budget_counts_stored_forms() -> None:
    """The budget holds many nearly empty masks where it holds few whole ones."""
    words = 4009
    cache = MaskCache(words=words, max_bytes=4 * 4 * words, min_cost_ns=0)
    for key in range(40):
        mask = np.zeros(words, np.uint32)
        mask[key] = 1
        cache.offer(key, mask, cost_ns=1)
    assert len(cache) == 40 and cache.nbytes <= cache.max_bytes
    rng = np.random.default_rng(1)
    for key in range(100, 106):
        cache.offer(key, _random_mask(rng, words, "mixed"), cost_ns=1)
    assert cache.nbytes <= cache.max_bytes and 105 in cache.masks


def test_matchers_interleaved_on_one_thread_share_scratch_safely() -> None:
    """Matchers share the kernel's scratch on a thread (memo included), across grammars of
    one vocabulary: two at the same positions, filled alternately with a matcher of
    another grammar, each get the full mask."""
    tok, vocab = load_tokenizer("gpt2"), load_vocab("gpt2")
    g = corral.compile(SPLIT_WORDS, vocab, cache=False)
    g.mask_cache.max_bytes = 0
    ref = corral.compile(SPLIT_WORDS, vocab, cache=False)
    ref.mask_cache.max_bytes = 0
    ids = tok.encode(SPLIT_TEXT, add_special_tokens=False)
    other = corral.compile(grammar_text("json"), vocab, cache=False).matcher()
    a, b, r = g.matcher(), g.matcher(), ref.matcher()
    for t in ids:
        want = allowed(r)
        assert np.array_equal(allowed(a), want)
        allowed(other)
        assert np.array_equal(allowed(b), want)
        for m in (a, b, r):
            m.consume(t)


def test_charts_of_several_grammars_share_a_threads_scratch() -> None:
    """Charts share their dedupe scratch (``stamp``, ``sorig``) with every chart run on the
    same thread (``automata/chart.py``). Matchers of three grammars, the largest one run
    far ahead so that the scratch holds its rows, interleaved token by token while their
    charts start small and grow, then moved to another thread and forked half way, give
    every mask that each gives alone on a thread of its own."""
    import threading

    tok, vocab = load_tokenizer("gpt2"), load_vocab("gpt2")
    json_text = '{"items": [{"name": "a b", "n": 12}, {"name": "", "n": -3}], "tag": "b"}'
    specs = [
        (grammar_text("json"), '{"k": [1, 2.5, "x", {"y": null}], "z": true}'),
        (SPLIT_WORDS, SPLIT_TEXT * 3),
        (SCHEMA, json_text),
    ]
    docs = [tok.encode(text, add_special_tokens=False) for _, text in specs]

    def alone(i: int, out: list) -> None:
        g = corral.compile(specs[i][0], vocab, cache=False)
        g.mask_cache.max_bytes = 0
        m = g.matcher()
        for t in docs[i]:
            out.append(allowed(m))
            m.consume(t)
        out.append(bool(m.is_accepting()))

    want: list[list] = [[] for _ in specs]
    for i in range(len(specs)):
        th = threading.Thread(target=alone, args=(i, want[i]))
        th.start()
        th.join()
    grammars = []
    for spec, _ in specs:
        g = corral.compile(spec, vocab, cache=False)
        g.mask_cache.max_bytes = 0
        grammars.append(g)
    big = grammars[0].matcher()  # run through first: its rows are in the scratch
    for t in docs[0]:
        big.consume(t)
    matchers = [g.matcher() for g in grammars]
    got: list[list] = [[] for _ in specs]

    def step(lo: int, hi: int) -> None:
        for pos in range(lo, hi):
            for i, m in enumerate(matchers):
                if pos < len(docs[i]):
                    got[i].append(allowed(m))
                    m.consume(docs[i][pos])

    half = max(len(d) for d in docs) // 2
    step(0, half)
    matchers = [m.fork() for m in matchers]  # copies of the charts, then another thread
    th = threading.Thread(target=step, args=(half, max(len(d) for d in docs)))
    th.start()
    th.join()
    for i, m in enumerate(matchers):
        got[i].append(bool(m.is_accepting()))
        assert len(got[i]) == len(want[i])
        for a, b in zip(got[i], want[i], strict=True):
            assert np.array_equal(a, b)
        assert got[i][-1] is True


def test_a_threads_chart_scratch_grows_and_is_not_kept_past_its_bound() -> None:
    """The thread's chart scratch grows to the largest grammar's needs (charts holding
    the smaller arrays keep them); a grammar past the bound gets arrays of its own."""
    from corral.automata.chart import _KEEP_STAMP, ChartScratch

    sc = ChartScratch()
    small = sc.arrays(100, 40)
    assert small[0].shape[0] >= 100 and small[1].shape[0] >= 40 and (small[0] == -1).all()
    assert sc.arrays(90, 30)[0] is small[0]  # large enough: the same arrays
    grown = sc.arrays(1000, 400)
    assert grown[0] is not small[0] and grown[0].shape[0] >= 1000 and (grown[0] == -1).all()
    own = sc.arrays(_KEEP_STAMP + 1, 10)
    assert own[0].shape[0] == _KEEP_STAMP + 1 and sc.stamp is grown[0]


def test_a_full_memo_grows_and_the_mask_stays_exact() -> None:
    """A memo too small for a mask makes the kernel ask for a larger one; the retried
    mask is the same as with a large memo."""
    from corral.automata.kernels.layout import MEMO_COLS
    from corral.automata.matcher import fill_scratch

    tok, vocab = load_tokenizer("gpt2"), load_vocab("gpt2")
    g = corral.compile(SPLIT_WORDS, vocab, cache=False)
    g.mask_cache.max_bytes = 0
    ids = tok.encode(SPLIT_TEXT, add_special_tokens=False)
    scratch = fill_scratch(vocab.trie.max_depth + 2, g.rank_words)
    m = g.matcher()
    grew = False
    for t in ids:
        want = allowed(m)
        scratch.memo = np.zeros((4, MEMO_COLS), np.int64)
        assert np.array_equal(allowed(m), want)
        grew |= scratch.memo.shape[0] > 4
        m.consume(t)
    assert grew
