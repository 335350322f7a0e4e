"""DINGO against brute force: the DP's block is a most probable valid block (ties
included) and the sampler draws exactly from the model restricted to valid blocks."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

import corral
from corral.automata.token_dfa import TokenDFA
from corral.grammar import Grammar
from corral.sampler.dingo import dingo_argmax, dingo_sample

TOKENS = [b"a", b"b", b"ab", b"ba", b"c", b"<eos>"]
PATTERN = r"(ab|b)*c?"


def _setup() -> tuple[corral.Vocabulary, TokenDFA]:
    vocab = corral.Vocabulary(TOKENS, eos_token_ids=[len(TOKENS) - 1])
    tdfa = TokenDFA.from_compiled(corral.compile(Grammar.from_regex(PATTERN), vocab))
    assert tdfa is not None
    return vocab, tdfa


def _valid(tdfa: TokenDFA, block: tuple[int, ...], last: bool) -> bool:
    q = tdfa.start
    for t in block:
        q = int(tdfa.trans[q, t])
        if q < 0:
            return False
    return bool(tdfa.accept[q]) or not last


@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("d", [1, 3, 5, 6])
def test_argmax_equals_brute_force(d: int, last: bool) -> None:
    vocab, tdfa = _setup()
    rng = np.random.default_rng(d)
    for trial in range(6):
        p = rng.dirichlet(np.ones(vocab.size), size=d)
        if trial % 2:  # ties: probabilities from a few repeated values
            p = rng.choice([0.1, 0.2, 0.2, 0.5], size=(d, vocab.size))
        logp = np.log(p)
        best = -math.inf
        argmaxes = set()
        for block in itertools.product(range(vocab.size), repeat=d):
            if not _valid(tdfa, block, last):
                continue
            s = float(sum(logp[i, t] for i, t in enumerate(block)))
            if s > best + 1e-12:
                best, argmaxes = s, {block}
            elif abs(s - best) <= 1e-12:
                argmaxes.add(block)
        tokens, score, _ = dingo_argmax(logp, tdfa, last=last)
        assert tuple(tokens) in argmaxes
        assert score == pytest.approx(best, abs=1e-9)


def test_sampling_matches_exact_distribution() -> None:
    vocab, tdfa = _setup()
    d = 3
    p = np.random.default_rng(7).dirichlet(np.ones(vocab.size), size=d)
    exact: dict[tuple[int, ...], float] = {}
    for block in itertools.product(range(vocab.size), repeat=d):
        if _valid(tdfa, block, True):
            exact[block] = float(np.prod([p[i, t] for i, t in enumerate(block)]))
    z = sum(exact.values())
    rng = np.random.default_rng(0)
    n = 20000
    counts = Counter(tuple(dingo_sample(np.log(p), tdfa, last=True, rng=rng)[0]) for _ in range(n))
    assert set(counts) <= set(exact)
    tv = 0.5 * sum(abs(counts.get(b, 0) / n - w / z) for b, w in exact.items())
    assert tv < 0.03, tv


def test_not_regular_and_impossible() -> None:
    vocab, tdfa = _setup()
    assert TokenDFA.from_compiled(corral.compile('start: "a" start "b" | "c"', vocab)) is None
    logp = np.full((2, vocab.size), -np.inf)
    logp[:, 0] = 0.0  # only "a": "aa" is not in the language
    with pytest.raises(ValueError, match="no block"):
        dingo_argmax(logp, tdfa, last=True)


def test_forward_sums_equal_brute_force() -> None:
    """The sampler draws the end state from these sums and each step backwards from
    them: exact sums make it exact."""
    from corral.sampler.dingo import _forward

    vocab, tdfa = _setup()
    d = 4
    p = np.random.default_rng(3).dirichlet(np.ones(vocab.size), size=d)
    w, _, _ = _forward(np.log(p), tdfa.trans, tdfa.start, False)
    sums = np.zeros(tdfa.trans.shape[0])
    for block in itertools.product(range(vocab.size), repeat=d):
        q = tdfa.start
        for t in block:
            q = int(tdfa.trans[q, t])
            if q < 0:
                break
        else:
            sums[q] += float(np.prod([p[i, t] for i, t in enumerate(block)]))
    with np.errstate(divide="ignore"):
        assert np.allclose(np.exp(w[d]), sums, rtol=1e-9, atol=0)
