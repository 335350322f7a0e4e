"""``apply_token_bitmask_inplace(..., rows=)``: the rows named are masked exactly as
``masked_logits`` masks them (ids beyond the vocabulary included), the others are
untouched, on the Numba path (CPU float32) and the torch path (other dtypes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from corral.automata.bitmask import apply_token_bitmask_inplace, bitmask_words  # noqa: E402
from corral.errors import TokenizerError  # noqa: E402
from corral.sampler.masking import masked_logits  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(
    vocab_size=st.integers(1, 200),
    pad=st.integers(0, 40),
    batch=st.integers(1, 6),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
    data=st.data(),
)
def test_rows_masked_like_masked_logits(vocab_size, pad, batch, dtype, data) -> None:
    rows = data.draw(st.lists(st.integers(0, batch - 1), unique=True, max_size=batch))
    words = bitmask_words(vocab_size)
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    bitmask = rng.integers(-(2**31), 2**31, size=(max(len(rows), 1), words), dtype=np.int64)
    bitmask = bitmask.astype(np.int32)
    bitmask[rng.random(bitmask.shape) < 0.2] = -1  # whole words allowed
    logits = torch.randn(batch, vocab_size + pad, generator=torch.Generator().manual_seed(seed))
    logits = logits.to(dtype)
    expected = logits.clone()
    if rows:
        expected[rows] = masked_logits(expected[rows], bitmask[: len(rows)], vocab_size).to(dtype)
    got = logits.clone()
    apply_token_bitmask_inplace(got, bitmask[: max(len(rows), 1)], vocab_size, rows=rows)
    assert torch.equal(got, expected)


def test_narrow_logits_are_refused() -> None:
    with pytest.raises(TokenizerError, match="columns"):
        apply_token_bitmask_inplace(torch.zeros(1, 10), np.zeros((1, 1), np.int32), 20, rows=[0])
