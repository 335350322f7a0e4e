"""Monitors for the engine tests, named in ``CORRAL_MONITORS`` (``module:attribute``).

``COLOURS`` is the shape of a user's own monitor (a catalogue's names after a marker);
``BROKEN`` fails as a catalogue that is offline would; ``FROM_STATE`` allows the names the
request sent as its ``monitor_state``.
"""

from __future__ import annotations

from corral import Monitor, MonitorContext

ENV = (
    "colours=support.monitors:COLOURS,broken=support.monitors:BROKEN,"
    "from_state=support.monitors:FROM_STATE"
)
"""The ``CORRAL_MONITORS`` value that names the monitors below."""

NAMES = ("crimson", "teal", "ochre")


def _colours(ctx: MonitorContext) -> list[str]:
    return list(NAMES)


def _broken(ctx: MonitorContext) -> list[str]:
    raise ConnectionError("the catalogue is offline")


def _from_state(ctx: MonitorContext) -> list[str]:
    return list(ctx.state["names"])


COLOURS = Monitor(trigger=r"colour: ", allowed=_colours)
BROKEN = Monitor(trigger=r"colour: ", allowed=_broken)
FROM_STATE = Monitor(trigger=r"colour: ", allowed=_from_state)
