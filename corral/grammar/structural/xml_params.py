"""Qwen3-Coder / Qwen3.5 XML parameters: a JSON object written as ``<parameter=NAME>`` tags.

This is XGrammar's ``qwen_xml`` style of a JSON Schema (a structural tag's
``{"type": "json_schema", "style": "qwen_xml"}``, the arguments of a Qwen3-Coder tool
call). An object valid for the schema is written as its properties, each::

    <parameter=NAME>VALUE</parameter>

with any run of whitespace (space, tab, newline, carriage return) before each
``<parameter=``. ``VALUE`` is

* a string, raw: any UTF-8 text (whitespace and newlines included, nothing escaped) up to
  the first ``</parameter>``; it never contains ``</parameter>``, ``<parameter=`` or
  ``</function>`` (``{"type": "string"}``), since the readers of this format (vLLM's
  ``qwen3_coder`` tool parser, Qwen's own) end a value at any of the three;
* one of an ``enum``'s (or a ``const``'s) values of the schema's ``type``, with any
  whitespace around it: a string value raw, ``true``, ``false``, ``null`` or an integer as
  JSON;
* anything else as JSON (built by corral's JSON Schema front end with the caller's JSON
  options), with any whitespace around it: ``<parameter=n>\\n5\\n</parameter>``.

A value that may be a string or something else (``{"type": ["string", "null"]}``,
``anyOf`` of such, ``{}``) is the raw text or, for arrays and objects, the JSON value.

The properties appear in the order of ``properties``; ``required`` ones always, the
others at most once each. ``additionalProperties`` absent or ``false`` allows no other
parameter (XGrammar's strict mode); ``true`` or a schema allows any number of them after
the named ones, named ``[A-Za-z_][A-Za-z0-9_]*`` (not a name of ``properties``). The
schema ``true`` or ``{}`` is any such object.

What cannot be held exactly is refused by its JSON pointer
(:class:`~corral.errors.UnsupportedFeatureError`): a raw string's ``pattern``,
``format``, ``minLength`` or ``maxLength`` (XGrammar matches them together with the
whitespace around the value, and its length counts may run over ``</parameter>``), an
``enum`` value that is a non-integer number, an array, an object or contains
``</parameter>``, ``<parameter=`` or ``</function>``, ``oneOf`` (of types that
overlap), ``allOf``, ``not`` or ``if`` over a value that may be a raw string, keywords
beside such a ``$ref``, a non-local ``$ref`` there, object keywords at the root other
than those above (``patternProperties``, ``minProperties``...), a ``required`` name not
in ``properties`` (XGrammar ignores it), and a root that is not an object. A required
property no value satisfies is an :class:`~corral.errors.EmptyLanguageError`; an
optional one is left out.

Differences from XGrammar (corral's language is a subset of its): a raw value never holds
``<parameter=`` or ``</function>`` (XGrammar's may, and vLLM's parser then reads a
parameter or a call end there); no whitespace after
the last parameter (nor an object of whitespace alone); JSON values written as corral's
JSON options say (``whitespace``, and ``additionalProperties`` inside them follows the
schema, not XGrammar's strict mode); an additional parameter never repeats a declared
name.

corral's lexer is maximal munch, so what ends a value is part of the value's terminal: a
raw string is one terminal ``text </parameter>``, an enum ``ws value ws </parameter>``,
and a JSON value is followed by one terminal ``ws </parameter>``. Whitespace is only
allowed before a ``<parameter=``, never at the end, so that what follows the object (the
``\\n</function>`` of a tool call) is never swallowed by it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import (
    CorralError,
    EmptyLanguageError,
    GrammarError,
    Location,
    UnsupportedFeatureError,
)
from ..ir import Grammar, Rule, Terminal
from ..json_schema.keywords import CHECKED, HANDLED
from ..json_schema.load import SchemaError, load_schema, pointer_join
from ..regex import literal_automaton, python_regex_dfa
from ..regex.dfa import difference, union_of_literals
from .text import free_text_dfa

__all__ = ["qwen_xml_grammar"]

OPEN = "<parameter="
CLOSE = "</parameter>"
RAW_STOPS = (CLOSE, OPEN, "</function>")
"""What a raw value never contains: where the format's readers end a value."""
_WS = r"[ \t\n\r]"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"

_ASSERTIONS = HANDLED | CHECKED
"""The keywords that constrain values; every other keyword is an annotation (as in
corral's JSON Schema front end)."""

_STRING_ONLY = ("pattern", "format", "minLength", "maxLength", "x-corral-span", "x-corral-entities")
_NOT_FOR_OBJECTS = frozenset(
    {
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        *_STRING_ONLY,
    }
)
_ROOT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties"})


def qwen_xml_grammar(schema: Any, json_options: Mapping[str, Any]) -> Grammar:
    """The grammar of the objects valid for ``schema`` written as Qwen XML parameters (see
    the module docs for the format).

    ``json_options``: options of :func:`corral.grammar.frontends.from_json_schema` for the
    values written as JSON (``final_check`` is always off: what the grammar cannot hold is
    refused instead).

    Raises:
        UnsupportedFeatureError: a keyword the format cannot hold exactly, with its JSON
            pointer in ``schema``.
        SchemaError: a malformed schema.
        EmptyLanguageError: no object is valid (a required property no value satisfies).
    """
    loaded = load_schema(schema)
    doc = loaded.schema
    options = {**json_options, "final_check": False}
    return _XMLBuilder(doc, options).build()


# -- values -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Raw:
    """Raw text up to and including the first ``</parameter>``, holding none of
    :data:`RAW_STOPS` before it."""


@dataclass(frozen=True)
class _Literals:
    """One of ``texts`` with whitespace around it, then ``</parameter>``."""

    texts: tuple[str, ...]


@dataclass(frozen=True)
class _JSON:
    """A JSON value of ``schema`` (a subschema of the root), with whitespace around it,
    then ``</parameter>``; ``pointer``: where ``schema`` is in the root (for messages)."""

    schema: Any
    pointer: str


_Alt = _Raw | _Literals | _JSON


def _assertions(s: Mapping[str, Any]) -> list[str]:
    return [k for k in s if k in _ASSERTIONS]


def _types(s: Mapping[str, Any]) -> tuple[str, ...] | None:
    t = s.get("type")
    if t is None:
        return None
    return (t,) if isinstance(t, str) else tuple(t)


def _has_type(value: Any, types: tuple[str, ...] | None) -> bool:
    """Whether the JSON value ``value`` is of one of ``types`` (``None``: any)."""
    if types is None:
        return True
    if isinstance(value, bool):
        return "boolean" in types
    if isinstance(value, int):
        return "integer" in types or "number" in types
    if isinstance(value, float):
        return "number" in types or ("integer" in types and value.is_integer())
    if isinstance(value, str):
        return "string" in types
    if value is None:
        return "null" in types
    return ("array" if isinstance(value, list) else "object") in types


def _refuse(feature: str, pointer: str, detail: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        feature, location=Location(pointer=pointer or "/"), detail=detail
    )


class _Values:
    """Splits a parameter's schema into the alternatives of its written value."""

    def __init__(self, root: Any) -> None:
        self.root = root

    def alternatives(self, s: Any, ptr: str, seen: frozenset[str] = frozenset()) -> list[_Alt]:
        """The ways a value of ``s`` (at ``ptr``) is written; ``[]``: no value."""
        if s is True:
            return self._any(ptr)
        if s is False:
            return []
        keys = _assertions(s)
        if "$ref" in keys:
            return self._ref(s, ptr, keys, seen)
        if "enum" in keys or "const" in keys:
            return [self._literals(s, ptr, keys)]
        types = _types(s)
        if types is not None and "string" not in types:
            return [_JSON(s, ptr)]
        for k in _STRING_ONLY:
            if k in s:
                raise _refuse(
                    k,
                    pointer_join(ptr, k),
                    "a Qwen XML string value is raw text; XGrammar matches its pattern, "
                    "format or length together with the whitespace around it, unlike JSON "
                    "Schema, so corral does not guess",
                )
        if types is None:
            return self._untyped(s, ptr, keys, seen)
        return self._with_string(s, ptr, keys, types)

    def _any(self, ptr: str) -> list[_Alt]:
        """Any value: raw text, or a JSON array or object (XGrammar's ``xml_any``)."""
        return [_Raw(), _JSON({"type": ["array", "object"]}, ptr)]

    def _ref(self, s: Any, ptr: str, keys: list[str], seen: frozenset[str]) -> list[_Alt]:
        ref = s["$ref"]
        where = pointer_join(ptr, "$ref")
        if len(keys) > 1:
            if self._never_string(s, seen):
                return [_JSON(s, ptr)]
            other = next(k for k in keys if k != "$ref")
            raise _refuse(
                other,
                pointer_join(ptr, other),
                "keywords beside a $ref to a value that may be a raw string",
            )
        if not isinstance(ref, str) or not ref.startswith("#") or ref in seen:
            if self._never_string(s, seen):
                return [_JSON(s, ptr)]
            raise _refuse(
                "$ref",
                where,
                "only a local '#/...' reference, not recursive, at a parameter's value",
            )
        target, tptr = self._resolve(ref, where)
        return self.alternatives(target, tptr, seen | {ref})

    def _resolve(self, ref: str, where: str) -> tuple[Any, str]:
        """The subschema a local ``#/a/b`` reference names, and its pointer."""
        from urllib.parse import unquote

        tokens = unquote(ref[1:]).split("/")[1:] if ref != "#" else []
        node = self.root
        for t in tokens:
            t = t.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and t in node:
                node = node[t]
            elif isinstance(node, list) and t.isdigit() and int(t) < len(node):
                node = node[int(t)]
            else:
                raise SchemaError(f"unresolvable reference {ref!r}", pointer=where)
        if not isinstance(node, (dict, bool)):
            raise SchemaError(f"the reference {ref!r} names no schema", pointer=where)
        return node, unquote(ref[1:])

    def _never_string(self, s: Any, seen: frozenset[str]) -> bool:
        """Whether ``s`` certainly admits no string (then JSON writes all of it)."""
        if s is False:
            return True
        if s is True:
            return False
        types = _types(s)
        if types is not None and "string" not in types:
            return True
        for k in ("enum", "const"):
            if k in s:
                values = s[k] if k == "enum" else [s[k]]
                return not any(isinstance(v, str) for v in values)
        ref = s.get("$ref")
        if isinstance(ref, str) and ref.startswith("#") and ref not in seen:
            try:
                target, _ = self._resolve(ref, "")
            except SchemaError:
                return False
            if self._never_string(target, seen | {ref}):
                return True
        for k in ("anyOf", "oneOf"):
            if k in s and all(self._never_string(b, seen) for b in s[k]):
                return True
        return "allOf" in s and any(self._never_string(b, seen) for b in s["allOf"])

    def _literals(self, s: Any, ptr: str, keys: list[str]) -> _Literals:
        """An ``enum`` or ``const``: its values of the schema's ``type``, written raw."""
        types = _types(s)
        for k in keys:
            if k not in ("enum", "const", "type"):
                raise _refuse(
                    k, pointer_join(ptr, k), "a keyword beside enum/const at a parameter's value"
                )
        if "const" in s:
            values: list[tuple[Any, str]] = [(s["const"], pointer_join(ptr, "const"))]
            if "enum" in s and s["const"] not in s["enum"]:
                values = []
        else:
            values = [(v, pointer_join(ptr, "enum", i)) for i, v in enumerate(s["enum"])]
        texts: list[str] = []
        for v, vptr in values:
            if not _has_type(v, types):
                continue
            text = _written(v, vptr)
            if text not in texts:
                texts.append(text)
        return _Literals(tuple(texts))

    def _untyped(self, s: Any, ptr: str, keys: list[str], seen: frozenset[str]) -> list[_Alt]:
        if not keys:
            return self._any(ptr)
        if keys == ["anyOf"]:
            return self._union(s["anyOf"], pointer_join(ptr, "anyOf"), seen)
        if keys == ["oneOf"] and _disjoint_types(s["oneOf"]):
            return self._union(s["oneOf"], pointer_join(ptr, "oneOf"), seen)
        if self._never_string(s, seen):
            return [_JSON(s, ptr)]
        k = next((k for k in ("oneOf", "allOf", "anyOf", "not", "if") if k in keys), keys[0])
        raise _refuse(
            k,
            pointer_join(ptr, k),
            "a parameter's value that may be a raw string is written with type, enum, "
            "const, anyOf, or oneOf of different types",
        )

    def _union(self, branches: list[Any], ptr: str, seen: frozenset[str]) -> list[_Alt]:
        out: list[_Alt] = []
        for i, b in enumerate(branches):
            out.extend(self.alternatives(b, pointer_join(ptr, i), seen))
        return out

    def _with_string(self, s: Any, ptr: str, keys: list[str], types: tuple[str, ...]) -> list[_Alt]:
        """``type`` names "string": raw text, or JSON for the array and object types (the
        raw text already holds every number, boolean and null)."""
        for k in keys:
            if k in ("anyOf", "oneOf", "allOf", "not", "if", "then", "else"):
                raise _refuse(
                    k, pointer_join(ptr, k), "an applicator beside a type that allows a raw string"
                )
        out: list[_Alt] = [_Raw()]
        containers = [t for t in types if t in ("array", "object")]
        if containers:
            out.append(_JSON({**s, "type": containers}, ptr))
        return out


def _disjoint_types(branches: list[Any]) -> bool:
    """Whether every branch states its ``type`` and no two share one (then ``oneOf`` is
    ``anyOf``)."""
    seen: set[str] = set()
    for b in branches:
        if not isinstance(b, dict) or "type" not in b:
            return False
        ts = set(_types(b) or ())
        if "number" in ts:
            ts.add("integer")
        if ts & seen:
            return False
        seen |= ts
    return True


def _scalar(s: Any) -> bool:
    """Whether ``s`` states a type and only numbers, booleans and null have it (then the
    raw text holds every value of ``s``: none contains ``</parameter>``)."""
    types = _types(s) if isinstance(s, dict) else None
    return types is not None and not {"string", "array", "object"} & set(types)


def _written(value: Any, ptr: str) -> str:
    """How an enum/const value is written: a string raw, ``true``/``false``/``null`` and
    integers as JSON."""
    if isinstance(value, str):
        held = [stop for stop in RAW_STOPS if stop in value]
        if held:
            raise _refuse(
                f"a value containing {held[0]!r}", ptr, "readers of the format end a value there"
            )
        return value
    if value is None or isinstance(value, (bool, int)):
        return json.dumps(value)
    raise _refuse(
        "a non-integer number, array or object in enum/const",
        ptr,
        "XGrammar writes these as its JSON library spells them; corral does not guess",
    )


# -- the grammar ------------------------------------------------------------------------
class _XMLBuilder:
    """Builds the grammar: terminals and rules, named uniquely."""

    def __init__(self, doc: Any, options: dict[str, Any]) -> None:
        self.doc = doc
        self.options = options
        self.values = _Values(doc)
        self.terminals: dict[str, Terminal] = {}
        self.rules: list[Rule] = []
        self.count = 0
        self.memo: dict[str, str | None] = {}

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def _terminal(self, prefix: str, dfa: Any, source: str, literal: str | None = None) -> str:
        name = self._name(prefix)
        self.terminals[name] = Terminal(name, dfa, source=source, literal=literal)
        return name

    def _shared(self, key: str, make: Callable[[], str]) -> str:
        """The symbol made once for ``key``."""
        name = self.memo.get(key)
        if name is None:
            name = self.memo[key] = make()
        return name

    # the object ------------------------------------------------------------------------
    def build(self) -> Grammar:
        """The grammar: the named parameters in schema order (each optional one may be left
        out), then the additional ones (if any are allowed)."""
        props, required, extra = self._object()
        chain: list[tuple[str, str | None, bool]] = []  # (name, value symbol, required)
        for name, sub in props.items():
            ptr = pointer_join("/properties", name)
            value = self._value(sub, ptr)
            if value is None and name in required:
                raise EmptyLanguageError(
                    f"no value is valid for the required property {name!r} (at {ptr})",
                    location=Location(pointer=ptr),
                )
            chain.append((name, value, name in required))
        tail = self._additional(extra, list(props))
        nxt = tail
        for name, value, req in reversed(chain):
            here = self._name("props")
            if not req:
                self.rules.append(Rule(here, (nxt,)))
            if value is not None:
                param = self._param(self._open_literal(name), value)
                self.rules.append(Rule(here, (param, nxt)))
            nxt = here
        self.rules.append(Rule("start", (nxt,)))
        return Grammar(self.terminals, self.rules, "start", description="Qwen XML parameters")

    def _object(self) -> tuple[dict[str, Any], set[str], Any]:
        """The root's ``properties``, ``required`` and ``additionalProperties`` (``False``:
        none); refuses what the format cannot hold."""
        s = self.doc
        if s is False:
            raise EmptyLanguageError(
                "the schema false admits no object", location=Location(pointer="/")
            )
        if s is True:
            return {}, set(), True
        types = _types(s)
        if types is not None and set(types) != {"object"}:
            raise _refuse(
                "a root that is not an object",
                "/type",
                "Qwen XML parameters write one object; other values have no parameters",
            )
        for k in _assertions(s):
            if k in _ROOT_KEYWORDS or (types is not None and k in _NOT_FOR_OBJECTS):
                continue
            if (
                k == "unevaluatedProperties"
                and s[k] is False
                and s.get("additionalProperties", False) is False
            ):
                continue
            raise _refuse(
                k,
                f"/{k}",
                "the Qwen XML object holds properties, required and additionalProperties only",
            )
        props = dict(s.get("properties", {}))
        required = set(s.get("required", []))
        for i, name in enumerate(s.get("required", [])):
            if name not in props:
                raise _refuse(
                    "a required property not in properties",
                    pointer_join("/required", i),
                    f"{name!r} would take any value (XGrammar ignores it); name it in properties",
                )
        if set(_assertions(s)) <= {"type"}:
            return {}, set(), True  # {} and {"type": "object"}: any object, as XGrammar
        return props, required, s.get("additionalProperties", False)

    def _additional(self, extra: Any, declared: list[str]) -> str:
        """The symbol of the parameters after the named ones: none, or any number of
        other names with values of ``extra``."""
        tail = self._name("extra")
        self.rules.append(Rule(tail, ()))
        if extra is False:
            return tail
        value = self._value(extra, "/additionalProperties")
        if value is None:
            return tail
        names = python_regex_dfa(re.escape(OPEN) + _NAME + ">")
        if declared:
            taken = union_of_literals([f"{OPEN}{n}>".encode() for n in declared])
            names = difference(names, taken, where="Qwen XML parameter names")
        opener = self._terminal("OPEN_ANY", names, f"'{OPEN}NAME>' (an undeclared name)")
        self.rules.append(Rule(tail, (self._param(opener, value), tail)))
        return tail

    def _param(self, opener: str, value: str) -> str:
        """``[ws] opener value`` (the value ends with ``</parameter>``)."""
        name = self._name("param")
        self.rules.append(Rule(name, (opener, value)))
        self.rules.append(Rule(name, (self._ws(), opener, value)))
        return name

    def _open_literal(self, name: str) -> str:
        text = f"{OPEN}{name}>"
        return self._terminal("OPEN", literal_automaton(text), repr(text), literal=text)

    def _ws(self) -> str:
        return self._shared(
            "ws", lambda: self._terminal("WS", python_regex_dfa(_WS + "+"), "whitespace")
        )

    # values ----------------------------------------------------------------------------
    def _value(self, sub: Any, ptr: str) -> str | None:
        """The symbol of a parameter's value and its ``</parameter>`` (``None``: no value
        is valid)."""
        alts = self.values.alternatives(sub, ptr)
        rhss: list[tuple[str, ...]] = []
        if any(isinstance(a, _Raw) for a in alts):
            rhss.append((self._raw(),))
            alts = [a for a in alts if not (isinstance(a, _JSON) and _scalar(a.schema))]
        else:
            texts = tuple(
                dict.fromkeys(t for a in alts if isinstance(a, _Literals) for t in a.texts)
            )
            if texts:
                rhss.append((self._literals(texts),))
        for a in alts:
            if isinstance(a, _JSON):
                start = self._json(a)
                if start is not None:
                    rhss.append((start, self._close()))
                    rhss.append((self._ws(), start, self._close()))
        if not rhss:
            return None
        name = self._name("value")
        self.rules.extend(Rule(name, rhs) for rhs in dict.fromkeys(rhss))
        return name

    def _raw(self) -> str:
        return self._shared(
            "raw",
            lambda: self._terminal(
                "RAW",
                free_text_dfa(tuple(stop.encode() for stop in RAW_STOPS), 0),
                f"raw text up to {CLOSE!r} (without {OPEN!r} or '</function>')",
            ),
        )

    def _close(self) -> str:
        return self._shared(
            "close",
            lambda: self._terminal(
                "CLOSE",
                python_regex_dfa(_WS + "*" + re.escape(CLOSE)),
                f"[whitespace] {CLOSE!r}",
            ),
        )

    def _literals(self, texts: tuple[str, ...]) -> str:
        pattern = f"{_WS}*(?:{'|'.join(re.escape(t) for t in texts)}){_WS}*{re.escape(CLOSE)}"
        return self._shared(
            "lit" + json.dumps(texts),
            lambda: self._terminal(
                "ENUM",
                python_regex_dfa(pattern),
                f"one of {list(texts)!r}, then {CLOSE!r}",
            ),
        )

    def _json(self, alt: _JSON) -> str | None:
        """The start symbol of ``alt``'s JSON grammar, embedded (``None``: no value)."""
        doc = self._document(alt.schema)
        key = "json" + json.dumps(doc, default=repr)
        if key in self.memo:
            return self.memo[key]
        from ..frontends import from_json_schema

        try:
            g = from_json_schema(doc, **self.options)
        except EmptyLanguageError:
            g = None
        except CorralError as e:
            raise _relocated(e, alt.pointer, doc is not alt.schema) from e
        start = None if g is None else self._embed(g)
        self.memo[key] = start
        return start

    def _document(self, sub: Any) -> Any:
        """``sub`` as a standalone schema: the root's ``$schema`` and definitions with it, so
        that its local references resolve."""
        if not isinstance(sub, dict) or not isinstance(self.doc, dict):
            return sub
        extra = {
            k: self.doc[k]
            for k in ("$schema", "$defs", "definitions")
            if k in self.doc and k not in sub
        }
        return {**extra, **sub} if extra else sub

    def _embed(self, g: Grammar) -> str:
        """Adds ``g``'s terminals and rules, renamed; returns its start symbol."""
        if g.ignore:  # pragma: no cover - JSON grammars write their whitespace explicitly
            raise GrammarError("an embedded JSON grammar with ignored terminals")
        prefix = self._name("j") + "_"
        for tname, t in g.terminals.items():
            self.terminals[prefix + tname] = Terminal(
                prefix + tname,
                t.dfa,
                source=t.source,
                literal=t.literal,
                special=t.special,
                end_blocked=t.end_blocked,
            )
        self.rules.extend(Rule(prefix + r.lhs, tuple(prefix + x for x in r.rhs)) for r in g.rules)
        return prefix + g.start


def _relocated(e: CorralError, ptr: str, with_defs: bool) -> CorralError:
    """``e``, raised for a value's schema standing alone, with its pointer in the root."""
    loc = getattr(e, "location", None)
    inner = loc.pointer if isinstance(loc, Location) and loc.pointer else ""
    keep = with_defs and inner.startswith(("/$defs/", "/definitions/"))
    where = inner if keep else ptr + (inner if inner != "/" else "")
    where = where or "/"
    if isinstance(e, UnsupportedFeatureError):
        return UnsupportedFeatureError(e.feature, location=Location(pointer=where), detail=e.detail)
    if isinstance(e, SchemaError):
        return SchemaError(e.message, pointer=where)
    return e
