"""Hugging Face models behind corral's language-model interface
(:mod:`corral.sampler.lm`): the only place where corral calls a ``transformers`` model
forward.

torch is imported when a method runs, never at import.
"""

from __future__ import annotations

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
        kv_cache: :meth:`extend` reads only the new tokens, with the model's KV cache;
            ``False``: it reads the whole sequence again at every call (for models that
            keep no cache).

    Logits come back at least as ``float32`` (lower precisions are cast); ``next_logits``
    on the CPU, ``extend`` on the model's device. Forward passes run without gradients.
    """

    def __init__(self, model: Any, prompt: Sequence[int] = (), *, kv_cache: bool = True) -> None:
        self.model = model
        self.prompt = [int(t) for t in prompt]
        self.kv_cache = kv_cache
        self.device = _device(model)

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
            past = None if state is None else state.past
            if state is None:
                feed = self.prompt + feed
            out = self.model(
                input_ids=torch.tensor([feed], device=self.device),
                past_key_values=past,
                use_cache=True,
            )
        return _at_least_float32(out.logits[0, -1]), _Cache(out.past_key_values)


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
