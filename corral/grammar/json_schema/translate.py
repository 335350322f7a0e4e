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
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ...errors import CompileBudgetError, EmptyLanguageError, UnsupportedFeatureError
from ..ir import Grammar, Rule, Terminal
from ..regex import ByteDFA, ast, literal_dfa, python_regex_dfa
from ..regex.charset import CharSet
from ..regex.dfa import deadline, difference, intersect, union_of_literals
from .load import LoadedSchema, pointer_join
from .rewrite import simplify
from .strings import MAX_EXACT_LENGTH, body_of_node, constrained_string, plain_string
from .validation import ExactValidation, FinalCheck
from .value_sets import distinct_choice_possible, finite_values, surely_empty

EXACT = "exact"
FINAL_CHECK = "final check"
ANNOTATION = "annotation"

ANNOTATIONS = frozenset(
    {
        "title", "description", "default", "examples", "$comment", "deprecated",
        "readOnly", "writeOnly", "$schema", "$id", "id", "$anchor", "$dynamicAnchor",
        "$recursiveAnchor", "$defs", "definitions", "$vocabulary", "contentMediaType",
        "contentEncoding", "contentSchema",
    }
)  # fmt: skip
# Keywords the grammar over-approximates; the final check enforces them.
CHECKED = frozenset(
    {
        "uniqueItems", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
        "dependencies", "contains", "minContains", "maxContains", "minProperties",
        "maxProperties", "unevaluatedProperties", "unevaluatedItems",
    }
)  # fmt: skip
# Final-check keywords of arrays and objects that ``array``/``object`` express exactly when
# they can (counts, finite unique items); they note each occurrence themselves.
DEFERRED = frozenset(
    {
        "uniqueItems", "contains", "minContains", "maxContains", "minProperties",
        "maxProperties", "dependentRequired", "dependencies",
    }
)  # fmt: skip
HANDLED = frozenset(
    {
        "type", "enum", "const", "properties", "required", "additionalProperties",
        "patternProperties", "propertyNames", "items", "prefixItems", "additionalItems",
        "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "minimum",
        "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf",
        "allOf", "$ref", "$dynamicRef", "$recursiveRef",
    }
)  # fmt: skip
TYPES = ("null", "boolean", "object", "array", "string", "number")
# Arrays of distinct items from at most this many values are compiled exactly (2^n states).
UNIQUE_MAX_VALUES = 8
# dependentRequired is compiled exactly when it involves at most this many declared names
# (the grammar tracks which of them were written).
MAX_DEPENDENT_NAMES = 8
# Objects whose property counts (minProperties/maxProperties) would need more grammar states
# than this are counted by the final check instead.
MAX_COUNT_STATES = 20_000
# Names the semantics of the final check in grammar fingerprints (bump when they change).
FINAL_CHECK_VERSION = "corral-final-check-2"
# After this many merges (allOf, and siblings distributed into anyOf/oneOf branches), a
# combinator with siblings keeps the siblings only and leaves the branches to the final check.
MERGE_BUDGET = 2000
# Standard formats no regular language captures: checked on the complete document.
CHECKED_FORMATS = frozenset({"regex"})
REFUSED_FORMATS = {
    "idn-hostname": "IDNA 2008 rules (contextual and bidirectional) are not regular",
    "idn-email": "its domain is an idn-hostname (IDNA 2008 rules are not regular)",
}


@dataclass(frozen=True)
class Options:
    """How JSON values are written and how much compilation may cost.

    Attributes:
        whitespace: ``"compact"`` (no whitespace except one optional space after ``,`` and
            ``:``, as ``json.dumps`` writes) or ``"flexible"`` (runs of up to
            ``max_whitespace`` spaces, tabs or newlines around punctuation).
        max_whitespace: longest whitespace run in ``"flexible"`` mode.
        property_order: ``"schema"``: properties appear in the order of ``properties``
            (then required names not listed there, then additional properties). ``"any"``:
            the model chooses the order (each property at most once, additional ones
            anywhere), for objects with at most ``any_order_max_properties`` named
            properties (the grammar grows as 2^n); larger objects keep schema order.
        additional_properties: ``None`` follows the schema (and the spec: allowed unless
            said otherwise); ``False`` forbids properties the schema does not name wherever
            it does not say ``additionalProperties`` itself.
        final_check: validate the complete document with ``jsonschema`` before EOS (needed
            for the keywords the grammar over-approximates; see the module docs).
        max_states: automaton states allowed per terminal.
        pattern_budget_s: time allowed to build one string automaton (pattern, format,
            lengths); beyond it the pattern or format is left to the final check.
        max_rules: grammar rules allowed in total.
        time_budget_s: wall-clock budget for building the grammar.
    """

    whitespace: str = "compact"
    max_whitespace: int = 4
    property_order: str = "schema"
    any_order_max_properties: int = 8
    additional_properties: bool | None = None
    final_check: bool = True
    max_states: int = 50_000
    max_rules: int = 200_000
    time_budget_s: float = 30.0
    pattern_budget_s: float = 5.0

    def __post_init__(self) -> None:
        if self.whitespace not in ("compact", "flexible"):
            raise ValueError(f"whitespace must be 'compact' or 'flexible', not {self.whitespace!r}")
        if self.property_order not in ("schema", "any"):
            raise ValueError(
                f"property_order must be 'schema' or 'any', not {self.property_order!r}"
            )
        if self.max_whitespace < 1:
            raise ValueError("max_whitespace must be at least 1")


@dataclass(frozen=True)
class Finding:
    """How one keyword occurrence is enforced."""

    pointer: str
    keyword: str
    status: str  # EXACT, FINAL_CHECK or ANNOTATION
    detail: str = ""


@dataclass
class Translation:
    grammar: Grammar
    findings: list[Finding] = field(default_factory=list)


def _trie_states(texts: list[str]) -> int:
    """States of the trie spelling ``texts`` (UTF-8): one per distinct prefix."""
    n = 1
    prev = b""
    for w in sorted(t.encode() for t in texts):
        common = 0
        for a, b in zip(prev, w, strict=False):
            if a != b:
                break
            common += 1
        n += len(w) - common
        prev = w
    return n


def _canonical(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


class _Builder:
    def __init__(self, loaded: LoadedSchema, options: Options) -> None:
        self.loaded = loaded
        self.opt = options
        self.terms: dict[str, Terminal] = {}
        self._term_keys: dict[str, str] = {}
        self.rules: list[Rule] = []
        self.findings: dict[tuple[str, str], Finding] = {}
        self.memo: dict[Any, str | None] = {}
        self._synthetic: set[int] = set()  # ids of schemas made by `merge`
        self.n = 0
        self.deadline = time.monotonic() + options.time_budget_s
        self._any: str | None = None
        self._merge_depth = 0
        self._validation: ExactValidation | None = None
        self._branch_pointers: dict[int, list[str]] = {}  # synthetic anyOf lists
        self._alive: list[Any] = []
        self._too_large: set[str] = set()  # patterns/formats whose automaton is too large
        self._merges = 0
        self._universe_keys: ByteDFA | None = None
        self._other_keys: dict[tuple[tuple[bytes, ...], int], ByteDFA] = {}

    # -- bookkeeping --------------------------------------------------------------------
    def note(self, ptr: str, kw: str, status: str, detail: str = "") -> None:
        key = (ptr, kw)
        old = self.findings.get(key)
        if old is None or (old.status == EXACT and status == FINAL_CHECK):
            self.findings[key] = Finding(ptr, kw, status, detail)

    def fresh(self, hint: str) -> str:
        self.n += 1
        return f"{hint}_{self.n}"

    def add(self, lhs: str, *rhs: str) -> None:
        self.rules.append(Rule(lhs, tuple(rhs)))
        if len(self.rules) > self.opt.max_rules:
            raise CompileBudgetError(
                f"the schema needs more than {self.opt.max_rules} grammar rules "
                "(raise Options.max_rules to allow it)"
            )

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise CompileBudgetError(
                f"building the grammar took longer than {self.opt.time_budget_s} s "
                "(Options.time_budget_s)"
            )

    def term(self, key: str, make: Callable[[], ByteDFA], source: str, hint: str) -> str | None:
        """A terminal for a DFA, shared by every use of the same ``key``; ``None`` if empty."""
        name = self._term_keys.get(key)
        if name is None:
            dfa = make()
            if dfa.n_states == 0:
                self._term_keys[key] = ""
                return None
            name = self.fresh(hint.upper())
            self.terms[name] = Terminal(name, dfa, source=source)
            self._term_keys[key] = name
        return name or None

    def lit(self, text: str) -> str:
        name = self.term("lit:" + text, lambda: literal_dfa(text), repr(text), "LIT")
        assert name is not None
        return name

    def punct(self, ch: str) -> str:
        ws = f"[ \\t\\n\\r]{{0,{self.opt.max_whitespace}}}"
        if self.opt.whitespace == "compact":
            rx = {",": ", ?", ":": ": ?"}.get(ch, "\\" + ch)
        else:
            e = "\\" + ch
            rx = {"{": e + ws, "[": e + ws, "}": ws + e, "]": ws + e}.get(ch, ws + e + ws)
        name = self.term("punct:" + ch, lambda: python_regex_dfa(rx), f"/{rx}/", "P")
        assert name is not None
        return name

    # -- values -------------------------------------------------------------------------
    def value(self, schema: Any, ptr: str, resolver: Any) -> str | None:
        """The nonterminal of the JSON texts valid for ``schema`` (``None``: no value is)."""
        self.tick()
        if schema is True or schema == {}:
            return self.any_value()
        if schema is False:
            return None
        if not isinstance(schema, dict):  # the meta-schema check rules this out
            raise UnsupportedFeatureError("schema", location=ptr, detail="not an object")
        key: Any = id(schema)
        if key in self._synthetic:  # a merged schema: identified by content and base URI
            key = (_canonical(schema), getattr(resolver, "_base_uri", ""))
        if key in self.memo:
            return self.memo[key]
        self._alive.append(schema)  # keeps `id(schema)` unique while the memo lives
        name = self.fresh("v")
        self.memo[key] = name  # recursion through $ref finds the name
        sym = self._value(schema, ptr, resolver)
        if sym is None:
            self.memo[key] = None
            # A recursive reference may already use `name`; give it no rules (empty).
            return None
        self.add(name, sym)
        return name

    def _value(self, schema: dict[str, Any], ptr: str, resolver: Any) -> str | None:
        resolver = self.enter(schema, resolver)
        if "$ref" not in schema or self.loaded.draft not in ("4", "6", "7"):
            simpler = simplify(self, schema, ptr, resolver)
            if simpler is None:
                return None
            schema = simpler
        for kw in schema:
            if kw in ANNOTATIONS:
                self.note(pointer_join(ptr, kw), kw, ANNOTATION)
            elif kw in DEFERRED:
                continue  # noted where arrays and objects are built
            elif kw in CHECKED:
                self._needs_check(pointer_join(ptr, kw), kw)
            elif kw not in HANDLED:
                self.note(pointer_join(ptr, kw), kw, ANNOTATION, "unknown keyword: no effect")
        if "$ref" in schema and self.loaded.draft in ("4", "6", "7"):
            # before 2019-09, keywords beside $ref are ignored
            for kw in schema:
                if kw != "$ref" and kw not in ANNOTATIONS:
                    self.note(pointer_join(ptr, kw), kw, ANNOTATION, "ignored beside $ref")
            target, t_resolver, t_ptr = self.resolve(schema["$ref"], ptr, resolver, "$ref")
            return self.value(target, t_ptr, t_resolver)
        # references with siblings: allOf of the target and the rest
        for ref_kw in ("$ref", "$dynamicRef", "$recursiveRef"):
            if ref_kw in schema:
                target, t_resolver, t_ptr = self.resolve(schema[ref_kw], ptr, resolver, ref_kw)
                rest = {k: v for k, v in schema.items() if k != ref_kw}
                if not any(k not in ANNOTATIONS for k in rest):
                    return self.value(target, t_ptr, t_resolver)
                merged = self.merge(rest, target, ptr, t_resolver)
                if merged is None:
                    return self.value(rest, ptr, resolver)  # the final check enforces the ref
                return self.value(merged, ptr, t_resolver)
        if "allOf" in schema:
            base = {k: v for k, v in schema.items() if k != "allOf"}
            merged_all: dict[str, Any] | None = base
            for i, sub in enumerate(schema["allOf"]):
                sub_ptr = pointer_join(ptr, "allOf", i)
                sub, sub_resolver, _ = self.deref(sub, sub_ptr, resolver)
                m = self.merge(merged_all or {}, sub, sub_ptr, sub_resolver)
                if m is None:
                    self._needs_check(sub_ptr, "allOf", "branch not merged into the grammar")
                else:
                    merged_all = m
            self.note(pointer_join(ptr, "allOf"), "allOf", EXACT)
            return self.value(merged_all, ptr, resolver)
        for comb in ("anyOf", "oneOf"):
            if comb in schema:
                base = {k: v for k, v in schema.items() if k != comb}
                if self._merges > MERGE_BUDGET and any(k not in ANNOTATIONS for k in base):
                    # Distributing siblings into every branch has multiplied the schema
                    # too much: keep the siblings only; the final check enforces the branches.
                    self._needs_check(pointer_join(ptr, comb), comb, "schema too large to expand")
                    return self.value(base, ptr, resolver)
                name = self.fresh(comb)
                any_branch = False
                written = self._branch_pointers.get(id(schema[comb]))  # from a rewrite
                for i, sub in enumerate(schema[comb]):
                    sub_ptr = written[i] if written else pointer_join(ptr, comb, i)
                    sub, sub_resolver, _ = self.deref(sub, sub_ptr, resolver)
                    m = self.merge(base, sub, sub_ptr, sub_resolver)
                    if m is None:
                        self._needs_check(sub_ptr, comb, "branch not merged with its siblings")
                        m = base
                    sym = self.value(m, sub_ptr, sub_resolver)
                    if sym is not None:
                        self.add(name, sym)
                        any_branch = True
                if comb == "oneOf" and len(schema[comb]) > 1:
                    self._needs_check(pointer_join(ptr, comb), comb, "exclusivity")
                elif not written:
                    self.note(pointer_join(ptr, comb), comb, EXACT)
                return name if any_branch else None
        if "enum" in schema or "const" in schema:
            self._settle_deferred(schema, ptr, EXACT, "enum values are filtered by it")
            return self.enum_value(schema, ptr, resolver)
        types = self.types_of(schema, ptr)
        name = self.fresh("t")
        found = False
        for t in types:
            sym = self.typed(t, schema, ptr, resolver)
            if sym is not None:
                self.add(name, sym)
                found = True
        self._settle_deferred(schema, ptr, ANNOTATION, "no effect: no array or object is allowed")
        return name if found else None

    def _settle_deferred(self, schema: dict[str, Any], ptr: str, status: str, detail: str) -> None:
        """Note the :data:`DEFERRED` keywords of ``schema`` that ``array``/``object`` did not."""
        for kw in DEFERRED:
            if kw in schema and (pointer_join(ptr, kw), kw) not in self.findings:
                self.note(pointer_join(ptr, kw), kw, status, detail)

    def pattern_node(self, pattern: str, ptr: str, kw: str) -> ast.Node | None:
        """The search language of an ECMA-262 ``pattern`` (at ``ptr``), or ``None`` when it
        is not regular (or too large to expand): keyword ``kw`` is then left to the final
        check, which evaluates the pattern with ECMA-262 semantics.

        Raises:
            GrammarError: a malformed pattern.
            UnsupportedFeatureError: a construct corral neither compiles nor evaluates.
        """
        from .ecma import EcmaPattern

        compiled = EcmaPattern(pattern, where=ptr)
        if compiled.irregular is None:
            return compiled.search_node()
        err = compiled.irregular
        reason = (
            f"{err.feature} is not regular"
            if isinstance(err, UnsupportedFeatureError)
            else "too many counted repetitions to expand"
        )
        self._needs_check(ptr, kw, reason)
        return None

    annotations = ANNOTATIONS

    def exact(self, ptr: str, kw: str, detail: str = "") -> None:
        """Keyword ``kw`` at ``ptr`` is expressed exactly by the grammar."""
        self.note(ptr, kw, EXACT, detail)

    def union(self, branches: list[Any], pointers: list[str]) -> dict[str, Any]:
        """A synthetic ``{"anyOf": branches}`` whose branches are reported at
        ``pointers`` (where the user wrote them) rather than under an ``anyOf``."""
        out = self.synthetic({"anyOf": list(branches)})
        self._branch_pointers[id(out["anyOf"])] = list(pointers)
        self._alive.append(out["anyOf"])
        return out

    def synthetic(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Register a schema built here (not found in the document): it is identified by
        content, not identity, and kept alive while the translation runs."""
        self._synthetic.add(id(schema))
        self._alive.append(schema)
        return schema

    def needs_check(self, ptr: str, kw: str, detail: str = "") -> None:
        """Keyword ``kw`` at ``ptr`` is left to the final check (refused without one)."""
        self._needs_check(ptr, kw, detail)

    def _needs_check(self, ptr: str, kw: str, detail: str = "") -> None:
        if not self.opt.final_check:
            raise UnsupportedFeatureError(
                kw,
                location=ptr,
                detail="a grammar cannot express it; it needs the final check "
                "(Options.final_check=True)" + (f" ({detail})" if detail else ""),
            )
        self.note(ptr, kw, FINAL_CHECK, detail)

    # -- references and merging -----------------------------------------------------------
    def enter(self, schema: dict[str, Any], resolver: Any) -> Any:
        """The resolver inside ``schema``: a subschema with an ``$id`` is a new base URI."""
        id_kw = "id" if self.loaded.draft == "4" else "$id"
        if isinstance(schema.get(id_kw), str):
            from referencing import Resource
            from referencing.jsonschema import specification_with

            spec = specification_with(self.loaded.dialect)
            return resolver.in_subresource(
                Resource.from_contents(schema, default_specification=spec)
            )
        return resolver

    def resolve(self, ref: Any, ptr: str, resolver: Any, kw: str) -> tuple[Any, Any, str]:
        if not isinstance(ref, str):
            raise UnsupportedFeatureError(kw, location=pointer_join(ptr, kw), detail="not a string")
        try:
            resolved = resolver.lookup(ref)
        except UnsupportedFeatureError:
            raise
        except Exception as e:
            chain: BaseException | None = e
            while chain is not None:
                if isinstance(chain, UnsupportedFeatureError):  # retrieval was refused
                    raise UnsupportedFeatureError(
                        f"remote {kw}",
                        location=pointer_join(ptr, kw),
                        detail=f"{ref!r} is outside the schema document; it is never "
                        "fetched (put the referenced schema under $defs)",
                    ) from None
                chain = chain.__cause__ or chain.__context__
            raise UnsupportedFeatureError(
                kw, location=pointer_join(ptr, kw), detail=f"cannot resolve {ref!r}"
            ) from None
        if kw != "$ref":
            self._needs_check(pointer_join(ptr, kw), kw, "resolved statically")
        else:
            self.note(pointer_join(ptr, kw), kw, EXACT)
        t_ptr = ref[1:] if ref.startswith("#/") else ref
        return resolved.contents, resolved.resolver, t_ptr

    def absolute_refs(self, schema: Any, resolver: Any) -> Any:
        """``schema`` with its references made absolute, so it can be merged into a schema
        that lives in another resource (another base URI)."""
        from urllib.parse import urljoin

        base0 = getattr(resolver, "_base_uri", "") or ""
        id_kw = "id" if self.loaded.draft == "4" else "$id"
        if not base0:
            return schema

        def walk(node: Any, base: str, top: bool) -> Any:
            if isinstance(node, list):
                return [walk(x, base, False) for x in node]
            if not isinstance(node, dict):
                return node
            if isinstance(node.get(id_kw), str) and not top:
                return node  # a resource of its own: its references stay relative to it
            out = {}
            for k, v in node.items():
                if k in ("$ref", "$dynamicRef", "$recursiveRef") and isinstance(v, str):
                    out[k] = urljoin(base, v) if not v.startswith(("urn:", "tag:")) else v
                elif k in ("enum", "const", "default", "examples"):
                    out[k] = v
                else:
                    out[k] = walk(v, base, False)
            return out

        return walk(schema, base0, True)

    def deref(self, schema: Any, ptr: str, resolver: Any) -> tuple[Any, Any, str]:
        """Follow a schema that is only a ``$ref`` (annotations aside)."""
        seen = 0
        while (
            isinstance(schema, dict)
            and "$ref" in schema
            and all(k == "$ref" or k in ANNOTATIONS for k in schema)
        ):
            schema, resolver, ptr = self.resolve(schema["$ref"], ptr, resolver, "$ref")
            seen += 1
            if seen > 64:
                raise UnsupportedFeatureError("$ref", location=ptr, detail="a cycle of references")
        return schema, resolver, ptr

    def merge(self, a: Any, b: Any, ptr: str, resolver: Any) -> Any:
        """A schema equivalent to ``allOf [a, b]``, or ``None`` if it cannot be written as
        one (the caller then keeps ``a`` and relies on the final check)."""
        if b is True or b == {} or (isinstance(b, dict) and all(k in ANNOTATIONS for k in b)):
            return a if isinstance(a, dict) else {}
        if a is True or (isinstance(a, dict) and all(k in ANNOTATIONS for k in a)):
            if isinstance(b, dict) and "$ref" not in b:
                return b  # the same object: recursion through it is found by identity
            a = {}
        if b is False or a is False:
            return False  # no value
        if not isinstance(a, dict) or not isinstance(b, dict):
            return None
        self._merge_depth += 1
        self._merges += 1
        try:
            if self._merge_depth > 32:
                return None
            b = self.absolute_refs(b, resolver)
            if "$ref" in b:
                target, t_res, _ = self.resolve(b["$ref"], ptr, resolver, "$ref")
                rest = {k: v for k, v in b.items() if k != "$ref"}
                m = self.merge(rest, target, ptr, t_res)
                if m is None:
                    return None
                b = m
            out = dict(a)
            for k, v in b.items():
                if k in ANNOTATIONS:
                    continue
                if k not in out:
                    out[k] = v
                    continue
                m = _merge_keyword(k, out[k], v)
                if m is _NO_MERGE:
                    return None
                out[k] = m
            self._synthetic.add(id(out))
            self._alive.append(out)
            return out
        finally:
            self._merge_depth -= 1

    # -- types --------------------------------------------------------------------------
    def types_of(self, schema: dict[str, Any], ptr: str) -> list[str]:
        t = schema.get("type")
        if t is None:
            return list(TYPES)
        self.note(pointer_join(ptr, "type"), "type", EXACT)
        ts = [t] if isinstance(t, str) else list(t)
        out = []
        for name in TYPES:
            if name in ts:
                out.append(name)
            elif name == "number" and "integer" in ts:
                out.append("integer")
        return out

    def typed(self, t: str, s: dict[str, Any], ptr: str, resolver: Any) -> str | None:
        if t == "null":
            return self.lit("null")
        if t == "boolean":
            name = self.fresh("bool")
            self.add(name, self.lit("true"))
            self.add(name, self.lit("false"))
            return name
        if t in ("integer", "number"):
            return self.number(s, ptr, integer=t == "integer")
        if t == "string":
            return self.string(s, ptr)
        if t == "array":
            return self.array(s, ptr, resolver)
        return self.object(s, ptr, resolver)

    def any_value(self) -> str:
        if self._any is None:
            v = self._any = self.fresh("any")
            obj, arr, pairs, items = (self.fresh(h) for h in ("anyobj", "anyarr", "pairs", "items"))
            string = self.term("string", plain_string, "JSON string", "STRING")
            number = self.term("number", _number_dfa, "JSON number", "NUMBER")
            assert string is not None and number is not None
            for sym in (
                obj,
                arr,
                string,
                number,
                self.lit("true"),
                self.lit("false"),
                self.lit("null"),
            ):
                self.add(v, sym)
            lb, rb, lk, rk = self.punct("{"), self.punct("}"), self.punct("["), self.punct("]")
            comma, colon = self.punct(","), self.punct(":")
            self.add(obj, lb, rb)
            self.add(obj, lb, pairs, rb)
            self.add(pairs, string, colon, v)
            self.add(pairs, pairs, comma, string, colon, v)
            self.add(arr, lk, rk)
            self.add(arr, lk, items, rk)
            self.add(items, v)
            self.add(items, items, comma, v)
        return self._any

    # -- enum / const -------------------------------------------------------------------
    def enum_value(self, schema: dict[str, Any], ptr: str, resolver: Any) -> str | None:
        values: list[Any] = []
        if "const" in schema:
            values = [schema["const"]]
            self.note(pointer_join(ptr, "const"), "const", EXACT)
        if "enum" in schema:
            enum = list(schema["enum"])
            values = [v for v in enum if _json_equal_in(v, values)] if "const" in schema else enum
            self.note(pointer_join(ptr, "enum"), "enum", EXACT)
        rest = {k: v for k, v in schema.items() if k not in ("enum", "const")}
        if any(k not in ANNOTATIONS for k in rest):
            kw = "enum" if "enum" in schema else "const"
            base = getattr(resolver, "_base_uri", "")
            keep = self.sibling_filter(rest, base, pointer_join(ptr, kw))
            values = [v for v in values if keep(v)]
        name = self.fresh("enum")
        seen: set[str] = set()
        words: list[str] = []  # strings, booleans and null: spelled one way each
        for v in values:
            c = _canonical(v)
            if c in seen:
                continue
            seen.add(c)
            if isinstance(v, (str, bool)) or v is None:
                words.append(c)
            else:
                self.add(name, self.const(v))
        if len(words) > 1 and _trie_states(words) <= self.opt.max_states:
            self.add(name, self.words(words))
        else:  # one terminal per text: the rule budget bounds a huge enum
            for c in words:
                self.add(name, self.lit(c))
        return name if seen else None

    def words(self, texts: list[str]) -> str:
        """One terminal for a set of literal texts (an enum's strings): one lexer state
        reads them all, where a terminal per text would put one lexeme item per text in
        the parse."""
        key = hashlib.blake2b("\0".join(sorted(texts)).encode(), digest_size=16).hexdigest()
        shown = ", ".join(texts[:3]) + (", ..." if len(texts) > 3 else "")
        name = self.term(
            "words:" + key,
            lambda: union_of_literals([t.encode() for t in texts]),
            f"one of {len(texts)} values ({shown})",
            "WORDS",
        )
        assert name is not None
        return name

    def sibling_filter(
        self, schema: dict[str, Any], base_uri: str, ptr: str
    ) -> Callable[[Any], bool]:
        """Whether an enum/const value (at ``ptr``) is valid for its sibling keywords
        ``schema``, whose references resolve from ``base_uri``. Where validation cannot
        decide (a pattern beyond its backtracking budget, say), the value is kept and the
        keyword is left to the final check."""
        if self._validation is None:
            self._validation = ExactValidation(self.loaded)
        is_valid = self._validation.fragment_validator(schema, base_uri)
        kw = ptr.rsplit("/", 1)[-1]

        def keep(value: Any) -> bool:
            try:
                return is_valid(value)
            except Exception as e:  # undecided: the final check decides
                self._needs_check(ptr, kw, f"a value could not be checked ({type(e).__name__})")
                return True

        return keep

    def const(self, v: Any) -> str:
        if isinstance(v, dict):
            if not v:
                return self._seq("cobj", self.punct("{"), self.punct("}"))
            parts = [self.punct("{")]
            for i, (k, x) in enumerate(v.items()):
                if i:
                    parts.append(self.punct(","))
                parts += [self.lit(_canonical(k)), self.punct(":"), self.const(x)]
            parts.append(self.punct("}"))
            return self._seq("cobj", *parts)
        if isinstance(v, list):
            if not v:
                return self._seq("carr", self.punct("["), self.punct("]"))
            parts = [self.punct("[")]
            for i, x in enumerate(v):
                if i:
                    parts.append(self.punct(","))
                parts.append(self.const(x))
            parts.append(self.punct("]"))
            return self._seq("carr", *parts)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            from .numbers import number_dfa

            d = Decimal(str(v)) if isinstance(v, float) else Decimal(v)
            # every spelling of the value without an exponent: 1, 1.0, 1.00 ...
            name = self.term(f"cnum:{d}", lambda: number_dfa(d, d), f"number {v}", "CNUM")
            if name is not None:
                return name
        return self.lit(_canonical(v))

    def _seq(self, hint: str, *syms: str) -> str:
        name = self.fresh(hint)
        self.add(name, *syms)
        return name

    # -- numbers ------------------------------------------------------------------------
    def number(self, s: dict[str, Any], ptr: str, *, integer: bool) -> str | None:
        from . import numbers as nb

        lo, lo_x, hi, hi_x = _bounds(s, self.loaded.draft)
        for kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if kw in s:
                self.note(pointer_join(ptr, kw), kw, EXACT)
        mult = s.get("multipleOf")
        key = f"num:{integer}:{lo}:{lo_x}:{hi}:{hi_x}:{mult}"
        where = f"number at {ptr or '/'}"

        def make() -> ByteDFA:
            if integer:
                ilo = None if lo is None else _int_lo(lo, lo_x)
                ihi = None if hi is None else _int_hi(hi, hi_x)
                d = nb.integer_dfa(ilo, ihi)
            elif lo is None and hi is None:
                d = _number_dfa()
            else:
                d = nb.number_dfa(
                    lo, hi, exclusive_minimum=lo_x, exclusive_maximum=hi_x,
                    max_states=self.opt.max_states,
                )  # fmt: skip
            if mult is not None:
                m = nb.multiple_of_dfa(
                    Decimal(str(mult)), integer=integer, max_states=self.opt.max_states
                )
                d = intersect(d, m, max_states=self.opt.max_states, where=where)
            return d

        if mult is not None:
            m_ptr = pointer_join(ptr, "multipleOf")
            try:
                name = self.term(key, make, where, "INT" if integer else "NUM")
            except CompileBudgetError:
                self._needs_check(m_ptr, "multipleOf", "its automaton exceeds max_states")
                mult = None
                key = f"num:{integer}:{lo}:{lo_x}:{hi}:{hi_x}:None"
                return self.term(key, make, where, "INT" if integer else "NUM")
            self.note(m_ptr, "multipleOf", EXACT)
            return name
        return self.term(key, make, where, "INT" if integer else "NUM")

    # -- strings ------------------------------------------------------------------------
    def string(self, s: dict[str, Any], ptr: str) -> str | None:
        lo = int(s.get("minLength", 0))
        hi = s.get("maxLength")
        hi = None if hi is None else int(hi)
        for kw in ("minLength", "maxLength"):
            if kw in s:
                self.note(pointer_join(ptr, kw), kw, EXACT)
        if lo > MAX_EXACT_LENGTH or (hi is not None and hi > MAX_EXACT_LENGTH):
            self._needs_check(ptr, "maxLength" if hi is not None else "minLength",
                              f"length bounds above {MAX_EXACT_LENGTH} characters")  # fmt: skip
            lo = min(lo, MAX_EXACT_LENGTH)
            hi = None if hi is None or hi > MAX_EXACT_LENGTH else hi
        nodes: list[tuple[ast.Node, str]] = []
        if "pattern" in s:
            p_ptr = pointer_join(ptr, "pattern")
            node = self.pattern_node(s["pattern"], p_ptr, "pattern")
            if node is not None:
                nodes.append((node, p_ptr))
                self.note(p_ptr, "pattern", EXACT)
        fmt = s.get("format")
        if fmt is not None:
            from ..regex.python_syntax import parse_python_regex
            from .formats import format_regex

            f_ptr = pointer_join(ptr, "format")
            rx = format_regex(fmt)
            if fmt in CHECKED_FORMATS:
                self._needs_check(f_ptr, "format", f"format {fmt!r}")
            elif fmt in REFUSED_FORMATS:
                raise UnsupportedFeatureError(
                    f"format {fmt!r}", location=f_ptr, detail=REFUSED_FORMATS[fmt]
                )
            elif rx is None:
                self.note(f_ptr, "format", ANNOTATION, f"unknown format {fmt!r}: not asserted")
            else:
                nodes.append((parse_python_regex(rx, where=f_ptr), f_ptr))
                self.note(f_ptr, "format", EXACT)
        key = f"str:{lo}:{hi}:" + "|".join(_canonical([s.get("pattern"), fmt]))
        lengths: list[bool] = []

        def make() -> ByteDFA:
            dfa, enforced = constrained_string(
                lo=lo, hi=hi, nodes=nodes, max_states=self.opt.max_states
            )
            lengths.append(enforced)
            return dfa

        body_key = _canonical([s.get("pattern"), fmt])
        try:
            if nodes and body_key in self._too_large:
                raise CompileBudgetError("known to be too large")
            with deadline(self.opt.pattern_budget_s):
                name = self.term(key, make, f"string at {ptr or '/'}", "STR")
        except CompileBudgetError:
            if not nodes or self.deadline < time.monotonic():
                raise
            self._too_large.add(body_key)
            # the pattern/format automaton is too large: the final check enforces it
            for node_ptr in [w for _, w in nodes]:
                self._needs_check(node_ptr, node_ptr.rsplit("/", 1)[-1], "automaton too large")
            nodes = []
            self._term_keys.pop(key, None)
            lengths.clear()
            name = self.term(key + ":plain", make, f"string at {ptr or '/'}", "STR")
        if lengths and not lengths[0]:
            for kw in ("minLength", "maxLength"):
                if kw in s:
                    self._needs_check(pointer_join(ptr, kw), kw, "combined with pattern/format")
        return name

    # -- arrays -------------------------------------------------------------------------
    def array(self, s: dict[str, Any], ptr: str, resolver: Any) -> str | None:
        draft = self.loaded.draft
        prefix: list[Any] = []
        rest: Any = True
        prefix_kw = "prefixItems"
        if draft in ("2020-12",):
            prefix = list(s.get("prefixItems", []))
            rest = s.get("items", True)
        else:
            items = s.get("items", True)
            if isinstance(items, list):
                prefix, prefix_kw = items, "items"
                rest = s.get("additionalItems", True)
            else:
                rest = items
        for kw in ("prefixItems", "items", "additionalItems", "minItems", "maxItems"):
            if kw in s:
                self.note(pointer_join(ptr, kw), kw, EXACT)
        lo = int(s.get("minItems", 0))
        hi = s.get("maxItems")
        hi = None if hi is None else int(hi)
        contains = self._contains(s, ptr, resolver)
        if contains is None:
            return None
        least, c_sub, c_resolver = contains
        lo = max(lo, least)  # implied by contains: the grammar can say it
        n = len(prefix)
        rest_ptr = pointer_join(ptr, "items" if prefix_kw == "prefixItems" else "additionalItems")
        if s.get("uniqueItems") is True:
            values = self._unique_values(prefix, rest, lo, ptr, resolver)
            if values is None:
                return None
            if values:
                if n == 0 and len(values) <= UNIQUE_MAX_VALUES:
                    self.note(pointer_join(ptr, "uniqueItems"), "uniqueItems", EXACT)
                    if c_sub is not None:
                        self._contains_checked(s, ptr, "with uniqueItems")
                    return self._unique_array(values, lo, hi)
                # distinct items from a finite set: the set's size bounds the length
                hi = n + len(values) if hi is None else min(hi, n + len(values))
            self._needs_check(pointer_join(ptr, "uniqueItems"), "uniqueItems")
        elif "uniqueItems" in s:
            self.note(pointer_join(ptr, "uniqueItems"), "uniqueItems", EXACT, "false: no effect")
        prefix_syms = [
            self.value(x, pointer_join(ptr, prefix_kw, i), resolver) for i, x in enumerate(prefix)
        ]
        rest_sym = self.value(rest, rest_ptr, resolver)
        # longest possible array
        cap = hi
        for i, sym in enumerate(prefix_syms):
            if sym is None:
                cap = i if cap is None else min(cap, i)
                break
        if rest_sym is None:
            cap = n if cap is None else min(cap, n)
        if cap is not None and cap < lo:
            return None
        if c_sub is not None:
            hit = self._contains_hit(s, ptr, c_resolver, rest, c_sub, n, lo, cap, least)
            if hit is False:
                return None
            if isinstance(hit, str):
                return self._contains_array(rest_sym, hit, lo, cap, least)
        exact_cap = cap
        if cap is not None and cap - max(lo, n) > 4096:
            self._needs_check(pointer_join(ptr, "maxItems"), "maxItems", "bound above 4096")
            exact_cap = None
        comma = self.punct(",")
        last = max(lo, n)  # from here on items are alike and the count is free (up to cap)
        names = [self.fresh("a") for _ in range(last + 1)]
        for i in range(last):
            if exact_cap is not None and i >= exact_cap:
                self.add(names[i])  # cap >= lo: the array may end here
                break
            if i >= lo:
                self.add(names[i])
            sym = prefix_syms[i] if i < n else rest_sym
            if sym is None:
                continue
            self.add(names[i], *([comma] if i else []), sym, names[i + 1])
        tail = names[last]
        if exact_cap is None:
            self.add(tail)
            if rest_sym is not None and (last >= n):
                loop = self.fresh("more")
                if last == 0:
                    self.add(tail, rest_sym, loop)
                else:
                    self.add(tail, comma, rest_sym, loop)
                self.add(loop)
                self.add(loop, comma, rest_sym, loop)
        else:
            # chain from `last` up to `exact_cap`
            prev = tail
            for i in range(last, exact_cap + 1):
                self.add(prev)
                if i == exact_cap or rest_sym is None:
                    break
                nxt = self.fresh("a")
                self.add(prev, *([comma] if i else []), rest_sym, nxt)
                prev = nxt
        return self._seq("arr", self.punct("["), names[0], self.punct("]"))

    def _contains(self, s: dict[str, Any], ptr: str, resolver: Any) -> tuple[int, Any, Any] | None:
        """``(least, sub, resolver)``: the fewest items ``contains`` implies and its
        (dereferenced) subschema with its resolver (``(0, None, None)``: no effect), or
        ``None`` when no array satisfies it."""
        modern = self.loaded.draft in ("2019-09", "2020-12")
        if not modern:
            for kw in ("minContains", "maxContains"):
                if kw in s:
                    self.note(pointer_join(ptr, kw), kw, ANNOTATION, "not a keyword of this draft")
        if "contains" not in s or self.loaded.draft == "4":
            for kw in ("contains", "minContains", "maxContains"):
                if kw in s and modern:
                    self.note(pointer_join(ptr, kw), kw, ANNOTATION, "no effect without contains")
            return 0, None, None
        least = int(s.get("minContains", 1)) if modern else 1
        most = s.get("maxContains") if modern else None
        c_ptr = pointer_join(ptr, "contains")
        sub, sub_resolver, _ = self.deref(s["contains"], c_ptr, resolver)
        if (most is not None and least > int(most)) or (least and surely_empty(sub, ANNOTATIONS)):
            self.note(c_ptr, "contains", EXACT, "no array satisfies it")
            return None
        if least == 0 and most is None:
            for kw in ("contains", "minContains"):
                self.note(pointer_join(ptr, kw), kw, EXACT, "minContains 0: no effect")
            return 0, None, None
        return least, sub, sub_resolver

    def _contains_hit(
        self,
        s: dict[str, Any],
        ptr: str,
        resolver: Any,
        rest: Any,
        c_sub: Any,
        n: int,
        lo: int,
        cap: int | None,
        least: int,
    ) -> str | bool | None:
        """The symbol of an item that satisfies both ``items`` and ``contains``
        (``resolver``: the scope of ``c_sub``), when the
        grammar can count such items exactly (no prefix items, no ``maxContains``, few
        enough states); ``False`` when no item can; ``None`` (after noting the final
        check) otherwise."""
        c_ptr = pointer_join(ptr, "contains")
        states = ((cap if cap is not None else max(lo, 1)) + 1) * (least + 1)  # _contains_array
        if (
            n
            or "maxContains" in s
            or states > MAX_COUNT_STATES
            or s.get("uniqueItems") is True
            or (isinstance(rest, dict) and "$ref" in rest)  # merged only in its own scope
        ):
            self._contains_checked(s, ptr, "")
            return None
        both = self.merge(rest if rest is not True else {}, c_sub, c_ptr, resolver)
        if both is None:
            self._contains_checked(s, ptr, "not merged with items")
            return None
        sym = None if both is False else self.value(both, c_ptr, resolver)
        for kw in ("contains", "minContains"):
            if kw in s:
                self.note(pointer_join(ptr, kw), kw, EXACT)
        return False if sym is None else sym

    def _contains_checked(self, s: dict[str, Any], ptr: str, detail: str) -> None:
        for kw in ("contains", "minContains", "maxContains"):
            if kw in s:
                self._needs_check(pointer_join(ptr, kw), kw, detail)

    def _contains_array(
        self, item: str | None, hit: str, lo: int, cap: int | None, least: int
    ) -> str:
        """Arrays of ``lo`` to ``cap`` items, each an ``item`` or a ``hit``, at least
        ``least`` of them hits: states count the items (up to ``max(lo, 1)`` when there is
        no cap) and the hits (up to ``least``)."""
        comma = self.punct(",")
        top = cap if cap is not None else max(lo, 1)
        S = [[self.fresh("ct") for _ in range(least + 1)] for _ in range(top + 1)]
        for i in range(top + 1):
            for c in range(least + 1):
                if i >= lo and c >= least:
                    self.add(S[i][c])
                if cap is not None and i >= cap:
                    continue
                after = min(i + 1, top)
                sep = [comma] if i else []
                if item is not None:
                    self.add(S[i][c], *sep, item, S[after][c])
                self.add(S[i][c], *sep, hit, S[after][min(c + 1, least)])
        return self._seq("arr", self.punct("["), S[0][0], self.punct("]"))

    def _unique_values(
        self, prefix: list[Any], rest: Any, lo: int, ptr: str, resolver: Any
    ) -> list[Any] | None:
        """For ``uniqueItems``: the finite set of values the items after the prefix may take
        (``[]``: not finite), or ``None`` when no array of at least ``lo`` distinct items
        exists (each position choosing from its finite set, when it has one)."""
        rest_s, _, _ = self.deref(rest, ptr, resolver)
        values = finite_values(rest_s, ANNOTATIONS)
        choices: list[list[Any]] = []
        for item in prefix[:lo]:
            c = finite_values(self.deref(item, ptr, resolver)[0], ANNOTATIONS)
            if c is not None:
                choices.append(c)
        after = lo - len(prefix)  # required items beyond the prefix
        if values is not None and after > 0:
            # more required items than distinct values: no matching can place them
            choices += [values] * after if after <= len(values) else [[]]
        if not distinct_choice_possible(choices):
            self.note(
                pointer_join(ptr, "uniqueItems"),
                "uniqueItems",
                EXACT,
                "no array has distinct items",
            )
            return None
        return values or []

    def _unique_array(self, values: list[Any], lo: int, hi: int | None) -> str:
        """Arrays of distinct items from ``values`` (at most :data:`UNIQUE_MAX_VALUES`),
        ``lo`` to ``hi`` of them: states are the sets of values written so far."""
        syms = [self.const(v) for v in values]
        comma = self.punct(",")
        k = len(values)
        names = [self.fresh("uq") for _ in range(1 << k)]
        for mask in range(1 << k):
            count = mask.bit_count()
            if count >= lo and (hi is None or count <= hi):
                self.add(names[mask])
            if hi is not None and count >= hi:
                continue
            for j in range(k):
                if not mask >> j & 1:
                    sep = [comma] if mask else []
                    self.add(names[mask], *sep, syms[j], names[mask | 1 << j])
        return self._seq("arr", self.punct("["), names[0], self.punct("]"))

    # -- objects ------------------------------------------------------------------------
    def object(self, s: dict[str, Any], ptr: str, resolver: Any) -> str | None:
        props: dict[str, Any] = dict(s.get("properties", {}))
        required = list(dict.fromkeys(s.get("required", [])))
        pats: dict[str, Any] = dict(s.get("patternProperties", {}))
        if "additionalProperties" in s:
            addl = s["additionalProperties"]
        elif self.opt.additional_properties is False:
            addl = False
        else:
            addl = True
        for kw in ("properties", "required", "additionalProperties", "patternProperties"):
            if kw in s:
                self.note(pointer_join(ptr, kw), kw, EXACT)
        if len(pats) > 1:
            self._needs_check(pointer_join(ptr, "patternProperties"), "patternProperties",
                              "names matching several patterns")  # fmt: skip
        names_filter: ByteDFA | None = None
        if "propertyNames" in s:
            names_filter = self.key_filter(
                s["propertyNames"], pointer_join(ptr, "propertyNames"), resolver
            )

        pat_dfas: list[tuple[str, ByteDFA, Any]] = []
        for p, sub in pats.items():
            p_ptr = pointer_join(ptr, "patternProperties", p)
            node = self.pattern_node(p, p_ptr, "patternProperties")
            if node is None:
                # Which names it matches is unknown: other names take any value, and the
                # final check enforces the pattern's schema.
                addl = True
                continue
            pat_dfas.append((p, _key_dfa(node, self.opt.max_states, p_ptr), sub))

        # the properties the grammar names, in order: listed ones, then required extras
        entries: list[tuple[str, Any, str, Any]] = []
        for k, sub in props.items():
            entries.append((k, sub, pointer_join(ptr, "properties", k), resolver))
        for k in required:
            if k not in props:
                matching = [sub for p, d, sub in pat_dfas if d.matches(_canonical(k).encode())]
                sub = matching[0] if matching else addl
                entries.append((k, sub, pointer_join(ptr, "required"), resolver))
        # property schemas also get the patternProperties they match
        parts: list[tuple[str, str | None, bool]] = []  # (name, value symbol, required)
        for k, sub, k_ptr, res in entries:
            enc = _canonical(k).encode()
            if names_filter is not None and not names_filter.matches(enc):
                sym = None
            else:
                for _p, d, psub in pat_dfas:
                    if d.matches(enc) and k in props:
                        m = self.merge(sub, psub, k_ptr, res)
                        sub = m if m is not None else sub
                sym = self.value(sub, k_ptr, res)
            if sym is None and k in required:
                return None
            parts.append((k, sym, k in required))

        # additional properties: names not listed, by pattern or by additionalProperties
        listed = [_canonical(k).encode() for k, _, _, _ in entries]
        extra: list[tuple[str, str]] = []  # (key terminal, value symbol)
        if addl is False and not pat_dfas:
            base_keys = ByteDFA.empty()  # no other names allowed
        else:
            base_keys = self.other_keys(listed, names_filter)
        others = base_keys
        for p, d, psub in pat_dfas:
            p_ptr = pointer_join(ptr, "patternProperties", p)
            kd = intersect(base_keys, d, max_states=self.opt.max_states)
            others = difference(others, d, max_states=self.opt.max_states)
            sym = self.value(psub, p_ptr, resolver)
            if sym is not None and kd.n_states:
                kname = self.term(self.fresh("key"), _constant(kd), f"keys /{p}/", "KEY")
                if kname is not None:
                    extra.append((kname, sym))
        if addl is not False:
            a_ptr = pointer_join(ptr, "additionalProperties")
            sym = self.value(addl, a_ptr, resolver)
            if sym is not None and others.n_states:
                kname = self.term(self.fresh("key"), _constant(others), "other keys", "KEY")
                if kname is not None:
                    extra.append((kname, sym))

        colon = self.punct(":")
        pair_syms: list[tuple[str | None, bool]] = []
        for k, sym, req in parts:
            if sym is None:
                pair_syms.append((None, False))
            else:
                pair_syms.append((self._seq("pair", self.lit(_canonical(k)), colon, sym), req))
        extra_pair: str | None = None
        if extra:
            extra_pair = self.fresh("xpair")
            for kname, sym in extra:
                self.add(extra_pair, kname, colon, sym)
        named = [(p, r) for p, r in pair_syms if p is not None]
        counts = self._property_counts(s, ptr, named, extra_pair, len(pair_syms))
        if counts is None:
            return None
        room = MAX_COUNT_STATES // ((len(pair_syms) + 2) * (counts[2] + 1))
        deps = self._dependencies(s, ptr, [k for k, _, _ in parts], room)
        if self.opt.property_order == "any":
            if len(named) <= self.opt.any_order_max_properties:
                return self._any_order(pair_syms, extra_pair, counts, deps)
            self.note(pointer_join(ptr, "properties"), "properties", EXACT,
                      f"written in schema order: more than "
                      f"{self.opt.any_order_max_properties} properties")  # fmt: skip
        return self._schema_order(pair_syms, extra_pair, counts, deps)

    def _schema_order(
        self,
        pair_syms: list[tuple[str | None, bool]],
        extra_pair: str | None,
        counts: tuple[int, int | None, int],
        deps: list[tuple[int, list[int]]],
    ) -> str:
        """An object whose named pairs come in schema order (``None``: that property cannot
        occur), then additional pairs. States ``(i, c, present)``: the named properties
        ``i..`` are still to come, ``c`` pairs were written (see :meth:`_property_counts`),
        ``present`` is the set of properties written among those ``deps`` mention (each
        ``(trigger, dependents)``: if the trigger is present, so are its dependents)."""
        least, most, top = counts
        comma = self.punct(",")
        n = len(pair_syms)
        bit: dict[int, int] = {}  # property index -> bit in `present`
        for t, ds in deps:
            for i in (t, *ds):
                bit.setdefault(i, len(bit))
        need = [(1 << bit[t], sum(1 << bit[d] for d in ds)) for t, ds in deps]

        def complete(present: int) -> bool:
            return all(not present & t or present & d == d for t, d in need)

        names: dict[tuple[int, int, int], str] = {}

        def state(key: tuple[int, int, int]) -> str:
            if key not in names:
                names[key] = self.fresh("o")
                todo.append(key)
            return names[key]

        todo: list[tuple[int, int, int]] = []
        start = state((0, 0, 0))
        while todo:
            i, c, present = key = todo.pop()
            lhs = names[key]
            sep = [comma] if c else []
            room = most is None or c < most
            if i < n:
                pair, req = pair_syms[i]
                if pair is not None and room:
                    now = present | (1 << bit[i] if i in bit else 0)
                    self.add(lhs, *sep, pair, state((i + 1, min(c + 1, top), now)))
                if not req:
                    self.add(lhs, state((i + 1, c, present)))
                continue
            if c >= least and complete(present):
                self.add(lhs)
            if extra_pair is not None and room:  # additional pairs, any number
                self.add(lhs, *sep, extra_pair, state((n, min(c + 1, top), present)))
        return self._seq("obj", self.punct("{"), start, self.punct("}"))

    def _dependencies(
        self, s: dict[str, Any], ptr: str, names: list[str], room: int
    ) -> list[tuple[int, list[int]]]:
        """``dependentRequired`` (and the array form of ``dependencies``) as
        ``(trigger, dependents)`` pairs of indices into ``names`` (the properties the
        grammar writes by name), when every name involved is one of them and there are
        at most :data:`MAX_DEPENDENT_NAMES`, and tracking which were written multiplies
        the object's states by at most ``room``; otherwise the keyword is the final
        check's and nothing is returned for it."""
        out: list[tuple[int, list[int]]] = []
        for kw in ("dependentRequired", "dependencies"):
            if kw not in s or not isinstance(s[kw], dict):
                continue
            kw_ptr = pointer_join(ptr, kw)
            pairs = [(t, v) for t, v in s[kw].items() if isinstance(v, list)]
            if len(pairs) != len(s[kw]):  # schema-valued dependencies
                self._needs_check(kw_ptr, kw, "schema dependencies")
                continue
            involved = {t for t, _ in pairs} | {d for _, v in pairs for d in v}
            if (
                not involved <= set(names)
                or len(involved) > MAX_DEPENDENT_NAMES
                or 1 << len(involved) > room
            ):
                self._needs_check(kw_ptr, kw, "names not declared, or too many")
                continue
            self.note(kw_ptr, kw, EXACT)
            out += [(names.index(t), [names.index(d) for d in v]) for t, v in pairs]
        return out

    def _property_counts(
        self,
        s: dict[str, Any],
        ptr: str,
        named: list[tuple[str, bool]],
        extra_pair: str | None,
        n_props: int,
    ) -> tuple[int, int | None, int] | None:
        """``(least, most, top)``: the grammar counts the pairs it writes, from 0 to ``top``
        (counts above ``top`` are one state when ``most`` is ``None``; ``top >= 1`` unless
        nothing may be written, so a count above 0 also tells a comma is due), and ends an
        object only with ``least`` to ``most`` pairs. ``None``: no object satisfies
        ``minProperties``/``maxProperties`` with these properties.

        The grammar counts pairs, not distinct names: with additional properties a name
        could repeat, which the final check refuses, so ``minProperties`` stays noted as
        the final check's there; ``maxProperties`` is exact (fewer names than pairs).
        """
        least = int(s.get("minProperties", 0))
        most = None if s.get("maxProperties") is None else int(s["maxProperties"])
        required = sum(1 for _, req in named if req)
        possible = None if extra_pair is not None else len(named)
        min_ptr, max_ptr = pointer_join(ptr, "minProperties"), pointer_join(ptr, "maxProperties")
        if (most is not None and (required > most or least > most)) or (
            possible is not None and least > possible
        ):
            for kw, kw_ptr in (("minProperties", min_ptr), ("maxProperties", max_ptr)):
                if kw in s:
                    self.note(kw_ptr, kw, EXACT, "no object satisfies it")
            return None
        top = most if most is not None else max(least, 1)
        if (n_props + 2) * (top + 1) > MAX_COUNT_STATES:
            for kw, kw_ptr in (("minProperties", min_ptr), ("maxProperties", max_ptr)):
                if kw in s:
                    self._needs_check(kw_ptr, kw, "too many property counts to track")
            return 0, None, 1
        if "maxProperties" in s:
            self.note(max_ptr, "maxProperties", EXACT)
        if "minProperties" in s:
            if extra_pair is None or least <= required:
                self.note(min_ptr, "minProperties", EXACT)
            else:
                self._needs_check(
                    min_ptr, "minProperties", "pairs are counted; a repeated name fails at the end"
                )
        return least, most, top

    def _any_order(
        self,
        pair_syms: list[tuple[str | None, bool]],
        extra_pair: str | None,
        counts: tuple[int, int | None, int],
        deps: list[tuple[int, list[int]]],
    ) -> str:
        """An object whose named properties (``None``: one that cannot occur) come in any
        order, each at most once, the required ones all present, additional pairs
        anywhere, ``least`` to ``most`` pairs in all, and the dependents of each trigger in
        ``deps`` present with it: states are the sets of properties written so far (hence
        the size limit) and the count of pairs (as in :meth:`_property_counts`)."""
        least, most, top = counts
        comma = self.punct(",")
        required = 0
        for i, (_, req) in enumerate(pair_syms):
            if req:
                required |= 1 << i
        names: dict[tuple[int, int], str] = {}
        todo = [(0, 0)]
        names[(0, 0)] = self.fresh("u")
        while todo:
            mask, c = todo.pop()
            lhs = names[(mask, c)]
            sep = [comma] if c else []
            if (
                mask & required == required
                and c >= least
                and all(not mask >> t & 1 or all(mask >> d & 1 for d in ds) for t, ds in deps)
            ):
                self.add(lhs)
            if most is not None and c >= most:
                continue
            moves: list[tuple[str, int]] = [
                (pair, mask | 1 << i)
                for i, (pair, _) in enumerate(pair_syms)
                if pair is not None and not mask >> i & 1
            ]
            if extra_pair is not None:
                moves.append((extra_pair, mask))
            for pair, nxt in moves:
                key = (nxt, min(c + 1, top))
                if key not in names:
                    names[key] = self.fresh("u")
                    todo.append(key)
                self.add(lhs, *sep, pair, names[key])
        return self._seq("obj", self.punct("{"), names[(0, 0)], self.punct("}"))

    def other_keys(self, listed: list[bytes], names_filter: ByteDFA | None) -> ByteDFA:
        """Encoded keys other than the ``listed`` ones (and allowed by ``names_filter``);
        shared by every object with the same listed names."""
        if self._universe_keys is None:
            self._universe_keys = _key_dfa(
                ast.Repeat(ast.Chars(CharSet.universe()), 0, None), self.opt.max_states, ""
            )
        cache_key = (tuple(sorted(listed)), id(names_filter))
        hit = self._other_keys.get(cache_key)
        if hit is not None and names_filter is None:
            return hit
        keys = self._universe_keys
        if names_filter is not None:
            keys = intersect(keys, names_filter, max_states=self.opt.max_states)
        if listed:
            keys = difference(
                keys, union_of_literals(listed), max_states=self.opt.max_states, minimal=False
            )
        if names_filter is None:
            self._other_keys[cache_key] = keys
        return keys

    def key_filter(self, schema: Any, ptr: str, resolver: Any) -> ByteDFA | None:
        """The encoded keys ``propertyNames`` allows, or ``None`` (final check) if the
        schema is more than a string schema."""
        schema, _, _ = self.deref(schema, ptr, resolver)
        if schema is True:
            return None
        if schema is False:
            return ByteDFA.empty()
        allowed = {"type", "pattern", "minLength", "maxLength", "format", "enum", "const"}
        if not isinstance(schema, dict) or any(
            k not in allowed and k not in ANNOTATIONS for k in schema
        ):
            self._needs_check(ptr, "propertyNames", "only string keywords are compiled")
            return None
        if "enum" in schema or "const" in schema:
            vals = list(schema.get("enum", [])) + ([schema["const"]] if "const" in schema else [])
            self.note(ptr, "propertyNames", EXACT)
            return union_of_literals([_canonical(v).encode() for v in vals if isinstance(v, str)])
        sym_schema = dict(schema)
        sym_schema.pop("type", None)
        lo = int(sym_schema.get("minLength", 0))
        hi = sym_schema.get("maxLength")
        nodes: list[tuple[ast.Node, str]] = []
        if "pattern" in sym_schema:
            node = self.pattern_node(sym_schema["pattern"], ptr, "propertyNames")
            if node is None:
                return None
            nodes.append((node, ptr))
        if "format" in sym_schema:
            from ..regex.python_syntax import parse_python_regex
            from .formats import format_regex

            rx = format_regex(sym_schema["format"])
            if rx is not None:
                nodes.append((parse_python_regex(rx, where=ptr), ptr))
        if not nodes:
            nodes = [(ast.Repeat(ast.Chars(CharSet.universe()), 0, None), ptr)]
        dfa, enforced = constrained_string(
            lo=lo, hi=None if hi is None else int(hi), nodes=nodes, max_states=self.opt.max_states
        )
        if enforced:
            self.note(ptr, "propertyNames", EXACT)
        else:
            self._needs_check(ptr, "propertyNames", "length bounds combined with pattern/format")
        return dfa


# -- helpers ------------------------------------------------------------------------------


class _NoMerge:
    pass


_NO_MERGE: Any = _NoMerge()


def _merge_keyword(k: str, a: Any, b: Any) -> Any:
    """The value of keyword ``k`` meaning both ``a`` and ``b``, or ``_NO_MERGE``."""
    if _canonical(a) == _canonical(b):
        return a
    if k == "type":
        ta = {a} if isinstance(a, str) else set(a)
        tb = {b} if isinstance(b, str) else set(b)
        both = (ta & tb) | ({"integer"} if ("integer" in ta and "number" in tb) or
                            ("number" in ta and "integer" in tb) else set())  # fmt: skip
        return sorted(both)
    if k == "required":
        return list(dict.fromkeys([*a, *b]))
    if k in ("minimum", "minLength", "minItems", "minProperties", "exclusiveMinimum"):
        if isinstance(a, bool) or isinstance(b, bool):
            return _NO_MERGE
        return max(a, b)
    if k in ("maximum", "maxLength", "maxItems", "maxProperties", "exclusiveMaximum"):
        if isinstance(a, bool) or isinstance(b, bool):
            return _NO_MERGE
        return min(a, b)
    if k == "enum":
        return [x for x in a if _json_equal_in(x, b)]
    if k == "properties":
        out = dict(a)
        for name, sub in b.items():
            out[name] = {"allOf": [out[name], sub]} if name in out else sub
        return out
    if k in ("items", "additionalProperties", "additionalItems", "propertyNames") and (
        isinstance(a, (dict, bool)) and isinstance(b, (dict, bool))
    ):
        if a is True:
            return b
        if b is True:
            return a
        if a is False or b is False:
            return False
        return {"allOf": [a, b]}
    if k == "allOf":
        return [*a, *b]
    return _NO_MERGE


def _json_equal_in(x: Any, values: list[Any]) -> bool:
    cx = _canonical(_normal_number(x))
    return any(cx == _canonical(_normal_number(v)) for v in values)


def _normal_number(x: Any) -> Any:
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, list):
        return [_normal_number(v) for v in x]
    if isinstance(x, dict):
        return {k: _normal_number(v) for k, v in sorted(x.items())}
    return x


def _bounds(s: dict[str, Any], draft: str) -> tuple[Decimal | None, bool, Decimal | None, bool]:
    def dec(v: Any) -> Decimal:
        return Decimal(str(v)) if not isinstance(v, int) or isinstance(v, bool) else Decimal(v)

    lo = dec(s["minimum"]) if "minimum" in s else None
    hi = dec(s["maximum"]) if "maximum" in s else None
    lo_x = hi_x = False
    if draft == "4":
        lo_x = bool(s.get("exclusiveMinimum", False)) and lo is not None
        hi_x = bool(s.get("exclusiveMaximum", False)) and hi is not None
    else:
        if "exclusiveMinimum" in s:
            x = dec(s["exclusiveMinimum"])
            if lo is None or x >= lo:
                lo, lo_x = x, True
        if "exclusiveMaximum" in s:
            x = dec(s["exclusiveMaximum"])
            if hi is None or x <= hi:
                hi, hi_x = x, True
    return lo, lo_x, hi, hi_x


def _int_lo(lo: Decimal, exclusive: bool) -> int:
    c = math.ceil(lo)
    return c + 1 if exclusive and c == lo else c


def _int_hi(hi: Decimal, exclusive: bool) -> int:
    f = math.floor(hi)
    return f - 1 if exclusive and f == hi else f


_NUMBER_RX = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"


def _number_dfa() -> ByteDFA:
    return python_regex_dfa(_NUMBER_RX)


def _key_dfa(node: ast.Node, max_states: int, where: str) -> ByteDFA:
    """Encoded object keys (quotes included) whose decoded text matches ``node``; only the
    escapes JSON requires are offered, so every name has few spellings (the string-body
    construction of ``strings.py``, cached per tree)."""
    from ..regex.dfa import quoted

    return quoted(body_of_node(node, where=where, max_states=max_states), minimal=False)


def _constant(dfa: ByteDFA) -> Callable[[], ByteDFA]:
    return lambda: dfa


def _drop_undefined(rules: list[Rule], terminals: set[str]) -> list[Rule]:
    """Drop rules that use a nonterminal with no rules (a schema no value satisfies, reached
    through a reference that was named before it was found empty)."""
    while True:
        defined = {r.lhs for r in rules}
        kept = [r for r in rules if all(x in defined or x in terminals for x in r.rhs)]
        if len(kept) == len(rules):
            return kept
        rules = kept


def translate(loaded: LoadedSchema, options: Options) -> Translation:
    """Build the grammar of a loaded schema (see the module docs)."""
    b = _Builder(loaded, options)
    try:
        top = b.value(loaded.schema, "", loaded.resolver())
    except RecursionError:
        raise CompileBudgetError(
            "the schema nests too deeply to translate (or expands without end through "
            "references combined with other keywords)"
        ) from None
    if top is None:
        raise EmptyLanguageError("no JSON value satisfies the schema")
    b.add("start", top)
    rules = _drop_undefined(b.rules, set(b.terms))
    findings = sorted(b.findings.values(), key=lambda f: (f.pointer, f.keyword))
    check = None
    check_id = ""
    if options.final_check:
        check = FinalCheck(loaded)
        check_id = f"{FINAL_CHECK_VERSION}:" + _canonical(loaded.schema)
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
