"""Entity sets: a string that must be one of a large set of names.

Entity linking, catalogues and knowledge-base ids ask a model for one name out of
thousands to millions. An :class:`EntitySet` holds such a set and compiles it once (per
encoding) into its minimal automaton, a DAWG (``regex/dawg.py``), kept as sparse rows
(``regex/sparse.py``): a million place names of 13 bytes on average become 1.7 million
states and 2.6 million transitions, 29 MB. The token masks walk the vocabulary only along
names that are still possible, so their cost depends on the vocabulary and the prefix,
not on the number of names.

Use it from a JSON Schema with ``{"type": "string", "x-corral-entities": "cities"}`` and
``entities={"cities": EntitySet(...)}`` at compile time, or from Lark by declaring a
terminal (``%declare CITY``) that ``entities`` names. A JSON Schema ``enum`` of many
strings takes the same automaton without being asked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import ArgumentTypeError, InvalidArgumentError
from .regex.dawg import dawg
from .regex.sparse import SparseDFA
from .spans import json_string_bytes, sources_digest

__all__ = ["ENCODINGS", "MAX_CHARS", "EntitySet", "entity_sets"]

MAX_CHARS = 64_000_000
"""Default budget of an entity set's characters, all names together (a million names of 13
bytes peaked at 0.7 GB of traced memory, from the set to the first mask; this allows
about five times as many characters)."""

ENCODINGS = ("json", "raw")
"""``"json"``: each name as a canonical JSON string, quotes included (what a JSON value
spells); ``"raw"``: its UTF-8 bytes (a Lark terminal)."""


class EntitySet:
    """An immutable set of names (non-empty strings), with its automata built on demand.

    Args:
        names: the names; duplicates are merged. An empty name is refused (a JSON
            ``enum`` can hold ``""``; an entity name cannot be empty).
        label: what messages call the set (default: its size).
        max_chars: the most characters all names may hold together (a budget on the
            memory and time the automaton takes; see :data:`MAX_CHARS`).

    Raises:
        TypeError: a name that is not a ``str``.
        ValueError: an empty name, no names at all, or more than ``max_chars``
            characters.
    """

    def __init__(
        self, names: Iterable[str], *, label: str | None = None, max_chars: int = MAX_CHARS
    ) -> None:
        if isinstance(names, (str, bytes)):
            raise ArgumentTypeError("names must be an iterable of strings, not one string")
        kept: set[str] = set()
        chars = 0
        for i, n in enumerate(names):
            if type(n) is not str:
                raise ArgumentTypeError(f"entity name {i} is a {type(n).__name__}, not a str")
            if not n:
                raise InvalidArgumentError(f"entity name {i} is empty")
            chars += len(n)
            if chars > max_chars:
                raise InvalidArgumentError(
                    f"the entity names hold more than max_chars={max_chars:,} characters "
                    f"(at name {i}); pass a larger max_chars if the memory is there"
                )
            kept.add(n)
        if not kept:
            raise InvalidArgumentError("an entity set needs at least one name")
        self._names = frozenset(kept)
        self.label = label or f"{len(kept)} names"
        self._digest: str | None = None
        self._dfas: dict[str, SparseDFA] = {}

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, encoding: str = "utf-8") -> EntitySet:
        """The names in a text file, one a line. Line ends (``\\n``, ``\\r\\n``) are not
        part of a name; blank lines are skipped; other whitespace is kept.

        Raises:
            OSError: the file cannot be read.
            ValueError: the file is not valid text in ``encoding``, or has no names.
        """
        try:
            with open(path, encoding=encoding, newline="") as f:
                names = [line.rstrip("\r\n") for line in f]
        except UnicodeDecodeError as e:
            raise InvalidArgumentError(f"{os.fspath(path)}: not {encoding} text ({e})") from e
        return cls((n for n in names if n.strip()), label=os.path.basename(os.fspath(path)))

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names))

    def __repr__(self) -> str:
        return f"EntitySet({self.label!r})"

    @property
    def longest(self) -> int:
        """The characters of the longest name."""
        return max(map(len, self._names))

    @property
    def digest(self) -> str:
        """A SHA-256 hex digest of the names (for compile-cache keys)."""
        if self._digest is None:
            self._digest = sources_digest(sorted(self._names))
        return self._digest

    def dfa(self, encoding: str) -> SparseDFA:
        """The minimal automaton of the names in ``encoding`` (see :data:`ENCODINGS`),
        built once per set and encoding."""
        if encoding not in ENCODINGS:
            raise InvalidArgumentError(f"encoding must be one of {ENCODINGS}, not {encoding!r}")
        d = self._dfas.get(encoding)
        if d is None:
            d = self._dfas[encoding] = dawg(_encoded(self._names, encoding))
        return d


def _encoded(names: Iterable[str], encoding: str) -> Iterator[bytes]:
    if encoding == "json":
        for n in names:
            yield json_string_bytes(n)
    else:
        for n in names:
            yield n.encode("utf-8", "surrogatepass")


def entity_sets(value: Any) -> dict[str, EntitySet]:
    """``entities=`` as given by a caller, checked: a mapping of names to
    :class:`EntitySet` (an iterable of strings is made into one).

    Raises:
        TypeError: not a mapping, or a key that is not a ``str``.
    """
    if not isinstance(value, Mapping):
        raise ArgumentTypeError(
            f"entities must map names to corral.EntitySet, not a {type(value).__name__}"
        )
    out: dict[str, EntitySet] = {}
    for k, v in value.items():
        if type(k) is not str:
            raise ArgumentTypeError(f"entity set names must be str, not {type(k).__name__}")
        out[k] = v if isinstance(v, EntitySet) else EntitySet(v, label=k)
    return out


def entities_key(sets: Mapping[str, EntitySet]) -> str:
    """The compile-cache key of ``entities=`` (names and digests, not the names' text)."""
    return json.dumps({k: sets[k].digest for k in sorted(sets)})
