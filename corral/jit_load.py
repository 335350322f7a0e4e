"""Loading a cached kernel's machine code without parsing its bitcode.

A Numba cache entry (Numba's own cache or corral's prebuilt kernels, ``jit.py``) holds a
kernel's *object code* (the machine code, ready to load) and its *bitcode* (LLVM IR, kept
so that code compiled later in the process can inline and link against it). Numba's
loader parses the bitcode of every entry it loads and lists the module's symbols, to know
which names the loaded code defines. To a small schema's first mask that was 129-281 ms of
the 276-560 ms of CPU a process spent loading kernels, and a process that compiles nothing
never reads that bitcode again.

:func:`rebuild` loads an entry as Numba does, except that its library
(:func:`object_code_library`) takes the defined names from the object code's own symbol
table (:func:`elf_defined_symbols`: the ELF format of Linux; elsewhere, or on anything
unexpected, Numba's own loader runs) and parses the bitcode only when some library links
against it. Numba asks the execution engine whether a name is defined before it looks the
name up (looking up an undefined name is a fatal error in LLVM), and the names it asks for
are the entry points and environments of the kernels: defined, global symbols of the
object code, which is what the symbol table lists.

The switch is scoped: the hook on the target's code generator (:func:`_hook`) builds such
a library only inside :func:`rebuild`, on the thread that runs it; every other load in the
process (other libraries' Numba caches) goes through Numba's own path.

An entry also names the *environments* of the functions compiled into it (a function's
constants, and its module's globals): Numba's loader imports each one's module to take its
``__dict__``. Those of NumPy support inlined into the kernels (``numba.np.arrayobj``,
``numba.np.arraymath``, ...) are modules nothing else in a loading process imports: about
half of the kernel loads' time to a first mask. The globals serve object-mode code only
(``numba/core/pylowering.py``; compiled code in nopython mode, which every kernel is,
reads an environment's constants and nothing else), so :func:`load_entry` gives a function
of a module not imported yet an environment whose globals name the module and hold nothing
else (:func:`_environment`); a module already imported lends its own, as with Numba.
"""

from __future__ import annotations

import functools
import io
import pickle
import struct
import sys
import threading
from typing import Any

_ELF_MAGIC = b"\x7fELF"
_SHT_SYMTAB = 2
_SHN_UNDEF = 0
_STB_GLOBAL = 1
_STB_WEAK = 2

_scope = threading.local()


def elf_defined_symbols(obj: bytes) -> frozenset[str] | None:
    """The names an ELF object file (64-bit, little-endian) defines with global or weak
    binding: the symbols another object could link against, which an execution engine
    can look up. ``None`` when ``obj`` is not such a file or has no symbol table."""
    if len(obj) < 64 or obj[:4] != _ELF_MAGIC or obj[4] != 2 or obj[5] != 1:
        return None
    try:
        (shoff,) = struct.unpack_from("<Q", obj, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
        sections = [
            struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)
        ]
        symtab = next((s for s in sections if s[1] == _SHT_SYMTAB), None)
        if symtab is None:
            return None
        _, _, _, _, off, size, link, _, _, entsize = symtab
        str_off = sections[link][4]
        names = set()
        for at in range(off + entsize, off + size, entsize):  # entry 0 is the null symbol
            name, info, _other, shndx = struct.unpack_from("<IBBH", obj, at)
            if shndx != _SHN_UNDEF and info >> 4 in (_STB_GLOBAL, _STB_WEAK):
                end = obj.index(b"\0", str_off + name)
                names.add(obj[str_off + name : end].decode("ascii"))
        return frozenset(names)
    except (struct.error, IndexError, ValueError, UnicodeDecodeError):
        return None


@functools.lru_cache(maxsize=1)
def _library_class() -> type:
    """Numba's JIT code library, with its bitcode parsed on first use (built on first use
    so that importing this module imports nothing of Numba's)."""
    import llvmlite.binding as ll
    from numba.core.codegen import JITCodeLibrary

    class ObjectCodeLibrary(JITCodeLibrary):  # type: ignore[misc]
        """A library loaded from object code; its bitcode (the module other libraries link
        against) is parsed, and its names registered, when first asked for."""

        _bitcode: bytes | None = None
        _parsed: Any = None

        @property  # type: ignore[override]
        def _shared_module(self) -> Any:
            if self._parsed is None and self._bitcode is not None:
                module = ll.parse_bitcode(self._bitcode)
                self._codegen._engine._load_defined_symbols(module)
                self._parsed, self._bitcode = module, None
            return self._parsed

        @_shared_module.setter
        def _shared_module(self, module: Any) -> None:
            self._parsed = module

    return ObjectCodeLibrary


def object_code_library(codegen: Any, state: tuple[str, str, Any]) -> Any:
    """A loaded library for a serialised one (``(name, kind, data)``, as Numba caches it),
    or ``None`` where Numba's own loader must do it: not object code, or not ELF."""
    name, kind, data = state
    if kind != "object":
        return None
    object_code, bitcode = data
    names = elf_defined_symbols(object_code)
    if names is None:
        return None
    library = _library_class()(codegen, name)
    library.enable_object_caching()
    library._set_compiled_object(object_code)
    library._bitcode = bitcode
    library._finalize_final_module()  # adds the (empty) module: the engine loads the object
    codegen._engine._defined_symbols |= names
    return library


def _hook(codegen: Any) -> None:
    """Route ``codegen``'s library loads through :func:`object_code_library` while
    :func:`rebuild` runs on the calling thread (installed once per code generator)."""
    if getattr(codegen, "_corral_hooked", False):
        return
    numba_unserialize = codegen.unserialize_library

    def unserialize_library(serialized: Any) -> Any:
        if getattr(_scope, "active", False):
            library = object_code_library(codegen, serialized)
            if library is not None:
                return library
        return numba_unserialize(serialized)

    codegen.unserialize_library = unserialize_library
    codegen._corral_hooked = True


def _environment(modname: str | None, consts: list[Any], env_name: str) -> Any:
    """Numba's ``_rebuild_env`` without importing ``modname`` when it is not imported yet:
    the environment's globals are then ``{"__name__": modname}`` (see the module)."""
    from numba.core.environment import Environment, _rebuild_env, lookup_environment

    if modname is None or modname in sys.modules or lookup_environment(env_name) is not None:
        return _rebuild_env(modname, consts, env_name)
    env = Environment({"__name__": modname})
    env.consts[:] = consts
    env.env_name = env_name
    Environment._memo[env_name] = env
    return env


class _EntryUnpickler(pickle.Unpickler):
    """Numba's cache data, with environments rebuilt by :func:`_environment`."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "numba.core.environment" and name == "_rebuild_env":
            return _environment
        return super().find_class(module, name)


def load_entry(cache_file: Any, key: Any) -> Any:
    """The payload Numba's ``IndexDataCacheFile`` ``cache_file`` holds under ``key``, as
    its ``load`` reads it (``None`` when absent or removed meanwhile), with environments
    rebuilt by :func:`_environment`."""
    name = cache_file._load_index().get(key)
    if name is None:
        return None
    try:
        with open(cache_file._data_path(name), "rb") as f:
            data = f.read()
    except OSError:  # removed while the index still named it
        return None
    return _EntryUnpickler(io.BytesIO(data)).load()


def rebuild(target_context: Any, payload: tuple[Any, ...]) -> Any:
    """Numba's ``CompileResult`` for a cache entry's ``payload``, its library loaded by
    :func:`object_code_library` where it can be."""
    from numba.core.compiler import CompileResult

    _hook(target_context.codegen())
    _scope.active = True
    try:
        return CompileResult._rebuild(target_context, *payload)
    finally:
        _scope.active = False
