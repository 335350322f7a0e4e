"""Validating complete JSON values with the semantics the grammar has.

The grammar of a schema is exact for most keywords; the rest are enforced by validating
the complete document (the *final check*), and enum values are filtered by validating
them against their siblings. Both use :class:`ExactValidation`, and so does
:func:`validate` (``corral.validate``), for users who re-validate: ``jsonschema``'s
validators for the schema's draft, with the keywords where ``jsonschema`` and the
specification's semantics part ways replaced:

* ``pattern``, ``patternProperties``, ``additionalProperties``,
  ``unevaluatedProperties``: patterns are ECMA-262 regular expressions, evaluated with
  ECMA-262 semantics (:class:`~corral.grammar.json_schema.ecma.EcmaPattern`), never with
  Python's ``re`` (which reads ``\\d``, ``$``, ``.``, named groups and lookbehind
  differently, or not at all);
* numbers are exact decimals: the document's numbers are parsed as
  :class:`~decimal.Decimal` (``0.3`` is three tenths, not the nearest float) and the
  schema's as the decimals their JSON text wrote, so ``minimum``, ``multipleOf``,
  ``enum`` and ``const`` compare exactly, as the grammar's digit automata do;
* ``format``: corral's own format languages (:mod:`.formats`), the ones the grammar
  enforces.

**Fail closed.** A document whose objects repeat a name is refused (every consumer would
read it differently); a check that cannot decide (a pattern that exceeds its
backtracking budget, a document nested beyond Python's recursion limit, any error inside
the validator) refuses the document and says why in a :class:`FinalCheckWarning`. It
never counts as a pass.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ...caching import BoundedCache
from ...errors import CorralError
from .load import ROOT_URI, LoadedSchema, as_schema, exact_numbers, for_validation, load_schema

if TYPE_CHECKING:
    from ..entities import EntitySet

__all__ = [
    "DuplicateKeyError",
    "ExactValidation",
    "FinalCheck",
    "FinalCheckWarning",
    "NumberRangeError",
    "format_checker",
    "parse_document",
    "validate",
]

MAX_PATTERNS = 4096
"""Compiled patterns kept per validation (least recently used are dropped)."""


class DuplicateKeyError(CorralError, ValueError):
    """A JSON object in the document repeats a name."""


class NumberRangeError(CorralError, ValueError):
    """A number in the document has an exponent beyond what decimal arithmetic holds."""


class FinalCheckWarning(RuntimeWarning):
    """The final check of a schema could not decide a document, which is therefore refused
    (the reason is in the message)."""


def parse_document(text: str | bytes) -> Any:
    """Parse a JSON document for validation: numbers with a fraction or exponent become
    :class:`~decimal.Decimal`, a repeated name in an object is refused.

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``), ``NaN``/``Infinity``, a number
            whose exponent is beyond decimal arithmetic (:class:`NumberRangeError`), or a
            repeated name (:class:`DuplicateKeyError`).
        RecursionError: the document nests too deeply for Python's JSON parser.
    """
    return json.loads(
        text, parse_float=_decimal, parse_constant=_no_constant, object_pairs_hook=_unique_pairs
    )


def _decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except ArithmeticError:  # an exponent beyond what decimal arithmetic holds
        raise NumberRangeError(f"the number {text[:40]} is out of range") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise DuplicateKeyError(f"the name {k!r} occurs twice in one object")
            seen.add(k)
    return out


def format_checker() -> Any:
    """A ``jsonschema`` format checker that uses corral's own format definitions (the same
    languages the grammar enforces), so the final check never disagrees with the grammar.
    ``regex`` means an ECMA-262 pattern corral reads (well-formed; constructs corral
    does not implement still count as well-formed)."""
    import re

    from jsonschema import FormatChecker

    from ...errors import GrammarError, UnsupportedFeatureError
    from .ecma.syntax import parse
    from .formats import FORMAT_REGEXES

    checker = FormatChecker(formats=())

    @checker.checks("regex")
    def _regex(value: Any) -> bool:
        if not isinstance(value, str):
            return True
        try:
            parse(value)
        except UnsupportedFeatureError:
            return True
        except GrammarError:
            return False
        return True

    for name, rx in FORMAT_REGEXES.items():
        compiled = re.compile(rx)

        def check(value: Any, compiled: re.Pattern[str] = compiled) -> bool:
            return not isinstance(value, str) or compiled.fullmatch(value) is not None

        checker.checks(name)(check)
    return checker


class _Patterns:
    """The compiled ECMA-262 patterns of one validation (a bounded LRU, thread-safe)."""

    def __init__(self) -> None:
        from .ecma.match import DEFAULT_MAX_STEPS

        self._items: BoundedCache[str, Any] = BoundedCache(MAX_PATTERNS)
        self.max_steps = DEFAULT_MAX_STEPS  # backtracking steps per search

    def search(self, pattern: str, text: str) -> bool:
        from .ecma import EcmaPattern

        p = self._items.get_or_build(
            pattern, lambda: EcmaPattern(pattern, max_steps=self.max_steps)
        )
        return bool(p.search(text))


class ExactValidation:
    """``jsonschema`` validation of one schema with corral's semantics (module docs).

    Args:
        loaded: the schema, as :func:`~corral.grammar.json_schema.load.load_schema` read it.
        source: the texts ``"x-corral-span"`` values must be spans of (``None``: the
            keyword is not checked, as by standard validators).
        entities: the entity sets ``"x-corral-entities"`` names (``None``: the keyword is
            not checked).

    The methods raise whatever stops validation from deciding (a pattern's
    :class:`~corral.grammar.json_schema.ecma.MatchBudgetError`, ``RecursionError``, an
    unresolvable reference): callers decide what that means for them.
    """

    def __init__(
        self,
        loaded: LoadedSchema,
        source: tuple[str, ...] | None = None,
        entities: Mapping[str, EntitySet] | None = None,
    ) -> None:
        self.loaded = loaded.for_validation()
        self.patterns = _Patterns()
        self.format_checker = format_checker()
        self.cls = _validator_class(self.loaded, self.patterns, source, entities)
        self._root = self.cls(
            self.loaded.schema, registry=self.loaded.registry, format_checker=self.format_checker
        )

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` (parsed by :func:`parse_document`, or any JSON value with
        exact numbers) is valid for the whole schema."""
        return bool(self._root.is_valid(value))

    def iter_errors(self, value: Any) -> Iterator[Any]:
        """The ``jsonschema.ValidationError`` s of ``value`` (as for :meth:`is_valid`)."""
        return iter(self._root.iter_errors(value))

    def fragment_validator(self, schema: Any, base_uri: str = "") -> Callable[[Any], bool]:
        """``is_valid(value)`` for ``schema``, a subschema (or a schema built from parts of
        this one) whose references resolve from ``base_uri`` in the whole document
        (``""``: the root). Floats in the schema and in the values are read as the
        decimals they spell."""
        resolver = self.loaded.registry.resolver(base_uri=base_uri or ROOT_URI)
        v = self.cls(
            for_validation(schema, root=False),
            registry=self.loaded.registry,
            format_checker=self.format_checker,
            _resolver=resolver,
        )
        return lambda value: bool(v.is_valid(exact_numbers(value)))


class FinalCheck:
    """The final check of a schema: ``check(text) -> bool`` on a complete document.

    ``True`` only when ``text`` parses (no repeated names) and validates; ``False`` when it
    does not, and also when validation cannot decide, with a :class:`FinalCheckWarning`
    (once per reason) saying why.
    """

    def __init__(
        self,
        loaded: LoadedSchema,
        *,
        source: tuple[str, ...] | None = None,
        entities: Mapping[str, EntitySet] | None = None,
    ) -> None:
        self.loaded = loaded
        self.source = source  # the texts of span constraints (``None``: none checked)
        self.entities = entities  # the sets of entity constraints (``None``: none checked)
        self._validation: ExactValidation | None = None
        self._lock = threading.Lock()
        self._warned: set[str] = set()

    @property
    def validation(self) -> ExactValidation:
        """The validator, built on first use (compiling a schema does not pay for it)."""
        if self._validation is None:
            with self._lock:
                if self._validation is None:
                    self._validation = ExactValidation(self.loaded, self.source, self.entities)
        return self._validation

    def __call__(self, text: bytes) -> bool:
        try:
            value = parse_document(text)
        except RecursionError:
            self._undecided("depth", "the document nests too deeply to parse")
            return False
        except NumberRangeError as e:
            self._undecided("number", str(e))
            return False
        except ValueError:  # not JSON, or a repeated name: invalid
            return False
        try:
            return self.validation.is_valid(value)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except RecursionError:
            self._undecided("depth", "the document nests too deeply to validate")
        except BaseException as e:  # any failure to decide refuses
            self._undecided(type(e).__name__, f"{type(e).__name__}: {e}")
        return False

    def _undecided(self, kind: str, reason: str) -> None:
        """Warn once per kind of failure (the reasons of one kind differ only in detail)."""
        if kind in self._warned:
            return
        self._warned.add(kind)
        warnings.warn(
            f"the schema's final check could not decide a document and refused it ({reason})",
            FinalCheckWarning,
            stacklevel=3,
        )


_VALIDATIONS: BoundedCache[str, ExactValidation] = BoundedCache(16)
"""The validations :func:`validate` built, by the schema's canonical JSON text."""


def validate(instance: Any, schema: Any) -> None:
    """Validate a JSON value against a JSON Schema with corral's semantics, the ones its
    grammar and final check enforce; like ``jsonschema.validate``, which differs from them
    (see the module docs): ``multipleOf`` divides exactly, so ``1.2`` and ``0.3`` are
    multiples of ``0.1`` (``jsonschema`` divides floats and rejects both), and patterns are
    ECMA-262 and formats are checked, as the grammar writes them.

    Args:
        instance: a JSON value. A ``float`` counts as the decimal of its shortest spelling
            (``0.3`` is three tenths), as ``json.loads`` gives back any number of up to 15
            significant digits; for an exact reading of any text, parse it with
            ``json.loads(text, parse_float=decimal.Decimal)`` (a ``Decimal`` counts as is).
        schema: what ``corral.compile`` takes: a dict, a bool, JSON text or a pydantic
            model class. Validations of the 16 schemas used last are kept.

    Raises:
        jsonschema.ValidationError: ``instance`` is invalid (the best match of its errors,
            as ``jsonschema.validate`` chooses it).
        SchemaError, UnsupportedFeatureError: as compiling the schema would (an invalid
            schema, a remote ``$ref``).

    Whatever stops validation from deciding propagates (a pattern's
    :class:`~corral.grammar.json_schema.ecma.MatchBudgetError`, ``RecursionError``).
    """
    from jsonschema.exceptions import best_match

    spec = as_schema(schema)
    try:
        key = json.dumps(spec, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):  # not JSON data: load_schema says why
        validation = ExactValidation(load_schema(spec))
    else:
        validation = _VALIDATIONS.get_or_build(key, lambda: ExactValidation(load_schema(spec)))
    error = best_match(validation.iter_errors(exact_numbers(instance)))
    if error is not None:
        raise error


# -- the validator class -------------------------------------------------------------------


def _validator_class(
    loaded: LoadedSchema,
    patterns: _Patterns,
    source: tuple[str, ...] | None = None,
    entities: Mapping[str, EntitySet] | None = None,
) -> Any:
    """The draft's ``jsonschema`` validator class with corral's keyword semantics (and
    span and entity constraints checked against ``source`` and ``entities`` when given)."""
    from jsonschema import ValidationError
    from jsonschema.validators import extend, validator_for

    from .load import draft_validator_class

    base = validator_for(loaded.schema, default=draft_validator_class(loaded.dialect))
    search = patterns.search

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not search(patrn, instance):
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(validator: Any, pp: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for patrn, sub in pp.items():
            for k, v in instance.items():
                if search(patrn, k):
                    yield from validator.descend(v, sub, path=k, schema_path=patrn)

    def additional_properties(validator: Any, ap: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        extras = _extras(instance, schema, search)
        if validator.is_type(ap, "object"):
            for k in extras:
                yield from validator.descend(instance[k], ap, path=k)
        elif ap is False and extras:
            yield ValidationError(f"additional properties are not allowed ({sorted(extras)!r})")

    def unevaluated_properties(
        validator: Any, up: Any, instance: Any, schema: Any
    ) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        evaluated = _evaluated_names(validator, instance, schema, search, top=True)
        for k, v in instance.items():
            if k not in evaluated:
                for _ in validator.descend(v, up, path=k):
                    yield ValidationError(f"unevaluated property {k!r} is not allowed")
                    break

    def multiple_of(validator: Any, d: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "number") and not _is_multiple(instance, d):
            yield ValidationError(f"{instance} is not a multiple of {d}")

    keywords = {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
        "multipleOf": multiple_of,
    }
    if "unevaluatedProperties" in base.VALIDATORS:
        keywords["unevaluatedProperties"] = unevaluated_properties
    if source is not None:
        from .emit.span import SPAN_KEYWORD, span_occurs, span_options

        texts = source

        def span(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
            opts = span_options(value, "")
            if opts is None or not validator.is_type(instance, "string"):
                return
            if not span_occurs(instance, texts, opts):
                yield ValidationError(f"{instance!r} is not a span of the source")

        keywords[SPAN_KEYWORD] = span
    if entities is not None:
        from .emit.entity import ENTITY_KEYWORD

        sets = entities

        def entity(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
            if validator.is_type(instance, "string") and instance not in sets[value]:
                yield ValidationError(f"{instance!r} is not in the entity set {value!r}")

        keywords[ENTITY_KEYWORD] = entity
    draft = loaded.draft

    def is_number(_: Any, x: Any) -> bool:
        return is_of_type(x, "number", draft)

    def is_integer(_: Any, x: Any) -> bool:
        return is_of_type(x, "integer", draft)

    checker = base.TYPE_CHECKER.redefine_many({"number": is_number, "integer": is_integer})
    return extend(base, validators=keywords, type_checker=checker)


_TYPE_TESTS: dict[str, Callable[[Any], bool]] = {
    "string": lambda x: isinstance(x, str),
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "number": lambda x: isinstance(x, (int, float, Decimal)) and not isinstance(x, bool),
}


def is_of_type(x: Any, name: str, draft: str) -> bool:
    """Whether the JSON value ``x`` (parsed with exact numbers, or plain Python JSON) is
    of the simple type ``name`` in ``draft`` (``load.DRAFTS``' short names): numbers
    are ints, floats and Decimals (never booleans), and from draft 6 on a number with an
    integral value (``1.0``) is an ``integer``, as the drafts say; in draft 4 it is not."""
    if name != "integer":
        return _TYPE_TESTS[name](x)
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    if draft == "4" or not isinstance(x, (float, Decimal)):
        return False
    return bool(x == int(x)) if isinstance(x, float) else x == x.to_integral_value()


def _extras(instance: dict[str, Any], schema: Any, search: Any) -> list[str]:
    """The names of ``instance`` that neither ``properties`` nor ``patternProperties`` of
    ``schema`` cover (what ``additionalProperties`` applies to)."""
    props = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [k for k in instance if k not in props and not any(search(p, k) for p in patterns)]


def _evaluated_names(
    validator: Any, instance: dict[str, Any], schema: Any, search: Any, *, top: bool = False
) -> set[str]:
    """The names of ``instance`` that ``schema`` evaluates successfully, through its own
    keywords and the in-place applicators whose subschemas hold (``unevaluatedProperties``'s
    annotation rule); ``top``: leave out ``schema``'s own ``unevaluatedProperties``."""
    if not isinstance(schema, dict):
        return set()
    names: set[str] = set()
    for ref_kw in ("$ref", "$dynamicRef", "$recursiveRef"):
        ref = schema.get(ref_kw)
        if isinstance(ref, str):
            resolved = validator._resolver.lookup(ref)
            sub = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            names |= _evaluated_names(sub, instance, resolved.contents, search)
    props = schema.get("properties")
    if isinstance(props, dict):
        names |= props.keys() & instance.keys()
    pp = schema.get("patternProperties")
    if isinstance(pp, dict):
        names |= {k for k in instance if any(search(p, k) for p in pp)}
    if "additionalProperties" in schema:
        names |= set(_extras(instance, schema, search))
    if not top and "unevaluatedProperties" in schema:
        names |= set(instance)  # it held, so it evaluated every name left over
    deps = schema.get("dependentSchemas")
    if isinstance(deps, dict):
        for k, sub in deps.items():
            if k in instance:
                names |= _evaluated_names(validator, instance, sub, search)
    for comb in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(comb, ()):
            if validator.evolve(schema=sub).is_valid(instance):
                names |= _evaluated_names(validator, instance, sub, search)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            names |= _evaluated_names(validator, instance, schema["if"], search)
            if "then" in schema:
                names |= _evaluated_names(validator, instance, schema["then"], search)
        elif "else" in schema:
            names |= _evaluated_names(validator, instance, schema["else"], search)
    return names


def _is_multiple(x: Any, d: Any) -> bool:
    """Whether ``x / d`` is an integer, exactly (``x``, ``d``: ints or finite Decimals,
    ``d > 0``), without building numbers of the size of an exponent."""
    xs = Decimal(x).as_tuple()
    ds = Decimal(d).as_tuple()
    if not isinstance(xs.exponent, int) or not isinstance(ds.exponent, int):
        return False  # NaN or infinity
    m = int("".join(map(str, xs.digits)) or "0")
    n = int("".join(map(str, ds.digits)) or "0")
    if m == 0:
        return True
    if n == 0:
        return False
    k = xs.exponent - ds.exponent  # x / d = (m / n) * 10**k
    if k < 0:  # n * 10**-k must divide m: impossible once 10**-k exceeds m
        return -k <= len(str(m)) and m % (n * 10**-k) == 0
    # n = 2**a * 5**b * r: r must divide m, and 2**a * 5**b must divide m * 10**k, for
    # which powers of ten beyond max(a, b) change nothing
    a = b = 0
    r = n
    while r % 2 == 0:
        r //= 2
        a += 1
    while r % 5 == 0:
        r //= 5
        b += 1
    return (m * 10 ** min(k, max(a, b))) % n == 0
