"""``jit_runtime``: Numba's runtime library kept as object code and loaded by later
processes. Each case runs in a fresh process (the runtime initialises once per process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Initialises the runtime through corral, counting Numba's compiles of the runtime module,
# then compiles and runs a new function that allocates (it links against the runtime
# library and calls into it).
_CHILD = """
import sys
from numba.core.registry import cpu_target
from numba.core.runtime import nrtdynmod
calls = []
numba_create = nrtdynmod.create_nrt_module
def counted(ctx):
    calls.append(1)
    return numba_create(ctx)
nrtdynmod.create_nrt_module = counted
from corral import jit_runtime
jit_runtime.initialize(cpu_target.target_context)
jit_runtime.initialize(cpu_target.target_context)
import numba
import numpy as np
@numba.njit
def total(n):
    a = np.arange(n)
    return a.sum()
print(len(calls), total(10))
"""


def _run(cache: Path, **env: str) -> str:
    full = {**os.environ, "CORRAL_CACHE_DIR": str(cache), "CORRAL_PREBUILT": "0", **env}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True, env=full
    )
    return out.stdout.strip()


def _kept(cache: Path) -> list[Path]:
    folder = cache / "runtime"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_a_later_process_loads_the_runtime_instead_of_compiling_it(tmp_path: Path) -> None:
    assert _run(tmp_path) == "1 45"  # compiled once, kept
    kept = _kept(tmp_path)
    assert len(kept) == 1 and kept[0].name.startswith("nrt-")
    assert _run(tmp_path) == "0 45"  # loaded; a new function compiles and runs against it
    assert _kept(tmp_path) == kept


def test_a_damaged_file_is_replaced(tmp_path: Path) -> None:
    _run(tmp_path)
    (kept,) = _kept(tmp_path)
    kept.write_bytes(b"not a pickle")
    assert _run(tmp_path) == "1 45"
    assert _run(tmp_path) == "0 45"


def test_a_file_kept_for_another_setting_is_not_loaded(tmp_path: Path) -> None:
    import pickle

    _run(tmp_path)
    (kept,) = _kept(tmp_path)
    identity, payload = pickle.loads(kept.read_bytes())
    kept.write_bytes(pickle.dumps(((*identity[:-1], "+other-feature"), payload)))
    assert _run(tmp_path) == "1 45"


def test_turned_off_numba_compiles_its_runtime_and_nothing_is_kept(tmp_path: Path) -> None:
    assert _run(tmp_path, CORRAL_RUNTIME_CACHE="0") == "1 45"
    assert _kept(tmp_path) == []
