"""Matcher: the state of one sequence under a compiled grammar.

A matcher owns a byte-level Earley chart (:class:`~corral.automata.chart.Chart`). Each
consumed token appends the chart sets for its bytes; rollback pops them. The matcher never
fails open: a token the grammar does not allow raises :class:`TokenRejectedError` and
changes nothing.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import (
    CompileBudgetError,
    CorralError,
    MatcherStateError,
    TokenRejectedError,
)
from .bitmask import as_int, as_int_list, bitmask_row
from .chart import Chart
from .kernels import earley, mask
from .kernels.layout import C_SCRATCH2, ERR_MEMO, FRAME_COLS, MEMO_COLS, MEMO_SIZE, S_HASH
from .kernels.wide import get64_py
from .thread_scratch import per_thread
from .vocabulary import EOS, NORMAL, SPECIAL

if TYPE_CHECKING:
    from .compiled import CompiledGrammar

_MAX_FORCED_BYTES = 4096
_MAX_MEMO = 1 << 22
_KEEP_MEMO = 1 << 19  # a thread keeps a memo grown up to this many slots (12 MB)


class Matcher:
    """Per-sequence state: which tokens may come next, given the tokens consumed so far.

    Create one with :meth:`CompiledGrammar.matcher`. Not thread-safe (one matcher per
    sequence); the :class:`CompiledGrammar` it reads is.
    """

    def __init__(self, compiled: CompiledGrammar) -> None:
        self.compiled = compiled
        self.chart = Chart(compiled.tables, compiled.chart_rows)  # grows chart_rows too
        # before each consumed token, two entries: the chart's sets, and the text's length
        # times two plus 1 if the output was finished (16 bytes a token; a list of tuples
        # took 150)
        self._history = array("q")
        self._text = bytearray()  # the bytes consumed so far
        self._check = compiled.grammar.final_check
        self._check_memo: tuple[tuple[int, int], bool] | None = None
        self._finished = False
        self._budgets = compiled.budgets  # token budgets (None: the grammar has none)
        # with budgets: (chart sets, text length) after each consumed token
        self._ends: list[tuple[int, int]] = []

    # -- queries ----------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.compiled.vocab_size

    def is_accepting(self) -> bool:
        """Whether the tokens consumed so far form a complete word of the grammar."""
        if not self.chart.accepting():
            return False
        return self._check is None or self._passes_final_check()

    def _passes_final_check(self) -> bool:
        """The grammar's final check on the text so far (cached per position)."""
        key = (self.chart.n_sets, len(self._text))
        if self._check_memo is None or self._check_memo[0] != key:
            assert self._check is not None
            self._check_memo = (key, bool(self._check(bytes(self._text))))
        return self._check_memo[1]

    def is_finished(self) -> bool:
        """Whether an EOS token has been consumed."""
        return self._finished

    @property
    def num_tokens(self) -> int:
        """Number of tokens consumed (and not rolled back)."""
        return len(self._history) >> 1

    # -- masks ------------------------------------------------------------------------
    def fill_bitmask(self, out: Any, row: int = 0) -> None:
        """Write the allowed next tokens into row ``row`` of ``out``.

        ``out``: ``int32 [batch, ceil(V/32)]`` (NumPy or CPU torch), bit set = allowed;
        ``row``: an integer in ``0 .. batch-1``. EOS tokens are allowed exactly when
        :meth:`is_accepting`; after EOS only EOS is allowed.

        Raises:
            ShapeError: ``out`` of another dtype, width, device or layout.
            InvalidArgumentError: ``row`` outside the bitmask's batch.
            ArgumentTypeError: ``out`` is not an array or tensor, ``row`` not an integer.
        """
        self.fill_row(bitmask_row(out, self.compiled.vocab_size, row))

    def fill_row(self, dst: np.ndarray, n_sets: int | None = None) -> None:
        """Write into ``dst`` (``uint32 [ceil(V/32)]``, overwritten) the tokens allowed
        after chart sets ``0 .. n_sets-1`` (default: the input so far; more sets are a
        continuation that a kernel built above it, see :meth:`Chart.run`)."""
        c = self.compiled
        chart = self.chart
        top = chart.n_sets if n_sets is None else n_sets
        if self._finished:
            dst[:] = 0
            for e in c.eos_ids.tolist():
                dst[e >> 5] |= np.uint32(1 << (e & 31))
            return
        key = get64_py(chart.S, top - 1, S_HASH)
        if not c.mask_cache.fill(key, dst):
            t0 = time.perf_counter_ns()
            self._fill_kernel(dst, top)
            c.mask_cache.offer(key, dst, time.perf_counter_ns() - t0)
        if self._budgets is not None and top == chart.n_sets:
            tails = self._budgets.tails(chart, top, self._ends, self._text)
            if tails is not None:  # a spent budget: only its tails may follow
                dst &= self._budgets.mask(tails)
        if (
            self._check is not None
            and top == chart.n_sets
            and chart.accepting(top)
            and not self._passes_final_check()
        ):
            for e in c.eos_ids.tolist():
                dst[e >> 5] &= ~np.uint32(1 << (e & 31))

    def _fill_kernel(self, dst: np.ndarray, top: int) -> None:
        """Run the mask kernel for the sets ``0 .. top-1`` into ``dst``, building missing
        token caches and growing the memo as it asks."""
        c = self.compiled
        chart = self.chart
        trie = c.vocab.trie.kernel_arrays  # kernels.layout.TrieArrays
        sc = fill_scratch(c.vocab.trie.max_depth + 2, c.rank_words)
        wc = c.walk_cache()
        ctx = chart.ctx
        grown = False  # past _KEEP_MEMO: this mask's memo, given back when it is done
        try:
            while True:
                ctx[C_SCRATCH2] = sc.generation  # memo entries of earlier calls go stale
                st = chart.run(
                    mask.fill_mask, top, *trie, *c.caches.snapshot(), c.eos_ids,
                    sc.states, sc.frames, sc.memo, sc.rk, *wc.kernel_arrays(), dst,
                )  # fmt: skip
                sc.generation = ctx.item(C_SCRATCH2)
                wc.grow_if_full()
                if st == 0:
                    return
                if st > 0:  # a lexer state without a token cache yet
                    c.ensure_cached(chart.lexer_states(top))
                elif st == ERR_MEMO:
                    n = sc.memo.shape[0]
                    if n >= _MAX_MEMO:
                        raise CompileBudgetError(
                            "computing this mask explored more than "
                            f"{_MAX_MEMO} distinct (token prefix, parse state) pairs: the "
                            "grammar is too ambiguous at this point"
                        )
                    sc.memo = np.zeros((2 * n, MEMO_COLS), np.int64)
                    grown = grown or 2 * n > _KEEP_MEMO
                else:  # pragma: no cover - nested walks are one level per byte
                    raise CorralError(f"internal error code {st}")
        finally:
            if grown:
                sc.memo = np.zeros((MEMO_SIZE, MEMO_COLS), np.int64)

    def allowed_token_ids(self) -> np.ndarray:
        """The allowed next token ids, sorted (convenience; uses a full mask)."""
        buf = np.zeros(self.compiled.words, np.uint32)
        self.fill_row(buf)
        bits = np.unpackbits(buf.view(np.uint8), bitorder="little")[: self.compiled.vocab_size]
        return np.flatnonzero(bits)

    # -- consuming --------------------------------------------------------------------
    def consume(self, token_id: int) -> None:
        """Advance by one token; raise :class:`TokenRejectedError` if it is not allowed.

        ``token_id``: an integer (``int`` or a NumPy integer; ``ArgumentTypeError``, a
        ``TypeError``, otherwise, a ``bool`` included). On rejection the matcher is unchanged.
        """
        tid = token_id if type(token_id) is int else as_int(token_id, "token_id")
        c = self.compiled
        if not 0 <= tid < c.vocab_size:
            raise TokenRejectedError(
                tid, f"token id {tid} is outside the vocabulary (size {c.vocab_size})"
            )
        kind = int(c.token_kinds[tid])
        chart = self.chart
        n_before, text_before = chart.n_sets, 2 * len(self._text) + self._finished
        if self._finished:
            if kind == EOS:
                self._history.append(n_before)
                self._history.append(text_before)
                if self._budgets is not None:
                    self._token_ended()
                return
            raise TokenRejectedError(tid, f"token {tid} after EOS: the output is finished")
        if kind == EOS:
            if not self.is_accepting():
                raise TokenRejectedError(tid, f"EOS token {tid} before the output is complete")
            self._finished = True
            self._history.append(n_before)
            self._history.append(text_before)
            if self._budgets is not None:
                self._token_ended()
            return
        if self._budgets is not None:
            tails = self._budgets.tails(chart, chart.n_sets, self._ends, self._text)
            if tails is not None and not self._budgets.allows(tails, tid):
                raise TokenRejectedError(
                    tid,
                    f"token {tid} ({c.vocab.token_bytes(tid)!r}) is not allowed: the token "
                    f"budget of the text is spent, only {sorted(tails)} may finish it",
                )
        if kind == NORMAL:
            data, start, stop = c.token_data(tid)
            n = chart.run(earley.consume_bytes, chart.n_sets, data, start, stop)
            if n > 0:
                self._text += data[start:stop].tobytes()
        elif kind == SPECIAL and c.is_special_terminal(tid):
            n = chart.run(earley.consume_special, chart.n_sets, c.special_start_state(tid))
        else:
            n = 0
        if n <= 0:
            text = c.vocab.token_bytes(tid)
            raise TokenRejectedError(
                tid,
                f"token {tid} ({text!r}) is not allowed by the grammar after "
                f"{self.num_tokens} tokens",
            )
        chart.n_sets = n
        self._history.append(n_before)
        self._history.append(text_before)
        if self._budgets is not None:
            self._token_ended()

    def _token_ended(self) -> None:
        """Note where the token just consumed ends (for token budgets)."""
        self._ends.append((self.chart.n_sets, len(self._text)))

    def consume_tokens(self, token_ids: Iterable[int]) -> None:
        """Consume several tokens; on a rejection, the tokens before it stay consumed.

        ``token_ids``: a sequence of integer ids (a list, or a 1-D NumPy or torch integer
        array); anything else raises ``ArgumentTypeError`` (a ``TypeError``) before any
        token is consumed.
        """
        for t in as_int_list(token_ids, "token_ids"):
            self.consume(t)

    def try_consume(self, token_id: int) -> bool:
        """Like :meth:`consume` but returns ``False`` instead of raising on rejection."""
        try:
            self.consume(token_id)
        except TokenRejectedError:
            return False
        return True

    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        """How many leading tokens of ``token_ids`` would be accepted (state unchanged).

        ``token_ids`` as for :meth:`consume_tokens`.
        """
        n = 0
        try:
            for t in as_int_list(token_ids, "token_ids"):
                if not self.try_consume(t):
                    break
                n += 1
        finally:
            self.rollback(n)
        return n

    def consume_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (e.g. a prompt tail); returns ``False`` and changes nothing
        if they are not a valid continuation. Not recorded as a token: it cannot be rolled
        back on its own, only together with the token consumed before it.
        """
        if self._finished:
            return False
        arr = np.frombuffer(bytes(data), dtype=np.uint8)
        chart = self.chart
        n = chart.run(earley.consume_bytes, chart.n_sets, arr, 0, arr.shape[0])
        if n <= 0:
            return False
        chart.n_sets = n
        self._text += bytes(data)
        return True

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` consumed tokens (an integer; ``ArgumentTypeError``
        otherwise, a ``bool`` included; ``MatcherStateError`` beyond those consumed)."""
        if type(num_tokens) is not int:
            num_tokens = as_int(num_tokens, "num_tokens")
        consumed = len(self._history) >> 1
        if num_tokens < 0 or num_tokens > consumed:
            raise MatcherStateError(f"cannot roll back {num_tokens} tokens: {consumed} consumed")
        if num_tokens == 0:
            return
        at = 2 * (consumed - num_tokens)
        n_sets, text = self._history[at], self._history[at + 1]
        del self._history[at:]
        if self._budgets is not None:
            del self._ends[consumed - num_tokens :]
        self.chart.n_sets = n_sets
        self._finished = bool(text & 1)
        del self._text[text >> 1 :]

    def reset(self) -> None:
        """Back to the start of the grammar."""
        self.rollback(len(self._history) >> 1)

    def fork(self) -> Matcher:
        """An independent copy of this matcher (same position, separate future)."""
        new = object.__new__(Matcher)
        new.compiled = self.compiled
        new.chart = self.chart.copy()
        new._history = self._history[:]
        new._text = bytearray(self._text)
        new._check = self._check
        new._check_memo = self._check_memo
        new._finished = self._finished
        new._budgets = self._budgets
        new._ends = list(self._ends)
        return new

    # -- fast-forward -----------------------------------------------------------------
    def _cut(self, data: bytes, ids: list[int]) -> list[tuple[int, int]]:
        """``(token, start)`` for the leading ``ids`` that spell a prefix of ``data``."""
        out: list[tuple[int, int]] = []
        i = 0
        for tok in ids:
            if not 0 <= tok < self.compiled.vocab_size:
                break
            piece = self.compiled.vocab.token_bytes(tok)
            if not piece or data[i : i + len(piece)] != piece:
                break
            out.append((tok, i))
            i += len(piece)
        return out

    def forced_bytes(self) -> bytes:
        """Bytes every valid continuation starts with (empty if the next byte is a choice
        or the output may end here)."""
        if self._finished:
            return b""
        allowed = np.zeros(256, np.int32)
        one = np.zeros(1, np.uint8)
        byte = one.view()
        byte.flags.writeable = False  # the type token bytes have: one compiled consume_bytes
        chart = self.chart
        saved = chart.n_sets
        forced = bytearray()
        try:
            while len(forced) < _MAX_FORCED_BYTES and not self.is_accepting():
                if chart.run(earley.allowed_bytes, chart.n_sets, allowed) != 1:
                    break
                one[0] = int(np.flatnonzero(allowed)[0])
                n = chart.run(earley.consume_bytes, chart.n_sets, byte, 0, 1)
                if n <= 0:  # pragma: no cover - the byte was just found allowed
                    break
                chart.n_sets = n
                forced.append(int(one[0]))
        finally:
            chart.n_sets = saved
        return bytes(forced)

    def forced_tokens(self, tokenize: Callable[[bytes], list[int]] | None = None) -> list[int]:
        """Tokens the grammar forces next, for fast-forward (possibly empty).

        The forced bytes are cut into tokens by ``tokenize`` when given (e.g. the model's
        tokenizer, so the model sees the tokenization it was trained on; a cut whose bytes
        do not spell the forced bytes is ignored), else into the longest vocabulary tokens,
        left to right. A final token is dropped while some token could extend it past the
        forced bytes (so the model keeps the choice of merging it with what follows). Each
        returned token is checked to be allowed in turn.
        """
        data = self.forced_bytes()
        if not data:
            return []
        trie = self.compiled.vocab.trie
        tokens: list[tuple[int, int]] = []  # (token, start)
        if tokenize is not None:
            tokens = self._cut(data, tokenize(data))
        if not tokens:
            i = 0
            while i < len(data):
                tok, ln = _longest_token(trie, data, i)
                if tok < 0:
                    break
                tokens.append((tok, i))
                i += ln
        while tokens and trie.extended(data[tokens[-1][1] :]):
            tokens.pop()
        n_ok = 0
        for t, _ in tokens:
            if not self.try_consume(t):
                break
            n_ok += 1
        self.rollback(n_ok)
        return [t for t, _ in tokens[:n_ok]]


def _longest_token(trie: Any, data: bytes, i: int) -> tuple[int, int]:
    node, best, best_len = 0, -1, 0
    for k in range(i, len(data)):
        node = trie.child(node, data[k])
        if node < 0:
            break
        if trie.tok_count[node] > 0:
            best = int(trie.token_ids[trie.tok_start[node]])
            best_len = k - i + 1
    return best, best_len


def fill_scratch(depth: int, rank_words: int) -> FillScratch:
    """The calling thread's mask-kernel scratch for a vocabulary whose trie has depth
    ``depth - 2`` and ``rank_words`` rank-space words (shared by every matcher of every
    grammar of that vocabulary on the thread: a fill runs to its end before the next)."""
    return per_thread(("fill", depth, rank_words), lambda: FillScratch(depth, rank_words))


class FillScratch:
    """The mask kernel's scratch (see :func:`fill_scratch`).

    ``states`` (``int32 [d, d]``) and ``frames`` (``int64 [d, FRAME_COLS]``), ``d`` the
    trie's depth + 2: the walks' stacks; ``memo`` (``int64 [2^k, MEMO_COLS]``): explored
    (node, set hash, lexer state), valid for the call whose generation they carry;
    ``rk`` (``uint32 [rank words]``): the mask in rank space; ``generation``: the last
    memo generation handed out, so that no call sees another's entries.
    """

    __slots__ = ("frames", "generation", "memo", "rk", "states")

    def __init__(self, depth: int, rank_words: int) -> None:
        self.states = np.zeros((depth, depth), np.int32)
        self.frames = np.zeros((depth, FRAME_COLS), np.int64)
        self.memo = np.zeros((MEMO_SIZE, MEMO_COLS), np.int64)
        self.rk = np.zeros(rank_words, np.uint32)
        self.generation = 0
