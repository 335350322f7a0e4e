"""Rewriting ``not``, ``if``/``then``/``else`` and ``oneOf`` into what the grammar can
express, where that is exact.

In general these keywords are left to the final check (the grammar derives a superset).
Often they are simpler than that:

* ``not`` of a schema that only names types removes those types (``{"not": {"type":
  "string"}}`` is every other type; ``{"not": {}}`` is nothing at all);
* ``if`` that only names types splits the value by type: ``anyOf [if-types ∧ then,
  other types ∧ else]``; ``if`` that tests one property against a few values, where the
  property has a few values (a tagged union's discriminator), splits the object by that
  property's value; an ``if`` that holds for every value (or none) is just ``then`` (or
  ``else``); ``then`` and ``else`` both impossible leave nothing;
* ``oneOf`` branches that occur twice can never be the one branch that matches: they
  leave the union (exclusivity against them is still the final check's).

The rewritten keywords are reported as exact; a rewrite that finds no value at all makes
the schema empty, so an empty language is reported at compile time
(:class:`~corral.errors.EmptyLanguageError`) rather than as a dead end during generation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .keywords import ANNOTATIONS
from .load import pointer_join
from .value_sets import (
    ALL_KINDS,
    finite_values,
    kinds_of,
    surely_empty,
    type_of_kinds,
    value_key,
)

if TYPE_CHECKING:
    from .translate import Translator

__all__ = ["simplify"]


def simplify(
    b: Translator, schema: dict[str, Any], ptr: str, resolver: Any
) -> dict[str, Any] | None:
    """``schema`` with the rewrites of the module docs applied (a new dict when anything
    changed), or ``None`` when no value satisfies it."""
    out: dict[str, Any] | None = schema
    if "not" in schema:
        out = _not(b, schema, ptr, resolver)
    if out is not None and "if" in out:
        out = _if(b, out, ptr, resolver)
    if out is not None and "oneOf" in out:
        out = _one_of(b, out, ptr)
    return out


def _own_kinds(schema: dict[str, Any]) -> frozenset[str]:
    k = kinds_of({"type": schema["type"]}, ANNOTATIONS) if "type" in schema else ALL_KINDS
    return ALL_KINDS if k is None else k


def _not(b: Translator, schema: dict[str, Any], ptr: str, resolver: Any) -> dict[str, Any] | None:
    n_ptr = pointer_join(ptr, "not")
    sub, _, _ = b.deref(schema["not"], n_ptr, resolver)
    banned = kinds_of(sub, ANNOTATIONS)
    if banned is None:
        return schema  # the final check enforces it
    left = _own_kinds(schema) - banned
    if not left:
        b.findings.exact(n_ptr, "not", "no value is left")
        return None
    t = type_of_kinds(left)
    if t is None:
        return schema  # "a number that is not an integer" has no type name
    b.findings.exact(n_ptr, "not", "removes types")
    out = {k: v for k, v in schema.items() if k != "not"}
    if left != ALL_KINDS:
        out["type"] = t
    return b.synthetic(out)


def _if(b: Translator, schema: dict[str, Any], ptr: str, resolver: Any) -> dict[str, Any] | None:
    cond, _, _ = b.deref(schema["if"], pointer_join(ptr, "if"), resolver)
    then = schema.get("then", True)
    other = schema.get("else", True)
    rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
    kinds = kinds_of(cond, ANNOTATIONS)
    ann = ANNOTATIONS
    if any(isinstance(x, dict) and ("$id" in x or "id" in x) for x in (then, other)):
        return schema  # a resource of its own: moving it would change dynamic scopes
    if surely_empty(then, ann) and surely_empty(other, ann):
        _exact(b, schema, ptr, "neither branch admits a value")
        return None
    if kinds == ALL_KINDS:
        return _with(b, schema, ptr, resolver, rest, then)
    if kinds == frozenset():
        return _with(b, schema, ptr, resolver, rest, other)
    cases: list[tuple[Any, Any, str]] | None  # (condition, then or else, which)
    if kinds is None:
        cases = _property_cases(b, cond, rest, then, other, resolver, ptr)
        detail = "split by the property's value"
        if cases is None and b.loaded.draft != "4":
            cases = _bound_cases(cond, then, other)
            detail = "split by the bound"
        if cases is None and surely_empty(other, ann):  # every value must pass `if`, `then`
            return _with(b, schema, ptr, resolver, rest, {"allOf": [cond, then]})
    else:
        t_in, t_out = type_of_kinds(kinds), type_of_kinds(ALL_KINDS - kinds)
        cases = None
        if t_in is not None and t_out is not None:
            cases = [({"type": t_in}, then, "then"), ({"type": t_out}, other, "else")]
        detail = "split by type"
    if cases is None:
        return schema  # the final check enforces it
    branches, pointers = [], []
    for condition, part, kw in cases:
        p_ptr = pointer_join(ptr, kw)
        m = b.merge(condition, part, p_ptr, resolver)
        if m is None:
            return schema  # the final check enforces it
        if m is not False:
            branches.append(m)
            pointers.append(p_ptr)
    _exact(b, schema, ptr, detail)
    if not branches:
        return None
    out = dict(rest)
    if "anyOf" in out:
        out["allOf"] = [*out.get("allOf", []), b.union(branches, pointers)]
    else:
        out["anyOf"] = b.union(branches, pointers)["anyOf"]
    return b.synthetic(out)


def _property_cases(
    b: Translator, cond: Any, rest: dict[str, Any], then: Any, other: Any, resolver: Any, ptr: str
) -> list[tuple[Any, Any, str]] | None:
    """An ``if`` that tests one property against a finite set of values (the discriminator
    of a tagged union: ``{"properties": {"kind": {"const": "a"}}}``), where the schema
    gives that property a finite set of values too, as exact cases; ``None`` otherwise.

    ``if`` holds for a non-object, for an object without the property (unless ``if``
    requires it), and for one whose value is in the set. It fails for an object whose
    value is another of the property's values, or that lacks a property ``if`` requires
    (``"properties": {name: false}`` says the property is absent).
    """
    ann = ANNOTATIONS
    if not isinstance(cond, dict) or any(
        k not in ("properties", "required") and k not in ann for k in cond
    ):
        return None
    props = cond.get("properties", {})
    required = cond.get("required", [])
    if not isinstance(props, dict) or len(props) != 1 or any(r not in props for r in required):
        return None
    ((name, test),) = props.items()
    tested = finite_values(
        b.deref(test, pointer_join(ptr, "if", "properties", name), resolver)[0], ann
    )
    own = rest.get("properties", {}).get(name) if isinstance(rest.get("properties"), dict) else None
    values = (
        None
        if own is None
        else finite_values(b.deref(own, pointer_join(ptr, "properties", name), resolver)[0], ann)
    )
    if tested is None or values is None:
        return None
    keys = {value_key(v) for v in tested}
    others = [v for v in values if value_key(v) not in keys]
    yes: dict[str, Any] = {"properties": {name: {"enum": tested}}}
    if required:
        yes["required"] = [name]
    cases: list[tuple[Any, Any, str]] = [(yes, then, "then")]
    if others:
        cases.append(
            (
                {"type": "object", "properties": {name: {"enum": others}}, "required": [name]},
                other,
                "else",
            )
        )
    if required:
        cases.append(({"type": "object", "properties": {name: False}}, other, "else"))
    return cases


_NUMBERS = frozenset({"int", "frac"})
# bound keyword -> (the kinds it applies to, the keyword of its complement there, and the
# complement's value from the bound's; None when the bound holds for every such value)
_BOUNDS: dict[str, tuple[frozenset[str], str, Callable[[Any], Any]]] = {
    "minimum": (_NUMBERS, "exclusiveMaximum", lambda v: v),
    "exclusiveMinimum": (_NUMBERS, "maximum", lambda v: v),
    "maximum": (_NUMBERS, "exclusiveMinimum", lambda v: v),
    "exclusiveMaximum": (_NUMBERS, "minimum", lambda v: v),
    "minLength": (frozenset({"string"}), "maxLength", lambda n: n - 1 if n > 0 else None),
    "maxLength": (frozenset({"string"}), "minLength", lambda n: n + 1),
    "minItems": (frozenset({"array"}), "maxItems", lambda n: n - 1 if n > 0 else None),
    "maxItems": (frozenset({"array"}), "minItems", lambda n: n + 1),
    "minProperties": (frozenset({"object"}), "maxProperties", lambda n: n - 1 if n > 0 else None),
    "maxProperties": (frozenset({"object"}), "minProperties", lambda n: n + 1),
}


def _bound_cases(cond: Any, then: Any, other: Any) -> list[tuple[Any, Any, str]] | None:
    """An ``if`` that only bounds values of one family (numbers, string lengths, item or
    property counts), with an optional ``type``, as exact cases: the values that pass it
    take ``then``; the others (the types it excludes, and each bound broken in turn, the
    earlier ones kept) take ``else``. ``None`` for any other condition (and for drafts
    whose ``exclusiveMinimum`` is a flag)."""
    if not isinstance(cond, dict):
        return None
    bounds = [(k, v) for k, v in cond.items() if k in _BOUNDS]
    if not bounds or any(k != "type" and k not in _BOUNDS and k not in ANNOTATIONS for k in cond):
        return None
    family = _BOUNDS[bounds[0][0]][0]
    if any(_BOUNDS[k][0] != family for k, _ in bounds):
        return None
    own = _own_kinds(cond)
    cases: list[tuple[Any, Any, str]] = [(cond, then, "then")]
    if own != ALL_KINDS:
        t_out = type_of_kinds(ALL_KINDS - own)
        if t_out is None:
            return None
        cases.append(({"type": t_out}, other, "else"))
    inside = own & family
    if not inside:
        return cases
    t_in = type_of_kinds(inside)
    if t_in is None:
        return None
    for i, (k, v) in enumerate(bounds):
        _, opposite, flip = _BOUNDS[k]
        broken = flip(v)
        if broken is None:
            continue  # the bound holds for every value it applies to
        case = {"type": t_in, **dict(bounds[:i]), opposite: broken}
        cases.append((case, other, "else"))
    return cases


def _with(
    b: Translator, schema: dict[str, Any], ptr: str, resolver: Any, rest: dict[str, Any], part: Any
) -> dict[str, Any] | None:
    """``rest`` and ``part`` both, for an ``if`` decided without the value."""
    _exact(b, schema, ptr, "decided without the value")
    m = b.merge(rest, part, ptr, resolver)
    if m is False:
        return None
    if m is None:
        m = dict(rest)
        m["allOf"] = [*rest.get("allOf", []), part]
    return b.synthetic(m)


def _exact(b: Translator, schema: dict[str, Any], ptr: str, detail: str) -> None:
    for kw in ("if", "then", "else"):
        if kw in schema:
            b.findings.exact(pointer_join(ptr, kw), kw, detail)


def _one_of(b: Translator, schema: dict[str, Any], ptr: str) -> dict[str, Any] | None:
    branches = list(schema["oneOf"])
    keys = [value_key(x) for x in branches]
    kept = [x for x, k in zip(branches, keys, strict=True) if keys.count(k) == 1]
    if len(kept) == len(branches):
        return schema
    o_ptr = pointer_join(ptr, "oneOf")
    if not kept:
        b.findings.exact(o_ptr, "oneOf", "every branch occurs twice: no value matches one")
        return None
    b.findings.needs_check(o_ptr, "oneOf", "exclusivity (branches that occur twice are left out)")
    out = dict(schema)
    out["oneOf"] = kept
    return b.synthetic(out)
