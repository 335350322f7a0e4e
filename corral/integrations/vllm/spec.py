"""A request's constraint as vLLM carries it: ``SamplingParams.extra_args["corral"]``.

Wire format (the OpenAI server's ``vllm_xargs`` accepts strings, numbers and lists only,
so the constraint travels as JSON text; offline, a dict is accepted too)::

    extra_args = {"corral": '{"schema": {...}}'}                  # a JSON Schema
    extra_args = {"corral": '{"grammar": "start: ...", "start": "start"}'}
    extra_args = {"corral": '{"regex": "[0-9]{3}"}'}
    extra_args = {"corral": '{"schema": {...}, "options": {"whitespace": "flexible"}}'}
    extra_args = {"corral": '{"structural_tag": {"type": "structural_tag", "format": ...}}'}
    extra_args = {"corral": '{"tool_calls": {"tools": [...], "model": "qwen", ...}}'}

Exactly one of ``schema`` (a JSON object or boolean, or JSON text of one), ``grammar``
(Lark text), ``regex`` (a Python ``re`` pattern, matched in full) and ``structural_tag``
(XGrammar's structural-tag JSON, an object or JSON text of one: tool calls, reasoning and
free text, see ``docs/structural_tags.md``) and ``tool_calls`` (the arguments of
:func:`corral.tool_calls`: ``tools`` and ``model``, optionally ``tool_choice``,
``parallel``, ``reasoning`` and ``reasoning_budget``; the format is built in the engine,
for the engine's vocabulary, so that each marker is the special token where the served
tokenizer has one and text where it does not); ``options`` holds the JSON Schema compile
options of :class:`corral.grammar.json_schema.Options` (for a structural tag, those of its
``json_schema`` formats); ``start``
names a Lark grammar's start rule. Anything else is refused with a :class:`SpecError`
naming it: text that is not UTF-8 JSON, a key repeated in any object (in the schema too),
values that are not JSON data, and nesting deeper than :data:`MAX_DEPTH` levels of
objects and arrays (a schema may nest
:data:`~corral.grammar.json_schema.load.MAX_SCHEMA_DEPTH` levels, the JSON Schema front
end's own limit). No input makes reading a spec raise anything else. This module does
not import vLLM.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from ...errors import CorralError

KEY = "corral"
"""The key of ``SamplingParams.extra_args`` (and of ``vllm_xargs``) that holds a constraint."""

_KINDS = ("schema", "grammar", "regex", "structural_tag", "tool_calls")
_MONITOR_KEYS = ("monitors", "monitor_state")
MAX_MONITORS = 16
"""The most monitors one request may name."""
_READ = ("schema", "structural_tag", "tool_calls")  # kinds whose source is JSON text

TOOL_CALL_FIELDS = ("tools", "model", "tool_choice", "parallel", "reasoning", "reasoning_budget")
"""The fields of a ``tool_calls`` constraint: :func:`corral.tool_calls`'s arguments
(``tools`` and ``model`` required)."""

MAX_DEPTH = 129
"""Deepest nesting of objects and arrays in a constraint object: the object itself and a
schema of :data:`corral.grammar.json_schema.load.MAX_SCHEMA_DEPTH` (128) levels, the
front end's limit."""

_WHAT = f"extra_args[{KEY!r}]"


class SpecError(CorralError, ValueError):
    """``extra_args["corral"]`` is not a constraint corral understands."""


def _schema_option_names() -> frozenset[str]:
    from ...grammar.json_schema.translate import Options

    return frozenset(f.name for f in dataclasses.fields(Options))


@dataclasses.dataclass(frozen=True)
class ConstraintSpec:
    """One request's constraint, in a canonical, hashable form.

    Attributes:
        kind: ``"schema"``, ``"grammar"``, ``"regex"``, ``"structural_tag"`` or
            ``"tool_calls"``.
        source: the schema, structural tag or tool-call request as JSON text (keys in
            their given order, which is the order properties are written in), the Lark
            text, or the regex.
        options: the schema's compile options, or ``(("start", name),)`` for a grammar,
            as sorted ``(name, value)`` pairs.
        monitors: the names of the request's monitors (:mod:`corral.monitors.registry`),
            in the given order; ``kind`` is ``"text"`` (no constraint of its own, and an
            empty ``source``) where the request has monitors only.
        monitor_state: JSON text of the ``monitor_state`` the monitors' callbacks see as
            ``MonitorContext.state``.

    Two requests with equal specs share one compiled grammar.
    """

    kind: str
    source: str
    options: tuple[tuple[str, Any], ...] = ()
    monitors: tuple[str, ...] = ()
    monitor_state: str = "null"

    @classmethod
    def parse(cls, value: Any) -> ConstraintSpec:
        """The spec of ``extra_args["corral"]`` (JSON text or a mapping).

        Raises:
            SpecError: not UTF-8 JSON, a repeated key, not JSON data, nested deeper than
                :data:`MAX_DEPTH`, not an object, no or several kinds, unknown keys or
                options, values of the wrong type. Nothing else, whatever ``value`` is.
        """
        if isinstance(value, Mapping) and not isinstance(value, dict):
            value = dict(value)
        value = _json_data(value, _WHAT, MAX_DEPTH)
        if not isinstance(value, Mapping):
            raise SpecError(
                f"extra_args[{KEY!r}] must be a JSON object such as "
                f'{{"schema": {{...}}}}, {{"grammar": "..."}} or {{"regex": "..."}}, '
                f"not {type(value).__name__}"
            )
        unknown = sorted(set(value) - {*_KINDS, "options", "start", *_MONITOR_KEYS})
        if unknown:
            raise SpecError(
                f"extra_args[{KEY!r}] has unknown key(s) {unknown}; expected one of "
                f"{list(_KINDS)}, with 'options' (schema) or 'start' (grammar), and "
                "'monitors' with 'monitor_state'"
            )
        monitors = _monitor_names(value.get("monitors"))
        if "monitor_state" in value and not monitors:
            raise SpecError("'monitor_state' applies to a request with 'monitors'")
        state = json.dumps(value.get("monitor_state"), ensure_ascii=False)
        kinds = [k for k in _KINDS if k in value]
        if len(kinds) > 1 or not (kinds or monitors):
            raise SpecError(
                f"extra_args[{KEY!r}] must give exactly one of {list(_KINDS)} (or none, "
                "with 'monitors'), got " + (", ".join(kinds) if kinds else "none")
            )
        if not kinds:
            if "options" in value or "start" in value:
                raise SpecError("'options' and 'start' apply to a schema or a grammar")
            return cls("text", "", (), monitors, state)
        base = cls._parse_kind(value, kinds[0])
        return dataclasses.replace(base, monitors=monitors, monitor_state=state)

    @classmethod
    def _parse_kind(cls, value: Mapping[str, Any], kind: str) -> ConstraintSpec:
        body = value[kind]
        options = value.get("options")
        if options is not None and kind not in _READ:
            raise SpecError(f"'options' applies to a schema, not to a {kind}")
        if "start" in value and kind != "grammar":
            raise SpecError(f"'start' applies to a grammar, not to a {kind}")
        if kind == "schema":
            return cls(kind, _schema_text(body), _schema_options(options))
        if kind == "structural_tag":
            return cls(kind, _structural_text(body), _schema_options(options))
        if kind == "tool_calls":
            return cls(kind, _tool_calls_text(body), _schema_options(options))
        if not isinstance(body, str):
            raise SpecError(f"{kind!r} must be a string, not {type(body).__name__}")
        if kind == "grammar":
            start = value.get("start", "start")
            if not isinstance(start, str) or not start:
                raise SpecError(f"'start' must be a rule name, not {start!r}")
            return cls(kind, body, (("start", start),))
        return cls(kind, body)

    @classmethod
    def of(
        cls,
        *,
        schema: Any = None,
        grammar: str | None = None,
        regex: str | None = None,
        structural_tag: Any = None,
        tool_calls: Mapping[str, Any] | None = None,
        start: str = "start",
        monitors: Any = None,
        monitor_state: Any = None,
        **schema_options: Any,
    ) -> ConstraintSpec:
        """The spec of exactly one of ``schema`` (dict, bool, JSON text or pydantic model
        class), ``grammar`` (Lark text), ``regex``, ``structural_tag`` (a
        :mod:`corral.grammar.structural` format, or XGrammar's JSON form) and
        ``tool_calls`` (a mapping of :func:`corral.tool_calls`'s arguments but ``vocab``:
        the format is built where the vocabulary is known), with the compile options of a
        schema (or of a structural tag's or the tools' JSON Schemas); and ``monitors``, a
        list of monitor names (:mod:`corral.monitors.registry`), with or without one of
        those, with ``monitor_state`` (JSON data) for their callbacks."""
        watch: dict[str, Any] = {}
        if monitors is not None:
            watch["monitors"] = monitors if isinstance(monitors, (str, bytes)) else list(monitors)
        if monitor_state is not None:
            watch["monitor_state"] = monitor_state
        kinds = (schema, grammar, regex, structural_tag, tool_calls)
        if watch and all(v is None for v in kinds) and not schema_options:
            return cls.parse(watch)
        base = cls._of_one(
            schema=schema,
            grammar=grammar,
            regex=regex,
            structural_tag=structural_tag,
            tool_calls=tool_calls,
            start=start,
            **schema_options,
        )
        if not watch:
            return base
        w = cls.parse(watch)
        return dataclasses.replace(base, monitors=w.monitors, monitor_state=w.monitor_state)

    @classmethod
    def _of_one(
        cls,
        *,
        schema: Any,
        grammar: str | None,
        regex: str | None,
        structural_tag: Any,
        tool_calls: Mapping[str, Any] | None,
        start: str,
        **schema_options: Any,
    ) -> ConstraintSpec:
        given = [
            n
            for n, v in (
                ("schema", schema),
                ("grammar", grammar),
                ("regex", regex),
                ("structural_tag", structural_tag),
                ("tool_calls", tool_calls),
            )
            if v is not None
        ]
        if len(given) != 1:
            raise SpecError(
                "pass exactly one of schema=, grammar=, regex=, structural_tag=, tool_calls= "
                + (f"(got {', '.join(given)})" if given else "(got none)")
            )
        if structural_tag is not None:
            from ...grammar.structural import StructuralTag, is_structural_tag

            if not isinstance(structural_tag, (str, bytes, dict)):
                if not is_structural_tag(structural_tag):
                    raise SpecError(
                        "structural_tag= must be a structural-tag format or its JSON, not "
                        f"{type(structural_tag).__name__}"
                    )
                if not isinstance(structural_tag, StructuralTag):
                    structural_tag = StructuralTag(structural_tag)
                try:
                    structural_tag = structural_tag.to_json()
                except (TypeError, ValueError) as e:
                    raise SpecError(f"structural_tag= is not JSON data: {e}") from None
            return cls.parse({"structural_tag": structural_tag, "options": schema_options or None})
        if tool_calls is not None:
            if not isinstance(tool_calls, Mapping):
                raise SpecError(
                    "tool_calls= must be a mapping of corral.tool_calls's arguments "
                    f"(tools, model, ...), not {type(tool_calls).__name__}"
                )
            return cls.parse({"tool_calls": dict(tool_calls), "options": schema_options or None})
        if schema is not None:
            from ...grammar.json_schema.load import as_schema

            body = schema
            if not isinstance(schema, (str, bytes)):  # JSON text is read by parse
                try:
                    body = as_schema(schema)
                except (TypeError, ValueError) as e:
                    raise SpecError(str(e)) from None
                except RecursionError:
                    raise SpecError(
                        "schema= could not be turned into a JSON Schema: it nests beyond "
                        "Python's recursion limit"
                    ) from None
            return cls.parse({"schema": body, "options": schema_options or None})
        if schema_options:
            raise SpecError(
                f"options {sorted(schema_options)} apply to schema=, structural_tag= and "
                "tool_calls= only"
            )
        if grammar is not None:
            return cls.parse({"grammar": grammar, "start": start})
        return cls.parse({"regex": regex})

    def to_json(self) -> str:
        """The wire form: JSON text for ``extra_args["corral"]`` / ``vllm_xargs``."""
        read = self.kind in _READ
        body = _schema_source(self.source) if read else self.source
        out: dict[str, Any] = {} if self.kind == "text" else {self.kind: body}
        if read and self.options:
            out["options"] = dict(self.options)
        if self.kind == "grammar":
            out.update(self.options)
        if self.monitors:
            out["monitors"] = list(self.monitors)
            if self.monitor_state != "null":
                out["monitor_state"] = json.loads(self.monitor_state)
        return json.dumps(out, ensure_ascii=False)

    @property
    def base(self) -> ConstraintSpec:
        """The spec without its monitors (requests with equal bases share a compile)."""
        return dataclasses.replace(self, monitors=(), monitor_state="null")

    def resolve_monitors(self) -> list[Any]:
        """The request's :class:`~corral.Monitor` objects, by name in this process.

        Raises:
            InvalidArgumentError: a name no monitor has here (the message lists the
                known ones), or one that fails to load.
        """
        from ...monitors.registry import monitor_named

        return [monitor_named(n) for n in self.monitors]

    def grammar(self, vocab: Any = None) -> Any:
        """The grammar (:class:`corral.Grammar`), built once per process per spec.

        ``vocab`` matters to ``tool_calls`` only: its markers are written as that
        vocabulary has them (without one, as the model family's tokenizer has them,
        which is enough to check the request).

        Raises corral's own errors for a bad constraint: :class:`~corral.SchemaError`
        (keyword and JSON pointer), :class:`~corral.GrammarError` (line and column),
        :class:`~corral.UnsupportedFeatureError`, :class:`~corral.CompileBudgetError`,
        and for a bad tool-call request :class:`~corral.InvalidArgumentError` or
        :class:`~corral.ArgumentTypeError` naming the field (``tools[2].function.name``).
        """
        from ...automata.compiler import default_cache
        from ...grammar import frontends

        if self.kind == "text":
            return None
        if self.kind == "regex":
            source = frontends.source("regex", self.source)
        elif self.kind == "grammar":
            source = frontends.source("lark", self.source, start=dict(self.options)["start"])
        elif self.kind == "structural_tag":
            data = _schema_source(self.source)
            source = frontends.source("structural-tag", data, **dict(self.options))
        elif self.kind == "tool_calls":
            from ...grammar.tool_calls import tool_calls

            request = _schema_source(self.source)
            fmt = tool_calls(**request, vocab=vocab)
            source = frontends.source("structural-tag", fmt, **dict(self.options))
        else:
            schema = _schema_source(self.source)
            source = frontends.source("json-schema", schema, **dict(self.options))
        return default_cache.grammar_of(source)

    def compile(self, vocab: Any) -> Any:
        """The :class:`~corral.CompiledGrammar` for ``vocab`` (shared through corral's
        compile cache: equal specs compile once); ``None`` for ``"text"``."""
        from ...automata import compile

        grammar = self.grammar(vocab)
        return None if grammar is None else compile(grammar, vocab)


def _monitor_names(value: Any) -> tuple[str, ...]:
    """The ``monitors`` of a constraint object: a list of distinct monitor names."""
    if value is None:
        return ()
    from ...monitors.registry import NAME_PATTERN

    if not isinstance(value, list) or not value:
        raise SpecError(
            f"'monitors' must be a non-empty list of monitor names, not {value!r}"
            if not isinstance(value, list)
            else "'monitors' must name at least one monitor"
        )
    if len(value) > MAX_MONITORS:
        raise SpecError(f"'monitors' names {len(value)} monitors; at most {MAX_MONITORS}")
    for i, name in enumerate(value):
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise SpecError(
                f"'monitors'[{i}] must be a monitor's name (a letter or '_', then letters, "
                f"digits, '_', '.' or '-'), not {name!r}"
            )
    if len(set(value)) != len(value):
        raise SpecError(f"'monitors' names a monitor twice: {value}")
    return tuple(value)


def _schema_text(body: Any) -> str:
    if isinstance(body, (str, bytes)):
        body = _json_data(body, "'schema'", MAX_DEPTH - 1)
    if not isinstance(body, (dict, bool)):
        raise SpecError(
            f"'schema' must be a JSON object or boolean (or JSON text of one), not "
            f"{type(body).__name__}"
        )
    try:
        # key order is kept: it is the order properties are written in
        return json.dumps(body, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError, MemoryError) as e:
        raise SpecError(f"'schema' is not JSON data: {type(e).__name__}: {e}") from None


def _structural_text(body: Any) -> str:
    if isinstance(body, (str, bytes)):
        body = _json_data(body, "'structural_tag'", MAX_DEPTH - 1)
    if not isinstance(body, dict):
        raise SpecError(
            "'structural_tag' must be a JSON object (or JSON text of one), not "
            f"{type(body).__name__}"
        )
    return json.dumps(body, ensure_ascii=False, allow_nan=False)


def _tool_calls_text(body: Any) -> str:
    if isinstance(body, (str, bytes)):
        body = _json_data(body, "'tool_calls'", MAX_DEPTH - 1)
    if not isinstance(body, dict):
        raise SpecError(
            "'tool_calls' must be a JSON object of corral.tool_calls's arguments (or JSON "
            f"text of one), not {type(body).__name__}"
        )
    unknown = sorted(set(body) - set(TOOL_CALL_FIELDS))
    if unknown:
        raise SpecError(
            f"'tool_calls' has unknown field(s) {unknown}; expected {list(TOOL_CALL_FIELDS)}"
        )
    missing = [k for k in ("tools", "model") if k not in body]
    if missing:
        raise SpecError(f"'tool_calls' needs {' and '.join(repr(k) for k in missing)}")
    return json.dumps(body, ensure_ascii=False, allow_nan=False)


def _schema_source(source: str) -> Any:
    """A spec's schema source read back (written by :func:`_schema_text`, or given to the
    constructor by hand: then its errors are :class:`SpecError` too)."""
    return _json_data(source, "the spec's schema source", MAX_DEPTH - 1, check=False)


class _RepeatedKey(dict):  # type: ignore[type-arg]
    """A JSON object in which ``key`` appears more than once (refused by :func:`_check`)."""

    key: str


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    for k, _ in pairs:
        if k in seen:
            break
        seen.add(k)
    marked = _RepeatedKey(obj)
    marked.key = k
    return marked


def _not_json(name: str) -> Any:
    raise SpecError(f"expected a JSON value, found {name}")


def _json_data(value: Any, what: str, max_depth: int, *, check: bool = True) -> Any:
    """``value`` as JSON data: JSON text (``str``, or UTF-8 ``bytes``) is parsed; with
    ``check``, the data is checked (:func:`_check`). The one place a request's JSON is read.

    Raises:
        SpecError: naming ``what``, for anything that is not JSON data nested at most
            ``max_depth`` levels of objects and arrays, with each key once per object
            (never ``RecursionError``, ``MemoryError`` or ``UnicodeError``).
    """
    if isinstance(value, (str, bytes)):
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as e:
                bad = e.object[e.start : e.start + 1]
                raise SpecError(
                    f"{what} is not UTF-8 text: expected JSON text in UTF-8, found byte "
                    f"{bad!r} at offset {e.start}"
                ) from None
        try:
            if check:
                value = json.loads(value, object_pairs_hook=_object, parse_constant=_not_json)
            else:
                value = json.loads(value)
        except SpecError as e:
            raise SpecError(f"{what} is not valid JSON: {e}") from None
        except RecursionError:
            raise SpecError(
                _too_deep(what, max_depth, "more than the JSON parser can read")
            ) from None
        except MemoryError:
            raise SpecError(
                f"{what} is too large to read: the JSON parser ran out of memory"
            ) from None
        except ValueError as e:  # JSONDecodeError, an integer of too many digits
            raise SpecError(f"{what} is not valid JSON: {e}") from None
    if check:
        _check(value, what, max_depth)
    return value


def _too_deep(what: str, max_depth: int, found: str) -> str:
    note = f" (the object and {MAX_DEPTH - 1} in its schema)" if max_depth == MAX_DEPTH else ""
    return (
        f"{what} nests too deeply: expected at most {max_depth} levels of objects and "
        f"arrays{note}, found {found}"
    )


def _check(value: Any, what: str, max_depth: int) -> None:
    """Refuse, with its JSON pointer in ``value``, what is not JSON data: a key repeated
    in an object (marked by :func:`_object`), a key that is not a string, a value that is
    not a dict, list, tuple, string, int, finite float, bool or ``None``, text that is not
    Unicode (a lone surrogate), nesting deeper than ``max_depth``. Iterative: any depth
    and any cycle (it nests deeper than ``max_depth``) is refused without recursion.
    Pointers are spelled only for a refusal (a path is a linked ``(parent, key)`` pair)."""
    Path = tuple[Any, Any] | None

    def pointer(path: Path) -> str:
        from ...grammar.json_schema.load import pointer_join

        keys = []
        while path is not None:
            path, key = path
            keys.append(key)
        return pointer_join("", *reversed(keys)) or "/"

    def refuse(expected: str, found: str, path: Path) -> SpecError:
        return SpecError(
            f"{what} is not JSON data: expected {expected}, found {found} at {pointer(path)}"
        )

    def scalar(x: Any, path: Path) -> bool:
        """Check ``x`` if it is a scalar (``False``: a container or not JSON data)."""
        t = type(x)
        if t is str or isinstance(x, str):
            if not x.isascii():
                try:
                    x.encode("utf-8")
                except UnicodeEncodeError as e:
                    raise refuse("Unicode text", f"a lone surrogate {x[e.start]!r}", path) from None
            return True
        if t is int or t is bool or x is None or isinstance(x, int):
            return True
        if t is float or isinstance(x, float):
            if not math.isfinite(x):
                raise refuse("a finite number", repr(x), path)
            return True
        return False

    stack: list[tuple[Any, Path, int]] = [(value, None, 1)]
    while stack:
        v, path, depth = stack.pop()
        if scalar(v, path):
            continue
        if not isinstance(v, (dict, list, tuple)):
            raise refuse(
                "an object, array, string, number, boolean or null", type(v).__name__, path
            )
        if isinstance(v, _RepeatedKey):
            raise SpecError(
                f"{what} has a repeated key: expected each key of an object once, found "
                f"{v.key!r} again at {pointer((path, v.key))}"
            )
        if depth > max_depth:
            where = pointer(path)
            if len(where) > 200:
                where = where[: max(1, where.rfind("/", 0, 200))] + "/..."
            raise SpecError(_too_deep(what, max_depth, f"more at {where}"))
        containers: list[tuple[Any, Path, int]] = []
        if isinstance(v, dict):
            for k, x in v.items():
                if type(k) is not str and not isinstance(k, str):
                    raise refuse("string keys", f"the key {k!r} ({type(k).__name__})", path)
                if not k.isascii():
                    scalar(k, path)  # a key's text: refused at its object's pointer
                if not scalar(x, (path, k)):
                    containers.append((x, (path, k), depth + 1))
        else:
            for i, x in enumerate(v):
                if not scalar(x, (path, i)):
                    containers.append((x, (path, i), depth + 1))
        stack.extend(reversed(containers))


def _schema_options(options: Any) -> tuple[tuple[str, Any], ...]:
    if options is None:
        return ()
    if not isinstance(options, Mapping):
        raise SpecError(f"'options' must be an object, not {type(options).__name__}")
    unknown = sorted(set(options) - _schema_option_names())
    if unknown:
        raise SpecError(
            f"unknown schema option(s) {unknown}; known: {sorted(_schema_option_names())}"
        )
    for name, v in options.items():
        if not isinstance(v, (str, int, float, bool)) and v is not None:
            raise SpecError(f"schema option {name!r} must be a JSON scalar, not {v!r}")
    return tuple(sorted(options.items()))


def spec_of(extra_args: Mapping[str, Any] | None) -> ConstraintSpec | None:
    """The constraint in ``extra_args`` (``None`` when it is not a mapping with a
    ``"corral"`` key).

    Raises:
        SpecError: as :meth:`ConstraintSpec.parse`, and nothing else.
    """
    if not isinstance(extra_args, Mapping) or KEY not in extra_args:
        return None
    return ConstraintSpec.parse(extra_args[KEY])
