"""Loading cached kernels without parsing their bitcode (``corral/jit_load.py``).

The symbol table read from the object code must name what Numba's loader would have
registered for the names it looks up; a kernel loaded this way must run, and a kernel
compiled later in the process must still link against it (its bitcode parsed then)."""

from __future__ import annotations

import os
import struct
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.processes import run_json

from corral.jit_load import elf_defined_symbols

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="ELF object code: Linux only")


def _serialised_library() -> tuple[object, tuple[str, str, tuple[bytes, bytes]]]:
    """A freshly compiled kernel (no cache) and its library as Numba caches it."""
    import numpy as np
    from numba import njit

    @njit(cache=False)
    def scale(a, k):  # type: ignore[no-untyped-def]
        out = np.empty_like(a)
        for i in range(a.shape[0]):
            out[i] = a[i] * k
        return out

    scale(np.arange(3), 2)
    cres = next(iter(scale.overloads.values()))
    return cres, cres.library.serialize_using_object_code()


def test_symbols_match_the_bitcode() -> None:
    import llvmlite.binding as ll

    cres, (_name, kind, (obj, bitcode)) = _serialised_library()
    assert kind == "object"
    names = elf_defined_symbols(obj)
    assert names is not None
    # the names Numba looks up when it loads an entry
    assert cres.fndesc.llvm_cpython_wrapper_name in names
    assert cres.fndesc.mangled_name in names
    # and nothing the module does not define
    module = ll.parse_bitcode(bitcode)
    symbols = [*module.functions, *module.global_variables]
    defined = {g.name for g in symbols if not g.is_declaration}
    assert names <= defined


@given(st.binary(max_size=200))
@settings(max_examples=200, deadline=None)
def test_anything_else_is_refused(data: bytes) -> None:
    assert elf_defined_symbols(data) is None or data[:4] == b"\x7fELF"


def test_truncated_or_foreign_objects_are_refused() -> None:
    _cres, (_n, _k, (obj, _bc)) = _serialised_library()
    assert elf_defined_symbols(obj[:100]) is None  # section headers cut off
    big_endian = obj[:5] + b"\x02" + obj[6:]
    assert elf_defined_symbols(big_endian) is None
    no_sections = obj[:0x3C] + struct.pack("<H", 0) + obj[0x3E:]
    assert elf_defined_symbols(no_sections) is None


_MODULE = textwrap.dedent(
    """
    import numpy as np
    from corral.jit import kernel

    @kernel()
    def inner(x):
        if x < 0:
            raise ValueError("negative")
        a = np.empty(3, np.int64)  # NumPy support inlined: its environments are arrayobj's
        a[:] = x
        return a.sum() - x

    @kernel()
    def outer(x):
        return inner(x) + 1
    """
)

_RUN = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import scratchkernels as k
    out = {"inner": int(k.inner(4))}
    lib = next(iter(k.inner.overloads.values())).library
    out["inner_library"] = type(lib).__name__
    out["parsed_before"] = getattr(lib, "_parsed", None) is not None
    try:
        k.inner(-1)
    except ValueError as e:
        out["raised"] = str(e)
    if sys.argv[2] == "both":
        out["outer"] = int(k.outer(5))
        out["parsed_after"] = getattr(lib, "_parsed", None) is not None
        out["outer_library"] = type(next(iter(k.outer.overloads.values())).library).__name__
        out["hits"] = sum(k.outer.stats.cache_hits.values())
    out["arrayobj_imported"] = "numba.np.arrayobj" in sys.modules
    print(json.dumps(out))
    """
)


def _run(tmp: Path, what: str) -> dict[str, object]:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp / "cache"), CORRAL_PREBUILT="0")
    result: dict[str, object] = run_json(_RUN, str(tmp), what, env=env, timeout=600)
    return result


def test_loaded_kernels_run_and_link(tmp_path: Path) -> None:
    (tmp_path / "scratchkernels.py").write_text(_MODULE)
    first = _run(tmp_path, "inner")  # compiles `inner` and caches it
    assert first["inner"] == 8 and first["inner_library"] == "JITCodeLibrary"
    assert first["raised"] == "negative"
    # `inner` loaded from the cache without its bitcode; `outer` compiled, linking it
    second = _run(tmp_path, "both")
    assert second["inner"] == 8 and second["inner_library"] == "ObjectCodeLibrary"
    assert second["raised"] == "negative"  # the environment's constants are there
    assert second["parsed_before"] is False
    assert second["outer"] == 11 and second["parsed_after"] is True
    assert second["hits"] == 0 and second["outer_library"] == "JITCodeLibrary"
    # both loaded: no bitcode parsed, and NumPy support's module not imported for its
    # environments
    third = _run(tmp_path, "both")
    assert third["outer"] == 11 and third["hits"] == 1 and third["raised"] == "negative"
    assert third["outer_library"] == "ObjectCodeLibrary" and third["parsed_after"] is False
    assert third["arrayobj_imported"] is False


def test_an_environment_imports_nothing() -> None:
    import numba.core.environment as numba_env

    from corral.jit_load import _environment

    missing = "corral_no_such_module_for_environments"
    env = _environment(missing, [1, "two"], "corral_test_env_missing")
    assert env.globals == {"__name__": missing} and list(env.consts) == [1, "two"]
    assert missing not in sys.modules
    assert numba_env.lookup_environment("corral_test_env_missing") is env
    # a module already imported lends its globals, as Numba's loader does
    env = _environment("os", [], "corral_test_env_imported")
    assert env.globals is sys.modules["os"].__dict__
