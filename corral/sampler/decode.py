"""The left-to-right decoding loop: a :class:`~corral.sampler.lm.CausalLM` read with its
KV cache, a matcher, and a :class:`~corral.sampler.token.TokenSampler`.

Per step:

1. **fast-forward** (when the settings ask for it): if the grammar leaves a single way to
   continue for some bytes, those bytes are cut into tokens by ``tokenize`` and appended
   without sampling; the model reads them in its next forward pass together;
2. the sampler's ``prepare`` (masking computes the mask); if the output is complete and
   nothing but EOS may follow, stop (no forward pass);
3. one forward pass (``CausalLM.extend``), then the sampler's ``step``; EOS stops.

With ``heal=True`` (token healing, :mod:`corral.sampler.healing`), the prompt's last token
is backed up when it could have been extended, and the first steps sample under the
healing mask (through a :class:`~corral.sampler.healing.HealingView` of the matcher, with
no fast-forward) until the output has spelled its bytes again; then the matcher reads the
bytes past them and the loop goes on as above.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError
from .config import GenerationConfig
from .lm import CausalLM
from .registry import PER_TOKEN_SAMPLERS

__all__ = ["GenerationStats", "token_steps"]


@dataclass
class GenerationStats:
    """Counts and times of one generation."""

    new_tokens: int = 0  # tokens generated (sampled + forced)
    sampled_tokens: int = 0  # tokens chosen by sampling
    forced_tokens: int = 0  # tokens appended by fast-forward, without sampling
    forward_passes: int = 0
    forward_s: float = 0.0  # time in the model
    mask_s: float = 0.0  # time computing masks and forced tokens
    sample_s: float = 0.0  # time masking logits and sampling
    checks: int = 0  # tokens checked one by one against the constraint (AWRS, SMC)
    healed_bytes: int = 0  # prompt bytes backed up by token healing (re-spelled first)

    @property
    def mask_share(self) -> float:
        """Mask time as a share of step time (forward + mask + sample)."""
        total = self.forward_s + self.mask_s + self.sample_s
        return self.mask_s / total if total else 0.0


def token_steps(
    lm: CausalLM,
    ids: Sequence[int],
    matcher: Any,
    config: GenerationConfig,
    *,
    tokenize: Callable[[bytes], list[int]] | None = None,
    eos_ids: Sequence[int] = (),
    stats: GenerationStats | None = None,
    heal: bool = False,
) -> Iterator[list[int]]:
    """Yield the new tokens of each step (several when fast-forwarded).

    Args:
        lm: the model; ``ids`` are read first (``lm.extend(None, ids)``).
        ids: the prompt's token ids.
        matcher: the constraint's matcher (advanced here), or ``None`` to decode without a
            constraint (stopping at an EOS id).
        config: the settings; its sampler must be a per-token one.
        tokenize: cuts forced bytes into the model's tokens for fast-forward (``None``:
            the longest vocabulary tokens, see ``Matcher.forced_tokens``).
        eos_ids: ids that end the output (with the grammar's own EOS ids).
        stats: counts and times, updated in place.
        heal: token healing (:mod:`corral.sampler.healing`): back the prompt up by its
            last token when some longer token starts with its bytes, and make the output
            spell those bytes first (``stats.healed_bytes`` of them; the yielded tokens
            include the ones that spell them). Needs a matcher.

    Stops at EOS (not yielded), when the grammar allows nothing but EOS, or after
    ``config.max_new_tokens`` tokens.
    """
    if not config.per_token:
        raise InvalidArgumentError(
            f"token_steps needs a per-token sampler, one of {PER_TOKEN_SAMPLERS}, got "
            f"{config.sampler!r}"
        )
    st = stats if stats is not None else GenerationStats()
    gen = config.generator()
    eos = set(int(e) for e in eos_ids)
    if matcher is not None:
        eos |= set(matcher.compiled.eos_ids.tolist())
    sampler = config.make_sampler()  # unconstrained (no matcher): samples the logits as they are
    fast_forward = bool(config.fast_forward)
    limit = config.max_new_tokens
    feed = list(ids)
    healer = None  # the matcher as the sampler sees it while healing
    if heal:
        if matcher is None:
            raise InvalidArgumentError(
                "token healing needs a constraint (a matcher), got matcher=None"
            )
        if not matcher.is_finished():
            from .healing import HealingView, heal_prompt

            t0 = time.perf_counter()
            feed, healed = heal_prompt(matcher.compiled.vocab, feed)
            if healed:
                healer = HealingView(matcher, healed)
                st.healed_bytes = len(healed)
            st.mask_s += time.perf_counter() - t0
    state = None
    produced = 0
    checks0 = sampler.checks
    while produced < limit:
        cur = matcher if healer is None else healer
        deferred = False  # the mask computed after the forward pass (see below)
        if matcher is not None:
            t0 = time.perf_counter()
            forced = matcher.forced_tokens(tokenize) if fast_forward and healer is None else []
            forced = forced[: limit - produced]
            if forced:
                matcher.consume_tokens(forced)
                st.mask_s += time.perf_counter() - t0
                st.forced_tokens += len(forced)
                st.new_tokens += len(forced)
                produced += len(forced)
                feed.extend(forced)
                yield forced
                continue
            # a monitor's callback (corral/monitors) started now runs during the forward
            # pass; the mask, which needs its answer, is then computed after it
            prefetch = getattr(cur, "prefetch", None)
            deferred = prefetch is not None and prefetch()
            stop = False if deferred else sampler.prepare(cur, eos)
            st.mask_s += time.perf_counter() - t0
            if stop:
                return
        t0 = time.perf_counter()
        logits, state = lm.extend(state, feed)
        st.forward_s += time.perf_counter() - t0
        st.forward_passes += 1
        if deferred:
            t0 = time.perf_counter()
            stop = sampler.prepare(cur, eos)
            st.mask_s += time.perf_counter() - t0
            if stop:
                return
        t0 = time.perf_counter()
        tok = sampler.step(logits, cur, gen)
        st.checks += sampler.checks - checks0
        checks0 = sampler.checks
        st.sample_s += time.perf_counter() - t0
        if healer is not None:  # (its mask has no EOS: an EOS here is rejected)
            healer.consume(tok)
            if healer.done:
                healer.commit()
                healer = None
        elif tok in eos:
            return
        elif matcher is not None:
            matcher.consume(tok)
        st.sampled_tokens += 1
        st.new_tokens += 1
        produced += 1
        feed = [tok]
        yield [tok]
