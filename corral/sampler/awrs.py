"""Adaptive weighted rejection sampling (AWRS) of one token.

Target: the language model's next-token distribution ``p`` (from unnormalised weights with
total ``Z``) restricted to the set ``A`` of tokens the constraint allows. AWRS never
computes the mask: it checks only the tokens it draws.

Round 1: visit tokens in the order of sampling without replacement from ``p`` (single
draws first, then decreasing Gumbel keys ``log p_t + G_t`` over the rest); a rejected
token is removed and its probability added to ``R1``; the first accepted token ``x`` is
the sample, distributed exactly as ``p(· | A)``.

Round 2: a fresh order over the tokens not removed (``x`` stays in); visit until another
acceptance. With ``n`` the rejections of both rounds,

    log w = log Z + log(1 - R1) - log(n + 1)

is an unbiased estimate of ``Z · p(A)`` (the weight an importance sampler or SMC needs).
When nothing is accepted, ``A`` is empty: no token, weight 0.

Checks are memoised within a step, so a token is checked at most once; ``checks`` counts
distinct tokens checked (round 2 usually re-visits ``x`` first, at no cost). Each check
of a normal token is a ``try_consume`` and ``rollback`` of the matcher; an EOS check asks
whether the output is complete.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import InvalidArgumentError, ShapeError

_FIRST_BATCH = 8


@dataclass
class AWRSResult:
    """One AWRS draw.

    Attributes:
        token: the sampled token id, or ``None`` when no token is allowed.
        log_weight: ``log w`` (``-inf`` when no token is allowed).
        checks: distinct tokens checked against the constraint.
        rejections: rejections over both rounds (``n`` above).
    """

    token: int | None
    log_weight: float
    checks: int
    rejections: int


def matcher_check(matcher: Any) -> Callable[[int], bool]:
    """``check(token) -> bool`` for a corral matcher: whether ``token`` may come next."""
    eos = set(matcher.compiled.eos_ids.tolist())

    def check(token: int) -> bool:
        if token in eos:
            return bool(matcher.is_accepting())
        if matcher.try_consume(token):
            matcher.rollback(1)
            return True
        return False

    return check


def _draw_order(probs: torch.Tensor, alive: torch.Tensor | None, generator: Any) -> Any:
    """Token ids in the order of sampling without replacement proportionally to ``probs``.

    The first draws are single multinomial draws (cheap: one pass each); if more are
    needed, the rest of the order comes from Gumbel keys over the tokens not drawn yet.
    Both give the same distribution of orders (successive sampling: given the first draws,
    the rest is successive sampling over what remains), so mixing them is exact.
    """
    weights = probs if alive is None else probs * alive
    n = int((weights > 0).sum())
    drawn: list[int] = []
    if n == 0:
        return
    w = weights.clone()
    for _ in range(min(_FIRST_BATCH, n)):
        t = int(torch.multinomial(w, 1, generator=generator))
        drawn.append(t)
        yield t
        w[t] = 0.0
        if len(drawn) == n:
            return
    logw = torch.log(w)  # -inf for tokens drawn or excluded
    u = torch.rand(logw.shape, generator=generator, dtype=torch.float64)
    keys = logw - torch.log(-torch.log(u.clamp_min(1e-300)))
    left = n - len(drawn)
    k = min(_FIRST_BATCH * 16, left)
    done = 0
    while done < left:
        top = torch.topk(keys, k).indices.tolist()
        yield from top[done:k]
        done = k
        k = min(left, k * 16)


def greedy_step(logits: torch.Tensor, check: Callable[[int], bool]) -> tuple[int | None, int]:
    """``(token, checks)``: the allowed token with the largest logit (ties: lowest id), found
    by checking tokens in decreasing logit order: the same token as greedy masking."""
    x = logits.detach().float().cpu()
    n = int(torch.isfinite(x).sum())
    k = min(_FIRST_BATCH, n)
    done = 0
    checks = 0
    while done < n:
        top = torch.sort(torch.topk(x, k).indices).values  # sort ids within ties
        order = sorted(top.tolist(), key=lambda t: (-float(x[t]), t))
        for t in order[done:k]:
            checks += 1
            if check(t):
                return t, checks
        done = k
        k = min(n, k * 16)
    return None, checks


def awrs_step(
    logits: torch.Tensor,
    check: Callable[[int], bool],
    *,
    generator: torch.Generator | None = None,
    max_checks: int | None = None,
) -> AWRSResult:
    """Draw one token with AWRS.

    Args:
        logits: ``float [V]``: unnormalised log-weights (``log_softmax`` is taken here, so
            ``Z`` is ``sum(exp(logits))``). Apply temperature before; ``-inf`` entries are
            never drawn (e.g. padding ids).
        check: whether a token is allowed (see :func:`matcher_check`).
        generator: torch random generator (reproducible draws).
        max_checks: give up after this many distinct checks and raise ``RuntimeError``
            (``None``: no limit; the vocabulary bounds the work).

    Tokens whose probability underflows to 0 in float64 (log-probability below about
    -745) are never drawn: if every allowed token is among them, the result is ``None``
    with weight 0, as for an empty allowed set.

    Returns:
        :class:`AWRSResult`.
    """
    if logits.dim() != 1:
        raise ShapeError(f"logits must be 1-D [V], got shape {list(logits.shape)}")
    x64 = logits.detach().to(torch.float64).cpu()
    log_z = float(torch.logsumexp(x64, dim=0))
    if not math.isfinite(log_z):
        raise InvalidArgumentError("logits must have a finite entry, got none")
    logp = x64 - log_z
    seen: dict[int, bool] = {}

    def ok(t: int) -> bool:
        hit = seen.get(t)
        if hit is None:
            if max_checks is not None and len(seen) >= max_checks:
                raise RuntimeError(f"AWRS gave up after {max_checks} constraint checks")
            hit = seen[t] = bool(check(t))
        return hit

    removed: list[int] = []
    token = None
    probs = torch.exp(logp)
    for t in _draw_order(probs, None, generator):
        if ok(t):
            token = t
            break
        removed.append(t)
    if token is None:
        return AWRSResult(None, float("-inf"), len(seen), len(removed))
    n_rej = len(removed)
    alive = torch.ones(logp.shape, dtype=torch.bool)
    if removed:
        alive[torch.tensor(removed)] = False
    for t in _draw_order(probs, alive, generator):
        if ok(t):
            break
        n_rej += 1
    # log(1 - R1), computed as the log-mass of what round 1 left (exact when R1 is near 1)
    log_rest = float(torch.logsumexp(logp[alive], dim=0))
    log_w = log_z + log_rest - math.log(n_rej + 1)
    return AWRSResult(token, log_w, len(seen), n_rej)
