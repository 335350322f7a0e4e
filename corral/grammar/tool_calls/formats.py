"""The tool-call formats of the model families: one small builder each, and the table
:data:`FORMATS` (family name → :class:`Family`).

A builder turns a checked :class:`~.request.Request` into a structural tag
(:mod:`corral.grammar.structural`) of the whole output: the reasoning block, free text
and calls. The text of each format is that of XGrammar 0.2.8's
``get_model_structural_tag`` for the same family (Mistral, which XGrammar does not have,
follows Mistral's chat template); where corral differs, the builder's docstring says so.

Common to all families:

* ``tool_choice="auto"``: free text with calls in it; ``"required"``: the output starts
  with a call (no free text before it); a forced tool: exactly that one call, nothing
  else; ``"none"`` (or no tools): free text only. ``parallel=False``: at most one call,
  and the output ends after it.
* ``reasoning``: ``"enabled"``: the block comes first; ``"auto"``: it may;
  ``"disabled"``: none; ``"prefilled"``: the prompt ends with the opening marker, so the
  output starts with the block's text and its closing marker. A family without a
  reasoning block takes ``"auto"`` and ``"disabled"`` only.
* Free text (content and reasoning) excludes the spelling of every marker
  (:mod:`.markers`), so outputs read back unambiguously; XGrammar excludes only
  ``<think>`` and ``</think>`` (and a few call markers for Kimi).
* A marker that is a special token in the family's tokenizer is written as that token
  (``Token``), as the model writes it; see :mod:`.markers` and the ``vocab`` argument of
  :func:`~corral.grammar.tool_calls.tool_calls`.
* Arguments are written as corral's JSON Schema front end writes values, with the JSON
  options given to ``corral.compile`` (``whitespace``, ``additional_properties``...). An
  object admits keys beyond its ``properties`` unless the schema says
  ``additionalProperties: false`` (JSON Schema's meaning); XGrammar closes objects by
  default: compile with ``additional_properties=False`` for its behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ...errors import InvalidArgumentError
from ..structural import (
    Format,
    JSONSchema,
    Optional,
    Regex,
    Star,
    Tag,
    TagsWithSeparator,
)
from .markers import Kit, one_of, seq
from .request import Request, Tool

__all__ = ["FORMATS", "Family"]

THINK_BEGIN, THINK_END = "<think>", "</think>"


@dataclass(frozen=True)
class Family:
    """A model family's format.

    Attributes:
        name: the family's name (a key of :data:`FORMATS`).
        build: ``build(request, kit) -> Format``.
        markers: marker text → how the family's tokenizer has it (``"token"``,
            ``"text"``, ``"eos"``; see :mod:`.markers`).
        reasoning: whether the family has a reasoning block.
        style: how arguments are written: ``"json"`` or ``"qwen_xml"``.
    """

    name: str
    build: Callable[[Request, Kit], Format]
    markers: Mapping[str, str]
    reasoning: bool
    style: str = "json"

    @property
    def example(self) -> str:
        """A call with reasoning, as the model writes it (documentation)."""
        return _EXAMPLES[self.name]


# -- shared parts -----------------------------------------------------------------------
def _think(kit: Kit, req: Request, suffix: str = "") -> Format | None:
    """The ``<think>`` block (then ``suffix``) as ``req.reasoning`` asks."""
    if req.reasoning == "disabled":
        return None
    body = kit.text(max_tokens=req.budget)
    if req.reasoning == "prefilled":
        return seq(body, kit.m(THINK_END), suffix)
    block = seq(Tag(kit.m(THINK_BEGIN), body, kit.m(THINK_END)), suffix)
    return Optional(block) if req.reasoning == "auto" else block


def _per_call(kit: Kit, req: Request, trigger: str, calls: list[Tag]) -> Format:
    """Calls that each begin with ``trigger``, in free text."""
    if not calls:
        return kit.text(trigger)
    if req.choice == "forced":
        return calls[0]
    return kit.region(
        trigger, calls, at_least_one=req.choice == "required", stop_after_first=not req.parallel
    )


def _block(
    kit: Kit,
    req: Request,
    begin: str,
    calls: list[Tag],
    separator: str,
    end: str,
    *,
    opening: Format | None = None,
    ends_output: bool = False,
) -> Format:
    """Calls inside one ``begin ... end`` block, separated by ``separator``; in free text
    for ``"auto"`` (``ends_output``: nothing after the block)."""
    if not calls:
        return kit.text(begin)
    if req.choice == "forced":
        inner: Format = calls[0]
    else:
        inner = TagsWithSeparator(
            calls, separator, at_least_one=True, stop_after_first=not req.parallel
        )
    block = Tag(kit.m(begin), seq(opening, inner), kit.m(end))
    if req.choice in ("required", "forced"):
        return block
    return kit.region(begin, [block], stop_after_first=ends_output or not req.parallel)


# -- Llama 3.1 - 3.3 --------------------------------------------------------------------
PYTHON_TAG = "<|python_tag|>"
LLAMA_TRIGGER = '{"name": '


def build_llama(req: Request, kit: Kit) -> Format:
    """Llama 3.1-3.3 (XGrammar ``"llama"``): a call is the JSON object
    ``{"name": "NAME", "parameters": ARGS}``.

    Either bare in free text (XGrammar's format: the trigger ``{"name": `` starts a call;
    free text before, between and after), or, beyond XGrammar, after the special token
    ``<|python_tag|>`` at the very start, calls separated by ``"; "`` and nothing else (how
    Llama writes calls in the ipython environment, and how vLLM's ``llama3_json`` parser
    splits them). ``<|python_tag|>`` is a special token of the Llama 3.1 tokenizer: a
    ``Token``. No reasoning block.
    """
    calls = [
        Tag(f'{LLAMA_TRIGGER}"{t.name}", "parameters": ', JSONSchema(t.parameters), "}")
        for t in req.callable
    ]
    if not calls:
        return kit.text(LLAMA_TRIGGER)
    if req.choice == "forced":
        return one_of([calls[0], seq(kit.m(PYTHON_TAG), calls[0])])
    after_tag = TagsWithSeparator(calls, "; ", at_least_one=True, stop_after_first=not req.parallel)
    bare = _per_call(kit, req, LLAMA_TRIGGER, calls)
    return one_of([bare, seq(kit.m(PYTHON_TAG), after_tag)])


# -- Qwen (hermes) ------------------------------------------------------------------------
TOOL_CALL_BEGIN, TOOL_CALL_END = "<tool_call>", "</tool_call>"
QWEN_MARKERS = {
    TOOL_CALL_BEGIN: "token",
    TOOL_CALL_END: "token",
    THINK_BEGIN: "token",
    THINK_END: "token",
}


def _hermes(req: Request, kit: Kit, think: bool) -> Format:
    calls = [
        kit.tag(
            TOOL_CALL_BEGIN,
            [f'\n{{"name": "{t.name}", "arguments": ', JSONSchema(t.parameters), "}\n"],
            TOOL_CALL_END,
        )
        for t in req.callable
    ]
    return seq(
        _think(kit, req, "\n\n") if think else None, _per_call(kit, req, TOOL_CALL_BEGIN, calls)
    )


def build_qwen(req: Request, kit: Kit) -> Format:
    """Qwen3 / QwQ hermes style (XGrammar ``"qwen_3"``): a call is
    ``<tool_call>\\n{"name": "NAME", "arguments": ARGS}\\n</tool_call>``, in free text;
    the reasoning block ``<think>TEXT</think>\\n\\n``.

    ``<tool_call>``, ``</tool_call>``, ``<think>`` and ``</think>`` are added tokens of the
    Qwen tokenizers (not marked special, so special to corral's default vocabulary):
    ``Token``s. XGrammar writes them as text, its trigger ``<tool_call>``.
    """
    return _hermes(req, kit, think=True)


def build_qwen2_5(req: Request, kit: Kit) -> Format:
    """Qwen2.5: as :func:`build_qwen`, without a reasoning block (the Qwen2.5 tokenizer
    has no ``<think>`` token)."""
    return _hermes(req, kit, think=False)


# -- Qwen3-Coder (XML) ----------------------------------------------------------------------
def build_qwen3_coder(req: Request, kit: Kit) -> Format:
    """Qwen3-Coder, Qwen3.5 (XGrammar ``"qwen_3_coder"``): a call is
    ``<tool_call>\\n<function=NAME>\\n`` then the arguments as XML parameters
    (``<parameter=P>\\nVALUE\\n</parameter>``, strings raw, other values JSON: the
    ``qwen_xml`` style, :mod:`corral.grammar.structural.xml_params`), then
    ``\\n</function>\\n</tool_call>``; reasoning ``<think>TEXT</think>\\n\\n``.

    Markers as :func:`build_qwen`; XGrammar's trigger is the text
    ``<tool_call>\\n<function=``, here the token ``<tool_call>``.
    """
    calls = [
        kit.tag(
            TOOL_CALL_BEGIN,
            [
                f"\n<function={t.name}>\n",
                JSONSchema(t.parameters, style="qwen_xml"),
                "\n</function>\n",
            ],
            TOOL_CALL_END,
        )
        for t in req.callable
    ]
    return seq(_think(kit, req, "\n\n"), _per_call(kit, req, TOOL_CALL_BEGIN, calls))


# -- Mistral ------------------------------------------------------------------------------
TOOL_CALLS = "[TOOL_CALLS]"


def build_mistral(req: Request, kit: Kit) -> Format:
    """Mistral (tokenizer v3 to v7: Mistral-7B-Instruct-v0.3, Mixtral-8x22B, Nemo, Small,
    Large), not in XGrammar: the special token ``[TOOL_CALLS]``, then the calls as one JSON
    array, ``[{"name": "NAME", "arguments": ARGS}, ...]`` (``", "`` between calls; one
    optional space before ``[``, as the v0.3 template writes ``[TOOL_CALLS] [``). Free
    text may come before ``[TOOL_CALLS]``; the array ends the output (the chat template
    puts EOS right after it). ``[TOOL_CALLS]`` is a control token: a ``Token``. No
    reasoning block. (The v11 format, ``[TOOL_CALLS]NAME[ARGS]{...}``, is not covered.)
    """
    calls = [
        Tag(f'{{"name": "{t.name}", "arguments": ', JSONSchema(t.parameters), "}")
        for t in req.callable
    ]
    return _block(
        kit, req, TOOL_CALLS, calls, ", ", "]", opening=one_of(["[", " ["]), ends_output=True
    )


# -- DeepSeek -----------------------------------------------------------------------------
DS_CALLS_BEGIN, DS_CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
DS_CALL_BEGIN, DS_CALL_END, DS_SEP = (
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
)
DS_MARKERS = {
    m: "token"
    for m in (
        DS_CALLS_BEGIN,
        DS_CALLS_END,
        DS_CALL_BEGIN,
        DS_CALL_END,
        DS_SEP,
        THINK_BEGIN,
        THINK_END,
    )
}


def build_deepseek_r1(req: Request, kit: Kit) -> Format:
    """DeepSeek-R1, R1-0528 (XGrammar ``"deepseek_r1"``): calls inside
    ``<｜tool▁calls▁begin｜>`` ... ``<｜tool▁calls▁end｜>``, separated by ``"\\n"``; a call
    is ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\nARGS\\n```
    <｜tool▁call▁end｜>`` (one line); reasoning ``<think>TEXT</think>``.

    The markers are added tokens of the DeepSeek tokenizer: ``Token``s (XGrammar: text).
    R1's chat template ends the prompt with ``<think>\\n``: use ``reasoning="prefilled"``
    (XGrammar's ``"enabled"``).
    """
    calls = [
        kit.tag(
            DS_CALL_BEGIN,
            ["function", kit.m(DS_SEP), f"{t.name}\n```json\n", JSONSchema(t.parameters), "\n```"],
            DS_CALL_END,
        )
        for t in req.callable
    ]
    return seq(_think(kit, req), _block(kit, req, DS_CALLS_BEGIN, calls, "\n", DS_CALLS_END))


def build_deepseek_v3_1(req: Request, kit: Kit) -> Format:
    """DeepSeek-V3.1, V3.2-Exp (XGrammar ``"deepseek_v3_1"``): calls inside
    ``<｜tool▁calls▁begin｜>`` ... ``<｜tool▁calls▁end｜>``, nothing between them; a call is
    ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>``; reasoning
    ``<think>TEXT</think>``.

    Markers as :func:`build_deepseek_r1`. The template ends the prompt with ``<think>`` in
    thinking mode (``reasoning="prefilled"``) and ``</think>`` otherwise
    (``"disabled"``).
    """
    calls = [
        kit.tag(DS_CALL_BEGIN, [t.name, kit.m(DS_SEP), JSONSchema(t.parameters)], DS_CALL_END)
        for t in req.callable
    ]
    return seq(_think(kit, req), _block(kit, req, DS_CALLS_BEGIN, calls, "", DS_CALLS_END))


# -- Kimi K2 ------------------------------------------------------------------------------
KIMI_SECTION_BEGIN, KIMI_SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
KIMI_CALL_BEGIN, KIMI_ARGS, KIMI_CALL_END = (
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
)
KIMI_MARKERS = {
    m: "token"
    for m in (
        KIMI_SECTION_BEGIN,
        KIMI_SECTION_END,
        KIMI_CALL_BEGIN,
        KIMI_ARGS,
        KIMI_CALL_END,
        THINK_BEGIN,
        THINK_END,
    )
}


def build_kimi(req: Request, kit: Kit) -> Format:
    """Kimi K2, K2.5 (XGrammar ``"kimi"``): calls inside ``<|tool_calls_section_begin|>``
    ... ``<|tool_calls_section_end|>``, nothing between them; a call is
    ``<|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>ARGS<|tool_call_end|>``
    (``INDEX``: digits); reasoning ``<think>TEXT</think>``.

    The markers are special tokens of the Kimi tokenizer: ``Token``s. XGrammar's
    ``\\d+`` index is ``[0-9]+`` here (ASCII digits only).
    """
    calls = [
        kit.tag(
            KIMI_CALL_BEGIN,
            [f"functions.{t.name}:", Regex("[0-9]+"), kit.m(KIMI_ARGS), JSONSchema(t.parameters)],
            KIMI_CALL_END,
        )
        for t in req.callable
    ]
    return seq(_think(kit, req), _block(kit, req, KIMI_SECTION_BEGIN, calls, "", KIMI_SECTION_END))


# -- harmony (gpt-oss) ----------------------------------------------------------------------
H_START, H_CHANNEL, H_MESSAGE, H_CONSTRAIN = (
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|constrain|>",
)
H_CALL, H_END, H_RETURN = "<|call|>", "<|end|>", "<|return|>"
HARMONY_MARKERS = {
    H_START: "token",
    H_CHANNEL: "token",
    H_MESSAGE: "token",
    H_CONSTRAIN: "token",
    H_CALL: "token",
    H_END: "token",
    H_RETURN: "eos",
}


@dataclass(frozen=True)
class _Message:
    head: Format
    body: Format
    closers: tuple[str, ...]


def build_harmony(req: Request, kit: Kit) -> Format:
    """gpt-oss's harmony messages (XGrammar ``"harmony"``), separated by
    ``<|start|>assistant``:

    * ``<|channel|>analysis<|message|>TEXT`` then ``<|end|>`` or ``<|return|>``: reasoning;
    * ``<|channel|>final<|message|>TEXT`` then ``<|end|>`` or ``<|return|>``: the answer;
    * a call, ``ARGS<|call|>`` after one of the headers
      ``<|channel|>commentary to=functions.NAME<|constrain|>json<|message|>`` (beyond
      XGrammar, also with a space before ``<|constrain|>``, as the harmony docs write it),
      `` to=functions.NAME<|channel|>commentary <|constrain|>json<|message|>`` or
      `` to=functions.NAME<|channel|>commentary json<|message|>``.

    All the markers are special tokens of the o200k_harmony tokenizer: ``Token``s; by
    default ``<|return|>`` is its EOS token, so a message it would close may instead end
    the output (see :mod:`.markers`: pass ``vocab`` when ``<|call|>`` is an EOS too).

    Beyond XGrammar, whose message list is unconstrained: ``"required"`` and a forced tool
    need a call (and leave the final channel out, as XGrammar does); ``reasoning="enabled"``
    puts an analysis message first; with ``parallel=False`` or a forced tool the call is
    the last message. ``reasoning="prefilled"`` is refused. Builtin tools (``browser``,
    ``python``) are not covered.
    """
    if req.reasoning == "prefilled":
        raise InvalidArgumentError(
            "the harmony format has no prefilled reasoning: use 'enabled', 'auto' or 'disabled'"
        )
    m = kit.m
    analysis = _Message(
        seq(m(H_CHANNEL), "analysis", m(H_MESSAGE)),
        kit.text(max_tokens=req.budget),
        (H_END, H_RETURN),
    )
    final = _Message(seq(m(H_CHANNEL), "final", m(H_MESSAGE)), kit.text(), (H_END, H_RETURN))
    calls = [
        _Message(_harmony_call_head(kit, t), JSONSchema(t.parameters), (H_CALL,))
        for t in req.callable
    ]
    others = ([analysis] if req.reasoning != "disabled" else []) + (
        [final] if req.choice in ("auto", "none") else []
    )
    sep = seq(m(H_START), "assistant")

    def closed(msgs: list[_Message]) -> Format | None:
        out = []
        for msg in msgs:
            closer, _ = kit.closers(msg.closers)
            if closer is not None:
                out.append(seq(msg.head, msg.body, closer))
        return one_of(out) if out else None

    def last(msgs: list[_Message]) -> Format | None:
        out = [f] if (f := closed(msgs)) is not None else []
        out += [seq(msg.head, msg.body) for msg in msgs if kit.closers(msg.closers)[1]]
        return one_of(out) if out else None

    def run(msgs: list[_Message]) -> Format | None:  # any number of closed messages, each then sep
        f = closed(msgs)
        return None if f is None else Star(seq(f, sep))

    body: Format | None
    if req.choice in ("auto", "none"):
        body = seq(run(others + calls if req.parallel else others), last(others + calls))
    elif req.choice == "forced" or not req.parallel:
        body = seq(run(others), last(calls))
    else:
        first_call, more = closed(calls), run(others + calls)
        tail = [last(calls)]
        if first_call is not None:
            tail.append(seq(first_call, sep, more, last(others + calls)))
        body = seq(run(others), one_of([f for f in tail if f is not None]))
    if req.reasoning == "enabled":
        opening = closed([analysis])
        if opening is None:
            raise InvalidArgumentError(
                "reasoning 'enabled' needs <|end|> to close the analysis message, but the "
                "vocabulary has it as an EOS token"
            )
        return seq(opening, sep, body)
    return Optional(body) if req.choice in ("auto", "none") else body


def _harmony_call_head(kit: Kit, tool: Tool) -> Format:
    m, to = kit.m, f"to=functions.{tool.name}"
    return one_of(
        [
            seq(
                m(H_CHANNEL),
                one_of([f"commentary {to}", f"commentary {to} "]),
                m(H_CONSTRAIN),
                "json",
                m(H_MESSAGE),
            ),
            seq(f" {to}", m(H_CHANNEL), "commentary ", m(H_CONSTRAIN), "json", m(H_MESSAGE)),
            seq(f" {to}", m(H_CHANNEL), "commentary json", m(H_MESSAGE)),
        ]
    )


# -- the table ----------------------------------------------------------------------------
_ARGS = '{"city": "Paris"}'
_HERMES_CALL = f'<tool_call>\n{{"name": "get_weather", "arguments": {_ARGS}}}\n</tool_call>'
_EXAMPLES = {
    "llama": f'<|python_tag|>{{"name": "get_weather", "parameters": {_ARGS}}}',
    "qwen": f"<think>TEXT</think>\n\n{_HERMES_CALL}",
    "qwen2_5": _HERMES_CALL,
    "qwen3_coder": (
        "<think>TEXT</think>\n\n<tool_call>\n<function=get_weather>\n"
        "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
    ),
    "mistral": f'[TOOL_CALLS][{{"name": "get_weather", "arguments": {_ARGS}}}]',
    "deepseek_r1": (
        f"<think>TEXT</think>{DS_CALLS_BEGIN}{DS_CALL_BEGIN}function{DS_SEP}get_weather\n"
        f"```json\n{_ARGS}\n```{DS_CALL_END}{DS_CALLS_END}"
    ),
    "deepseek_v3_1": (
        f"<think>TEXT</think>{DS_CALLS_BEGIN}{DS_CALL_BEGIN}get_weather{DS_SEP}{_ARGS}"
        f"{DS_CALL_END}{DS_CALLS_END}"
    ),
    "kimi": (
        f"<think>TEXT</think>{KIMI_SECTION_BEGIN}{KIMI_CALL_BEGIN}functions.get_weather:0"
        f"{KIMI_ARGS}{_ARGS}{KIMI_CALL_END}{KIMI_SECTION_END}"
    ),
    "harmony": (
        "<|channel|>analysis<|message|>TEXT<|end|><|start|>assistant<|channel|>commentary "
        f"to=functions.get_weather <|constrain|>json<|message|>{_ARGS}<|call|>"
    ),
}

FORMATS: dict[str, Family] = {
    f.name: f
    for f in (
        Family("llama", build_llama, {PYTHON_TAG: "token"}, reasoning=False),
        Family("qwen", build_qwen, QWEN_MARKERS, reasoning=True),
        Family(
            "qwen2_5",
            build_qwen2_5,
            {TOOL_CALL_BEGIN: "token", TOOL_CALL_END: "token"},
            reasoning=False,
        ),
        Family("qwen3_coder", build_qwen3_coder, QWEN_MARKERS, reasoning=True, style="qwen_xml"),
        Family("mistral", build_mistral, {TOOL_CALLS: "token"}, reasoning=False),
        Family("deepseek_r1", build_deepseek_r1, DS_MARKERS, reasoning=True),
        Family("deepseek_v3_1", build_deepseek_v3_1, DS_MARKERS, reasoning=True),
        Family("kimi", build_kimi, KIMI_MARKERS, reasoning=True),
        Family("harmony", build_harmony, HARMONY_MARKERS, reasoning=True),
    )
}
"""Family name → :class:`Family`."""
