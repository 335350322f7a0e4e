"""Constraint state of a batch whose rows come, go and move (vLLM's persistent batch).

A :class:`RowTable` keeps, for every constrained row, the request's compiled grammar, a
:class:`~corral.Matcher` and how many of the request's output tokens it has consumed.
Rows without a constraint are not in the table and their logits are never touched.

The output token list of a row is the engine's own list (vLLM passes a reference that
grows as tokens are sampled). :meth:`RowTable.apply` first catches each matcher up with
its list, then masks. So tokens appended between calls, a request re-added after
preemption with the tokens it already has, and placeholders (``-1``, tokens of an
in-flight step under asynchronous scheduling, filled in before sampling) are all the
same case.

Fail closed: a row whose grammar could not be compiled, whose output holds a token its
grammar does not allow (a sampler that ignored the mask, a speculative path), or whose
monitor's callback failed (:class:`~corral.MonitorError`: it raised, ran past its
timeout or allowed nothing), is *failed*: its mask allows only the request's end
tokens, so the request ends at its next step, and ``on_error`` (a log) names the request
and the reason. A failed row never continues unconstrained.

End tokens. A request ends on its own stop tokens (``end_ids``: the EOS id and the stop
token ids of its sampling parameters). Each row's mask allows them exactly when the
matcher accepts, and the vocabulary's other EOS ids (which would not end this request)
never.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import CorralError

PLACEHOLDER = -1
"""A token id vLLM writes for a token sampled in a step whose result has not reached
the host yet (asynchronous scheduling)."""


@dataclass
class Row:
    """One constrained request in the batch.

    Attributes:
        label: how logs name the request.
        grammar: a future of the compiled grammar (compiled in the background).
        output: the request's output token ids (the engine's list, read only).
        end_ids: the token ids that end this request.
        matcher: the matcher after ``fed`` tokens of ``output`` (``None`` until the
            grammar is ready, and when failed).
        error: why the row is failed (``None`` while it is constrained).
    """

    label: str
    grammar: Future[Any]
    output: Sequence[int]
    end_ids: frozenset[int]
    matcher: Any = None
    fed: int = 0
    error: str | None = None
    _logged: bool = field(default=False, repr=False)

    def catch_up(self) -> None:
        """Resolve the grammar (waiting for it) and feed the new output tokens.

        Marks the row failed (``error``) on a compile error or a rejected token; never
        raises for either.
        """
        if self.error is not None:
            return
        if self.matcher is None:
            try:
                self.matcher = self.grammar.result().matcher()
            except Exception as e:  # any failure fails the row, not the engine
                self.error = f"its constraint could not be compiled: {type(e).__name__}: {e}"
                return
        out = self.output
        n = len(out)
        try:
            while self.fed < n:
                token = int(out[self.fed])
                if token == PLACEHOLDER:
                    return
                if not self.matcher.try_consume(token):
                    self.error = (
                        f"output token {token} (position {self.fed}) is outside its grammar "
                        "(a sampler or speculative step ignored the mask)"
                    )
                    self.matcher = None
                    return
                self.fed += 1
            settle = getattr(self.matcher, "settle", None)
            if settle is not None:
                settle()  # a monitor's callback, asked here: its failure is this row's
        except CorralError as e:  # a monitor's callback failed (MonitorError)
            self.error = str(e)
            self.matcher = None

    @property
    def pending(self) -> bool:
        """The output still has a placeholder this row cannot read yet."""
        return self.error is None and self.fed < len(self.output)


class RowTable:
    """Constrained rows by batch index, and the masking of their logits.

    Args:
        vocab_size: the compiled grammars' vocabulary size (logits may be wider).
        eos_ids: the vocabulary's EOS ids (allowed by the grammars at acceptance).
        fallback_end_ids: end tokens for a failed row whose request has none.
        on_error: called once per failed row with ``(label, reason)``.
        num_threads: threads for filling masks (``None``: up to the CPU count).
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        eos_ids: Iterable[int] = (),
        fallback_end_ids: Iterable[int] = (),
        on_error: Callable[[str, str], None] | None = None,
        num_threads: int | None = None,
    ) -> None:
        self.vocab_size = int(vocab_size)
        self.rows: dict[int, Row] = {}
        self._eos = frozenset(int(t) for t in eos_ids)
        self._fallback = frozenset(int(t) for t in fallback_end_ids)
        self._on_error = on_error
        self._threads = num_threads
        self._bitmask: np.ndarray | None = None

    # -- batch bookkeeping (vLLM's order: removed, added, moved) -------------------------
    def remove(self, index: int) -> None:
        self.rows.pop(index, None)

    def add(self, index: int, row: Row | None) -> None:
        """Put ``row`` at ``index`` (``None``: an unconstrained request takes the index)."""
        if row is None:
            self.rows.pop(index, None)
        else:
            self.rows[index] = row

    def move(self, a: int, b: int, *, swap: bool) -> None:
        """The request at ``a`` moves to ``b``; with ``swap`` the one at ``b`` moves to
        ``a``, else ``b``'s request is gone (replaced)."""
        ra, rb = self.rows.pop(a, None), self.rows.pop(b, None)
        if ra is not None:
            self.rows[b] = ra
        if swap and rb is not None:
            self.rows[a] = rb

    # -- masking -------------------------------------------------------------------------
    def apply(self, logits: Any) -> Any:
        """Mask the constrained rows of ``logits`` (``float [batch, W]``, ``W >=
        vocab_size``) in place and return it; other rows are untouched."""
        if not self.rows:
            return logits
        batch = int(logits.shape[0])
        indices = sorted(i for i in self.rows if i < batch)
        if not indices:
            return logits
        rows = [self.rows[i] for i in indices]
        for row in rows:
            row.catch_up()
            if row.pending:
                row.error = "its output tokens were not known when its next token was due"
            self.report(row)
        live = [r.matcher if r.error is None else None for r in rows]
        self.mask(logits, list(zip(indices, live, [r.end_ids for r in rows], strict=True)))
        return logits

    def report(self, row: Row) -> None:
        """Tell ``on_error`` that ``row`` failed, once (nothing while it is constrained)."""
        if row.error is not None and not row._logged:
            row._logged = True
            if self._on_error is not None:
                self._on_error(row.label, row.error)

    def mask(self, logits: Any, targets: Sequence[tuple[int, Any, frozenset[int]]]) -> None:
        """Mask logits rows in place: ``(logits row, matcher or None, end ids)`` each.

        A matcher's row allows what its grammar allows next, the end ids exactly when it
        accepts, and the vocabulary's other EOS ids never. ``None`` (a failed row, or a
        draft position that can never be reached): only the end ids (the fallback end
        ids where there are none), so the request ends there.
        """
        from ...automata import apply_token_bitmask_inplace, fill_next_token_bitmasks
        from ...automata.bitmask import allocate_bitmask

        k = len(targets)
        if not k:
            return
        if self._bitmask is None or self._bitmask.shape[0] < k:
            self._bitmask = allocate_bitmask(max(k, 8), self.vocab_size)
        bitmask = self._bitmask[:k]
        fill_next_token_bitmasks([m for _, m, _ in targets], bitmask, num_threads=self._threads)
        words = bitmask.view(np.uint32)
        for j, (_, matcher, end_ids) in enumerate(targets):
            if matcher is None:
                words[j] = 0
                self._set(words[j], end_ids or self._fallback, True)
            else:
                self._set(words[j], self._eos, False)
                self._set(words[j], end_ids, matcher.is_accepting())
        apply_token_bitmask_inplace(
            logits, bitmask, self.vocab_size, rows=[i for i, _, _ in targets]
        )

    def _set(self, words: np.ndarray, tokens: Iterable[int], on: bool) -> None:
        for t in tokens:
            if 0 <= t < self.vocab_size:
                bit = np.uint32(1 << (t & 31))
                if on:
                    words[t >> 5] |= bit
                else:
                    words[t >> 5] &= ~bit
