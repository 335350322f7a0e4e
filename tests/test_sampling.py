"""ASAp and SMC on a synthetic language model whose conditionals are known, so P_G and
each sampler's distribution are computed exactly (no sampling error)."""

from __future__ import annotations

import json
import math

import pytest
import torch
from support.sampling import toy_model_and_grammar

import corral
from corral.sampler.asap import ASAp, TrieFileError
from corral.sampler.smc import smc
from corral.testing import (
    asap_distribution,
    constrained_sequences,
    grammar_distribution,
    kl_divergence,
    masked_distribution,
    total_variation,
)


@pytest.fixture(scope="module")
def toy():  # type: ignore[no-untyped-def]
    return toy_model_and_grammar()


def test_masking_distorts_and_asap_converges(toy) -> None:  # type: ignore[no-untyped-def]
    lm, compiled = toy
    p_g = grammar_distribution(lm, compiled, max_tokens=6)
    mask = masked_distribution(lm, compiled, max_tokens=6)
    assert abs(sum(p_g.values()) - 1) < 1e-12 and abs(sum(mask.values()) - 1) < 1e-12
    kl_mask = kl_divergence(p_g, mask)
    assert kl_mask > 1e-3  # masking is not P_G here
    asap = ASAp(lm.next_logits, compiled, key="toy")
    first = asap_distribution(asap, lm, compiled)
    assert total_variation(first, mask) < 1e-12  # the first sample is masking's
    gen = torch.Generator().manual_seed(0)
    kls = []
    for i in range(1, 1001):
        asap.sample(generator=gen)
        if i in (10, 100, 1000):
            kls.append(kl_divergence(p_g, asap_distribution(asap, lm, compiled)))
    assert kls[-1] <= 0.01 * kl_mask  # the target: 1% of masking's KL after 1,000
    # once every path is expanded, the sampling distribution is P_G
    assert asap.expand_all() > 0
    final = asap_distribution(asap, lm, compiled)
    assert max(abs(final.get(s, 0.0) - p) for s, p in p_g.items()) < 1e-9


def test_asap_trie_save_load(toy, tmp_path) -> None:  # type: ignore[no-untyped-def]
    lm, compiled = toy
    a = ASAp(lm.next_logits, compiled, key="prompt A")
    gen = torch.Generator().manual_seed(1)
    for _ in range(30):
        a.sample(generator=gen)
    a.save(tmp_path / "trie.json")
    b = ASAp(lm.next_logits, compiled, key="prompt A")
    b.load(tmp_path / "trie.json")
    assert b.samples == 30
    assert asap_distribution(b, lm, compiled) == asap_distribution(a, lm, compiled)
    other = ASAp(lm.next_logits, compiled, key="prompt B")
    with pytest.raises(corral.CorralError, match="another prompt"):
        other.load(tmp_path / "trie.json")
    saved = json.loads((tmp_path / "trie.json").read_text(encoding="utf-8"))
    head = json.dumps({**saved, "root": "@"})  # "@": where each damaged root goes
    deep = "[1, 1, {" + '"0": [1, 1, {' * 5000 + "}]" * 5000 + "}]"
    roots = ["[0.5]", "[1, 1, [1]]", '[1, 1, {"x": [1, 1, null]}]', "[2, 1, null]", deep]
    damaged = ["{", "[1, 2]", "\xff"] + [head.replace('"@"', r) for r in roots]
    for bad in damaged:
        (tmp_path / "bad.json").write_text(bad, encoding="utf-8")
        with pytest.raises(TrieFileError):
            b.load(tmp_path / "bad.json")
    assert b.samples == 30  # a failed load changes nothing


def test_smc_converges_to_p_g(toy) -> None:  # type: ignore[no-untyped-def]
    lm, compiled = toy
    p_g = grammar_distribution(lm, compiled, max_tokens=6)
    z_true = sum(constrained_sequences(lm, compiled, max_tokens=6).values())
    tv_mask = total_variation(masked_distribution(lm, compiled, max_tokens=6), p_g)
    tv, z_hat = {}, []
    for n in (16, 1024):
        vals = []
        for seed in range(3):
            gen = torch.Generator().manual_seed(seed)
            res = smc(lm.next_logits, compiled, n_particles=n, generator=gen)
            dist = res.distribution()
            assert all(s in p_g for s in dist)  # every output is in the language
            vals.append(total_variation(dist, p_g))
            if n == 1024:
                z_hat.append(math.exp(res.log_z))
        tv[n] = sum(vals) / len(vals)
    # masking is far from P_G on this skewed toy (TV ~0.6); SMC's weighted outputs approach it
    assert tv[1024] < tv[16] * 0.6 and tv[1024] < 0.4 * tv_mask
    assert sum(z_hat) / len(z_hat) == pytest.approx(z_true, rel=0.25)
