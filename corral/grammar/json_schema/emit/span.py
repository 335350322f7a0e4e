"""Span constraints: ``"x-corral-span"`` on a string schema makes its value a verbatim,
non-empty substring of the source text given at compile time (``source=``).

The keyword's value is ``true`` (exact match), ``false`` (no constraint) or an object
``{"ignore_case": bool, "whitespace": "exact" | "normalize"}`` (see
:mod:`corral.grammar.spans`). It combines with ``type: "string"``, annotations and the
string keywords ``minLength``, ``maxLength``, ``pattern``, ``format``, ``enum`` and
``const``, which restrict the span automaton exactly (``emit/restrict.py``: no span the
grammar allows can fail them at the end); beside any other keyword (``$ref``,
``anyOf``...) it is refused, naming that keyword and its pointer.

Standard validators ignore the keyword; corral's final check enforces it too, so that no
path through the schema (an ``allOf`` merge, say) can drop it: where an occurrence does
not reach the grammar as a string schema of its own, it is reported as the final
check's (and refused without one).

:func:`find_spans` reads every occurrence before translation (and refuses malformed ones,
or any at all without a source); :func:`emit_span` makes the terminal of one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ....errors import Location, UnsupportedFeatureError
from ...spans import WHITESPACE_MODES, SpanOptions, prepare_text, span_dfa
from ..keywords import ANNOTATIONS
from ..load import SchemaError, pointer_join
from .restrict import BESIDE, restricted_terminal

if TYPE_CHECKING:
    from ..translate import Translator

__all__ = [
    "SPAN_KEYWORD",
    "emit_span",
    "find_spans",
    "span_occurs",
    "span_options",
    "string_only",
    "subschemas_with",
]

SPAN_KEYWORD = "x-corral-span"

# keywords whose value maps names to subschemas / holds data, not a subschema
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_DATA = frozenset({"enum", "const", "examples", "default"})


def span_options(value: Any, ptr: str) -> SpanOptions | None:
    """The options a keyword value asks for (``None``: ``false``, no constraint).

    Raises:
        SchemaError: a value other than a boolean or an object of known options.
    """
    where = pointer_join(ptr, SPAN_KEYWORD)
    if value is True:
        return SpanOptions()
    if value is False:
        return None
    if not isinstance(value, dict):
        raise SchemaError(
            f"{SPAN_KEYWORD} must be true, false or an object of options, not {value!r} "
            f"(at {where})",
            where,
        )
    unknown = sorted(set(value) - {"ignore_case", "whitespace"})
    if unknown:
        raise SchemaError(
            f"{SPAN_KEYWORD}: unknown options {unknown} (known: ignore_case, whitespace; "
            f"at {where})",
            where,
        )
    ic = value.get("ignore_case", False)
    ws = value.get("whitespace", "exact")
    if not isinstance(ic, bool):
        raise SchemaError(f"{SPAN_KEYWORD}: ignore_case must be a boolean (at {where})", where)
    if ws not in WHITESPACE_MODES:
        raise SchemaError(
            f"{SPAN_KEYWORD}: whitespace must be one of {WHITESPACE_MODES} (at {where})", where
        )
    return SpanOptions(ignore_case=ic, whitespace=ws)


def find_spans(schema: Any, *, has_source: bool) -> dict[str, SpanOptions]:
    """Every span constraint in ``schema``: JSON pointer of its subschema -> options.

    Raises:
        SchemaError: a malformed keyword value, or a span constraint without a source.
    """
    found: dict[str, SpanOptions] = {}
    for ptr, node in subschemas_with(schema, SPAN_KEYWORD):
        opts = span_options(node[SPAN_KEYWORD], ptr)
        if opts is not None:
            found[ptr] = opts
    if found and not has_source:
        where = pointer_join(next(iter(found)), SPAN_KEYWORD)
        raise SchemaError(
            f"{SPAN_KEYWORD} (at {where}) needs the source text its values come from: pass "
            "source=... (corral.compile, generate, stream, infill; extract passes each "
            "document)",
            where,
        )
    return found


def subschemas_with(node: Any, keyword: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The dict subschemas of ``node`` that hold ``keyword``, with their JSON pointers
    (depth first in document order, no recursion). Pointers are spelled only for those:
    the walk keeps each node's parent and token instead (most schemas hold the keyword
    nowhere)."""
    parents: list[tuple[int, str | int]] = []  # node id -> (parent id, token)
    stack: list[tuple[Any, int, str | int]] = [(node, -1, "")]
    while stack:
        s, parent, token = stack.pop()
        if not isinstance(s, dict):
            continue
        me = len(parents)
        parents.append((parent, token))
        if keyword in s:
            yield _pointer(parents, me), s
        children: list[tuple[Any, int, str | int]] = []
        for k, v in s.items():
            if k in _DATA:
                continue
            if k in _SCHEMA_MAPS and isinstance(v, dict):
                kid = len(parents)
                parents.append((me, k))
                children.extend((sub, kid, name) for name, sub in v.items())
            elif isinstance(v, list):
                kid = len(parents)
                parents.append((me, k))
                children.extend((sub, kid, i) for i, sub in enumerate(v))
            elif isinstance(v, dict):
                children.append((v, me, k))
        stack.extend(reversed(children))


def _pointer(parents: list[tuple[int, str | int]], i: int) -> str:
    """The JSON pointer of node ``i`` of :func:`subschemas_with`'s walk."""
    tokens: list[str | int] = []
    while i > 0:
        i, token = parents[i]
        tokens.append(token)
    return pointer_join("", *reversed(tokens))


def string_only(
    b: Translator,
    s: dict[str, Any],
    ptr: str,
    keyword: str,
    advice: str,
    also: Callable[[str], bool] = lambda kw: False,
) -> None:
    """Check that subschema ``s`` (at ``ptr``) holds nothing beside ``keyword`` but
    ``type: "string"``, annotations and what ``also(kw)`` takes (recording its findings).

    Raises:
        UnsupportedFeatureError: any other keyword, named with its pointer.
    """
    for kw in s:
        if kw == keyword or kw in ANNOTATIONS:
            continue
        if kw == "type" and s["type"] in ("string", ["string"]):
            b.findings.exact(pointer_join(ptr, kw), kw)
            continue
        if also(kw):
            continue
        raise UnsupportedFeatureError(
            f"{kw} beside {keyword}",
            location=Location(pointer=pointer_join(ptr, kw)),
            detail=f"{keyword} combines with type: string and annotations only; {advice}",
        )


def emit_span(b: Translator, s: dict[str, Any], ptr: str) -> str | None:
    """The terminal of the spans of the source that subschema ``s`` (at ``ptr``, holding
    :data:`SPAN_KEYWORD`) allows, or ``None`` for ``false`` (the caller goes on without).

    Raises:
        UnsupportedFeatureError: another assertion beside the keyword, or a type other
            than ``string``.
    """
    opts = span_options(s[SPAN_KEYWORD], ptr)
    if opts is None:
        return None

    advice = "a span's text is the source's, so constrain the source instead"
    string_only(b, s, ptr, SPAN_KEYWORD, advice, lambda kw: kw in BESIDE)
    texts = b.opt.source or ()
    name = restricted_terminal(
        b,
        s,
        ptr,
        SPAN_KEYWORD,
        f"span:{opts.key}",
        lambda: span_dfa(texts, opts, encoding="json"),
        max((len(t) for t in texts), default=0),
        "span",
        "SPAN",
    )
    b.findings.exact(pointer_join(ptr, SPAN_KEYWORD), SPAN_KEYWORD)
    b.span_pointers.add(ptr)
    return name


def span_occurs(value: str, texts: tuple[str, ...], opts: SpanOptions) -> bool:
    """Whether ``value`` is a non-empty span of one of ``texts`` (the final check's test;
    the same language as :func:`~corral.grammar.spans.span_dfa`)."""
    if not value:
        return False
    probe = prepare_text(value, SpanOptions(ignore_case=opts.ignore_case))
    return any(probe in prepare_text(t, opts) for t in texts)
