"""Grammar IR → flat parser and lexer tables for the kernels.

The parser is an Earley recogniser that reads **bytes**: its chart has one set per byte
position, holding

* parser items ``(dotted rule, origin set)`` as in any Earley parser, and
* lexeme items ``(lexer state, origin set)``: a terminal being read, in the global lexer
  state ``g`` (all terminal DFAs laid side by side), whose completion will advance the
  parser items of the origin set that expect that terminal.

A lexeme ends where its DFA accepts and cannot read the next byte (maximal munch, the
semantics of Lark's dynamic Earley lexer; see ``corral/grammar/ir.py``). A terminal may
forbid its lexeme to end before some bytes it cannot read (``Terminal.end_blocked``): such
bytes lead to the *trap* state, one extra lexer state after the dense terminals' states that
reads nothing and never accepts, so the lexeme neither ends there nor lives on (the chart
and the mask walks treat the trap as dead; ``H_TRAP`` is -1 when no terminal needs it).
Ignored terminals
(``%ignore``) may occur between any two lexemes and at both ends; when one completes, the
new set gets the origin set's fresh lexeme items.

Everything the kernels need is packed into one ``int32`` array ``gt`` (header + sections)
and the 2-D lexer transition table ``lex_trans`` (rows: lexer states, columns: byte
classes), so a kernel call passes few arguments.

Lexer states come in two ranges. The states of terminals with a dense automaton (a
:class:`~corral.grammar.regex.dfa.ByteDFA`), then the trap, are the rows of ``lex_trans``.
The states of terminals with a :class:`~corral.grammar.regex.sparse.SparseDFA` (a span
automaton, an entity set: up to millions of states with one or two transitions each)
follow, and their transitions are sparse rows (``Tables.lex_sparse``). Kernels get both
as ``Tables.lex`` and read them through :func:`~corral.automata.kernels.lexer.lex_next`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..grammar.follow import numbered_flat
from ..grammar.ir import Grammar
from ..grammar.regex.dfa import INT16_STATES, ByteDFA, column_classes
from ..grammar.regex.sparse import SparseDFA
from ..jit import kernel
from .follow_bytes import follow_bytes
from .items import items_of

# header slots of `gt`: named in kernels/layout.py (re-exported here for the table builder)
from .kernels.layout import (
    H_BYTE_CLASS,
    H_FINAL,
    H_FIRST_BYTES,
    H_FIRST_START,
    H_FOLLOW_BYTES,
    H_G,
    H_IGNORE_LIST,
    H_ITEM_LHS,
    H_ITEM_SYM,
    H_LEX_ACCEPT,
    H_LEX_IS_START,
    H_LEX_TERM,
    H_N_IGNORE,
    H_N_SPECIAL,
    H_NCLS,
    H_NI,
    H_NN,
    H_NT,
    H_NULLABLE,
    H_PRED_ITEMS,
    H_PRED_START,
    H_SPECIAL_TERM,
    H_START,
    H_TERM_IGNORE,
    H_TERM_START,
    H_TRAP,
    HEADER_LEN,
)
from .lexer_layout import TRAP_MARK, lay_out


@dataclass(frozen=True)
class Tables:
    """Flat tables of one grammar.

    Attributes:
        gt: ``int32`` header + sections (see the ``H_*`` constants).
        lex_trans: ``[D, n_classes]``; next lexer state or ``-1`` (the trap state
            ``gt[H_TRAP]`` where a lexeme may neither read the byte nor end before it),
            for the ``D`` dense states. ``int16`` when every state is dense and there
            are at most 32,767 of them (nearly every grammar: this table is most of a
            compiled schema's memory), else ``int32``.
        lex_sparse: ``None`` (``lex_trans`` is ``int16`` and every state is dense), or
            the sparse rows of states ``D`` to ``G - 1``: ``(row_start [G - D + 1], cls,
            dst)``, ``int32``; state ``D + r`` goes to ``dst[i]`` on byte class
            ``cls[i]`` for ``i`` in ``row_start[r]:row_start[r + 1]`` (classes increasing
            within a row). A dense lexer too large for ``int16`` has no sparse rows
            (``G == D``) but takes this form, so that the kernels are compiled for two
            forms of lexer, not three (see ``kernels/lexer.py``).
        terminal_names / nonterminal_names: index → name.
        term_literal: terminal index → its literal text or ``None``.
        term_start: ``int32 [NT]``: the first global lexer state of each terminal; its
            states are ``term_start[t]`` to ``term_start[t] + term_size[t] - 1``.
        term_size: ``int32 [NT]``: the number of states of each terminal.
    """

    gt: np.ndarray
    lex_trans: np.ndarray
    terminal_names: tuple[str, ...]
    nonterminal_names: tuple[str, ...]
    term_literal: tuple[str | None, ...]
    term_start: np.ndarray
    term_size: np.ndarray
    lex_sparse: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def lex(self) -> Any:
        """The lexer as the kernels take it (see ``kernels/lexer.py``): ``lex_trans``
        (``int16``), or ``(lex_trans, row_start, cls, dst)`` (``int32``)."""
        return self.lex_trans if self.lex_sparse is None else (self.lex_trans, *self.lex_sparse)

    def header(self, slot: int) -> int:
        return int(self.gt[slot])

    def section(self, slot: int, length: int) -> np.ndarray:
        off = int(self.gt[slot])
        return self.gt[off : off + length]

    @property
    def n_dense_states(self) -> int:
        """The lexer states stored as rows of ``lex_trans`` (the first ones)."""
        return int(self.lex_trans.shape[0])

    def term_states(self, t: int) -> range:
        """The global lexer states of terminal ``t``."""
        return range(int(self.term_start[t]), int(self.term_start[t] + self.term_size[t]))

    @property
    def n_terminals(self) -> int:
        return int(self.gt[H_NT])

    @property
    def n_lexer_states(self) -> int:
        return int(self.gt[H_G])

    @property
    def n_items(self) -> int:
        return int(self.gt[H_NI])

    @property
    def n_nonterminals(self) -> int:
        return int(self.gt[H_NN])

    def lex_term(self) -> np.ndarray:
        return self.section(H_LEX_TERM, self.n_lexer_states)

    def lex_accept(self) -> np.ndarray:
        return self.section(H_LEX_ACCEPT, self.n_lexer_states)

    def byte_class(self) -> np.ndarray:
        return self.section(H_BYTE_CLASS, 256)

    def nbytes(self) -> int:
        sparse = sum(a.nbytes for a in self.lex_sparse) if self.lex_sparse else 0
        return int(self.gt.nbytes + self.lex_trans.nbytes + sparse)


def build_tables(grammar: Grammar, special_terms: dict[str, int] | None = None) -> Tables:
    """Lay out ``grammar`` as flat tables. ``special_terms``: terminal name → special token id."""
    special_terms = special_terms or {}
    # the productions, S' -> start first, over symbol numbers
    term_names, nt_names, lhs, lens, rhs = numbered_flat(grammar)
    t_index = {n: i for i, n in enumerate(term_names)}
    NT, NN = len(term_names), len(nt_names)
    item_sym, item_lhs, first_item, pred_start, pred_items, nullable = items_of(
        lhs, lens, rhs, NT, NN
    )
    NI = item_sym.shape[0]

    # lexer: all terminal DFAs side by side, the dense ones first, then the trap
    dfas = [grammar.terminals[n].dfa for n in term_names]
    sizes = np.array([d.n_states for d in dfas], np.int32)
    sparse_idx = [i for i, d in enumerate(dfas) if isinstance(d, SparseDFA)]
    dense_idx = [i for i, d in enumerate(dfas) if not isinstance(d, SparseDFA)]
    starts = np.zeros(NT, np.int32)
    G = 0
    for i in dense_idx:
        starts[i] = G
        G += int(sizes[i])
    trap = -1
    if any(grammar.terminals[n].end_blocked is not None for n in term_names):
        trap = G
        G += 1
    D = G
    for i in sparse_idx:
        starts[i] = G
        G += int(sizes[i])
    lex_trans, byte_class, sparse, starts_read = _lexer_table(
        grammar, term_names, dfas, starts, D, G, trap, special_terms
    )
    if G == D and D <= INT16_STATES:
        lex_trans = lex_trans.astype(np.int16)
    term_ignore = np.zeros(NT, np.int32)
    ignore_list = [t_index[n] for n in grammar.ignore]
    for i in ignore_list:
        term_ignore[i] = 1
    special = np.full(NT, -1, np.int32)
    for name, tok in special_terms.items():
        special[t_index[name]] = tok
    follow_bits = follow_bytes(
        item_sym,
        item_lhs,
        NT,
        nullable.astype(bool),
        np.packbits(starts_read, axis=1, bitorder="little").view("<u8"),
        term_ignore.astype(bool),
        special >= 0,
    )
    # first bytes of the start states (the other states have none listed), in state
    # order; a terminal matched by its special token only has none (never by bytes)
    laid = np.argsort(starts, kind="stable")
    laid = laid[sizes[laid] > 0]  # the terminals with states, in state order
    first_read = starts_read[laid]
    first_read[special[laid] >= 0] = False
    first_bytes = np.nonzero(first_read)[1].astype(np.int32)  # row by row
    sections: list[tuple[int, np.ndarray | int]] = [
        (H_ITEM_SYM, item_sym),
        (H_ITEM_LHS, item_lhs),
        (H_PRED_START, pred_start),
        (H_PRED_ITEMS, pred_items),
        (H_NULLABLE, nullable),
        (H_TERM_START, starts),
        (H_TERM_IGNORE, term_ignore),
        (H_LEX_TERM, G),
        (H_LEX_ACCEPT, G),
        (H_BYTE_CLASS, byte_class),
        (H_IGNORE_LIST, np.array(ignore_list, np.int32)),
        (H_LEX_IS_START, G),
        (H_SPECIAL_TERM, special),
        (H_FOLLOW_BYTES, follow_bits),
        (H_FIRST_START, G + 1),
        (H_FIRST_BYTES, first_bytes),
    ]
    # one array: the sections as long as the lexer (tens of thousands of states for a
    # monitor's names; an int in `sections`) are written where they lie, not built apart
    total = HEADER_LEN + sum(a if isinstance(a, int) else a.shape[0] for _, a in sections)
    gt = np.zeros(total, np.int32)
    views: dict[int, np.ndarray] = {}
    pos = HEADER_LEN
    for slot, arr in sections:
        n = arr if isinstance(arr, int) else arr.shape[0]
        gt[slot] = pos
        if isinstance(arr, int):
            views[slot] = gt[pos : pos + n]
        else:
            gt[pos : pos + n] = arr
        pos += n
    lex_term, lex_accept = views[H_LEX_TERM], views[H_LEX_ACCEPT]
    lex_is_start, first_start = views[H_LEX_IS_START], views[H_FIRST_START]
    # each terminal's states: its number, its accepting states, its start state
    state_of = np.repeat(starts[laid] - np.cumsum(sizes[laid]) + sizes[laid], sizes[laid])
    state_of += np.arange(state_of.shape[0], dtype=state_of.dtype)
    lex_term[state_of] = np.repeat(laid, sizes[laid])
    lex_accept[state_of] = np.concatenate([dfas[i].accept for i in laid.tolist()] or [[]])
    lex_is_start[starts[laid]] = 1
    first_start[starts[laid] + 1] = first_read.sum(axis=1)
    np.cumsum(first_start, out=first_start)
    n_cls = lex_trans.shape[1]
    gt[H_NT], gt[H_NN], gt[H_NI], gt[H_G] = NT, NN, NI, G
    gt[H_FINAL] = first_item[0] + 1
    gt[H_START] = first_item[0]
    gt[H_NCLS] = n_cls
    gt[H_N_IGNORE] = len(ignore_list)
    gt[H_N_SPECIAL] = len(special_terms)
    gt[H_TRAP] = trap
    gt.setflags(write=False)
    lex_trans.setflags(write=False)
    for arr in sparse:
        arr.setflags(write=False)
    return Tables(
        gt,
        lex_trans,
        tuple(term_names),
        tuple(nt_names),
        tuple(grammar.terminals[n].literal for n in term_names),
        starts,
        sizes,
        sparse if lex_trans.dtype == np.int32 else None,
    )


@kernel(nogil=True)
def _copy_sparse_rows(
    src_start: np.ndarray,
    labels: np.ndarray,
    targets: np.ndarray,
    byte_class: np.ndarray,
    offset: int,
    row_start: np.ndarray,
    row: int,
    cls: np.ndarray,
    dst: np.ndarray,
    e: int,
) -> None:
    """Copy a sparse automaton's rows into the lexer's sparse rows: its state ``s``
    becomes row ``row + s`` (``row_start[row + s + 1]`` written, entries from ``e``), its
    bytes classes (``byte_class``) and its targets shifted by ``offset``."""
    for s in range(src_start.shape[0] - 1):
        row_start[row + s + 1] = e + src_start[s + 1]
    for j in range(labels.shape[0]):
        cls[e + j] = byte_class[labels[j]]
        dst[e + j] = targets[j] + offset


def _start_row(d: ByteDFA | SparseDFA) -> np.ndarray:
    """The 256 next states of ``d``'s start state."""
    return d.row(0)


_NO_COLUMNS = np.zeros(256, np.int32)  # every byte to column 0
_NO_COLUMNS.setflags(write=False)
_DEAD_ROW = np.full((1, 1), -1, np.int32)
_DEAD_ROW.setflags(write=False)


def _lexer_table(
    grammar: Grammar,
    term_names: list[str],
    dfas: list[ByteDFA | SparseDFA],
    starts: np.ndarray,
    D: int,
    G: int,
    trap: int,
    special_terms: dict[str, int],
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """``(lex_trans, byte_class, (row_start, cls, dst), starts_read)``: the ``D`` dense
    states' rows (``int32 [D, n_classes]``) by the coarsest byte classes every automaton
    respects, the sparse rows of states ``D`` to ``G - 1`` (``int32``: ``row_start
    [G - D + 1]`` into ``cls``/``dst``, entries by increasing class), and the bytes each
    terminal's start state reads (``bool [terminals, 256]``).

    Two bytes are in one class when every terminal with a :class:`ByteDFA` reads them the
    same, i.e. maps them to the same column of its compact form (whose columns are
    distinct): the classes come from those maps, ``[terminals, 256]``, and each row is
    gathered from its terminal's compact table, never spread over 256 bytes (that layout
    took 18 ms against 4.5-5 ms on the slowest 5% of 600 MaskBench schemas, whose counted
    strings have thousands of states), by one kernel (:func:`.lexer_layout.lay_out`). Each
    byte a :class:`SparseDFA` reads is a class of its own, so its transitions keep one
    entry each, keyed by that class."""
    dense_idx = [i for i, d in enumerate(dfas) if isinstance(d, ByteDFA)]
    sparse_idx = [i for i, d in enumerate(dfas) if isinstance(d, SparseDFA)]
    # Each dense terminal in its compact form: a table ``[n, k]`` of its distinct columns,
    # in its own state numbers (``-1`` dead, ``TRAP_MARK`` the trap), and the column of
    # each byte; the kernel moves each block's states to where the block lies.
    # (first state, terminal or -1 for the trap, table, byte -> column)
    laid: list[tuple[int, int, np.ndarray, np.ndarray]] = []
    for i in dense_idx:
        n = term_names[i]
        d = dfas[i]
        assert isinstance(d, ByteDFA)
        if not d.n_states:
            continue
        o = int(starts[i])
        if n in special_terms:  # matched by its special token only, never by bytes
            laid.append((o, i, np.full((d.n_states, 1), -1, np.int32), _NO_COLUMNS))
            continue
        blocked = grammar.terminals[n].end_blocked
        table, classes = d.stored_columns()  # int16 or int32: laid out as int32 below
        if blocked is not None:
            rows = table[:, classes].astype(np.int32)
            rows[blocked & d.accept[:, None] & (rows < 0)] = TRAP_MARK
            table, classes = column_classes(rows)
        laid.append((o, i, table, classes))
    if trap >= 0:  # the trap reads nothing
        laid.append((trap, -1, _DEAD_ROW, _NO_COLUMNS))
    laid.sort(key=lambda x: x[0])
    # the global classes: a byte some sparse automaton reads is a class of its own
    # (sparse rows keep one entry a byte); the others keep the dense automata's classes
    sparse_used = np.zeros(256, bool)
    for i in sparse_idx:
        d = dfas[i]
        assert isinstance(d, SparseDFA)
        sparse_used[d.labels] = True
    col_of = np.empty((len(laid), 256), np.uint8)
    heights = np.empty(len(laid), np.int64)
    widths = np.empty(len(laid), np.int64)
    for j, (_, _, table, classes) in enumerate(laid):
        col_of[j] = classes
        heights[j], widths[j] = table.shape
    base = np.zeros(len(laid), np.int64)
    np.cumsum((heights * widths)[:-1], out=base[1:])
    flat = (
        np.concatenate([t.ravel() for _, _, t, _ in laid], dtype=np.int32)
        if laid
        else np.zeros(0, np.int32)
    )
    lex_trans, byte_class, block_reads = lay_out(
        flat, base, heights, widths, col_of, sparse_used, trap
    )
    # the first bytes each terminal's start state reads: from its block, or its automaton
    # where the block does not show them (a sparse automaton; a special token's terminal)
    starts_read = np.zeros((len(term_names), 256), bool)
    for j, (_, i, _, _) in enumerate(laid):
        if i >= 0:
            starts_read[i] = block_reads[j]
    for i in sparse_idx + [i for i in dense_idx if term_names[i] in special_terms]:
        if dfas[i].n_states:
            starts_read[i] = _start_row(dfas[i]) >= 0
    # Sparse rows: the automata are placed one after the other from state D. A byte
    # they read is a class of its own, and classes numbered by their first byte keep
    # such bytes in byte order, so each row, sorted by byte, is sorted by class too: the
    # rows are copied in order, their bytes replaced by classes.
    row_start = np.zeros(G - D + 1, np.int32)
    n_entries = sum(
        d.n_transitions
        for n, d in zip(term_names, dfas, strict=True)
        if isinstance(d, SparseDFA) and n not in special_terms
    )
    c_all = np.empty(n_entries, np.int32)
    d_all = np.empty(n_entries, np.int32)
    e = 0
    for i in sparse_idx:
        d = dfas[i]
        assert isinstance(d, SparseDFA)
        row = int(starts[i]) - D
        t_blocked = grammar.terminals[term_names[i]].end_blocked
        if t_blocked is not None:
            raise InvalidArgumentError(
                f"terminal {term_names[i]}: a sparse automaton cannot block ends: expected "
                f"end_blocked=None, got an array of shape {list(t_blocked.shape)}"
            )
        if term_names[i] in special_terms:  # matched by its special token only: no rows
            row_start[row + 1 : row + 1 + d.n_states] = e
        else:
            _copy_sparse_rows(
                d.row_start, d.labels, d.targets, byte_class, int(starts[i]),
                row_start, row, c_all, d_all, e,
            )  # fmt: skip
            e += d.n_transitions
    return lex_trans, byte_class, (row_start, c_all, d_all), starts_read
