"""JSON Schema → grammar.

:func:`grammar_from_json_schema` turns a schema (dict, JSON text, or pydantic model class)
into a :class:`~corral.grammar.ir.Grammar`; :func:`explain` reports how each keyword
occurrence is enforced. See ``translate.py`` for the semantics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .findings import ANNOTATION, EXACT, FINAL_CHECK, Finding
from .options import Options

__all__ = [
    "ANNOTATION",
    "EXACT",
    "FINAL_CHECK",
    "Explanation",
    "Finding",
    "Options",
    "explain",
    "grammar_from_json_schema",
]


def grammar_from_json_schema(schema: Any, **options: Any) -> Any:
    """The grammar of the JSON texts valid for ``schema`` (options: see :class:`Options`)."""
    from .load import load_schema
    from .translate import translate

    return translate(load_schema(schema), Options(**options)).grammar


@dataclass(frozen=True)
class Explanation:
    """How a schema compiles: one :class:`Finding` per keyword occurrence, and sizes.

    Every schema that compiles has at least one value. Where keywords are left to the
    final check (:attr:`undecided`), the grammar derives a superset: a generation can
    reach a complete document that fails them (a dead end at EOS), and whether some value
    passes them all was not decided at compile time (schemas that provably have none are
    refused with :class:`~corral.errors.EmptyLanguageError`).
    """

    findings: tuple[Finding, ...]
    grammar_size: dict[str, int]

    def by_status(self, status: str) -> list[Finding]:
        return [f for f in self.findings if f.status == status]

    @property
    def undecided(self) -> list[Finding]:
        """The keyword occurrences left to the final check (where generation can dead-end)."""
        return self.by_status(FINAL_CHECK)

    def __str__(self) -> str:
        lines = [
            f"{f.pointer or '/'}: {f.keyword}: {f.status}" + (f" ({f.detail})" if f.detail else "")
            for f in self.findings
        ]
        sizes = ", ".join(f"{k} {v}" for k, v in self.grammar_size.items())
        lines.append(f"grammar: {sizes}")
        if self.undecided:
            names = ", ".join(sorted({f.keyword for f in self.undecided}))
            lines.append(
                f"not decided at compile time: {names} (checked on the complete document; "
                "a generation can reach a document that fails them and must stop there)"
            )
        else:
            lines.append("every keyword is exact")
        return "\n".join(lines)


def explain(schema: Any, **options: Any) -> Explanation:
    """Per keyword occurrence (JSON pointer): exact, final check, or annotation; plus the
    grammar's size. Raises the same errors as compiling (e.g. ``UnsupportedFeatureError``
    naming a refused keyword and its pointer)."""
    from .load import load_schema
    from .translate import translate

    t = translate(load_schema(schema), Options(**options))
    return Explanation(tuple(t.findings), t.grammar.summary())
