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

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import CorralError
from .kernels import earley
from .kernels.layout import ERR_L, ERR_P, ERR_S, L_STATE, S_ACCEPT, S_L, S_P
from .tables import Tables

_INITIAL_ROWS = 512
MAX_START_ROWS = 8192  # most item rows a new chart starts with (256 KB per array)


class Chart:
    """The Earley chart of one sequence under one grammar's tables.

    Attributes:
        n_sets: number of sets of the input so far (``>= 1``: set 0 is the start).
        P, L, S, stamp, sorig, ctx: the kernel arrays (see ``kernels/earley.py``);
            replaced by larger ones when they fill up, so do not hold on to them across
            :meth:`run` calls.
    """

    __slots__ = ("L", "P", "S", "ctx", "gt", "lex", "n_sets", "rows", "sorig", "stamp")

    def __init__(self, tables: Tables, rows: list[int] | None = None) -> None:
        """``rows``: ``[parser item rows, lexeme item rows]`` to start with (at least
        ``_INITIAL_ROWS``), raised here when the chart grows (up to ``MAX_START_ROWS``):
        a grammar's matchers share one such list, so that they start where earlier ones
        grew to and their first masks do not grow the chart and run again."""
        self.rows = rows if rows is not None else [0, 0]
        self.gt = tables.gt
        self.lex = tables.lex
        self.P, self.L, self.S, self.stamp, self.sorig, self.ctx = earley.new_chart(
            tables.n_items,
            tables.n_lexer_states,
            tables.n_terminals,
            tables.n_nonterminals,
            max(_INITIAL_ROWS, self.rows[0]),
            max(_INITIAL_ROWS, self.rows[1]),
            _INITIAL_ROWS,
        )
        self.n_sets = 0
        if self.run(earley.init_chart) != 1:  # pragma: no cover - normalisation rules it out
            raise CorralError("the grammar accepts nothing")
        self.n_sets = 1

    def run(self, kernel: Callable[..., Any], *args: Any) -> int:
        """``kernel(gt, lex, P, L, S, stamp, sorig, ctx, *args)``, growing the array
        that filled up and calling again until it fits; returns the kernel's result (a new
        set count, ``0``, or a kernel's own negative code below ``ERR_S``)."""
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
            self.rows[0] = max(self.rows[0], min(self.P.shape[0], MAX_START_ROWS))
        elif code == ERR_L:
            self.L = _grow_rows(self.L)
            self.rows[1] = max(self.rows[1], min(self.L.shape[0], MAX_START_ROWS))
        elif code == ERR_S:
            self.S = _grow_rows(self.S)
        else:  # pragma: no cover
            raise CorralError(f"internal error code {code}")

    def accepting(self, n_sets: int | None = None) -> bool:
        """Whether the input of the first ``n_sets`` sets (default: :attr:`n_sets`) is a
        complete word of the grammar (before any final check)."""
        top = self.n_sets if n_sets is None else n_sets
        return bool(self.S[top - 1, S_ACCEPT])

    def lexer_states(self, n_sets: int | None = None) -> np.ndarray:
        """``int64 [n]``: the lexer states of the lexeme items of the last of the first
        ``n_sets`` sets (default: :attr:`n_sets`), a view."""
        top = self.n_sets if n_sets is None else n_sets
        return self.L[self.S[top - 1, S_L] : self.S[top, S_L], L_STATE]

    def lexeme_items(self, n_sets: int | None = None) -> int:
        """Number of lexeme items in the last of the first ``n_sets`` sets."""
        top = self.n_sets if n_sets is None else n_sets
        return int(self.S[top, S_L] - self.S[top - 1, S_L])

    def copy(self) -> Chart:
        """An independent chart holding the same sets (scratch arrays fresh)."""
        new = object.__new__(Chart)
        new.gt, new.lex, new.rows = self.gt, self.lex, self.rows
        top = self.n_sets
        new.P = _copy_rows(self.P, int(self.S[top, S_P]))
        new.L = _copy_rows(self.L, int(self.S[top, S_L]))
        new.S = _copy_rows(self.S, top + 1)
        new.stamp = np.full_like(self.stamp, -1)
        new.sorig = np.zeros_like(self.sorig)
        new.ctx = self.ctx.copy()
        new.n_sets = top
        return new


def _grow_rows(a: np.ndarray) -> np.ndarray:
    new = np.zeros((a.shape[0] * 2, *a.shape[1:]), a.dtype)
    new[: a.shape[0]] = a
    return new


def _copy_rows(a: np.ndarray, used: int) -> np.ndarray:
    new = np.zeros_like(a)
    new[:used] = a[:used]
    return new
