"""corral as a vLLM custom logits processor.

::

    from vllm import LLM
    from corral.integrations.vllm import CorralLogitsProcessor, sampling_params

    llm = LLM(model_dir, logits_processors=[CorralLogitsProcessor])
    out = llm.generate(prompts, sampling_params(schema=Person, max_tokens=200))

    # or: vllm serve MODEL_DIR --logits-processors corral.integrations.vllm:CorralLogitsProcessor

How it runs inside the engine:

* At request admission (the engine's front end, before the request is queued),
  :meth:`CorralLogitsProcessor.validate_params` reads ``extra_args["corral"]``, builds the
  grammar (corral's grammar cache keeps it) and refuses a malformed or unsupported
  constraint with corral's own message: an HTTP 400 in the server, a
  ``vllm.exceptions.VLLMValidationError`` from ``LLM.generate``. Other requests are not affected.
* In the worker, the processor is built once: it loads the model's tokenizer and builds
  the :class:`~corral.Vocabulary` in a background thread while the engine starts.
* A constrained request entering the batch starts its token-level compile in a background
  thread (equal constraints share one compile through corral's compile cache, which is
  bounded: 64 grammars, 512 MiB); the compile overlaps the request's prefill and is
  waited for before its first token is sampled.
* Before each sampling step, every constrained row's matcher catches up with the row's
  output tokens and its logits are masked (rows without a constraint are never touched).

The processor implements both of vLLM's logits-processor interfaces: V1's
(``vllm.v1.sample.logits_processor.LogitsProcessor``: rows by batch index, told of
additions, removals and moves) and Model Runner V2's (the GPU default; state per request
slot, committed tokens on the device, one row per draft token under speculative
decoding), whose bookkeeping is :mod:`.runner_v2`'s. vLLM builds it with the constructor
of the runner it uses. Under V1, vLLM refuses custom logits processors with speculative
decoding; under V2 they run, and draft rows are masked (see :mod:`.runner_v2`). vLLM
refuses custom logits processors for pooling models.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from vllm.exceptions import VLLMValidationError
from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality
from vllm.v1.sample.logits_processor import LogitsProcessor as V1LogitsProcessor
from vllm.v1.worker.gpu.sample.logits_processor.interface import (
    LogitsProcessor as V2LogitsProcessor,
)

from ...errors import CorralError
from .rows import Row, RowTable
from .runner_v2 import SlotConstraints
from .spec import KEY, ConstraintSpec, SpecError, spec_of

log = logging.getLogger("vllm.corral")  # under vLLM's logger: shown with the engine's logs

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="corral-vllm")
        return _POOL


def request_spec(params: Any) -> ConstraintSpec | None:
    """The request's constraint, checked as at admission (see
    :meth:`CorralLogitsProcessor.validate_params`); ``None`` when it has none."""
    spec = spec_of(getattr(params, "extra_args", None))
    if spec is None:
        return None
    if getattr(params, "ignore_eos", False):
        raise SpecError(
            "ignore_eos=True cannot be combined with a corral constraint: a complete "
            "document ends with EOS"
        )
    if getattr(params, "structured_outputs", None) is not None:
        raise SpecError(
            "a request cannot have both vLLM's structured_outputs and a corral constraint "
            "(the server adds structured outputs itself to a chat request with tools whose "
            "tool_choice is 'required' or names a function, or whose tools are strict: send "
            "tool_choice='auto' and give the choice to corral's tool_calls constraint)"
        )
    spec.grammar()
    spec.resolve_monitors()  # every name known in this process
    return spec


class CorralLogitsProcessor(V1LogitsProcessor, V2LogitsProcessor):  # type: ignore[misc]
    """Constrains the requests whose ``SamplingParams.extra_args`` hold a ``"corral"``
    constraint (see :mod:`corral.integrations.vllm.spec`); other requests are untouched.

    vLLM builds it (``LLM(..., logits_processors=[CorralLogitsProcessor])`` or
    ``vllm serve ... --logits-processors corral.integrations.vllm:CorralLogitsProcessor``);
    users never call it.
    """

    _v2: SlotConstraints | None  # the Model Runner V2 state (None under V1)

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Refuse a request whose constraint is malformed, unsupported or cannot be
        combined with its sampling parameters, with corral's message (keyword and JSON
        pointer, or line and column). Runs at admission, in the engine's front end."""
        try:
            request_spec(sampling_params)
        except (CorralError, ValueError, TypeError, RecursionError) as e:
            raise VLLMValidationError(f"corral: {e}", parameter=f"extra_args.{KEY}") from None

    def __init__(self, vllm_config: Any, *args: Any) -> None:
        """V1 builds it with ``(vllm_config, device, is_pin_memory)``, Model Runner V2 with
        ``(vllm_config, req_states)``; the V2 bookkeeping is :mod:`.runner_v2`'s."""
        if len(args) not in (1, 2):
            raise TypeError(
                "CorralLogitsProcessor(vllm_config, device, is_pin_memory) (V1) or "
                f"(vllm_config, req_states) (Model Runner V2), got {1 + len(args)} arguments"
            )
        model_config = vllm_config.model_config
        width = int(model_config.get_vocab_size())
        self._start(_pool().submit(engine_vocabulary, model_config, width), width)
        if len(args) == 1:
            spec = getattr(vllm_config, "speculative_config", None)
            drafts = int(getattr(spec, "num_speculative_tokens", 0) or 0)
            self._v2 = SlotConstraints(args[0], 1 + drafts, self._table, self._new_slot_row)

    @classmethod
    def for_vocabulary(
        cls, vocab: Any, logits_width: int | None = None, *, req_states: Any = None, window: int = 1
    ) -> CorralLogitsProcessor:
        """A processor for a given :class:`~corral.Vocabulary`, outside an engine (for
        tests and for driving it by hand with vLLM's ``BatchUpdate``; with ``req_states``,
        a V2 processor driven with ``add_request`` and ``LogitsContext``, ``window`` being
        ``1 + num_speculative_tokens``)."""
        self = cls.__new__(cls)
        done: Future[Any] = Future()
        done.set_result(vocab)
        self._start(done, vocab.size if logits_width is None else int(logits_width))
        if req_states is not None:
            self._v2 = SlotConstraints(req_states, window, self._table, self._new_slot_row)
        return self

    def _start(self, vocab: Future[Any], width: int) -> None:
        self.logits_width = width
        self._rows: RowTable | None = None
        self._specs: dict[ConstraintSpec, Future[Any]] = {}
        self._vocab = vocab
        self._v2 = None

    # -- vLLM Model Runner V2 interface (the work is runner_v2.py's) -----------------------
    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        return self._v2_state().add_request(req_idx, sampling_params)

    def apply_staged_writes(self) -> None:
        if self._v2 is not None:
            self._v2.apply_staged_writes()

    def _v2_state(self) -> SlotConstraints:
        if self._v2 is None:
            raise RuntimeError("this processor was built for vLLM's V1 interface")
        return self._v2

    def _new_slot_row(self, slot: int, params: Any, output: list[int]) -> Row | None:
        return self._new_row(slot, params, output, where="slot", prompt=None)

    # -- vLLM V1 interface ----------------------------------------------------------------
    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if not batch_update:
            return
        constrained = any(_has_constraint(params) for _, params, _, _ in batch_update.added)
        if self._rows is None and not constrained:
            return  # no constrained request yet: never wait for the vocabulary
        table = self._table()
        for index in batch_update.removed:
            table.remove(index)
        for index, params, prompt, output in batch_update.added:
            table.add(index, self._new_row(index, params, output, prompt=prompt))
        for a, b, direction in batch_update.moved:
            table.move(a, b, swap=direction == MoveDirectionality.SWAP)

    def apply(self, logits: Any, ctx: Any = None) -> Any:
        if ctx is not None:  # Model Runner V2
            return self._v2_state().apply(logits, ctx)
        if self._rows is None or not self._rows.rows:
            return logits
        return self._rows.apply(logits)

    # -- rows -----------------------------------------------------------------------------
    def _table(self) -> RowTable:
        if self._rows is None:
            try:
                vocab = self._vocab.result()
                size, eos = vocab.size, tuple(vocab.eos_token_ids)
            except Exception as e:  # every constrained row fails instead
                log.error("corral: no vocabulary for this engine's tokenizer: %s", e)
                size, eos = self.logits_width, ()
            self._rows = RowTable(size, eos_ids=eos, fallback_end_ids=eos, on_error=_log_failed_row)
        return self._rows

    def _new_row(
        self,
        index: int,
        params: Any,
        output: list[int],
        where: str = "batch row",
        *,
        prompt: Any,
    ) -> Row | None:
        """The row of a request entering the batch (``None``: it has no constraint).
        ``prompt``: the prompt's token ids, which a request with monitors needs (``None``
        where the engine does not give them).

        Never raises: admission checks the constraint, and a request that skipped it (or
        that fails here for any other reason) gets a failed row, which ends that request
        only (fail closed) with the reason logged. A corral error is the reason as it
        stands; any other exception, a bug, is named with its type and logged with its
        traceback.
        """
        try:
            spec = spec_of(getattr(params, "extra_args", None))
            if spec is None:
                return None
            return Row(
                label=f"constrained request ({spec.kind}) at {where} {index}",
                grammar=self._monitored(spec, prompt) if spec.monitors else self._compile(spec),
                output=output,
                end_ids=_end_ids(params),
            )
        except CorralError as e:  # SpecError and the like: the request's own fault
            return _failed_row(f"{where} {index}", params, output, e)
        except Exception as e:  # a bug: this request fails, visibly; the engine step goes on
            log.exception("corral: setting up the request at %s %d failed", where, index)
            return _failed_row(f"{where} {index}", params, output, e)

    def _compile(self, spec: ConstraintSpec) -> Future[Any]:
        """A future of ``spec``'s compiled grammar. Requests with the same spec share a
        compile in flight; finished compiles are forgotten here (the grammar stays in
        corral's bounded compile cache, where a repeated spec is a hit), so the processor
        holds no grammar beyond those of its live requests."""
        for done in [s for s, f in self._specs.items() if f.done()]:
            del self._specs[done]
        future = self._specs.get(spec)
        if future is None:
            vocab = self._vocab
            future = _pool().submit(lambda: spec.compile(vocab.result()))
            self._specs[spec] = future
        return future

    def _monitored(self, spec: ConstraintSpec, prompt: Any) -> Future[Any]:
        """A future of the request's :class:`~corral.monitors.matcher.MonitoredConstraint`:
        its monitors resolved by name in this process, its own constraint compiled (shared
        through corral's compile cache) and its prompt decoded with the vocabulary."""
        if prompt is None:
            raise CorralError(
                "monitors need the request's prompt, which vLLM's Model Runner V2 does not "
                "give a logits processor: run it under the V1 runner for now "
                "(VLLM_USE_V2_MODEL_RUNNER=0)"
            )
        ids = [int(t) for t in prompt]
        vocab = self._vocab

        def build() -> Any:
            from ...monitors.matcher import MonitoredConstraint

            v = vocab.result()
            text = b"".join(v.token_bytes(t) for t in ids if 0 <= t < v.size)
            return MonitoredConstraint(
                v,
                tuple(spec.resolve_monitors()),
                spec.base.compile(v),
                text.decode("utf-8", errors="replace"),
                json.loads(spec.monitor_state),
            )

        return _pool().submit(build)


def _has_constraint(params: Any) -> bool:
    extra = getattr(params, "extra_args", None)
    return isinstance(extra, Mapping) and KEY in extra


def _end_ids(params: Any) -> frozenset[int]:
    """The tokens that end the request: its EOS id and stop token ids."""
    ids = set(getattr(params, "stop_token_ids", None) or ())
    eos = getattr(params, "eos_token_id", None)
    if eos is not None:
        ids.add(eos)
    return frozenset(int(t) for t in ids)


def _failed_row(where: str, params: Any, output: list[int], error: Exception) -> Row:
    """A row that ends its request at its next step; the row's log line names ``error``
    by its type and text."""
    failed: Future[Any] = Future()
    failed.set_exception(error)
    try:
        end_ids = _end_ids(params)
    except Exception:  # unreadable stop tokens: the vocabulary's EOS ids end it instead
        end_ids = frozenset()
    return Row(label=f"request at {where}", grammar=failed, output=output, end_ids=end_ids)


def _log_failed_row(label: str, reason: str) -> None:
    log.error("corral: %s ends now: %s", label, reason)


def engine_vocabulary(model_config: Any, width: int) -> Any:
    """The :class:`~corral.Vocabulary` of the engine's tokenizer, sized for its logits, with
    the EOS ids of the tokenizer, the model config and the generation config."""
    from vllm.tokenizers import cached_tokenizer_from_config

    from ...automata import Vocabulary
    from ..vocabularies import token_id_set

    tokenizer = cached_tokenizer_from_config(model_config)
    if tokenizer is None:
        raise CorralError(
            "the engine runs with skip_tokenizer_init: corral needs the tokenizer to "
            "compile constraints"
        )
    sources: list[Any] = [getattr(tokenizer, "eos_token_id", None)]
    sources.append(getattr(getattr(model_config, "hf_config", None), "eos_token_id", None))
    with contextlib.suppress(Exception):  # a model without a generation config
        sources.append(model_config.try_get_generation_config().get("eos_token_id"))
    eos = token_id_set(*sources)
    return Vocabulary.from_hf(tokenizer, vocab_size=width, eos_token_ids=eos or None)
