"""AWRS: the token is distributed as p restricted to the allowed set, and the weight is
unbiased for Z·p(allowed) (exactly, by enumerating the sampling process; and empirically)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from corral.sampler.awrs import awrs_step, matcher_check


def exact_expectation(p: list[float], allowed: set[int], z: float) -> tuple[float, list[float]]:
    """``(E[w], P(token = t))`` of the two-round process, by enumerating every order."""
    dist = [0.0] * len(p)

    def round2(alive: frozenset[int], n: int, rest: float) -> float:
        mass = sum(p[t] for t in alive)
        e = 0.0
        for t in alive:
            q = p[t] / mass
            if t in allowed:
                e += q * z * rest / (n + 1)
            else:
                e += q * round2(alive - {t}, n + 1, rest)
        return e

    def round1(alive: frozenset[int], n: int, prob: float) -> float:
        mass = sum(p[t] for t in alive)
        e = 0.0
        for t in alive:
            q = p[t] / mass
            if t in allowed:
                dist[t] += prob * q
                e += q * round2(alive, n, mass)
            else:
                e += q * round1(alive - {t}, n + 1, prob * q)
        return e

    return round1(frozenset(range(len(p))), 0, 1.0), dist


def test_the_estimator_is_exactly_unbiased() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 7))
        w = rng.gamma(0.5, size=n)
        z = float(w.sum())
        p = list(w / z)
        allowed = {int(t) for t in rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)}
        e, dist = exact_expectation(p, allowed, z)
        pa = sum(p[t] for t in allowed)
        assert e == pytest.approx(z * pa, rel=1e-12)
        for t in range(n):
            assert dist[t] == pytest.approx(p[t] / pa if t in allowed else 0.0, abs=1e-12)


def test_sampled_distribution_and_mean_weight() -> None:
    logits = torch.tensor([2.0, 0.5, 1.5, -1.0, 0.0, 1.0, 3.0, -0.5])
    allowed = {1, 2, 4, 7}
    p = torch.softmax(logits.double(), 0).numpy()
    z = float(torch.exp(logits.double()).sum())
    gen = torch.Generator().manual_seed(0)
    n = 20_000
    counts = np.zeros(len(p))
    weights = np.zeros(n)
    for i in range(n):
        r = awrs_step(logits, lambda t: t in allowed, generator=gen)
        counts[r.token] += 1
        weights[i] = math.exp(r.log_weight)
    pa = sum(p[t] for t in allowed)
    expected = np.array([p[t] / pa * n if t in allowed else 0.0 for t in range(len(p))])
    assert counts[[t for t in range(len(p)) if t not in allowed]].sum() == 0
    idx = sorted(allowed)
    chi2 = float((((counts[idx] - expected[idx]) ** 2) / expected[idx]).sum())
    assert chi2 < 16.27  # chi-square, 3 degrees of freedom, p = 0.001
    assert weights.mean() == pytest.approx(z * pa, rel=2e-2)


def test_nothing_allowed_gives_weight_zero() -> None:
    r = awrs_step(torch.randn(50), lambda t: False)
    assert r.token is None and r.log_weight == float("-inf") and r.checks == 50


def test_agrees_with_masking_when_deterministic() -> None:
    logits = torch.full((1000,), -50.0)
    logits[7] = 50.0  # all the mass on one token, which is allowed
    allowed = set(range(0, 1000, 7))
    gen = torch.Generator().manual_seed(1)
    for _ in range(20):
        r = awrs_step(logits, lambda t: t in allowed, generator=gen)
        assert r.token == 7 and r.checks <= 2
    only = {123}  # exactly one allowed token: AWRS and masking both must pick it
    r = awrs_step(torch.randn(1000, generator=gen), lambda t: t in only, generator=gen)
    assert r.token == 123


def test_with_a_matcher_checks_few_tokens() -> None:
    from support.tokenizers import load_tokenizer, load_vocab

    import corral

    tok, vocab = load_tokenizer("gpt2"), load_vocab("gpt2")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}  # fmt: skip
    m = corral.compile(schema, vocab).matcher()
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(vocab.size, generator=gen)
    for t in tok.encode('{"n":'):
        m.consume(t)
    checks = []
    for _ in range(10):
        r = awrs_step(logits, matcher_check(m), generator=gen)
        assert r.token is not None and r.token in set(m.allowed_token_ids().tolist())
        checks.append(r.checks)
    assert m.num_tokens == len(tok.encode('{"n":'))  # checks leave the matcher unchanged
    assert max(checks) < vocab.size // 10
