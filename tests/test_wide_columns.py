"""The chart's ``int32`` rows: its 64-bit values (continuation classes, set hashes) kept
in two columns (``corral/automata/kernels/wide.py``) round-trip, from a kernel and from
Python; and a chart array stops growing, with a named error, where ``int32`` row numbers
end (``corral/automata/chart.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.automata.chart import MAX_ROWS, _grow_rows
from corral.automata.kernels.wide import get64, get64_py, put64
from corral.errors import CompileBudgetError

_EDGES = [0, -1, 1, 2**31 - 1, -(2**31), 2**32 - 1, 2**32, -(2**32), 2**63 - 1, -(2**63)]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.sampled_from(_EDGES), st.integers(-(2**63), 2**63 - 1)))
def test_a_value_round_trips(v: int) -> None:
    a = np.zeros((3, 5), np.int32)
    put64(a, 1, 3, np.int64(v))
    assert get64(a, 1, 3) == v
    assert get64_py(a, 1, 3) == v
    assert a[0].tolist() == [0] * 5 and a[2].tolist() == [0] * 5  # other rows untouched
    assert a[1, :3].tolist() == [0, 0, 0]  # other columns untouched


def test_distinct_values_stay_distinct() -> None:
    """Values that differ only in the high word, or only in the low word's sign bit."""
    vals = [1, 1 + 2**32, 2**31, -(2**31), 2**31 + 2**40]
    a = np.zeros((len(vals), 5), np.int32)
    for r, v in enumerate(vals):
        put64(a, r, 3, np.int64(v))
    assert [get64_py(a, r, 3) for r in range(len(vals))] == vals


def test_rows_grow_by_half_and_keep_their_values() -> None:
    a = np.arange(40, dtype=np.int32).reshape(8, 5)
    b = _grow_rows(a)
    assert b.shape == (12, 5) and b.dtype == np.int32
    assert (b[:8] == a).all() and not b[8:].any()
    assert _grow_rows(np.zeros((1, 5), np.int32)).shape == (2, 5)


def test_rows_stop_where_int32_row_numbers_end() -> None:
    # a view of MAX_ROWS rows over one row of memory: the refusal comes before any copy
    full = np.lib.stride_tricks.as_strided(np.zeros((1, 5), np.int32), (MAX_ROWS, 5), (0, 4))
    with pytest.raises(CompileBudgetError, match="int32 row numbers"):
        _grow_rows(full)
