"""Reading XGrammar's structural-tag JSON into :mod:`.nodes`, with the JSON pointer of
every node that is wrong.

The JSON form is ``{"type": "structural_tag", "format": F}``; each ``F`` is an object with
a ``"type"`` and the fields of that format (see ``docs/structural_tags.md``). A bare format
object (``{"type": "tag", ...}``) is read too. Unlike a Pydantic model, an unknown field is
an error, not ignored: a misspelt ``"at_least_on"`` would otherwise drop a constraint.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ...errors import CorralError, GrammarError, Location
from . import nodes as n

__all__ = ["FORMAT_TYPES", "StructuralTagError", "is_structural_tag", "read_structural_tag"]


class StructuralTagError(GrammarError):
    """A structural tag is malformed or cannot be enforced as written.

    Attributes:
        pointer: the JSON pointer of the offending node or field (``""``: the root), also
            ``location.pointer``.
    """

    def __init__(self, message: str, pointer: str = "") -> None:
        self.pointer = pointer
        super().__init__(
            f"{message} (at {pointer or '/'})", location=Location(pointer=pointer or "/")
        )


def is_structural_tag(spec: Any) -> bool:
    """Whether ``spec`` is a structural tag: a :class:`~.nodes.StructuralTag` or
    :class:`~.nodes.Format`, or a ``dict`` whose ``"type"`` is ``"structural_tag"``."""
    if isinstance(spec, (n.StructuralTag, n.Format)):
        return True
    return isinstance(spec, dict) and spec.get("type") == "structural_tag"


def read_structural_tag(spec: Any) -> n.Format:
    """The root format of ``spec`` (a node, a JSON ``dict`` or JSON text).

    Raises:
        StructuralTagError: malformed JSON, an unknown format type or field, a field of the
            wrong type, naming its JSON pointer.
    """
    if isinstance(spec, n.StructuralTag):
        return spec.format
    if isinstance(spec, n.Format):
        return spec
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except (ValueError, RecursionError) as e:
            raise StructuralTagError(f"the structural tag is not JSON: {e}") from None
    if not isinstance(spec, dict):
        raise StructuralTagError(f"a structural tag is a JSON object, not {_kind(spec)}")
    if spec.get("type") == "structural_tag":
        _fields(spec, "", required=("format",), optional=())
        return _format(spec["format"], "/format")
    return _format(spec, "")


def _kind(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(v), "null" if v is None else "a number"
    )


def _esc(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _fields(
    obj: dict[str, Any], ptr: str, *, required: tuple[str, ...], optional: tuple[str, ...]
) -> None:
    for k in required:
        if k not in obj:
            raise StructuralTagError(
                f"{obj.get('type', 'the object')!r} needs the field {k!r}", ptr
            )
    known = {"type", *required, *optional}
    for k in obj:
        if k not in known:
            raise StructuralTagError(
                f"unknown field {k!r} of {obj.get('type')!r} (it takes {sorted(known - {'type'})})",
                f"{ptr}/{_esc(k)}",
            )


def _str(v: Any, ptr: str) -> str:
    if not isinstance(v, str):
        raise StructuralTagError(f"expected a string, got {_kind(v)}", ptr)
    return v


def _bool(obj: dict[str, Any], key: str, ptr: str, default: bool) -> bool:
    v = obj.get(key, default)
    if not isinstance(v, bool):
        raise StructuralTagError(f"{key} must be a boolean, got {_kind(v)}", f"{ptr}/{key}")
    return v


def _count(obj: dict[str, Any], key: str, ptr: str) -> int | None:
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= n.MAX_COUNT:
        raise StructuralTagError(
            f"{key} must be null or an integer in [0, {n.MAX_COUNT}], got {v!r}", f"{ptr}/{key}"
        )
    return v


def _str_list(
    obj: dict[str, Any], key: str, ptr: str, *, required: bool = False
) -> tuple[str, ...]:
    v = obj.get(key, [] if not required else None)
    if not isinstance(v, list):
        raise StructuralTagError(
            f"{key} must be an array of strings, got {_kind(v)}", f"{ptr}/{key}"
        )
    return tuple(_str(x, f"{ptr}/{key}/{i}") for i, x in enumerate(v))


def _token_ref(v: Any, ptr: str) -> n.TokenRef:
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, str))
        or v == ""
        or (isinstance(v, int) and v < 0)
    ):
        raise StructuralTagError(f"a token is an id (integer >= 0) or its text, got {v!r}", ptr)
    return v


def _token_list(
    obj: dict[str, Any], key: str, ptr: str, *, required: bool = False
) -> tuple[n.TokenRef, ...]:
    v = obj.get(key, [] if not required else None)
    if not isinstance(v, list):
        raise StructuralTagError(
            f"{key} must be an array of tokens, got {_kind(v)}", f"{ptr}/{key}"
        )
    return tuple(_token_ref(x, f"{ptr}/{key}/{i}") for i, x in enumerate(v))


def _format_list(obj: dict[str, Any], key: str, ptr: str) -> tuple[n.Format, ...]:
    v = obj.get(key)
    if not isinstance(v, list):
        raise StructuralTagError(
            f"{key} must be an array of formats, got {_kind(v)}", f"{ptr}/{key}"
        )
    return tuple(_format(x, f"{ptr}/{key}/{i}") for i, x in enumerate(v))


def _token(v: Any, ptr: str) -> n.Token:
    if not isinstance(v, dict) or v.get("type") != "token":
        raise StructuralTagError('expected a string or a {"type": "token"} object', ptr)
    return _read_token(v, ptr)


def _tag(v: Any, ptr: str) -> n.Tag:
    if not isinstance(v, dict) or v.get("type") != "tag":
        raise StructuralTagError(f'expected a "tag" format, got {_kind(v)}', ptr)
    return _read_tag(v, ptr)


def _tag_list(obj: dict[str, Any], key: str, ptr: str) -> tuple[n.Tag, ...]:
    v = obj.get(key)
    if not isinstance(v, list):
        raise StructuralTagError(f"{key} must be an array of tags, got {_kind(v)}", f"{ptr}/{key}")
    return tuple(_tag(x, f"{ptr}/{key}/{i}") for i, x in enumerate(v))


# -- one reader per format type -----------------------------------------------------------
def _read_const(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=("value",), optional=())
    return n.Const(_str(o["value"], f"{p}/value"))


def _read_json_schema(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=("json_schema",), optional=("style", "any_order"))
    schema = o["json_schema"]
    if not isinstance(schema, (dict, bool)):
        raise StructuralTagError(
            f"json_schema must be an object or a boolean, got {_kind(schema)}", f"{p}/json_schema"
        )
    style = o.get("style", "json")
    if style not in n.JSON_STYLES:
        raise StructuralTagError(
            f"style {style!r} is not supported (corral writes {list(n.JSON_STYLES)})", f"{p}/style"
        )
    return n.JSONSchema(schema, style=style, any_order=_bool(o, "any_order", p, False))


def _read_grammar(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=("grammar",), optional=("start",))
    return n.Lark(_str(o["grammar"], f"{p}/grammar"), _str(o.get("start", "start"), f"{p}/start"))


def _read_regex(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=("pattern",), optional=())
    return n.Regex(_str(o["pattern"], f"{p}/pattern"))


def _read_any_text(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=(), optional=("excludes", "max_tokens", "max_chars"))
    return n.AnyText(
        _str_list(o, "excludes", p), _count(o, "max_tokens", p), _count(o, "max_chars", p)
    )


def _read_token(o: dict[str, Any], p: str) -> n.Token:
    _fields(o, p, required=("token",), optional=())
    return n.Token(_token_ref(o["token"], f"{p}/token"))


def _read_exclude_token(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=(), optional=("exclude_tokens",))
    return n.ExcludeToken(_token_list(o, "exclude_tokens", p))


def _read_any_tokens(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=(), optional=("exclude_tokens", "max_tokens"))
    return n.AnyTokens(_token_list(o, "exclude_tokens", p), _count(o, "max_tokens", p))


def _read_sequence(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=("elements",), optional=())
    return n.Sequence(_format_list(o, "elements", p))


def _read_or(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=("elements",), optional=())
    els = _format_list(o, "elements", p)
    if not els:
        raise StructuralTagError('"or" needs at least one element', f"{p}/elements")
    return n.Or(els)


def _content(o: dict[str, Any], p: str) -> n.Format:
    return _format(o["content"], f"{p}/content")


def _repetition(
    cls: type[n.Optional | n.Star | n.Plus],
) -> Callable[[dict[str, Any], str], n.Format]:
    """The reader of ``optional``, ``star`` or ``plus``: a ``content`` format."""

    def read(o: dict[str, Any], p: str) -> n.Format:
        _fields(o, p, required=("content",), optional=())
        return cls(_content(o, p))

    return read


def _read_repeat(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=("min", "max", "content"), optional=())
    lo, hi = o["min"], o["max"]
    if isinstance(lo, bool) or not isinstance(lo, int) or not 0 <= lo <= n.MAX_COUNT:
        raise StructuralTagError(
            f"min must be an integer in [0, {n.MAX_COUNT}], got {lo!r}", f"{p}/min"
        )
    if isinstance(hi, bool) or not isinstance(hi, int) or not (hi == -1 or lo <= hi <= n.MAX_COUNT):
        raise StructuralTagError(
            f"max must be -1 or an integer in [min, {n.MAX_COUNT}], got {hi!r}", f"{p}/max"
        )
    return n.Repeat(_content(o, p), lo, hi)


def _read_tag(o: dict[str, Any], p: str) -> n.Tag:
    _fields(o, p, required=("begin", "content", "end"), optional=())
    b = o["begin"]
    begin: str | n.Token = b if isinstance(b, str) else _token(b, f"{p}/begin")
    e = o["end"]
    end: str | tuple[str, ...] | n.Token
    if isinstance(e, str):
        end = e
    elif isinstance(e, list):
        if not e:
            raise StructuralTagError("end: a list of end strings is not empty", f"{p}/end")
        end = tuple(_str(x, f"{p}/end/{i}") for i, x in enumerate(e))
    else:
        end = _token(e, f"{p}/end")
    return n.Tag(begin, _content(o, p), end)


def _read_triggered_tags(o: dict[str, Any], p: str) -> n.Format:
    _fields(
        o,
        p,
        required=("triggers", "tags"),
        optional=("at_least_one", "stop_after_first", "excludes"),
    )
    return n.TriggeredTags(
        _str_list(o, "triggers", p, required=True),
        _tag_list(o, "tags", p),
        _bool(o, "at_least_one", p, False),
        _bool(o, "stop_after_first", p, False),
        _str_list(o, "excludes", p),
    )


def _read_token_triggered_tags(o: dict[str, Any], p: str) -> n.Format:
    _fields(
        o,
        p,
        required=("trigger_tokens", "tags"),
        optional=("exclude_tokens", "at_least_one", "stop_after_first"),
    )
    return n.TokenTriggeredTags(
        _token_list(o, "trigger_tokens", p, required=True),
        _tag_list(o, "tags", p),
        _token_list(o, "exclude_tokens", p),
        _bool(o, "at_least_one", p, False),
        _bool(o, "stop_after_first", p, False),
    )


def _read_tags_with_separator(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=("tags", "separator"), optional=("at_least_one", "stop_after_first"))
    return n.TagsWithSeparator(
        _tag_list(o, "tags", p),
        _str(o["separator"], f"{p}/separator"),
        _bool(o, "at_least_one", p, False),
        _bool(o, "stop_after_first", p, False),
    )


def _rules(
    o: dict[str, Any], p: str, pattern: Callable[[Any, str], Any]
) -> tuple[tuple[Any, n.Format], ...]:
    v = o.get("rules")
    if not isinstance(v, list):
        raise StructuralTagError(
            f"rules must be an array of [pattern, format] pairs, got {_kind(v)}", f"{p}/rules"
        )
    out = []
    for i, r in enumerate(v):
        if not isinstance(r, list) or len(r) != 2:
            raise StructuralTagError("a rule is a [pattern, format] pair", f"{p}/rules/{i}")
        out.append((pattern(r[0], f"{p}/rules/{i}/0"), _format(r[1], f"{p}/rules/{i}/1")))
    return tuple(out)


def _read_dispatch(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=("rules",), optional=("loop", "excludes"))
    return n.Dispatch(_rules(o, p, _str), _bool(o, "loop", p, True), _str_list(o, "excludes", p))


def _read_token_dispatch(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=("rules",), optional=("loop", "exclude_tokens"))
    return n.TokenDispatch(
        _rules(o, p, _token_ref), _bool(o, "loop", p, True), _token_list(o, "exclude_tokens", p)
    )


def _read_qwen_xml(o: dict[str, Any], p: str) -> n.Format:
    _fields(o, p, required=("json_schema",), optional=())
    return _read_json_schema(
        {"type": "json_schema", "json_schema": o["json_schema"], "style": "qwen_xml"}, p
    )


FORMAT_TYPES: dict[str, Callable[[dict[str, Any], str], n.Format]] = {
    "const_string": _read_const,
    "json_schema": _read_json_schema,
    "grammar": _read_grammar,
    "regex": _read_regex,
    "any_text": _read_any_text,
    "token": _read_token,
    "exclude_token": _read_exclude_token,
    "any_tokens": _read_any_tokens,
    "sequence": _read_sequence,
    "or": _read_or,
    "optional": _repetition(n.Optional),
    "star": _repetition(n.Star),
    "plus": _repetition(n.Plus),
    "repeat": _read_repeat,
    "tag": _read_tag,
    "triggered_tags": _read_triggered_tags,
    "token_triggered_tags": _read_token_triggered_tags,
    "tags_with_separator": _read_tags_with_separator,
    "dispatch": _read_dispatch,
    "token_dispatch": _read_token_dispatch,
    "qwen_xml_parameter": _read_qwen_xml,
}
"""Every format ``"type"`` and its reader."""

_MAX_DEPTH = 200


def _format(v: Any, ptr: str) -> n.Format:
    if ptr.count("/") > _MAX_DEPTH:
        raise StructuralTagError(f"formats nest deeper than {_MAX_DEPTH // 2} levels", ptr)
    if not isinstance(v, dict):
        raise StructuralTagError(f'a format is an object with a "type", got {_kind(v)}', ptr)
    t = v.get("type")
    reader = FORMAT_TYPES.get(t) if isinstance(t, str) else None
    if reader is None:
        raise StructuralTagError(
            f"unknown format type {t!r}; known: {sorted(FORMAT_TYPES)}", f"{ptr}/type"
        )
    try:
        return reader(v, ptr)
    except StructuralTagError:
        raise
    except CorralError as e:  # a node's own check (e.g. an empty token text)
        raise StructuralTagError(str(e), ptr) from None
