"""Monitors by name, for engines that run the constraints in their own process (vLLM).

A request sent to a server cannot carry a Python function, so it names the monitors it
wants (``{"monitors": ["python_members"]}``) and the engine's process resolves each name
here, in this order:

1. :func:`register_monitor` calls made in that process;
2. the ``CORRAL_MONITORS`` environment variable: ``name=module:attribute`` pairs separated
   by commas (``sql_columns=myapp.monitors:columns``), read at each lookup of a name not
   resolved yet. Set it where the server starts: the engine's worker processes inherit it;
3. the ``corral.monitors`` entry-point group of the installed packages (a package declares
   ``[project.entry-points."corral.monitors"] sql_columns = "myapp.monitors:columns"``);
4. the monitors corral ships: ``python_members`` (:func:`corral.monitors.python.python_members`
   with its defaults).

A name resolves to a :class:`~corral.Monitor`, or to a callable of no arguments that
returns one (a factory, called once per process). Only the server's own configuration can
add names: a request cannot make the engine import a module it names.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import re
import threading
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from ..errors import ArgumentTypeError, InvalidArgumentError
from .monitor import Monitor

__all__ = [
    "ENV",
    "GROUP",
    "NAME_PATTERN",
    "known_monitors",
    "monitor_named",
    "register_monitor",
]

ENV = "CORRAL_MONITORS"
"""The environment variable of ``name=module:attribute`` pairs, separated by commas."""

GROUP = "corral.monitors"
"""The entry-point group in which installed packages declare monitors."""

BUILTIN = {"python_members": "corral.monitors.python:python_members"}
"""The monitors corral ships, by name."""

NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")
"""What a monitor's name may be."""
_LOCK = threading.RLock()
_REGISTERED: dict[str, Monitor | Callable[[], Monitor]] = {}
_RESOLVED: dict[str, Monitor] = {}


def register_monitor(name: str, monitor: Monitor | Callable[[], Monitor]) -> None:
    """Make ``monitor`` (a :class:`Monitor`, or a factory of one) available as ``name``
    in this process; replaces an earlier registration of ``name``.

    Raises:
        InvalidArgumentError: ``name`` is not a letter or ``_`` followed by at most 127
            letters, digits, ``_``, ``.`` or ``-``.
        ArgumentTypeError: ``monitor`` is neither a Monitor nor callable.
    """
    _check_name(name)
    if not isinstance(monitor, Monitor) and not callable(monitor):
        raise ArgumentTypeError(
            f"register_monitor({name!r}, ...): expected a Monitor or a function that returns "
            f"one, got {type(monitor).__name__}"
        )
    with _LOCK:
        _REGISTERED[name] = monitor
        _RESOLVED.pop(name, None)


def monitor_named(name: str) -> Monitor:
    """The monitor called ``name`` in this process (see the module for where names come
    from), with ``name`` as its name in messages.

    Raises:
        InvalidArgumentError: no monitor has that name (the message lists the known
            ones), a malformed ``CORRAL_MONITORS``, or a name whose module or factory
            fails (the cause is chained).
    """
    _check_name(name)
    with _LOCK:
        found = _RESOLVED.get(name)
        if found is not None:
            return found
        target: Any = _REGISTERED.get(name)
        where = "register_monitor"
        if target is None:
            path = _env_entries().get(name)
            where = ENV
            if path is None:
                path = _entry_point(name)
                where = f"the {GROUP!r} entry point"
            if path is None:
                path = BUILTIN.get(name)
                where = "corral"
            if path is None:
                raise InvalidArgumentError(
                    f"no monitor is called {name!r} in this process; known: "
                    f"{_known_locked()} (add one with {ENV}=name=module:attribute where the "
                    f"server starts, or a {GROUP!r} entry point)"
                )
            target = _load(path, name, where)
        monitor = _made(target, name, where)
        _RESOLVED[name] = monitor
        return monitor


def known_monitors() -> list[str]:
    """The names :func:`monitor_named` resolves in this process, sorted."""
    with _LOCK:
        return _known_locked()


def _known_locked() -> list[str]:
    names = set(_REGISTERED) | set(BUILTIN)
    with contextlib.suppress(InvalidArgumentError):  # a malformed variable: no names
        names |= set(_env_entries())
    names |= {ep.name for ep in entry_points(group=GROUP)}
    return sorted(names)


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidArgumentError(
            f"a monitor's name is a letter or '_' followed by at most 127 letters, digits, "
            f"'_', '.' or '-', not {name!r}"
        )


def _env_entries() -> dict[str, str]:
    """``CORRAL_MONITORS`` as ``{name: "module:attribute"}``."""
    out: dict[str, str] = {}
    for item in os.environ.get(ENV, "").split(","):
        item = item.strip()
        if not item:
            continue
        name, eq, path = item.partition("=")
        name, path = name.strip(), path.strip()
        if not eq or not NAME_PATTERN.fullmatch(name) or path.count(":") != 1:
            raise InvalidArgumentError(
                f"{ENV}: expected name=module:attribute pairs separated by commas, found {item!r}"
            )
        out[name] = path
    return out


def _entry_point(name: str) -> str | None:
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            return str(ep.value)
    return None


def _load(path: str, name: str, where: str) -> Any:
    module, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module.strip())
        for part in attr.strip().split("."):
            obj = getattr(obj, part)
    except Exception as e:
        raise InvalidArgumentError(
            f"monitor {name!r} ({where}: {path}) could not be loaded: {type(e).__name__}: {e}"
        ) from e
    return obj


def _made(target: Any, name: str, where: str) -> Monitor:
    """The Monitor that ``target`` is or makes, renamed ``name``."""
    monitor = target
    if not isinstance(monitor, Monitor):
        if not callable(monitor):
            raise InvalidArgumentError(
                f"monitor {name!r} ({where}) is a {type(monitor).__name__}, not a Monitor or "
                "a function that returns one"
            )
        try:
            monitor = monitor()
        except Exception as e:
            raise InvalidArgumentError(
                f"monitor {name!r} ({where}): its factory raised {type(e).__name__}: {e}"
            ) from e
        if not isinstance(monitor, Monitor):
            raise InvalidArgumentError(
                f"monitor {name!r} ({where}): its factory returned a "
                f"{type(monitor).__name__}, not a Monitor"
            )
    return monitor if monitor.name == name else dataclasses.replace(monitor, name=name)
