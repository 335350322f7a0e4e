"""A request's constraint as vLLM carries it: ``SamplingParams.extra_args["corral"]``.

Wire format (the OpenAI server's ``vllm_xargs`` accepts strings, numbers and lists only,
so the constraint travels as JSON text; offline, a dict is accepted too)::

    extra_args = {"corral": '{"schema": {...}}'}                  # a JSON Schema
    extra_args = {"corral": '{"grammar": "start: ...", "start": "start"}'}
    extra_args = {"corral": '{"regex": "[0-9]{3}"}'}
    extra_args = {"corral": '{"schema": {...}, "options": {"whitespace": "flexible"}}'}

Exactly one of ``schema`` (a JSON object or boolean, or JSON text of one), ``grammar``
(Lark text) and ``regex`` (a Python ``re`` pattern, matched in full); ``options`` holds
the JSON Schema compile options of :class:`corral.grammar.json_schema.Options`; ``start``
names a Lark grammar's start rule. Anything else is refused with a :class:`SpecError`
naming it. This module does not import vLLM.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from ...errors import CorralError

KEY = "corral"
"""The key of ``SamplingParams.extra_args`` (and of ``vllm_xargs``) that holds a constraint."""

_KINDS = ("schema", "grammar", "regex")


class SpecError(CorralError, ValueError):
    """``extra_args["corral"]`` is not a constraint corral understands."""


def _schema_option_names() -> frozenset[str]:
    from ...grammar.json_schema.translate import Options

    return frozenset(f.name for f in dataclasses.fields(Options))


@dataclasses.dataclass(frozen=True)
class ConstraintSpec:
    """One request's constraint, in a canonical, hashable form.

    Attributes:
        kind: ``"schema"``, ``"grammar"`` or ``"regex"``.
        source: the schema as JSON text (keys in their given order, which is the order
            properties are written in), the Lark text, or the regex.
        options: the schema's compile options, or ``(("start", name),)`` for a grammar,
            as sorted ``(name, value)`` pairs.

    Two requests with equal specs share one compiled grammar.
    """

    kind: str
    source: str
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def parse(cls, value: Any) -> ConstraintSpec:
        """The spec of ``extra_args["corral"]`` (JSON text or a mapping).

        Raises:
            SpecError: not JSON, not an object, no or several kinds, unknown keys or
                options, values of the wrong type.
        """
        if isinstance(value, (str, bytes)):
            try:
                value = json.loads(value)
            except ValueError as e:
                raise SpecError(f"extra_args[{KEY!r}] is not valid JSON: {e}") from None
        if not isinstance(value, Mapping):
            raise SpecError(
                f"extra_args[{KEY!r}] must be a JSON object such as "
                f'{{"schema": {{...}}}}, {{"grammar": "..."}} or {{"regex": "..."}}, '
                f"not {type(value).__name__}"
            )
        unknown = sorted(set(value) - {*_KINDS, "options", "start"})
        if unknown:
            raise SpecError(
                f"extra_args[{KEY!r}] has unknown key(s) {unknown}; expected one of "
                f"{list(_KINDS)}, with 'options' (schema) or 'start' (grammar)"
            )
        kinds = [k for k in _KINDS if k in value]
        if len(kinds) != 1:
            raise SpecError(
                f"extra_args[{KEY!r}] must give exactly one of {list(_KINDS)}, got "
                + (", ".join(kinds) if kinds else "none")
            )
        kind = kinds[0]
        body = value[kind]
        options = value.get("options")
        if options is not None and kind != "schema":
            raise SpecError(f"'options' applies to a schema, not to a {kind}")
        if "start" in value and kind != "grammar":
            raise SpecError(f"'start' applies to a grammar, not to a {kind}")
        if kind == "schema":
            return cls(kind, _schema_text(body), _schema_options(options))
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
        start: str = "start",
        **schema_options: Any,
    ) -> ConstraintSpec:
        """The spec of exactly one of ``schema`` (dict, bool, JSON text or pydantic model
        class), ``grammar`` (Lark text) and ``regex``, with a schema's compile options."""
        given = [
            n
            for n, v in (("schema", schema), ("grammar", grammar), ("regex", regex))
            if v is not None
        ]
        if len(given) != 1:
            raise SpecError(
                "pass exactly one of schema=, grammar=, regex= "
                + (f"(got {', '.join(given)})" if given else "(got none)")
            )
        if schema is not None:
            from ...grammar.json_schema.load import as_schema

            try:
                body = as_schema(schema)
            except (TypeError, ValueError) as e:
                raise SpecError(str(e)) from None
            return cls.parse({"schema": body, "options": schema_options or None})
        if schema_options:
            raise SpecError(f"options {sorted(schema_options)} apply to schema= only")
        if grammar is not None:
            return cls.parse({"grammar": grammar, "start": start})
        return cls.parse({"regex": regex})

    def to_json(self) -> str:
        """The wire form: JSON text for ``extra_args["corral"]`` / ``vllm_xargs``."""
        body = json.loads(self.source) if self.kind == "schema" else self.source
        out: dict[str, Any] = {self.kind: body}
        if self.kind == "schema" and self.options:
            out["options"] = dict(self.options)
        if self.kind == "grammar":
            out.update(self.options)
        return json.dumps(out, ensure_ascii=False)

    def grammar(self) -> Any:
        """The grammar (:class:`corral.Grammar`), built once per process per spec.

        Raises corral's own errors for a bad constraint: :class:`~corral.SchemaError`
        (keyword and JSON pointer), :class:`~corral.GrammarError` (line and column),
        :class:`~corral.UnsupportedFeatureError`, :class:`~corral.CompileBudgetError`.
        """
        from ...automata.compiler import default_cache
        from ...grammar import frontends

        if self.kind == "regex":
            source = frontends.source("regex", self.source)
        elif self.kind == "grammar":
            source = frontends.source("lark", self.source, start=dict(self.options)["start"])
        else:
            source = frontends.source("json-schema", json.loads(self.source), **dict(self.options))
        return default_cache.grammar_of(source)

    def compile(self, vocab: Any) -> Any:
        """The :class:`~corral.CompiledGrammar` for ``vocab`` (shared through corral's
        compile cache: equal specs compile once)."""
        from ...automata import compile

        return compile(self.grammar(), vocab)


def _schema_text(body: Any) -> str:
    if isinstance(body, (str, bytes)):
        try:
            body = json.loads(body)
        except ValueError as e:
            raise SpecError(f"'schema' is not valid JSON: {e}") from None
    if not isinstance(body, (dict, bool)):
        raise SpecError(
            f"'schema' must be a JSON object or boolean (or JSON text of one), not "
            f"{type(body).__name__}"
        )
    try:
        # key order is kept: it is the order properties are written in
        return json.dumps(body, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise SpecError(f"'schema' is not JSON data: {e}") from None


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
    """The constraint in ``extra_args`` (``None`` when it has no ``"corral"`` key)."""
    if not extra_args or KEY not in extra_args:
        return None
    return ConstraintSpec.parse(extra_args[KEY])
