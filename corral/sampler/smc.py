"""Sequential Monte Carlo with AWRS proposals.

``N`` particles are extended one token at a time. Each alive particle draws its next token
with :func:`~corral.sampler.awrs.awrs_step` (constraint checks only on drawn tokens), and
its log weight grows by the step's AWRS log weight minus the log normaliser of the
proposal (here the proposal's target is the unconstrained next-token distribution, whose
weights are already normalised, so the increment is ``log p(A)``'s unbiased estimate).
When the effective sample size falls below ``ess_threshold · N``, particles are resampled
(multinomial) and the mean weight is carried into the normalising-constant estimate.
The model's forward pass is batched over the alive particles.

Returns the weighted set of complete outputs and ``log Ẑ``, an unbiased estimate (in
expectation of ``Ẑ``) of ``P(s ∈ L(G))`` for the unconstrained model.

The token budget. After ``max_tokens`` tokens a particle cannot draw another token: one
whose output is complete ends there (its EOS step is taken without drawing: the weight
is multiplied by ``P(EOS | s)``, the model's probability of ending there, summed over
the EOS ids, one batched model call), the others get weight 0. So the target is ``P(s |
s ∈ L(G), |s| ≤ max_tokens)``: the model's distribution conditioned on the constraint and
on fitting the budget (outputs of exactly ``max_tokens`` tokens included), and ``Ẑ``
estimates ``P(s ∈ L(G), |s| ≤ max_tokens)``. With a budget no output reaches, this is
``P_G``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import InvalidArgumentError
from .awrs import awrs_step, matcher_check
from .lm import NextLogits


@dataclass
class Particle:
    """One particle: generated tokens, log weight, and whether it ended (EOS)."""

    tokens: list[int]
    log_weight: float = 0.0
    done: bool = False
    matcher: Any = field(default=None, repr=False)


@dataclass
class SMCResult:
    """Particles (complete ones, with weights) and the log normalising-constant estimate.

    Attributes:
        particles: every particle at the end (a dead one has ``log_weight = -inf``).
        log_z: ``log Ẑ``.
        checks: constraint checks over the whole run.
        steps: token steps.
    """

    particles: list[Particle]
    log_z: float
    checks: int
    steps: int

    def distribution(self) -> dict[tuple[int, ...], float]:
        """The weighted empirical distribution over complete outputs (normalised)."""
        done = [p for p in self.particles if p.done and p.log_weight > float("-inf")]
        if not done:
            return {}
        m = max(p.log_weight for p in done)
        out: dict[tuple[int, ...], float] = {}
        for p in done:
            out[tuple(p.tokens)] = out.get(tuple(p.tokens), 0.0) + math.exp(p.log_weight - m)
        total = sum(out.values())
        return {k: v / total for k, v in out.items()}


def _logmeanexp(xs: list[float]) -> float:
    m = max(xs)
    if m == float("-inf"):
        return m
    return m + math.log(sum(math.exp(x - m) for x in xs) / len(xs))


def smc(
    next_logits: NextLogits,
    compiled: Any,
    *,
    n_particles: int = 16,
    max_tokens: int = 256,
    ess_threshold: float = 0.5,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> SMCResult:
    """Run SMC with AWRS proposals (see the module docs).

    Args:
        next_logits: ``next_logits(prefixes) -> float [N, V]`` (batched model call:
            :meth:`CausalLM.next_logits <corral.sampler.lm.CausalLM.next_logits>`).
        compiled: the :class:`~corral.CompiledGrammar`.
        n_particles: ``N``.
        max_tokens: the token budget (EOS not counted): after this many tokens a complete
            particle ends, weighted by the model's probability of EOS there, and an
            incomplete one is dropped (weight 0); see the module docs.
        ess_threshold: resample when ESS < ``ess_threshold · N`` (``0``: never).
        temperature: applied to the logits first.
    """
    from ..automata.bitmask import as_int

    n_particles = as_int(n_particles, "n_particles")
    max_tokens = as_int(max_tokens, "max_tokens")
    if n_particles < 1:
        raise InvalidArgumentError(f"n_particles must be >= 1, got {n_particles}")
    if max_tokens < 1:
        raise InvalidArgumentError(f"max_tokens must be >= 1, got {max_tokens}")
    if temperature <= 0:
        raise InvalidArgumentError(f"temperature must be > 0, got {temperature}")
    eos = set(compiled.eos_ids.tolist())
    particles = [Particle([], 0.0, False, compiled.matcher()) for _ in range(n_particles)]
    log_z_acc = 0.0
    checks = 0
    steps = 0
    while any(not p.done and p.log_weight > float("-inf") for p in particles):
        if steps >= max_tokens:
            _end_at_budget(particles, next_logits, temperature, sorted(eos))
            break
        alive = [p for p in particles if not p.done and p.log_weight > float("-inf")]
        logits = next_logits([p.tokens for p in alive])
        for p, row in zip(alive, logits, strict=True):
            lp = torch.log_softmax(row.double() / temperature, dim=0)
            r = awrs_step(lp, matcher_check(p.matcher), generator=generator)
            checks += r.checks
            p.log_weight += r.log_weight
            if r.token is None:
                continue
            if r.token in eos:
                p.done = True
            else:
                p.matcher.consume(r.token)
                p.tokens.append(r.token)
        steps += 1
        weights = [p.log_weight for p in particles]
        if max(weights) == float("-inf"):
            break
        if ess_threshold > 0 and _ess(weights) < ess_threshold * n_particles:
            particles, mean = _resample(particles, generator)
            log_z_acc += mean
    final = _logmeanexp([p.log_weight for p in particles])
    return SMCResult(particles, log_z_acc + final, checks, steps)


def _end_at_budget(
    particles: list[Particle], next_logits: NextLogits, temperature: float, eos: list[int]
) -> None:
    """End every running particle: a complete one takes its EOS step without drawing it
    (weight times ``P(EOS | s)`` at ``temperature``, summed over the EOS ids), the others
    get weight 0."""
    running = [p for p in particles if not p.done and p.log_weight > float("-inf")]
    for p in running:
        if not (eos and p.matcher.is_accepting()):
            p.log_weight = float("-inf")
    complete = [p for p in running if p.log_weight > float("-inf")]
    if not complete:
        return
    logits = next_logits([p.tokens for p in complete])
    for p, row in zip(complete, logits, strict=True):
        lp = torch.log_softmax(row.double() / temperature, dim=0)
        p.log_weight += float(torch.logsumexp(lp[eos], dim=0))
        p.done = True


def _ess(log_weights: list[float]) -> float:
    m = max(log_weights)
    w = [math.exp(x - m) for x in log_weights]
    s = sum(w)
    return s * s / sum(x * x for x in w)


def _resample(particles: list[Particle], generator: Any) -> tuple[list[Particle], float]:
    weights = [p.log_weight for p in particles]
    mean = _logmeanexp(weights)
    m = max(weights)
    probs = torch.tensor([math.exp(x - m) for x in weights], dtype=torch.float64)
    idx = torch.multinomial(probs, len(particles), replacement=True, generator=generator).tolist()
    out = []
    for i in idx:
        src = particles[i]
        out.append(Particle(list(src.tokens), 0.0, src.done,
                            src.matcher.fork() if not src.done else src.matcher))  # fmt: skip
    return out, mean
