"""A vocabulary's token trie on disk, so that a new process reads it instead of building it.

Building the trie (:meth:`Vocabulary.trie`) costs a warm process about 90 ms of CPU for
Llama-3's 128,257 tokens (five builds under a profiler); the first grammar compiled in a
new process pays 134-204 ms (Gemma-3's 262,144 tokens: 320-407), its five kernels' loads
included. Reading a stored trie back is one read of its file.

Files are ``<cache_dir>/tries/<vocabulary hash>.trie`` (:func:`corral.user_cache.cache_dir`),
keyed by :attr:`Vocabulary.hash`, the SHA-256 of every token's bytes and kind, the size and
the EOS ids: a file is found only for the very vocabulary it was built from. Layout: the
magic ``CORRALTRIE``, the format number and the header's length (two little-endian
``uint32``), a JSON header (the hash, a digest of the sources that build a trie
(:func:`builder_digest`), the two integer fields, each array's field name, dtype, shape
and offset, the arrays' total length and their CRC-32), then the arrays, each at an
offset that is a multiple of 64.

A file must never change what is allowed, so a file is read only when its magic,
format, sources, vocabulary hash, length and digest match and its arrays agree with one
another and with the vocabulary (one entry per node where there should be, every index
inside the array it indexes). A file of another format or other sources (another corral)
is passed over silently; any other mismatch (flipped bits, truncated, edited, renamed)
with a :class:`~corral.errors.CacheWarning` naming the file and what is wrong. Either
way the trie is built and the file written again. Files are written to a temporary name
in the same folder and renamed into place, so a reader sees a whole file or none. As for
``cache_dir`` of :func:`corral.compile`, the checksum has no secret: it protects against
damage and mismatch, not against a forger, and the folder must be as trusted as the
code that uses it. (A CRC-32 finds every error of up to 32 bits in a row and misses
other damage once in 4 billion; it reads Llama-3's arrays in 3.7 ms, SHA-256 in 12.8.)

Reading Llama-3's trie (26.6 MB) in a new process is mapping its file (on POSIX) and its
checksum, 4.4 ms (3.8 of them the checksum), then the checks. The file is mapped
read-only rather than read into a fresh buffer, so its arrays are the page cache's pages,
not a copy: reading it took 7-8 ms, and now and then 60 ms (one run in four, in fresh
processes: the kernel finding and clearing 26 MB of new memory). The mapping lives as
long as the trie's arrays. Files are only ever replaced by a rename, never written in
place, so a mapped file does not change under its reader (a file replaced or removed
keeps its pages for the readers that mapped it).

Vocabularies under :data:`MIN_TOKENS` tokens (built in milliseconds) are not stored; at
most :data:`MAX_FILES` files are kept, the least recently read or written removed first.
``CORRAL_TRIE_CACHE=0`` turns reading and writing off. An error of the file system on
writing (a read-only home, a full disk) is ignored: the trie in memory is the same
either way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import mmap
import os
import struct
import warnings
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from ..errors import CacheWarning
from ..user_cache import cache_dir, write_file

if TYPE_CHECKING:
    from .vocabulary import TokenTrie

__all__ = ["MAX_FILES", "MIN_TOKENS", "load", "store", "trie_folder"]

MAGIC = b"CORRALTRIE"
#: the layout's number: raised when the file's layout or the trie's fields change meaning
FORMAT = 2
#: vocabularies with fewer tokens are not stored (their tries build in milliseconds)
MIN_TOKENS = 16_384
#: the most trie files kept in the folder
MAX_FILES = 8
_ALIGN = 64
_PREFIX = struct.Struct("<II")  # format, header length
_NODE_FIELDS = (  # fields with one entry per node (the first axis)
    "node_byte",
    "depth",
    "subtree_end",
    "tok_start",
    "tok_count",
    "depth_small",
    "frontier_begin",
    "frontier_end",
    "plain_height",
    "plain_below",
    "char_frontier_begin",
    "char_frontier_end",
    "char_height",
    "char_below",
    "chars",
    "large_index",
)


#: the sources that decide what a trie holds: a file built by other sources is not read
_BUILDERS = (
    "trie_file.py",
    "vocabulary.py",
    "kernels/trie.py",
    "kernels/mask.py",
    "../grammar/regex/dawg.py",
)


@functools.lru_cache(maxsize=1)
def builder_digest() -> str:
    """A digest of the sources that build the trie (:data:`_BUILDERS`): a file written
    by another version of them, even one with the same :data:`FORMAT`, is not read.
    ``""`` where the sources cannot be read (then no file is read or written)."""
    h = hashlib.blake2b(digest_size=16)
    here = Path(__file__).parent
    try:
        for name in _BUILDERS:
            h.update((here / name).read_bytes())
    except OSError:
        return ""
    return h.hexdigest()


def enabled() -> bool:
    """Whether tries are read from and written to disk: ``CORRAL_TRIE_CACHE`` is not 0
    and the sources that build a trie can be read (:func:`builder_digest`)."""
    return os.environ.get("CORRAL_TRIE_CACHE", "1") != "0" and bool(builder_digest())


def trie_folder() -> Path:
    """The folder of trie files (not created here)."""
    return cache_dir() / "tries"


def _path(vocab_hash: str) -> Path:
    return trie_folder() / f"{vocab_hash}.trie"


def _fields(trie: TokenTrie) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    arrays: dict[str, np.ndarray] = {}
    ints: dict[str, int] = {}
    for f in dataclasses.fields(trie):
        value = getattr(trie, f.name)
        if isinstance(value, np.ndarray):
            arrays[f.name] = value
        else:
            ints[f.name] = int(value)
    return arrays, ints


def _rounded(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def store(trie: TokenTrie, vocab_hash: str) -> Path | None:
    """Write ``trie`` as the trie of the vocabulary whose hash is ``vocab_hash``; returns
    the file, or ``None`` when nothing was written (turned off, or the file system
    refused). Older files past :data:`MAX_FILES` are removed."""
    if not enabled():
        return None
    arrays, ints = _fields(trie)
    entries = []
    size = 0
    for name, a in arrays.items():
        entries.append([name, a.dtype.str, list(a.shape), size])
        size += _rounded(a.nbytes)
    body = np.zeros(size, np.uint8)
    for (_name, _dtype, _shape, at), a in zip(entries, arrays.values(), strict=True):
        body[at : at + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    head = json.dumps(
        {
            "hash": vocab_hash,
            "builder": builder_digest(),
            "ints": ints,
            "arrays": entries,
            "data": size,
            "crc32": f"{zlib.crc32(body.data):08x}",
        },
        separators=(",", ":"),
    ).encode()
    prefix = MAGIC + _PREFIX.pack(FORMAT, len(head)) + head
    path = _path(vocab_hash)
    padded = prefix + bytes(_rounded(len(prefix)) - len(prefix))
    if not write_file(path, (padded, body.data), tmp_prefix=".trie-"):
        return None
    _prune(path.parent)
    return path


def _prune(folder: Path) -> None:
    """Remove the least recently used trie files past :data:`MAX_FILES`."""
    files = []
    for p in folder.glob("*.trie"):
        try:
            files.append((p.stat().st_mtime, p))
        except OSError:
            continue
    files.sort(reverse=True)
    for _mtime, p in files[MAX_FILES:]:
        with contextlib.suppress(OSError):
            p.unlink()


def load(
    vocab_hash: str, n_tokens: int, vocab_size: int, token_bytes: int
) -> dict[str, Any] | None:
    """The fields of the stored trie of the vocabulary whose hash is ``vocab_hash``, with
    ``n_tokens`` tokens of ``token_bytes`` bytes in all in its trie and ``vocab_size``
    ids (read-only arrays and the integer fields, named as :class:`TokenTrie`'s), or
    ``None`` when there is none to read: no file, turned off, or a file written by other
    sources (after an upgrade), or a damaged one (a :class:`~corral.errors.CacheWarning`
    names it and what is wrong)."""
    if not enabled():
        return None
    path = _path(vocab_hash)
    # a trie has at most one node a token byte and takes about 100 bytes a node: a larger
    # file is not read into memory
    limit = 256 * (token_bytes + 1) + (1 << 20)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            data = None if size > limit else _contents(f, size)
    except OSError:
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: pruned last
    if data is None:
        fields: dict[str, Any] | str | None = f"{size:,} bytes, more than such a trie takes"
    else:
        fields = _parse(data, vocab_hash)
    if isinstance(fields, dict) and not _consistent(fields, n_tokens, vocab_size):
        fields = "its arrays disagree with one another or with the vocabulary"
    if isinstance(fields, str):
        warnings.warn(
            f"trie file {path} ignored ({fields}); the trie is built again",
            CacheWarning,
            stacklevel=2,
        )
        return None
    return fields


def _contents(f: BinaryIO, size: int) -> np.ndarray:
    """The ``size`` bytes of the open file ``f`` as a read-only ``uint8`` array: its pages
    mapped where the platform maps files (POSIX), else read into memory."""
    if size > 0 and os.name == "posix":
        return np.frombuffer(mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ), np.uint8)
    return np.fromfile(f, dtype=np.uint8)


def _parse(data: np.ndarray, vocab_hash: str) -> dict[str, Any] | str | None:
    """The fields held by ``data``, a whole file's bytes; ``None`` for a file of another
    format or other sources; what is wrong with a damaged one."""
    n0 = len(MAGIC) + _PREFIX.size
    if data.shape[0] < n0 or data[: len(MAGIC)].tobytes() != MAGIC:
        return "not a trie file"
    fmt, head_len = _PREFIX.unpack(data[len(MAGIC) : n0].tobytes())
    if fmt != FORMAT:
        return None
    if n0 + head_len > data.shape[0]:
        return "truncated"
    try:
        header = json.loads(data[n0 : n0 + head_len].tobytes())
        if header["builder"] != builder_digest():
            return None
        if header["hash"] != vocab_hash:
            return "written for another vocabulary"
        start = _rounded(n0 + head_len)
        if start + int(header["data"]) != data.shape[0]:
            return "truncated or extended"
        if f"{zlib.crc32(data[start:].data):08x}" != header["crc32"]:
            return "its arrays do not match their checksum"
        out: dict[str, Any] = {k: int(v) for k, v in header["ints"].items()}
        for name, dtype, shape, at in header["arrays"]:
            dt = np.dtype(dtype)
            lo = start + int(at)
            hi = lo + int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            if lo % _ALIGN or hi > data.shape[0]:
                return f"array {name!r} lies outside the file"
            if dt.kind not in "iu" or not dt.isnative:
                return f"array {name!r} is not of native integers"
            a = data[lo:hi].view(dt).reshape(shape)
            a.setflags(write=False)
            out[name] = a
    except (KeyError, TypeError, ValueError) as e:
        return f"unreadable header: {e}"
    return out


def _within(a: np.ndarray, lo: int, hi: int) -> bool:
    """Whether every value of ``a`` lies in ``[lo, hi]``."""
    return a.size == 0 or (int(a.min()) >= lo and int(a.max()) <= hi)


def _consistent(f: dict[str, Any], n_tokens: int, vocab_size: int) -> bool:
    """Whether the fields are :class:`TokenTrie`'s and agree with one another and with
    the vocabulary: one entry per node where there should be, and every index within
    the array it indexes (the kernels do not check bounds)."""
    from .vocabulary import TokenTrie

    if set(f) != {field.name for field in dataclasses.fields(TokenTrie)}:
        return False
    try:
        n = int(f["node_byte"].shape[0])
        if n < 1 or any(int(f[k].shape[0]) != n for k in _NODE_FIELDS):
            return False
        if f["child_start"].shape != (n + 1,) or f["rank_at"].shape != (n + 1,):
            return False
        if f["children"].shape != (n - 1,) or f["plain"].shape != (256,):
            return False
        if f["token_ids"].shape != (n_tokens,) or f["all_ids"].shape != (-(-vocab_size // 32),):
            return False
        n_front, n_char = int(f["frontier"].shape[0]), int(f["char_frontier"].shape[0])
        n_large = int(f["n_large"])
        return (
            int(f["subtree_end"][0]) == n
            and int(f["rank_at"][-1]) == n_tokens
            and _within(f["subtree_end"], 1, n)
            and _within(f["depth"], 0, int(f["max_depth"]))
            and _within(f["tok_start"], 0, n_tokens)
            and _within(f["tok_count"], 0, n_tokens)
            and _within(f["tok_start"].astype(np.int64) + f["tok_count"], 0, n_tokens)
            and _within(f["token_ids"], 0, vocab_size - 1)
            and _within(f["child_start"], 0, n - 1)
            and _within(f["children"], 1, n - 1)
            and _within(f["rank_at"], 0, n_tokens)
            and _within(f["frontier"], 0, n - 1)
            and _within(f["frontier_begin"], 0, n_front)
            and _within(f["frontier_end"], 0, n_front)
            and _within(f["char_frontier"], 0, n - 1)
            and _within(f["char_frontier_begin"], 0, n_char)
            and _within(f["char_frontier_end"], 0, n_char)
            and _within(f["large_index"], -1, n_large - 1)
            and n_large == int((f["large_index"] >= 0).sum())
        )
    except (KeyError, IndexError, TypeError, ValueError):
        return False
