"""Numba's runtime library, loaded from object code instead of compiled in every process.

Before a process's first kernel runs, Numba initialises its runtime
(``numba.core.runtime.rtsys.initialize``): it registers the runtime's C helpers, then
compiles with LLVM a small module of its own (atomic reference counts, the handler that
aborts on an unresolved symbol). That compile took 20-28 ms of CPU in every process: a
third of the first compile of a small Lark grammar in a fresh process, where llguidance
takes 2-5 ms in all. The module's machine code is the same in every process of one Numba,
LLVM and CPU, so corral keeps it as object code, as Numba keeps a kernel's:

- :func:`initialize` runs Numba's own initialisation with its compile step replaced by
  :func:`_load_or_compile`, which loads the object code kept by an earlier process (or by
  the package build, for the generic CPU: ``jit.py``'s prebuilt kernels) through
  ``jit_load.object_code_library``, and otherwise compiles the module as Numba does and
  keeps it.
- The files are ``<corral cache dir>/runtime/nrt-<key>.bin`` (``user_cache.py``), and
  ``runtime/`` of the prebuilt directory; the key digests the Numba, llvmlite and Python
  versions, the platform and the code generator's target (triple, CPU name, features),
  and the file repeats what it digests, so that a file for another setting is never
  loaded. Anything unexpected (a missing or foreign file, an unwritable folder, a Numba
  without the functions used here) falls back to Numba's own compile.

``CORRAL_RUNTIME_CACHE=0`` turns this off (Numba compiles its runtime as usual).

This module imports nothing from the rest of the package but ``jit_load.py`` and
``user_cache.py``, and those only when called.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import platform
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_initialised = False  # set once Numba's runtime is up: later calls return at once
_ABORT = "nrt_unresolved_abort"  # a function the runtime library defines, looked up by Numba


def enabled() -> bool:
    """Whether the runtime library is kept and loaded (``CORRAL_RUNTIME_CACHE`` is not 0)."""
    return os.environ.get("CORRAL_RUNTIME_CACHE", "1") != "0"


def initialize(target_context: Any) -> None:
    """Initialise Numba's runtime for ``target_context`` (as ``rtsys.initialize``), its
    library loaded from object code where a kept one fits. Safe to call repeatedly."""
    global _initialised
    if _initialised:
        return
    from numba.core.runtime import nrtdynmod, rtsys

    if not enabled():
        rtsys.initialize(target_context)
        _initialised = True
        return
    with _lock:
        numba_compile = nrtdynmod.compile_nrt_functions
        nrtdynmod.compile_nrt_functions = functools.partial(
            _load_or_compile, numba_compile=numba_compile
        )
        try:
            rtsys.initialize(target_context)  # returns at once if initialised already
        finally:
            nrtdynmod.compile_nrt_functions = numba_compile
        _initialised = True


def _identity(codegen: Any, *, cpu: str | None = None) -> tuple[Any, ...]:
    """What the runtime's machine code depends on; ``cpu``: the CPU to name instead of
    the code generator's (the prebuilt kernels' generic CPU, with no extra features)."""
    import llvmlite
    import numba

    triple, cpu_name, features = codegen.magic_tuple()
    if cpu is not None:
        cpu_name, features = cpu, ""
    return (
        "nrt-1",
        numba.__version__,
        llvmlite.__version__,
        sys.implementation.cache_tag,
        f"{sys.platform}-{platform.machine()}",
        triple,
        cpu_name,
        features,
    )


def _path(folder: Path, identity: tuple[Any, ...]) -> Path:
    digest = hashlib.sha256(repr(identity).encode()).hexdigest()[:20]
    return folder / "runtime" / f"nrt-{digest}.bin"


def _candidates(
    codegen: Any, user: Path, host: tuple[Any, ...]
) -> Iterator[tuple[Path, tuple[Any, ...]]]:
    """The files to try, in order: ``user`` (kept for this CPU, ``host``), then the
    prebuilt one (generic; its folder is checked only if the user's file does not serve)."""
    from .jit import GENERIC_CPU, prebuilt_dir

    yield user, host
    pre = prebuilt_dir()
    if pre is not None:
        generic = _identity(codegen, cpu=GENERIC_CPU)
        yield _path(pre, generic), generic


def _load(codegen: Any, path: Path, identity: tuple[Any, ...]) -> Any:
    """The runtime library kept at ``path``, or ``None``."""
    from .jit_load import object_code_library

    try:
        stored, payload = pickle.loads(path.read_bytes())
    except Exception:  # missing, unreadable or not a kept runtime: compile instead
        return None
    if stored != identity:
        return None
    library = object_code_library(codegen, payload)
    if library is None or not library.get_pointer_to_function(_ABORT):
        return None
    return library


def _store(library: Any, path: Path, identity: tuple[Any, ...]) -> None:
    """Keep ``library``'s object code at ``path`` (atomically; nothing on failure)."""
    from .user_cache import write_file

    try:
        data = pickle.dumps((identity, library.serialize_using_object_code()))
    except (RuntimeError, AttributeError):
        return
    write_file(path, (data,), tmp_prefix=".nrt-")


def _load_or_compile(ctx: Any, *, numba_compile: Any) -> Any:
    """``nrtdynmod.compile_nrt_functions`` for :func:`initialize`: the kept library, or
    the module compiled as Numba does, then kept."""
    from numba.core.runtime import nrtdynmod

    from .jit import _build_dir
    from .user_cache import cache_dir

    codegen = ctx.codegen()
    identity = _identity(codegen)
    build = _build_dir()
    # kept in the user's cache, or (building the package) in the prebuilt directory
    keep = _path(build if build is not None else cache_dir(), identity)
    if build is None:
        for path, stored in _candidates(codegen, keep, identity):
            library = _load(codegen, path, stored)
            if library is not None:
                return library
    try:
        ir_mod, library = nrtdynmod.create_nrt_module(ctx)
        library.enable_object_caching()
        library.add_ir_module(ir_mod)
        library.finalize()
    except AttributeError:  # another Numba: its own compile, not kept
        return numba_compile(ctx)
    _store(library, keep, identity)
    return library
