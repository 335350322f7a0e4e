"""Token samplers: how one step of a left-to-right decode picks the next token.

A :class:`TokenSampler` is driven by a decoding loop (``corral.generate``'s KV-cache loop,
the transformers AWRS processor) in two calls per step:

1. :meth:`~TokenSampler.prepare` before the forward pass: whatever the constraint work
   that does not need the logits (masking computes the mask here); returns ``True`` when
   the output is complete and nothing but EOS may follow, so the loop stops without a
   forward pass;
2. :meth:`~TokenSampler.step` with the logits: the token (the matcher is not advanced).

:class:`MaskingSampler` masks then samples (:mod:`corral.sampler.masking`);
:class:`AWRSSampler` draws by adaptive rejection (:mod:`corral.sampler.awrs`) and falls
back to masking where every allowed token has probability 0 in float64. Which one a
``sampler=`` name means is :mod:`corral.sampler.registry`'s table.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any, Protocol

import numpy as np

from ..errors import InvalidArgumentError, MatcherStateError
from .awrs import awrs_step, greedy_step, matcher_check
from .masking import masked_logits, sample

__all__ = ["AWRSSampler", "MaskingSampler", "TokenSampler", "only_eos"]


class TokenSampler(Protocol):
    """One token per step from the logits and a matcher.

    Attributes:
        checks: tokens checked one by one against the constraint so far (AWRS).
    """

    checks: int

    def prepare(self, matcher: Any, eos: Set[int]) -> bool:
        """Work before the forward pass; ``True``: the output is complete and only the
        ``eos`` ids may follow (stop without a forward pass)."""
        ...

    def step(self, logits: Any, matcher: Any, generator: Any) -> int:
        """The next token from ``logits`` (``float [V]``, ``V >= matcher.vocab_size``) for
        ``matcher`` (``None``: unconstrained), drawn with ``generator`` (a
        ``torch.Generator`` or ``None``). Called after :meth:`prepare` in the same step."""
        ...


def only_eos(bitmask: Any, eos: Set[int]) -> bool:
    """Whether row 0 of ``bitmask`` (``int32 [1, W]``) allows nothing but ids in ``eos``."""
    words = bitmask.view(np.uint32)[0]
    allowed = np.flatnonzero(words)
    if allowed.shape[0] > max(1, len(eos)):
        return False
    ids = set()
    for w in allowed.tolist():
        v = int(words[w])
        for b in range(32):
            if v >> b & 1:
                ids.add(32 * w + b)
    return ids <= eos


class _Bitmask:
    """One bitmask row, allocated on first use for the matcher's vocabulary."""

    def __init__(self) -> None:
        self._bitmask: Any = None
        self._size = -1

    def fill(self, matcher: Any) -> Any:
        from ..automata import allocate_bitmask

        if self._bitmask is None or self._size != matcher.vocab_size:
            self._size = matcher.vocab_size
            self._bitmask = allocate_bitmask(1, matcher.vocab_size)
        matcher.fill_bitmask(self._bitmask)
        return self._bitmask


class MaskingSampler:
    """Mask → temperature → top-k → top-p → sample (:mod:`corral.sampler.masking`).

    :meth:`prepare` fills the mask; :meth:`step` masks the logits with it and samples.
    Without a matcher, :meth:`step` samples the logits as they are.
    """

    def __init__(
        self, temperature: float = 0.0, *, top_k: int | None = None, top_p: float | None = None
    ) -> None:
        self.temperature = temperature
        self.top_k = top_k
        self.top_p = top_p
        self.checks = 0
        self._mask = _Bitmask()
        self._filled: Any = None

    def prepare(self, matcher: Any, eos: Set[int]) -> bool:
        self._filled = self._mask.fill(matcher)
        return bool(matcher.is_accepting()) and only_eos(self._filled, eos)

    def step(self, logits: Any, matcher: Any, generator: Any) -> int:
        if matcher is not None:
            if self._filled is None:
                raise MatcherStateError(
                    "MaskingSampler.step needs the mask of this step: call prepare first"
                )
            logits = masked_logits(logits, self._filled, matcher.vocab_size)
            self._filled = None
        return int(
            sample(logits, temperature=self.temperature, top_k=self.top_k, top_p=self.top_p,
                   generator=generator)[0]
        )  # fmt: skip


class AWRSSampler:
    """Adaptive weighted rejection sampling: only the tokens drawn are checked.

    The token follows the model's distribution at ``temperature`` restricted to the allowed
    tokens (the same distribution as :class:`MaskingSampler` without top-k/top-p);
    ``temperature=0`` takes the allowed token with the largest logit (ties: lowest id).
    When every allowed token has probability 0 in float64, the token is drawn from the
    masked logits instead (the same distribution, computed with the mask).
    """

    def __init__(self, temperature: float = 1.0) -> None:
        if temperature < 0:
            raise InvalidArgumentError(f"temperature must be >= 0, got {temperature}")
        self.temperature = temperature
        self.checks = 0
        self._mask = _Bitmask()

    def prepare(self, matcher: Any, eos: Set[int]) -> bool:
        return False  # no mask is computed: EOS is decided by drawing it

    def step(self, logits: Any, matcher: Any, generator: Any) -> int:
        if matcher is None:
            return int(sample(logits, temperature=self.temperature, generator=generator)[0])
        check = matcher_check(matcher)
        if self.temperature == 0:
            found, n_checks = greedy_step(logits, check)
        else:
            r = awrs_step(logits / self.temperature, check, generator=generator)
            found, n_checks = r.token, r.checks
        self.checks += n_checks
        if found is None:  # every allowed token has probability 0 in float64: mask
            masked = masked_logits(logits, self._mask.fill(matcher), matcher.vocab_size)
            found = int(sample(masked, temperature=self.temperature, generator=generator)[0])
        return found
