"""Tiny randomly initialised causal LMs over real tokenizers, for fast generation tests.

Quality is irrelevant: what the tests check is that every output satisfies its
constraint whatever the model prefers. A random model's preferences are arbitrary, which
is a good adversary.
"""

from __future__ import annotations

from typing import Any


def tiny_llama(tokenizer: Any, *, vocab_size: int | None = None, seed: int = 0) -> Any:
    """A 2-layer Llama with hidden size 32 whose logits are ``vocab_size`` wide (default:
    the tokenizer's length; larger = a padded output layer)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    n = len(tokenizer) if vocab_size is None else vocab_size
    config = LlamaConfig(
        vocab_size=n,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # sharper, more varied preferences than the default init
        model.lm_head.weight.normal_(0.0, 0.25)
    return model


def tiny_bert(vocab_size: int, *, seed: int = 0, layers: int = 2) -> Any:
    """A randomly initialised BERT masked LM with hidden size 32 whose logits are
    ``vocab_size`` wide (any tokenizer: the ids are all it sees)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    return BertForMaskedLM(config).eval()


def generate_texts(
    tok: Any, model: Any, proc: Any, prompts: list[str], *, max_new_tokens: int, **kw: Any
) -> list[str]:
    """``model.generate`` over the left-padded ``prompts`` with the logits processor
    ``proc``; each output row's text up to its first EOS (the tokenizer's pad token is its
    EOS). Asserts no output token is a padding id past the tokenizer."""
    from transformers import LogitsProcessorList

    enc = tok(prompts, return_tensors="pt", padding=True)
    out = model.generate(
        **enc, logits_processor=LogitsProcessorList([proc]), max_new_tokens=max_new_tokens,
        pad_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, **kw,
    )  # fmt: skip
    width = enc["input_ids"].shape[1]
    texts = []
    for row in out[:, width:].tolist():
        ids = row[: row.index(tok.eos_token_id)] if tok.eos_token_id in row else row
        assert all(t < len(tok) for t in ids)  # never a padding id
        texts.append(tok.decode(ids))
    return texts
