"""``corral demo`` (or ``python -m corral.demo``): schema-constrained extraction with a
small real model.

For a few short texts, the model (Gemma-3-270M by default, installed from PyPI and
converted once to an fp32 copy in the user's cache directory) writes a JSON record under a
JSON Schema with :func:`corral.generate`, and the same model writes freely from the same
prompt (greedy in both cases). Both are printed, with whether each output validates
against the schema, and how much of the step time the constraint took.

``corral demo --tools``: tool calling. For a few requests, the model writes greedily under
the structural tag of five tools (:data:`TOOLS`: weather, currency and unit conversion, web
search, calendar events) in the hermes format (:func:`corral.tool_calls`, ``"qwen"``) after
a few-shot prompt; the raw output is printed, then what :func:`corral.parse_tool_calls`
reads from it, each call's arguments validated against its tool's schema.

Options: ``--model PATH`` (a local Hugging Face model folder), ``--max-new-tokens N``
(default 64, with ``--tools`` 128), ``--tools``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

TEXTS = [
    "Maria Lopez, 34, moved from Seville to Berlin last spring and works as a nurse there.",
    "The parcel was signed for by Tom Becker (age 52) at our office in Dublin.",
    "Aiko Tanaka is 27 and lives in Osaka, where she teaches piano to children.",
    "Yesterday Dr. Emre Yilmaz of Izmir turned forty-one; he celebrated with his family.",
    "Our new intern, Lena, recently moved to Vienna.",
]

#: A person record. ``age`` and ``city`` may be ``null``: a schema that requires an integer
#: makes the model write one even when the text has none (it invents it). Allowing null,
#: and showing null in an example, lets the model say the value is missing.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 40},
        "age": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 120}, {"type": "null"}]},
        "city": {"anyOf": [{"type": "string", "minLength": 1, "maxLength": 40}, {"type": "null"}]},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}

PROMPT = """Extract the person from the text as JSON. Write null for what the text does not say.
Text: John Smith, 45, has lived in Paris for ten years.
JSON: {{"name": "John Smith", "age": 45, "city": "Paris"}}
Text: Our neighbour Sam Reid just started working at the bakery in Leeds.
JSON: {{"name": "Sam Reid", "age": null, "city": "Leeds"}}
Text: {text}
JSON:"""


def verdict(text: str) -> str:
    import jsonschema

    try:
        value = json.loads(text)
    except ValueError:
        return "not JSON"
    try:
        jsonschema.validate(value, SCHEMA)
    except jsonschema.ValidationError as e:
        return f"JSON, invalid: {e.message}"
    return "valid"


# ---------------------------------------------------------------------------------------
# corral demo --tools: tool calling
# ---------------------------------------------------------------------------------------
def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> Any:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


_UNITS = ["km", "mi", "m", "ft", "in", "cm", "kg", "lb", "g", "oz", "l", "gal", "c", "f"]
_ISO_4217 = {"type": "string", "pattern": "^[A-Z]{3}$", "description": "ISO 4217 code"}

#: Five tools in OpenAI's ``tools`` format (``uniqueItems`` is left out of ``attendees``:
#: a grammar cannot express it, and ``corral.tool_calls`` refuses it).
TOOLS: list[dict[str, Any]] = [
    _tool(
        "get_weather",
        "Current weather and forecast for a city.",
        {
            "location": {
                "type": "string",
                "minLength": 1,
                "maxLength": 60,
                "description": "City, with the country",
            },
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {
                "type": "integer",
                "minimum": 1,
                "maximum": 14,
                "description": "Forecast days",
            },
        },
        ["location"],
    ),
    _tool(
        "convert_currency",
        "Convert an amount of money between currencies at today's rate.",
        {
            "amount": {"type": "number", "exclusiveMinimum": 0},
            "from_currency": _ISO_4217,
            "to_currency": _ISO_4217,
        },
        ["amount", "from_currency", "to_currency"],
    ),
    _tool(
        "web_search",
        "Search the web.",
        {
            "query": {"type": "string", "minLength": 1, "maxLength": 120},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 10},
            "recency": {"type": "string", "enum": ["day", "week", "month", "year", "any"]},
        },
        ["query"],
    ),
    _tool(
        "create_calendar_event",
        "Add an event to the user's calendar.",
        {
            "title": {"type": "string", "minLength": 1, "maxLength": 80},
            "date": {"type": "string", "format": "date", "description": "YYYY-MM-DD"},
            "time": {
                "type": "string",
                "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$",
                "description": "HH:MM, 24-hour",
            },
            "duration_minutes": {"type": "integer", "minimum": 5, "maximum": 1440},
            "attendees": {
                "type": "array",
                "maxItems": 10,
                "items": {"type": "string", "minLength": 1, "maxLength": 40},
            },
        },
        ["title", "date", "time"],
    ),
    _tool(
        "convert_units",
        "Convert a quantity from one unit to another.",
        {
            "value": {"type": "number"},
            "from_unit": {"type": "string", "enum": _UNITS},
            "to_unit": {"type": "string", "enum": _UNITS},
        },
        ["value", "from_unit", "to_unit"],
    ),
]

#: The tool-call format: Qwen's hermes style, ``<tool_call>\n{"name": ..., "arguments":
#: ...}\n</tool_call>``. Gemma 3 has no tool-call format of its own, and its tokenizer has
#: no ``<tool_call>`` token: given the vocabulary, the markers are plain text.
TOOL_FORMAT = "qwen"


def hermes_call(name: str, **arguments: Any) -> str:
    """A call as the hermes format writes it."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


#: Few-shot turns ``(user, assistant)``: the assistant says in a few words what it does
#: (ending with a colon), then calls; or answers in plain text (ending with a full stop)
#: when no tool fits. (With a full stop before calls too, Gemma-3-270M follows every
#: answer with a call.)
TOOL_EXAMPLES: list[tuple[str, str]] = [
    ("Is it going to rain in Lisbon this weekend?",
     "Let me check the forecast for Lisbon:\n"
     + hermes_call("get_weather", location="Lisbon, Portugal", days=3)),
    ("How much is 250 US dollars in euros?",
     "I'll convert that at today's rate:\n"
     + hermes_call("convert_currency", amount=250, from_currency="USD", to_currency="EUR")),
    ("Find recent news about the Mars sample return mission.",
     "Searching the web for recent news:\n"
     + hermes_call("web_search", query="Mars sample return mission news", recency="week")),
    ("What is the capital of Canada?", "The capital of Canada is Ottawa."),
    ("Put a dentist appointment in my calendar for 2025-03-14 at 9:30, half an hour.",
     "Adding it to your calendar:\n"
     + hermes_call("create_calendar_event", title="Dentist appointment", date="2025-03-14",
                   time="09:30", duration_minutes=30)),
    ("How many pounds is 70 kg?",
     "Converting the units:\n"
     + hermes_call("convert_units", value=70, from_unit="kg", to_unit="lb")),
    ("What is 7 times 8?", "7 times 8 is 56."),
    ("How hot will it be in Phoenix tomorrow, in fahrenheit?",
     "Let me check the weather in Phoenix:\n"
     + hermes_call("get_weather", location="Phoenix, USA", unit="fahrenheit", days=2)),
    ("Search for the history of the Eiffel Tower.",
     "Searching the web:\n" + hermes_call("web_search", query="history of the Eiffel Tower")),
    ("Thanks, that's all for now!", "You're welcome! Have a great day."),
    ("Convert 3.5 miles to kilometers.",
     "Converting the units:\n"
     + hermes_call("convert_units", value=3.5, from_unit="mi", to_unit="km")),
    ("Meeting with Sara and Tom on 2025-01-20 at 15:00 about the budget.",
     "Adding the meeting to your calendar:\n"
     + hermes_call("create_calendar_event", title="Budget meeting", date="2025-01-20",
                   time="15:00", attendees=["Sara", "Tom"])),
    ("I need 80 British pounds in Japanese yen.",
     "I'll convert that at today's rate:\n"
     + hermes_call("convert_currency", amount=80, from_currency="GBP", to_currency="JPY")),
]  # fmt: skip

#: What ``corral demo --tools`` asks.
TOOL_REQUESTS = [
    "What's the weather like in Osaka today, in celsius?",
    "Search the web for the best hiking trails near Denver.",
    "Schedule a team sync on 2025-06-02 at 14:00 with Ana and Raj for 45 minutes.",
    "How many kilometers is 26.2 miles?",
    "What's the boiling point of water at sea level?",
]


def _signature(tool: dict[str, Any]) -> str:
    f = tool["function"]
    params = f["parameters"]
    args = ", ".join(k + ("" if k in params["required"] else "?") for k in params["properties"])
    return f"- {f['name']}({args}): {f['description']}"


TOOL_INSTRUCTIONS = (
    "An assistant that calls tools. Tools:\n"
    + "\n".join(_signature(t) for t in TOOLS)
    + '\nTo call a tool the assistant writes <tool_call>, a JSON line {"name": ..., '
    '"arguments": {...}}, then </tool_call>. When no tool is needed, it answers in plain text.'
)


def tool_prompt(tokenizer: Any, request: str, *, chat_template: str | None = None) -> list[int]:
    """Token ids of the few-shot prompt for ``request``.

    With a chat template (``chat_template``, else the tokenizer's), the instructions are
    the system message and the examples are earlier turns. Without one (the base
    Gemma-3-270M's tokenizer has none), a transcript: ``User: ...`` / ``Assistant: ...``
    lines, each assistant turn ending with a newline and the tokenizer's EOS token, so that
    the model ends its turn with EOS (the output then ends there). (Without that newline,
    the base model writes ``\n`` after ``</tool_call>`` rather than EOS, then invents the
    next ``User:`` turn.)
    """
    template = chat_template or getattr(tokenizer, "chat_template", None)
    if template:
        messages = [{"role": "system", "content": TOOL_INSTRUCTIONS}]
        for user, assistant in TOOL_EXAMPLES:
            messages += [{"role": "user", "content": user},
                         {"role": "assistant", "content": assistant}]  # fmt: skip
        messages.append({"role": "user", "content": request})
        out = tokenizer.apply_chat_template(
            messages, chat_template=template, add_generation_prompt=True, tokenize=True
        )
        return list(out["input_ids"] if hasattr(out, "keys") else out)
    eos = tokenizer.eos_token or ""
    turns = "".join(f"User: {u}\nAssistant: {a}\n{eos}\n" for u, a in TOOL_EXAMPLES)
    text = f"{TOOL_INSTRUCTIONS}\n\n{turns}User: {request}\nAssistant:"
    return list(tokenizer(text)["input_ids"])


def tool_spec(model: Any, tokenizer: Any, tool_choice: Any = "auto", *,
              parallel: bool = False) -> Any:  # fmt: skip
    """The structural tag of :data:`TOOLS` in :data:`TOOL_FORMAT` for the model's
    vocabulary (markers it lacks as special tokens are text), no reasoning block.

    ``parallel=False`` (default): at most one call, and the output ends after it. The base
    Gemma-3-270M seldom ends its turn with EOS after a call: more often it invents the next
    ``User:`` turn and calls again, until the token budget runs out inside a call.
    """
    import corral
    from corral.integrations.vocabularies import vocabulary_for

    return corral.tool_calls(TOOLS, TOOL_FORMAT, tool_choice=tool_choice, parallel=parallel,
                             reasoning="disabled",
                             vocab=vocabulary_for(model, tokenizer))  # fmt: skip


def call_errors(calls: list[dict[str, Any]]) -> list[str]:
    """Why each call of ``calls`` is invalid (an unknown tool, or arguments its schema
    refuses, checked with :func:`corral.validate`); empty when all are valid."""
    import jsonschema

    import corral

    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    errors = []
    for call in calls:
        if call["name"] not in schemas:
            errors.append(f"{call['name']}: unknown tool")
            continue
        try:
            corral.validate(call["arguments"], schemas[call["name"]])
        except jsonschema.ValidationError as e:
            errors.append(f"{call['name']}: {e.message}")
    return errors


def tools_demo(model: Any, tok: Any, max_new_tokens: int) -> int:
    """``corral demo --tools``: each of :data:`TOOL_REQUESTS`, greedy under the tool-call
    format (``tool_choice="auto"``); the raw output, then what
    :func:`corral.parse_tool_calls` reads from it, with the calls validated."""
    import corral

    t0 = time.perf_counter()
    spec = tool_spec(model, tok, "auto")
    names = ", ".join(t["function"]["name"] for t in TOOLS)
    print(f"tools: {names}\nformat: {TOOL_FORMAT} (hermes), markers as text, at most one call "
          f"(spec built in {time.perf_counter() - t0:.1f} s)\n")  # fmt: skip
    good = calls = 0
    for request in TOOL_REQUESTS:
        ids = tool_prompt(tok, request)
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            result = corral.generate(model, ids, grammar=spec, tokenizer=tok, details=True,
                                     max_new_tokens=max_new_tokens)  # fmt: skip
        except corral.IncompleteGenerationError as e:
            print(f"User: {request}\n  raw    : {e.partial_text!r}\n  incomplete: token "
                  "budget spent\n")  # fmt: skip
            continue
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        parsed = corral.parse_tool_calls(result.text, TOOL_FORMAT, tools=TOOLS)
        errors = call_errors(parsed.tool_calls)
        good += not errors
        calls += len(parsed.tool_calls)
        st = result.stats
        print(f"User: {request}")
        print(f"  raw    : {result.text!r}")
        print(f"  content: {parsed.content.strip()!r}")
        for call in parsed.tool_calls:
            print(f"  call   : {call['name']}({json.dumps(call['arguments'], ensure_ascii=False)})")
        status = "; ".join(errors) or ("calls valid" if parsed.tool_calls else "no call")
        print(f"  [{status}; {st.new_tokens} tokens, "
              f"{st.forced_tokens} forced; {wall:.1f} s ({cpu:.1f} s CPU)]\n")  # fmt: skip
    print(f"{good}/{len(TOOL_REQUESTS)} outputs parse, their calls valid ({calls} calls).")
    return 0 if good == len(TOOL_REQUESTS) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="corral demo", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="local Hugging Face model folder")
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="token budget of each output (default 64, with --tools 128)",
    )
    parser.add_argument(
        "--tools", action="store_true", help="tool calling with five tools instead of extraction"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import corral
    from corral.integrations.generate import decode_steps, prompt_ids
    from corral.integrations.models import DEFAULT_MODEL, resolve_model
    from corral.integrations.vocabularies import eos_ids_of
    from corral.sampler.decode import GenerationStats

    t0 = time.perf_counter()
    model, tok = resolve_model(args.model or DEFAULT_MODEL)
    print(f"model: {model.config.model_type}, vocabulary {model.config.vocab_size} "
          f"(loaded in {time.perf_counter() - t0:.1f} s)")  # fmt: skip
    if args.tools:
        return tools_demo(model, tok, args.max_new_tokens or 128)
    max_new_tokens = args.max_new_tokens or 64
    print(f"schema: {json.dumps(SCHEMA)}\n")
    ok = 0
    for text in TEXTS:
        prompt = PROMPT.format(text=text)
        try:
            result = corral.generate(model, prompt, schema=SCHEMA, tokenizer=tok, details=True,
                                     max_new_tokens=max_new_tokens)  # fmt: skip
            constrained = json.dumps(result.value, ensure_ascii=False)
            st = result.stats
            info = (f"{st.new_tokens} tokens, {st.forced_tokens} forced; "
                    f"mask {st.mask_share:.1%} of step time")  # fmt: skip
            ok += 1
        except corral.IncompleteGenerationError as e:
            constrained, info = e.partial_text, "incomplete: token budget spent"
        free_stats = GenerationStats()
        free_ids: list[int] = []
        for new in decode_steps(model, prompt_ids(tok, prompt), None, tokenizer=tok,
                                eos_ids=eos_ids_of(model, tok), stats=free_stats,
                                max_new_tokens=max_new_tokens):  # fmt: skip
            free_ids.extend(new)
            if "\n" in tok.decode(free_ids).strip(" "):
                break
        free = tok.decode(free_ids).strip().split("\n")[0]
        print(f"Text: {text}")
        print(f"  corral : {constrained}   [{verdict(constrained)}; {info}]")
        print(f"  free   : {free}   [{verdict(free)}]\n")
    print(f"{ok}/{len(TEXTS)} constrained outputs are valid records.")
    return 0 if ok == len(TEXTS) else 1


if __name__ == "__main__":
    sys.exit(main())
