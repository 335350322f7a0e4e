"""Samplers under a monitor, exactly, on an enumerable toy: the language a monitor and a
grammar leave is enumerated, and SMC's weighted outputs must approach the model's
distribution conditioned on it (as ``test_sampling.py`` checks for grammars alone). And
the decode loop's overlap of a callback with the model's forward pass."""

from __future__ import annotations

import asyncio
import math
import threading

import pytest
import torch
from support.sampling import TOKENS, toy_model_and_grammar

import corral
from corral import Monitor, MonitorContext
from corral.monitors.matcher import MonitoredConstraint
from corral.sampler.config import GenerationConfig
from corral.sampler.decode import token_steps
from corral.sampler.smc import smc
from corral.testing import NGramLM, constrained_sequences, grammar_distribution, total_variation

NAMES = ["0000", "0101"]


def _names(ctx: MonitorContext) -> list[str]:
    return NAMES


@pytest.fixture(scope="module")
def toy():  # type: ignore[no-untyped-def]
    """The toy bigram model; its grammar ``1[01]{4}|00000`` under a monitor that allows
    only ``0000`` or ``0101`` after a leading ``1``."""
    lm, compiled = toy_model_and_grammar()
    monitor = Monitor(trigger=r"^1", allowed=_names, end="constraint")
    return lm, compiled, MonitoredConstraint(lm.vocabulary(), (monitor,), compiled)


def test_the_monitored_language_is_the_grammars_cut_by_the_monitor(toy) -> None:  # type: ignore[no-untyped-def]
    lm, compiled, monitored = toy
    vocab = lm.vocabulary()

    def texts(c) -> set[str]:  # type: ignore[no-untyped-def]
        seqs = constrained_sequences(lm, c, max_tokens=6)
        return {vocab.decode(list(s)).decode() for s in seqs}

    assert len(texts(compiled)) == 17
    assert texts(monitored) == {"00000", "10000", "10101"}
    # no token crosses the trigger: a text starting with 1 starts with the token `1`
    for s in constrained_sequences(lm, monitored, max_tokens=6):
        assert vocab.token_bytes(s[0]) in (b"1", b"0", b"00")


def test_smc_under_a_monitor_converges_to_the_monitored_p_g(toy) -> None:  # type: ignore[no-untyped-def]
    lm, _compiled, monitored = toy
    p_g = grammar_distribution(lm, monitored, max_tokens=6)
    z_true = sum(constrained_sequences(lm, monitored, max_tokens=6).values())
    tv: dict[int, float] = {}
    z_hat = []
    for n in (8, 512):
        vals = []
        for seed in range(3):
            res = smc(
                lm.next_logits,
                monitored,
                n_particles=n,
                generator=torch.Generator().manual_seed(seed),
            )
            dist = res.distribution()
            assert dist and set(dist) <= set(p_g)  # every output is in the monitored language
            vals.append(total_variation(dist, p_g))
            if n == 512:
                z_hat.append(math.exp(res.log_z))
        tv[n] = sum(vals) / len(vals)
    assert tv[512] < 0.1 and tv[512] < tv[8]
    assert sum(z_hat) / len(z_hat) == pytest.approx(z_true, rel=0.25)


class _CountingLM(NGramLM):
    """The toy model, counting its forward passes (``extend`` calls) under a condition."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.passes = 0
        self.cond = threading.Condition()

    def extend(self, state, tokens):  # type: ignore[no-untyped-def]
        with self.cond:
            self.passes += 1
            self.cond.notify_all()
        return super().extend(state, tokens)

    def wait_for_pass_after(self, n: int) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.passes > n, timeout=20)


@pytest.mark.parametrize("is_async", [True, False])
def test_a_callback_runs_during_the_next_forward_pass(is_async: bool) -> None:
    """The decode loop starts a fired trigger's callback before the forward pass and
    computes the mask after it: a callback that waits for that forward pass finishes (it
    would wait in vain if the loop asked it for the mask first)."""
    lm = _CountingLM(TOKENS, order=2, seed=3)
    vocab = lm.vocabulary()
    base = corral.compile(corral.Grammar.from_regex("1[01]{4}"), vocab)
    seen: list[bool] = []

    def names(ctx: MonitorContext) -> list[str]:
        # the trigger fires at the first token (`1`, drawn after pass 1): wait for pass 2
        seen.append(lm.wait_for_pass_after(1))
        return NAMES

    async def names_async(ctx: MonitorContext) -> list[str]:
        return await asyncio.to_thread(names, ctx)

    monitor = Monitor(r"^1", names_async if is_async else names, end="constraint", timeout_s=60)
    matcher = MonitoredConstraint(vocab, (monitor,), base).matcher()
    config = GenerationConfig(sampler="mask", temperature=1.0, seed=0, max_new_tokens=8)
    out = [t for step in token_steps(lm, [], matcher, config, eos_ids=[lm.eos_id]) for t in step]
    assert vocab.decode(out).decode() in ("10000", "10101")
    assert seen == [True]
