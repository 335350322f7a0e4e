"""Monitors in Hugging Face ``transformers`` ``model.generate``: a logits processor whose
rows are :class:`~corral.monitors.matcher.MonitoredMatcher` objects.

::

    from transformers import LogitsProcessorList
    from corral.integrations.monitored_processor import MonitoredLogitsProcessor
    from corral.monitors.python import python_members

    proc = MonitoredLogitsProcessor([python_members()], tokenizer=tokenizer, model=model)
    out = model.generate(**inputs, logits_processor=LogitsProcessorList([proc]))

Everything :class:`~corral.integrations.transformers.GrammarLogitsProcessor` documents
holds (the contract, the checks of tokenizer and model, rows followed through beam search
and assisted decoding, one grammar per batch entry), with these differences:

- ``grammars`` may be left out: the text is free (valid UTF-8) outside the monitors'
  regions. With grammars, every mask is the grammar's and the monitors' intersection.
- Each row starts from its prompt: at the first call, the prompt tokens of each row
  (``input_ids[r, :prompt_length]``, leading pad tokens dropped) are decoded with the
  tokenizer and given to the monitors' callbacks as ``MonitorContext.prompt``; a prompt
  that ends where a trigger fires starts with that monitor's region. Rows with the same
  grammar and the same prompt share their states.
- ``state`` is given to the callbacks as ``MonitorContext.state``.
- No token healing (``healed``), as with ``corral.generate``'s monitors.

A callback that fails (raises, times out, returns what is not a constraint, or leaves no
token) raises :class:`~corral.errors.MonitorError` out of ``generate``: the text never
goes on unconstrained where a monitor was asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..automata import CompiledGrammar
from ..errors import ArgumentTypeError, ShapeError
from ..monitors.decoding import check_monitored
from ..monitors.matcher import MonitoredMatcher
from ..monitors.monitor import Monitor
from .transformers import GrammarLogitsProcessor
from .vocabularies import vocabulary_for

__all__ = ["MonitoredLogitsProcessor"]


class MonitoredLogitsProcessor(GrammarLogitsProcessor):
    """Masks each row's scores to what its grammar (if any) and the monitors allow next.

    Args:
        monitors: one or more :class:`~corral.Monitor` (the first wins when triggers fire
            at the same byte).
        grammars: ``None`` (free text), a :class:`~corral.CompiledGrammar` for every row,
            or a sequence with one per batch entry.
        tokenizer: the model's tokenizer (required: prompts are decoded with it; it must be
            the one the grammars were compiled for).
        model: as for :class:`GrammarLogitsProcessor`; without grammars, the vocabulary is
            sized for its logits (else for the tokenizer).
        state: any object, given to the callbacks as ``MonitorContext.state``.

    Raises:
        ArgumentTypeError: ``monitors`` is not a list of :class:`~corral.Monitor`, or no
            tokenizer is given.
        InvalidArgumentError: no monitors, or a trigger the monitors refuse.
        TokenizerError: as for :class:`GrammarLogitsProcessor`.
    """

    def __init__(
        self,
        monitors: Monitor | Sequence[Monitor],
        grammars: CompiledGrammar | Sequence[CompiledGrammar] | None = None,
        *,
        tokenizer: Any,
        model: Any = None,
        state: Any = None,
    ) -> None:
        if tokenizer is None:
            raise ArgumentTypeError(
                "MonitoredLogitsProcessor needs tokenizer= (the prompts are decoded with it)"
            )
        self.monitors = check_monitored(monitors, sampler="mask", heal=None)
        self.state = state
        self.tokenizer = tokenizer
        if grammars is None:
            if model is not None:
                vocab = vocabulary_for(model, tokenizer)
            else:
                from ..automata import Vocabulary

                vocab = Vocabulary.from_hf(tokenizer)
            # the monitors' own grammar outside regions: sizes, EOS ids and vocabulary
            # for the checks; the rows' matchers are made at the first call
            outside = MonitoredMatcher(vocab, self.monitors).compiled
            super().__init__(outside, tokenizer=tokenizer, model=model)
            self._bases: list[CompiledGrammar | None] = [None]
        else:
            super().__init__(grammars, tokenizer=tokenizer, model=model)
            self._bases = list(self.grammars)
        self._vocab = self.grammars[0].vocab
        pad = getattr(tokenizer, "pad_token_id", None)
        self._pad = None if pad is None else int(pad)

    def reset(self) -> None:
        """Forget every row: the next call starts a new generation (and asks the
        monitors again)."""
        super().reset()
        self._groups: list[int] = []

    def _start(self, input_ids: torch.Tensor, per_group: int) -> None:
        """One state group per distinct (batch entry's grammar, prompt), each rooted at a
        :class:`MonitoredMatcher` that has read the prompt text."""
        keys: dict[tuple[int, tuple[int, ...]], int] = {}
        self._states = []
        self._views = []
        self._groups = []
        assert self.prompt_length is not None
        for r, ids in enumerate(input_ids[:, : self.prompt_length].tolist()):
            g = r // per_group
            start = 0
            while self._pad is not None and start < len(ids) and ids[start] == self._pad:
                start += 1
            key = (g, tuple(ids[start:]))
            if key not in keys:
                keys[key] = len(self._states)
                text = self.tokenizer.decode(list(key[1]))
                base = self._bases[g]
                root = MonitoredMatcher(
                    self._vocab,
                    self.monitors,
                    base=None if base is None else base.matcher(),
                    prompt=text,
                    state=self.state,
                )
                self._states.append({(): root})  # type: ignore[dict-item]
                self._views.append(None)
            self._groups.append(keys[key])

    def _group(self, row: int, per_group: int) -> int:
        if row >= len(self._groups):
            raise ShapeError(
                f"row {row} of this call has no prompt: the first call had "
                f"{len(self._groups)} rows (use a new processor, or reset(), per generate())"
            )
        return self._groups[row]
