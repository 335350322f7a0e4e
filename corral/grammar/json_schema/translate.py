"""JSON Schema → :class:`~corral.grammar.ir.Grammar`.

Each (sub)schema becomes a nonterminal whose language is the JSON texts valid for it, in
the chosen serialisation (see :class:`Options`). Keywords fall in three classes, reported
per occurrence by :func:`corral.explain`:

* **exact**: the grammar derives exactly the valid values (``type``, ``properties``,
  ``required``, ``additionalProperties``, ``items``/``prefixItems``, ``minItems``/
  ``maxItems``, ``enum``/``const``, ``anyOf``, ``allOf`` for mergeable keywords, ``$ref``
  with recursion, string length/pattern/format, numeric bounds and ``multipleOf``...);
* **final check**: the grammar derives a superset and the complete document is validated
  with ``jsonschema`` before EOS is allowed (``uniqueItems``, ``not``, ``if``/``then``/
  ``else``, ``dependentRequired``/``dependentSchemas``, ``contains``, ``min``/
  ``maxProperties``, ``oneOf`` exclusivity, ``unevaluated*``, very long length bounds).
  Nothing invalid is ever accepted, but a generation can reach a complete value that
  fails the check (a dead end at EOS): these are reported so users can see it;
* **annotation**: keywords with no effect on validity (``title``, ``default``...).

Anything else is refused with :class:`~corral.errors.UnsupportedFeatureError` naming the
keyword and its JSON pointer.

The translation is cut into modules, one concern each: :mod:`.refs` (reference
resolution) and :mod:`.algebra` (``allOf`` as one schema): the schema algebra, pure
functions on schemas; :mod:`.findings` (which keyword is enforced how, at which JSON
pointer); :mod:`.grammar_builder` (rules and terminals under budgets); ``emit/`` (one
emitter per type family); :mod:`.rewrite` (``not``, ``if``, ``oneOf`` rewritten where
exact). This module ties them together: :class:`Translator` walks the schema, one
nonterminal per (sub)schema, memoised so that recursive references become recursive
rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import CompileBudgetError, EmptyLanguageError, Location, UnsupportedFeatureError
from ..entities import entities_key
from ..ir import Grammar
from ..regex.dfa import deadline, work_budget
from ..spans import sources_digest
from . import refs
from .algebra import Merger, canonical
from .emit.array import emit_array
from .emit.combinators import emit_all_of, emit_alternatives, emit_reference
from .emit.entity import ENTITY_KEYWORD, emit_entity, find_entities
from .emit.enum import emit_enum
from .emit.number import emit_number
from .emit.object import emit_object
from .emit.span import SPAN_KEYWORD, emit_span, find_spans
from .emit.string import emit_string
from .findings import ANNOTATION, EXACT, FINAL_CHECK, Finding, Findings
from .grammar_builder import GrammarBuilder, drop_undefined
from .keywords import ANNOTATIONS, TYPES
from .load import LoadedSchema, pointer_join
from .options import Options
from .rewrite import simplify
from .validation import ExactValidation, FinalCheck

__all__ = [
    "ANNOTATION",
    "EXACT",
    "FINAL_CHECK",
    "FINAL_CHECK_VERSION",
    "Finding",
    "Options",
    "Translation",
    "Translator",
    "translate",
]

# Names the semantics of the final check in grammar fingerprints (bump when they change).
FINAL_CHECK_VERSION = "corral-final-check-2"


@dataclass
class Translation:
    """A schema's grammar and its findings (sorted by pointer, then keyword)."""

    grammar: Grammar
    findings: list[Finding] = field(default_factory=list)


class Translator(GrammarBuilder):
    """The translation of one loaded schema: the grammar being built, the findings, and
    the memo of (sub)schemas translated so far. Emitters (``emit/``) and rewrites
    (``rewrite.py``) receive it and call back into :meth:`value` for subschemas.

    Attributes:
        loaded: the schema and its resolver.
        findings: the keyword bookkeeping (:class:`~.findings.Findings`).
        merger: ``allOf`` merging (:class:`~.algebra.Merger`); its ``count`` bounds how
            far distributing siblings into branches may go.
        branch_pointers: ``id`` of the branch list of a :meth:`union` -> where each
            branch was written.
        too_large: patterns/formats whose string automaton is too large (``emit_string``).
        universe_keys, other_keys_cache: key automata shared by objects (``emit_object``).
        validation: validators of enum/const siblings, made on first use (``emit_enum``).
    """

    def __init__(self, loaded: LoadedSchema, options: Options) -> None:
        super().__init__(options)
        self.loaded = loaded
        self.findings = Findings(final_check=options.final_check)
        self.memo: dict[Any, str | None] = {}
        self._synthetic: set[int] = set()  # ids of schemas made here (merges, rewrites)
        self._alive: list[Any] = []  # keeps the ids in `memo` and `_synthetic` unique
        self.merger = Merger(id_keyword=refs.id_keyword(loaded.draft))
        self.branch_pointers: dict[int, list[str]] = {}  # synthetic anyOf lists
        self.too_large: set[str] = set()
        self.universe_keys: Any = None
        self.other_keys_cache: dict[tuple[bytes, ...], Any] = {}
        self.validation: ExactValidation | None = None
        self.span_pointers: set[str] = set()  # where emit_span enforced a span constraint
        self.entity_pointers: set[str] = set()  # where emit_entity enforced an entity set
        self.empty_reasons: dict[str, str] = {}  # pointer -> why no value is valid there
        self.sparse_bases: dict[str, Any] = {}  # span / entity-set automata, by key

    def empty(self, ptr: str, reason: str) -> None:
        """Note that no value satisfies the subschema keyword at ``ptr``, and why (named
        by the :class:`~corral.errors.EmptyLanguageError` if the whole schema is empty)."""
        self.empty_reasons.setdefault(ptr, reason)

    # -- values -------------------------------------------------------------------------
    def value(self, schema: Any, ptr: str, resolver: Any) -> str | None:
        """The nonterminal of the JSON texts valid for ``schema`` (``None``: no value is)."""
        self.tick()
        if schema is True or schema == {}:
            return self.any_value()
        if schema is False:
            return None
        if not isinstance(schema, dict):  # the meta-schema check rules this out
            raise UnsupportedFeatureError(
                "schema", location=Location(pointer=ptr), detail="not an object"
            )
        key: Any = id(schema)
        if key in self._synthetic:  # a merged schema: identified by content and base URI
            key = (canonical(schema), refs.base_uri(resolver))
        if key in self.memo:
            return self.memo[key]
        self._alive.append(schema)  # keeps `id(schema)` unique while the memo lives
        name = self.fresh("v")
        self.memo[key] = name  # recursion through $ref finds the name
        try:
            sym = self._value(schema, ptr, resolver)
        except RecursionError:  # the innermost schema says where
            raise CompileBudgetError(
                f"{ptr or '/'}: subschemas and $ref chains nest too deeply here to translate "
                "(beyond Python's recursion limit)"
            ) from None
        if sym is None:
            self.memo[key] = None
            # A recursive reference may already use `name`; give it no rules (empty).
            return None
        self.add(name, sym)
        return name

    def _value(self, schema: dict[str, Any], ptr: str, resolver: Any) -> str | None:
        resolver = self.enter(schema, resolver)
        old_refs = self.loaded.draft in ("4", "6", "7")
        if "$ref" not in schema or not old_refs:
            simpler = simplify(self, schema, ptr, resolver)
            if simpler is None:
                return None
            schema = simpler
        self.findings.classify(schema, ptr)
        if schema.get(SPAN_KEYWORD, False) is not False:  # before $ref: refused beside it
            return emit_span(self, schema, ptr)
        if ENTITY_KEYWORD in schema:  # before $ref: refused beside it
            return emit_entity(self, schema, ptr)
        if "$ref" in schema and old_refs:
            # before 2019-09, keywords beside $ref are ignored
            for kw in schema:
                if kw != "$ref" and kw not in ANNOTATIONS:
                    self.findings.note(pointer_join(ptr, kw), kw, ANNOTATION, "ignored beside $ref")
            target, t_resolver, t_ptr = self.resolve(schema["$ref"], ptr, resolver, "$ref")
            return self.value(target, t_ptr, t_resolver)
        ref_kw = refs.first_reference(schema)
        if ref_kw is not None:  # references with siblings: allOf of the target and the rest
            return emit_reference(self, schema, ptr, resolver, ref_kw)
        if "allOf" in schema:
            return emit_all_of(self, schema, ptr, resolver)
        for comb in ("anyOf", "oneOf"):
            if comb in schema:
                return emit_alternatives(self, schema, ptr, resolver, comb)
        if "enum" in schema or "const" in schema:
            self.findings.settle_deferred(schema, ptr, EXACT, "enum values are filtered by it")
            return emit_enum(self, schema, ptr, resolver)
        types = self.types_of(schema, ptr)
        name = self.fresh("t")
        found = False
        for t in types:
            sym = self.typed(t, schema, ptr, resolver)
            if sym is not None:
                self.add(name, sym)
                found = True
        self.findings.settle_deferred(
            schema, ptr, ANNOTATION, "no effect: no array or object is allowed"
        )
        return name if found else None

    def types_of(self, schema: dict[str, Any], ptr: str) -> list[str]:
        """The types ``schema`` allows, in :data:`TYPES` order (``integer`` for a
        ``number`` restricted to integers)."""
        t = schema.get("type")
        if t is None:
            return list(TYPES)
        self.findings.exact(pointer_join(ptr, "type"), "type")
        ts = [t] if isinstance(t, str) else list(t)
        out = []
        for name in TYPES:
            if name in ts:
                out.append(name)
            elif name == "number" and "integer" in ts:
                out.append("integer")
        return out

    def typed(self, t: str, s: dict[str, Any], ptr: str, resolver: Any) -> str | None:
        """The values of type ``t`` valid for ``s`` (through the emitter of ``t``)."""
        if t == "null":
            return self.lit("null")
        if t == "boolean":
            name = self.fresh("bool")
            self.add(name, self.lit("true"))
            self.add(name, self.lit("false"))
            return name
        if t in ("integer", "number"):
            return emit_number(self, s, ptr, integer=t == "integer")
        if t == "string":
            return emit_string(self, s, ptr)
        if t == "array":
            return emit_array(self, s, ptr, resolver)
        return emit_object(self, s, ptr, resolver)

    # -- schemas made here ----------------------------------------------------------------
    def union(self, branches: list[Any], pointers: list[str]) -> dict[str, Any]:
        """A synthetic ``{"anyOf": branches}`` whose branches are reported at
        ``pointers`` (where the user wrote them) rather than under an ``anyOf``."""
        out = self.synthetic({"anyOf": list(branches)})
        self.branch_pointers[id(out["anyOf"])] = list(pointers)
        self._alive.append(out["anyOf"])
        return out

    def synthetic(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Register a schema built here (not found in the document): it is identified by
        content, not identity, and kept alive while the translation runs."""
        self._synthetic.add(id(schema))
        self._alive.append(schema)
        return schema

    # -- references and merging (the schema algebra, with findings noted) ----------------
    def enter(self, schema: dict[str, Any], resolver: Any) -> Any:
        """The resolver inside ``schema``: a subschema with an ``$id`` is a new base URI."""
        return refs.enter(schema, resolver, draft=self.loaded.draft, dialect=self.loaded.dialect)

    def resolve(self, ref: Any, ptr: str, resolver: Any, kw: str) -> tuple[Any, Any, str]:
        """:func:`.refs.lookup`, noting the reference: ``$ref`` is exact, the dynamic
        references (resolved statically) are the final check's."""
        target = refs.lookup(ref, ptr, resolver, kw)
        if kw != "$ref":
            self.findings.needs_check(pointer_join(ptr, kw), kw, "resolved statically")
        else:
            self.findings.exact(pointer_join(ptr, kw), kw)
        return target

    def deref(self, schema: Any, ptr: str, resolver: Any) -> tuple[Any, Any, str]:
        """Follow a schema that is only a ``$ref`` (annotations aside)."""
        seen = 0
        while refs.is_reference_only(schema):
            schema, resolver, ptr = self.resolve(schema["$ref"], ptr, resolver, "$ref")
            seen += 1
            if seen > 64:
                raise UnsupportedFeatureError(
                    "$ref", location=Location(pointer=ptr), detail="a cycle of references"
                )
        return schema, resolver, ptr

    def merge(self, a: Any, b: Any, ptr: str, resolver: Any) -> Any:
        """A schema equivalent to ``allOf [a, b]`` (``b`` at ``ptr``, its references
        resolving from ``resolver``), or ``None`` if it cannot be written as one (the
        caller then keeps ``a`` and relies on the final check); see
        :meth:`.algebra.Merger.merge`. A new schema is registered as synthetic."""

        def resolve(ref: str, resolver: Any) -> tuple[Any, Any]:
            target, t_resolver, _ = self.resolve(ref, ptr, resolver, "$ref")
            return target, t_resolver

        out = self.merger.merge(a, b, resolver, resolve)
        if isinstance(out, dict) and out is not a and out is not b:
            self.synthetic(out)
        return out


def translate(loaded: LoadedSchema, options: Options) -> Translation:
    """Build the grammar of a loaded schema (see the module docs)."""
    # (each a walk over the whole document: skipped where its keyword is no key in it)
    keys = loaded.keys
    spans = (
        find_spans(loaded.schema, has_source=options.source is not None)
        if keys is None or SPAN_KEYWORD in keys
        else {}
    )
    entities = (
        find_entities(loaded.schema, options.entities)
        if keys is None or ENTITY_KEYWORD in keys
        else {}
    )
    b = Translator(loaded, options)
    try:
        with (
            work_budget(options.max_work, "the grammar (Options.max_work)"),
            deadline(options.time_budget_s),
        ):
            top = b.value(loaded.schema, "", loaded.resolver())
    except RecursionError:
        raise CompileBudgetError(
            "the schema nests too deeply to translate (or expands without end through "
            "references combined with other keywords)"
        ) from None
    if top is None:
        raise _empty_schema(b.empty_reasons)
    b.add("start", top)
    rules = drop_undefined(b.rules, set(b.terms))
    for ptr in spans.keys() - b.span_pointers:  # merged into another schema, or not used
        b.findings.needs_check(
            pointer_join(ptr, SPAN_KEYWORD), SPAN_KEYWORD, "not met as a string schema of its own"
        )
    for ptr in entities.keys() - b.entity_pointers:
        b.findings.needs_check(
            pointer_join(ptr, ENTITY_KEYWORD),
            ENTITY_KEYWORD,
            "not met as a string schema of its own",
        )
    findings = b.findings.sorted()
    check = None
    check_id = ""
    if options.final_check:
        source = options.source if spans else None
        sets = None
        if entities:
            assert options.entities is not None  # find_entities refused the schema otherwise
            sets = {n: options.entities[n] for n in set(entities.values())}
        check = FinalCheck(loaded, source=source, entities=sets)
        check_id = f"{FINAL_CHECK_VERSION}:" + canonical(loaded.schema)
        if source is not None:
            check_id += ":source=" + sources_digest(source)
        if sets:
            check_id += ":entities=" + entities_key(sets)
    grammar = Grammar(
        b.terms,
        rules,
        "start",
        (),
        description="JSON Schema",
        final_check=check,
        final_check_id=check_id,
    )
    return Translation(grammar, findings)


def _empty_schema(reasons: dict[str, str]) -> EmptyLanguageError:
    """The error for a schema no value satisfies, naming the keywords found empty (at
    most three, in document order) and located at the first."""
    if not reasons:
        return EmptyLanguageError("no JSON value satisfies the schema")
    ordered = sorted(reasons.items())
    shown = "; ".join(f"{reason} (at {ptr or '/'})" for ptr, reason in ordered[:3])
    more = f"; and {len(ordered) - 3} more" if len(ordered) > 3 else ""
    return EmptyLanguageError(
        f"no JSON value satisfies the schema: {shown}{more}",
        location=Location(pointer=ordered[0][0]),
    )
