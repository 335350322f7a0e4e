"""Edges of the public API: ids and counts are integers; a model or tokenizer that is not
the grammar's is refused; SMC keeps outputs that are complete at the token budget; and
fast-forward never changes the distribution of the samplers that promise one."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from support.sampling import chi_square_p
from support.tiny_models import tiny_llama
from support.tokenizers import load_tokenizer

import corral
from corral import IncompleteGenerationError, TokenizerError
from corral.integrations.generate import decode_steps
from corral.integrations.transformers import AWRSLogitsProcessor, GrammarLogitsProcessor
from corral.integrations.vocabularies import vocabulary_for
from corral.sampler.smc import smc
from corral.testing import NGramLM, constrained_sequences, total_variation

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
PADDED = 50_304  # GPT-2's 50,257 tokens in an output layer padded to a multiple of 64
NOT_INTEGERS = [
    90.0,
    "90",
    np.float64(90.9),
    True,
    np.True_,
    None,
    torch.tensor(90.0),
    torch.tensor(True),
]


@pytest.fixture(scope="module")
def gpt2() -> Any:
    tok = load_tokenizer("gpt2")
    vocab = corral.Vocabulary.from_hf(tok)
    return tok, vocab, corral.compile(SCHEMA, vocab)


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """AWRS draws over 50k-token rows are several times faster on one thread when the
    machine is shared; the results do not depend on it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---------------------------------------------------------------------------------------
# 1. token ids, rows and sizes are integers
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", NOT_INTEGERS, ids=repr)
def test_token_ids_must_be_integers(gpt2, bad) -> None:  # type: ignore[no-untyped-def]
    _, vocab, compiled = gpt2
    assert vocab.token_bytes(90) == b"{"  # token 90 would be allowed here: '{' starts the object
    m = compiled.matcher()
    for call in (m.consume, m.try_consume):
        with pytest.raises(TypeError, match="token_id must be an integer") as e:
            call(bad)
        assert repr(bad) in str(e.value)  # the message shows what was given
    assert m.num_tokens == 0
    for call in (m.consume_tokens, m.validate_tokens):
        with pytest.raises(TypeError, match=r"token_ids\[1\] must be an integer"):
            call([90, bad])
        assert m.num_tokens == 0  # nothing consumed: the list is checked first
    with pytest.raises(TypeError, match="token_id must be an integer"):
        vocab.token_bytes(bad)
    with pytest.raises(TypeError, match="token_id must be an integer"):
        vocab.kind(bad)
    with pytest.raises(TypeError, match="token_id must be an integer"):
        vocab.token_data(bad)
    with pytest.raises(TypeError, match=r"token_ids\[0\] must be an integer"):
        vocab.decode([bad])


@pytest.mark.parametrize("bad", NOT_INTEGERS, ids=repr)
def test_counts_rows_and_sizes_must_be_integers(gpt2, bad) -> None:  # type: ignore[no-untyped-def]
    tok, vocab, compiled = gpt2
    m = compiled.matcher()
    m.consume(90)
    bm = corral.allocate_bitmask(2, vocab.size)
    with pytest.raises(TypeError, match="num_tokens must be an integer"):
        m.rollback(bad)
    assert m.num_tokens == 1
    with pytest.raises(TypeError, match="row must be an integer"):
        m.fill_bitmask(bm, bad)
    with pytest.raises(TypeError, match="batch must be an integer"):
        corral.allocate_bitmask(bad, vocab.size)
    with pytest.raises(TypeError, match="vocab_size must be an integer"):
        corral.allocate_bitmask(1, bad)
    with pytest.raises(TypeError, match="vocab_size must be an integer"):
        corral.bitmask_to_bool(bm, bad)
    with pytest.raises(TypeError, match="eos_token_ids"):
        corral.Vocabulary([b"a", b"b"], eos_token_ids=[bad])
    with pytest.raises(TypeError, match="special_ids"):
        corral.Vocabulary([b"a", b"b"], special_ids=[bad])
    if bad is None:  # the default of the optional arguments below
        return
    with pytest.raises(TypeError, match="vocab_size must be an integer"):
        corral.apply_token_bitmask_inplace(torch.zeros(2, vocab.size), bm, bad)
    with pytest.raises(TypeError, match="vocab_size must be an integer"):
        corral.Vocabulary.from_hf(tok, vocab_size=bad, check=False)
    with pytest.raises(TypeError, match="vocab_size must be an integer"):
        corral.Vocabulary([b"a", b"b"], vocab_size=bad)
    with pytest.raises(TypeError, match="eos_token_ids"):
        corral.Vocabulary.from_hf(tok, eos_token_ids=bad, check=False)


def test_the_reported_calls(gpt2) -> None:  # type: ignore[no-untyped-def]
    tok, _, compiled = gpt2
    m = compiled.matcher()
    for bad in (90.0, "90", np.float64(90.9)):
        with pytest.raises(TypeError, match=type(bad).__name__):
            m.consume(bad)
    m.consume(90)
    with pytest.raises(TypeError, match="bool"):
        m.rollback(True)
    with pytest.raises(TypeError, match="'128300'"):
        corral.Vocabulary.from_hf(tok, vocab_size="128300")
    with pytest.raises(TypeError, match=r"1000\.7"):
        corral.allocate_bitmask(1, 1000.7)
    with pytest.raises(TypeError, match="token_ids must be a sequence"):
        m.consume_tokens(b"{")  # bytes iterate as ints: refused, not read as ids
    with pytest.raises(TypeError, match="one-dimensional array of integers"):
        m.consume_tokens(np.array([90.0]))
    with pytest.raises(TypeError, match="one-dimensional array of integers"):
        m.consume_tokens(torch.tensor([[90]]))
    assert m.num_tokens == 1


def test_integer_arrays_and_numpy_integers_keep_working(gpt2) -> None:  # type: ignore[no-untyped-def]
    tok, vocab, compiled = gpt2
    ids = tok.encode('{"a": 12, "b": true}')
    ref = compiled.matcher()
    ref.consume_tokens(ids)
    assert ref.is_accepting()
    expected = corral.allocate_bitmask(1, vocab.size)
    ref.fill_bitmask(expected)
    for given in (
        np.array(ids, np.int64),
        np.array(ids, np.int32),
        torch.tensor(ids),
        torch.tensor(ids, dtype=torch.int32),
        [np.int64(t) for t in ids],
        [torch.tensor(t) for t in ids],
    ):
        m = compiled.matcher()
        assert m.validate_tokens(given) == len(ids)
        m.consume_tokens(given)
        bm = corral.allocate_bitmask(np.int64(2), np.int32(vocab.size))
        m.fill_bitmask(bm, np.int64(1))
        assert np.array_equal(bm[1], expected[0])
        assert vocab.decode(given) == vocab.decode(ids)
        m.rollback(np.int64(2))
        assert m.num_tokens == len(ids) - 2
    m = compiled.matcher()
    m.consume(np.uint16(90))
    assert m.try_consume(torch.tensor(1, dtype=torch.int64)) is True  # '"'
    assert vocab.token_bytes(np.int32(90)) == b"{" and vocab.kind(np.int64(90)) == "normal"
    padded = corral.Vocabulary.from_hf(
        tok, vocab_size=np.int64(PADDED), eos_token_ids=np.int64(50256), check=False
    )
    assert padded.size == PADDED and padded.eos_token_ids == (50256,)


def test_out_of_range_values_keep_value_errors(gpt2) -> None:  # type: ignore[no-untyped-def]
    tok, vocab, compiled = gpt2
    m = compiled.matcher()
    for tid in (vocab.size, -1, np.int64(10**12)):
        with pytest.raises(corral.TokenRejectedError, match="outside the vocabulary"):
            m.consume(tid)
    with pytest.raises(corral.MatcherStateError):
        m.rollback(1)
    with pytest.raises(corral.MatcherStateError):
        m.rollback(-1)
    bm = corral.allocate_bitmask(2, vocab.size)
    with pytest.raises(ValueError, match="outside the bitmask's batch"):
        m.fill_bitmask(bm, 2)
    with pytest.raises(ValueError, match="batch must be >= 1, got 0"):
        corral.allocate_bitmask(0, vocab.size)
    for tid in (-1, vocab.size):  # -1 used to wrap around to the last token
        with pytest.raises(ValueError, match="outside the vocabulary"):
            vocab.token_bytes(tid)
        with pytest.raises(ValueError, match="outside the vocabulary"):
            vocab.decode([90, tid])
    with pytest.raises(TokenizerError, match="smaller than the tokenizer"):
        corral.Vocabulary.from_hf(tok, vocab_size=1000, check=False)
    words = bm.shape[1]
    with pytest.raises(ValueError, match=rf"= \[2, {words + 1}\], got int32 \[2, {words}\]"):
        corral.apply_token_bitmask_inplace(torch.zeros(2, vocab.size), bm, vocab.size + 32)


# ---------------------------------------------------------------------------------------
# 2. a model or tokenizer that is not the grammar's
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def padded() -> Any:
    """GPT-2's tokenizer, a model with a padded output layer, and a grammar compiled for
    them; a tiny model of Llama-3's tokenizer (128,257 ids, EOS 128001)."""
    tok = load_tokenizer("gpt2")
    model = tiny_llama(tok, vocab_size=PADDED)
    compiled = corral.compile(SCHEMA, vocabulary_for(model, tok))
    llama_tok = load_tokenizer("llama3")
    return tok, model, compiled, llama_tok, tiny_llama(llama_tok)


def test_processor_refuses_another_tokenizer(padded) -> None:  # type: ignore[no-untyped-def]
    tok, model, compiled, llama_tok, _ = padded
    GrammarLogitsProcessor(compiled, tokenizer=tok, model=model)  # the right ones pass
    for other in (llama_tok, load_tokenizer("qwen2")):
        with pytest.raises(TokenizerError, match="not the one the grammar was compiled for"):
            GrammarLogitsProcessor(compiled, tokenizer=other)
        with pytest.raises(TokenizerError, match="not the one the grammar was compiled for"):
            AWRSLogitsProcessor(compiled, tokenizer=other)
    # a tokenizer whose ids spell other bytes is named by the first differing token
    llama2, phi3 = load_tokenizer("llama2"), load_tokenizer("phi3")
    for_phi3 = corral.compile(corral.Grammar.from_regex("[a-z]+"), corral.Vocabulary.from_hf(phi3))
    with pytest.raises(TokenizerError, match="32000 tokens"):
        GrammarLogitsProcessor(for_phi3, tokenizer=llama2)


def test_processor_accepts_its_tokenizer_under_any_added_tokens_policy() -> None:
    tok = load_tokenizer("deepseek-coder")  # has added tokens that are not marked special
    policies = ("whitespace", "all", "none")
    hashes = set()
    for policy in policies:
        vocab = corral.Vocabulary.from_hf(tok, added_tokens=policy, check=False)
        hashes.add(vocab.hash)
        compiled = corral.compile(corral.Grammar.from_regex("[a-z]+"), vocab)
        GrammarLogitsProcessor(compiled, tokenizer=tok)
    assert len(hashes) > 1  # the policies give different vocabularies, all recognised


def test_processor_refuses_another_model(padded) -> None:  # type: ignore[no-untyped-def]
    tok, model, compiled, _, llama_model = padded
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(TokenizerError, match="EOS id"):
        GrammarLogitsProcessor(compiled, model=llama_model)  # wide enough, but EOS 128001
    narrow = tiny_llama(tok)  # 50,257 logits: narrower than the padded vocabulary
    with pytest.raises(TokenizerError, match="fewer than the 50304 ids"):
        GrammarLogitsProcessor(compiled, model=narrow)
    proc = GrammarLogitsProcessor(compiled, tokenizer=tok, model=model)
    assert torch.isfinite(proc(ids, torch.zeros(1, PADDED))).any()
    with pytest.raises(TokenizerError, match="another model"):
        GrammarLogitsProcessor(compiled, model=model)(ids, torch.zeros(1, 128_256))
    # a model and an assistant padded differently: the scores of either are accepted
    unpadded = corral.compile(SCHEMA, corral.Vocabulary.from_hf(tok))
    both = GrammarLogitsProcessor(unpadded, tokenizer=tok, model=[narrow, model])
    both(ids, torch.zeros(1, PADDED))
    both(ids, torch.zeros(1, 50_257))
    with pytest.raises(TokenizerError, match="another model"):
        both(ids, torch.zeros(1, 50_400))


def test_generate_stream_extract_refuse_a_model_of_another_tokenizer(padded) -> None:  # type: ignore[no-untyped-def]
    tok, _, _, llama_tok, llama_model = padded
    # the Llama model's logits are wide enough for GPT-2's ids, but its EOS is no GPT-2 token
    with pytest.raises(TokenizerError, match=r"EOS id\(s\) \[128001\]"):
        corral.generate(llama_model, "x", regex="[a-z]+", tokenizer=tok)
    with pytest.raises(TokenizerError, match="EOS id"):
        list(corral.stream(llama_model, "x", regex="[a-z]+", tokenizer=tok))
    with pytest.raises(TokenizerError, match="EOS id"):
        corral.extract(llama_model, ["doc"], SCHEMA, tokenizer=tok)
    # GPT-2-sized logits for Llama-3's tokenizer: normal tokens beyond the logits
    small = tiny_llama(tok)
    with pytest.raises(TokenizerError, match="smaller than the tokenizer"):
        list(corral.stream(small, "x", regex="[a-z]+", tokenizer=llama_tok))
    with pytest.raises(TokenizerError, match="smaller than the tokenizer"):
        corral.extract(small, ["doc"], SCHEMA, tokenizer=llama_tok)


def test_extract_with_a_padded_model_passes_the_checks(padded) -> None:  # type: ignore[no-untyped-def]
    tok, model, _, _, _ = padded
    small = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
             "additionalProperties": False}  # fmt: skip
    records = corral.extract(model, ["one", "two"], small, tokenizer=tok, max_new_tokens=40)
    assert all(isinstance(r["ok"], bool) for r in records)


# ---------------------------------------------------------------------------------------
# an enumerable causal LM over a real tokenizer
# ---------------------------------------------------------------------------------------
class BigramOnSupport(torch.nn.Module):
    """A causal LM over a real tokenizer's ids whose next-token distribution depends on
    the last token only and is a random table over a few ``support`` ids (every other id
    has probability 0), so every output and its probability can be enumerated.

    Called like a transformers model: ``model(input_ids=int64 [B, L]) -> .logits float32
    [B, L, len(tokenizer)]`` (the KV cache is not needed: the last token is the state).
    """

    def __init__(self, tokenizer: Any, support: list[int], *, seed: int) -> None:
        super().__init__()
        self._anchor = torch.nn.Parameter(torch.zeros(1))  # tells callers the device
        v, eos = len(tokenizer), tokenizer.eos_token_id
        self.config = SimpleNamespace(vocab_size=v, eos_token_id=eos)
        self.generation_config = SimpleNamespace(eos_token_id=eos)
        self._row_of = {t: i + 1 for i, t in enumerate(support)}  # row 0: any other token
        rng = np.random.default_rng(seed)
        table = np.full((len(support) + 1, v), -np.inf)
        for r in range(table.shape[0]):
            table[r, support] = np.log(rng.dirichlet(np.ones(len(support))))
        self.table = torch.from_numpy(table).float()

    def logprob_next(self, last: int) -> torch.Tensor:
        return self.table[self._row_of.get(last, 0)]

    def forward(self, input_ids: torch.Tensor, **_: Any) -> Any:
        rows = [[self._row_of.get(t, 0) for t in r] for r in input_ids.tolist()]
        return SimpleNamespace(logits=self.table[torch.tensor(rows)], past_key_values=())


FORCED = r"[xy]ab\+[xy]"  # after x or y, 'ab+' is forced: GPT-2 cuts it 'ab' '+'


@pytest.fixture(scope="module")
def bigram() -> Any:
    tok = load_tokenizer("gpt2")
    support = [tok.convert_tokens_to_ids(t) for t in ("x", "y", "a", "b", "ab", "+")]
    support.append(tok.eos_token_id)
    model = BigramOnSupport(tok, support, seed=5)
    compiled = corral.compile(corral.Grammar.from_regex(FORCED), vocabulary_for(model, tok))
    prompt = tok.encode("Q:")
    assert prompt[-1] not in support
    return tok, model, compiled, prompt


def exact_token_distribution(model: BigramOnSupport, compiled: Any, last: int) -> dict:  # type: ignore[type-arg]
    """Every output (token ids) of per-token sampling from the model's next-token
    distribution restricted to the allowed tokens, with its exact probability."""
    eos = set(compiled.eos_ids.tolist())
    out: dict[tuple[int, ...], float] = {}
    m = compiled.matcher()

    def visit(prefix: list[int], logq: float) -> None:
        lp = model.logprob_next(prefix[-1] if prefix else last).double()
        allowed = [t for t in m.allowed_token_ids().tolist() if math.isfinite(float(lp[t]))]
        norm = float(torch.logsumexp(lp[allowed], dim=0))
        for t in allowed:
            lq = logq + float(lp[t]) - norm
            if t in eos:
                out[tuple(prefix)] = math.exp(lq)
                continue
            m.consume(t)
            visit([*prefix, t], lq)
            m.rollback(1)

    visit([], 0.0)
    return out


# ---------------------------------------------------------------------------------------
# 3. SMC at the token budget
# ---------------------------------------------------------------------------------------
def test_smc_keeps_outputs_complete_at_the_budget() -> None:
    tokens = ["0", "1", "00", "11", "10", "01", "</s>"]
    lm = NGramLM(tokens, order=2, seed=3)
    compiled = corral.compile(corral.Grammar.from_regex(r"1[01]{4}|00000"), lm.vocabulary())
    seqs = constrained_sequences(lm, compiled, max_tokens=6)
    budget = 3  # every output of at most 3 tokens has exactly 3 (5 characters, <= 2 each)
    fits = {s: p for s, p in seqs.items() if len(s) <= budget}
    assert fits and all(len(s) == budget for s in fits)
    z = sum(fits.values())  # P(s in L(G), |s| <= budget), EOS included
    target = {s: p / z for s, p in fits.items()}
    z_hat, tv = [], []
    for seed in range(3):
        res = smc(lm.next_logits, compiled, n_particles=1024, max_tokens=budget,
                  generator=torch.Generator().manual_seed(seed))  # fmt: skip
        dist = res.distribution()
        assert dist and set(dist) <= set(target)
        z_hat.append(math.exp(res.log_z))
        tv.append(total_variation(dist, target))
    assert sum(z_hat) / len(z_hat) == pytest.approx(z, rel=0.2)  # Ẑ is unbiased for z
    assert max(tv) < 0.25


def test_generate_smc_returns_outputs_of_exactly_max_new_tokens(bigram, one_torch_thread) -> None:  # type: ignore[no-untyped-def]
    tok, model, compiled, prompt = bigram
    ab = tok.convert_tokens_to_ids("ab")
    # with 4 tokens, only 'x|y' 'ab' '+' 'x|y' fits: complete exactly at the budget
    for seed in range(3):
        r = corral.generate(model, prompt, grammar=compiled, tokenizer=tok, sampler="smc",
                            n_particles=16, temperature=1.0, seed=seed, max_new_tokens=4,
                            details=True)  # fmt: skip
        assert len(r.token_ids) == 4 and r.token_ids[1] == ab
        assert r.log_z is not None and math.isfinite(r.log_z)
    # with 5, the 4-token outputs end by drawing EOS and the 5-token ones at the budget
    lengths = set()
    for seed in range(5):
        r = corral.generate(model, prompt, grammar=compiled, tokenizer=tok, sampler="smc",
                            n_particles=8, temperature=1.0, seed=seed, max_new_tokens=5,
                            details=True)  # fmt: skip
        lengths.add(len(r.token_ids))
    assert lengths == {4, 5}
    with pytest.raises(IncompleteGenerationError, match="no SMC particle completed"):
        corral.generate(model, prompt, grammar=compiled, tokenizer=tok, sampler="smc",
                        n_particles=4, temperature=1.0, seed=0, max_new_tokens=3)  # fmt: skip


# ---------------------------------------------------------------------------------------
# 4. fast-forward and the samplers that promise a distribution
# ---------------------------------------------------------------------------------------
def test_awrs_default_matches_the_exact_token_distribution(bigram, one_torch_thread) -> None:  # type: ignore[no-untyped-def]
    tok, model, compiled, prompt = bigram
    exact = exact_token_distribution(model, compiled, prompt[-1])
    a, b, ab = (tok.convert_tokens_to_ids(t) for t in ("a", "b", "ab"))
    # the model spells the forced 'ab' as 'a' 'b' about half the time
    split = sum(p for s, p in exact.items() if s[1:3] == (a, b))
    assert 0.3 < split < 0.7
    counts: Counter[tuple[int, ...]] = Counter()
    for seed in range(300):
        r = corral.generate(model, prompt, grammar=compiled, tokenizer=tok, sampler="awrs",
                            temperature=1.0, seed=seed, details=True)  # fmt: skip
        assert r.stats.forced_tokens == 0
        counts[tuple(r.token_ids)] += 1
    assert chi_square_p(counts, exact) > 1e-3
    assert any(s[1] == ab for s in counts) and any(s[1:3] == (a, b) for s in counts)


def test_fast_forward_true_is_refused_where_it_would_change_the_distribution(bigram) -> None:  # type: ignore[no-untyped-def]
    tok, model, compiled, prompt = bigram
    for sampler in ("awrs", "smc", "asap"):
        with pytest.raises(
            ValueError, match=f"fast_forward=True is not available with sampler='{sampler}'"
        ):
            corral.generate(model, prompt, grammar=compiled, tokenizer=tok, sampler=sampler,
                            temperature=1.0, fast_forward=True)  # fmt: skip
        with pytest.raises(ValueError, match="fast_forward=True"):
            list(corral.stream(model, prompt, grammar=compiled, tokenizer=tok, sampler=sampler,
                               temperature=1.0, fast_forward=True))  # fmt: skip
    with pytest.raises(ValueError, match="fast_forward=True"):
        next(decode_steps(model, prompt, compiled.matcher(), tokenizer=tok, sampler="awrs",
                          fast_forward=True))  # fmt: skip
    with pytest.raises(TypeError, match="fast_forward"):
        corral.generate(model, prompt, grammar=compiled, tokenizer=tok, fast_forward="yes")


def test_mask_fast_forwards_by_default_and_not_when_asked(bigram) -> None:  # type: ignore[no-untyped-def]
    tok, model, compiled, prompt = bigram
    ab = tok.convert_tokens_to_ids("ab")
    plain: Counter[bool] = Counter()
    for seed in range(20):
        r = corral.generate(model, prompt, grammar=compiled, tokenizer=tok, temperature=1.0,
                            seed=seed, details=True)  # fmt: skip
        assert r.stats.forced_tokens == 1 and r.token_ids[1] == ab  # the tokenizer's cut
        s = corral.generate(model, prompt, grammar=compiled, tokenizer=tok, temperature=1.0,
                            seed=seed, details=True, fast_forward=False)  # fmt: skip
        assert s.stats.forced_tokens == 0
        plain[s.token_ids[1] == ab] += 1
    assert plain[False] > 0  # sampled token by token, 'ab' is also spelled 'a' 'b'
