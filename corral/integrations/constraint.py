"""A generation's constraint: exactly one of a JSON Schema, a grammar or a regex, compiled
for a vocabulary, with the parser that turns a complete output into the returned value."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..errors import ValidationFailedError

__all__ = ["compile_constraint", "is_pydantic_model"]


def is_pydantic_model(x: Any) -> bool:
    """Whether ``x`` is a pydantic model class (it has a JSON Schema and validates)."""
    return isinstance(x, type) and hasattr(x, "model_json_schema") and hasattr(x, "model_validate")


def compile_constraint(
    vocab: Any,
    *,
    schema: Any = None,
    grammar: Any = None,
    regex: str | None = None,
    **schema_options: Any,
) -> tuple[Any, Callable[[str], Any]]:
    """``(compiled, parse)`` for exactly one of ``schema``, ``grammar``, ``regex``.

    ``parse(text)`` turns a complete output into the returned value.
    """
    from ..automata import CompiledGrammar, compile
    from ..automata.compiler import default_cache
    from ..grammar import Grammar

    given = [
        n for n, v in (("schema", schema), ("grammar", grammar), ("regex", regex)) if v is not None
    ]
    if len(given) != 1:
        raise ValueError(
            "pass exactly one of schema=, grammar=, regex= "
            + (f"(got {', '.join(given)})" if given else "(got none)")
        )
    if schema_options and schema is None:
        raise ValueError(f"options {sorted(schema_options)} apply to schema= only")
    if regex is not None:
        if not isinstance(regex, str):
            raise TypeError(f"regex must be a string, not {type(regex).__name__}")
        return compile(default_cache.grammar_for_regex(regex), vocab), _identity
    if grammar is not None:
        if isinstance(grammar, CompiledGrammar):
            if grammar.vocab_size != vocab.size or grammar.vocab.hash != vocab.hash:
                raise ValueError("the compiled grammar was built for another vocabulary")
            return grammar, _identity
        if not isinstance(grammar, (str, Grammar)):
            raise TypeError(
                f"grammar must be Lark text, a corral.Grammar or a CompiledGrammar, not "
                f"{type(grammar).__name__}"
            )
        return compile(grammar, vocab), _identity
    if isinstance(schema, str) and not schema.lstrip().startswith("{"):
        raise ValueError("schema= text must be a JSON object (for Lark text use grammar=)")
    compiled = compile(schema, vocab, **schema_options)
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
