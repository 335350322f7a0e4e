"""The language-model interface of the samplers, at the array level.

Samplers never call a model directly: they call one of these two protocols. The Hugging
Face implementations live in :mod:`corral.integrations.hf_lm`; the enumerable reference
models of :mod:`corral.testing` implement them too, so every sampler can be tested
exactly. Arrays are torch tensors (any device; samplers move what they need to the CPU).

This module imports neither torch nor transformers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["CausalLM", "MaskedLM", "NextLogits"]

NextLogits = Callable[[Sequence[Sequence[int]]], Any]
"""``next_logits(prefixes) -> float [N, V]``: :meth:`CausalLM.next_logits` as a function."""


@runtime_checkable
class CausalLM(Protocol):
    """A causal language model after a fixed prompt (possibly empty).

    Both methods give unnormalised next-token log-probabilities (logits); ``V`` may exceed
    a grammar's vocabulary (padded output layers): callers restrict it.
    """

    def next_logits(self, prefixes: Sequence[Sequence[int]]) -> Any:
        """``float [N, V]``: the logits of the token after the prompt followed by each of
        the ``N`` prefixes (token ids). No state is kept between calls."""
        ...

    def extend(self, state: Any, tokens: Sequence[int]) -> tuple[Any, Any]:
        """``(logits float [V], state')``: read ``tokens`` after what ``state`` has read and
        give the logits of the next token. ``state`` is ``None`` at the start (the prompt
        is read first) or a state this method returned; a KV-cache implementation reads
        only the new tokens. A state is used once (the returned one replaces it)."""
        ...


@runtime_checkable
class MaskedLM(Protocol):
    """A masked (diffusion) language model: logits for every position at once."""

    def __call__(self, ids: Any) -> Any:
        """``int64 [1, L]`` (mask tokens where a position is unknown) to
        ``float [1, L, V']``."""
        ...
