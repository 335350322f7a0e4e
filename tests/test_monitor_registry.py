"""Monitors by name (``corral/monitors/registry.py``): what an engine's process resolves
when a request names a monitor, and the errors for names it cannot resolve."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
from support import monitors as test_monitors

import corral
from corral.errors import ArgumentTypeError, InvalidArgumentError
from corral.monitors import registry
from corral.monitors.registry import ENV, GROUP, known_monitors, monitor_named, register_monitor


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no registrations and nothing resolved."""
    monkeypatch.setattr(registry, "_REGISTERED", {})
    monkeypatch.setattr(registry, "_RESOLVED", {})
    monkeypatch.delenv(ENV, raising=False)


def test_a_registered_monitor_or_factory_is_found_by_name_and_named_after_it() -> None:
    register_monitor("colours", test_monitors.COLOURS)
    m = monitor_named("colours")
    assert m.name == "colours" and m.trigger == test_monitors.COLOURS.trigger
    assert m.allowed is test_monitors.COLOURS.allowed
    calls = []

    def factory() -> corral.Monitor:
        calls.append(1)
        return test_monitors.COLOURS

    register_monitor("made", factory)
    assert monitor_named("made") is monitor_named("made") and calls == [1]  # made once
    register_monitor("made", test_monitors.FROM_STATE)  # a new registration replaces it
    assert monitor_named("made").allowed is test_monitors.FROM_STATE.allowed
    assert {"colours", "made", "python_members"} <= set(known_monitors())


def test_the_environment_variable_names_monitors_by_module_and_attribute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, test_monitors.ENV)
    assert monitor_named("broken").allowed is test_monitors.BROKEN.allowed
    assert {"colours", "broken", "from_state"} <= set(known_monitors())
    monkeypatch.setenv(ENV, "x=support.monitors:NOPE")
    with pytest.raises(InvalidArgumentError, match=r"'x'.*could not be loaded.*NOPE"):
        monitor_named("x")
    monkeypatch.setenv(ENV, "colours support.monitors:COLOURS")
    with pytest.raises(InvalidArgumentError, match="expected name=module:attribute"):
        monitor_named("colours")
    assert "python_members" in known_monitors()  # a malformed variable adds no names


def test_installed_packages_declare_monitors_as_entry_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    eps = [EntryPoint("catalogue", "support.monitors:COLOURS", GROUP)]
    monkeypatch.setattr(
        registry, "entry_points", lambda group: eps if group == registry.GROUP else []
    )
    assert monitor_named("catalogue").trigger == test_monitors.COLOURS.trigger
    assert "catalogue" in known_monitors()


def test_python_members_is_built_in() -> None:
    pytest.importorskip("jedi")
    m = monitor_named("python_members")
    assert m.name == "python_members" and m.trigger


def test_names_that_resolve_to_nothing_usable_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match=r"no monitor is called 'nope'.*python_members"):
        monitor_named("nope")
    for bad in ("", "a b", "1x", "x" * 200, 3):
        with pytest.raises(InvalidArgumentError, match="a monitor's name"):
            monitor_named(bad)  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match="expected a Monitor"):
        register_monitor("x", 3)  # type: ignore[arg-type]

    def raises() -> corral.Monitor:
        raise RuntimeError("no catalogue")

    register_monitor("raises", raises)
    with pytest.raises(InvalidArgumentError, match="factory raised RuntimeError: no catalogue"):
        monitor_named("raises")
    register_monitor("wrong", lambda: ["a"])  # type: ignore[arg-type, return-value]
    with pytest.raises(InvalidArgumentError, match="returned a list, not a Monitor"):
        monitor_named("wrong")
