"""corral as an SGLang grammar backend: SGLang's classes, over corral's compiler.

Imports SGLang and torch: loaded only by :func:`create_backend` (through the plugin's
factory, in SGLang's scheduler process), never by ``import corral``.

What SGLang asks of a backend (``sglang/srt/constrained/base_grammar_backend.py``, 0.5.12
to 0.5.23), and what corral does:

* one :class:`CorralGrammar` per request, a corral ``Matcher`` over a compiled grammar;
  :meth:`~CorralGrammar.copy` gives a fresh one at the start state (SGLang caches one
  object per key and copies it for each request);
* ``accept_token`` raises ``ValueError`` for a token outside the grammar (SGLang then
  aborts that request), and records ``current_token`` (disaggregated decoding reads it);
  ``rollback(k)`` undoes the last ``k`` tokens, an accepted end token included;
  ``is_terminated`` is true once an end token was accepted;
* the vocabulary mask is corral's packed bitmask, which is SGLang's layout: ``int32
  [rows, ceil(V/32)]``, bit ``t % 32`` of word ``t // 32`` set for an allowed token, ``-1``
  for a row left unconstrained. It is allocated on the host (pinned where pinning is
  available), filled there (:meth:`~CorralGrammar.fill_vocab_mask_batched`: every listed
  row in one call, on several threads), copied to the logits' device without waiting,
  and applied there (SGLang's Triton kernel on CUDA, XPU and MUSA; corral's elsewhere);
* under speculative decoding SGLang walks each draft tree itself with ``fill_vocab_mask``,
  ``accept_token`` and ``rollback(1)``, which corral's matcher supports exactly;
* a key corral cannot compile becomes SGLang's ``InvalidGrammarObject`` carrying corral's
  message (keyword and JSON pointer, line and column): SGLang refuses the request with it.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
from sglang.srt.constrained.base_grammar_backend import (
    BaseGrammarBackend,
    BaseGrammarObject,
    GrammarStats,
)

from ...automata import Vocabulary, allocate_bitmask, fill_next_token_bitmasks
from ...automata.bitmask import apply_token_bitmask_inplace
from ...automata.compiler import Compiler
from ...errors import CorralError
from .requests import read_key

try:  # SGLang >= 0.5.12
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject
except ImportError:  # pragma: no cover - older SGLang: one error-less sentinel
    InvalidGrammarObject = None

__all__ = ["CorralGrammar", "CorralGrammarBackend"]

logger = logging.getLogger(__name__)

WARMUP_SCHEMA = '{"type": "object", "properties": {"a": {"type": "integer"}}}'
"""Compiled and masked once when the backend starts, so that the mask kernels are loaded
(or compiled, with an empty Numba cache) before a request waits on them: SGLang gives a
grammar about 50 s to compile before it refuses the request."""


def _invalid(message: str) -> Any:
    if InvalidGrammarObject is None:  # pragma: no cover
        from sglang.srt.constrained.base_grammar_backend import INVALID_GRAMMAR_OBJ

        return INVALID_GRAMMAR_OBJ
    return InvalidGrammarObject(message)


@functools.cache
def _pinned() -> bool:
    """Whether host masks can be pinned (asked once: a mask is allocated every step)."""
    try:
        from sglang.srt.utils.common import is_pin_memory_available

        return bool(is_pin_memory_available())
    except ImportError:  # pragma: no cover
        return bool(torch.cuda.is_available())


class CorralGrammar(BaseGrammarObject):  # type: ignore[misc]
    """One request's constraint: a fresh corral ``Matcher`` over a compiled grammar.

    Never falsy (SGLang tests grammars with ``if grammar``): defines no ``__len__`` or
    ``__bool__``.
    """

    def __init__(self, compiled: Any, key_type: str, stats: Any = None) -> None:
        super().__init__()
        self.compiled = compiled
        self.key_type = key_type
        self.matcher = compiled.matcher()
        self.grammar_stats = stats if stats is not None else GrammarStats(dispatch_type=key_type)

    # -- the token stream ----------------------------------------------------------------
    def accept_token(self, token: int) -> None:
        """Advance by one sampled token. Raises ``ValueError`` (corral's
        ``TokenRejectedError``) for a token the grammar does not allow here."""
        self.current_token = token
        try:
            self.matcher.consume(int(token))
        except ValueError:
            raise
        except CorralError as e:  # every refusal reaches SGLang as the ValueError it catches
            raise ValueError(str(e)) from e

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens (an accepted end token included)."""
        if k > 0:
            self.matcher.rollback(int(k))

    def is_terminated(self) -> bool:
        """Whether an end token was accepted."""
        return bool(self.matcher.is_finished())

    # -- masks ---------------------------------------------------------------------------
    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        """``int32 [batch_size, ceil(vocab_size/32)]`` of ``-1`` (every token allowed: the
        rows SGLang does not fill stay unconstrained), on the host."""
        return torch.full(
            (batch_size, (vocab_size + 31) // 32), -1, dtype=torch.int32, pin_memory=_pinned()
        )

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        """Row ``idx`` of ``vocab_mask``: the tokens allowed next."""
        self.matcher.fill_bitmask(vocab_mask, idx)

    @staticmethod
    def fill_vocab_mask_batched(entries: Sequence[Any], vocab_mask: Any) -> None:
        """The rows of ``entries`` (``(row, grammar)`` pairs) in one call, the others left
        as they are. Rows of other backends' grammars are filled by them."""
        ours = [e for e in entries if isinstance(e.grammar, CorralGrammar)]
        for e in entries:
            if not isinstance(e.grammar, CorralGrammar):
                e.grammar.fill_vocab_mask(vocab_mask, e.row)
        if not ours:
            return
        rows = [int(e.row) for e in ours]
        if rows == list(range(len(rows))):
            fill_next_token_bitmasks([e.grammar.matcher for e in ours], vocab_mask)
            return
        staged = np.empty((len(rows), vocab_mask.shape[1]), dtype=np.int32)
        fill_next_token_bitmasks([e.grammar.matcher for e in ours], staged)
        vocab_mask[torch.tensor(rows, dtype=torch.long)] = torch.from_numpy(staged)

    @staticmethod
    def reset_vocab_mask(vocab_mask: Any) -> None:
        """Every token allowed again, in place."""
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
        """The mask on ``device``; the copy is queued, not waited for."""
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        """Set the logits of disallowed tokens to ``-inf``, in place. ``logits``: float
        ``[rows, V_logits]``; ``vocab_mask``: ``int32 [rows, W]`` on the same device."""
        if logits.device.type in ("cuda", "xpu", "musa"):
            from sglang.kernels.ops.grammar.bitmask_ops import (
                apply_token_bitmask_inplace_triton,
            )

            apply_token_bitmask_inplace_triton(logits, vocab_mask)
        else:
            apply_token_bitmask_inplace(logits, vocab_mask)

    # -- caching and unused hooks ----------------------------------------------------------
    def copy(self) -> CorralGrammar:
        """A fresh grammar object at the start state, sharing the compiled grammar."""
        stats = self.grammar_stats
        if isinstance(stats, GrammarStats):
            stats = dataclasses.replace(stats, is_cache_hit=True)
        return CorralGrammar(self.compiled, self.key_type, stats)

    def try_jump_forward(self, tokenizer: Any) -> Any:  # not called by SGLang >= 0.5.12
        return None

    def jump_forward_str_state(self, helper: Any) -> tuple[str, int]:
        return "", -1

    def jump_and_retokenize(
        self, old_output_ids: Any, new_output_ids: Any, next_state: Any
    ) -> None:
        return None

    def __repr__(self) -> str:
        return f"CorralGrammar({self.key_type}, tokens={self.matcher.num_tokens})"


class CorralGrammarBackend(BaseGrammarBackend):  # type: ignore[misc]
    """Compiles SGLang's grammar keys with one corral ``Compiler`` (thread-safe: SGLang
    compiles on a thread pool) over the served tokenizer's vocabulary."""

    def __init__(
        self,
        tokenizer: Any,
        vocab_size: int,
        eos_token_ids: Iterable[int] | None = None,
        *,
        json_options: dict[str, Any] | None = None,
        warm_up: bool = True,
    ) -> None:
        super().__init__()
        eos = sorted(int(t) for t in eos_token_ids) if eos_token_ids else None
        self.vocab = Vocabulary.from_hf(tokenizer, vocab_size, eos_token_ids=eos)
        self.compiler = Compiler(self.vocab)
        self.json_options = dict(json_options or {})
        if warm_up:
            compiled = self.compiler.json_schema(WARMUP_SCHEMA)
            compiled.matcher().fill_bitmask(allocate_bitmask(1, self.vocab.size))
            self.compiler.clear()

    def _dispatch(self, key_type: str, key_string: str) -> Any:
        try:
            request = read_key(key_type, key_string)
            if request.kind == "json":
                compiled = self.compiler.json_schema(request.spec, **self.json_options)
            elif request.kind == "regex":
                compiled = self.compiler.regex(request.spec)
            else:
                compiled = self.compiler.compile(request.spec, **self.json_options)
        except CorralError as e:
            logger.info("corral: %s constraint refused: %s", key_type, e)
            return _invalid(f"{type(e).__name__}: {e}")
        return CorralGrammar(compiled, key_type)

    def dispatch_json(self, key_string: str) -> Any:
        return self._dispatch("json", key_string)

    def dispatch_regex(self, key_string: str) -> Any:
        return self._dispatch("regex", key_string)

    def dispatch_ebnf(self, key_string: str) -> Any:
        return self._dispatch("ebnf", key_string)

    def dispatch_structural_tag(self, key_string: str) -> Any:
        return self._dispatch("structural_tag", key_string)

    def reset(self) -> None:
        """SGLang's cache flush: the compiled grammars go too."""
        super().reset()
        self.compiler.clear()
