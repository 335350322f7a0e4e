"""Tool calling: the output format of a model family as a structural tag, and its reader.

::

    spec = corral.tool_calls(tools, "Qwen/Qwen3-8B", tool_choice="auto")
    compiled = corral.compile(spec, vocab)            # constrain generation with it
    ...
    out = corral.parse_tool_calls(text, "Qwen/Qwen3-8B", tools=tools)
    out.reasoning, out.content, out.tool_calls       # [{"name": ..., "arguments": {...}}]

:func:`tool_calls` checks an OpenAI-style request (:mod:`.request`), picks the model's
family (:mod:`.models`) and builds its format (:mod:`.formats`, markers as
:mod:`.markers` says); :func:`parse_tool_calls` reads an output back (:mod:`.parse`).
The families and the exact text of their calls are those of XGrammar 0.2.8's
``get_model_structural_tag``; the docstring of each builder in :mod:`.formats` says where
corral differs, and ``FORMATS[family].example`` shows a call.
"""

from __future__ import annotations

from typing import Any

from ...errors import ArgumentTypeError, InvalidArgumentError
from ..structural import Format
from .formats import FORMATS, Family
from .markers import Kit
from .models import family_of
from .parse import PARSERS, ParsedOutput, ToolCallParseError
from .request import check_schemas, read_request, read_tools

__all__ = [
    "FORMATS",
    "Family",
    "ParsedOutput",
    "ToolCallParseError",
    "family_of",
    "parse_tool_calls",
    "tool_calls",
]


def tool_calls(
    tools: Any,
    model: str,
    *,
    tool_choice: Any = "auto",
    parallel: bool = True,
    reasoning: str = "auto",
    reasoning_budget: int | None = None,
    vocab: Any = None,
) -> Format:
    """The structural tag of ``model``'s whole output: reasoning, free text and calls of
    ``tools`` (compile it with ``corral.compile(spec, vocab)``).

    Args:
        tools: OpenAI's ``tools`` list, ``[{"type": "function", "function": {"name",
            "description", "parameters"}}]`` (see :mod:`.request` for what is accepted).
        model: a family (``"llama"``, ``"qwen"``, ``"qwen2_5"``, ``"qwen3_coder"``,
            ``"mistral"``, ``"deepseek_r1"``, ``"deepseek_v3_1"``, ``"kimi"``,
            ``"harmony"``), an alias or a model id (:func:`family_of` gives the rule).
        tool_choice: ``"auto"`` (free text and any calls), ``"required"`` (at least one
            call, first), ``"none"`` (no call), or ``{"type": "function", "function":
            {"name": NAME}}`` (exactly that call).
        parallel: ``False``: at most one call, and the output ends after it.
        reasoning: ``"auto"`` (an optional reasoning block first), ``"enabled"`` (a
            block first), ``"disabled"`` (none; free text never holds the markers),
            ``"prefilled"`` (the prompt ends with the opening marker: the output starts
            with the block's text, then its closing marker). Families without a block
            take ``"auto"`` and ``"disabled"``.
        reasoning_budget: at most this many tokens of reasoning text (the block's
            ``AnyText(max_tokens=...)``): once they are spent, only the closing marker
            may follow.
        vocab: the :class:`corral.Vocabulary` the spec will be compiled for: each marker
            is then a ``Token`` where the vocabulary has it as a special token, text where
            it is not, and left out where it is an EOS token (a closing marker: the output
            may end there instead; any other: ``InvalidArgumentError``). Without it, the
            markers are as the family's tokenizer has them (the builder's docstring says).

    Raises:
        InvalidArgumentError, ArgumentTypeError: a malformed request, naming the entry
            and field (``tools[2].function.name``); an unknown model, listing the
            families; duplicate tool names; an unknown forced tool, listing the names.
        SchemaError, UnsupportedFeatureError, EmptyLanguageError, CompileBudgetError: a
            tool's ``parameters`` that cannot be compiled, the message starting
            ``tools[i] ("NAME"): `` and the ``location`` the JSON pointer in it.
    """
    family = FORMATS[family_of(model)]
    request = read_request(tools, tool_choice, parallel, reasoning, reasoning_budget)
    if not family.reasoning and request.reasoning in ("enabled", "prefilled"):
        raise InvalidArgumentError(
            f"the {family.name} format has no reasoning block: reasoning must be 'auto' or "
            f"'disabled', got {request.reasoning!r}"
        )
    if not family.reasoning and request.budget is not None:
        raise InvalidArgumentError(f"the {family.name} format has no reasoning block to budget")
    check_schemas(request.callable, family.style)
    return family.build(request, Kit(family.name, family.markers, vocab))


def parse_tool_calls(text: str, model: str, *, tools: Any = None) -> ParsedOutput:
    """Read ``text``, an output of ``model``'s format, back (see :mod:`.parse`).

    Args:
        text: the output, markers spelled out (decoded without skipping special tokens).
        model: as for :func:`tool_calls`.
        tools: the request's ``tools``, optional: with them a call of an unknown tool is
            refused and Qwen3-Coder's XML values are read by their schemas.

    Raises:
        ToolCallParseError: the text is not in the format (with the offset).
    """
    if not isinstance(text, str):
        raise ArgumentTypeError(f"text must be a str, not {type(text).__name__}")
    family = family_of(model)
    schemas = None if tools is None else {t.name: t.parameters for t in read_tools(tools)}
    out = PARSERS[family](text, schemas)
    if schemas is not None:
        for call in out.tool_calls:
            if call["name"] not in schemas:
                raise ToolCallParseError(
                    f"a call of {call['name']!r}, which is not in tools (known: {list(schemas)})",
                    offset=max(0, text.find(call["name"])),
                    text=text,
                )
    return out
