"""Python's Unicode classes ``\\d``, ``\\s`` and ``\\w``, kept on disk between processes.

What ``\\d``, ``\\s`` and ``\\w`` match in a ``str`` pattern is decided by the running
Python's Unicode tables. :func:`charset.python_class` finds each set exactly by letting
``re`` scan all 1,112,064 code points: 8-10 ms of CPU a class, once per process. That was
a fifth of the first compile of a grammar that uses ``\\s`` (SynCode's Java and PDDL
grammars, Lark's own) in a new process.

So the three sets are computed together the first time a process needs one of them and
kept in ``<cache_dir>/unicode/<python>-ucd<version>.json`` (:func:`corral.user_cache.cache_dir`),
named by the Python implementation and full version and ``unicodedata.unidata_version``:
another Python, or the same one with other Unicode tables, reads another file. Later
processes read the file (well under a millisecond) instead of scanning.

A file must never change what a pattern matches, so it is read only when it names the
same Python and Unicode version, has exactly the three classes, each a list of sorted,
disjoint ranges of code points, and its CRC-32 over those ranges matches. Anything else
is a :class:`~corral.errors.CacheWarning`, and the sets are computed and the file written
again. Files are written to a temporary name and renamed into place. An error of the file
system on writing is ignored: the sets in memory are the same either way.
``CORRAL_UNICODE_CACHE=0`` turns reading and writing off.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import sys
import tempfile
import unicodedata
import warnings
import zlib
from pathlib import Path
from typing import Any

from ...errors import CacheWarning
from ...user_cache import cache_dir
from .charset import MAX_CODE_POINT, CharSet, python_class

__all__ = ["CLASSES", "unicode_class"]

CLASSES = ("\\d", "\\s", "\\w")
"""The classes kept: ``re``'s digit, space and word characters of ``str`` patterns."""

_FORMAT = 1


def enabled() -> bool:
    """Whether the file is read and written (``CORRAL_UNICODE_CACHE`` is not ``0``)."""
    return os.environ.get("CORRAL_UNICODE_CACHE", "1") != "0"


def _identity() -> dict[str, str]:
    """What decides the sets: the Python (implementation and version) and its Unicode
    tables' version."""
    return {
        "python": f"{sys.implementation.name}-{platform.python_version()}",
        "unicode": unicodedata.unidata_version,
    }


def _path() -> Path:
    ident = _identity()
    return cache_dir() / "unicode" / f"{ident['python']}-ucd{ident['unicode']}.json"


def _digest(classes: dict[str, list[list[int]]]) -> str:
    """CRC-32 of the ranges of the three classes, in :data:`CLASSES` order."""
    body = json.dumps([classes[c] for c in CLASSES], separators=(",", ":"))
    return f"{zlib.crc32(body.encode()):08x}"


@functools.cache
def _all_classes() -> dict[str, CharSet]:
    """The three sets, from the file when it holds them, else computed and stored."""
    path = _path()
    stored = _read(path)
    if stored is not None:
        return stored
    sets = {c: python_class(c) for c in CLASSES}
    _write(path, sets)
    return sets


def unicode_class(source: str) -> CharSet:
    """The code points that ``re`` matches with ``source`` (one of :data:`CLASSES`) in a
    ``str`` pattern without ``re.ASCII``: :func:`charset.python_class`'s set, read from
    the file where an earlier process kept it (with the file turned off, that one set
    is computed)."""
    if source not in CLASSES:
        raise ValueError(f"not one of {CLASSES}: {source!r}")
    if not enabled():
        return python_class(source)
    return _all_classes()[source]


def _read(path: Path) -> dict[str, CharSet] | None:
    """The sets held by the file at ``path``, or ``None`` (none, or rejected with a
    :class:`CacheWarning` saying why)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    problem = None
    try:
        data = json.loads(text)
        problem = _problem(data)
    except ValueError as e:
        problem = f"unreadable: {e}"
    if problem is not None:
        warnings.warn(
            f"Unicode class file {path} ignored ({problem}); the classes are computed again",
            CacheWarning,
            stacklevel=3,
        )
        return None
    return {c: CharSet(tuple(r) for r in data["classes"][c]) for c in CLASSES}


def _problem(data: Any) -> str | None:
    """What is wrong with the file's decoded JSON ``data``, or ``None``."""
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return "another format"
    if data.get("built") != _identity():
        return "written by another Python or for other Unicode tables"
    classes = data.get("classes")
    if not isinstance(classes, dict) or set(classes) != set(CLASSES):
        return "not the three classes"
    for name in CLASSES:
        ranges = classes[name]
        if not isinstance(ranges, list):
            return f"{name} is not a list of ranges"
        prev = -2
        for r in ranges:
            if not (
                isinstance(r, list)
                and len(r) == 2
                and all(type(x) is int for x in r)
                and prev + 1 < r[0] <= r[1] <= MAX_CODE_POINT
            ):
                return f"{name} has a range out of order or out of bounds: {r!r}"
            prev = r[1]
    if data.get("crc32") != _digest(classes):
        return "its ranges do not match their checksum"
    return None


def _write(path: Path, sets: dict[str, CharSet]) -> None:
    """Store ``sets`` at ``path`` (a temporary file renamed into place); errors of the
    file system are ignored."""
    classes = {c: [list(r) for r in sets[c].ranges] for c in CLASSES}
    data = {"format": _FORMAT, "built": _identity(), "classes": classes, "crc32": _digest(classes)}
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".unicode-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, separators=(",", ":"))
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
