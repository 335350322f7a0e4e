"""Monitors in a generation: the checks and the matcher ``corral.generate`` uses.

``generate(model, prompt, monitors=[...])`` (with ``schema=``, ``grammar=``, ``regex=`` or
none of them) decodes with a :class:`~corral.monitors.matcher.MonitoredMatcher` over the
request's own matcher. Samplers: ``"mask"``, ``"awrs"`` and ``"smc"`` (each particle a
monitored matcher of its own: a particle asks a monitor where its own text fires a
trigger, and resampled copies share the regions entered before). ``"asap"`` keeps a trie
of samples per compiled grammar, which a monitored constraint is not: refused. Token
healing re-spells the prompt's tail through the chart of a plain matcher: off with
monitors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ArgumentTypeError, InvalidArgumentError
from .matcher import MonitoredConstraint
from .monitor import Monitor

__all__ = ["SAMPLERS", "check_monitored", "monitored_constraint"]

SAMPLERS = ("mask", "awrs", "smc")
"""The samplers that run with monitors."""


def check_monitored(monitors: Any, *, sampler: str, heal: bool | None) -> list[Monitor]:
    """``monitors`` as a list, after checking the generation's settings allow them.

    Raises:
        ArgumentTypeError: ``monitors`` not a sequence of :class:`Monitor` (one Monitor
            alone is taken as a list of one).
        InvalidArgumentError: no monitors, a sequence sampler, or ``heal=True``.
    """
    if isinstance(monitors, Monitor):
        monitors = [monitors]
    if not isinstance(monitors, Sequence) or isinstance(monitors, (str, bytes)):
        raise ArgumentTypeError(
            f"monitors= must be a list of Monitor, got {type(monitors).__name__}"
        )
    for m in monitors:
        if not isinstance(m, Monitor):
            raise ArgumentTypeError(f"monitors=: expected Monitor, got {type(m).__name__}")
    if not monitors:
        raise InvalidArgumentError("monitors=: give at least one Monitor (or leave it out)")
    if sampler not in SAMPLERS:
        raise InvalidArgumentError(
            f"monitors= works with sampler='mask', 'awrs' or 'smc', not {sampler!r} (yet)"
        )
    if heal:
        raise InvalidArgumentError("monitors= and heal=True cannot be combined (yet)")
    return list(monitors)


def monitored_constraint(
    vocab: Any,
    monitors: list[Monitor],
    compiled: Any,
    *,
    prompt: str | Sequence[int],
    state: Any = None,
) -> MonitoredConstraint:
    """The constraint of a monitored generation, whose :meth:`~MonitoredConstraint.matcher`
    decodes: ``compiled`` (the request's own constraint, or ``None``) under ``monitors``;
    ``prompt`` text goes to the callbacks (token ids give ``""``)."""
    text = prompt if isinstance(prompt, str) else ""
    return MonitoredConstraint(vocab, tuple(monitors), compiled, text, state)
