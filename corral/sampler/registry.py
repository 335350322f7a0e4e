"""The table of samplers: what each ``sampler=`` name stands for.

Every place that accepts a sampler name (:class:`~corral.sampler.config.GenerationConfig`)
looks it up here; the objects are built by the entry's factory (imported lazily, so this
module imports neither torch nor numba).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError

if TYPE_CHECKING:
    from .config import GenerationConfig

__all__ = ["EXACT_SAMPLERS", "PER_TOKEN_SAMPLERS", "SAMPLERS", "SamplerEntry", "sampler_entry"]


@dataclass(frozen=True)
class SamplerEntry:
    """One ``sampler=`` name.

    Attributes:
        name: the name users pass.
        exact: the sampler promises a distribution (fast-forward, which appends forced
            tokens with probability 1, is off by default and refused when asked for).
        per_token: a token sampler (:class:`~corral.sampler.token.TokenSampler`, run in the
            KV-cache loop and streamed); else a sequence sampler
            (:class:`~corral.sampler.sequence.SequenceSampler`, whole outputs at once).
        top_k_top_p: ``top_k``/``top_p`` apply.
        make: builds the sampler from a :class:`~corral.sampler.config.GenerationConfig`.
    """

    name: str
    exact: bool
    per_token: bool
    top_k_top_p: bool
    make: Callable[[GenerationConfig], Any]


def _masking(config: GenerationConfig) -> Any:
    from .token import MaskingSampler

    return MaskingSampler(config.temperature, top_k=config.top_k, top_p=config.top_p)


def _awrs(config: GenerationConfig) -> Any:
    from .token import AWRSSampler

    return AWRSSampler(config.temperature)


def _smc(config: GenerationConfig) -> Any:
    from .sequence import SMCSampler

    return SMCSampler(config.temperature, config.max_new_tokens, n_particles=config.n_particles)


def _asap(config: GenerationConfig) -> Any:
    from .sequence import ASApSampler

    return ASApSampler(config.temperature, config.max_new_tokens, path=config.asap_path)


_TABLE: dict[str, SamplerEntry] = {
    e.name: e
    for e in (
        SamplerEntry("mask", exact=False, per_token=True, top_k_top_p=True, make=_masking),
        SamplerEntry("awrs", exact=True, per_token=True, top_k_top_p=False, make=_awrs),
        SamplerEntry("smc", exact=True, per_token=False, top_k_top_p=False, make=_smc),
        SamplerEntry("asap", exact=True, per_token=False, top_k_top_p=False, make=_asap),
    )
}

SAMPLERS: tuple[str, ...] = tuple(_TABLE)
"""The sampler names, in the order error messages list them."""
EXACT_SAMPLERS: tuple[str, ...] = tuple(n for n, e in _TABLE.items() if e.exact)
"""Samplers whose output follows a stated distribution: fast-forward would change it."""
PER_TOKEN_SAMPLERS: tuple[str, ...] = tuple(n for n, e in _TABLE.items() if e.per_token)
"""Samplers that draw token by token (run by :func:`corral.sampler.decode.token_steps`)."""


def sampler_entry(name: str) -> SamplerEntry:
    """The table's entry for ``name``; :class:`~corral.errors.InvalidArgumentError` (a
    ``ValueError``) listing the names if unknown."""
    entry = _TABLE.get(name) if isinstance(name, str) else None
    if entry is None:
        raise InvalidArgumentError(f"sampler must be one of {SAMPLERS}, got {name!r}")
    return entry
