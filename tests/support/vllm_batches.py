"""What the vLLM processor's batch tests (V1 rows, V2 slots) share: three constraints of
each kind, and the mask a reference matcher replayed from scratch gives a request."""

from __future__ import annotations

from typing import Any

import numpy as np

from .words import mask_of

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
    },
    "required": ["id"],
}
GRAMMAR = 'start: item ("," item)*\nitem: "x" | "yy" | NUMBER\n%import common.NUMBER'
REGEX = r"(ab|cd)+!"
PAD = 48  # logits wider than the vocabulary, as with a padded output layer


def constraints(vocab: Any) -> list[tuple[Any, Any]]:
    """``(sampling_params, compiled grammar)`` of a schema, a Lark grammar and a regex, each
    ending on the vocabulary's first EOS id."""
    from corral.integrations.vllm import sampling_params
    from corral.integrations.vllm.spec import ConstraintSpec

    eos = vocab.eos_token_ids[0]
    out = []
    for kw in ({"schema": SCHEMA}, {"grammar": GRAMMAR}, {"regex": REGEX}):
        params = sampling_params(**kw, stop_token_ids=[eos], max_tokens=64)
        spec = ConstraintSpec.parse(params.extra_args["corral"])
        out.append((params, spec.compile(vocab)))
    return out


def reference_mask(
    compiled: Any, tokens: list[int], ends: set[int], vocab: Any, width: int, failed: bool
) -> np.ndarray:
    """``bool [width]``: what a request's row must allow after ``tokens``. A fresh matcher
    reads them; when one is refused (or ``failed``: a token outside the grammar was
    forced in before) only the end tokens ``ends``; else the grammar's next tokens but the
    vocabulary's EOS ids, and ``ends`` exactly when the matcher accepts."""
    allowed = np.zeros(width, dtype=bool)
    m = compiled.matcher()
    if failed or not all(m.try_consume(t) for t in tokens):
        allowed[sorted(ends)] = True
        return allowed
    allowed[: vocab.size] = mask_of(m)
    allowed[list(vocab.eos_token_ids)] = False
    allowed[sorted(ends)] = m.is_accepting()
    return allowed
