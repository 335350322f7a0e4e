"""The dense part of the lexer table, laid out by one Numba kernel.

:func:`~corral.automata.tables.build_tables` places the terminals' dense automata side by
side (each a *block* of rows, in its compact form: a table of distinct columns and the
column each byte reads, see :meth:`~corral.grammar.regex.dfa.ByteDFA.columns`) and reads
them all through one set of byte classes: the coarsest partition of the 256 bytes that
every block respects, plus one class of its own for each byte that a sparse automaton
reads. :func:`lay_out` computes those classes, the rows of every block over them with
each block's state numbers moved to where the block lies, and the first bytes of each
block's start state, in one pass over the blocks' arrays (a dozen NumPy calls each on
small arrays took most of the table's time on a typical JSON Schema).
"""

from __future__ import annotations

import numpy as np

from ..grammar.regex.partition import column_classes_of
from ..jit import kernel

__all__ = ["TRAP_MARK", "lay_out"]

TRAP_MARK = -2  # in a block's table: the trap (the lexeme may not end before this byte)


@kernel(nogil=True)
def lay_out(
    flat: np.ndarray,
    base: np.ndarray,
    heights: np.ndarray,
    widths: np.ndarray,
    col_of: np.ndarray,
    sparse_used: np.ndarray,
    trap: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lex_trans int32 [D, n_classes], byte_class int32 [256], start_reads bool [m, 256])``.

    The ``m`` blocks, in state order: block ``j``'s table is
    ``flat[base[j] : base[j] + heights[j] * widths[j]]`` (``int32``, row-major
    ``[heights[j], widths[j]]``; ``-1`` dead, :data:`TRAP_MARK` the trap, otherwise the
    block's own state numbers) and ``col_of[j]`` (``[256]``) the column each byte reads in
    it. ``D`` is the sum of the heights; block ``j`` takes rows ``row0[j] ..`` with
    ``row0`` the heights' prefix sums. ``sparse_used`` (``bool [256]``): the bytes some
    sparse automaton reads. ``trap``: the trap's row (``-1``: none).

    Two bytes not in ``sparse_used`` share a class exactly when every block reads them at
    the same column; each byte in ``sparse_used`` is a class of its own; classes are
    numbered by their first byte (:func:`~corral.grammar.regex.partition.column_classes_of`
    groups the columns). ``lex_trans[row0[j] + s, c]`` is block ``j``'s entry for
    state ``s`` at the column of class ``c``'s first byte, plus ``row0[j]`` where it is a
    state, ``trap`` where it is :data:`TRAP_MARK`, ``-1`` where dead.
    ``start_reads[j, b]``: whether block ``j``'s state 0 reads byte ``b``.
    """
    m = col_of.shape[0]
    # classes: the distinct columns of col_of, with one more row that sets each byte in
    # sparse_used apart (its own number; 0 for the others), in order of first byte
    keyed = np.zeros((m + 1, 256), np.int32)
    for j in range(m):
        for b in range(256):
            keyed[j, b] = col_of[j, b]
    for b in range(256):
        if sparse_used[b]:
            keyed[m, b] = b + 1
    column, byte_class = column_classes_of(keyed)  # column[j, c]: block j's, class c's
    n_cls = column.shape[1]
    D = 0
    for j in range(m):
        D += heights[j]
    lex_trans = np.empty((D, n_cls), np.int32)
    start_reads = np.zeros((m, 256), np.bool_)
    row = 0
    for j in range(m):
        w = widths[j]
        off = base[j]
        for s in range(heights[j]):
            at = off + s * w
            for c in range(n_cls):
                v = flat[at + column[j, c]]
                if v >= 0:
                    v += row
                elif v == TRAP_MARK:
                    v = trap
                lex_trans[row + s, c] = v
        if heights[j] > 0:
            for b in range(256):
                start_reads[j, b] = flat[off + col_of[j, b]] >= 0
        row += heights[j]
    return lex_trans, byte_class, start_reads
