"""Options of the JSON Schema translation: how values are written, and budgets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import InvalidArgumentError

if TYPE_CHECKING:
    from ..entities import EntitySet

__all__ = ["Options"]


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
            for the keywords the grammar over-approximates; see the docs of
            :mod:`corral.grammar.json_schema.translate`).
        max_states: automaton states allowed per terminal.
        pattern_budget: construction steps allowed for one string automaton (pattern,
            format, lengths); beyond them the pattern or format is left to the final
            check.
        max_rules: grammar rules allowed in total.
        max_work: construction steps allowed for the whole grammar (subschemas visited,
            automaton states and closures built); beyond them the schema is refused with
            :class:`~corral.errors.CompileBudgetError`. Budgets count steps, not seconds,
            so a schema compiles to the same grammar, or is refused the same way, on a
            loaded machine and an idle one.
        time_budget_s: an optional wall-clock limit on building the grammar (``None``:
            none), for callers that must bound latency; past it the schema is refused
            (never compiled differently), so what it refuses depends on the machine.
        source: the texts that ``"x-corral-span"`` values must be spans of (``None``:
            none given; a schema that uses the keyword is then refused).
        entities: the entity sets ``"x-corral-entities"`` names (a mapping of names to
            :class:`~corral.grammar.entities.EntitySet`; an iterable of strings is made
            into one).
    """

    whitespace: str = "compact"
    max_whitespace: int = 4
    property_order: str = "schema"
    any_order_max_properties: int = 8
    additional_properties: bool | None = None
    final_check: bool = True
    max_states: int = 50_000
    max_rules: int = 200_000
    max_work: int = 40_000_000
    pattern_budget: int = 4_000_000
    time_budget_s: float | None = None
    source: tuple[str, ...] | None = None
    entities: Mapping[str, EntitySet] | None = None

    def __post_init__(self) -> None:
        if self.whitespace not in ("compact", "flexible"):
            raise InvalidArgumentError(
                f"whitespace must be 'compact' or 'flexible', not {self.whitespace!r}"
            )
        if self.property_order not in ("schema", "any"):
            raise InvalidArgumentError(
                f"property_order must be 'schema' or 'any', not {self.property_order!r}"
            )
        if self.entities is not None:
            from ..entities import entity_sets

            object.__setattr__(self, "entities", entity_sets(self.entities))
        if self.source is not None:
            from ..spans import source_texts

            object.__setattr__(self, "source", source_texts(self.source))
        if self.max_whitespace < 1:
            raise InvalidArgumentError("max_whitespace must be at least 1")
        for name in ("max_states", "max_rules", "max_work", "pattern_budget"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise InvalidArgumentError(f"{name} must be a positive integer, not {value!r}")
        if self.time_budget_s is not None and not self.time_budget_s >= 0:
            raise InvalidArgumentError(
                f"time_budget_s must be None or >= 0, not {self.time_budget_s!r}"
            )
