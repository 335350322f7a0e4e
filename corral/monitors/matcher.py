"""A matcher whose constraint changes where monitors' triggers fire.

:class:`MonitoredMatcher` has the methods of :class:`~corral.automata.matcher.Matcher`
that decoding uses (masks, consume, rollback, fork). It keeps a stack of *segments*, each a
matcher of a segment grammar (``region.py``): the text before the first trigger, then,
each time a trigger fires at the end of a token, the region of what that monitor's
callback allowed followed by free text. With a ``base`` matcher (the request's own
schema or grammar), every mask is the two masks' intersection and both read every token.

Fail closed: a callback that raises, runs past its timeout, or returns what is not a
constraint, and a region the base constraint leaves no token for, are a
:class:`~corral.errors.MonitorError`; the text never goes on unconstrained where a monitor
was asked.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import (
    ArgumentTypeError,
    CorralError,
    InvalidArgumentError,
    MatcherStateError,
    MonitorError,
    TokenRejectedError,
    VocabularyMismatchError,
)
from .monitor import Monitor, MonitorContext
from .region import (
    OUT,
    EmptyRegionError,
    out_labels,
    outside_grammar,
    region_constraint,
    region_grammar,
)
from .trigger import TriggerAutomaton, search_dfa, trigger_automaton

__all__ = ["MonitoredConstraint", "MonitoredMatcher"]


_UNKNOWN = -2


@dataclass
class _Segment:
    """One segment: a matcher of its grammar, and where its ``OUT`` lexer states lie."""

    matcher: Any  # corral Matcher of the segment grammar
    out_start: int  # the first global lexer state of the OUT terminal
    labels: np.ndarray  # int32 [OUT states]: the monitor whose trigger fires there, or -1

    def fired(self) -> int:
        """The monitor whose trigger fires at the end of the text read, or ``-1`` (the
        first monitor, when several do in different parses)."""
        g = self.matcher.chart.lexer_states() - self.out_start
        g = g[(g >= 0) & (g < self.labels.shape[0])]
        hits = self.labels[g]
        hits = hits[hits >= 0]
        return int(hits.min()) if hits.size else -1


class MonitoredMatcher:
    """One sequence's state under ``monitors`` (and a ``base`` matcher, optional).

    Args:
        compiler: a :class:`~corral.Compiler` (or ``None``: the default compiler of
            ``vocab``) that compiles segment grammars; its caches keep them by content.
        vocab: the model's :class:`~corral.Vocabulary`.
        monitors: one or more :class:`Monitor` (the first wins when triggers fire at the
            same byte).
        base: a matcher of the request's own constraint, for the same vocabulary, or
            ``None`` (free text, valid UTF-8).
        prompt: the prompt text, given to callbacks. When it ends where a trigger fires
            (the text ends with a full match: ``x = os.``), that monitor is asked first.
        state: any object, given to callbacks as ``MonitorContext.state``.

    Raises:
        InvalidArgumentError: no monitors, or a trigger :mod:`.trigger` refuses.
        ArgumentTypeError: a monitor that is not a :class:`Monitor`.
        VocabularyMismatchError: ``base`` compiled for another vocabulary.
    """

    def __init__(
        self,
        vocab: Any,
        monitors: Sequence[Monitor],
        *,
        base: Any = None,
        prompt: str = "",
        state: Any = None,
        compiler: Any = None,
    ) -> None:
        monitors = list(monitors)
        if not monitors:
            raise InvalidArgumentError("monitors=: give at least one Monitor")
        for m in monitors:
            if not isinstance(m, Monitor):
                raise ArgumentTypeError(f"monitors=: expected Monitor, got {type(m).__name__}")
        if base is not None and base.compiled.vocab.hash != vocab.hash:
            raise VocabularyMismatchError(
                "base= is a matcher of another vocabulary than the monitors'"
            )
        from ..automata.compiler import Compiler, default_cache

        self.vocab = vocab
        self.monitors = monitors
        self.base = base
        self.prompt = prompt
        self.state = state
        self._compiler = compiler or Compiler._over(vocab, default_cache)
        self.triggers: TriggerAutomaton = trigger_automaton([m.trigger for m in monitors])
        self._labels = out_labels(self.triggers)
        outside = self._compiler.compile(outside_grammar(self.triggers))
        self.compiled = outside  # vocabulary, EOS ids and sizes, as decoding reads them
        self.vocab_size = outside.vocab_size
        self._segments = [self._segment(outside)]
        self._text = bytearray()
        # the monitor whose trigger fired at the end of the text, not asked yet (it is
        # asked when the next mask or token needs its region: an AWRS check that rolls
        # the token back never calls it); _UNKNOWN: not looked up yet
        self._pending = -1
        self._inflight: _InFlight | None = None  # a callback started ahead (prefetch)
        # (segments, text length, pending) before each consumed token
        self._history: list[tuple[int, int, int]] = []
        # a prompt that ends where a trigger fires (`x = os.`): its region comes first
        tail = prompt.encode("utf-8")
        self._pending = next(
            (i for i, m in enumerate(monitors) if search_dfa(m.trigger).matches(tail)), -1
        )
        self._row = np.zeros(outside.words, np.uint32)

    # -- queries ----------------------------------------------------------------------
    @property
    def text(self) -> bytes:
        """The bytes consumed so far."""
        return bytes(self._text)

    @property
    def num_tokens(self) -> int:
        return len(self._history)

    def is_finished(self) -> bool:
        return bool(self._segments[-1].matcher.is_finished())

    def is_accepting(self) -> bool:
        self.settle()
        return bool(self._segments[-1].matcher.is_accepting()) and (
            self.base is None or bool(self.base.is_accepting())
        )

    def fill_bitmask(self, out: Any, row: int = 0) -> None:
        """The allowed next tokens into row ``row`` of ``out`` (``int32 [batch, W]``), as
        :meth:`Matcher.fill_bitmask`: the current segment's mask, and the base's."""
        from ..automata.bitmask import bitmask_row

        dst = bitmask_row(out, self.vocab_size, row)
        self.fill_row(dst)

    def fill_row(self, dst: np.ndarray) -> None:
        """The mask into ``dst`` (``uint32 [W]``, overwritten)."""
        self.settle()
        self._segments[-1].matcher.fill_row(dst)
        if self.base is not None:
            self.base.fill_row(self._row)
            dst &= self._row

    def allowed_token_ids(self) -> np.ndarray:
        buf = np.zeros(self.compiled.words, np.uint32)
        self.fill_row(buf)
        bits = np.unpackbits(buf.view(np.uint8), bitorder="little")[: self.vocab_size]
        return np.flatnonzero(bits)

    # -- consuming --------------------------------------------------------------------
    def consume(self, token_id: int) -> None:
        """Advance by one token; :class:`TokenRejectedError` if it is not allowed (nothing
        changes then). Where a trigger fires at the token's end, its monitor is asked
        when the next mask or token needs the region (:class:`MonitorError` then if that
        fails)."""
        self.settle()
        seg = self._segments[-1]
        before = (len(self._segments), len(self._text), self._pending)
        seg.matcher.consume(token_id)  # raises TokenRejectedError, changing nothing
        if self.base is not None:
            try:
                self.base.consume(token_id)
            except TokenRejectedError:
                seg.matcher.rollback(1)
                raise
        self._history.append(before)
        self._text += self.vocab.token_bytes(token_id)
        self._pending = _UNKNOWN  # read from the chart when needed (not on AWRS checks)

    def consume_tokens(self, token_ids: Iterable[int]) -> None:
        for t in token_ids:
            self.consume(int(t))

    def try_consume(self, token_id: int) -> bool:
        try:
            self.consume(token_id)
        except TokenRejectedError:
            return False
        return True

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` tokens, regions entered after them included."""
        if num_tokens < 0 or num_tokens > len(self._history):
            raise MatcherStateError(
                f"cannot roll back {num_tokens} tokens: {len(self._history)} consumed"
            )
        for _ in range(num_tokens):
            n_segments, text_len, self._pending = self._history.pop()
            del self._segments[n_segments:]
            self._segments[-1].matcher.rollback(1)
            if self.base is not None:
                self.base.rollback(1)
            del self._text[text_len:]

    def fork(self) -> MonitoredMatcher:
        """An independent copy (same position, separate future; callbacks are not called
        again for the regions already entered)."""
        new = object.__new__(MonitoredMatcher)
        new.__dict__.update(self.__dict__)
        new._segments = [_Segment(s.matcher.fork(), s.out_start, s.labels) for s in self._segments]
        new.base = None if self.base is None else self.base.fork()
        new._text = bytearray(self._text)
        new._history = list(self._history)
        new._row = np.zeros_like(self._row)
        return new

    def forced_tokens(self, tokenize: Any = None) -> list[int]:
        """No fast-forward across monitored text (a region's first token is the
        monitor's choice): always empty."""
        return []

    # -- regions ----------------------------------------------------------------------
    def prefetch(self) -> bool:
        """Start, in the background, the callback of a trigger that fired at the end of the
        text and was not asked yet, so that it runs while the caller does something else
        (the decode loop: the model's forward pass); the next mask or token then waits
        for its result (within the monitor's timeout, counted from the start). Returns
        whether a callback is in flight. A token checked and rolled back (AWRS) is never
        prefetched: only the decode loop calls this, for the token it kept."""
        self._look_up()
        if self._pending < 0:
            return False
        monitor = self.monitors[self._pending]
        ctx = self._context(monitor)
        fl = self._inflight
        if fl is None or not fl.answers(monitor, ctx):
            self._inflight = _InFlight(monitor, ctx, _start(monitor, ctx), time.monotonic())
        return True

    def _look_up(self) -> None:
        """Read which trigger fired at the end of the text, if not read yet."""
        if self._pending == _UNKNOWN:
            seg = self._segments[-1]
            self._pending = -1 if seg.matcher.is_finished() else seg.fired()

    def _context(self, monitor: Monitor) -> MonitorContext:
        text = self._text.decode("utf-8", errors="replace")
        return MonitorContext(text=text, prompt=self.prompt, monitor=monitor.name, state=self.state)

    def settle(self) -> None:
        """Ask now the monitor whose trigger fired at the end of the text, if one did and
        was not asked yet, and enter its region (masks and tokens do it when they need
        the region; an engine calls this first, to fail one request on a
        :class:`MonitorError` before filling a batch's masks)."""
        self._look_up()
        if self._pending >= 0:
            hit, self._pending = self._pending, -1
            try:
                self._enter(self.monitors[hit])
            except MonitorError:
                self._pending = hit  # not asked successfully: asked again next time
                raise

    def _segment(self, compiled: Any) -> _Segment:
        """A fresh segment of a compiled segment grammar."""
        t = compiled.tables
        i = t.terminal_names.index(OUT)
        if int(t.term_size[i]) != self._labels.shape[0]:  # pragma: no cover - a bug
            raise MatcherStateError("the segment grammar's text terminal was rewritten")
        return _Segment(compiled.matcher(), int(t.term_start[i]), self._labels)

    def _enter(self, monitor: Monitor) -> None:
        """Ask ``monitor`` what may follow the text, and push that region's segment."""
        ctx = self._context(monitor)
        text = ctx.text
        fl, self._inflight = self._inflight, None
        if fl is not None and fl.answers(monitor, ctx):  # prefetched
            result = _wait(monitor, ctx, fl.future, fl.started)
        else:
            result = _wait(monitor, ctx, _start(monitor, ctx), time.monotonic())
        try:
            constraint = region_constraint(result)
        except EmptyRegionError:
            if monitor.on_empty == "skip":
                constraint = None
            else:
                raise MonitorError("allowed no names", monitor=monitor.name, text=text) from None
        except CorralError as e:
            raise MonitorError(str(e), monitor=monitor.name, text=text) from e
        if constraint is None:
            grammar = outside_grammar(self.triggers)
        else:
            try:
                grammar = region_grammar(constraint, self.triggers, monitor.end)
            except CorralError as e:
                raise MonitorError(str(e), monitor=monitor.name, text=text) from e
        self._segments.append(self._segment(self._compiler.compile(grammar)))
        if self.base is not None and not self.allowed_token_ids().size:
            self._segments.pop()
            raise MonitorError(
                "what it allowed cannot follow under the generation's own constraint",
                monitor=monitor.name,
                text=text,
            )


@dataclass(frozen=True)
class _InFlight:
    """A callback started ahead (:meth:`MonitoredMatcher.prefetch`)."""

    monitor: Monitor
    ctx: MonitorContext
    future: concurrent.futures.Future[Any]
    started: float  # time.monotonic() at the start

    def answers(self, monitor: Monitor, ctx: MonitorContext) -> bool:
        """Whether this call is ``monitor``'s for ``ctx`` (the same text and state)."""
        c = self.ctx
        return (
            self.monitor is monitor
            and c.text == ctx.text
            and c.prompt == ctx.prompt
            and c.state is ctx.state
        )


def _start(monitor: Monitor, ctx: MonitorContext) -> concurrent.futures.Future[Any]:
    """Run ``monitor.allowed(ctx)`` on a thread of its own (daemon: a callback that never
    returns holds up neither other callbacks nor the interpreter's exit); an ``async``
    callback runs in an event loop of its own there, so a caller inside a running loop can
    use one too."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            call = monitor.allowed(ctx)
            result = asyncio.run(call) if monitor.is_async else call
        except BaseException as e:  # handed to the waiting caller, which names it
            future.set_exception(e)
        else:
            future.set_result(result)

    threading.Thread(target=run, name=f"corral-monitor-{monitor.name}", daemon=True).start()
    return future


def _wait(
    monitor: Monitor, ctx: MonitorContext, future: concurrent.futures.Future[Any], started: float
) -> Any:
    """The result of a started callback, within the monitor's timeout counted from
    ``started``; any failure is a MonitorError. A callback past its timeout is left to
    finish on its thread, its result unused."""
    try:
        if monitor.timeout_s is None:
            return future.result()
        return future.result(timeout=max(0.0, monitor.timeout_s - (time.monotonic() - started)))
    except (TimeoutError, concurrent.futures.TimeoutError):
        raise MonitorError(
            f"its callback took longer than {monitor.timeout_s} s",
            monitor=monitor.name,
            text=ctx.text,
        ) from None
    except Exception as e:
        raise MonitorError(
            f"its callback raised {type(e).__name__}: {e}", monitor=monitor.name, text=ctx.text
        ) from e


@dataclass(frozen=True)
class MonitoredConstraint:
    """A request's monitors, its own constraint and its prompt, from which matchers start
    (a stand-in for a compiled grammar where engines and samplers start matchers: it has
    :meth:`matcher` and :attr:`eos_ids`).

    Attributes:
        vocab: the :class:`~corral.Vocabulary`.
        monitors: the request's :class:`Monitor` objects.
        base: the request's own :class:`~corral.CompiledGrammar`, or ``None`` (free text
            between regions).
        prompt: the prompt text (``MonitorContext.prompt``).
        state: ``MonitorContext.state``.
    """

    vocab: Any
    monitors: tuple[Monitor, ...]
    base: Any = None
    prompt: str = ""
    state: Any = None

    @property
    def eos_ids(self) -> np.ndarray:
        """``int64``: the vocabulary's EOS ids (as :attr:`CompiledGrammar.eos_ids`)."""
        return np.asarray(self.vocab.eos_token_ids, np.int64)

    def matcher(self) -> MonitoredMatcher:
        """A fresh :class:`MonitoredMatcher` at the start of the output."""
        return MonitoredMatcher(
            self.vocab,
            self.monitors,
            base=None if self.base is None else self.base.matcher(),
            prompt=self.prompt,
            state=self.state,
        )
