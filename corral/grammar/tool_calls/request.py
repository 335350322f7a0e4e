"""Reading a tool-calling request: the OpenAI ``tools`` list, ``tool_choice``, ``parallel``
and the reasoning options, checked, with messages that name the offending entry
(``tools[2].function.name``).

A tool is ``{"type": "function", "function": {"name", "description", "parameters",
"strict"}}``; unknown keys are refused (a misspelt ``"paramters"`` would otherwise drop
the schema). Names are OpenAI's ``[A-Za-z0-9_-]{1,64}`` plus ``.``, since every format
writes the name into its markup unescaped. ``parameters`` is the JSON Schema of the
arguments, an object:

* absent or ``None``: no parameters, the arguments are ``{}`` (OpenAI's "empty parameter
  list");
* ``true``: any object; ``false``: refused (the tool could never be called);
* a schema without ``type``: ``"type": "object"`` is added; a ``type`` other than
  ``"object"``: refused.

``strict`` is read and ignored: the schema is always enforced.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import ArgumentTypeError, CorralError, InvalidArgumentError

__all__ = ["CHOICES", "REASONING_MODES", "Request", "Tool", "check_schemas", "read_request"]

NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""A tool's name: OpenAI's pattern, plus ``.`` (namespaced names such as ``browser.search``)."""

CHOICES = ("auto", "required", "none")
"""The string values of ``tool_choice`` (besides ``{"type": "function", "function":
{"name": ...}}``, read as the choice ``"forced"``)."""

REASONING_MODES = ("auto", "enabled", "disabled", "prefilled")
"""``reasoning``: an optional block, a block first, none, or the block's body first (the
prompt ends with the opening marker, as DeepSeek-R1's and Qwen3-Thinking's templates
write it)."""

_TOOL_KEYS = ("type", "function")
_FUNCTION_KEYS = ("name", "description", "parameters", "strict")
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


@dataclass(frozen=True)
class Tool:
    """A function the model may call: its position in ``tools``, name and arguments'
    schema (an object schema, normalised as the module docs say)."""

    index: int
    name: str
    parameters: Any

    @property
    def where(self) -> str:
        """How messages name it: ``tools[3] ("get_weather")``."""
        return f'tools[{self.index}] ("{self.name}")'


@dataclass(frozen=True)
class Request:
    """A checked request.

    Attributes:
        tools: every tool given, in order.
        choice: ``"auto"``, ``"required"``, ``"none"`` or ``"forced"``.
        callable: the tools the output may call (none for ``"none"``, the named one for
            ``"forced"``).
        parallel: whether more than one call may be made.
        reasoning: one of :data:`REASONING_MODES`.
        budget: the reasoning block's ``max_tokens``, or ``None``.
    """

    tools: tuple[Tool, ...]
    choice: str
    callable: tuple[Tool, ...]
    parallel: bool
    reasoning: str
    budget: int | None


def read_request(
    tools: Any, tool_choice: Any, parallel: Any, reasoning: Any, reasoning_budget: Any
) -> Request:
    """The request, checked (``InvalidArgumentError`` / ``ArgumentTypeError`` naming the
    entry and field otherwise)."""
    read = read_tools(tools)
    choice, callable_ = _read_choice(tool_choice, read)
    if not isinstance(parallel, bool):
        raise ArgumentTypeError(f"parallel must be a bool, not {parallel!r}")
    if not isinstance(reasoning, str):
        raise ArgumentTypeError(
            f"reasoning must be a str, one of {list(REASONING_MODES)}, not {reasoning!r}"
        )
    if reasoning not in REASONING_MODES:
        raise InvalidArgumentError(
            f"reasoning must be one of {list(REASONING_MODES)}, got {reasoning!r}"
        )
    budget = reasoning_budget
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, int):
            raise ArgumentTypeError(f"reasoning_budget must be an int or None, not {budget!r}")
        if budget < 0:
            raise InvalidArgumentError(f"reasoning_budget must be >= 0, got {budget}")
        if reasoning == "disabled":
            raise InvalidArgumentError("reasoning_budget is given but reasoning is 'disabled'")
    return Request(read, choice, callable_, parallel, reasoning, budget)


def read_tools(tools: Any) -> tuple[Tool, ...]:
    """The OpenAI ``tools`` list as :class:`Tool` values; duplicate names refused."""
    if tools is None:
        return ()
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise ArgumentTypeError(
            f"tools must be a list of OpenAI tools ({{'type': 'function', 'function': "
            f"{{...}}}}), not {type(tools).__name__}"
        )
    out: list[Tool] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(tools):
        tool = _read_tool(i, entry)
        if tool.name in seen:
            raise InvalidArgumentError(
                f"tools[{i}].function.name: {tool.name!r} is also the name of "
                f"tools[{seen[tool.name]}]; tool names must be unique"
            )
        seen[tool.name] = i
        out.append(tool)
    return tuple(out)


def _read_tool(i: int, entry: Any) -> Tool:
    at = f"tools[{i}]"
    if not isinstance(entry, Mapping):
        raise ArgumentTypeError(
            f"{at} must be a dict {{'type': 'function', 'function': {{...}}}}, "
            f"not {type(entry).__name__}"
        )
    _known_keys(entry, _TOOL_KEYS, at)
    if entry.get("type") != "function":
        raise InvalidArgumentError(
            f"{at}.type must be 'function', got {entry.get('type')!r} (builtin tools are not "
            "supported)"
        )
    fn = entry.get("function")
    if not isinstance(fn, Mapping):
        raise ArgumentTypeError(f"{at}.function must be a dict with a 'name', not {fn!r}")
    _known_keys(fn, _FUNCTION_KEYS, f"{at}.function")
    name = fn.get("name")
    if not isinstance(name, str):
        raise ArgumentTypeError(f"{at}.function.name must be a str, not {name!r}")
    if not NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"{at}.function.name must match [A-Za-z0-9_.-]{{1,64}} (it is written into the "
            f"model's markup unescaped), got {name!r}"
        )
    desc = fn.get("description")
    if desc is not None and not isinstance(desc, str):
        raise ArgumentTypeError(f"{at}.function.description must be a str, not {desc!r}")
    strict = fn.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise ArgumentTypeError(f"{at}.function.strict must be a bool, not {strict!r}")
    return Tool(i, name, _parameters(fn.get("parameters"), f"{at}.function.parameters"))


def _known_keys(obj: Mapping[str, Any], known: tuple[str, ...], at: str) -> None:
    for k in obj:
        if k not in known:
            raise InvalidArgumentError(f"{at}: unknown key {k!r} (known: {list(known)})")


def _parameters(p: Any, at: str) -> Any:
    if p is None:
        return copy.deepcopy(NO_PARAMETERS)
    if p is True:
        return {"type": "object"}
    if p is False:
        raise InvalidArgumentError(
            f"{at} is false: no arguments are valid, the tool could never be called"
        )
    if not isinstance(p, Mapping):
        raise ArgumentTypeError(
            f"{at} must be a JSON Schema (a dict) or None, not {type(p).__name__}"
        )
    if "type" not in p:
        return {**p, "type": "object"}
    if p["type"] != "object":
        raise InvalidArgumentError(
            f"{at}.type must be 'object' (the arguments are an object), got {p['type']!r}"
        )
    return dict(p)


def _read_choice(choice: Any, tools: tuple[Tool, ...]) -> tuple[str, tuple[Tool, ...]]:
    if choice is None:
        choice = "auto"
    if isinstance(choice, str):
        if choice not in CHOICES:
            raise InvalidArgumentError(
                f"tool_choice must be one of {list(CHOICES)} or {{'type': 'function', "
                f"'function': {{'name': ...}}}}, got {choice!r}"
            )
        if choice == "required" and not tools:
            raise InvalidArgumentError("tool_choice 'required' needs at least one tool, got none")
        return choice, (() if choice == "none" else tools)
    if not isinstance(choice, Mapping):
        raise ArgumentTypeError(f"tool_choice must be a str or a dict, not {type(choice).__name__}")
    fn = choice.get("function")
    name = fn.get("name") if isinstance(fn, Mapping) else None
    if (
        choice.get("type") != "function"
        or set(choice) != {"type", "function"}
        or not isinstance(name, str)
    ):
        raise InvalidArgumentError(
            "tool_choice as a dict must be {'type': 'function', 'function': {'name': ...}}, "
            f"got {choice!r}"
        )
    for t in tools:
        if t.name == name:
            return "forced", (t,)
    raise InvalidArgumentError(
        f"tool_choice names the tool {name!r}, which is not in tools "
        f"(known: {[t.name for t in tools]})"
    )


def check_schemas(tools: Sequence[Tool], style: str) -> None:
    """Compile each tool's ``parameters`` on its own (``style``: ``"json"`` or
    ``"qwen_xml"``), so that a schema corral cannot enforce is refused naming the tool and
    the JSON pointer inside its parameters, rather than its place in the structural tag.

    Raises:
        the front end's error (``SchemaError``, ``UnsupportedFeatureError``,
        ``EmptyLanguageError``, ``CompileBudgetError``), of the same class, its message
        starting ``tools[i] ("name"): `` and its ``location`` the pointer in
        ``parameters``.
    """
    from .. import frontends

    for tool in tools:
        try:
            if style == "qwen_xml":
                from ..structural.xml_params import qwen_xml_grammar

                qwen_xml_grammar(tool.parameters, {})
            else:
                frontends.from_json_schema(tool.parameters, final_check=False)
        except CorralError as e:
            raise _naming(e, tool) from e


def _naming(e: CorralError, tool: Tool) -> CorralError:
    """A copy of ``e`` whose message starts by naming ``tool``."""
    loc = getattr(e, "location", None)
    ptr = getattr(loc, "pointer", None)
    where = f"{tool.where} parameters at {ptr}" if ptr else f"{tool.where} parameters"
    msg = f"{tool.where}: {e}" if ptr and ptr in str(e) else f"{where}: {e}"
    out = copy.copy(e)
    out.args = (msg,)
    if hasattr(out, "message"):
        out.message = msg
    return out
