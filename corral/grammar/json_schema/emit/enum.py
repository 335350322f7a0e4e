"""``enum`` and ``const``: the listed values that the sibling keywords allow, each
spelled as the grammar writes it (strings, booleans and null as one literal each, numbers
in every spelling of their value, arrays and objects piece by piece)."""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..algebra import canonical, json_equal_in
from ..keywords import ANNOTATIONS, TYPE_NAMES
from ..load import pointer_join
from ..refs import base_uri
from ..validation import ExactValidation, is_of_type

if TYPE_CHECKING:
    from ..translate import Translator

__all__ = ["emit_const", "emit_enum", "sibling_filter"]


def emit_enum(b: Translator, schema: dict[str, Any], ptr: str, resolver: Any) -> str | None:
    """The nonterminal of the ``enum``/``const`` values of ``schema`` (at ``ptr``) valid
    for its other keywords, or ``None`` when there is none."""
    values: list[Any] = []
    if "const" in schema:
        values = [schema["const"]]
        b.findings.exact(pointer_join(ptr, "const"), "const")
    if "enum" in schema:
        enum = list(schema["enum"])
        values = [v for v in enum if json_equal_in(v, values)] if "const" in schema else enum
        b.findings.exact(pointer_join(ptr, "enum"), "enum")
    rest = {k: v for k, v in schema.items() if k not in ("enum", "const")}
    if any(k not in ANNOTATIONS for k in rest):
        kw = "enum" if "enum" in schema else "const"
        keep = sibling_filter(b, rest, base_uri(resolver), pointer_join(ptr, kw))
        values = [v for v in values if keep(v)]
    name = b.fresh("enum")
    seen: set[str] = set()
    words: list[str] = []  # strings, booleans and null: spelled one way each
    numbers: list[Decimal] = []  # finite numbers: every spelling without an exponent
    for v in values:
        c = canonical(v)
        if c in seen:
            continue
        seen.add(c)
        if isinstance(v, (str, bool)) or v is None:
            words.append(c)
        elif _finite_number(v):
            numbers.append(Decimal(str(v)) if isinstance(v, float) else Decimal(v))
        else:
            b.add(name, emit_const(b, v))
    if len(words) > 1:
        b.add(name, b.words(words))
    elif words:
        b.add(name, b.lit(words[0]))
    if len(numbers) > 1:
        b.add(name, b.numbers(numbers))
    elif numbers:
        b.add(name, _number(b, numbers[0]))
    if not seen and "enum" in schema:
        b.empty(pointer_join(ptr, "enum"), "no listed value satisfies the keywords beside it")
    return name if seen else None


def _finite_number(v: Any) -> bool:
    """Whether ``v`` is a JSON number the grammar spells from its value (an ``int``
    beyond a float's range included)."""
    return (isinstance(v, int) and not isinstance(v, bool)) or (
        isinstance(v, float) and math.isfinite(v)
    )


def _number(b: Translator, d: Decimal) -> str:
    """The terminal of every exponent-free spelling of the one number ``d``."""
    from ..numbers import number_dfa

    name = b.term(f"cnum:{d}", lambda: number_dfa(d, d), f"number {d}", "CNUM")
    assert name is not None  # a one-value range is never empty
    return name


def sibling_filter(
    b: Translator, schema: dict[str, Any], base_uri: str, ptr: str
) -> Callable[[Any], bool]:
    """Whether an enum/const value (at ``ptr``) is valid for its sibling keywords
    ``schema``, whose references resolve from ``base_uri``. Where validation cannot
    decide (a pattern beyond its backtracking budget, say), the value is kept and the
    keyword is left to the final check.

    Siblings that are only a ``type`` (the common ``{"type": "string", "enum": [...]}``)
    are decided here, without building a validator (that imports ``jsonschema``, whose
    format module takes seconds to load where ``rfc3987-syntax`` is installed)."""
    types = schema.get("type")
    names = [types] if isinstance(types, str) else types
    if (
        all(k == "type" or k in ANNOTATIONS for k in schema)
        and isinstance(names, list)
        and all(isinstance(t, str) and t in TYPE_NAMES for t in names)
    ):
        draft = b.loaded.draft
        return lambda value: any(is_of_type(value, t, draft) for t in names)
    if b.validation is None:
        b.validation = ExactValidation(b.loaded)
    is_valid = b.validation.fragment_validator(schema, base_uri)
    kw = ptr.rsplit("/", 1)[-1]

    def keep(value: Any) -> bool:
        try:
            return is_valid(value)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as e:  # undecided (a Rust panic of the reference library,
            # from a schema that refers to its own negation, included): the final check decides
            b.findings.needs_check(ptr, kw, f"a value could not be checked ({type(e).__name__})")
            return True

    return keep


def emit_const(b: Translator, v: Any) -> str:
    """The symbol of the one JSON value ``v``."""
    if isinstance(v, dict):
        if not v:
            return b.seq("cobj", b.punct("{"), b.punct("}"))
        parts = [b.punct("{")]
        for i, (k, x) in enumerate(v.items()):
            if i:
                parts.append(b.punct(","))
            parts += [b.lit(canonical(k)), b.punct(":"), emit_const(b, x)]
        parts.append(b.punct("}"))
        return b.seq("cobj", *parts)
    if isinstance(v, list):
        if not v:
            return b.seq("carr", b.punct("["), b.punct("]"))
        parts = [b.punct("[")]
        for i, x in enumerate(v):
            if i:
                parts.append(b.punct(","))
            parts.append(emit_const(b, x))
        parts.append(b.punct("]"))
        return b.seq("carr", *parts)
    if _finite_number(v):
        # every spelling of the value without an exponent: 1, 1.0, 1.00 ...
        return _number(b, Decimal(str(v)) if isinstance(v, float) else Decimal(v))
    return b.lit(canonical(v))
