"""Decoding settings: one frozen :class:`GenerationConfig`, validated once.

``corral.generate``, ``corral.stream`` and ``decode_steps`` build a config from their
keyword arguments and pass it down; every check of those arguments (and every error
message about them) lives in :meth:`GenerationConfig.__post_init__`. Which algorithm a
``sampler=`` name stands for is :mod:`corral.sampler.registry`'s table.

This module imports neither torch nor numba.
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from typing import Any

from ..errors import ArgumentTypeError, InvalidArgumentError
from .registry import sampler_entry

__all__ = ["DEFAULT_PARTICLES", "GenerationConfig", "resolve_fast_forward"]

DEFAULT_PARTICLES = 16


def resolve_fast_forward(fast_forward: bool | None, sampler: str) -> bool:
    """Whether to fast-forward with ``sampler``: ``None`` means on for ``"mask"`` and off
    for the samplers that promise a distribution (``"awrs"``, ``"smc"``, ``"asap"``).

    Fast-forwarded tokens are the tokenizer's cut of the forced bytes, appended with
    probability 1 whatever the model thinks of them: another token sequence (and, since
    the model then reads other tokens, in general another text) than sampling each token.
    So ``True`` with those samplers raises :class:`~corral.errors.InvalidArgumentError` (a
    ``ValueError``) rather than silently breaking the distribution they promise.
    """
    exact = sampler_entry(sampler).exact
    if fast_forward is None:
        return not exact
    if not isinstance(fast_forward, bool):
        raise ArgumentTypeError(
            f"fast_forward must be True, False or None, not {type(fast_forward).__name__} "
            f"{fast_forward!r}"
        )
    if fast_forward and exact:
        raise InvalidArgumentError(
            f"fast_forward=True is not available with sampler={sampler!r}: forced tokens are "
            "appended without sampling (the tokenizer's cut, with probability 1), which "
            f"changes the distribution sampler={sampler!r} promises; leave fast_forward unset "
            "(off for this sampler) or use sampler='mask'"
        )
    return fast_forward


@dataclass(frozen=True)
class GenerationConfig:
    """The decoding settings of one generation (see :func:`corral.generate` for each).

    Attributes:
        sampler: a name of :data:`corral.sampler.registry.SAMPLERS`.
        max_new_tokens: budget of generated tokens (forced ones included), ``>= 1``.
        temperature: ``0`` is greedy; ``> 0`` samples at that temperature.
        top_k, top_p: applied after the mask (``"mask"`` only); ``top_k >= 1``,
            ``0 < top_p <= 1``.
        seed: seed of the sampler's random generator (``None``: unseeded).
        fast_forward: after construction always a ``bool`` (``None`` is resolved by
            :func:`resolve_fast_forward`).
        n_particles: particles of ``"smc"``.
        asap_path: the file keeping ``"asap"``'s trie between processes.

    Raises (on construction):
        InvalidArgumentError: an unknown sampler, a value out of range, or settings the sampler does
            not take (``top_k``/``top_p`` with ``"awrs"``/``"smc"``/``"asap"``, greedy
            ``"smc"``/``"asap"``, ``n_particles``/``asap_path`` with a per-token sampler,
            ``fast_forward=True`` with a sampler that promises a distribution).
        ArgumentTypeError: a count that is not an integer, a temperature or ``top_p`` that
            is not a number, a ``fast_forward`` that is not a bool.
    """

    sampler: str = "mask"
    max_new_tokens: int = 512
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    fast_forward: bool | None = None
    n_particles: int = DEFAULT_PARTICLES
    asap_path: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        from ..automata.bitmask import as_int

        sampler = self.sampler
        entry = sampler_entry(sampler)  # InvalidArgumentError listing the names if unknown
        self._set("fast_forward", resolve_fast_forward(self.fast_forward, sampler))
        self._set("max_new_tokens", as_int(self.max_new_tokens, "max_new_tokens"))
        self._set("n_particles", as_int(self.n_particles, "n_particles"))
        if self.top_k is not None:
            self._set("top_k", as_int(self.top_k, "top_k"))
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if not (value is None and name == "top_p") and (
                isinstance(value, bool) or not isinstance(value, numbers.Real)
            ):
                raise ArgumentTypeError(
                    f"{name} must be a number, not {type(value).__name__} {value!r}"
                )
        if self.max_new_tokens < 1:
            raise InvalidArgumentError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise InvalidArgumentError(f"temperature must be >= 0, got {self.temperature}")
        if not entry.top_k_top_p and (self.top_k is not None or self.top_p is not None):
            raise InvalidArgumentError(
                f"top_k/top_p are not available with sampler={sampler!r} (only with 'mask'), "
                f"got top_k={self.top_k}, top_p={self.top_p}"
            )
        if not entry.per_token:
            if self.temperature == 0:
                raise InvalidArgumentError(
                    f"sampler={sampler!r} samples a distribution: pass temperature > 0 "
                    f"(1.0 is the model's own distribution), got {self.temperature}"
                )
        elif self.n_particles != DEFAULT_PARTICLES or self.asap_path is not None:
            raise InvalidArgumentError(
                "n_particles and asap_path apply to sampler='smc' / 'asap' only, got "
                f"sampler={sampler!r} with n_particles={self.n_particles}, "
                f"asap_path={self.asap_path!r}"
            )
        if self.top_k is not None and self.top_k < 1:
            raise InvalidArgumentError(f"top_k must be >= 1, got {self.top_k}")
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise InvalidArgumentError(f"top_p must be in (0, 1], got {self.top_p}")

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    @property
    def per_token(self) -> bool:
        """Whether the sampler draws token by token (a ``TokenSampler`` in the KV-cache
        loop, which streams) rather than whole sequences."""
        return sampler_entry(self.sampler).per_token

    def make_sampler(self) -> Any:
        """The sampler object for these settings: a
        :class:`~corral.sampler.token.TokenSampler` or a
        :class:`~corral.sampler.sequence.SequenceSampler`."""
        return sampler_entry(self.sampler).make(self)

    def generator(self, *, fresh: bool = False) -> Any:
        """A ``torch.Generator`` seeded with ``seed``; unseeded: ``None`` (torch's global
        generator), or a fresh unseeded generator when ``fresh``."""
        import torch

        if self.seed is None:
            return torch.Generator() if fresh else None
        return torch.Generator().manual_seed(int(self.seed))
