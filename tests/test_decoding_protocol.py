"""The decoding protocol of ``corral.sampler``: settings checked once
(``GenerationConfig``), the table of sampler names, the model interface (``CausalLM``,
``MaskedLM``) with its Hugging Face and reference implementations, and the token loop and
sequence samplers run over an enumerable model against their exact distributions."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
import torch
from support.sampling import TOKENS, chi_square_p, toy_model_and_grammar

import corral
from corral.sampler.config import GenerationConfig
from corral.sampler.decode import GenerationStats, token_steps
from corral.sampler.lm import CausalLM, MaskedLM
from corral.sampler.registry import EXACT_SAMPLERS, PER_TOKEN_SAMPLERS, SAMPLERS, sampler_entry
from corral.sampler.sequence import ASAP_TRIES, ASApSampler, SMCSampler
from corral.sampler.token import AWRSSampler, MaskingSampler
from corral.testing import ExactDenoiser, grammar_distribution, masked_distribution


@pytest.fixture(scope="module")
def toy():  # type: ignore[no-untyped-def]
    return toy_model_and_grammar()


# -- settings -------------------------------------------------------------------------------
def test_config_resolves_fast_forward_and_is_frozen() -> None:
    assert GenerationConfig().fast_forward is True
    assert GenerationConfig(sampler="awrs").fast_forward is False
    assert GenerationConfig(fast_forward=False).fast_forward is False
    config = GenerationConfig(sampler="smc", temperature=1.0, n_particles=4)
    assert not config.per_token and config.n_particles == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.temperature = 0.5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"sampler": "beam"}, ValueError, "sampler must be one of"),
        ({"max_new_tokens": 0}, ValueError, "max_new_tokens must be >= 1"),
        ({"max_new_tokens": 2.0}, TypeError, "max_new_tokens must be an integer"),
        ({"temperature": -1}, ValueError, "temperature must be >= 0"),
        ({"sampler": "smc"}, ValueError, "sampler='smc' samples a distribution"),
        ({"sampler": "asap", "temperature": 1.0, "top_k": 5}, ValueError,
         "top_k/top_p are not available with sampler='asap'"),
        ({"sampler": "awrs", "top_p": 0.9}, ValueError,
         "top_k/top_p are not available with sampler='awrs'"),
        ({"n_particles": 4}, ValueError, "n_particles and asap_path apply"),
        ({"sampler": "awrs", "fast_forward": True}, ValueError,
         "fast_forward=True is not available with sampler='awrs'"),
        ({"fast_forward": "yes"}, TypeError, "fast_forward must be True, False or None"),
        ({"top_k": 0}, ValueError, "top_k must be >= 1"),
        ({"top_p": 0.0}, ValueError, r"top_p must be in \(0, 1\]"),
    ],
)  # fmt: skip
def test_config_refuses_bad_settings(kwargs, error, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=message):
        GenerationConfig(**kwargs)


def test_generate_checks_settings_before_loading_the_model(tmp_path) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "no-model"  # never opened: the settings are refused first
    with pytest.raises(ValueError, match="sampler must be one of"):
        corral.generate(missing, "x", regex="a", sampler="beam")
    with pytest.raises(ValueError, match="top_k/top_p are not available with sampler='awrs'"):
        list(corral.stream(missing, "x", regex="a", sampler="awrs", top_k=3))


def test_the_table_names_every_sampler() -> None:
    assert SAMPLERS == ("mask", "awrs", "smc", "asap")
    assert EXACT_SAMPLERS == ("awrs", "smc", "asap")
    expected = {"mask": MaskingSampler, "awrs": AWRSSampler, "smc": SMCSampler,
                "asap": ASApSampler}  # fmt: skip
    for name in SAMPLERS:
        entry = sampler_entry(name)
        per_token = name in ("mask", "awrs")
        assert entry.per_token is per_token
        config = GenerationConfig(sampler=name, temperature=1.0)
        assert type(config.make_sampler()) is expected[name]
    assert PER_TOKEN_SAMPLERS == ("mask", "awrs")
    with pytest.raises(ValueError, match="sampler must be one of"):
        sampler_entry("greedy")


# -- the model interface --------------------------------------------------------------------
def test_reference_models_implement_the_interface(toy) -> None:  # type: ignore[no-untyped-def]
    lm, _ = toy
    assert isinstance(lm, CausalLM)
    denoiser = ExactDenoiser(lm, 3)
    assert isinstance(denoiser, MaskedLM)
    ids = torch.tensor([[1, 4, denoiser.mask_id]])
    assert denoiser(ids).shape == (1, 3, lm.vocab_size + 1)  # [1, L, V'] (V' = V + mask)
    first, state = lm.extend(None, [1, 4])
    second, _ = lm.extend(state, [2])
    expected = lm.next_logits([[1, 4], [1, 4, 2]])
    assert torch.equal(first, expected[0]) and torch.equal(second, expected[1])


def test_hf_causal_lm_reuses_its_cache_and_agrees_with_batched_calls() -> None:
    from support.tiny_models import tiny_bert, tiny_llama
    from support.tokenizers import load_tokenizer

    from corral.integrations.hf_lm import HFCausalLM, HFMaskedLM

    tok = load_tokenizer("gpt2")
    model = tiny_llama(tok, vocab_size=len(tok) + 11)  # a padded output layer
    lm = HFCausalLM(model, prompt=[464, 2068, 318])
    assert isinstance(lm, CausalLM)
    a, state = lm.extend(None, [257, 1332])
    b, _ = lm.extend(state, [13])
    both = lm.next_logits([[257, 1332], [257, 1332, 13]])  # right padded, one pass
    assert both.shape == (2, len(tok) + 11) and a.shape == (len(tok) + 11,)
    torch.testing.assert_close(a.cpu(), both[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(b.cpu(), both[1], rtol=1e-4, atol=1e-4)
    masked = HFMaskedLM(tiny_bert(64))
    assert isinstance(masked, MaskedLM)
    assert masked(torch.tensor([[5, 6, 7, 8]])).shape == (1, 4, 64)


# -- token samplers in the loop -------------------------------------------------------------
@pytest.mark.parametrize("sampler", ["mask", "awrs"])
def test_the_token_loop_samples_the_masked_distribution(toy, sampler) -> None:  # type: ignore[no-untyped-def]
    lm, compiled = toy
    exact = masked_distribution(lm, compiled, max_tokens=6)
    counts: Counter[tuple[int, ...]] = Counter()
    checks = 0
    for seed in range(400):
        config = GenerationConfig(sampler=sampler, temperature=1.0, seed=seed,
                                  max_new_tokens=8, fast_forward=False)  # fmt: skip
        stats = GenerationStats()
        m = compiled.matcher()
        out = [t for step in token_steps(lm, [], m, config, stats=stats) for t in step]
        assert m.is_accepting() and stats.sampled_tokens == len(out)
        counts[tuple(out)] += 1
        checks += stats.checks
    assert chi_square_p(counts, exact) > 1e-3
    assert (checks > 0) is (sampler == "awrs")  # only AWRS checks tokens one by one


def test_greedy_awrs_takes_the_greedy_masked_token(toy) -> None:  # type: ignore[no-untyped-def]
    lm, compiled = toy
    outs = []
    for sampler in ("mask", "awrs"):
        config = GenerationConfig(sampler=sampler, max_new_tokens=8, fast_forward=False)
        outs.append([t for s in token_steps(lm, [], compiled.matcher(), config) for t in s])
    assert outs[0] == outs[1] and outs[0]


def test_fast_forward_appends_forced_tokens_without_sampling(toy) -> None:  # type: ignore[no-untyped-def]
    lm, compiled = toy
    config = GenerationConfig(max_new_tokens=8, temperature=1.0, seed=0)
    m = compiled.matcher()
    m.consume(lm.tokens.index("00"))  # only "00000" starts with 0: "000" is forced
    stats = GenerationStats()
    steps = list(token_steps(lm, [], m, config, stats=stats))
    assert stats.forced_tokens > 0 and stats.new_tokens == len([t for s in steps for t in s])
    assert m.is_accepting() and b"".join(lm.vocabulary().decode(s) for s in steps) == b"000"
    # the loop ends without a forward pass once only EOS may follow
    assert stats.forward_passes == stats.sampled_tokens


def test_awrs_falls_back_to_the_mask_when_allowed_tokens_underflow(toy) -> None:  # type: ignore[no-untyped-def]
    lm, compiled = toy
    m = compiled.matcher()
    allowed = set(m.allowed_token_ids().tolist())
    logits = torch.zeros(len(TOKENS), dtype=torch.float64)
    logits[sorted(allowed)] = -1e4  # probability 0 in float64: AWRS accepts nothing
    logits[sorted(allowed)[0]] = -1e4 + 3.0
    for temperature in (0.0, 1.0):
        awrs = AWRSSampler(temperature)
        gen = torch.Generator().manual_seed(1)
        tok = awrs.step(logits, m, gen)
        assert tok in allowed and awrs.checks > 0
    masking = MaskingSampler(0.0)
    assert masking.prepare(m, {lm.eos_id}) is False
    assert masking.step(logits, m, None) == sorted(allowed)[0]


# -- sequence samplers ----------------------------------------------------------------------
def test_smc_sampler_draws_from_its_weighted_particles(toy) -> None:  # type: ignore[no-untyped-def]
    lm, compiled = toy
    target = grammar_distribution(lm, compiled, max_tokens=6)
    draw = SMCSampler(1.0, 8, n_particles=32).sample(
        lm, compiled, generator=torch.Generator().manual_seed(0), context="toy", prompt_key=""
    )
    weights = dict(draw.particles)
    assert tuple(draw.tokens) in weights and abs(sum(weights.values()) - 1) < 1e-9
    assert set(weights) <= set(target) and draw.log_z is not None and draw.checks > 0
    with pytest.raises(corral.IncompleteGenerationError, match="no SMC particle completed"):
        SMCSampler(1.0, 2, n_particles=8).sample(  # every output needs 3 tokens
            lm, compiled, generator=torch.Generator().manual_seed(0), context="toy",
            prompt_key="",
        )  # fmt: skip


def test_asap_sampler_keeps_one_trie_per_context(toy, tmp_path) -> None:  # type: ignore[no-untyped-def]
    lm, compiled = toy
    path = tmp_path / "trie.json"
    sampler = ASApSampler(1.0, 8, path=path)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        draw = sampler.sample(lm, compiled, generator=gen, context=("ctx", 1), prompt_key="p")
        assert tuple(draw.tokens) in grammar_distribution(lm, compiled, max_tokens=6)
    trie = ASAP_TRIES.get((("ctx", 1), compiled.cache_key, 1.0))
    assert trie is not None and trie.samples == 3 and path.exists()
    ASAP_TRIES.clear()  # a new process: the trie comes back from the file
    sampler.sample(lm, compiled, generator=gen, context=("ctx", 1), prompt_key="p")
    reloaded = ASAP_TRIES.get((("ctx", 1), compiled.cache_key, 1.0))
    assert reloaded is not None and reloaded is not trie and reloaded.samples == 4
