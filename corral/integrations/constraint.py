"""A generation's constraint: exactly one of a JSON Schema, a grammar or a regex, compiled
for a vocabulary, with the parser that turns a complete output into the returned value."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    ValidationFailedError,
    VocabularyMismatchError,
)

__all__ = ["compile_constraint", "is_pydantic_model", "uses_spans"]


def is_pydantic_model(x: Any) -> bool:
    """Whether ``x`` is a pydantic model class (it has a JSON Schema and validates)."""
    return isinstance(x, type) and hasattr(x, "model_json_schema") and hasattr(x, "model_validate")


def uses_spans(schema: Any) -> bool:
    """Whether a JSON Schema (dict, JSON text or pydantic class) has a span constraint
    (``"x-corral-span"``), so that each document needs a grammar of its own."""
    from ..grammar.json_schema.emit.span import find_spans
    from ..grammar.json_schema.load import as_schema

    if is_pydantic_model(schema):
        schema = schema.model_json_schema()
    return bool(find_spans(as_schema(schema), has_source=True))


def compile_constraint(
    vocab: Any,
    *,
    schema: Any = None,
    grammar: Any = None,
    regex: str | None = None,
    source: Any = None,
    entities: Any = None,
    **schema_options: Any,
) -> tuple[Any, Callable[[str], Any]]:
    """``(compiled, parse)`` for exactly one of ``schema``, ``grammar``, ``regex``.

    ``parse(text)`` turns a complete output into the returned value. ``source``: the
    text (or texts) of span constraints (``"x-corral-span"`` in a schema, ``SPAN``
    terminals in Lark text); ``entities``: entity sets by name (``"x-corral-entities"``
    in a schema, declared terminals in Lark text); see :func:`corral.compile`.

    Raises:
        InvalidArgumentError: not exactly one kind given, or options of another kind.
        ArgumentTypeError: a ``regex`` or ``grammar`` of another type.
        VocabularyMismatchError: a :class:`~corral.CompiledGrammar` compiled for another
            vocabulary than ``vocab``.
    """
    from ..automata import CompiledGrammar, compile
    from ..automata.compiler import default_cache
    from ..grammar import Grammar

    given = [
        n for n, v in (("schema", schema), ("grammar", grammar), ("regex", regex)) if v is not None
    ]
    if len(given) != 1:
        raise InvalidArgumentError(
            "pass exactly one of schema=, grammar=, regex= "
            + (f"(got {', '.join(given)})" if given else "(got none)")
        )
    from ..grammar.structural.read import is_structural_tag

    if is_structural_tag(schema) or (grammar is not None and is_structural_tag(grammar)):
        # a structural tag (tool calls, reasoning, free text): its output is text; options
        # are those of its json_schema formats
        if source is not None or entities is not None:
            raise InvalidArgumentError("source= and entities= do not apply to a structural tag")
        return compile(schema if grammar is None else grammar, vocab, **schema_options), _identity
    if schema_options and schema is None:
        raise InvalidArgumentError(
            f"options {sorted(schema_options)} apply to schema= only, got "
            f"{'grammar=' if grammar is not None else 'regex='}"
        )
    for name, value in (("source", source), ("entities", entities)):
        if value is not None and regex is not None:
            raise InvalidArgumentError(
                f"{name}= applies to schema= and grammar= (Lark text), got regex="
            )
    if regex is not None:
        if not isinstance(regex, str):
            raise ArgumentTypeError(f"regex must be a string, not {type(regex).__name__}")
        return compile(default_cache.grammar_for_regex(regex), vocab), _identity
    if grammar is not None:
        if isinstance(grammar, CompiledGrammar):
            if source is not None or entities is not None:
                raise InvalidArgumentError(
                    "source= and entities= need grammar text to compile, got a "
                    "CompiledGrammar (which has its own)"
                )
            if grammar.vocab_size != vocab.size or grammar.vocab.hash != vocab.hash:
                raise VocabularyMismatchError(
                    f"the compiled grammar was built for another vocabulary: expected the "
                    f"model's ({vocab.size} tokens, hash {vocab.hash[:12]}), got one of "
                    f"{grammar.vocab_size} tokens (hash {grammar.vocab.hash[:12]}); compile "
                    "it with the model's Vocabulary"
                )
            return grammar, _identity
        if not isinstance(grammar, (str, Grammar)):
            raise ArgumentTypeError(
                f"grammar must be Lark text, a corral.Grammar or a CompiledGrammar, not "
                f"{type(grammar).__name__}"
            )
        if isinstance(grammar, str):
            return compile(grammar, vocab, source=source, entities=entities), _identity
        if source is not None or entities is not None:
            raise InvalidArgumentError(
                "source= and entities= need grammar text to compile, got a corral.Grammar "
                "(which has its own)"
            )
        return compile(grammar, vocab), _identity
    if isinstance(schema, str) and not schema.lstrip().startswith("{"):
        raise InvalidArgumentError(
            "schema= text must be a JSON object (for Lark text use grammar=), got text "
            f"starting {schema.lstrip()[:20]!r}"
        )
    compiled = compile(schema, vocab, source=source, entities=entities, **schema_options)
    if is_pydantic_model(schema):
        return compiled, _pydantic_parser(schema)
    return compiled, _json_parser(compiled)


def _identity(text: str) -> str:
    return text


def _json_parser(compiled: Any) -> Callable[[str], Any]:
    check = compiled.grammar.final_check

    def parse(text: str) -> Any:
        try:
            value = json.loads(text)
        except ValueError as e:
            raise ValidationFailedError(f"output is not JSON ({e})", text=text) from None
        if check is not None and not check(text.encode("utf-8")):
            raise ValidationFailedError("output does not validate against the schema", text=text)
        return value

    return parse


def _pydantic_parser(model_cls: Any) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return model_cls.model_validate_json(text)
        except ValueError as e:
            raise ValidationFailedError(f"output does not validate ({e})", text=text) from None

    return parse
