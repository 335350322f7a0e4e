"""``corral.extract``: documents in, one schema-valid record per document out.

Documents are batched through ``model.generate`` with a
:class:`~corral.integrations.transformers.GrammarLogitsProcessor` (greedy by default,
left padding), each row under the same compiled schema; the processor is given the model
and its tokenizer, so scores of another width are refused. Every output is checked twice:
the matcher must accept it (so a row cut off by ``max_new_tokens`` is an error, never a
record) and it must parse and validate against the schema.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import (
    ArgumentTypeError,
    CorralError,
    IncompleteGenerationError,
    InvalidArgumentError,
    ValidationFailedError,
)
from .constraint import compile_constraint, is_pydantic_model, uses_spans
from .models import resolve_model
from .vocabularies import vocabulary_for

DEFAULT_PROMPT = (
    "Extract the information in the text as one JSON object that follows this JSON Schema.\n"
    "Where the text does not state a value and the schema allows null, write null.\n"
    "Schema: {schema}\n"
    "Text: {document}\n"
    "JSON:"
)


@dataclass
class Extraction:
    """The outcome for one document: ``value`` when it succeeded, else ``error``."""

    index: int
    value: Any = None
    text: str = ""
    error: CorralError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def extract(
    model: Any,
    documents: Iterable[str],
    schema: Any,
    *,
    prompt: str = DEFAULT_PROMPT,
    tokenizer: Any = None,
    batch_size: int = 8,
    max_new_tokens: int = 512,
    errors: str = "raise",
    engine: str = "transformers",
    engine_options: dict[str, Any] | None = None,
    heal: bool = True,
    **schema_options: Any,
) -> list[Any]:
    """One validated record per document, in order.

    Args:
        model, tokenizer: as for :func:`corral.generate`.
        documents: texts.
        schema: JSON Schema or pydantic model class.
        prompt: template with ``{document}`` (and optionally ``{schema}``, the schema as
            compact JSON).
        batch_size: documents per ``model.generate`` call (with ``engine="vllm"``:
            documents handed to the engine at once, which batches them continuously).
        engine: ``"transformers"`` (``model.generate`` in this process), ``"vllm"``
            (vLLM's offline engine with :class:`~corral.integrations.vllm.CorralLogitsProcessor`;
            ``model`` is then a local model folder or a ``vllm.LLM`` built with that
            processor; see docs/vllm.md), or ``"ray"`` (workers on a Ray cluster, each
            loading ``model``, a local folder on every node; see docs/ray.md).
        engine_options: with ``engine="vllm"``, keyword arguments of ``vllm.LLM``
            (``tensor_parallel_size``, ``gpu_memory_utilization``, ...); with
            ``engine="ray"``: ``address``, ``workers``, ``cpus_per_worker``, ``threads``
            (:class:`~corral.integrations.ray.run.RayOptions`).
        errors: ``"raise"`` (the first failed document raises its error) or ``"none"``
            (a failed document gives ``None``).
        heal: token healing (as in :func:`corral.generate`): when the prompt ends inside
            what could be a longer token (the default prompt's ``JSON:``), it is backed up
            by that token and the output's first tokens spell its bytes again, then the
            record. Exact; ``False`` keeps the prompt's tokens as they are.

    Returns:
        The records (dicts, or model instances for a pydantic class).
    """
    if errors not in ("raise", "none"):
        raise InvalidArgumentError(f"errors must be 'raise' or 'none', got {errors!r}")
    out: list[Any] = []
    for item in extract_iter(
        model, documents, schema, prompt=prompt, tokenizer=tokenizer, batch_size=batch_size,
        max_new_tokens=max_new_tokens, engine=engine, engine_options=engine_options,
        heal=heal, **schema_options,
    ):  # fmt: skip
        if item.error is not None and errors == "raise":
            raise item.error
        out.append(item.value)
    return out


def extract_iter(
    model: Any,
    documents: Iterable[str],
    schema: Any,
    *,
    prompt: str = DEFAULT_PROMPT,
    tokenizer: Any = None,
    batch_size: int = 8,
    max_new_tokens: int = 512,
    engine: str = "transformers",
    engine_options: dict[str, Any] | None = None,
    heal: bool = True,
    **schema_options: Any,
) -> Iterator[Extraction]:
    """Yield an :class:`Extraction` per document, in order, batch by batch."""
    from ..automata.bitmask import as_int

    batch_size = as_int(batch_size, "batch_size", minimum=1)
    if engine == "ray":
        yield from _on_ray(model, documents, schema, prompt, tokenizer, batch_size,
                           max_new_tokens, engine_options, heal, schema_options)  # fmt: skip
        return
    ex = make_extractor(model, schema, prompt=prompt, tokenizer=tokenizer,
                        max_new_tokens=max_new_tokens, engine=engine,
                        engine_options=engine_options, heal=heal, **schema_options)  # fmt: skip
    batch: list[tuple[int, str]] = []
    try:
        for i, doc in enumerate(documents):
            if not isinstance(doc, str):
                raise ArgumentTypeError(
                    f"documents must be strings, got document {i} of type {type(doc).__name__}"
                )
            batch.append((i, doc))
            if len(batch) == batch_size:
                yield from ex.run(batch)
                batch = []
        if batch:
            yield from ex.run(batch)
    finally:
        ex.close()  # an engine the extractor started (a vLLM one) stops with it


def _on_ray(
    model: Any,
    documents: Iterable[str],
    schema: Any,
    prompt: str,
    tokenizer: Any,
    batch_size: int,
    max_new_tokens: int,
    engine_options: dict[str, Any] | None,
    heal: bool,
    schema_options: dict[str, Any],
) -> Iterator[Extraction]:
    """``engine="ray"``: the documents extracted by workers on a Ray cluster
    (:mod:`corral.integrations.ray.run`; ``engine_options``: its
    :class:`~corral.integrations.ray.run.RayOptions`)."""
    if not isinstance(model, (str, os.PathLike)) or tokenizer is not None:
        raise InvalidArgumentError(
            "with engine='ray' the model is a local folder (on every node) or 'gemma3-270m', "
            "loaded by each worker: expected a path and no tokenizer="
        )
    if not heal:
        raise InvalidArgumentError("engine='ray' heals prompts (heal=True) only")
    docs = []
    for i, doc in enumerate(documents):
        if not isinstance(doc, str):
            raise ArgumentTypeError(
                f"documents must be strings, got document {i} of type {type(doc).__name__}"
            )
        docs.append(doc)
    from .ray.run import RayOptions, extract_documents

    yield from extract_documents(
        str(model), docs, schema, options=RayOptions.of(engine_options), prompt=prompt,
        batch_size=batch_size, max_new_tokens=max_new_tokens, **schema_options,
    )  # fmt: skip


def with_spans(schema: str | dict[str, Any], fields: Sequence[str]) -> str:
    """A copy of ``schema`` (JSON text or a dict) as JSON text, with the string values of the
    top-level properties ``fields`` marked ``"x-corral-span": true`` (their text must
    be copied from the document). A property's string branches are marked where it is an
    ``anyOf``/``oneOf`` (e.g. a string or null).

    Raises:
        CorralError: the schema is not JSON, or has no such property, or the property
            allows no plain string.
    """
    import copy

    from ..grammar.json_schema.load import as_schema

    doc = copy.deepcopy(as_schema(schema))  # the caller's schema is not changed
    props = doc.get("properties") if isinstance(doc, dict) else None
    for name in fields:
        prop = props.get(name) if isinstance(props, dict) else None
        if not isinstance(prop, dict):
            raise CorralError(f"--span {name}: the schema has no top-level property {name!r}")
        branches = [prop]
        for comb in ("anyOf", "oneOf"):
            if isinstance(prop.get(comb), list):
                branches = [b for b in prop[comb] if isinstance(b, dict)]
        marked = 0
        for b in branches:
            if b.get("type") == "string":
                b["x-corral-span"] = True
                marked += 1
        if not marked:
            raise CorralError(
                f'--span {name}: the property has no branch {{"type": "string"}} to mark'
            )
    return json.dumps(doc, ensure_ascii=False)


ENGINES = ("transformers", "vllm")


def make_extractor(
    model: Any,
    schema: Any,
    *,
    prompt: str = DEFAULT_PROMPT,
    tokenizer: Any = None,
    max_new_tokens: int = 512,
    engine: str = "transformers",
    engine_options: dict[str, Any] | None = None,
    heal: bool = True,
    **schema_options: Any,
) -> Any:
    """An :class:`Extractor` (``engine="transformers"``) or a
    :class:`~corral.integrations.vllm.engine.VLLMExtractor` (``engine="vllm"``, which
    takes the prompt's tokens as they are: ``heal`` applies to ``"transformers"``)."""
    if engine not in ENGINES:
        raise InvalidArgumentError(f"engine must be one of {list(ENGINES)}, got {engine!r}")
    if not isinstance(heal, bool):
        raise ArgumentTypeError(f"heal must be True or False, not {type(heal).__name__} {heal!r}")
    if engine == "transformers":
        if engine_options:
            raise InvalidArgumentError(
                f"engine_options apply to engine='vllm' only, got engine={engine!r} with "
                f"engine_options={sorted(engine_options)}"
            )
        return Extractor(model, schema, prompt=prompt, tokenizer=tokenizer,
                         max_new_tokens=max_new_tokens, heal=heal, **schema_options)  # fmt: skip
    if tokenizer is not None:
        raise InvalidArgumentError(
            "with engine='vllm' the tokenizer is the model folder's: expected no tokenizer=, "
            f"got a {type(tokenizer).__name__}"
        )
    if uses_spans(schema):
        raise InvalidArgumentError(
            "span constraints (x-corral-span) need a grammar per document, which "
            "engine='vllm' does not build yet: use engine='transformers'"
        )
    if schema_options.get("entities") is not None:
        raise InvalidArgumentError(
            "entity sets (entities=) are Python objects that vLLM's requests cannot carry: "
            "use engine='transformers'"
        )
    try:
        from .vllm.engine import VLLMExtractor
    except ImportError as e:
        raise CorralError(
            f"engine='vllm' needs vLLM ({e}): pip install 'corral[vllm]' (GPU) or see "
            "docs/vllm.md for the CPU build"
        ) from None
    return VLLMExtractor(model, schema, prompt=prompt, max_new_tokens=max_new_tokens,
                         engine_options=engine_options, **schema_options)  # fmt: skip


class Extractor:
    """Model, tokenizer, compiled schema and prompt, set up once; :meth:`run` extracts
    the records of one batch of ``(index, document)`` pairs (one ``model.generate``)."""

    def __init__(
        self,
        model: Any,
        schema: Any,
        *,
        prompt: str = DEFAULT_PROMPT,
        tokenizer: Any = None,
        max_new_tokens: int = 512,
        heal: bool = True,
        **schema_options: Any,
    ) -> None:
        from ..automata.bitmask import as_int

        if "{document}" not in prompt:
            raise InvalidArgumentError(
                f"prompt must contain the placeholder {{document}}, got {prompt[:60]!r}"
            )
        max_new_tokens = as_int(max_new_tokens, "max_new_tokens", minimum=1)
        self.lm, self.tok = resolve_model(model, tokenizer)
        self.vocab = vocabulary_for(self.lm, self.tok)
        self.schema, self.schema_options = schema, schema_options
        # span constraints copy from each document: one grammar per document (the schema
        # is checked here, with a one-character source)
        self.spans = uses_spans(schema)
        self.compiled, self.parse = compile_constraint(
            self.vocab, schema=schema, **({"source": "x"} if self.spans else {}), **schema_options
        )
        self.prompt = prompt.replace("{schema}", schema_json(schema))
        self.max_new_tokens = max_new_tokens
        self.heal = heal

    def close(self) -> None:
        """Nothing to release (the model is the caller's or the process's cache's)."""

    def run(self, batch: Sequence[tuple[int, str]]) -> Iterator[Extraction]:
        if not self.spans:
            grammars = [(self.compiled, self.parse)] * len(batch)
        else:
            grammars = [
                compile_constraint(self.vocab, schema=self.schema, source=doc,
                                   **self.schema_options)
                for _, doc in batch
            ]  # fmt: skip
        return _run_batch(self.lm, self.tok, self.vocab, grammars, self.prompt, batch,
                          self.max_new_tokens, heal=self.heal)  # fmt: skip


def schema_json(schema: Any) -> str:
    """``schema`` (a JSON Schema, JSON text or a pydantic class) as compact JSON text, for
    the ``{schema}`` placeholder of a prompt."""
    if is_pydantic_model(schema):
        schema = schema.model_json_schema()
    if isinstance(schema, str):
        return schema
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def _run_batch(
    lm: Any,
    tok: Any,
    vocab: Any,
    grammars: Sequence[tuple[Any, Any]],
    prompt: str,
    batch: Sequence[tuple[int, str]],
    max_new_tokens: int,
    *,
    heal: bool = False,
) -> Iterator[Extraction]:
    """Extract a batch in one ``model.generate``; ``grammars``: ``(compiled, parse)`` of
    each row; ``heal``: back each prompt up by a last token that could be longer, and
    have the output spell its bytes again first (:mod:`corral.sampler.healing`)."""
    from .models import context_length

    rows = [list(tok(prompt.replace("{document}", d))["input_ids"]) for _, d in batch]
    # a prompt that fills the model's context is that document's error; the rest go on
    refused = refuse_long(batch, [len(r) for r in rows], context_length(lm.config))
    keep = [i for i in range(len(batch)) if i not in refused]
    # (a generator: with every prompt refused, the model is never called)
    done = _generate(lm, tok, vocab, [grammars[i] for i in keep], [batch[i] for i in keep],
                     [rows[i] for i in keep], max_new_tokens, heal=heal)  # fmt: skip
    return with_refused(len(batch), refused, done)


def refuse_long(
    batch: Sequence[tuple[int, str]], lengths: Sequence[int], context: int | None
) -> dict[int, Extraction]:
    """``{position: Extraction}`` of the documents of ``batch`` whose prompts
    (``lengths`` tokens) fill a model context of ``context`` tokens
    (:class:`~corral.errors.PromptTooLongError`)."""
    from .models import check_prompt_length

    refused = {}
    for i, ((index, _), n) in enumerate(zip(batch, lengths, strict=True)):
        try:
            check_prompt_length(n, context, f"the prompt of document {index}")
        except CorralError as e:
            refused[i] = Extraction(index, None, "", without_traceback(e))
    return refused


def without_traceback(error: CorralError) -> CorralError:
    """``error`` with no traceback: an :class:`Extraction` keeps its error after the call
    that raised it returned, and the frames of a traceback would keep that call's
    extractor (its model, its vLLM engine) alive through a reference cycle, until a
    garbage collection that may not come before the process exits."""
    return error.with_traceback(None)


def with_refused(
    n: int, refused: dict[int, Extraction], results: Iterator[Extraction]
) -> Iterator[Extraction]:
    """The outcomes of ``n`` documents in order: ``refused[i]`` where there is one, else
    the next of ``results`` (the other documents', in order)."""
    for i in range(n):
        yield refused[i] if i in refused else next(results)


def _generate(
    lm: Any,
    tok: Any,
    vocab: Any,
    grammars: Sequence[tuple[Any, Any]],
    batch: Sequence[tuple[int, str]],
    rows: list[list[int]],
    max_new_tokens: int,
    *,
    heal: bool,
) -> Iterator[Extraction]:
    """:func:`_run_batch` once the prompts are tokens (``rows``)."""
    import torch

    from .transformers import GrammarLogitsProcessor

    eos = list(vocab.eos_token_ids)
    pad = tok.pad_token_id if tok.pad_token_id is not None else (eos[0] if eos else 0)
    healed = [b""] * len(rows)
    if heal:
        from ..sampler.healing import heal_prompt

        for i, r in enumerate(rows):
            rows[i], healed[i] = heal_prompt(vocab, r)
    width = max(len(r) for r in rows)
    # left padding (the tokenizer is not changed): every prompt ends at the same column
    input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    attention = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    device = next(lm.parameters()).device
    proc = GrammarLogitsProcessor([c for c, _ in grammars], tokenizer=tok, model=lm,
                                  healed=healed if any(healed) else None)  # fmt: skip
    from transformers import LogitsProcessorList

    with torch.no_grad():
        out = lm.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention.to(device),
            logits_processor=LogitsProcessorList([proc]),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=eos or None,
            pad_token_id=pad,
        )
    eos_set = set(eos)
    rows_out = out[:, width:].tolist()
    for (index, _), row, (compiled, parse), cut in zip(
        batch, rows_out, grammars, healed, strict=True
    ):
        ids: list[int] = []
        for t in row:
            if t in eos_set:
                break
            ids.append(t)
        yield checked(index, ids, vocab, compiled, parse, max_new_tokens, healed=cut)


def checked(
    index: int,
    ids: list[int],
    vocab: Any,
    compiled: Any,
    parse: Any,
    max_new_tokens: int,
    *,
    healed: bytes = b"",
) -> Extraction:
    """The :class:`Extraction` of one output (``ids``: its tokens, end token excluded): a
    fresh matcher must accept it, then it must parse and validate; otherwise the error.
    ``healed``: the prompt bytes the output's first tokens spell again (not the record's)."""
    data = vocab.decode(ids)
    spelled = data.startswith(healed)  # the healed bytes, spelled again (b"": always)
    if healed and spelled:
        data = data[len(healed) :]
    text = data.decode("utf-8", "replace")
    m = compiled.matcher()
    try:
        if not healed:
            m.consume_tokens(ids)
        elif not spelled:
            raise IncompleteGenerationError(
                f"max_new_tokens={max_new_tokens} ran out before the healed prompt bytes "
                f"{healed!r} were spelled again",
                partial_text="",
                token_ids=ids,
            )
        elif not m.consume_bytes(data):
            raise ValidationFailedError("the output left the grammar", text=text)
        if not m.is_accepting():
            raise IncompleteGenerationError(
                f"max_new_tokens={max_new_tokens} ran out before the record was complete",
                partial_text=text,
                token_ids=ids,
            )
        return Extraction(index, parse(text), text)
    except CorralError as e:
        return Extraction(index, None, text, without_traceback(e))
