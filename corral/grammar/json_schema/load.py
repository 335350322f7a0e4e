"""Reading a JSON Schema: text, dict, or pydantic model → a checked schema and its resolver.

* JSON text is parsed with errors that give line and column.
* pydantic v2 model classes (anything with ``model_json_schema()``) are accepted.
* The dialect comes from ``$schema`` (drafts 2020-12, 2019-09, 7, 6, 4; default 2020-12)
  and the schema is checked against that draft's meta-schema (errors carry the JSON
  pointer of the offending keyword).
* ``$ref`` is resolved inside the document only (``#/...`` pointers, ``$defs`` /
  ``definitions``, ``$anchor``, embedded ``$id`` resources). A reference to anything else
  is refused and never fetched.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ...errors import (
    ArgumentTypeError,
    CompileBudgetError,
    GrammarError,
    Location,
    UnsupportedFeatureError,
)
from .meta_check import conforms

DRAFTS = {
    "https://json-schema.org/draft/2020-12/schema": "2020-12",
    "https://json-schema.org/draft/2019-09/schema": "2019-09",
    "http://json-schema.org/draft-07/schema": "7",
    "http://json-schema.org/draft-06/schema": "6",
    "http://json-schema.org/draft-04/schema": "4",
}
DEFAULT_DIALECT = "https://json-schema.org/draft/2020-12/schema"
ROOT_URI = "urn:corral:root"


class SchemaError(GrammarError):
    """The schema is malformed: not JSON, or not valid against its draft's meta-schema.

    Attributes:
        location: where (:class:`~corral.errors.Location`): line and column in JSON text,
            or the JSON pointer of the offending keyword.
        pointer: that JSON pointer (``""``: none).
    """

    def __init__(
        self,
        message: str,
        pointer: str = "",
        *,
        line: int | None = None,
        column: int | None = None,
        snippet: str = "",
    ) -> None:
        location = None
        if pointer or line is not None or column is not None or snippet:
            location = Location(line=line, column=column, pointer=pointer or None, snippet=snippet)
        super().__init__(message, location=location)

    @property
    def pointer(self) -> str:
        return (
            "" if self.location is None or self.location.pointer is None else self.location.pointer
        )


@dataclass
class LoadedSchema:
    """A checked schema with what is needed to resolve its references.

    Attributes:
        schema: the schema (a dict or a boolean).
        dialect: the ``$schema`` URI in effect (normalised, no trailing ``#``).
        draft: short draft name (``"2020-12"``, ``"7"``, ...).
        registry: a ``referencing.Registry`` holding the document (refuses retrieval).
        keys: every object key the document holds, anywhere (subschemas and data alike),
            or ``None`` when not collected: a keyword absent from it occurs nowhere, and
            the walks that look for it are skipped.
    """

    schema: Any
    dialect: str
    draft: str
    registry: Any
    keys: frozenset[str] | None = None

    def resolver(self) -> Any:
        from referencing.jsonschema import specification_with

        root_id = specification_with(self.dialect).id_of(self.schema)
        return self.registry.resolver(base_uri=root_id or ROOT_URI)

    def for_validation(self) -> LoadedSchema:
        """The schema prepared for corral's validators (see :func:`for_validation`)."""
        schema = for_validation(self.schema)
        return LoadedSchema(schema, self.dialect, self.draft, _registry(schema, self.dialect))

    def validator(self, format_checker: Any = None) -> Any:
        """A ``jsonschema`` validator for the whole schema (formats checked by
        ``format_checker`` when given)."""
        from jsonschema.validators import validator_for

        cls = validator_for(self.schema, default=draft_validator_class(self.dialect))
        return cls(self.schema, registry=self.registry, format_checker=format_checker)


def exact_numbers(value: Any) -> Any:
    """``value`` (a JSON value) with every float replaced by the ``Decimal`` of its
    shortest round-tripping spelling, which is the number a JSON text wrote."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: exact_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [exact_numbers(v) for v in value]
    return value


VALUE_KEYWORDS = frozenset({"enum", "const", "default", "examples"})  # JSON values, not schemas


def for_validation(schema: Any, *, root: bool = True) -> Any:
    """``schema`` as corral validates with it: numbers as the decimals they spell
    (:func:`exact_numbers`), and ``$schema`` kept at the root only. corral reads a whole
    document in the dialect its root declares (an embedded ``$schema`` is an annotation),
    and ``jsonschema`` would otherwise switch to its own validator class, and its own
    regex dialect, below an embedded one."""
    if isinstance(schema, dict):
        out = {}
        for k, v in schema.items():
            if k == "$schema" and not root and isinstance(v, str):
                continue
            out[k] = exact_numbers(v) if k in VALUE_KEYWORDS else for_validation(v, root=False)
        return out
    if isinstance(schema, list):
        return [for_validation(v, root=False) for v in schema]
    return exact_numbers(schema)


def _normalise_dialect(uri: str) -> str:
    """The known dialect URI ``uri`` names (``http``/``https`` and a trailing ``#`` ignored)."""
    u = uri.rstrip("#").rstrip("/")
    for known in DRAFTS:
        if u.split("://", 1)[-1] == known.split("://", 1)[-1]:
            return known
    return u


def draft_validator_class(dialect: str) -> Any:
    """``jsonschema``'s validator class for a known dialect URI."""
    import jsonschema

    return {
        "2020-12": jsonschema.Draft202012Validator,
        "2019-09": jsonschema.Draft201909Validator,
        "7": jsonschema.Draft7Validator,
        "6": jsonschema.Draft6Validator,
        "4": jsonschema.Draft4Validator,
    }[DRAFTS[dialect]]


@functools.lru_cache(maxsize=len(DRAFTS))
def meta_validator(dialect: str) -> Any:
    """A validator of schemas written in ``dialect`` (its meta-schema), made once: building
    one resolves the meta-schema's references again (immutable, so safe to share)."""
    cls = draft_validator_class(dialect)
    return cls(cls.META_SCHEMA)


def parse_schema_text(text: str | bytes) -> Any:
    """Parse JSON text; :class:`SchemaError` with line and column on failure, and for a
    key repeated in one object (``json.loads`` would keep the last silently)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            bad = e.object[e.start : e.start + 1]
            raise SchemaError(f"the schema is not UTF-8 text (byte {e.start}: {bad!r})") from None

    def not_json(name: str) -> Any:
        raise SchemaError(f"the schema is not valid JSON: {name} is not a JSON value")

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        seen: set[str] = set()  # last-wins would drop what the author wrote first
        for key, _ in pairs:
            if key in seen:
                raise SchemaError(
                    f"the schema names the key {key!r} twice in one object: expected each "
                    "key once (which one was meant is ambiguous)"
                )
            seen.add(key)
        return obj  # pragma: no cover (a shorter dict has a repeated key)

    try:
        return json.loads(text, parse_constant=not_json, object_pairs_hook=once)
    except json.JSONDecodeError as e:
        raise SchemaError(
            f"the schema is not valid JSON: {e.msg}", line=e.lineno, column=e.colno
        ) from None
    except RecursionError:
        raise CompileBudgetError(
            f"the schema's JSON nests deeper than {MAX_SCHEMA_DEPTH} levels"
        ) from None


MAX_SCHEMA_DEPTH = 128
"""Deepest nesting of objects and arrays a schema may have (the deepest of MaskBench's
8,044 real-world schemas has 63): translation and validation recurse through it."""


def check_json_data(schema: Any) -> frozenset[str] | None:
    """Refuse what is not JSON data in a schema read as Python values, with its JSON
    pointer: nesting deeper than :data:`MAX_SCHEMA_DEPTH` (:class:`CompileBudgetError`),
    a NaN or infinite number (e.g. ``1e400``, beyond a double), a string or name that is
    not Unicode text (a lone surrogate) (:class:`SchemaError`). Iterative: any depth is
    looked at without recursion; pointers are spelled only when something is refused.

    Returns every object key of the document (the same walk collects them; see
    :attr:`LoadedSchema.keys`), or ``None`` where the quick pass did not finish."""
    keys: set[str] = set()
    if _plain_json_data(schema, keys):
        return frozenset(keys)
    stack: list[tuple[Any, str, int]] = [(schema, "", 1)]
    while stack:
        value, ptr, depth = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                raise SchemaError(
                    f"{value} is not a JSON number (a number beyond a double's range, or NaN)",
                    pointer=ptr,
                )
            continue
        if isinstance(value, str):
            _check_text(value, ptr)
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth > MAX_SCHEMA_DEPTH:
            raise CompileBudgetError(
                f"{ptr or '/'}: the schema nests deeper than {MAX_SCHEMA_DEPTH} levels of "
                "objects and arrays"
            )
        if isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str):
                    _check_text(k, ptr)
                stack.append((v, pointer_join(ptr, k), depth + 1))
        else:
            stack.extend((v, pointer_join(ptr, i), depth + 1) for i, v in enumerate(value))
    return None


def _plain_json_data(schema: Any, keys: set[str]) -> bool:
    """Whether :func:`check_json_data` refuses nothing in ``schema`` (a quick pass that
    keeps no pointers); adds the keys of every object it walks to ``keys``."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    isfinite = math.isfinite
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and not _is_text(value):
                return False
        elif isinstance(value, dict):
            if depth > MAX_SCHEMA_DEPTH:
                return False
            keys.update(value)
            for k, v in value.items():
                if isinstance(k, str) and not k.isascii() and not _is_text(k):
                    return False
                stack.append((v, depth + 1))
        elif isinstance(value, list):
            if depth > MAX_SCHEMA_DEPTH:
                return False
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, float) and not isfinite(value):
            return False
    return True


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_text(text: str, ptr: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise SchemaError(
            f"text that is not Unicode (a lone surrogate {text[e.start]!r})", pointer=ptr
        ) from None


def as_schema(spec: Any) -> Any:
    """Turn any accepted schema input into a dict or boolean (nothing is checked yet)."""
    if isinstance(spec, (str, bytes)):
        return parse_schema_text(spec)
    if isinstance(spec, type) and hasattr(spec, "model_json_schema"):
        return spec.model_json_schema()
    if isinstance(spec, (dict, bool)):
        return spec
    raise ArgumentTypeError(
        f"a JSON Schema must be a dict, a bool, JSON text or a pydantic model class, "
        f"not {type(spec).__name__}"
    )


def _refuse_retrieval(uri: str) -> Any:
    raise UnsupportedFeatureError(
        "remote $ref",
        location=uri,
        detail="references outside the schema document are never fetched; "
        "put the referenced schema under $defs",
    )


def load_schema(spec: Any) -> LoadedSchema:
    """Parse, check against the meta-schema and index a schema (see the module docs)."""
    schema = as_schema(spec)
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}")
    keys = check_json_data(schema)
    dialect = DEFAULT_DIALECT
    if isinstance(schema, dict) and "$schema" in schema:
        given = schema["$schema"]
        if not isinstance(given, str):
            raise SchemaError("$schema must be a string", pointer="/$schema")
        dialect = _normalise_dialect(given)
        if dialect not in DRAFTS:
            raise UnsupportedFeatureError(
                "$schema",
                location=Location(pointer="/$schema"),
                detail=f"unknown dialect {given!r}; supported: " + ", ".join(DRAFTS),
            )
    errors = []
    if not conforms(schema, DRAFTS[dialect]):  # not shown valid quickly: ask jsonschema
        errors = sorted(meta_validator(dialect).iter_errors(schema), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        pointer = "".join(f"/{_escape(str(p))}" for p in e.path)
        raise SchemaError(
            f"invalid schema at {pointer or '/'}: {e.message}", pointer=pointer or "/"
        )
    return LoadedSchema(schema, dialect, DRAFTS[dialect], _registry(schema, dialect, keys), keys)


def _registry(schema: Any, dialect: str, keys: frozenset[str] | None = None) -> Any:
    """A ``referencing.Registry`` holding ``schema`` (at its ``$id`` and at
    :data:`ROOT_URI`) and the official meta-schemas; it refuses every retrieval."""
    from referencing import Resource
    from referencing.jsonschema import specification_with

    resource = Resource.from_contents(schema, default_specification=specification_with(dialect))
    registry = _base_registry()
    root_id = resource.id()
    registry = registry.with_resource(ROOT_URI, resource)
    if root_id:
        registry = registry.with_resource(root_id, resource)
    # Index embedded $id / $anchor resources. `referencing` cannot crawl boolean subschemas
    # in some drafts; JSON-pointer references then still resolve against the root document.
    # (Only when the document declares identifiers: `referencing` crawls on its own when a
    # lookup misses, and JSON-pointer references never miss.) ``keys``: the document's
    # object keys, where known: without an identifier keyword among them, no walk.
    if (keys is None or not _IDENTIFIERS.isdisjoint(keys)) and _declares_identifiers(schema):
        with contextlib.suppress(TypeError):
            registry = registry.crawl()
    return registry


@functools.lru_cache(maxsize=1)
def _base_registry() -> Any:
    """An (immutable) ``referencing.Registry`` that refuses every retrieval and holds the
    official meta-schemas, which may be referenced (they are bundled, never fetched):
    made once a process, a schema's registry adds the schema to it."""
    from jsonschema_specifications import REGISTRY as META_SCHEMAS
    from referencing import Registry

    registry = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]
    return registry.with_resources(META_SCHEMAS.items())


_IDENTIFIERS = frozenset({"$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"})
_ROOT_IDENTIFIERS = frozenset({"$id", "id"})


def _declares_identifiers(schema: Any) -> bool:
    """Whether any object in ``schema`` has an identifier or anchor keyword with a string
    value (``id`` too, the draft-4 spelling; a false alarm only costs a crawl), the root's
    own identifier aside: :func:`_registry` registers the root under it without a crawl.
    (A root ``$id`` and nothing else is the common case: 20 of the 24 MaskBench schemas
    that declare an identifier among the middle 40% by time to first mask; leaving their
    crawl out took those 24 from a median of 6.5-8.4 ms to 3.9-5.1 ms.)"""
    if isinstance(schema, dict):
        schema = {k: v for k, v in schema.items() if k not in _ROOT_IDENTIFIERS}
    todo = [schema]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(v, str):
                    if k in _IDENTIFIERS:
                        return True
                elif isinstance(v, (dict, list)):
                    todo.append(v)
        elif isinstance(node, list):
            todo.extend(x for x in node if isinstance(x, (dict, list)))
    return False


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def pointer_join(pointer: str, *tokens: str | int) -> str:
    """``pointer`` extended by JSON-pointer ``tokens`` (escaped)."""
    if len(tokens) == 1:  # the usual call: one keyword or index
        t = tokens[0]
        text = t if type(t) is str else str(t)
        if "~" in text or "/" in text:
            text = _escape(text)
        return f"{pointer}/{text}"
    return pointer + "".join(f"/{_escape(str(t))}" for t in tokens)
