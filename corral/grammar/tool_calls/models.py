"""Which family's format a model writes: :func:`family_of`.

The rule, in order:

1. ``model`` lowercased is a family name (:data:`~.formats.FORMATS`) or an alias in
   :data:`ALIASES` (XGrammar's model keys among them: ``"qwen_3"``, ``"qwen_3_coder"``...);
2. otherwise it is read as a model id (``"Qwen/Qwen2.5-7B-Instruct"``): its last path
   component, lowercased, is matched against :data:`RULES`, an ordered list of
   ``(substring, family)``; the first rule whose substring it contains wins (so
   ``"DeepSeek-R1-Distill-Qwen-7B"`` is ``deepseek_r1`` and ``"Qwen3-Coder-30B-A3B"`` is
   ``qwen3_coder``, not ``qwen``);
3. otherwise :class:`~corral.errors.InvalidArgumentError` listing the families.
"""

from __future__ import annotations

from typing import Any

from ...errors import ArgumentTypeError, InvalidArgumentError
from .formats import FORMATS

__all__ = ["ALIASES", "RULES", "family_of"]

ALIASES: dict[str, str] = {
    "llama3": "llama",
    "llama_3": "llama",
    "qwen3": "qwen",
    "qwen_3": "qwen",
    "qwq": "qwen",
    "qwen2.5": "qwen2_5",
    "qwen_2_5": "qwen2_5",
    "qwen_3_coder": "qwen3_coder",
    "qwen_3_5": "qwen3_coder",
    "gpt-oss": "harmony",
    "gpt_oss": "harmony",
    "kimi_k2": "kimi",
    "kimi-k2": "kimi",
    "deepseek-r1": "deepseek_r1",
    "deepseek-v3.1": "deepseek_v3_1",
}
"""Other names of the families."""

RULES: tuple[tuple[str, str], ...] = (
    ("gpt-oss", "harmony"),
    ("kimi-k2", "kimi"),
    ("deepseek-r1", "deepseek_r1"),
    ("deepseek-v3.1", "deepseek_v3_1"),
    ("deepseek-v3.2-exp", "deepseek_v3_1"),
    ("qwen3-coder", "qwen3_coder"),
    ("qwen3.5", "qwen3_coder"),
    ("qwen3.6", "qwen3_coder"),
    ("qwen3", "qwen"),
    ("qwq", "qwen"),
    ("qwen2.5", "qwen2_5"),
    ("qwen2", "qwen2_5"),
    ("llama-3", "llama"),
    ("llama3", "llama"),
    ("mistral", "mistral"),
    ("mixtral", "mistral"),
    ("ministral", "mistral"),
)
"""``(substring of the model id's last component, family)``, first match wins."""


def family_of(model: Any) -> str:
    """The family whose format ``model`` (a family name, alias or model id) writes."""
    if not isinstance(model, str):
        raise ArgumentTypeError(f"model must be a str (a family name or model id), not {model!r}")
    key = model.strip().lower()
    if key in FORMATS:
        return key
    if key in ALIASES:
        return ALIASES[key]
    tail = key.rsplit("/", 1)[-1]
    for part, family in RULES:
        if part in tail:
            return family
    raise InvalidArgumentError(
        f"unknown model {model!r}: give one of the families {sorted(FORMATS)} (or a model id "
        "such as 'Qwen/Qwen3-8B', 'meta-llama/Llama-3.1-8B-Instruct', 'openai/gpt-oss-20b')"
    )
