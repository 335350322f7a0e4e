"""Masking and sampling on torch logits.

The order of operations is fixed and the same for every entry point of corral
(``generate``, ``extract``, the transformers processor when transformers samples):

1. **mask**: tokens the grammar does not allow get ``-inf``;
2. **temperature**: logits are divided by ``temperature`` (``0`` means greedy: argmax);
3. **top-k**: keep the ``k`` largest of the allowed logits;
4. **top-p**: keep the smallest set of the remaining tokens whose probability reaches
   ``p``;
5. **sample** from the renormalised distribution.

Masking first means top-k and top-p choose among allowed tokens only, so they never
empty the distribution.
"""

from __future__ import annotations

from typing import Any

import torch

from ..automata.bitmask import bitmask_to_bool_torch, check_bitmask
from ..errors import InvalidArgumentError, ShapeError, VocabularyMismatchError


def masked_logits(logits: torch.Tensor, bitmask: Any, vocab_size: int) -> torch.Tensor:
    """A new tensor: ``logits`` with disallowed tokens set to ``-inf``.

    Args:
        logits: ``float [batch, V]`` or ``[V]``; ``V`` may exceed ``vocab_size`` (a model
            whose output layer is padded): the extra ids are never allowed.
        bitmask: ``int32 [batch, ceil(vocab_size/32)]``, bit set = allowed.
        vocab_size: the vocabulary size the bitmask was filled for.

    Raises:
        VocabularyMismatchError: ``V`` is smaller than ``vocab_size`` (the grammar's
            vocabulary is not this model's).
        ShapeError: a bitmask of another dtype or width (see
            :func:`~corral.automata.bitmask.check_bitmask`), or not one row per logits row.
    """
    squeeze = logits.dim() == 1
    x = logits.unsqueeze(0) if squeeze else logits
    width = x.shape[-1]
    if width < vocab_size:
        raise VocabularyMismatchError(
            f"the logits must have at least {vocab_size} columns (the vocabulary the grammar "
            f"was compiled for), got {width}: build the Vocabulary with this model's "
            "tokenizer and vocab_size=model.config.vocab_size"
        )
    rows = check_bitmask(bitmask, vocab_size)
    if rows != x.shape[0]:
        raise ShapeError(
            f"the bitmask must have one row per logits row ({x.shape[0]}), got {rows} rows"
        )
    allowed = bitmask_to_bool_torch(bitmask, width, x.device)
    allowed[:, vocab_size:] = False  # whatever the last word's spare bits say
    out = x.masked_fill(~allowed, float("-inf"))
    return out[0] if squeeze else out


def sample(
    logits: torch.Tensor,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Token ids drawn from ``logits`` (``float [batch, V]`` → ``int64 [batch]``).

    Steps 2–5 of the module's order; the caller masks first. A row with no finite logit
    raises :class:`~corral.errors.InvalidArgumentError` (masking never produces one: a
    matcher always allows a token), as does a setting out of range.
    """
    if temperature < 0:
        raise InvalidArgumentError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise InvalidArgumentError(f"top_k must be >= 1, got {top_k}")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise InvalidArgumentError(f"top_p must be in (0, 1], got {top_p}")
    x = logits.unsqueeze(0) if logits.dim() == 1 else logits
    x = x.float()
    finite = torch.isfinite(x).any(dim=-1)
    if not bool(finite.all()):
        raise InvalidArgumentError(
            "every row of logits must have an allowed (finite) entry, got row "
            f"{int((~finite).nonzero()[0])} with none"
        )
    if temperature == 0.0:
        return x.argmax(dim=-1)
    x = x / temperature
    if top_k is not None and top_k < x.shape[-1]:
        kth = torch.topk(x, top_k, dim=-1).values[:, -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_x, order = torch.sort(x, dim=-1, descending=True)
        probs = torch.softmax(sorted_x, dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs  # mass of the strictly better tokens
        drop_sorted = before >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        x = x.masked_fill(drop, float("-inf"))
    probs = torch.softmax(x, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
