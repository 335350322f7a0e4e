"""What corral asks of the running Python's Unicode tables, kept on disk between processes.

Two things a regular expression can need depend on those tables, and each costs a new
process a scan:

- **the classes ``\\d``, ``\\s`` and ``\\w``** of ``str`` patterns:
  :func:`charset.python_class` finds each set exactly by letting ``re`` scan all 1,112,064
  code points, 8-13 ms of CPU a class. That was a fifth of the first compile of a grammar
  that uses ``\\s`` (SynCode's Java and PDDL grammars, Lark's own) in a new process;
- **the characters where case-insensitive matching can differ from plain matching**
  (:func:`charset.case_related`), found by asking ``re``'s tables about 131,072 code
  points: 5-10 ms, paid by every grammar with a case-insensitive terminal (SynCode's
  SQL grammar writes 118 case-insensitive strings).

Both are computed together the first time a process needs either and kept in
``<cache_dir>/unicode/<python>-ucd<version>.json`` (:func:`corral.user_cache.cache_dir`),
named by the Python implementation and full version and ``unicodedata.unidata_version``:
another Python, or the same one with other Unicode tables, reads another file. Later
processes read the file (1.3 ms) instead of scanning.

A file must never change what a pattern matches, so it is read only when it names the
same Python and Unicode version, holds exactly the expected sets, each a list of sorted,
disjoint ranges of code points, and its CRC-32 over those ranges matches. A file of
another layout (another corral) is passed over silently; anything else with a
:class:`~corral.errors.CacheWarning`. Either way the sets are computed and the file
written again. Files are written to a temporary name and renamed into place. An error of
the file system on writing is ignored: the sets in memory are the same either way.
``CORRAL_UNICODE_CACHE=0`` turns reading and writing off (each set is then computed when
needed).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import sys
import unicodedata
import warnings
import zlib
from pathlib import Path
from typing import Any

from ...errors import CacheWarning
from ...user_cache import cache_dir, write_file
from .charset import (
    MAX_CODE_POINT,
    CaseRelated,
    CharSet,
    case_related_points,
    python_class,
)
from .charset import case_related as _computed_case_related

__all__ = ["CLASSES", "case_related", "unicode_class"]

CLASSES = ("\\d", "\\s", "\\w")
"""The classes kept: ``re``'s digit, space and word characters of ``str`` patterns."""

_CASE = "case-related"
"""The file's name for :func:`charset.case_related`'s code points (``null`` where this
Python's ``re`` does not expose them)."""

_FORMAT = 2


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


def _digest(sets: dict[str, Any]) -> str:
    """CRC-32 of the ranges of the kept sets, in :data:`CLASSES` order, then :data:`_CASE`."""
    body = json.dumps([sets[c] for c in (*CLASSES, _CASE)], separators=(",", ":"))
    return f"{zlib.crc32(body.encode()):08x}"


class _Tables:
    """What the file holds: the three classes and the case-related characters."""

    def __init__(self, classes: dict[str, CharSet], related: CaseRelated | None) -> None:
        self.classes = classes
        self.related = related


@functools.cache
def _tables() -> _Tables:
    """The kept sets, from the file when it holds them, else computed and stored."""
    path = _path()
    stored = _read(path)
    if stored is not None:
        return stored
    points = case_related_points()
    related = None if points is None else CaseRelated(CharSet.of_points(points))
    tables = _Tables({c: python_class(c) for c in CLASSES}, related)
    _write(path, tables)
    return tables


def unicode_class(source: str) -> CharSet:
    """The code points that ``re`` matches with ``source`` (one of :data:`CLASSES`) in a
    ``str`` pattern without ``re.ASCII``: :func:`charset.python_class`'s set, read from
    the file where an earlier process kept it (with the file turned off, that one set
    is computed)."""
    if source not in CLASSES:
        raise ValueError(f"not one of {CLASSES}: {source!r}")
    if not enabled():
        return python_class(source)
    return _tables().classes[source]


def case_related() -> CaseRelated | None:
    """:func:`charset.case_related`, read from the file where an earlier process kept it
    (computed with the file turned off); ``None`` where this Python's ``re`` does not
    expose what it needs."""
    if not enabled():
        return _computed_case_related()
    return _tables().related


def _ranges(cs: CharSet) -> list[list[int]]:
    """``cs`` as the file writes it: a list of ``[lo, hi]``."""
    return [list(r) for r in cs.ranges]


def _charset(ranges: list[list[int]]) -> CharSet:
    """The set of the file's ``ranges`` (the inverse of :func:`_ranges`)."""
    return CharSet((lo, hi) for lo, hi in ranges)


def _read(path: Path) -> _Tables | None:
    """The sets held by the file at ``path``, or ``None`` (none, or rejected with a
    :class:`CacheWarning` saying why)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    problem = None
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            return None  # another corral's layout: written again, silently
        problem = _problem(data)
    except ValueError as e:
        problem = f"unreadable: {e}"
    if problem is not None:
        warnings.warn(
            f"Unicode table file {path} ignored ({problem}); the sets are computed again",
            CacheWarning,
            stacklevel=4,
        )
        return None
    sets = data["sets"]
    related = None if sets[_CASE] is None else CaseRelated(_charset(sets[_CASE]))
    return _Tables({c: _charset(sets[c]) for c in CLASSES}, related)


def _problem(data: Any) -> str | None:
    """What is wrong with the file's decoded JSON ``data``, or ``None``."""
    if data.get("built") != _identity():
        return "written by another Python or for other Unicode tables"
    sets = data.get("sets")
    if not isinstance(sets, dict) or set(sets) != {*CLASSES, _CASE}:
        return "not the expected sets"
    for name in (*CLASSES, _CASE):
        ranges = sets[name]
        if name == _CASE and ranges is None:
            continue
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
    if data.get("crc32") != _digest(sets):
        return "its ranges do not match their checksum"
    return None


def _write(path: Path, tables: _Tables) -> None:
    """Store ``tables`` at ``path`` (a temporary file renamed into place); errors of the
    file system are ignored."""
    sets: dict[str, Any] = {c: _ranges(tables.classes[c]) for c in CLASSES}
    sets[_CASE] = None if tables.related is None else _ranges(tables.related.chars)
    data = {"format": _FORMAT, "built": _identity(), "sets": sets, "crc32": _digest(sets)}
    write_file(path, (json.dumps(data, separators=(",", ":")).encode(),), tmp_prefix=".unicode-")
