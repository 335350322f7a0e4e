"""Combinators: ``$ref`` (and ``$dynamicRef``/``$recursiveRef``) beside other keywords,
``allOf``, ``anyOf`` and ``oneOf``.

A reference with siblings is the ``allOf`` of its target and the rest; ``allOf`` is
merged into one schema (:mod:`..algebra`); siblings of ``anyOf``/``oneOf`` are merged
into each branch, and the branches become alternatives. Where a merge is impossible, the
grammar keeps a superset and the final check enforces the rest. (``not``, ``if`` and
``oneOf`` exclusivity are rewritten where exact by ``rewrite.py``.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..keywords import ANNOTATIONS
from ..load import pointer_join

if TYPE_CHECKING:
    from ..translate import Translator

__all__ = ["MERGE_BUDGET", "emit_all_of", "emit_alternatives", "emit_reference"]

# After this many merges (allOf, and siblings distributed into anyOf/oneOf branches), a
# combinator with siblings keeps the siblings only and leaves the branches to the final check.
MERGE_BUDGET = 2000


def emit_reference(
    b: Translator, schema: dict[str, Any], ptr: str, resolver: Any, ref_kw: str
) -> str | None:
    """``schema`` (at ``ptr``), whose keyword ``ref_kw`` is a reference, as the ``allOf``
    of the reference's target and the other keywords."""
    target, t_resolver, t_ptr = b.resolve(schema[ref_kw], ptr, resolver, ref_kw)
    rest = {k: v for k, v in schema.items() if k != ref_kw}
    if not any(k not in ANNOTATIONS for k in rest):
        return b.value(target, t_ptr, t_resolver)
    merged = b.merge(rest, target, ptr, t_resolver)
    if merged is None:
        return b.value(rest, ptr, resolver)  # the final check enforces the ref
    return b.value(merged, ptr, t_resolver)


def emit_all_of(b: Translator, schema: dict[str, Any], ptr: str, resolver: Any) -> str | None:
    """``schema`` (at ``ptr``) with its ``allOf`` branches merged into the other keywords
    (branches that do not merge are the final check's)."""
    base = {k: v for k, v in schema.items() if k != "allOf"}
    merged_all: Any = base  # False once a branch admits no value
    for i, sub in enumerate(schema["allOf"]):
        sub_ptr = pointer_join(ptr, "allOf", i)
        sub, sub_resolver, _ = b.deref(sub, sub_ptr, resolver)
        if merged_all is False:
            break  # no value: the other branches cannot add one
        m = b.merge(merged_all, sub, sub_ptr, sub_resolver)
        if m is None:
            b.findings.needs_check(sub_ptr, "allOf", "branch not merged into the grammar")
        else:
            merged_all = m
    b.findings.exact(pointer_join(ptr, "allOf"), "allOf")
    return b.value(merged_all, ptr, resolver)


def emit_alternatives(
    b: Translator, schema: dict[str, Any], ptr: str, resolver: Any, comb: str
) -> str | None:
    """``schema`` (at ``ptr``) as the alternatives of its ``comb`` (``anyOf``/``oneOf``)
    branches, each merged with the other keywords; ``oneOf`` exclusivity is the final
    check's. Branches of a union made by a rewrite (:meth:`Translator.union`) are
    reported where the user wrote them."""
    base = {k: v for k, v in schema.items() if k != comb}
    if b.merger.count > MERGE_BUDGET and any(k not in ANNOTATIONS for k in base):
        # Distributing siblings into every branch has multiplied the schema
        # too much: keep the siblings only; the final check enforces the branches.
        b.findings.needs_check(pointer_join(ptr, comb), comb, "schema too large to expand")
        return b.value(base, ptr, resolver)
    name = b.fresh(comb)
    any_branch = False
    written = b.branch_pointers.get(id(schema[comb]))  # from a rewrite
    for i, sub in enumerate(schema[comb]):
        sub_ptr = written[i] if written else pointer_join(ptr, comb, i)
        sub, sub_resolver, _ = b.deref(sub, sub_ptr, resolver)
        m = b.merge(base, sub, sub_ptr, sub_resolver)
        if m is None:
            b.findings.needs_check(sub_ptr, comb, "branch not merged with its siblings")
            m = base
        sym = b.value(m, sub_ptr, sub_resolver)
        if sym is not None:
            b.add(name, sym)
            any_branch = True
    if comb == "oneOf" and len(schema[comb]) > 1:
        b.findings.needs_check(pointer_join(ptr, comb), comb, "exclusivity")
    elif not written:
        b.findings.exact(pointer_join(ptr, comb), comb)
    return name if any_branch else None
