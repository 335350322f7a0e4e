"""What corral's kernels do before their first call finds machine code (``corral/jit.py``).

- A plain NumPy array is typed without Numba's masked-array test, which imports
  ``numpy.ma`` (``_typeof_arg``); the type must be the one Numba itself gives, and
  anything else must get Numba's own answer, errors included.
- Numba's extensions are not loaded for a kernel (``_no_extensions``), and are still
  loaded before any other function's first compile.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.processes import run_json

from corral.jit import _no_extensions, _typeof_arg, kernel


@kernel()
def _total(a):  # type: ignore[no-untyped-def]
    s = 0
    for x in a.ravel():
        s += x
    return s


def _numba_says(val: Any) -> Any:
    """Numba's own ``typeof_pyval`` for ``val``, or the exception it raises."""
    try:
        return type(_total).typeof_pyval(_total, val)
    except Exception as e:  # the exception is the answer compared
        return type(e)


def _ours(val: Any) -> Any:
    try:
        return _typeof_arg(_total, val)
    except Exception as e:
        return type(e)


_DTYPES = [
    np.bool_,
    np.int8,
    np.uint8,
    np.int16,
    np.uint16,
    np.int32,
    np.uint32,
    np.int64,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
    "datetime64[s]",
    "timedelta64[ms]",
    [("a", np.int32), ("b", np.float64)],
    object,
    "U3",
    "S4",
    ">i4",
]


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_every_dtype_is_typed_as_numba_types_it(dtype: Any) -> None:
    a = np.zeros((3, 4), dtype=dtype)
    for val in (a, a.T, a[:, ::2], a[0], a[0, 0:0], np.zeros((), dtype=dtype)):
        assert _ours(val) == _numba_says(val)
        ro = val.copy()
        ro.setflags(write=False)
        assert _ours(ro) == _numba_says(ro)


@given(
    shape=st.lists(st.integers(0, 4), min_size=0, max_size=4),
    steps=st.lists(st.sampled_from([1, 2, -1, 3]), min_size=4, max_size=4),
    fortran=st.booleans(),
    writeable=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_layouts_and_flags_are_typed_as_numba_types_them(
    shape: list[int], steps: list[int], fortran: bool, writeable: bool
) -> None:
    a = np.zeros(shape, dtype=np.int32, order="F" if fortran else "C")
    val = a[tuple(slice(None, None, s) for s in steps[: a.ndim])]
    val.setflags(write=writeable and val.flags.writeable)
    assert _ours(val) == _numba_says(val)


def test_anything_else_gets_numbas_answer() -> None:
    import numpy.ma

    class Sub(np.ndarray):
        pass

    masked = numpy.ma.masked_array(np.arange(3), mask=[0, 1, 0])
    for val in (masked, np.arange(4).view(Sub), 3, 2.5, (np.arange(2), 1), "text"):
        assert _ours(val) == _numba_says(val)
    with pytest.raises(Exception, match="MaskedArray"):
        _total(masked)


def test_a_kernel_call_leaves_numpy_ma_and_numbas_extensions_alone() -> None:
    script = (
        "import json, sys\n"
        "import numpy as np\n"
        "from numba import njit\n"
        "from numba.core import entrypoints\n"
        "from corral.automata.kernels.apply_mask import mask_rows\n"
        "logits = np.zeros((2, 40), dtype=np.float32)\n"
        "bits = np.array([[5, 0], [-1, 1]], dtype=np.int32)\n"
        "mask_rows(logits, np.array([0, 1], dtype=np.int64), bits, 40)\n"
        "out = {'kept': [np.flatnonzero(r == 0).tolist() for r in logits],\n"
        "       'ma': 'numpy.ma' in sys.modules, 'ext': entrypoints._already_initialized}\n"
        "out['other'] = njit(lambda x: x + 1)(2)\n"
        "out['ext_after'] = entrypoints._already_initialized\n"
        "print(json.dumps(out))\n"
    )
    got = run_json(script, env=dict(os.environ), timeout=600)
    assert got == {
        "kept": [[0, 2], [*range(32), 32]],
        "ma": False,
        "ext": False,  # not for corral's kernel
        "other": 3,
        "ext_after": True,  # Numba's own path, for anyone else's function
    }


def test_the_hooks_are_per_kernel() -> None:
    """Only corral's kernels type their arguments and skip extensions this way; Numba's
    class is untouched."""
    from numba import njit
    from numba.core.dispatcher import Dispatcher

    assert "typeof_pyval" not in vars(type(_total))
    assert "_compilation_chain_init_hook" not in vars(type(_total))
    assert Dispatcher._compilation_chain_init_hook is not _no_extensions
    assert _total._compilation_chain_init_hook is _no_extensions
    # a function of anyone else keeps Numba's own methods
    other = njit(lambda x: x)
    assert other.typeof_pyval.__func__ is Dispatcher.typeof_pyval
    assert other._compilation_chain_init_hook.__func__ is Dispatcher._compilation_chain_init_hook
