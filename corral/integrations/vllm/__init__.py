"""corral inside vLLM: a custom logits processor, request helpers, batched extraction.

::

    from vllm import LLM
    from corral.integrations.vllm import CorralLogitsProcessor, sampling_params

    llm = LLM("path/to/model", logits_processors=[CorralLogitsProcessor])
    outputs = llm.generate(prompts, sampling_params(schema=Person, max_tokens=256))

Served: ``vllm serve MODEL --logits-processors corral.integrations.vllm:CorralLogitsProcessor``
and a request with ``extra_body=extra_body(schema=...)`` (which is
``{"vllm_xargs": {"corral": json.dumps({"schema": ...})}}``; see ``docs/vllm.md``). Tool
calls through the chat API: ``extra_body=extra_body(tool_calls={"tools": tools, "model":
"qwen"})``, served with vLLM's tool parser for that format.

Modules: :mod:`.spec` (the constraint a request carries; no vLLM import), :mod:`.rows`
(the batch's constrained rows and their masks; no vLLM import), :mod:`.processor` (the
vLLM interface), :mod:`.engine` (documents through vLLM's offline engine, for
``corral extract --engine vllm``). Importing this package does not import vLLM; the
names below that need it load it on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec import KEY, ConstraintSpec, SpecError

if TYPE_CHECKING:  # pragma: no cover
    from .processor import CorralLogitsProcessor

__all__ = [
    "KEY",
    "ConstraintSpec",
    "CorralLogitsProcessor",
    "SpecError",
    "extra_body",
    "sampling_params",
]


def sampling_params(
    *,
    schema: Any = None,
    grammar: str | None = None,
    regex: str | None = None,
    structural_tag: Any = None,
    tool_calls: dict[str, Any] | None = None,
    start: str = "start",
    schema_options: dict[str, Any] | None = None,
    monitors: list[str] | None = None,
    monitor_state: Any = None,
    **sampling_kwargs: Any,
) -> Any:
    """``vllm.SamplingParams`` that carry one constraint for :class:`CorralLogitsProcessor`.

    Args:
        schema: a JSON Schema (dict, bool, JSON text) or a pydantic model class.
        grammar: Lark grammar text (``start`` names its start rule).
        regex: a regular expression the whole output must match.
        structural_tag: a structural tag (tool calls, reasoning, free text): a
            :mod:`corral.grammar.structural` format, e.g. from ``corral.tool_calls``, or
            XGrammar's JSON form.
        tool_calls: :func:`corral.tool_calls`'s arguments but ``vocab`` (``{"tools":
            [...], "model": "qwen", "tool_choice": "auto", ...}``): the format is built in
            the engine, for the engine's vocabulary.
        schema_options: JSON Schema compile options
            (:class:`corral.grammar.json_schema.Options`: ``whitespace``, ...).
        monitors: names of monitors registered in the engine's process
            (:mod:`corral.monitors.registry`; ``["python_members"]`` is built in), with or
            without one of the constraints above.
        monitor_state: JSON data the monitors' callbacks see as ``MonitorContext.state``.
        sampling_kwargs: any other ``SamplingParams`` argument (``max_tokens``,
            ``temperature``, ...). ``extra_args`` may be given; its ``"corral"`` key is
            set here.

    Raises:
        SpecError: not exactly one constraint (or none, with ``monitors``), or unknown
            options. The grammar itself, and the monitors' names, are checked when the
            engine admits the request.
    """
    from vllm import SamplingParams

    spec = ConstraintSpec.of(
        schema=schema,
        grammar=grammar,
        regex=regex,
        structural_tag=structural_tag,
        tool_calls=tool_calls,
        start=start,
        monitors=monitors,
        monitor_state=monitor_state,
        **(schema_options or {}),
    )
    extra = dict(sampling_kwargs.pop("extra_args", None) or {})
    extra[KEY] = spec.to_json()
    return SamplingParams(extra_args=extra, **sampling_kwargs)


def extra_body(
    *,
    schema: Any = None,
    grammar: str | None = None,
    regex: str | None = None,
    structural_tag: Any = None,
    tool_calls: dict[str, Any] | None = None,
    start: str = "start",
    schema_options: dict[str, Any] | None = None,
    monitors: list[str] | None = None,
    monitor_state: Any = None,
) -> dict[str, Any]:
    """The ``extra_body`` of an OpenAI-client request to ``vllm serve`` that carries one
    constraint: ``{"vllm_xargs": {"corral": "<the spec as JSON>"}}``.

    Takes the constraint arguments of :func:`sampling_params`; merge the result into any
    other ``extra_body`` fields. Needs no vLLM on the client.

    Raises:
        SpecError: not exactly one constraint (or none, with ``monitors``), or unknown
            options.
    """
    spec = ConstraintSpec.of(
        schema=schema,
        grammar=grammar,
        regex=regex,
        structural_tag=structural_tag,
        tool_calls=tool_calls,
        start=start,
        monitors=monitors,
        monitor_state=monitor_state,
        **(schema_options or {}),
    )
    return {"vllm_xargs": {KEY: spec.to_json()}}


def __getattr__(name: str) -> Any:
    if name == "CorralLogitsProcessor":
        from .processor import CorralLogitsProcessor

        return CorralLogitsProcessor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
