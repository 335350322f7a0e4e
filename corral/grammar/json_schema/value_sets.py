"""What a subschema allows, where that is easy to know exactly: its JSON types, or its
finite set of values.

The translator uses these to express keywords that a grammar cannot express in general
but can in the cases they describe (``not`` of a type, ``if`` on a type, ``uniqueItems``
over a finite set of values), and to find schemas that no value satisfies before any
token work, instead of letting generation dead-end at the final check.

Types are read as *kinds* of JSON values: ``null``, ``boolean``, ``object``, ``array``,
``string``, ``int`` (numbers with an integer spelling) and ``frac`` (the other numbers).
``"number"`` is ``{int, frac}`` and ``"integer"`` is ``{int}``; corral's grammar writes
integers without a fraction, so ``frac`` alone (a number that is not an integer) has no
type name and is not expressible as a ``type``.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = [
    "ALL_KINDS",
    "accepts_everything",
    "distinct_choice_possible",
    "finite_values",
    "kinds_of",
    "surely_empty",
    "type_of_kinds",
    "value_key",
]

ALL_KINDS = frozenset({"null", "boolean", "object", "array", "string", "int", "frac"})
_KINDS = {
    "null": {"null"},
    "boolean": {"boolean"},
    "object": {"object"},
    "array": {"array"},
    "string": {"string"},
    "integer": {"int"},
    "number": {"int", "frac"},
}


def _only(schema: dict[str, Any], annotations: frozenset[str], allowed: set[str]) -> bool:
    return all(k in allowed or k in annotations for k in schema)


def kinds_of(schema: Any, annotations: frozenset[str]) -> frozenset[str] | None:
    """The kinds of values ``schema`` accepts when it says nothing but its type (``True``,
    ``{}``, ``{"type": ...}``, ``False``); ``None`` when it has other keywords."""
    if schema is True:
        return ALL_KINDS
    if schema is False:
        return frozenset()
    if not isinstance(schema, dict) or not _only(schema, annotations, {"type"}):
        return None
    t = schema.get("type")
    if t is None:
        return ALL_KINDS
    names = [t] if isinstance(t, str) else list(t)
    out: set[str] = set()
    for name in names:
        if name not in _KINDS:
            return None
        out |= _KINDS[name]
    return frozenset(out)


def type_of_kinds(kinds: frozenset[str]) -> list[str] | None:
    """A ``type`` value meaning exactly ``kinds`` (``None``: ``frac`` without ``int``)."""
    if "frac" in kinds and "int" not in kinds:
        return None
    out = sorted(k for k in kinds if k not in ("int", "frac"))
    if "frac" in kinds:
        out.append("number")
    elif "int" in kinds:
        out.append("integer")
    return out


def accepts_everything(schema: Any, annotations: frozenset[str]) -> bool:
    """Whether ``schema`` accepts every JSON value (``True``, ``{}``, annotations only, or
    a ``type`` naming every kind)."""
    return kinds_of(schema, annotations) == ALL_KINDS


def surely_empty(schema: Any, annotations: frozenset[str]) -> bool:
    """Whether ``schema`` obviously accepts no value (``False``, an empty ``type`` or
    ``enum``, or ``not`` of a schema that accepts everything). ``False`` means "not
    obviously", not "satisfiable"."""
    if schema is False:
        return True
    if not isinstance(schema, dict):
        return False
    if schema.get("enum") == [] or schema.get("type") == []:
        return True
    return "not" in schema and accepts_everything(schema["not"], annotations)


def finite_values(schema: Any, annotations: frozenset[str]) -> list[Any] | None:
    """The values ``schema`` accepts when they are few and plain to see (a ``const``, an
    ``enum``, ``boolean`` or ``null`` types, nothing else that restricts them), as a list
    of distinct JSON values; ``None`` when not known to be finite. Values are distinct as
    JSON values (``1`` and ``1.0`` are one value)."""
    if schema is False:
        return []
    if not isinstance(schema, dict):
        return None
    values: list[Any] | None = None
    if "const" in schema:
        values = [schema["const"]]
    if "enum" in schema:
        enum = list(schema["enum"])
        in_enum = {value_key(x) for x in enum}
        values = enum if values is None else [v for v in values if value_key(v) in in_enum]
    kinds = kinds_of({k: v for k, v in schema.items() if k not in ("const", "enum")}, annotations)
    if values is not None:
        if kinds is None:
            return None  # other keywords filter the values: not plain to see
        return _distinct(v for v in values if _kind(v) in kinds)
    if kinds is None or not kinds <= {"null", "boolean"}:
        return None
    return [*([None] if "null" in kinds else []), *([True, False] if "boolean" in kinds else [])]


def distinct_choice_possible(choices: list[list[Any]]) -> bool:
    """Whether each position can take a different value, position ``i`` choosing from
    ``choices[i]`` (a system of distinct representatives: a bipartite matching)."""
    match: dict[str, int] = {}  # value key -> position
    keyed = [[value_key(v) for v in c] for c in choices]

    def place(i: int, seen: set[str]) -> bool:
        for v in keyed[i]:
            if v in seen:
                continue
            seen.add(v)
            if v not in match or place(match[v], seen):
                match[v] = i
                return True
        return False

    return all(place(i, set()) for i in range(len(choices)))


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "int" if math.isfinite(v) and v == int(v) else "frac"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def value_key(v: Any) -> str:
    """A canonical spelling of a JSON value: equal values (``1``, ``1.0``) get one key."""

    def norm(x: Any) -> Any:
        if isinstance(x, float) and math.isfinite(x) and x == int(x):
            return int(x)
        if isinstance(x, list):
            return [norm(i) for i in x]
        if isinstance(x, dict):
            return {k: norm(i) for k, i in x.items()}
        return x

    return json.dumps(norm(v), sort_keys=True, ensure_ascii=False)


def _distinct(values: Any) -> list[Any]:
    seen: set[str] = set()
    out = []
    for v in values:
        k = value_key(v)
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out
