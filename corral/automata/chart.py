"""Chart: the byte-level Earley chart of one sequence, and the one way to run its kernels.

The chart's arrays and their columns are described in ``kernels/earley.py`` and named in
``kernels/layout.py``. Every chart kernel takes ``(gt, lex, P, L, S, stamp, sorig,
ctx, ...)`` and returns the new number of sets (``> 0``), ``0`` (nothing can continue) or
a capacity error (``ERR_P``, ``ERR_L``, ``ERR_S``); :meth:`Chart.run` grows the array
that filled up and calls again, so callers never see a capacity error.

Sets form a stack: ``n_sets`` is the number of sets of the input so far. Kernels build
new sets above it (they do not change ``n_sets``); the owner of the chart moves
``n_sets`` up to keep them, or down to pop sets (rollback).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import CompileBudgetError, CorralError
from .kernels import earley
from .kernels.layout import ERR_L, ERR_P, ERR_S, L_STATE, S_ACCEPT, S_L, S_P
from .tables import Tables
from .thread_scratch import per_thread

_INITIAL_ROWS = 64  # rows each array of a new chart has at least (1.25 KB per array)
MAX_START_ROWS = 8192  # most item rows a new chart starts with (160 KB per array)
_ident = threading.get_ident


class Chart:
    """The Earley chart of one sequence under one grammar's tables.

    Attributes:
        n_sets: number of sets of the input so far (``>= 1``: set 0 is the start).
        P, L, S, ctx: the chart's kernel arrays (see ``kernels/earley.py``); replaced by
            larger ones when they fill up, so do not hold on to them across :meth:`run`
            calls.
        stamp, sorig: the kernels' dedupe scratch, the calling thread's
            (:func:`chart_scratch`), shared with every chart run on that thread.
    """

    __slots__ = (
        "L",
        "P",
        "S",
        "_need",
        "_tid",
        "ctx",
        "gt",
        "lex",
        "n_sets",
        "rows",
        "sorig",
        "stamp",
    )

    def __init__(self, tables: Tables, rows: list[int] | None = None) -> None:
        """``rows``: ``[parser item rows, lexeme item rows, sets]`` to start with (each at
        least ``_INITIAL_ROWS``), raised here when the chart grows while it holds the
        start set alone (up to ``MAX_START_ROWS``): a grammar's matchers share one such
        list, so that their first masks start where earlier first masks grew to and do
        not grow the chart and run again. A chart that grows later, with the text, does
        not raise them: a new matcher starts small."""
        self.rows = rows if rows is not None else [0, 0, 0]
        self.gt = tables.gt
        self.lex = tables.lex
        self.P, self.L, self.S, self.ctx = earley.new_chart(
            max(_INITIAL_ROWS, self.rows[0]),
            max(_INITIAL_ROWS, self.rows[1]),
            max(_INITIAL_ROWS, self.rows[2]),
        )
        self._need = earley.scratch_sizes(
            tables.n_items, tables.n_lexer_states, tables.n_terminals, tables.n_nonterminals
        )
        self._bind()
        self.n_sets = 0
        if self.run(earley.init_chart) != 1:  # pragma: no cover - normalisation rules it out
            raise CorralError("the grammar accepts nothing")
        self.n_sets = 1

    def _bind(self) -> None:
        """Take the calling thread's scratch arrays (grown to this grammar's needs)."""
        self._tid = _ident()
        self.stamp, self.sorig = chart_scratch().arrays(*self._need)

    def run(self, kernel: Callable[..., Any], *args: Any) -> int:
        """``kernel(gt, lex, P, L, S, stamp, sorig, ctx, *args)``, growing the array
        that filled up and calling again until it fits; returns the kernel's result (a new
        set count, ``0``, or a kernel's own negative code below ``ERR_S``)."""
        if self._tid != _ident():
            self._bind()
        while True:
            st = int(
                kernel(
                    self.gt,
                    self.lex,
                    self.P,
                    self.L,
                    self.S,
                    self.stamp,
                    self.sorig,
                    self.ctx,
                    *args,
                )
            )
            if st >= 0 or st < ERR_S:
                return st
            self._grow(st)

    def _grow(self, code: int) -> None:
        if code == ERR_P:
            self.P = _grow_rows(self.P)
            slot, size = 0, self.P.shape[0]
        elif code == ERR_L:
            self.L = _grow_rows(self.L)
            slot, size = 1, self.L.shape[0]
        elif code == ERR_S:
            self.S = _grow_rows(self.S)
            slot, size = 2, self.S.shape[0]
        else:  # pragma: no cover
            raise CorralError(f"internal error code {code}")
        if self.n_sets <= 1:  # the start set alone: what every first mask needs
            self.rows[slot] = max(self.rows[slot], min(size, MAX_START_ROWS))

    def accepting(self, n_sets: int | None = None) -> bool:
        """Whether the input of the first ``n_sets`` sets (default: :attr:`n_sets`) is a
        complete word of the grammar (before any final check)."""
        top = self.n_sets if n_sets is None else n_sets
        return bool(self.S[top - 1, S_ACCEPT])

    def lexer_states(self, n_sets: int | None = None) -> np.ndarray:
        """``int32 [n]``: the lexer states of the lexeme items of the last of the first
        ``n_sets`` sets (default: :attr:`n_sets`), a view."""
        top = self.n_sets if n_sets is None else n_sets
        return self.L[self.S[top - 1, S_L] : self.S[top, S_L], L_STATE]

    def lexeme_items(self, n_sets: int | None = None) -> int:
        """Number of lexeme items in the last of the first ``n_sets`` sets."""
        top = self.n_sets if n_sets is None else n_sets
        return int(self.S[top, S_L] - self.S[top - 1, S_L])

    def copy(self) -> Chart:
        """An independent chart holding the same sets."""
        new = object.__new__(Chart)
        new.gt, new.lex, new.rows = self.gt, self.lex, self.rows
        top = self.n_sets
        new.P = _copy_rows(self.P, int(self.S[top, S_P]))
        new.L = _copy_rows(self.L, int(self.S[top, S_L]))
        new.S = _copy_rows(self.S, top + 1)
        new.ctx = self.ctx.copy()
        new._need = self._need
        new._bind()
        new.n_sets = top
        return new


MAX_ROWS = int(np.iinfo(np.int32).max)
"""The most rows a chart array may have: rows are numbered in ``int32`` columns (a set's
first parser and lexeme rows, an item's link)."""


def _grow_rows(a: np.ndarray) -> np.ndarray:
    """``a`` with half as many rows again (zeros), up to :data:`MAX_ROWS`; past that,
    :class:`~corral.errors.CompileBudgetError`. Half, not double: a chart grows with
    its text, and doubling left a third of the rows of a live matcher unused on average
    (35 KB of chart for 22 KB of items at half a MaskBench document; 29 KB growing by
    half)."""
    if a.shape[0] >= MAX_ROWS:
        raise CompileBudgetError(
            f"the parse chart needs more than {MAX_ROWS} rows of one kind (parser items, "
            "lexeme items or sets), the most its int32 row numbers can address: the input "
            "is too long or the grammar too ambiguous for it"
        )
    rows = min(MAX_ROWS, max(a.shape[0] + 1, a.shape[0] * 3 // 2))
    new = np.zeros((rows, *a.shape[1:]), a.dtype)
    new[: a.shape[0]] = a
    return new


def _copy_rows(a: np.ndarray, used: int) -> np.ndarray:
    new = np.zeros_like(a)
    new[:used] = a[:used]
    return new


def chart_scratch() -> ChartScratch:
    """The calling thread's chart scratch (shared by every chart run on the thread: a
    kernel call runs to its end before the next starts)."""
    return per_thread("chart", ChartScratch)


_KEEP_STAMP = 1 << 20  # a thread keeps scratch for grammars of up to this many slots (8 MB)


class ChartScratch:
    """One thread's ``stamp`` (``int64``) and ``sorig`` (``int32``) arrays for the chart
    kernels, as long as the largest grammar run on the thread needs (up to
    ``_KEEP_STAMP`` stamp slots: a larger grammar's charts get arrays of their own)."""

    def __init__(self) -> None:
        self.stamp = np.full(0, -1, np.int64)
        self.sorig = np.zeros(0, np.int32)

    def arrays(self, n_stamp: int, n_sorig: int) -> tuple[np.ndarray, np.ndarray]:
        """``(stamp, sorig)`` of at least ``n_stamp`` and ``n_sorig`` slots. Larger ones
        replace the thread's when needed; charts that hold the old ones keep them (their
        stamps and serials are their own, so either array stays correct). Past
        ``_KEEP_STAMP`` slots (a million entity names: 1.7 million lexer states), fresh
        arrays that go with the chart, so that a thread does not keep tens of MB."""
        if n_stamp > _KEEP_STAMP:
            return np.full(n_stamp, -1, np.int64), np.zeros(n_sorig, np.int32)
        if self.stamp.shape[0] < n_stamp:
            self.stamp = np.full(max(n_stamp, self.stamp.shape[0] * 3 // 2), -1, np.int64)
        if self.sorig.shape[0] < n_sorig:
            self.sorig = np.zeros(max(n_sorig, self.sorig.shape[0] * 3 // 2), np.int32)
        return self.stamp, self.sorig
