"""A fast, conservative check of a schema against its draft's meta-schema.

``jsonschema`` validates a schema against the draft's meta-schema by interpreting that
meta-schema: every subschema of the user's schema goes through references, dynamic
references (2020-12's ``$dynamicRef: "#meta"``) and seven vocabularies, about 1.5 ms for a
typical tool's parameters. The meta-schemas only ever ask simple things of a keyword's
value (a schema, a map or non-empty list of schemas, a non-negative integer, a number, a
string, a list of unique strings, ...), so :func:`conforms` checks exactly those, from one
table per draft (:data:`TABLES`), in one iterative pass.

The check is one-sided: ``True`` means the schema is valid against the meta-schema;
``False`` means "not shown here", and the caller asks ``jsonschema`` (for the error
message, or to find the schema valid after all: a float ``2.0`` for ``minLength`` is an
integer to drafts 6 and later, a non-string ``enum`` in draft 4 needs ``jsonschema``'s
equality to decide uniqueness). Formats in meta-schemas (``uri``, ``regex``) are
annotations there and are not asserted, as ``jsonschema`` does not assert them either.

Tested against ``jsonschema`` (``tests/test_meta_check.py``): the keyword sets of
:data:`TABLES` are those of the meta-schemas' ``properties``, and ``conforms`` never says
``True`` where ``jsonschema`` finds an error, on real schemas and on generated ones.
"""

from __future__ import annotations

import re
from typing import Any

from .keywords import TYPE_NAMES

# Kinds of keyword value (what the meta-schema requires of it).
SCHEMA = "schema"  # a schema (object; or boolean from draft 6 on)
SCHEMA_MAP = "schema map"  # an object whose values are schemas
SCHEMA_LIST = "schema list"  # a non-empty array of schemas
SCHEMA_OR_LIST = "schema or schema list"  # `items` before 2020-12
BOOL_OR_SCHEMA = "boolean or schema"  # draft 4's additionalItems / additionalProperties
DEPENDENCIES = "dependencies"  # an object of schemas or string lists
NON_NEGATIVE_INT = "non-negative integer"
NUMBER = "number"
POSITIVE_NUMBER = "positive number"  # multipleOf
BOOLEAN = "boolean"
STRING = "string"
ARRAY = "array"
ANY = "any"
STRING_LIST = "string list"  # unique strings (draft 4: at least one)
STRING_LIST_MAP = "string list map"  # dependentRequired
TYPE = "type"  # a simple type name, or a non-empty array of unique ones
ENUM = "enum"  # draft 4: a non-empty array of unique values
BOOLEAN_MAP = "boolean map"  # $vocabulary
ID = "$id"  # a string without a non-empty fragment
ANCHOR = "anchor"  # 2020-12's anchorString
ANCHOR_2019 = "anchor (2019-09)"

_PATTERNS = {
    ID: re.compile(r"^[^#]*#?$"),
    ANCHOR: re.compile(r"^[A-Za-z_][-A-Za-z0-9._]*$"),
    ANCHOR_2019: re.compile(r"^[A-Za-z][-A-Za-z0-9.:_]*$"),
}

_VALIDATION = {
    "multipleOf": POSITIVE_NUMBER,
    "maximum": NUMBER,
    "exclusiveMaximum": NUMBER,
    "minimum": NUMBER,
    "exclusiveMinimum": NUMBER,
    "maxLength": NON_NEGATIVE_INT,
    "minLength": NON_NEGATIVE_INT,
    "pattern": STRING,
    "maxItems": NON_NEGATIVE_INT,
    "minItems": NON_NEGATIVE_INT,
    "uniqueItems": BOOLEAN,
    "maxProperties": NON_NEGATIVE_INT,
    "minProperties": NON_NEGATIVE_INT,
    "required": STRING_LIST,
    "const": ANY,
    "enum": ARRAY,
    "type": TYPE,
    "format": STRING,
    "title": STRING,
    "description": STRING,
    "default": ANY,
    "$schema": STRING,
}
_APPLICATORS = {
    "additionalProperties": SCHEMA,
    "properties": SCHEMA_MAP,
    "patternProperties": SCHEMA_MAP,
    "definitions": SCHEMA_MAP,
    "allOf": SCHEMA_LIST,
    "anyOf": SCHEMA_LIST,
    "oneOf": SCHEMA_LIST,
    "not": SCHEMA,
}
_DRAFT_6 = {
    **_VALIDATION,
    **_APPLICATORS,
    "$id": STRING,
    "$ref": STRING,
    "examples": ARRAY,
    "additionalItems": SCHEMA,
    "items": SCHEMA_OR_LIST,
    "contains": SCHEMA,
    "dependencies": DEPENDENCIES,
    "propertyNames": SCHEMA,
}
_DRAFT_7 = {
    **_DRAFT_6,
    "$comment": STRING,
    "readOnly": BOOLEAN,
    "if": SCHEMA,
    "then": SCHEMA,
    "else": SCHEMA,
    "contentMediaType": STRING,
    "contentEncoding": STRING,
}
_DRAFT_2019 = {
    **_DRAFT_7,
    "$id": ID,
    "$anchor": ANCHOR_2019,
    "$recursiveRef": STRING,
    "$recursiveAnchor": BOOLEAN,
    "$vocabulary": BOOLEAN_MAP,
    "$defs": SCHEMA_MAP,
    "unevaluatedItems": SCHEMA,
    "unevaluatedProperties": SCHEMA,
    "dependentSchemas": SCHEMA_MAP,
    "maxContains": NON_NEGATIVE_INT,
    "minContains": NON_NEGATIVE_INT,
    "dependentRequired": STRING_LIST_MAP,
    "deprecated": BOOLEAN,
    "writeOnly": BOOLEAN,
    "contentSchema": SCHEMA,
}
_DRAFT_2020 = {
    **{k: v for k, v in _DRAFT_2019.items() if k != "additionalItems"},
    "$anchor": ANCHOR,
    "$dynamicRef": STRING,
    "$dynamicAnchor": ANCHOR,
    "$recursiveAnchor": ANCHOR,  # kept from 2019-09 as an anchor string
    "prefixItems": SCHEMA_LIST,
    "items": SCHEMA,
}
_DRAFT_4 = {
    **{k: v for k, v in _VALIDATION.items() if k != "const"},
    **_APPLICATORS,
    "id": STRING,
    "exclusiveMaximum": BOOLEAN,
    "exclusiveMinimum": BOOLEAN,
    "additionalItems": BOOL_OR_SCHEMA,
    "additionalProperties": BOOL_OR_SCHEMA,
    "items": SCHEMA_OR_LIST,
    "dependencies": DEPENDENCIES,
    "enum": ENUM,
}

TABLES: dict[str, dict[str, str]] = {
    "2020-12": _DRAFT_2020,
    "2019-09": _DRAFT_2019,
    "7": _DRAFT_7,
    "6": _DRAFT_6,
    "4": _DRAFT_4,
}
"""Per draft (``load.DRAFTS``'s short names): keyword → what its meta-schema requires of
the keyword's value. Keywords not listed may hold anything."""


def conforms(schema: Any, draft: str) -> bool:
    """Whether ``schema`` is certainly valid against ``draft``'s meta-schema.

    ``True`` only when it is; ``False`` when it is not, or when deciding needs more than
    this check knows (the caller then asks ``jsonschema``). Iterative: any nesting depth.
    """
    table = TABLES.get(draft)
    if table is None:
        return False
    booleans = draft != "4"  # boolean schemas exist from draft 6 on
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            if isinstance(node, bool) and booleans:
                continue
            return False
        if draft == "4" and (
            ("exclusiveMaximum" in node and "maximum" not in node)
            or ("exclusiveMinimum" in node and "minimum" not in node)
        ):
            return False
        for key, value in node.items():
            kind = table.get(key)
            if kind is None or kind is ANY:
                continue
            if kind is SCHEMA:
                stack.append(value)
            elif kind is SCHEMA_MAP:
                if not isinstance(value, dict):
                    return False
                stack.extend(value.values())
            elif kind is SCHEMA_LIST:
                if not isinstance(value, list) or not value:
                    return False
                stack.extend(value)
            elif not _simple(kind, value, draft, stack):
                return False
    return True


def _simple(kind: str, value: Any, draft: str, stack: list[Any]) -> bool:
    """Whether ``value`` is of ``kind`` (the kinds :func:`conforms` does not inline);
    subschemas it holds are pushed on ``stack``."""
    if kind is STRING:
        return isinstance(value, str)
    if kind is NON_NEGATIVE_INT:
        return type(value) is int and value >= 0
    if kind is NUMBER:
        return type(value) in (int, float)
    if kind is BOOLEAN:
        return isinstance(value, bool)
    if kind is TYPE:
        if isinstance(value, str):
            return value in TYPE_NAMES
        return _unique_strings(value, 1) and all(t in TYPE_NAMES for t in value)
    if kind is STRING_LIST:
        return _unique_strings(value, 1 if draft == "4" else 0)
    if kind is ARRAY:
        return isinstance(value, list)
    if kind is POSITIVE_NUMBER:
        return type(value) in (int, float) and value > 0
    if kind is SCHEMA_OR_LIST:
        if isinstance(value, list):
            if not value:
                return False
            stack.extend(value)
        else:
            stack.append(value)
        return True
    if kind is BOOL_OR_SCHEMA:
        if not isinstance(value, bool):
            stack.append(value)
        return True
    if kind is DEPENDENCIES:
        if not isinstance(value, dict):
            return False
        for dep in value.values():
            if isinstance(dep, list):
                if not _unique_strings(dep, 1 if draft == "4" else 0):
                    return False
            else:
                stack.append(dep)
        return True
    if kind is STRING_LIST_MAP:
        return isinstance(value, dict) and all(_unique_strings(v, 0) for v in value.values())
    if kind is ENUM:  # uniqueness decided here for scalars only
        return isinstance(value, list) and len(value) >= 1 and _unique_scalars(value)
    if kind is BOOLEAN_MAP:
        return isinstance(value, dict) and all(isinstance(v, bool) for v in value.values())
    if kind in _PATTERNS:
        return isinstance(value, str) and _PATTERNS[kind].search(value) is not None
    raise AssertionError(f"unknown kind {kind!r}")  # pragma: no cover


def _unique_strings(value: Any, min_items: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) >= min_items
        and all(isinstance(s, str) for s in value)
        and len(set(value)) == len(value)
    )


_SCALAR_KINDS = {str: "s", int: "n", float: "n", bool: "b", type(None): "z"}


def _unique_scalars(values: list[Any]) -> bool:
    """Whether ``values`` (all strings, numbers, booleans or null, else ``False``) are
    pairwise unequal as JSON values: ``1`` and ``1.0`` are equal, ``true`` and ``1`` are
    not."""
    keys = set()
    for v in values:
        kind = _SCALAR_KINDS.get(type(v))
        if kind is None:
            return False
        keys.add((kind, v))
    return len(keys) == len(values)
