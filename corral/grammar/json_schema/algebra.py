"""Schema algebra: ``allOf`` of two schemas written as one schema (their intersection).

Pure functions on schema dicts; they note nothing and build no grammar. Keywords merge
one by one (:func:`merge_keyword`): types are intersected, bounds tightened,
``required`` united, ``enum`` filtered, ``properties`` and the item/name subschemas
become an ``allOf`` of both; two different values of any other keyword do not merge,
and the caller keeps a superset (the final check enforces the rest). References in the
second schema are resolved through a callback (see :class:`Merger`), so a merged schema
can be translated in the first one's scope.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .keywords import ANNOTATIONS
from .refs import absolute_refs, base_uri

__all__ = [
    "NO_MERGE",
    "Merger",
    "canonical",
    "json_equal_in",
    "merge_keyword",
    "only_annotations",
]


def canonical(value: Any) -> str:
    """``value`` as compact JSON text, keys in their order (the grammar's spelling)."""
    if type(value) is str:  # property names, mostly: what json.dumps does for a string
        return _encode_string(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


_encode_string = json.encoder.encode_basestring  # type: ignore[attr-defined]


def _normal_number(x: Any) -> Any:
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, list):
        return [_normal_number(v) for v in x]
    if isinstance(x, dict):
        return {k: _normal_number(v) for k, v in sorted(x.items())}
    return x


def json_equal_in(x: Any, values: list[Any]) -> bool:
    """Whether JSON value ``x`` equals one of ``values`` (``1`` equals ``1.0``; key order
    does not matter; ``true`` is not ``1``)."""
    cx = canonical(_normal_number(x))
    return any(cx == canonical(_normal_number(v)) for v in values)


class _NoMerge:
    def __repr__(self) -> str:
        return "NO_MERGE"


NO_MERGE: Any = _NoMerge()
"""What :func:`merge_keyword` returns for two values of a keyword with no single value."""


def merge_keyword(k: str, a: Any, b: Any) -> Any:
    """The value of keyword ``k`` meaning both ``a`` and ``b``, or :data:`NO_MERGE`."""
    if canonical(a) == canonical(b):
        return a
    if k == "type":
        ta = {a} if isinstance(a, str) else set(a)
        tb = {b} if isinstance(b, str) else set(b)
        both = (ta & tb) | ({"integer"} if ("integer" in ta and "number" in tb) or
                            ("number" in ta and "integer" in tb) else set())  # fmt: skip
        return sorted(both)
    if k == "required":
        return list(dict.fromkeys([*a, *b]))
    if k in ("minimum", "minLength", "minItems", "minProperties", "exclusiveMinimum"):
        if isinstance(a, bool) or isinstance(b, bool):
            return NO_MERGE
        return max(a, b)
    if k in ("maximum", "maxLength", "maxItems", "maxProperties", "exclusiveMaximum"):
        if isinstance(a, bool) or isinstance(b, bool):
            return NO_MERGE
        return min(a, b)
    if k == "enum":
        return [x for x in a if json_equal_in(x, b)]
    if k == "properties":
        out = dict(a)
        for name, sub in b.items():
            out[name] = {"allOf": [out[name], sub]} if name in out else sub
        return out
    if k in ("items", "additionalProperties", "additionalItems", "propertyNames") and (
        isinstance(a, (dict, bool)) and isinstance(b, (dict, bool))
    ):
        if a is True:
            return b
        if b is True:
            return a
        if a is False or b is False:
            return False
        return {"allOf": [a, b]}
    if k == "allOf":
        return [*a, *b]
    return NO_MERGE


def only_annotations(schema: Any) -> bool:
    """Whether ``schema`` is a dict of annotations only (``{}`` included)."""
    return isinstance(schema, dict) and all(k in ANNOTATIONS for k in schema)


def _nontrivial(x: dict[str, Any], k: str) -> bool:
    return k in x and x[k] is not True and not only_annotations(x[k])


def _scope_conflict(x: dict[str, Any], y: dict[str, Any]) -> bool:
    """Whether a keyword of ``x`` that applies to what ``x``'s own siblings leave over
    would apply to less once ``y``'s keywords join them: ``additionalProperties`` beside
    properties of ``y`` that ``x`` does not list, ``items`` after ``y``'s longer
    ``prefixItems``, ``additionalItems`` after ``y``'s longer ``items`` array, and
    ``unevaluated*`` (which see only their own branch). Merging then would widen the
    language, so the branches stay apart (for the final check)."""
    if "unevaluatedProperties" in x or "unevaluatedItems" in x:
        return True
    if _nontrivial(x, "additionalProperties"):
        if set(y.get("properties", {})) - set(x.get("properties", {})):
            return True
        if y.get("patternProperties") and canonical(y["patternProperties"]) != canonical(
            x.get("patternProperties", {})
        ):
            return True
    prefix_x = x.get("prefixItems", [])
    if _nontrivial(x, "items") and len(y.get("prefixItems", [])) > len(prefix_x):
        return True
    items_x, items_y = x.get("items"), y.get("items")
    tuple_x = len(items_x) if isinstance(items_x, list) else 0
    tuple_y = len(items_y) if isinstance(items_y, list) else 0
    return _nontrivial(x, "additionalItems") and tuple_y > tuple_x


# keywords that are read together: an `if` applies its own branch's `then`/`else`, and
# `minContains`/`maxContains` count their own branch's `contains` (draft 4's boolean
# `exclusiveMinimum`/`exclusiveMaximum` qualify their own branch's bound)
_LINKED = (
    frozenset({"if", "then", "else"}),
    frozenset({"contains", "minContains", "maxContains"}),
)
_DRAFT4_BOUNDS = (
    frozenset({"minimum", "exclusiveMinimum"}),
    frozenset({"maximum", "exclusiveMaximum"}),
)


def _linked_conflict(x: dict[str, Any], y: dict[str, Any]) -> bool:
    """Whether ``x`` and ``y`` both hold keywords of a group that is read together, with
    different values (``{"if": A}`` and ``{"then": B}`` in two branches of an ``allOf``
    are not ``{"if": A, "then": B}``). Merging them would change what they mean."""
    groups = list(_LINKED)
    if any(
        isinstance(z.get(k), bool) for z in (x, y) for k in ("exclusiveMinimum", "exclusiveMaximum")
    ):
        groups.extend(_DRAFT4_BOUNDS)
    for group in groups:
        gx = {k: v for k, v in x.items() if k in group}
        gy = {k: v for k, v in y.items() if k in group}
        if gx and gy and canonical(gx) != canonical(gy):
            return True
    return False


# (reference, resolver) -> (target schema, the target's resolver)
Resolve = Callable[[str, Any], tuple[Any, Any]]


class Merger:
    """``allOf [a, b]`` as one schema.

    Attributes:
        id_keyword: ``"$id"`` (``"id"`` in draft 4): where embedded resources start.
        max_depth: references followed inside one merge before giving up (``None``).
        count: merges done so far, nested ones included (callers bound how far
            distributing siblings into branches may multiply a schema).
    """

    def __init__(self, *, id_keyword: str, max_depth: int = 32) -> None:
        self.id_keyword = id_keyword
        self.max_depth = max_depth
        self.count = 0

    def merge(self, a: Any, b: Any, resolver: Any, resolve: Resolve, *, depth: int = 1) -> Any:
        """A schema equivalent to ``allOf [a, b]``, or ``None`` if it cannot be written as
        one (the caller then keeps ``a`` and relies on the final check). ``b``'s
        references resolve from ``resolver``, followed by ``resolve``: ``(ref, resolver)
        -> (target, target resolver)``; the result's references resolve from the
        scope of ``a`` (those of ``b`` are made absolute). ``False``: no value.

        The result is ``a`` or ``b`` itself where the other says nothing, else a new
        dict."""
        if b is False or a is False:
            return False  # no value
        if b is True or only_annotations(b):
            return a if isinstance(a, dict) else {}
        if a is True or only_annotations(a):
            if isinstance(b, dict) and "$ref" not in b:
                return b  # the same object: recursion through it is found by identity
            a = {}
        if not isinstance(a, dict) or not isinstance(b, dict):
            return None
        self.count += 1
        if depth > self.max_depth:
            return None
        b = absolute_refs(b, base_uri(resolver) or "", self.id_keyword)
        if "$ref" in b:
            target, t_res = resolve(b["$ref"], resolver)
            rest = {k: v for k, v in b.items() if k != "$ref"}
            m = self.merge(rest, target, t_res, resolve, depth=depth + 1)
            if m is None or m is False:
                return m
            b = m
        if _scope_conflict(a, b) or _scope_conflict(b, a) or _linked_conflict(a, b):
            return None
        out = dict(a)
        for k, v in b.items():
            if k in ANNOTATIONS:
                continue
            if k not in out:
                out[k] = v
                continue
            m = merge_keyword(k, out[k], v)
            if m is NO_MERGE:
                return None
            out[k] = m
        return out
