"""String keywords beside a span or an entity set (``x-corral-span``,
``x-corral-entities``): the sparse automaton of the spans or names is restricted to them,
so the grammar enforces them exactly and no value it allows can fail them at the end.

* ``minLength``/``maxLength``, ``pattern`` and ``format``: the product of the sparse
  automaton, the pattern and format automaton and a character counter
  (:func:`~corral.grammar.json_schema.strings.restricted_strings`), with no cap on the
  bounds. A product beyond its budget is refused (:class:`CompileBudgetError` at the
  keyword's pointer), never left to the final check, where it could dead-end.
* ``enum``/``const``: the listed strings that the spans or names (and the other
  keywords) allow, as one terminal.
* A pattern that is not regular, and a ``format`` a grammar cannot express, are refused
  (:class:`UnsupportedFeatureError`, with the keyword's pointer).

A schema whose keywords leave no value is an empty subschema (the whole schema's
:class:`~corral.errors.EmptyLanguageError` when nothing else is left), with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ....errors import CompileBudgetError, Location
from ...regex.sparse import SparseDFA
from ...spans import json_string_bytes
from .. import strings
from ..algebra import canonical, json_equal_in
from ..load import pointer_join
from ..strings import matching_strings, restricted_strings
from .string import assertion_nodes

if TYPE_CHECKING:
    from ..translate import Translator

__all__ = ["BESIDE", "restricted_terminal"]

BESIDE = frozenset({"minLength", "maxLength", "pattern", "format", "enum", "const"})
"""The keywords a span or an entity set combines with (besides ``type: "string"`` and
annotations)."""


def restricted_terminal(
    b: Translator,
    s: dict[str, Any],
    ptr: str,
    keyword: str,
    base_key: str,
    base: Callable[[], SparseDFA],
    longest: int,
    what: str,
    hint: str,
) -> str | None:
    """The terminal of the strings of ``base()`` (the automaton of the spans or names that
    ``keyword`` at ``ptr`` allows, built once per ``base_key``; none longer than
    ``longest`` characters) that the :data:`BESIDE` keywords of ``s`` allow too, or
    ``None`` when there is none (the reason noted with :meth:`Translator.empty`).

    Raises:
        UnsupportedFeatureError: a non-regular pattern or format beside ``keyword``.
        CompileBudgetError: the restricted automaton would exceed its budget.
    """
    lo = int(s.get("minLength", 0))
    hi = None if s.get("maxLength") is None else int(s["maxLength"])
    for kw in ("minLength", "maxLength"):
        if kw in s:
            b.findings.exact(pointer_join(ptr, kw), kw, f"the {what} automaton is cut to it")
    if hi is not None and lo > hi:
        b.empty(pointer_join(ptr, "minLength"), f"minLength {lo} > maxLength {hi}")
        return None
    if lo > longest:
        b.empty(pointer_join(ptr, "minLength"), f"minLength {lo}: no {what} is that long")
        return None
    if hi is not None and hi >= longest:
        hi = None  # no span or name is longer: nothing to count
    if lo <= 1:
        lo = 0  # no span or name is empty
    nodes = assertion_nodes(b, s, ptr, beside=keyword)
    fmt = s.get("format")

    def whole() -> SparseDFA:
        d = b.sparse_bases.get(base_key)
        if d is None:
            d = b.sparse_bases[base_key] = base()
        return d

    def make() -> SparseDFA:
        if lo == 0 and hi is None and not nodes:
            return whole()
        budget = strings.RESTRICTED_MAX_STATES
        out = restricted_strings(
            whole(),
            lo=lo,
            hi=hi,
            nodes=nodes,
            max_states=b.opt.max_states,
            max_restricted_states=budget,
        )
        if out is None:
            if hi is not None:
                kw = "maxLength"
            elif nodes:
                kw = nodes[0][1].rsplit("/", 1)[-1]  # pattern or format
            else:
                kw = "minLength"
            where = pointer_join(ptr, kw)
            err = CompileBudgetError(
                f"{kw} beside {keyword} (at {where}): the automaton of the {what}s it allows "
                f"needs more than {budget:,} states; shorten the source or "
                f"leave {kw} out"
            )
            err.location = Location(pointer=where)
            raise err
        return out

    if "enum" in s or "const" in s:
        dense = matching_strings(nodes, max_states=b.opt.max_states)
        allowed = whole()

        def keep(v: str) -> bool:
            if not lo <= len(v) <= (len(v) if hi is None else hi):
                return False
            spelled = json_string_bytes(v)
            return allowed.matches(spelled) and (dense is None or dense.matches(spelled))

        return _listed(b, s, ptr, keyword, keep, what)
    key = f"{base_key}|{lo}:{hi}|" + canonical([s.get("pattern"), fmt])
    name = b.term(key, make, f"{what} at {ptr or '/'}", hint)
    if name is None:
        b.empty(pointer_join(ptr, keyword), f"no {what} satisfies the keywords beside it")
    return name


def _listed(
    b: Translator,
    s: dict[str, Any],
    ptr: str,
    keyword: str,
    keep: Callable[[str], bool],
    what: str,
) -> str | None:
    """The ``enum``/``const`` strings of ``s`` for which ``keep`` holds, as one terminal."""
    values: list[Any] = []
    if "const" in s:
        values = [s["const"]]
        b.findings.exact(pointer_join(ptr, "const"), "const", f"filtered by {keyword}")
    if "enum" in s:
        enum = list(s["enum"])
        values = [v for v in enum if json_equal_in(v, values)] if "const" in s else enum
        b.findings.exact(pointer_join(ptr, "enum"), "enum", f"filtered by {keyword}")
    kept = sorted({canonical(v) for v in values if isinstance(v, str) and keep(v)})
    if not kept:
        kw = "enum" if "enum" in s else "const"
        b.empty(pointer_join(ptr, kw), f"no listed value is a {what} the keywords allow")
        return None
    return b.words(kept) if len(kept) > 1 else b.lit(kept[0])
