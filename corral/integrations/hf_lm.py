"""Hugging Face models behind corral's language-model interface
(:mod:`corral.sampler.lm`): the only place where corral calls a ``transformers`` model
forward.

torch is imported when a method runs, never at import.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["HFCausalLM", "HFMaskedLM"]


@dataclass
class _Cache:
    """What :meth:`HFCausalLM.extend` has read, with a KV cache: the model's cache."""

    past: Any


@dataclass
class _Read:
    """What :meth:`HFCausalLM.extend` has read, without a KV cache: the token ids."""

    tokens: list[int]


def _device(model: Any) -> Any:
    """The device of the model's parameters (``None``: torch's default, for a model
    object without parameters)."""
    try:
        return next(model.parameters()).device
    except (AttributeError, StopIteration, TypeError):
        return None


class HFCausalLM:
    """A ``transformers`` causal LM after ``prompt`` (token ids, possibly none), as a
    :class:`~corral.sampler.lm.CausalLM`.

    Args:
        model: the model; with ``kv_cache=False`` anything called as
            ``model(input_ids=int64 [1, n])`` and returning ``.logits [1, n, V]``.
        prompt: token ids read before every prefix.
        kv_cache: :meth:`extend` reads only the new tokens, with the model's KV cache
            (passed as ``cache``, or as ``past_key_values`` where that is the name the
            model's forward declares or its output uses: ``transformers`` before the
            rename); ``False``: it reads the whole sequence again at every call (for
            models that keep no cache).

    Logits come back at least as ``float32`` (lower precisions are cast); ``next_logits``
    on the CPU, ``extend`` on the model's device. Forward passes run without gradients.
    """

    def __init__(self, model: Any, prompt: Sequence[int] = (), *, kv_cache: bool = True) -> None:
        self.model = model
        self.prompt = [int(t) for t in prompt]
        self.kv_cache = kv_cache
        self.device = _device(model)
        self._cache_arg = _cache_parameter(model)  # None: the name the output uses

    def next_logits(self, prefixes: Sequence[Sequence[int]]) -> Any:
        """``float32 [N, V]`` on the CPU: one batched forward pass over ``prompt + prefix``
        for every prefix (right padding, with an attention mask; no KV cache)."""
        import torch

        seqs = [self.prompt + [int(t) for t in p] for p in prefixes]
        lens = [len(x) for x in seqs]
        width = max(lens)
        ids = torch.tensor([x + [0] * (width - len(x)) for x in seqs], device=self.device)
        att = torch.tensor([[1] * n + [0] * (width - n) for n in lens], device=self.device)
        with torch.no_grad():
            logits = self.model(input_ids=ids, attention_mask=att).logits
        return logits[torch.arange(len(seqs)), torch.tensor(lens) - 1].float().cpu()

    def extend(self, state: Any, tokens: Sequence[int]) -> tuple[Any, Any]:
        """``(float [V] on the model's device, state')``: the logits after the new tokens
        (after the prompt, when ``state`` is ``None``); one forward pass over the new
        tokens with the KV cache, or over the whole sequence without."""
        import torch

        feed = [int(t) for t in tokens]
        with torch.no_grad():
            if not self.kv_cache:
                seq = (self.prompt if state is None else state.tokens) + feed
                out = self.model(input_ids=torch.tensor([seq], device=self.device))
                return _at_least_float32(out.logits[0, -1]), _Read(seq)
            cache: dict[str, Any] = {}
            if state is None:
                feed = self.prompt + feed
            else:
                cache[self._cache_arg or "past_key_values"] = state.past
            out = self.model(
                input_ids=torch.tensor([feed], device=self.device), use_cache=True, **cache
            )
        name, past = _returned_cache(out)
        if self._cache_arg is None:
            self._cache_arg = name
        return _at_least_float32(out.logits[0, -1]), _Cache(past)


_CACHE_NAMES = ("cache", "past_key_values")
"""The names of a model forward's KV cache argument and output field: ``cache`` in
``transformers`` since it renamed ``past_key_values``; the old name still works there, with
a ``FutureWarning``, and is the only one in older versions (``transformers>=4.40``)."""


def _cache_parameter(model: Any) -> str | None:
    """The name ``model``'s forward declares for its KV cache (:data:`_CACHE_NAMES`), or
    ``None`` when it declares neither (a forward taking ``**kwargs``, or one that cannot be
    inspected): then the first output says which name the model uses."""
    try:
        params = inspect.signature(getattr(model, "forward", model)).parameters
    except (TypeError, ValueError):
        return None
    return next((n for n in _CACHE_NAMES if n in params), None)


def _returned_cache(out: Any) -> tuple[str, Any]:
    """``(name, KV cache)`` of a forward's output: its ``cache`` field when it has one, else
    ``past_key_values`` (read only then: newer outputs log a deprecation when it is read)."""
    if hasattr(out, "cache"):
        return "cache", out.cache
    return "past_key_values", out.past_key_values


def _at_least_float32(x: Any) -> Any:
    import torch

    return x if x.dtype in (torch.float32, torch.float64) else x.float()


class HFMaskedLM:
    """A ``transformers`` masked LM (or masked diffusion LM with the same interface) as a
    :class:`~corral.sampler.lm.MaskedLM`: ``int64 [1, L]`` to ``float [1, L, V']``."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, ids: Any) -> Any:
        return self.model(input_ids=ids).logits
