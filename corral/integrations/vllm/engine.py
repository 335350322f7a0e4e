"""Documents through vLLM's offline engine: ``corral extract --engine vllm`` and
``corral.extract(..., engine="vllm")``.

:class:`VLLMExtractor` has the interface of :class:`corral.integrations.extract.Extractor`
(``run(batch)`` yields one :class:`~corral.integrations.extract.Extraction` per
document, in order), so resuming, the output format and per-record errors are the same.
Each ``run`` hands its whole window of documents to ``LLM.generate`` at once; vLLM
batches them continuously. Every output is checked as the transformers path checks it:
the matcher must accept it (an output cut by ``max_new_tokens`` is an
:class:`~corral.IncompleteGenerationError`, never a record) and it must parse and
validate against the schema.

Scale: ``engine_options`` go to ``vllm.LLM`` unchanged (``tensor_parallel_size``,
``pipeline_parallel_size``, ``distributed_executor_backend="ray"``,
``gpu_memory_utilization``, ``dtype``, ...): vLLM spreads the model over GPUs and
machines; corral adds no scheduler of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from ...errors import ArgumentTypeError, CorralError, InvalidArgumentError


def _has_corral(llm: Any) -> bool:
    from .processor import CorralLogitsProcessor

    procs = getattr(llm.llm_engine.model_config, "logits_processors", None) or ()
    return any(
        p is CorralLogitsProcessor
        or (isinstance(p, str) and p.endswith(":CorralLogitsProcessor") and "corral" in p)
        for p in procs
    )


class VLLMExtractor:
    """A vLLM engine with corral's logits processor, the schema compiled once, and the
    prompt; :meth:`run` extracts the records of a window of ``(index, document)`` pairs.

    Args:
        model: a local model folder (or ``"gemma3-270m"``), or a ``vllm.LLM`` already
            built with :class:`~corral.integrations.vllm.CorralLogitsProcessor` (then
            ``engine_options`` must be empty).
        schema: JSON Schema (dict, JSON text) or pydantic model class.
        prompt: template with ``{document}`` (and optionally ``{schema}``).
        max_new_tokens: token budget per record.
        engine_options: keyword arguments of ``vllm.LLM``.
        schema_options: JSON Schema compile options.
    """

    def __init__(
        self,
        model: Any,
        schema: Any,
        *,
        prompt: str,
        max_new_tokens: int = 512,
        engine_options: dict[str, Any] | None = None,
        **schema_options: Any,
    ) -> None:
        from vllm import LLM

        from ..constraint import compile_constraint
        from ..extract import schema_json
        from ..models import model_path
        from . import sampling_params
        from .processor import CorralLogitsProcessor, engine_vocabulary

        if "{document}" not in prompt:
            raise InvalidArgumentError(
                f"prompt must contain the placeholder {{document}}, got {prompt[:60]!r}"
            )
        if isinstance(model, LLM):
            if engine_options:
                raise InvalidArgumentError(
                    "engine_options cannot be applied to an existing vllm.LLM, got "
                    f"engine_options={sorted(engine_options)}"
                )
            if not _has_corral(model):
                raise CorralError(
                    "the vllm.LLM was built without corral's logits processor: pass "
                    "logits_processors=[CorralLogitsProcessor]"
                )
            self.llm = model
            self.owns_engine = False
        else:
            options = dict(engine_options or {})
            extra = list(options.pop("logits_processors", None) or [])
            if not isinstance(model, (str, os.PathLike)) and model is not None:
                raise ArgumentTypeError(
                    "with engine='vllm', model must be the path of a local model folder or "
                    f"a vllm.LLM, not {type(model).__name__}"
                )
            self.llm = LLM(
                str(model_path(model)),
                logits_processors=[*extra, CorralLogitsProcessor],
                **options,
            )
            self.owns_engine = True
        model_config = self.llm.llm_engine.model_config
        # the vocabulary the workers build (same EOS ids)
        self.vocab = engine_vocabulary(model_config, int(model_config.get_vocab_size()))
        self.compiled, self.parse = compile_constraint(self.vocab, schema=schema, **schema_options)
        self.params = sampling_params(
            schema=schema,
            schema_options=schema_options or None,
            max_tokens=max_new_tokens,
            temperature=0.0,
        )
        self.prompt = prompt.replace("{schema}", schema_json(schema))
        self.max_new_tokens = max_new_tokens

    def close(self) -> None:
        """Stop the engine if this extractor started it (a ``vllm.LLM`` passed in is the
        caller's, and keeps running). vLLM stops its engine processes when the ``LLM`` is
        garbage collected; stopping it here does not leave that to when (or whether) a
        collection comes before the interpreter exits, which otherwise waits on them."""
        if not self.owns_engine:
            return
        self.owns_engine = False
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        shutdown = getattr(core, "shutdown", None)
        if shutdown is not None:
            shutdown()

    def run(self, batch: Sequence[tuple[int, str]]) -> Iterator[Any]:
        from ..extract import checked, refuse_long, with_refused

        prompts = [self.prompt.replace("{document}", d) for _, d in batch]
        # vLLM refuses a whole batch for one prompt longer than its context: such a
        # prompt is its own document's error, and the others go on
        tok = self.llm.get_tokenizer()
        context = int(self.llm.llm_engine.model_config.max_model_len)
        refused = refuse_long(batch, [len(tok(p)["input_ids"]) for p in prompts], context)
        keep = [i for i in range(len(batch)) if i not in refused]
        outputs = (
            self.llm.generate([prompts[i] for i in keep], self.params, use_tqdm=False)
            if keep
            else []
        )

        def records() -> Iterator[Any]:
            for i, out in zip(keep, outputs, strict=True):
                o = out.outputs[0]
                ids = list(o.token_ids)
                ended = o.finish_reason == "stop" and not isinstance(o.stop_reason, str)
                if ended and ids and ids[-1] in (*self.vocab.eos_token_ids, o.stop_reason):
                    ids.pop()  # the end token itself
                index = batch[i][0]
                yield checked(index, ids, self.vocab, self.compiled, self.parse,
                              self.max_new_tokens)  # fmt: skip

        return with_refused(len(batch), refused, records())
