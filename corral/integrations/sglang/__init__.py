"""corral as an SGLang grammar backend: ``--grammar-backend corral``.

::

    pip install corral sglang
    python -m sglang.launch_server --model-path MODEL --grammar-backend corral

Requests constrain as they do with SGLang's own backends (``json_schema``, ``regex``,
``structural_tag`` in the sampling parameters, ``response_format`` and tool calls in the
OpenAI API); see ``docs/sglang.md``.

SGLang starts its schedulers in fresh processes, so the backend is registered in every
SGLang process by SGLang's general-plugin entry point (group ``sglang.srt.plugins``,
declared in corral's package metadata) calling :func:`register`. Registering imports
neither corral's engine nor torch; :func:`create_backend`, which SGLang calls when a
scheduler starts, does.

Modules: :mod:`.requests` (SGLang's grammar keys as corral specs; no SGLang import),
:mod:`.backend` (SGLang's grammar-object and backend classes).
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["NAME", "create_backend", "json_options_of", "register"]

NAME = "corral"
"""The name of the backend: ``--grammar-backend corral``."""

logger = logging.getLogger(__name__)


def register() -> None:
    """Add ``corral`` to SGLang's grammar backends (the entry point SGLang calls in each
    of its processes). Does nothing where SGLang is not installed, or is too old to take
    backends from outside (before 0.5.12)."""
    try:
        from sglang.srt.constrained.base_grammar_backend import register_grammar_backend
        from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices
    except ImportError as e:
        logger.debug("corral: SGLang grammar backend not registered: %s", e)
        return
    if NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([NAME])
    register_grammar_backend(NAME, create_backend)


def json_options_of(serving: Any) -> dict[str, Any]:
    """corral's JSON Schema options from SGLang's serving options.

    corral writes JSON compactly by default (``json.dumps`` spacing, no run of whitespace
    a model could pad until ``max_tokens``); ``--constrained-json-max-whitespace-cnt N``
    allows runs of up to ``N`` whitespace characters between tokens (corral's
    ``whitespace="flexible"``, ``max_whitespace=N``), and
    ``--constrained-json-disable-any-whitespace`` keeps the compact form.

    Raises:
        ValueError: ``--constrained-json-whitespace-pattern``, which corral cannot take (a
            regex of whitespace would have to be proven to match whitespace only).
    """
    if serving is None:
        return {}
    if getattr(serving, "constrained_json_whitespace_pattern", None):
        raise ValueError(
            "corral's SGLang backend does not take --constrained-json-whitespace-pattern; "
            "use --constrained-json-max-whitespace-cnt N (runs of at most N whitespace "
            "characters) or leave both unset (compact JSON)"
        )
    if getattr(serving, "constrained_json_disable_any_whitespace", False):
        return {}
    count = getattr(serving, "constrained_json_max_whitespace_cnt", None)
    if count is not None:
        return {"whitespace": "flexible", "max_whitespace": int(count)}
    return {}


def create_backend(
    server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None
) -> Any:
    """SGLang's backend factory: a :class:`~.backend.CorralGrammarBackend` for the served
    tokenizer, ``vocab_size`` (the logits width) and end tokens ``eos_token_ids``."""
    from .backend import CorralGrammarBackend

    try:
        from sglang.srt.runtime_context import get_serving

        serving = get_serving()
    except (ImportError, ValueError, RuntimeError, AttributeError):  # older SGLang; no config
        serving = server_args
    return CorralGrammarBackend(
        tokenizer, vocab_size, eos_token_ids, json_options=json_options_of(serving)
    )
