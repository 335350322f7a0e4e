"""What a monitor is: a trigger, a callback that says what may come there, and its policies.

A :class:`Monitor` watches the text being generated. Where its trigger fires (see
``trigger.py``), it calls ``allowed(context)`` with a :class:`MonitorContext`; what the
callback returns constrains the text from there on, until the region ends (see
``region.py``), after which the text is free again (or only the request's own constraint
applies) until a trigger fires again.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["ENDS", "ON_EMPTY", "Monitor", "MonitorContext"]

ENDS = ("identifier", "constraint")
"""Where a region ends. ``"identifier"`` (the default): where the returned constraint is
complete and the next byte is not an identifier character (``[A-Za-z0-9_]`` or a non-ASCII
byte), so ``app`` of ``{"app", "append"}`` cannot be followed by ``x``; ``"constraint"``:
where the constraint is complete and the next byte cannot continue it (a lexeme's
longest match), whatever that byte is."""

ON_EMPTY = ("refuse", "skip")
"""What an empty allowed set (no names) does: ``"refuse"`` fails the generation with
:class:`~corral.errors.MonitorError`; ``"skip"`` leaves that region unconstrained (the
text goes on as if the trigger had not fired)."""


@dataclass(frozen=True)
class MonitorContext:
    """What a monitor's callback sees where its trigger fires.

    Attributes:
        text: the generated text so far, up to and including the trigger's match.
        prompt: the prompt text (``""`` when the caller gave token ids only).
        monitor: the monitor's name.
        state: the caller's object passed as ``monitor_state=`` (``None`` by default),
            shared by every call of the generation.
    """

    text: str
    prompt: str = ""
    monitor: str = ""
    state: Any = None


@dataclass(frozen=True)
class Monitor:
    """A constraint computed while generating.

    Args:
        trigger: a Python regular expression over the text generated so far (since the
            last monitored region ended, if any); the monitor is asked at the first
            position where that text ends with a full match of it (``r"\\."``: after every
            dot). No token crosses a trigger. See ``corral/monitors/trigger.py``.
        allowed: ``allowed(context) -> constraint`` (a function or an ``async``
            function), called with a :class:`MonitorContext`. It returns names (an
            iterable of strings, or an :class:`~corral.EntitySet`): the text must go on
            with one of them; a :class:`~corral.Grammar`: a word of it; a JSON Schema
            (a ``dict``, or a pydantic model class): a JSON value of it; or ``None``: no
            constraint here. A ``str`` is refused (one name is ``[name]``; a Lark grammar
            is ``corral.Grammar.from_lark(text)``).
        name: for messages and for ``MonitorContext.monitor`` (default: the trigger).
        end: where a region ends, one of :data:`ENDS`.
        on_empty: what no names at all do, one of :data:`ON_EMPTY`.
        timeout_s: the longest the callback may take; past it the generation fails with
            :class:`~corral.errors.MonitorError`. ``None``: no limit.

    Raises:
        InvalidArgumentError: a trigger that is not a non-empty string, an unknown ``end``
            or ``on_empty``, a ``timeout_s`` that is not positive.
        ArgumentTypeError: ``allowed`` not callable.
    """

    trigger: str
    allowed: Callable[[MonitorContext], Any]
    name: str = ""
    end: str = "identifier"
    on_empty: str = "refuse"
    timeout_s: float | None = 5.0

    def __post_init__(self) -> None:
        if not isinstance(self.trigger, str) or not self.trigger:
            raise InvalidArgumentError(
                f"Monitor(trigger=...) must be a non-empty regex string, got {self.trigger!r}"
            )
        if not callable(self.allowed):
            raise ArgumentTypeError(
                f"Monitor(allowed=...) must be callable, got {type(self.allowed).__name__}"
            )
        if self.end not in ENDS:
            raise InvalidArgumentError(f"Monitor(end={self.end!r}): one of {', '.join(ENDS)}")
        if self.on_empty not in ON_EMPTY:
            raise InvalidArgumentError(
                f"Monitor(on_empty={self.on_empty!r}): one of {', '.join(ON_EMPTY)}"
            )
        if self.timeout_s is not None and not (
            isinstance(self.timeout_s, (int, float)) and self.timeout_s > 0
        ):
            raise InvalidArgumentError(
                f"Monitor(timeout_s={self.timeout_s!r}) must be a positive number or None"
            )
        if not self.name:
            object.__setattr__(self, "name", self.trigger)

    @property
    def is_async(self) -> bool:
        """Whether ``allowed`` is an ``async`` function."""
        return inspect.iscoroutinefunction(self.allowed)
