"""The formats of a structural tag, as Python values.

A structural tag describes a whole output as a tree of *formats*: fixed strings, JSON
values, regexes and Lark grammars, composed in sequence, alternative and repetition, wrapped
in tags (``begin content end``), and free text in which a *trigger* string switches into a
tag (a tool call inside prose). The tree is the one of XGrammar's structural-tag JSON
(``{"type": "structural_tag", "format": {...}}``); :func:`~.read.read_structural_tag`
reads that JSON into these classes and :meth:`Format.to_json` writes it back, so a request
moves between the two engines unchanged. ``docs/structural_tags.md`` lists each format,
its meaning and where corral differs.

Written in Python::

    from corral.grammar import structural as st

    spec = st.Tag("<think>", st.AnyText(), "</think>") + st.TriggeredTags(
        triggers=["<tool_call>"],
        tags=[st.Tag("<tool_call>", st.JSONSchema(schema), "</tool_call>")],
    )
    corral.compile(spec, vocab)

``a + b`` is :class:`Sequence`, ``a | b`` is :class:`Or`; a plain ``str`` where a format
is expected is a :class:`Const`. Values are immutable and compare by content.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any, ClassVar, Union

from ...errors import ArgumentTypeError, InvalidArgumentError

__all__ = [
    "AnyText",
    "AnyTokens",
    "Const",
    "Dispatch",
    "ExcludeToken",
    "Format",
    "JSONSchema",
    "Lark",
    "Optional",
    "Or",
    "Plus",
    "Regex",
    "Repeat",
    "Sequence",
    "Star",
    "StructuralTag",
    "Tag",
    "TagsWithSeparator",
    "Token",
    "TokenDispatch",
    "TokenTriggeredTags",
    "TriggeredTags",
    "as_format",
]

MAX_COUNT = 2_147_483_647
"""The largest ``max_tokens``, ``max_chars`` and ``repeat`` bound the JSON form admits."""

TokenRef = Union[int, str]  # noqa: UP007 (a runtime alias)
"""A token by id (``int``) or by its text (``str``, e.g. ``"<|python_tag|>"``)."""


class Format:
    """A node of a structural tag (see the module docs). Each is a frozen dataclass whose
    fields are named as in the JSON form, and ``TYPE`` is its JSON ``"type"``."""

    TYPE: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        """The node as XGrammar's structural-tag JSON (a ``dict`` of JSON data): its
        ``type``, and each field that is required or differs from its default."""
        out: dict[str, Any] = {"type": self.TYPE}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            required = f.default is dataclasses.MISSING
            if required or value != f.default:
                out[f.name] = _json(value)
        return out

    def __add__(self, other: Format | str) -> Sequence:
        return Sequence([*_flat(self, Sequence), *_flat(as_format(other), Sequence)])

    def __radd__(self, other: str) -> Sequence:
        return Sequence([as_format(other), *_flat(self, Sequence)])

    def __or__(self, other: Format | str) -> Or:
        return Or([*_flat(self, Or), *_flat(as_format(other), Or)])

    def __ror__(self, other: str) -> Or:
        return Or([as_format(other), *_flat(self, Or)])


def _json(value: Any) -> Any:
    """A field's value as JSON data: formats by their ``to_json``, tuples as lists."""
    if isinstance(value, Format):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [_json(v) for v in value]
    return value


def _flat(f: Format, kind: type) -> tuple[Format, ...]:
    return f.elements if isinstance(f, kind) else (f,)  # type: ignore[attr-defined]


def as_format(value: Any) -> Format:
    """``value`` as a format: a :class:`Format` as it is, a ``str`` as :class:`Const`."""
    if isinstance(value, Format):
        return value
    if isinstance(value, str):
        return Const(value)
    raise ArgumentTypeError(
        f"expected a structural-tag format (corral.grammar.structural) or a str, "
        f"not {type(value).__name__}"
    )


def _strs(values: Iterable[str] | str, what: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise ArgumentTypeError(f"{what} must be a list of strings, not one string")
    out = tuple(values)
    for v in out:
        if not isinstance(v, str):
            raise ArgumentTypeError(f"{what} must hold strings, not {type(v).__name__}")
    return out


def _token_refs(values: Iterable[TokenRef], what: str) -> tuple[TokenRef, ...]:
    out = tuple(values)
    for v in out:
        _check_token_ref(v, what)
    return out


def _check_token_ref(v: Any, what: str) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ArgumentTypeError(f"{what} must be a token id (int) or text (str), not {v!r}")
    if isinstance(v, int) and v < 0:
        raise InvalidArgumentError(f"{what}: a token id is not negative, got {v}")
    if isinstance(v, str) and not v:
        raise InvalidArgumentError(f"{what}: a token's text is not empty")


def _check_count(value: int | None, what: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{what} must be an int or None, not {value!r}")
    if not 0 <= value <= MAX_COUNT:
        raise InvalidArgumentError(f"{what} must be in [0, {MAX_COUNT}], got {value}")


def _check_bool(value: Any, what: str) -> None:
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{what} must be a bool, not {value!r}")


# -- primitive formats ------------------------------------------------------------------
@dataclass(frozen=True)
class Const(Format):
    """Exactly the text ``value``."""

    TYPE: ClassVar[str] = "const_string"

    value: str

    def __post_init__(self) -> None:
        if not isinstance(self.value, str):
            raise ArgumentTypeError(f"Const value must be a str, not {self.value!r}")


JSON_STYLES = ("json", "qwen_xml")
"""The ``style``\\ s corral writes a JSON Schema's values in (see :class:`JSONSchema`)."""


@dataclass(frozen=True, eq=False)
class JSONSchema(Format):
    """A JSON value valid for ``schema`` (a dict, bool or pydantic model class).

    ``style="qwen_xml"`` writes an object's properties as Qwen3-Coder's XML parameters,
    ``<parameter=NAME>VALUE</parameter>`` each (whitespace may come before each
    ``<parameter=``), a string value raw up to the first ``</parameter>`` and any other
    value as JSON (see ``xml_params.py``). Objects keep the schema's property order
    unless ``any_order`` (XGrammar's field): then properties come in any order, each at
    most once and the required ones present (the JSON Schema option
    ``property_order="any"``, exact for objects of up to ``any_order_max_properties``
    named properties, larger ones keeping schema order); refused with ``qwen_xml``.
    """

    TYPE: ClassVar[str] = "json_schema"

    schema: Any
    style: str = "json"
    any_order: bool = False

    def __post_init__(self) -> None:
        if self.style not in JSON_STYLES:
            raise InvalidArgumentError(
                f"JSONSchema style must be one of {list(JSON_STYLES)}, got {self.style!r}"
            )
        _check_bool(self.any_order, "JSONSchema any_order")

    def schema_json(self) -> Any:
        s = self.schema
        if isinstance(s, type) and hasattr(s, "model_json_schema"):
            return s.model_json_schema()
        return s

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "json_schema", "json_schema": self.schema_json()}
        if self.style != "json":
            out["style"] = self.style
        if self.any_order:
            out["any_order"] = True
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JSONSchema) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(("json_schema", repr(self.to_json())))


@dataclass(frozen=True)
class Lark(Format):
    """Text of a Lark grammar (``grammar`` in the JSON form; XGrammar reads EBNF there)."""

    TYPE: ClassVar[str] = "grammar"

    grammar: str
    start: str = "start"

    def __post_init__(self) -> None:
        if not isinstance(self.grammar, str) or not isinstance(self.start, str):
            raise ArgumentTypeError("Lark grammar and start must be strings")


@dataclass(frozen=True)
class Regex(Format):
    """Text matching the Python-syntax regex ``pattern`` in full."""

    TYPE: ClassVar[str] = "regex"

    pattern: str

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str):
            raise ArgumentTypeError(f"Regex pattern must be a str, not {self.pattern!r}")


@dataclass(frozen=True)
class AnyText(Format):
    """Free text (valid UTF-8, no special tokens) that contains none of ``excludes``.

    It ends where what follows it begins: at the first occurrence of a string that can
    follow (the end of the enclosing :class:`Tag`, the next :class:`Const`, ...), before a
    special token that can follow, or at the end of the output.

    ``max_tokens``: the region holds at most that many tokens; when they are spent, only
    what ends it may follow (generation-time; text checked without tokens does not count
    them). ``max_chars``: at most that many characters (code points).
    """

    TYPE: ClassVar[str] = "any_text"

    excludes: Seq[str] = ()
    max_tokens: int | None = None
    max_chars: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "excludes", _strs(self.excludes, "AnyText excludes"))
        _check_count(self.max_tokens, "AnyText max_tokens")
        _check_count(self.max_chars, "AnyText max_chars")


# -- token-level formats ----------------------------------------------------------------
@dataclass(frozen=True)
class Token(Format):
    """One special token, by text (``"<|python_tag|>"``) or id. It matches that token
    only, never its spelling in ordinary tokens."""

    TYPE: ClassVar[str] = "token"

    token: TokenRef

    def __post_init__(self) -> None:
        _check_token_ref(self.token, "Token")


@dataclass(frozen=True)
class ExcludeToken(Format):
    """One token other than ``exclude_tokens`` (read for compatibility; corral refuses it
    when compiling: it constrains text, not how many tokens spell it)."""

    TYPE: ClassVar[str] = "exclude_token"

    exclude_tokens: Seq[TokenRef] = ()

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "exclude_tokens", _token_refs(self.exclude_tokens, "exclude_tokens")
        )


@dataclass(frozen=True)
class AnyTokens(Format):
    """Free text as :class:`AnyText`, read at the token level: special tokens never occur
    in it, and ``exclude_tokens`` given by text are excluded as text."""

    TYPE: ClassVar[str] = "any_tokens"

    exclude_tokens: Seq[TokenRef] = ()
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "exclude_tokens", _token_refs(self.exclude_tokens, "exclude_tokens")
        )
        _check_count(self.max_tokens, "AnyTokens max_tokens")


# -- composition ------------------------------------------------------------------------
def _formats(values: Iterable[Format | str], what: str) -> tuple[Format, ...]:
    if isinstance(values, (str, Format)):
        raise ArgumentTypeError(f"{what} must be a list of formats")
    return tuple(as_format(v) for v in values)


@dataclass(frozen=True)
class Sequence(Format):
    """Each element in turn."""

    TYPE: ClassVar[str] = "sequence"

    elements: Seq[Format]

    def __init__(self, elements: Iterable[Format | str]) -> None:
        object.__setattr__(self, "elements", _formats(elements, "Sequence elements"))


@dataclass(frozen=True)
class Or(Format):
    """One of the elements."""

    TYPE: ClassVar[str] = "or"

    elements: Seq[Format]

    def __init__(self, elements: Iterable[Format | str]) -> None:
        els = _formats(elements, "Or elements")
        if not els:
            raise InvalidArgumentError("Or needs at least one element")
        object.__setattr__(self, "elements", els)


@dataclass(frozen=True)
class _Repetition(Format):
    """``content`` a number of times that the subclass names (its JSON ``type``)."""

    content: Format
    TYPE: ClassVar[str] = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", as_format(self.content))


@dataclass(frozen=True)
class Optional(_Repetition):
    """``content`` once or not at all."""

    TYPE: ClassVar[str] = "optional"


@dataclass(frozen=True)
class Star(_Repetition):
    """``content`` any number of times."""

    TYPE: ClassVar[str] = "star"


@dataclass(frozen=True)
class Plus(_Repetition):
    """``content`` once or more."""

    TYPE: ClassVar[str] = "plus"


@dataclass(frozen=True)
class Repeat(Format):
    """``content`` between ``min`` and ``max`` times (``max=-1``: no upper bound)."""

    TYPE: ClassVar[str] = "repeat"

    content: Format
    min: int
    max: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", as_format(self.content))
        _check_count(self.min, "Repeat min")
        if isinstance(self.max, bool) or not isinstance(self.max, int):
            raise ArgumentTypeError(f"Repeat max must be an int, not {self.max!r}")
        if self.max != -1 and not self.min <= self.max <= MAX_COUNT:
            raise InvalidArgumentError(
                f"Repeat needs min <= max (or max = -1), got min={self.min}, max={self.max}"
            )


# -- tags and dispatch ------------------------------------------------------------------
def _delimiter(value: Any, what: str) -> str | Token:
    if isinstance(value, (str, Token)):
        return value
    raise ArgumentTypeError(f"{what} must be a str or a Token, not {type(value).__name__}")


@dataclass(frozen=True)
class Tag(Format):
    """``begin content end``. ``end`` may be several strings (any one ends the tag); a
    :class:`Token` as ``begin`` or ``end`` is that special token."""

    TYPE: ClassVar[str] = "tag"

    begin: str | Token
    content: Format
    end: str | Seq[str] | Token

    def __post_init__(self) -> None:
        object.__setattr__(self, "begin", _delimiter(self.begin, "Tag begin"))
        object.__setattr__(self, "content", as_format(self.content))
        end = self.end
        if isinstance(end, (list, tuple)):
            end = _strs(end, "Tag end")
            if not end:
                raise InvalidArgumentError("Tag end: a list of end strings is not empty")
            if len(end) == 1:
                end = end[0]
        else:
            end = _delimiter(end, "Tag end")
        object.__setattr__(self, "end", end)

    @property
    def ends(self) -> tuple[str, ...] | Token:
        """The end strings (a tuple), or the end token."""
        if isinstance(self.end, (str, Token)):
            return (self.end,) if isinstance(self.end, str) else self.end
        return tuple(self.end)


def _tags(values: Iterable[Tag], what: str) -> tuple[Tag, ...]:
    out = tuple(values)
    for t in out:
        if not isinstance(t, Tag):
            raise ArgumentTypeError(f"{what} must hold Tags, not {type(t).__name__}")
    return out


@dataclass(frozen=True)
class TriggeredTags(Format):
    """Free text in which each trigger starts one of ``tags`` (the tags whose ``begin``
    starts with it); after the tag, free text again.

    ``at_least_one``: the output starts with a tag (no free text before the first).
    ``stop_after_first``: the format ends right after the first tag. ``excludes``:
    strings the free text may not contain. The free text ends as :class:`AnyText` does.
    """

    TYPE: ClassVar[str] = "triggered_tags"

    triggers: Seq[str]
    tags: Seq[Tag]
    at_least_one: bool = False
    stop_after_first: bool = False
    excludes: Seq[str] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "triggers", _strs(self.triggers, "TriggeredTags triggers"))
        object.__setattr__(self, "tags", _tags(self.tags, "TriggeredTags tags"))
        object.__setattr__(self, "excludes", _strs(self.excludes, "TriggeredTags excludes"))
        _check_bool(self.at_least_one, "at_least_one")
        _check_bool(self.stop_after_first, "stop_after_first")


@dataclass(frozen=True)
class TokenTriggeredTags(Format):
    """:class:`TriggeredTags` whose triggers are special tokens: each tag's ``begin`` is a
    :class:`Token` of ``trigger_tokens``."""

    TYPE: ClassVar[str] = "token_triggered_tags"

    trigger_tokens: Seq[TokenRef]
    tags: Seq[Tag]
    exclude_tokens: Seq[TokenRef] = ()
    at_least_one: bool = False
    stop_after_first: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "trigger_tokens", _token_refs(self.trigger_tokens, "trigger_tokens")
        )
        object.__setattr__(self, "tags", _tags(self.tags, "TokenTriggeredTags tags"))
        object.__setattr__(
            self, "exclude_tokens", _token_refs(self.exclude_tokens, "exclude_tokens")
        )
        _check_bool(self.at_least_one, "at_least_one")
        _check_bool(self.stop_after_first, "stop_after_first")


@dataclass(frozen=True)
class TagsWithSeparator(Format):
    """Tags separated by ``separator`` and nothing else (none, with ``at_least_one`` at
    least one, with ``stop_after_first`` at most one)."""

    TYPE: ClassVar[str] = "tags_with_separator"

    tags: Seq[Tag]
    separator: str
    at_least_one: bool = False
    stop_after_first: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "tags", _tags(self.tags, "TagsWithSeparator tags"))
        if not isinstance(self.separator, str):
            raise ArgumentTypeError("TagsWithSeparator separator must be a str")
        _check_bool(self.at_least_one, "at_least_one")
        _check_bool(self.stop_after_first, "stop_after_first")


@dataclass(frozen=True)
class Dispatch(Format):
    """Free text in which each pattern is followed by its format (``rules``); with
    ``loop`` free text resumes after it, else the format ends there."""

    TYPE: ClassVar[str] = "dispatch"

    rules: Seq[tuple[str, Format]]
    loop: bool = True
    excludes: Seq[str] = ()

    def __post_init__(self) -> None:
        rules = []
        for r in self.rules:
            if not (isinstance(r, (tuple, list)) and len(r) == 2 and isinstance(r[0], str)):
                raise ArgumentTypeError("Dispatch rules must be (pattern str, format) pairs")
            rules.append((r[0], as_format(r[1])))
        object.__setattr__(self, "rules", tuple(rules))
        _check_bool(self.loop, "Dispatch loop")
        object.__setattr__(self, "excludes", _strs(self.excludes, "Dispatch excludes"))


@dataclass(frozen=True)
class TokenDispatch(Format):
    """:class:`Dispatch` whose patterns are special tokens."""

    TYPE: ClassVar[str] = "token_dispatch"

    rules: Seq[tuple[TokenRef, Format]]
    loop: bool = True
    exclude_tokens: Seq[TokenRef] = ()

    def __post_init__(self) -> None:
        rules = []
        for r in self.rules:
            if not (isinstance(r, (tuple, list)) and len(r) == 2):
                raise ArgumentTypeError("TokenDispatch rules must be (token, format) pairs")
            _check_token_ref(r[0], "TokenDispatch rule token")
            rules.append((r[0], as_format(r[1])))
        object.__setattr__(self, "rules", tuple(rules))
        _check_bool(self.loop, "TokenDispatch loop")
        object.__setattr__(
            self, "exclude_tokens", _token_refs(self.exclude_tokens, "exclude_tokens")
        )


@dataclass(frozen=True)
class StructuralTag:
    """The root: a whole output of the format ``format``. ``corral.compile`` takes this, a
    bare :class:`Format`, or the JSON form ``{"type": "structural_tag", "format": ...}``."""

    format: Format = field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "format", as_format(self.format))

    def to_json(self) -> dict[str, Any]:
        return {"type": "structural_tag", "format": self.format.to_json()}
