"""Monitors in a generation: the checks and the matcher ``corral.generate`` uses.

``generate(model, prompt, monitors=[...])`` (with ``schema=``, ``grammar=``, ``regex=`` or
none of them) decodes with a :class:`~corral.monitors.matcher.MonitoredMatcher` over the
request's own matcher. Per-token samplers only: ``"mask"`` and ``"awrs"`` (the sequence
samplers recompute whole prefixes per particle, which would ask monitors again for every
particle; not supported yet). Token healing re-spells the prompt's tail through the
chart of a plain matcher: off with monitors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ArgumentTypeError, InvalidArgumentError
from .matcher import MonitoredMatcher
from .monitor import Monitor

__all__ = ["check_monitored", "monitored_matcher"]

PER_TOKEN = ("mask", "awrs")


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
    if sampler not in PER_TOKEN:
        raise InvalidArgumentError(
            f"monitors= works with sampler='mask' or 'awrs', not {sampler!r} (yet)"
        )
    if heal:
        raise InvalidArgumentError("monitors= and heal=True cannot be combined (yet)")
    return list(monitors)


def monitored_matcher(
    vocab: Any,
    monitors: list[Monitor],
    compiled: Any,
    *,
    prompt: str | Sequence[int],
    state: Any = None,
) -> MonitoredMatcher:
    """The matcher of a monitored generation: ``compiled`` (the request's own constraint,
    or ``None``) under ``monitors``; ``prompt`` text goes to the callbacks (token ids
    give ``""``)."""
    base = None if compiled is None else compiled.matcher()
    text = prompt if isinstance(prompt, str) else ""
    return MonitoredMatcher(vocab, monitors, base=base, prompt=text, state=state)
