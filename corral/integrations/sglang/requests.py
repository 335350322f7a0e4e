"""What an SGLang request asks for, as a corral spec. No SGLang import.

SGLang hands a grammar backend one key per constrained request, ``(key_type,
key_string)``, from the request's sampling parameters (or the OpenAI layer's
``response_format`` and tool-call constraints):

* ``"json"``: JSON Schema text (``"$$ANY$$"``: any JSON value);
* ``"regex"``: a regular expression, matched in full;
* ``"structural_tag"``: XGrammar's structural-tag JSON, in the current form
  (``{"type": "structural_tag", "format": {...}}``) or the legacy one
  (``{"type": "structural_tag", "structures": [{"begin", "schema", "end"}], "triggers":
  [...], "at_least_one": ...}``, which SGLang's own tool-call code still emits);
* ``"ebnf"`` and ``"full_assistant_ebnf"``: GBNF text (``root ::= ...``).

:func:`read_key` turns a key into a :class:`Request` (the front end and the spec to give
it), refusing what corral cannot enforce with corral's errors, each naming what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...errors import UnsupportedFeatureError
from ...grammar.structural.read import StructuralTagError

__all__ = ["ANY_JSON", "Request", "from_legacy_structural_tag", "read_key"]

ANY_JSON = "$$ANY$$"
"""SGLang's JSON key for "any JSON value" (XGrammar's builtin JSON grammar)."""


@dataclass(frozen=True)
class Request:
    """One key, read.

    Attributes:
        kind: ``"json"``, ``"regex"`` or ``"structural_tag"``.
        spec: the JSON Schema (JSON text, or ``True`` for :data:`ANY_JSON`), the regex,
            or the structural tag in its current form (a ``dict``).
    """

    kind: str
    spec: Any


def read_key(key_type: str, key_string: str) -> Request:
    """The request of one SGLang grammar key.

    Raises:
        UnsupportedFeatureError: a GBNF key (``ebnf``, ``full_assistant_ebnf``): corral
            does not read GBNF; an unknown key type.
        StructuralTagError: a structural tag that is not JSON, or a legacy one of the
            wrong shape (naming its JSON pointer).
    """
    if key_type == "json":
        return Request("json", True if key_string == ANY_JSON else key_string)
    if key_type == "regex":
        return Request("regex", key_string)
    if key_type == "structural_tag":
        try:
            data = json.loads(key_string)
        except (ValueError, RecursionError) as e:
            raise StructuralTagError(f"the structural tag is not JSON: {e}") from None
        if isinstance(data, dict) and "structures" in data:
            data = from_legacy_structural_tag(data)
        return Request("structural_tag", data)
    if key_type in ("ebnf", "full_assistant_ebnf"):
        raise UnsupportedFeatureError(
            f"a GBNF/EBNF grammar (SGLang's {key_type!r} field)",
            detail="corral's SGLang backend reads Lark grammars, sent as a structural tag: "
            '{"type": "structural_tag", "format": {"type": "grammar", "grammar": LARK_TEXT}}',
        )
    raise UnsupportedFeatureError(f"SGLang grammar key type {key_type!r}")


_LEGACY_FIELDS = {"type", "structures", "triggers", "at_least_one"}


def from_legacy_structural_tag(data: dict[str, Any]) -> dict[str, Any]:
    """The current form of a legacy structural tag, as XGrammar's
    ``StructuralTag.from_legacy_structural_tag`` reads it: free text in which each trigger
    starts one of the structures whose ``begin`` it prefixes, each structure ``begin``,
    then a JSON value of its ``schema`` (a missing or ``null`` schema: any JSON value),
    then ``end``; ``at_least_one`` (default false) as the triggered tags' own.

    Raises:
        StructuralTagError: a field of the wrong type or an unknown one, by its pointer.
    """
    unknown = sorted(set(data) - _LEGACY_FIELDS)
    if unknown:
        raise StructuralTagError(
            f"a legacy structural tag has unknown field(s) {unknown}; expected "
            f"{sorted(_LEGACY_FIELDS)}",
            pointer=f"/{unknown[0]}",
        )
    structures = data.get("structures")
    if not isinstance(structures, list) or not structures:
        raise StructuralTagError(
            "a legacy structural tag needs a non-empty 'structures' array", pointer="/structures"
        )
    triggers = data.get("triggers")
    if not isinstance(triggers, list) or not all(isinstance(t, str) and t for t in triggers):
        raise StructuralTagError(
            "a legacy structural tag needs 'triggers', an array of non-empty strings",
            pointer="/triggers",
        )
    at_least_one = data.get("at_least_one", False)
    if not isinstance(at_least_one, bool):
        raise StructuralTagError("'at_least_one' must be a boolean", pointer="/at_least_one")
    tags = []
    for i, s in enumerate(structures):
        where = f"/structures/{i}"
        if not isinstance(s, dict):
            raise StructuralTagError("a structure must be an object", pointer=where)
        extra = sorted(set(s) - {"begin", "schema", "end"})
        if extra:
            raise StructuralTagError(
                f"a structure has unknown field(s) {extra}", pointer=f"{where}/{extra[0]}"
            )
        for field in ("begin", "end"):
            if not isinstance(s.get(field), str):
                raise StructuralTagError(
                    f"a structure's {field!r} must be a string", pointer=f"{where}/{field}"
                )
        schema = s.get("schema")
        tags.append(
            {
                "type": "tag",
                "begin": s["begin"],
                "content": {
                    "type": "json_schema",
                    "json_schema": True if schema is None else schema,
                },
                "end": s["end"],
            }
        )
    return {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": triggers,
            "tags": tags,
            "at_least_one": at_least_one,
        },
    }
