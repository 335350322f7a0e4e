"""Prebuilt kernels (``corral/jit.py``): machine code compiled for a generic CPU at build
time, loaded by a fresh process instead of compiling; refused when anything that shaped it
differs.

The mechanism is tested on a one-line kernel in a scratch module, in fresh processes with
empty Numba caches. Whether the installed package's prebuilt kernels cover real use is
tested in ``test_warmup.py``, where the package has them (an install from a wheel, or an
editable install of an unedited checkout)."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.processes import run_json

import corral
from corral import jit

_KERNEL = textwrap.dedent(
    """
    import numpy as np
    from corral.jit import kernel

    @kernel(nogil=True)
    def add(a, b):
        x = np.empty(3, np.int64)  # allocates: loaded code needs Numba's runtime
        x[:] = a
        return x.sum() + b
    """
)

_RUN = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import corral.jit as jit
    jit.DEFAULT_PREBUILT_DIR = Path(sys.argv[1])
    sys.path.insert(0, sys.argv[2])
    import tinykernel
    value = tinykernel.add(4, 5)
    if sys.argv[3] == "build":
        jit.write_manifest(sys.argv[1])
    stats = tinykernel.add.stats
    # Numba's compiler registries are loaded to compile, not to load cached code
    registries = "numba.np.polynomial.polynomial_core" in sys.modules
    print(json.dumps({"value": value, "hits": sum(stats.cache_hits.values()),
                      "misses": sum(stats.cache_misses.values()), "registries": registries}))
    """
)


def _run(tmp: Path, mode: str, cache: str, **env: str) -> dict[str, int]:
    e = dict(os.environ)
    for k in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "CORRAL_PREBUILD_DIR", "CORRAL_PREBUILT"):
        e.pop(k, None)
    e["NUMBA_CACHE_DIR"] = str(tmp / cache)
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    e.update(env)
    result: dict[str, int] = run_json(_RUN, str(tmp / "pre"), str(tmp / "mod"), mode, env=e)
    return result


@pytest.fixture
def built(tmp_path: Path) -> Path:
    """A scratch kernel module and its prebuilt directory, compiled for a generic CPU."""
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "tinykernel.py").write_text(_KERNEL)
    r = _run(
        tmp_path,
        "build",
        "build-cache",
        CORRAL_PREBUILD_DIR=str(tmp_path / "pre"),
        NUMBA_CPU_NAME="generic",
    )
    assert r == {"value": 17, "hits": 0, "misses": 1, "registries": True}
    entries = [p.name for p in (tmp_path / "pre").rglob("*") if p.is_file()]
    assert jit.MANIFEST in entries
    assert any(n.startswith("tinykernel.add-") and n.endswith(".nbi") for n in entries)
    # build mode writes nothing to Numba's own cache
    assert not list((tmp_path / "build-cache").rglob("*.nbi"))
    return tmp_path


def test_a_fresh_process_loads_prebuilt_code_instead_of_compiling(built: Path) -> None:
    r = _run(built, "load", "fresh")
    assert r == {"value": 17, "hits": 1, "misses": 0, "registries": False}
    assert not list((built / "fresh").rglob("*.nbc"))  # nothing was compiled


def test_prebuilt_code_can_be_turned_off(built: Path) -> None:
    r = _run(built, "load", "off", CORRAL_PREBUILT="0")
    assert r == {"value": 17, "hits": 0, "misses": 1, "registries": True}
    # the second process loads it from Numba's cache, with the same economy
    r = _run(built, "load", "off", CORRAL_PREBUILT="0")
    assert r == {"value": 17, "hits": 1, "misses": 0, "registries": False}


@pytest.mark.parametrize("field", ["sources", "numba", "python", "platform"])
def test_prebuilt_code_from_other_sources_or_versions_is_not_loaded(
    built: Path, field: str
) -> None:
    manifest_path = built / "pre" / jit.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["built"][field] += "-other"
    manifest_path.write_text(json.dumps(manifest))
    r = _run(built, "load", "other")
    assert r == {"value": 17, "hits": 0, "misses": 1, "registries": True}


def test_a_missing_or_broken_manifest_means_no_prebuilt_code(built: Path) -> None:
    manifest_path = built / "pre" / jit.MANIFEST
    manifest_path.write_text("{not json")
    assert _run(built, "load", "broken")["misses"] == 1
    manifest_path.unlink()
    assert _run(built, "load", "missing")["misses"] == 1


def test_kernels_run_as_python_with_numba_disable_jit(built: Path) -> None:
    """``NUMBA_DISABLE_JIT=1`` (debugging) leaves kernels plain Python functions, with
    nothing cached and nothing counted."""
    code = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, sys.argv[1])
        import tinykernel
        from corral.jit import cache_counts
        print(tinykernel.add(4, 5), cache_counts())
        """
    )
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    out = subprocess.run(
        [sys.executable, "-c", code, str(built / "mod")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["17", "(0,", "0)"]


def test_kernel_refuses_a_cache_option() -> None:
    with pytest.raises(TypeError, match="cache"):
        jit.kernel(cache=True)


def _kernel_dispatchers() -> list[tuple[str, object]]:
    """Every Numba dispatcher defined in a corral module (the integrations, which need
    torch or vLLM, declare none)."""
    from numba.core.dispatcher import Dispatcher

    found = []
    for info in pkgutil.walk_packages(corral.__path__, "corral."):
        if info.name.startswith("corral.integrations") or info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError:  # an optional dependency (torch, jedi) is missing
            continue
        for name, value in vars(module).items():
            if isinstance(value, Dispatcher) and value.py_func.__module__ == info.name:
                found.append((f"{info.name}.{name}", value))
    return found


def test_every_kernel_is_declared_with_corrals_cache() -> None:
    kernels = _kernel_dispatchers()
    assert len(kernels) > 50
    plain = [n for n, d in kernels if type(d._cache).__name__ != "PrebuiltFunctionCache"]  # type: ignore[attr-defined]
    assert not plain, f"declare these with corral.jit.kernel: {plain}"
