"""The chart's 64-bit values (continuation classes, set hashes) kept in two ``int32``
columns (``corral/automata/kernels/wide.py``): every ``int64`` value round-trips, from a
kernel and from Python."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.automata.kernels.wide import get64, get64_py, put64

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
