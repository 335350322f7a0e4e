"""Reading a generated output back: the reasoning, the content and the calls.

:func:`parse_output` reads the text of one family's format (as
:func:`~corral.grammar.tool_calls.tool_calls` constrains it, the markers spelled out, as
``Vocabulary.decode`` or a tokenizer's ``decode`` without ``skip_special_tokens`` writes
them) into a :class:`ParsedOutput`. Every output the grammar accepts reads back; the
reader is strict about the structure (markers, separators, JSON) and raises
:class:`ToolCallParseError` with the offset where it stops matching, but it does not
check arguments against the schemas.

* ``reasoning``: the text of the reasoning block (harmony: of the analysis messages,
  joined by ``"\\n"``), or ``None`` without one. A block is the text between ``<think>``
  at the start and ``</think>``, or, when the output does not start with ``<think>``,
  the text before a ``</think>`` that comes before any other marker (a prefilled block).
* ``content``: the free text outside the reasoning and the calls, concatenated verbatim
  (harmony: the final messages'); ``""`` when there is none.
* ``tool_calls``: ``[{"name": str, "arguments": dict}, ...]`` in order. Arguments are the
  JSON object, or for ``qwen3_coder`` the XML parameters: with ``tools`` given, a
  parameter whose schema admits a string is the raw text (one newline stripped at each
  end, as vLLM's Qwen3-Coder parser does) unless it is a JSON array or object the schema
  admits, an ``enum``/``const`` is matched to its value, any other value is JSON; without
  ``tools``, a value that parses as JSON is that, anything else the raw text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ...errors import CorralError, Location
from . import formats as f

__all__ = ["PARSERS", "ParsedOutput", "ToolCallParseError"]

_WS = " \t\n\r"
_DECODER = json.JSONDecoder()


class ToolCallParseError(CorralError, ValueError):
    """An output that is not in the family's format.

    Attributes:
        offset: the character offset in the text where reading stopped.
        location: ``Location("offset N")``.
    """

    def __init__(self, message: str, *, offset: int, text: str) -> None:
        self.offset = offset
        self.location = Location(f"offset {offset}")
        super().__init__(
            f"{message} at offset {offset} (text there: {text[offset : offset + 40]!r})"
        )


@dataclass(frozen=True)
class ParsedOutput:
    """An output read back (see the module docs)."""

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    reasoning: str | None = None


class _Reader:
    """A cursor over the text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str) -> NoReturn:
        raise ToolCallParseError(message, offset=self.pos, text=self.text)

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def startswith(self, s: str) -> bool:
        return self.text.startswith(s, self.pos)

    def skip(self, s: str) -> bool:
        if s and self.startswith(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str) -> None:
        if not self.skip(s):
            self.fail(f"expected {s!r}")

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WS:
            self.pos += 1

    def until(self, stops: Sequence[str]) -> tuple[str, str | None]:
        """The text up to the first of ``stops`` (the cursor stays before it), and that
        stop; ``(rest, None)`` when none occurs."""
        best, hit = len(self.text), None
        for s in stops:
            i = self.text.find(s, self.pos)
            if 0 <= i < best:
                best, hit = i, s
        out = self.text[self.pos : best]
        self.pos = best
        return out, hit

    def upto(self, stop: str, what: str) -> str:
        """The text up to ``stop``, which must occur; the cursor moves past it."""
        i = self.text.find(stop, self.pos)
        if i < 0:
            self.fail(f"expected {what} ending with {stop!r}")
        out = self.text[self.pos : i]
        self.pos = i + len(stop)
        return out

    def json(self, what: str) -> Any:
        try:
            value, end = _DECODER.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as e:
            self.pos = max(self.pos, e.pos)
            self.fail(f"expected {what} (JSON: {e.msg})")
        self.pos = end
        return value


def _call(r: _Reader, name: Any, args: Any) -> dict[str, Any]:
    if not isinstance(name, str) or not name:
        r.fail(f"a call's name must be a non-empty string, got {name!r}")
    if not isinstance(args, dict):
        r.fail(f"the arguments of {name!r} must be a JSON object, got {args!r}")
    return {"name": name, "arguments": args}


def _object_call(r: _Reader, keys: tuple[str, ...]) -> dict[str, Any]:
    """A call written as one JSON object ``{"name": ..., KEY: {...}}`` (``KEY`` one of
    ``keys``)."""
    start = r.pos
    obj = r.json("a call object")
    arg_keys = [k for k in keys if isinstance(obj, dict) and k in obj]
    if not isinstance(obj, dict) or "name" not in obj or len(arg_keys) != 1 or len(obj) != 2:
        r.pos = start
        r.fail(f"a call is an object with exactly the keys 'name' and one of {list(keys)}")
    return _call(r, obj["name"], obj[arg_keys[0]])


def _first(text: str, markers: Sequence[str]) -> tuple[int, str | None]:
    best, hit = len(text), None
    for m in markers:
        i = text.find(m)
        if 0 <= i < best:
            best, hit = i, m
    return best, hit


def _think(r: _Reader, markers: Sequence[str], suffix: str = "") -> str | None:
    """The ``<think>`` block at the start (or a prefilled one), then ``suffix`` if present."""
    if r.skip(f.THINK_BEGIN):
        reasoning = r.upto(f.THINK_END, "the reasoning block")
    else:
        i, hit = _first(r.text, markers)
        if hit != f.THINK_END:
            return None
        reasoning, r.pos = r.text[:i], i + len(hit)
    r.skip(suffix)
    return reasoning


def _region(
    r: _Reader, trigger: str, read_call: Callable[[_Reader], list[dict[str, Any]]]
) -> tuple[str, list[dict[str, Any]]]:
    """Free text in which ``trigger`` starts calls (``read_call`` reads them, from the
    trigger on)."""
    content: list[str] = []
    calls: list[dict[str, Any]] = []
    while True:
        seg, hit = r.until([trigger])
        content.append(seg)
        if hit is None:
            return "".join(content), calls
        calls.extend(read_call(r))


def _block(
    begin: str, end: str, sep: str, read_one: Callable[[_Reader], dict[str, Any]]
) -> Callable[[_Reader], list[dict[str, Any]]]:
    """Reads ``begin call (sep call)* end``."""

    def read(r: _Reader) -> list[dict[str, Any]]:
        r.expect(begin)
        calls = [read_one(r)]
        while not r.startswith(end):
            if r.at_end():
                r.fail(f"expected {end!r}")
            if sep:
                r.expect(sep)
            calls.append(read_one(r))
        r.expect(end)
        return calls

    return read


# -- families -----------------------------------------------------------------------------
Schemas = Mapping[str, Any]


def parse_llama(text: str, schemas: Schemas | None) -> ParsedOutput:
    r = _Reader(text)
    if r.skip(f.PYTHON_TAG):
        calls = [_object_call(r, ("parameters", "arguments"))]
        while r.skip("; "):
            calls.append(_object_call(r, ("parameters", "arguments")))
        if not r.at_end():
            r.fail("expected '; ' and a call, or the end, after a call")
        return ParsedOutput("", calls)
    content, calls = _region(
        r, f.LLAMA_TRIGGER, lambda r: [_object_call(r, ("parameters", "arguments"))]
    )
    return ParsedOutput(content, calls)


def _hermes(think: bool) -> Callable[[str, Schemas | None], ParsedOutput]:
    def parse(text: str, schemas: Schemas | None) -> ParsedOutput:
        r = _Reader(text)
        reasoning = _think(r, list(f.QWEN_MARKERS), "\n\n") if think else None

        def call(r: _Reader) -> list[dict[str, Any]]:
            r.expect(f.TOOL_CALL_BEGIN)
            r.skip_ws()
            c = _object_call(r, ("arguments",))
            r.skip_ws()
            r.expect(f.TOOL_CALL_END)
            return [c]

        content, calls = _region(r, f.TOOL_CALL_BEGIN, call)
        return ParsedOutput(content, calls, reasoning)

    return parse


def parse_qwen3_coder(text: str, schemas: Schemas | None) -> ParsedOutput:
    r = _Reader(text)
    reasoning = _think(r, list(f.QWEN_MARKERS), "\n\n")

    def call(r: _Reader) -> list[dict[str, Any]]:
        r.expect(f.TOOL_CALL_BEGIN)
        r.expect("\n<function=")
        name = r.upto(">", "a function name")
        r.skip("\n")
        root = schemas.get(name) if schemas is not None else None
        props = root.get("properties", {}) if isinstance(root, dict) else {}
        args: dict[str, Any] = {}
        while True:
            here = r.pos
            r.skip_ws()
            if not r.skip("<parameter="):
                r.pos = here
                break
            pname = r.upto(">", "a parameter name")
            if pname in args:
                r.fail(f"the parameter {pname!r} is given twice")
            known = root is not None
            sub = props.get(
                pname, root.get("additionalProperties", True) if isinstance(root, dict) else True
            )
            args[pname] = _xml_value(r, sub if known else None, root)
        r.skip("\n")
        r.expect("</function>")
        r.skip("\n")
        r.expect(f.TOOL_CALL_END)
        return [_call(r, name, args)]

    content, calls = _region(r, f.TOOL_CALL_BEGIN, call)
    return ParsedOutput(content, calls, reasoning)


def parse_mistral(text: str, schemas: Schemas | None) -> ParsedOutput:
    r = _Reader(text)
    content, hit = r.until([f.TOOL_CALLS])
    calls: list[dict[str, Any]] = []
    if hit is not None:
        r.expect(f.TOOL_CALLS)
        r.skip(" ")
        start = r.pos
        items = r.json("a JSON array of calls")
        if not isinstance(items, list) or not items:
            r.pos = start
            r.fail("expected a non-empty JSON array of calls")
        for item in items:
            if not isinstance(item, dict) or set(item) != {"name", "arguments"}:
                r.pos = start
                r.fail("each call is an object with exactly the keys 'name' and 'arguments'")
            calls.append(_call(r, item["name"], item["arguments"]))
        if not r.at_end():
            r.fail("expected the end of the output after the calls")
    return ParsedOutput(content, calls)


def _deepseek(
    read_one: Callable[[_Reader], dict[str, Any]], sep: str
) -> Callable[[str, Schemas | None], ParsedOutput]:
    def parse(text: str, schemas: Schemas | None) -> ParsedOutput:
        r = _Reader(text)
        reasoning = _think(r, list(f.DS_MARKERS))
        content, calls = _region(
            r, f.DS_CALLS_BEGIN, _block(f.DS_CALLS_BEGIN, f.DS_CALLS_END, sep, read_one)
        )
        return ParsedOutput(content, calls, reasoning)

    return parse


def _r1_call(r: _Reader) -> dict[str, Any]:
    r.expect(f.DS_CALL_BEGIN)
    r.expect("function")
    r.expect(f.DS_SEP)
    name = r.upto("\n```json\n", "a function name")
    args = r.json("the arguments")
    r.expect("\n```")
    r.expect(f.DS_CALL_END)
    return _call(r, name, args)


def _v3_1_call(r: _Reader) -> dict[str, Any]:
    r.expect(f.DS_CALL_BEGIN)
    name = r.upto(f.DS_SEP, "a function name")
    args = r.json("the arguments")
    r.expect(f.DS_CALL_END)
    return _call(r, name, args)


def _kimi_call(r: _Reader) -> dict[str, Any]:
    r.expect(f.KIMI_CALL_BEGIN)
    r.expect("functions.")
    head = r.upto(f.KIMI_ARGS, "'NAME:INDEX'")
    name, _, index = head.rpartition(":")
    if not index.isascii() or not index.isdigit():
        r.fail(f"expected 'functions.NAME:INDEX' with a numeric index, got {head!r}")
    args = r.json("the arguments")
    r.expect(f.KIMI_CALL_END)
    return _call(r, name, args)


def parse_kimi(text: str, schemas: Schemas | None) -> ParsedOutput:
    r = _Reader(text)
    reasoning = _think(r, list(f.KIMI_MARKERS))
    content, calls = _region(
        r, f.KIMI_SECTION_BEGIN, _block(f.KIMI_SECTION_BEGIN, f.KIMI_SECTION_END, "", _kimi_call)
    )
    return ParsedOutput(content, calls, reasoning)


_H_NAME = r"([A-Za-z0-9_.-]+)"
_H_HEADERS = (
    (re.compile(r"<\|channel\|>(analysis|final)"), False),
    (re.compile(rf"<\|channel\|>commentary to=functions\.{_H_NAME} ?<\|constrain\|>json"), True),
    (
        re.compile(rf" to=functions\.{_H_NAME}<\|channel\|>commentary (?:<\|constrain\|>)?json"),
        True,
    ),
)


def _harmony_header(header: str) -> tuple[bool, str] | None:
    """``(is_call, channel or function name)`` of a message header, or ``None``."""
    for pattern, is_call in _H_HEADERS:
        mt = pattern.fullmatch(header)
        if mt is not None:
            return is_call, mt.group(1)
    return None


def parse_harmony(text: str, schemas: Schemas | None) -> ParsedOutput:
    r = _Reader(text)
    reasoning: list[str] = []
    content: list[str] = []
    calls: list[dict[str, Any]] = []
    sep = f.H_START + "assistant"
    while not r.at_end():
        start = r.pos
        header = _harmony_header(r.upto(f.H_MESSAGE, "a message header"))
        if header is None:
            r.pos = start
            r.fail("expected a message header (analysis, final, or a call to=functions.NAME)")
        is_call, what = header
        if is_call:
            calls.append(_call(r, what, r.json("the arguments")))
            if not r.at_end():
                r.expect(f.H_CALL)
        else:
            body, hit = r.until([f.H_END, f.H_RETURN])
            (reasoning if what == "analysis" else content).append(body)
            if hit is not None:
                r.expect(hit)
        if not r.at_end():
            r.expect(sep)
            if r.at_end():
                r.fail("expected a message after <|start|>assistant")
    return ParsedOutput("".join(content), calls, "\n".join(reasoning) if reasoning else None)


PARSERS: dict[str, Callable[[str, Schemas | None], ParsedOutput]] = {
    "llama": parse_llama,
    "qwen": _hermes(think=True),
    "qwen2_5": _hermes(think=False),
    "qwen3_coder": parse_qwen3_coder,
    "mistral": parse_mistral,
    "deepseek_r1": _deepseek(_r1_call, "\n"),
    "deepseek_v3_1": _deepseek(_v3_1_call, ""),
    "kimi": parse_kimi,
    "harmony": parse_harmony,
}
"""Family name → ``parse(text, schemas)`` (``schemas``: tool name → parameters, or
``None``)."""


# -- Qwen XML values ----------------------------------------------------------------------
_ALL_TYPES = frozenset({"string", "number", "integer", "boolean", "null", "array", "object"})
_CLOSE = "</parameter>"


def _xml_value(r: _Reader, schema: Any, root: Any) -> Any:
    """One parameter's value up to and past ``</parameter>`` (``schema``: the property's
    schema, ``None`` when unknown)."""
    if isinstance(schema, dict) and ("enum" in schema or "const" in schema):
        raw = r.upto(_CLOSE, "a parameter value").strip(_WS)
        values = schema["enum"] if "enum" in schema else [schema["const"]]
        for v in values:
            if raw == (v if isinstance(v, str) else json.dumps(v)):
                return v
        r.fail(f"{raw!r} is not one of the parameter's values {values!r}")
    types = _ALL_TYPES if schema is None else _admits(schema, root, frozenset())
    if schema is None or "string" in types:
        start = r.pos
        r.skip_ws()
        containers = (
            "[{"
            if schema is None
            else ("[" if "array" in types else "") + ("{" if "object" in types else "")
        )
        if schema is None or (r.pos < len(r.text) and r.text[r.pos] in containers and containers):
            try:
                value = r.json("a JSON value")
                r.skip_ws()
                if r.skip(_CLOSE):
                    return value
            except ToolCallParseError:
                pass
        r.pos = start
        raw = r.upto(_CLOSE, "a parameter value")
        raw = raw[1:] if raw.startswith("\n") else raw
        return raw[:-1] if raw.endswith("\n") else raw
    r.skip_ws()
    value = r.json("a JSON value")
    r.skip_ws()
    r.expect(_CLOSE)
    return value


def _admits(s: Any, root: Any, seen: frozenset[str]) -> frozenset[str]:
    """The JSON types a value of ``s`` may have (an over-approximation)."""
    if s is False:
        return frozenset()
    if not isinstance(s, dict):
        return _ALL_TYPES
    ref = s.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and ref not in seen:
        node: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            node = node.get(part) if isinstance(node, dict) else None
        return _admits(node if node is not None else True, root, seen | {ref})
    if "const" in s or "enum" in s:
        values = [s["const"]] if "const" in s else s["enum"]
        return frozenset(_type_of(v) for v in values)
    out = set(_ALL_TYPES)
    if "type" in s:
        t = s["type"]
        out = {t} if isinstance(t, str) else set(t)
        if "number" in out:
            out.add("integer")
    for k in ("anyOf", "oneOf"):
        if isinstance(s.get(k), list):
            out &= set().union(*(_admits(b, root, seen) for b in s[k]))
    for b in s.get("allOf", []) if isinstance(s.get("allOf"), list) else []:
        out &= _admits(b, root, seen)
    return frozenset(out)


def _type_of(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "null"
    return "array" if isinstance(v, list) else "object"
