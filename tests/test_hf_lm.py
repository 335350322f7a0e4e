"""``HFCausalLM``'s KV cache argument: ``cache`` where the model's forward takes it (newer
``transformers``, which deprecates ``past_key_values``), ``past_key_values`` where that is
what it takes (older versions), and no deprecation warning from a real model."""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from corral.integrations.hf_lm import HFCausalLM

V = 8


class _Recorder:
    """A model that returns fixed logits and a fresh cache object, and records the KV cache
    argument of every call (``name``: the field its output holds the cache in)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> Any:
        return self.forward(**kwargs)

    def _out(self, input_ids: torch.Tensor, kwargs: dict[str, Any]) -> Any:
        self.calls.append({k: v for k, v in kwargs.items() if k != "use_cache"})
        logits = torch.zeros(1, input_ids.shape[1], V)
        return SimpleNamespace(logits=logits, **{self.name: object()})


class _NewForward(_Recorder):
    def forward(self, input_ids: torch.Tensor, cache: Any = None, use_cache: Any = None) -> Any:
        return self._out(input_ids, {"cache": cache} if cache is not None else {})


class _OldForward(_Recorder):
    def forward(
        self, input_ids: torch.Tensor, past_key_values: Any = None, use_cache: Any = None
    ) -> Any:
        kw = {"past_key_values": past_key_values} if past_key_values is not None else {}
        return self._out(input_ids, kw)


class _KwargsForward(_Recorder):
    def forward(self, input_ids: torch.Tensor, **kwargs: Any) -> Any:
        return self._out(input_ids, kwargs)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        (_NewForward("cache"), "cache"),
        (_OldForward("past_key_values"), "past_key_values"),
        (_KwargsForward("cache"), "cache"),  # the output's field names it
        (_KwargsForward("past_key_values"), "past_key_values"),
    ],
)
def test_the_cache_goes_back_under_the_name_the_model_uses(model: Any, name: str) -> None:
    lm = HFCausalLM(model, prompt=[1, 2])
    _, state = lm.extend(None, [3])
    _, state2 = lm.extend(state, [4])
    lm.extend(state2, [5])
    assert model.calls[0] == {}  # nothing to pass before the first forward
    assert model.calls[1] == {name: state.past} and model.calls[2] == {name: state2.past}


def _tiny_llama() -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


def test_a_transformers_model_reads_its_cache_without_deprecation_warnings() -> None:
    """The real forward (transformers 5.24 deprecates ``past_key_values`` with a
    ``FutureWarning`` on every call): no warning, and the cached steps give the logits of a
    whole forward pass."""
    lm = HFCausalLM(_tiny_llama(), prompt=[3, 9, 4])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, state = lm.extend(None, [7, 11])
        second, _ = lm.extend(state, [5])
    assert [str(w.message) for w in caught] == []
    full = lm.next_logits([[7, 11], [7, 11, 5]])
    torch.testing.assert_close(first, full[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(second, full[1], rtol=1e-4, atol=1e-4)
