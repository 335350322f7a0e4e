"""A logits processor for Hugging Face ``transformers`` ``model.generate``.

::

    from transformers import LogitsProcessorList
    from corral.integrations.transformers import GrammarLogitsProcessor

    vocab = corral.Vocabulary.from_hf(tokenizer, vocab_size=model.config.vocab_size)
    proc = GrammarLogitsProcessor(corral.compile(schema, vocab), tokenizer=tokenizer, model=model)
    out = model.generate(**inputs, logits_processor=LogitsProcessorList([proc]))

Contract (``transformers.LogitsProcessor``): ``proc(input_ids, scores) -> scores`` with
``input_ids: int64 [rows, length]`` and ``scores: float [rows, V]``. The returned tensor
is new (``scores`` is not modified); disallowed tokens are ``-inf``. ``V`` may exceed the
vocabulary (a padded output layer): extra ids are never allowed.

Which model. Because wider scores are accepted, a model of another tokenizer would not be
noticed from the scores alone. Pass ``tokenizer=`` and ``model=`` where they are at hand:
the tokenizer must be the one the grammar was compiled for (same vocabulary hash), the
model's logits at least as wide as the vocabulary, its EOS ids tokens of it, and the
scores of every call as wide as the model's logits; anything else raises
:class:`~corral.errors.TokenizerError`.

How rows are followed. The first call fixes the prompt length (with left padding, every
row's prompt ends at the same column). At each call, row ``r``'s generated tokens are
``input_ids[r, prompt_length:]``; the processor keeps a matcher for every generated prefix
it has seen and extends the longest known one. So the rows may be reordered, duplicated
or cut back between calls, which is what beam search (beams reordered) and assisted or
speculative decoding (rejected draft tokens dropped) do. A row whose tokens left the
grammar (only possible for beams kept at ``-inf`` score, or draft tokens about to be
rejected) may only end: its mask allows EOS alone.

Grammars per row: pass one compiled grammar for every row, or a list with one per batch
entry; with ``num_beams`` or ``num_return_sequences`` each entry's rows follow its grammar
(``generate`` expands the batch entry-major).

Sampling. transformers applies this processor before its own temperature, top-k and top-p
warpers, so the order is the one corral documents (mask, temperature, top-k, top-p).

Use a new processor for every ``generate`` call (or call :meth:`reset`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor

from ..automata import CompiledGrammar, Matcher, allocate_bitmask
from ..errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    MatcherStateError,
    ShapeError,
    TokenRejectedError,
    VocabularyMismatchError,
)
from ..sampler.healing import HealingView
from ..sampler.masking import masked_logits
from .vocabularies import check_model_fits, check_tokenizer

_KEEP_BACK = 64  # prefixes this many tokens shorter than the shortest row are dropped


class GrammarLogitsProcessor(LogitsProcessor):
    """Masks each row's scores to the tokens its grammar allows next.

    Args:
        grammars: a :class:`~corral.CompiledGrammar` for every row, or a sequence with one
            per batch entry (all compiled for the same vocabulary).
        tokenizer: the model's tokenizer; when given, it must be the one the grammars were
            compiled for (:func:`~corral.integrations.vocabularies.check_tokenizer`: the
            vocabulary built from it has the grammars' vocabulary hash). Checked once per
            tokenizer and vocabulary (the first check builds the tokenizer's vocabulary).
        model: the model whose scores this processor will see, or several (a model and
            its assistant in assisted decoding, whose output layers may be padded
            differently). When given, each model's logits width (output embedding rows,
            else ``config.vocab_size``) must be at least the vocabulary size and its EOS
            ids tokens of the vocabulary, and the scores of every call must be as wide as
            one of the models' logits.
        healed: token healing (see :mod:`corral.sampler.healing`): for each grammar, the
            bytes its rows' first tokens must spell again (``b""``: none), because they
            were cut from the end of the prompt (:func:`~corral.sampler.healing.heal_prompt`).
            The generated tokens then hold those bytes before the grammar's text.

    Raises:
        TokenizerError: the tokenizer or a model does not fit the grammars' vocabulary
            (:class:`~corral.errors.VocabularyMismatchError`: grammars compiled for
            different vocabularies).
        ArgumentTypeError: ``grammars`` is not a compiled grammar or a non-empty list of them.
        InvalidArgumentError: ``healed`` has not one entry per grammar.

    A call raises :class:`~corral.errors.ShapeError` for ``input_ids`` and ``scores`` whose
    rows differ or cannot be split among the grammars, and
    :class:`~corral.errors.VocabularyMismatchError` for scores narrower than the vocabulary
    or of another width than the models'.
    """

    def __init__(
        self,
        grammars: CompiledGrammar | Sequence[CompiledGrammar],
        *,
        tokenizer: Any = None,
        model: Any = None,
        healed: Sequence[bytes] | None = None,
    ) -> None:
        items = [grammars] if isinstance(grammars, CompiledGrammar) else list(grammars)
        if not items or not all(isinstance(g, CompiledGrammar) for g in items):
            got = type(grammars).__name__ if not items else f"a list holding {_types(items)}"
            raise ArgumentTypeError(
                f"grammars must be a CompiledGrammar or a non-empty list of them, got {got}"
            )
        other = next((i for i, g in enumerate(items) if g.vocab.hash != items[0].vocab.hash), None)
        if other is not None:
            raise VocabularyMismatchError(
                "the grammars must be compiled for one vocabulary, the first one's "
                f"({items[0].vocab_size} tokens, hash {items[0].vocab.hash[:12]}), got "
                f"grammar {other} compiled for another ({items[other].vocab_size} tokens, "
                f"hash {items[other].vocab.hash[:12]})"
            )
        self.grammars = items
        self.vocab_size = items[0].vocab_size
        self._eos = np.array(items[0].eos_ids, np.int64)
        vocab = items[0].vocab
        if tokenizer is not None:
            check_tokenizer(tokenizer, vocab)
        models = (
            [] if model is None else list(model) if isinstance(model, (list, tuple)) else [model]
        )
        self._widths = {check_model_fits(m, vocab) for m in models}
        if healed is not None and len(healed) != len(items):
            raise InvalidArgumentError(
                f"healed must have one entry per grammar ({len(items)}), got {len(healed)}"
            )
        self._healed = [bytes(h) for h in healed] if healed is not None else [b""] * len(items)
        self.reset()

    def reset(self) -> None:
        """Forget every row: the next call starts a new generation."""
        self.prompt_length: int | None = None
        self._states: list[dict[tuple[int, ...], Matcher | None]] = [
            {} if h else {(): g.matcher()} for g, h in zip(self.grammars, self._healed, strict=True)
        ]
        # healing views (masks while the healed bytes are spelled again), one per grammar
        self._views: list[HealingView | None] = [
            HealingView(g.matcher(), h) if h else None
            for g, h in zip(self.grammars, self._healed, strict=True)
        ]
        self._bitmask: np.ndarray | None = None

    def matcher_for(self, row_group: int, generated: Sequence[int]) -> Matcher | HealingView | None:
        """The matcher after ``generated`` tokens of grammar ``row_group`` (``None`` if they
        left the grammar; while they spell healed bytes again, the group's
        :class:`~corral.sampler.healing.HealingView`, which has the matcher methods the
        processors use). Matchers returned are shared: do not advance them."""
        states = self._states[row_group]
        key = tuple(generated)
        if key in states:
            return states[key]
        n = max(len(key) - 1, 0)
        while n > 0 and key[:n] not in states:
            n -= 1
        view = self._views[row_group]
        if n == 0 and view is not None:  # no prefix past the healed bytes known yet
            healed = self._heal(row_group, view, key)
            if not isinstance(healed, tuple):
                return healed  # still spelling the healed bytes (or off them: None)
            if len(healed) == len(key):
                return states[key]
            n = len(healed)
        m = states[key[:n]]
        if m is not None:
            m = m.fork()
            for i in range(n, len(key)):
                try:
                    m.consume(key[i])
                except TokenRejectedError:
                    for j in range(i + 1, len(key) + 1):
                        states[key[:j]] = None
                    return None
                states[key[: i + 1]] = m if i + 1 == len(key) else m.fork()
        else:
            states[key] = None
        return states[key]

    def _heal(
        self, row_group: int, view: HealingView, key: tuple[int, ...]
    ) -> HealingView | Matcher | tuple[int, ...] | None:
        """Replay ``key`` on the group's healing view. While it spells the healed bytes:
        the view (its mask is the next one; it is replayed again on the next call), or
        ``None`` for a token off them. Once they are spelled: the prefix that spelled
        them, whose matcher (fed the bytes past them) is now in the group's states."""
        view.rollback(view.num_tokens)
        for i, t in enumerate(key):
            if not view.try_consume(t):
                return None
            if view.done:
                m = self.grammars[row_group].matcher()
                if not m.consume_bytes(view.rest):
                    return None
                self._states[row_group][key[: i + 1]] = m
                return key[: i + 1]
        return view

    def _rows(self, input_ids: torch.Tensor, scores: torch.Tensor) -> tuple[int, list[list[int]]]:
        """Check shapes, fix the prompt length on the first call; ``(rows per grammar,
        generated tokens of each row)``."""
        if input_ids.dim() != 2 or scores.dim() != 2 or input_ids.shape[0] != scores.shape[0]:
            raise ShapeError(
                "expected input_ids [rows, length] and scores [rows, V] with the same rows, got "
                f"{list(input_ids.shape)} and {list(scores.shape)}"
            )
        rows, length = input_ids.shape
        if scores.shape[1] < self.vocab_size:
            raise VocabularyMismatchError(
                f"the scores must have at least {self.vocab_size} columns (the vocabulary the "
                f"grammar was compiled for), got {scores.shape[1]}"
            )
        if self._widths and scores.shape[1] not in self._widths:
            raise VocabularyMismatchError(
                f"the scores have {scores.shape[1]} columns but the logits of the model(s) this "
                f"processor was made for are {sorted(self._widths)} wide: these scores come "
                "from another model"
            )
        first = self.prompt_length is None
        if self.prompt_length is None:
            self.prompt_length = length
        elif length < self.prompt_length:
            raise MatcherStateError(
                "input_ids is shorter than the prompt of the first call: use a new "
                "GrammarLogitsProcessor (or reset()) for each generate() call"
            )
        groups = len(self.grammars)
        if rows % groups:
            raise ShapeError(
                f"{rows} rows cannot be split evenly among {groups} grammars (one per batch "
                f"entry): expected a multiple of {groups} rows, got {rows}"
            )
        if first:
            self._start(input_ids, rows // groups)
        return rows // groups, input_ids[:, self.prompt_length :].tolist()

    def _start(self, input_ids: torch.Tensor, per_group: int) -> None:
        """Called once, at the first call, with its ``input_ids`` (the prompts end at column
        ``prompt_length``): nothing here; subclasses that start rows from their prompts
        set up their states."""

    def _group(self, row: int, per_group: int) -> int:
        """The state group (index into the matcher states) of ``row``: its batch entry's
        grammar."""
        return row // per_group

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        per_group, generated = self._rows(input_ids, scores)
        rows = len(generated)
        if self._bitmask is None or self._bitmask.shape[0] != rows:
            self._bitmask = allocate_bitmask(rows, self.vocab_size)
        bitmask = self._bitmask
        for r in range(rows):
            m = self.matcher_for(self._group(r, per_group), generated[r])
            if m is None:  # left the grammar: may only end
                words = bitmask.view(np.uint32)
                words[r] = 0
                for e in self._eos.tolist():
                    words[r, e >> 5] |= np.uint32(1 << (e & 31))
            else:
                m.fill_bitmask(bitmask, r)
        self._prune(min((len(g) for g in generated), default=0))
        out: torch.FloatTensor = masked_logits(scores, bitmask, self.vocab_size)  # type: ignore[assignment]
        return out

    def _prune(self, shortest: int) -> None:
        cut = shortest - _KEEP_BACK
        if cut <= 0:
            return
        for states in self._states:
            for key in [k for k in states if 0 < len(k) < cut]:
                del states[key]


class AWRSLogitsProcessor(GrammarLogitsProcessor):
    """Draws each row's next token by adaptive weighted rejection sampling
    (:class:`~corral.sampler.token.AWRSSampler`) instead of masking: only the tokens drawn
    are checked against the grammar, never the whole vocabulary.

    The returned scores are ``-inf`` everywhere except the drawn token (``0``), so
    transformers then takes that token whether it samples or not. The token follows the
    model's distribution at ``temperature`` restricted to the allowed tokens (the same
    distribution as masking and sampling at that temperature); ``temperature=0`` takes the
    best allowed token (greedy). Pass the temperature here and leave transformers'
    ``temperature``/``top_k``/``top_p`` unset; beam search is not meaningful with it (one
    finite score per row). ``checks`` counts the constraint checks so far. ``tokenizer``
    and ``model`` are checked as by :class:`GrammarLogitsProcessor`.
    """

    def __init__(
        self,
        grammars: CompiledGrammar | Sequence[CompiledGrammar],
        *,
        temperature: float = 1.0,
        seed: int | None = None,
        tokenizer: Any = None,
        model: Any = None,
    ) -> None:
        from ..sampler.token import AWRSSampler

        self._sampler = AWRSSampler(temperature)
        super().__init__(grammars, tokenizer=tokenizer, model=model)
        self.temperature = temperature
        self._gen = torch.Generator()
        if seed is not None:
            self._gen.manual_seed(int(seed))

    @property
    def checks(self) -> int:
        """Tokens checked against the grammars so far."""
        return self._sampler.checks

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        per_group, generated = self._rows(input_ids, scores)
        out = torch.full_like(scores, float("-inf"))
        for r in range(len(generated)):
            m = self.matcher_for(self._group(r, per_group), generated[r])
            row = scores[r, : self.vocab_size].float()
            if m is None:  # left the grammar: may only end
                tok = int(self._eos[0]) if len(self._eos) else int(row.argmax())
            else:
                tok = self._sampler.step(row, m, self._gen)
            out[r, tok] = 0.0
        self._prune(min((len(g) for g in generated), default=0))
        return out  # type: ignore[return-value]


def logits_processor(
    grammars: CompiledGrammar | Sequence[CompiledGrammar],
    *,
    tokenizer: Any = None,
    model: Any = None,
) -> Any:
    """A ``LogitsProcessorList`` holding one :class:`GrammarLogitsProcessor` (``tokenizer``
    and ``model`` as there)."""
    from transformers import LogitsProcessorList

    return LogitsProcessorList([GrammarLogitsProcessor(grammars, tokenizer=tokenizer, model=model)])


def _types(items: Sequence[Any]) -> str:
    """The type names of ``items``, each once, in order: ``"str, CompiledGrammar"``."""
    return ", ".join(dict.fromkeys(type(g).__name__ for g in items))
