"""Reference resolution: ``$ref`` (and ``$dynamicRef``/``$recursiveRef``, resolved
statically), ``$defs``/``definitions``, ``$id`` resources and anchors.

Pure functions on schemas and ``referencing`` resolvers (see :mod:`.load`, which indexes
the document): they note nothing. A resolver carries the base URI in effect; a subschema
with an ``$id`` (``id`` in draft 4) starts a new one. Recursion is not handled here: the
translator memoises each subschema, so a reference back to a schema being translated
finds its nonterminal.
"""

from __future__ import annotations

from typing import Any

from ...errors import Location, UnsupportedFeatureError
from .keywords import ANNOTATIONS
from .load import VALUE_KEYWORDS, pointer_join

__all__ = [
    "REFERENCE_KEYWORDS",
    "absolute_refs",
    "base_uri",
    "enter",
    "first_reference",
    "id_keyword",
    "is_reference_only",
    "lookup",
]

REFERENCE_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


def id_keyword(draft: str) -> str:
    """The keyword that gives a subschema its base URI in ``draft``."""
    return "id" if draft == "4" else "$id"


def base_uri(resolver: Any) -> str:
    """The base URI a resolver resolves relative references against (``""``: none)."""
    return getattr(resolver, "_base_uri", "")


def enter(schema: dict[str, Any], resolver: Any, *, draft: str, dialect: str) -> Any:
    """The resolver inside ``schema``: a subschema with an ``$id`` is a new base URI."""
    if isinstance(schema.get(id_keyword(draft)), str):
        from referencing import Resource
        from referencing.jsonschema import specification_with

        spec = specification_with(dialect)
        return resolver.in_subresource(Resource.from_contents(schema, default_specification=spec))
    return resolver


def lookup(ref: Any, ptr: str, resolver: Any, kw: str) -> tuple[Any, Any, str]:
    """``(target, target resolver, target pointer)`` of reference ``ref``, written as
    keyword ``kw`` of the schema at ``ptr``. The target pointer is the JSON pointer of a
    ``#/...`` reference, else the reference itself.

    Raises:
        UnsupportedFeatureError: at ``ptr/kw``: ``ref`` is not a string, cannot be
            resolved, or names a document other than this one (never fetched).
    """
    if not isinstance(ref, str):
        raise UnsupportedFeatureError(
            kw, location=Location(pointer=pointer_join(ptr, kw)), detail="not a string"
        )
    try:
        resolved = resolver.lookup(ref)
    except (UnsupportedFeatureError, RecursionError):
        raise
    except Exception as e:
        chain: BaseException | None = e
        while chain is not None:
            if isinstance(chain, UnsupportedFeatureError):  # retrieval was refused
                raise UnsupportedFeatureError(
                    f"remote {kw}",
                    location=Location(pointer=pointer_join(ptr, kw)),
                    detail=f"{ref!r} is outside the schema document; it is never "
                    "fetched (put the referenced schema under $defs)",
                ) from None
            chain = chain.__cause__ or chain.__context__
        raise UnsupportedFeatureError(
            kw, location=Location(pointer=pointer_join(ptr, kw)), detail=f"cannot resolve {ref!r}"
        ) from None
    t_ptr = ref[1:] if ref.startswith("#/") else ref
    return resolved.contents, resolved.resolver, t_ptr


def first_reference(schema: dict[str, Any]) -> str | None:
    """The first reference keyword of ``schema`` (``$ref``, then the dynamic ones)."""
    return next((kw for kw in REFERENCE_KEYWORDS if kw in schema), None)


def is_reference_only(schema: Any) -> bool:
    """Whether ``schema`` is a ``$ref`` and annotations, nothing else."""
    return (
        isinstance(schema, dict)
        and "$ref" in schema
        and all(k == "$ref" or k in ANNOTATIONS for k in schema)
    )


def absolute_refs(schema: Any, base: str, id_kw: str) -> Any:
    """``schema`` with its references made absolute against ``base``, so it can be merged
    into a schema that lives in another resource (another base URI). Embedded resources
    (an ``$id`` below the top) keep their references, which are relative to them; values
    (``enum``, ``const``, ``default``, ``examples``) are not schemas and are kept as they
    are. ``schema`` itself is returned when ``base`` is empty."""
    from urllib.parse import urljoin

    if not base:
        return schema

    def walk(node: Any, base: str, top: bool) -> Any:
        if isinstance(node, list):
            return [walk(x, base, False) for x in node]
        if not isinstance(node, dict):
            return node
        if isinstance(node.get(id_kw), str) and not top:
            return node  # a resource of its own: its references stay relative to it
        out = {}
        for k, v in node.items():
            if k in REFERENCE_KEYWORDS and isinstance(v, str):
                out[k] = urljoin(base, v) if not v.startswith(("urn:", "tag:")) else v
            elif k in VALUE_KEYWORDS:
                out[k] = v
            else:
                out[k] = walk(v, base, False)
        return out

    return walk(schema, base, True)
