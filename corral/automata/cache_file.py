"""The on-disk format of a compiled grammar's token caches.

A cache file is an uncompressed ``.npz`` of plain arrays (never pickled): ``key`` (the
compilation's cache key, ASCII), ``digest`` (``uint8 [32]``, SHA-256 over the key and
every cache array's name, dtype, shape and bytes, see :func:`file_digest`), ``cmeta``
(``int32 [G, 5]``), ``dense`` (``uint32 [D, W]``), ``dense_rank`` (``uint32 [D, RW]``),
``sparse`` and ``ends`` (``int32 [n]``). Files are written atomically and read by
:func:`read_cache_file`, which checks every entry's layout before allocating anything;
whether the arrays fit a compilation is checked by
:meth:`~corral.automata.token_caches.TokenCaches.structure_problem`.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import math
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = 2  # bump when the layout or the meaning of the token cache files changes


def cache_key(grammar_fingerprint: str, vocab_hash: str, tables: Any, trie_digest: bytes) -> str:
    """Hex digest (32 characters) naming a compilation's token caches.

    It covers everything the caches are computed from: the file format and corral's
    version, the grammar's fingerprint, the vocabulary's hash, the lexer tables (``gt``,
    ``lex_trans`` and any sparse rows: dtype, shape and contents) and the trie layout the
    caches index (node bytes, subtree ranges, rank order of the tokens). Two compilations with the
    same key build identical caches.
    """
    from .. import __version__

    h = hashlib.sha256()
    h.update(f"corral-token-cache-v{FORMAT}\0corral-{__version__}\0".encode())
    h.update(grammar_fingerprint.encode() + b"\0")
    h.update(vocab_hash.encode() + b"\0")
    hash_array(h, "gt", tables.gt)
    hash_array(h, "lex_trans", tables.lex_trans)
    for name, a in zip(("row_start", "cls", "dst"), tables.lex_sparse or (), strict=False):
        hash_array(h, "lex_sparse." + name, a)
    h.update(trie_digest)
    return h.hexdigest()[:32]


def write_cache_file(path: str | os.PathLike[str], key: str, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` (``cmeta``, ``dense``, ``dense_rank``, ``sparse``, ``ends``) under
    ``key`` to ``path``, atomically (a reader never sees a half-written file)."""
    digest = file_digest(key, arrays)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            entries: dict[str, Any] = {
                "key": np.frombuffer(key.encode(), np.uint8),
                "digest": np.frombuffer(digest, np.uint8),
                **arrays,
            }
            np.savez(f, **entries)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def identity_problem(arrays: dict[str, np.ndarray], key: str) -> str:
    """``""`` when the file's key is ``key`` and its digest matches its arrays, else why not."""
    found = bytes(arrays["key"])
    if found != key.encode():
        return (
            "written for another grammar, vocabulary, format or corral version "
            f"(key {found[:64].decode('ascii', 'replace')!r}, expected {key!r})"
        )
    if not hmac.compare_digest(bytes(arrays["digest"]), file_digest(key, arrays)):
        return "its contents do not match the digest stored with them (damaged or edited)"
    return ""


def read_problem(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray] | None, str]:
    """``(arrays, "")`` from a readable cache file; ``(None, "")`` when there is no file;
    ``(None, reason)`` when the file cannot be read as one. Never raises for a bad file."""
    try:
        return read_cache_file(path), ""
    except (FileNotFoundError, NotADirectoryError):
        return None, ""
    except IsADirectoryError:
        return None, "it is a directory"
    except CacheFileError as e:
        return None, str(e)
    except Exception as e:  # whatever a damaged file makes zipfile or numpy raise
        return None, f"damaged or not a cache file ({type(e).__name__}: {e})"


class CacheFileError(Exception):
    """A cache file does not have the layout :func:`write_cache_file` writes."""


# name -> (dtype, ndim) of every array in a cache file (the digest covers the last five)
_FILE_LAYOUT: dict[str, tuple[np.dtype[Any], int]] = {
    "key": (np.dtype(np.uint8), 1),
    "digest": (np.dtype(np.uint8), 1),
    "cmeta": (np.dtype(np.int32), 2),
    "dense": (np.dtype(np.uint32), 2),
    "dense_rank": (np.dtype(np.uint32), 2),
    "sparse": (np.dtype(np.int32), 1),
    "ends": (np.dtype(np.int32), 1),
}
_DIGESTED = ("cmeta", "dense", "dense_rank", "sparse", "ends")


def hash_array(h: Any, name: str, a: np.ndarray) -> None:
    """Feed ``name``, ``a``'s dtype, shape and C-order bytes to the hash ``h``."""
    h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
    h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8))  # C-order bytes, no copy


def file_digest(key: str, arrays: dict[str, np.ndarray]) -> bytes:
    """SHA-256 (32 bytes) over ``key`` and the cache arrays, in the order of ``_DIGESTED``.

    It detects damage and arrays taken from another file; it has no secret, so it does
    not stop someone who rewrites a file on purpose and recomputes it.
    """
    h = hashlib.sha256()
    h.update(f"corral-token-cache-digest\0{key}\0".encode())
    for name in _DIGESTED:
        hash_array(h, name, arrays[name])
    return h.digest()


def read_cache_file(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The arrays of a cache file, each a new writable C-contiguous array.

    Reads the zip archive itself rather than through ``np.load``: every entry must be
    one of ``_FILE_LAYOUT``'s, stored uncompressed, with that dtype and number of
    dimensions, and hold exactly the bytes its header declares, which is checked
    before anything is allocated (a header cannot make it allocate more than the file
    holds). Object arrays are refused from their header, so nothing is unpickled.
    Raises :class:`CacheFileError`, or whatever ``zipfile`` or numpy raise on damage.
    """
    fmt = np.lib.format
    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        expected = sorted(f"{n}.npy" for n in _FILE_LAYOUT)
        if sorted(names) != expected:
            raise CacheFileError(f"its entries are {sorted(names)[:10]}, not {expected}")
        for info in infos:
            name = info.filename[: -len(".npy")]
            dtype, ndim = _FILE_LAYOUT[name]
            if info.compress_type != zipfile.ZIP_STORED:
                raise CacheFileError(f"entry {name!r} is compressed")
            with zf.open(info) as f:
                version = fmt.read_magic(f)
                if version == (1, 0):
                    shape, fortran, dt = fmt.read_array_header_1_0(f)
                elif version == (2, 0):
                    shape, fortran, dt = fmt.read_array_header_2_0(f)
                else:
                    raise CacheFileError(f"entry {name!r} has .npy format version {version}")
                if dt != dtype or len(shape) != ndim or any(d < 0 for d in shape):
                    raise CacheFileError(
                        f"entry {name!r} is {dt} {shape}, expected {dtype} in {ndim} dimensions"
                    )
                nbytes = math.prod(shape) * dtype.itemsize
                if nbytes > info.file_size:
                    raise CacheFileError(f"entry {name!r} declares more data than it holds")
                data = f.read(nbytes + 1)  # reading to the end also checks the zip CRC
                if len(data) != nbytes:
                    raise CacheFileError(f"entry {name!r} holds {len(data)} bytes, not {nbytes}")
            a = np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")
            out[name] = np.array(a, order="C")  # a writable copy
    return out
