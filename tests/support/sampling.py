"""Shared pieces of the sampler tests: a toy n-gram model with a skewed grammar, and
Pearson's chi-square test of sampled outputs against an exact distribution."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

import corral
from corral.testing import NGramLM

TOKENS = ["0", "1", "00", "11", "10", "01", "</s>"]
SKEWED = r"1[01]{4}|00000"  # 16 strings starting with 1, and 00000


def toy_model_and_grammar() -> tuple[NGramLM, Any]:
    """A bigram model over :data:`TOKENS` and the grammar of :data:`SKEWED` for it."""
    lm = NGramLM(TOKENS, order=2, seed=3)
    compiled = corral.compile(corral.Grammar.from_regex(SKEWED), lm.vocabulary())
    return lm, compiled


def chi_square_p(counts: Counter, probs: dict) -> float:  # type: ignore[type-arg]
    """p-value of Pearson's chi-square test of ``counts`` against ``probs`` (cells with an
    expected count below 5 pooled into one); every counted output must have a probability."""
    n = sum(counts.values())
    assert set(counts) <= set(probs), "an output outside the exact distribution"
    cells, pool_o, pool_e = [], 0.0, 0.0
    for key, p in probs.items():
        if n * p >= 5:
            cells.append((counts.get(key, 0), n * p))
        else:
            pool_o, pool_e = pool_o + counts.get(key, 0), pool_e + n * p
    if pool_e > 0:
        cells.append((pool_o, pool_e))
    stat = sum((o - e) ** 2 / e for o, e in cells)
    x = torch.tensor([(len(cells) - 1) / 2, stat / 2], dtype=torch.float64)
    return float(torch.special.gammaincc(x[0], x[1]))
