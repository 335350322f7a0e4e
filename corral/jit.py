"""How corral's Numba kernels are compiled, and where their machine code is cached.

Every kernel is declared with :func:`kernel` (``numba.njit`` with corral's cache). When a
kernel is first called with some argument types, its machine code comes from the first of:

1. **Numba's own cache** (the kernel module's ``__pycache__``, or ``NUMBA_CACHE_DIR``):
   code compiled on this machine for its CPU, by an earlier process.
2. **The prebuilt kernels shipped in the package** (``corral/_prebuilt/``): code compiled
   when the package was built, for a *generic* CPU of the same architecture (Numba's
   ``NUMBA_CPU_NAME=generic``: no instruction-set extension past the architecture's
   baseline), so that it runs on any machine the wheel installs on. An entry is used only
   where everything that shaped it is the same: the Numba and Python versions, the
   platform, and the source text of every corral module (a hash over the package, checked
   once per process), so an edited checkout falls back to compiling instead of running
   stale code.
3. **Numba compiles it** (seconds to a minute for the large kernels) and saves it to 1.

Building the package (a wheel, or an editable install) runs :func:`prebuild` in a
subprocess, which drives every kernel through :func:`corral.warmup.warmup` in build mode
(``CORRAL_PREBUILD_DIR`` set: the cache reads and writes only the prebuilt directory) with
the generic CPU. Generic code is as fast as host-tuned code on corral's kernels (they are
branchy integer code that does not vectorise; see ``docs/performance.md``), so nothing is
upgraded later.

Environment:

- ``CORRAL_PREBUILT=0``: ignore the prebuilt kernels (compile, or use Numba's cache).
- ``CORRAL_NO_PREBUILD=1``: build the package without prebuilt kernels.
- ``CORRAL_PREBUILD_DIR``: set by :func:`prebuild` for its subprocess (build mode).

This module imports nothing from the rest of the package but ``jit_load.py`` (how an
entry is loaded) and ``jit_runtime.py`` (Numba's runtime library, kept as object code).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

PACKAGE_ROOT = Path(__file__).resolve().parent
"""The ``corral`` package folder: prebuilt entries are laid out by module path below it."""

DEFAULT_PREBUILT_DIR = PACKAGE_ROOT / "_prebuilt"
"""Where a built package keeps its prebuilt kernels."""

MANIFEST = "MANIFEST.json"
"""The prebuilt directory's description of what its entries were built with."""

GENERIC_CPU = "generic"

_BUILD_ENV = "CORRAL_PREBUILD_DIR"


def _build_dir() -> Path | None:
    """The prebuilt directory being written (build mode), or ``None``."""
    d = os.environ.get(_BUILD_ENV)
    return Path(d) if d else None


def source_hash(root: Path = PACKAGE_ROOT) -> str:
    """SHA-256 over the path and text of every ``.py`` file below ``root``, in path order:
    what the prebuilt kernels were compiled from (a kernel's code depends on the modules it
    calls into and on constants of other modules, which Numba's per-file check misses)."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def build_description() -> dict[str, str]:
    """What makes compiled code reusable: Numba, Python and platform, and the sources."""
    import numba

    return {
        "numba": numba.__version__,
        "python": f"{sys.implementation.cache_tag}",
        "platform": f"{sys.platform}-{platform.machine()}",
        "sources": source_hash(),
    }


@functools.lru_cache(maxsize=1)
def prebuilt_dir() -> Path | None:
    """The prebuilt directory this process may load from, or ``None`` (none shipped, turned
    off with ``CORRAL_PREBUILT=0``, or built from other sources or versions). Checked once
    per process."""
    if os.environ.get("CORRAL_PREBUILT", "1") == "0":
        return None
    d = DEFAULT_PREBUILT_DIR
    try:
        manifest = json.loads((d / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("built") != build_description():
        return None
    return d


def _subdir(py_file: str) -> str:
    """The kernel module's folder relative to the package (its place below a prebuilt
    directory); a module outside the package uses its folder's name."""
    folder = Path(py_file).resolve().parent
    try:
        return folder.relative_to(PACKAGE_ROOT).as_posix()
    except ValueError:
        return folder.name


def _ready_to_load(target_context: Any) -> None:
    """Make ``target_context`` ready to run machine code loaded from a cache: the Numba
    runtime (allocation, reference counts) initialised, its symbols known to the JIT.

    Numba's own ``load_overload`` first refreshes the whole target context, importing and
    installing every typing and lowering registry it has (NumPy, linear algebra, random,
    typed containers, ...; 0.27-0.40 s of CPU measured after a first mask). Loaded code is
    already typed and lowered: it needs only the runtime and the C helpers the context
    registers when it is created. corral's kernels reference nothing else (the undefined
    symbols of their cached object code are Python's C API, the runtime's ``NRT_*``, Numba's
    ``numba_*`` helpers and the C library), and a compile, on a cache miss or later in the
    process, refreshes the context itself. ``tests/test_warmup.py`` loads every kernel real
    use needs in a fresh process this way. The runtime's own library is loaded from
    object code kept by an earlier process where it can be (``jit_runtime.py``)."""
    from .jit_runtime import initialize

    initialize(target_context)


@functools.lru_cache(maxsize=1)
def _cache_class() -> type:
    """Numba's ``FunctionCache`` with the prebuilt directory as a fallback (or, in build
    mode, as the only location). Built on first use so that importing this module does not
    import Numba's internals before a kernel is declared."""
    from numba.core.caching import FunctionCache, IndexDataCacheFile

    from .jit_load import load_entry, rebuild

    class PrebuiltFunctionCache(FunctionCache):  # type: ignore[misc]
        """A kernel's cache: Numba's own, then the prebuilt directory (see the module)."""

        def __init__(self, py_func: Callable[..., Any]) -> None:
            super().__init__(py_func)
            self._prebuilt: Any = None
            self._prebuilt_checked = False
            build = _build_dir()
            if build is not None:
                # build mode: this cache is the prebuilt directory, nothing else
                self._cache_path = str(build / _subdir(self._impl.locator._py_file))
                self._cache_file = IndexDataCacheFile(
                    cache_path=self._cache_path,
                    filename_base=self._impl.filename_base,
                    source_stamp=self._impl.locator.get_source_stamp(),
                )
                self._impl.locator.ensure_cache_path = self._ensure_build_path

        def _ensure_build_path(self) -> None:
            os.makedirs(self._cache_path, exist_ok=True)

        def _prebuilt_file(self) -> Any:
            if not self._prebuilt_checked:
                self._prebuilt_checked = True
                d = prebuilt_dir()
                if d is not None:
                    self._prebuilt = IndexDataCacheFile(
                        cache_path=str(d / _subdir(self._impl.locator._py_file)),
                        filename_base=self._impl.filename_base,
                        source_stamp=self._impl.locator.get_source_stamp(),
                    )
            return self._prebuilt

        def load_overload(self, sig: Any, target_context: Any) -> Any:
            _ready_to_load(target_context)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)

        def _load_overload(self, sig: Any, target_context: Any) -> Any:
            if not self._enabled:
                return None
            key = self._index_key(sig, target_context.codegen())
            raw = load_entry(self._cache_file, key)
            if raw is None and _build_dir() is None:
                prebuilt = self._prebuilt_file()
                if prebuilt is not None:
                    triple, _cpu, _features = key[1]
                    raw = load_entry(prebuilt, (key[0], (triple, GENERIC_CPU, ""), key[2]))
            if raw is None:
                return None
            return rebuild(target_context, raw)

    return PrebuiltFunctionCache


_DECLARED: list[Any] = []


def _typeof_arg(dispatcher: Any, val: Any) -> Any:
    """The Numba type of ``val``, an argument of a call that ``dispatcher`` (a kernel) has
    no machine code for yet: Numba's ``typeof_pyval``, with a plain NumPy array typed
    without Numba's masked-array test.

    Numba types an array argument by first asking whether it is a
    ``numpy.ma.MaskedArray``, which imports ``numpy.ma`` (6-7 ms of CPU, measured in a
    process's first compile) in every process, at its first kernel call. A value whose
    type is exactly ``np.ndarray`` is no masked array, so the test is skipped for it; the
    type is built as Numba builds it (dtype, dimensions, layout, read-only flag;
    ``tests/test_jit_dispatch.py`` checks that both agree over many arrays). Any other
    value, a subclass of ``ndarray`` included, goes to Numba's own ``typeof_pyval``."""
    import numpy as np

    if type(val) is not np.ndarray:
        return type(dispatcher).typeof_pyval(dispatcher, val)
    from numba.core import errors, types
    from numba.np import numpy_support

    tp: Any
    try:
        dtype = numpy_support.from_dtype(val.dtype)
    except errors.NumbaNotImplementedError:
        tp = types.pyobject  # an unsupported dtype: Numba's typeof_pyval says the same
    else:
        layout = numpy_support.map_layout(val)
        tp = types.Array(dtype, val.ndim, layout, readonly=not val.flags.writeable)
    dispatcher._types_active_call.add(tp)
    return tp


def cache_counts() -> tuple[int, int]:
    """``(loaded, compiled)``: how many kernel specialisations this process has loaded from
    a cache (Numba's or the prebuilt kernels) and how many it has compiled, over the
    kernels declared so far."""
    loaded = sum(sum(d.stats.cache_hits.values()) for d in _DECLARED)
    compiled = sum(sum(d.stats.cache_misses.values()) for d in _DECLARED)
    return loaded, compiled


def _no_extensions() -> None:
    """A kernel's ``_compilation_chain_init_hook``: nothing.

    Before a dispatcher's first compile or cache load, Numba runs the ``init`` entry point
    of every installed Numba extension, which first lists the entry points of every
    installed distribution (2.5-3.6 ms of CPU here, once a process, and more in an
    environment with more packages). Extensions teach Numba third-party types; corral's
    kernels take and use only NumPy arrays, numbers and tuples of them, so they do not
    run that step. Numba still runs it before any other function's first compile."""


def kernel(**options: Any) -> Callable[[F], F]:
    """``numba.njit(**options)`` with corral's cache (see the module): the decorator of
    every corral kernel. ``cache`` is implied and may not be given."""
    if "cache" in options:
        raise TypeError("kernel() caches always; do not pass cache=")

    def wrap(fn: F) -> F:
        from numba import njit

        dispatcher = njit(**options)(fn)
        if not hasattr(dispatcher, "stats"):
            return dispatcher  # type: ignore[no-any-return]  # NUMBA_DISABLE_JIT: plain Python
        dispatcher._cache = _cache_class()(fn)
        # plain arrays typed without importing numpy.ma (see _typeof_arg), and no Numba
        # extensions loaded for corral's kernels (see _no_extensions)
        dispatcher.typeof_pyval = functools.partial(_typeof_arg, dispatcher)
        dispatcher._compilation_chain_init_hook = _no_extensions
        _DECLARED.append(dispatcher)
        return dispatcher  # type: ignore[no-any-return]

    return wrap


def write_manifest(target: str | Path) -> None:
    """Write ``target``'s manifest: what its entries were built with (in build mode, after
    the kernels are compiled), without which nothing loads from it."""
    manifest = {"built": build_description(), "cpu": GENERIC_CPU}
    (Path(target) / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def prebuild(target: Path, *, quiet: bool = False) -> float:
    """Compile every kernel into ``target`` (a prebuilt directory, emptied first) for the
    generic CPU, in a subprocess that runs :func:`corral.warmup.warmup` in build mode, then
    write the formats' automata (:mod:`corral.grammar.json_schema.format_store`) and the
    manifest. Returns the seconds taken. Raises ``RuntimeError`` if the
    subprocess fails (the directory is then removed: a package without prebuilt kernels
    compiles them on first use, as Numba does)."""
    target = Path(target)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    env = dict(os.environ)
    env[_BUILD_ENV] = str(target)
    env["NUMBA_CPU_NAME"] = GENERIC_CPU
    env["NUMBA_CPU_FEATURES"] = ""
    env.pop("NUMBA_DISABLE_JIT", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    root = str(PACKAGE_ROOT.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    code = (
        "import sys\n"
        "from corral.warmup import warmup\n"
        "from corral.jit import write_manifest\n"
        "warmup()\n"
        "from corral.grammar.json_schema.format_store import write\n"
        "write(sys.argv[1])\n"
        "write_manifest(sys.argv[1])\n"
    )
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        raise RuntimeError(f"prebuilding corral's kernels failed:\n{out.stderr[-4000:]}")
    seconds = time.perf_counter() - t
    if not quiet:
        print(f"corral: kernels prebuilt for a generic CPU in {seconds:.0f} s", file=sys.stderr)
    return seconds


__all__ = [
    "DEFAULT_PREBUILT_DIR",
    "cache_counts",
    "kernel",
    "prebuild",
    "prebuilt_dir",
    "source_hash",
    "write_manifest",
]
