"""Entity sets: ``"x-corral-entities": "<set>"`` on a string schema makes its value one of
the names of the :class:`~corral.grammar.entities.EntitySet` given at compile time as
``entities={"<set>": ...}``.

It combines with ``type: "string"``, annotations and the string keywords (``minLength``,
``maxLength``, ``pattern``, ``format``, ``enum``, ``const``), which restrict the set's
automaton exactly (``emit/restrict.py``); beside any other keyword it is refused, naming
that keyword and its pointer. Standard validators ignore the keyword; corral's final
check enforces it too, so that an occurrence the grammar does not meet as a string schema
of its own (an ``allOf`` merge, say) is still checked (and refused without a final
check).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...entities import EntitySet
from ..load import SchemaError, pointer_join
from .restrict import BESIDE, restricted_terminal
from .span import string_only, subschemas_with

if TYPE_CHECKING:
    from ..translate import Translator

__all__ = ["ENTITY_KEYWORD", "emit_entity", "find_entities"]

ENTITY_KEYWORD = "x-corral-entities"


def find_entities(schema: Any, sets: Mapping[str, EntitySet] | None) -> dict[str, str]:
    """Every entity constraint in ``schema``: JSON pointer of its subschema -> set name.

    Raises:
        SchemaError: a value that is not a string, or names no set of ``sets``.
    """
    found: dict[str, str] = {}
    for ptr, node in subschemas_with(schema, ENTITY_KEYWORD):
        name = node[ENTITY_KEYWORD]
        where = pointer_join(ptr, ENTITY_KEYWORD)
        if type(name) is not str:
            raise SchemaError(
                f"{ENTITY_KEYWORD} must name an entity set (a string), not {name!r} (at {where})",
                where,
            )
        if not sets or name not in sets:
            known = f" (given: {sorted(sets)})" if sets else ""
            raise SchemaError(
                f"{ENTITY_KEYWORD} (at {where}) names the entity set {name!r}, which was not "
                f"given: pass entities={{{name!r}: corral.EntitySet(...)}}{known}",
                where,
            )
        found[ptr] = name
    return found


def emit_entity(b: Translator, s: dict[str, Any], ptr: str) -> str | None:
    """The terminal of the names of the set that subschema ``s`` (at ``ptr``) names that
    the string keywords beside it allow (``None``: none).

    Raises:
        UnsupportedFeatureError: another assertion beside the keyword, or a type other
            than ``string``.
    """
    name = s[ENTITY_KEYWORD]
    advice = "filter the entity set instead"
    string_only(b, s, ptr, ENTITY_KEYWORD, advice, lambda kw: kw in BESIDE)
    assert b.opt.entities is not None  # find_entities refused the schema otherwise
    es = b.opt.entities[name]
    term = restricted_terminal(
        b,
        s,
        ptr,
        ENTITY_KEYWORD,
        f"entities:{es.digest}",
        lambda: es.dfa("json"),
        es.longest,
        f"name of the entity set {name!r}",
        "ENTITY",
    )
    b.findings.exact(pointer_join(ptr, ENTITY_KEYWORD), ENTITY_KEYWORD)
    b.entity_pointers.add(ptr)
    return term
