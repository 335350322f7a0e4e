"""Sequence samplers: whole outputs drawn from a :class:`~corral.sampler.lm.CausalLM`.

:class:`SMCSampler` (:mod:`corral.sampler.smc`) and :class:`ASApSampler`
(:mod:`corral.sampler.asap`) look at whole sequences, so they do not stream; they call
``lm.next_logits`` on batches of prefixes (no KV cache). Which one a ``sampler=`` name
means is :mod:`corral.sampler.registry`'s table.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Hashable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..caching import BoundedCache
from ..errors import CacheWarning, CorralError, IncompleteGenerationError
from .lm import CausalLM

__all__ = ["ASAP_TRIES", "ASApSampler", "SMCSampler", "SequenceDraw", "SequenceSampler"]

ASAP_TRIES: BoundedCache[Hashable, Any] = BoundedCache(8)
"""The ASAp tries of this process, by (model, prompt, grammar, temperature)."""


@dataclass
class SequenceDraw:
    """One output of a sequence sampler.

    Attributes:
        tokens: the generated token ids (EOS excluded).
        checks: tokens checked one by one against the constraint.
        log_z: SMC: log estimate of P(output satisfies the constraint).
        particles: SMC: the complete particles' outputs and normalised weights.
    """

    tokens: list[int]
    checks: int = 0
    log_z: float | None = None
    particles: list[tuple[tuple[int, ...], float]] = field(default_factory=list)


class SequenceSampler(Protocol):
    """Draws one whole output."""

    def sample(
        self, lm: CausalLM, compiled: Any, *, generator: Any, context: Hashable, prompt_key: str
    ) -> SequenceDraw:
        """One output of ``compiled``'s language from ``lm`` (after its prompt).

        ``context`` identifies the model and prompt within this process (e.g. the model's
        ``id`` and the prompt's ids) and ``prompt_key`` the prompt across processes; a
        sampler that learns across calls (ASAp) keys what it keeps by them.

        Raises:
            IncompleteGenerationError: no output completed within the token budget.
        """
        ...


@dataclass
class SMCSampler:
    """Sequential Monte Carlo with AWRS proposals; the output is drawn from the weighted
    complete particles."""

    temperature: float
    max_new_tokens: int
    _: KW_ONLY
    n_particles: int

    def sample(
        self, lm: CausalLM, compiled: Any, *, generator: Any, context: Hashable, prompt_key: str
    ) -> SequenceDraw:
        import torch

        from .smc import smc

        res = smc(lm.next_logits, compiled, n_particles=self.n_particles,
                  max_tokens=self.max_new_tokens, temperature=float(self.temperature),
                  generator=generator)  # fmt: skip
        dist = res.distribution()
        if not dist:
            raise IncompleteGenerationError(
                f"no SMC particle completed within max_new_tokens={self.max_new_tokens}",
                partial_text="", token_ids=[],
            )  # fmt: skip
        outs = list(dist)
        pick = int(torch.multinomial(torch.tensor([dist[o] for o in outs]), 1, generator=generator))
        return SequenceDraw(list(outs[pick]), res.checks, res.log_z, list(dist.items()))


@dataclass
class ASApSampler:
    """Grammar-aligned sampling: a trie of earlier samples for the same model, prompt,
    grammar and temperature (kept in :data:`ASAP_TRIES`, and in ``path`` if given)
    reweights each step."""

    temperature: float
    max_new_tokens: int
    _: KW_ONLY
    path: str | os.PathLike[str] | None = None

    def sample(
        self, lm: CausalLM, compiled: Any, *, generator: Any, context: Hashable, prompt_key: str
    ) -> SequenceDraw:
        from .asap import ASAp, TrieFileError

        temperature = float(self.temperature)
        key = (context, compiled.cache_key, temperature)

        def build() -> ASAp:
            asap = ASAp(lm.next_logits, compiled, key=prompt_key, temperature=temperature)
            if self.path is not None and Path(self.path).exists():
                try:
                    asap.load(self.path)
                except TrieFileError as e:  # ignored, and saved over after this draw
                    warnings.warn(
                        CacheWarning(
                            f"{e}; starting a new trie", path=str(self.path), reason=str(e)
                        ),
                        stacklevel=4,
                    )
            return asap

        asap = ASAP_TRIES.get_or_build(key, build)
        asap.next_logits = lm.next_logits
        try:
            tokens = asap.sample(generator=generator, max_tokens=self.max_new_tokens)
        except CorralError as e:
            raise IncompleteGenerationError(str(e), partial_text="", token_ids=[]) from None
        if self.path is not None:
            asap.save(self.path)
        return SequenceDraw(tokens)
