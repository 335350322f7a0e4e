"""Completability of partial outputs with unknown tokens anywhere (any-order decoding).

A diffusion model (or an infilling task) writes a fixed number of token *slots* in any
order. A partial output is the slot list with some tokens known and the rest unknown
(``MASK``), or optional (``MASK_OPT``: one token or nothing, so that ``k`` of them in a
row stand for a gap of between 0 and ``k`` tokens, e.g. a hole of a template).
:class:`CompletionChecker` answers whether the unknown slots can still be filled so that
the whole output is a word of the grammar: ``L(G) ∩ C ≠ ∅`` for the regular language
``C`` of fillings. It is what keeps constrained any-order decoding free of dead ends: a
token is placed only where the answer stays yes.

**What a filling may be.** Slots are read left to right; the output ends at its first EOS
token (every later slot must be EOS or unknown, and becomes EOS) or at the last slot.
An unknown slot before the last known non-EOS token must hold a token; the unknown slots
after it may hold tokens or EOS (the output may end early), or only tokens if the
vocabulary has no EOS. An optional slot may always hold nothing. The check lets an
unknown slot hold any *single-byte* token of the vocabulary (every byte a token spells
alone, which for byte-level vocabularies is all 256). That makes ``C`` a sequence of byte
positions, each a byte, a gap byte or an optional gap byte, and the check an exact Earley
parse over it (``kernels/lattice.py``; an optional position's set is the union of the
set before it and the gap byte's set).

It is **sound**: a yes comes with a filling the decoder can always realise (one
single-byte token per slot), so a decoder that only places tokens the check accepts never
dead-ends. It is **not complete** for multi-byte fillings: a gap of ``k`` slots is
assumed to hold ``k`` bytes (``k`` optional slots: at most ``k`` bytes), so a yes that
would need longer tokens in the gap (a long required key in a two-slot gap) is a no.
Tokens already placed may be as long as they like. Where the vocabulary lacks
single-byte tokens (WordPiece vocabularies), gaps can hold only the bytes it has.

Incremental: the known prefix (slots before the first unknown one) is kept parsed
between calls, so a call parses only from the first unknown slot on, and stops early
once a complete word is reachable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidArgumentError, UnsupportedFeatureError
from .kernels.layout import H_BYTE_CLASS, OP_GAP, OP_OPT, OP_SPECIAL
from .vocabulary import EOS, NORMAL, SPECIAL

if TYPE_CHECKING:
    from .compiled import CompiledGrammar
    from .token_dfa import TokenDFA

MASK = -1  # an unknown slot: one token
MASK_OPT = -2  # an optional unknown slot: one token or nothing


class CompletionChecker:
    """Decides whether partial outputs (token slots, some unknown) can still be completed.

    Args:
        compiled: the grammar, compiled for the vocabulary of the slots' token ids.

    Raises:
        UnsupportedFeatureError: the grammar has a check on complete words besides its
            rules (JSON Schemas compiled with the default ``final_check=True``): partial
            outputs with gaps are decided on the rules alone.
    """

    def __init__(self, compiled: CompiledGrammar) -> None:
        grammar = compiled.grammar
        if grammar.final_check is not None:
            raise UnsupportedFeatureError(
                "a check on complete outputs",
                location="the grammar",
                detail="completability is decided on the grammar's rules alone; compile JSON "
                "Schemas with final_check=False (keywords the rules cannot express are then "
                "refused by name)",
            )
        self.compiled = compiled
        vocab = compiled.vocab
        data, offsets = vocab.byte_table()
        single = np.flatnonzero((np.diff(offsets) == 1) & (vocab.kinds == NORMAL))
        self.byte_token: dict[int, int] = {}  # byte -> a single-byte token spelling it
        for tid in single[::-1].tolist():  # the lowest id wins
            self.byte_token[int(data[offsets[tid]])] = tid
        gt = compiled.tables.gt
        byte_class = gt[gt[H_BYTE_CLASS] : gt[H_BYTE_CLASS] + 256]
        # one byte per class: bytes of a class behave the same everywhere in the grammar
        rep: dict[int, int] = {}
        for byte in sorted(self.byte_token):
            rep.setdefault(int(byte_class[byte]), byte)
        self.class_bytes = np.array(sorted(rep.values()), np.int64)
        # fallback tokens (EOS, then every single-byte token) and their groups: a byte
        # class each, each EOS id a group of its own numbered below 0
        eos = np.array(vocab.eos_token_ids, np.int64)
        self._fallback = (
            np.concatenate([eos, single.astype(np.int64)]),
            np.concatenate(
                [
                    -1 - np.arange(len(eos), dtype=np.int64),
                    np.asarray(byte_class, np.int64)[data[offsets[single]]],
                ]
            ),
        )
        self._classes = np.array(sorted(rep), np.int64)
        self._comp = np.zeros(max(1, len(rep)), np.int64)
        self._can_end = bool(vocab.eos_token_ids)
        self._matcher = compiled.matcher()
        self._prefix: list[int] = []
        self.checks = 0
        self._classify = 1  # merge items of equal continuations (0: only equal origins)

    # -- the check ------------------------------------------------------------------------
    def check(self, slots: Sequence[int]) -> bool:
        """Whether the unknown slots (``MASK``, ``MASK_OPT``) of ``slots`` can be filled
        into a word of the grammar (see the module docs for what a filling may be)."""
        self.checks += 1
        slots = [int(t) for t in slots]
        kinds = self.compiled.vocab.kinds
        size = self.compiled.vocab_size
        end = len(slots)
        for i, t in enumerate(slots):  # one pass: the slots' validity and the first EOS
            if t < 0:
                if t < MASK_OPT:
                    raise _bad_slot(i, t, size)
            elif t >= size:
                raise _bad_slot(i, t, size)
            elif kinds[t] == EOS:
                end = i
                break
        if end < len(slots):
            after = _read_slots(slots[end:], size, first=end)
            if any(t >= 0 and kinds[t] != EOS for t in after):
                return False  # text after the end
        # the slots after ``last`` may hold nothing: with EOS, all of them (the output
        # may end early); without, they are optional slots (a MASK slot holds a token)
        if self._can_end:
            required = [i for i in range(end) if slots[i] >= 0]
        else:
            required = [i for i in range(end) if slots[i] != MASK_OPT]
        last = required[-1] if required else -1
        first_gap = next((i for i in range(end) if slots[i] < 0), end)
        if not self._advance_prefix(slots[:first_gap]):
            return False
        ops = self._ops(slots[first_gap : last + 1])
        if ops is None:
            return False
        n_opt = end - max(last + 1, first_gap)
        return self._run(np.array(ops, np.int64), n_opt)

    def allowed_at(self, slots: Sequence[int], pos: int) -> np.ndarray:
        """The tokens that can be read at slot ``pos`` after ``slots[:pos]``: ``bool [V]``.

        The slots before ``pos`` are read as in :meth:`check` (an unknown slot is one
        single-byte token, an optional one is that or nothing); what comes after ``pos``
        is ignored. So a token outside the result fails :meth:`check` wherever it is
        placed at ``pos``, whatever the other slots hold: a filter that decoders apply
        before checking, at the cost of one mask. EOS ids are always included (the output
        may end before ``pos``, which the check decides).
        """
        from .kernels.lattice import scan_ops

        c = self.compiled
        vocab = c.vocab
        out = np.zeros(c.words, np.uint32)
        prefix = _read_slots(slots[:pos], c.vocab_size)
        ended = any(t >= 0 and vocab.kinds[t] == EOS for t in prefix)
        first_gap = next((i for i, t in enumerate(prefix) if t < 0), pos)
        if not ended and self._advance_prefix(prefix[:first_gap]):
            ops = self._ops(prefix[first_gap:])
            m = self._matcher
            chart = m.chart
            top = chart.n_sets
            if ops is not None and len(ops):
                arr = np.array(ops, np.int64)
                top = chart.run(
                    scan_ops, chart.n_sets, arr, len(arr), self._classes, self._comp, self._classify
                )
            if ops is not None and top > 0:
                m.fill_row(out, top)
        bits = np.unpackbits(out.view(np.uint8), bitorder="little")[: c.vocab_size]
        allowed = bits.astype(bool)
        allowed[list(vocab.eos_token_ids)] = True
        return allowed

    def _ops(self, slots: Sequence[int]) -> list[int] | None:
        """The lattice ops of known tokens and unknown slots (``None``: a token that
        cannot be read inside an output)."""
        c = self.compiled
        kinds = c.vocab.kinds
        ops: list[int] = []
        for t in slots:
            if t >= 0 and kinds[t] == NORMAL:
                ops.extend(c.vocab.token_bytes(t))
            elif t == MASK:
                ops.append(OP_GAP)
            elif t == MASK_OPT:
                ops.append(OP_OPT)
            elif kinds[t] == SPECIAL and c.is_special_terminal(t):
                ops.append(OP_SPECIAL + c.special_start_state(t))
            else:
                return None
        return ops

    def _advance_prefix(self, prefix: list[int]) -> bool:
        """Make the kept matcher hold exactly ``prefix`` (rolling back what differs)."""
        m = self._matcher
        same = 0
        for a, b in zip(self._prefix, prefix, strict=False):
            if a != b:
                break
            same += 1
        if same < len(self._prefix):
            m.rollback(len(self._prefix) - same)
            del self._prefix[same:]
        for t in prefix[same:]:
            if not m.try_consume(t):
                return False
            self._prefix.append(t)
        return True

    def _run(self, ops: np.ndarray, n_opt: int) -> bool:
        from .kernels.lattice import completable

        chart = self._matcher.chart  # never finished: EOS ends the slots before the prefix
        st = chart.run(
            completable,
            chart.n_sets,
            ops,
            len(ops),
            n_opt,
            self._classes,
            self._comp,
            self._classify,
        )
        return st > 0

    # -- filling ----------------------------------------------------------------------------
    def candidates(self, slots: Sequence[int], pos: int) -> np.ndarray:
        """Token ids to try at ``pos`` when nothing else passes: EOS, then one
        single-byte token per byte class (one of them passes while ``slots`` is
        completable and ``pos`` is its first unknown slot)."""
        eos = list(self.compiled.vocab.eos_token_ids)
        return np.array(eos + [self.byte_token[int(b)] for b in self.class_bytes], np.int64)

    def fallback(self, slots: Sequence[int], pos: int) -> tuple[np.ndarray, np.ndarray]:
        """``(tokens, groups)``, ``int64 [n]`` each: the tokens to choose from at ``pos``
        when nothing else passes (EOS, then every single-byte token) and a group for each:
        tokens of one group pass or fail a check alike wherever they stand (single-byte
        tokens whose bytes are in one byte class of the grammar; each EOS id is a group
        of its own, numbered below 0). While ``slots`` is completable and ``pos`` is its
        first unknown slot, one of them passes (as with :meth:`candidates`, which holds
        one token per group)."""
        return self._fallback

    def fill(
        self, slots: Sequence[int], preferred: Sequence[Sequence[int]] | None = None
    ) -> list[int]:
        """A completion of ``slots``: every unknown slot filled, left to right, with the
        first candidate that keeps the output completable: the slot's ``preferred`` tokens
        in order (e.g. the model's best), then EOS when the output may end there, then a
        single-byte token of each byte class. An optional slot (``MASK_OPT``) is left out
        (the result is shorter by one) when none of its preferred tokens passes and the
        output stays completable without it.

        Raises:
            InvalidArgumentError: ``slots`` cannot be completed, or a slot holds neither a
                token id nor ``MASK``/``MASK_OPT``.
        """
        out = _read_slots(slots, self.compiled.vocab_size)
        if not self.check(out):
            raise InvalidArgumentError(
                "the partial output cannot be completed: expected slots that some filling "
                f"completes in the grammar, got {len(out)} slots "
                f"({out.count(MASK) + out.count(MASK_OPT)} unknown) that none does"
            )
        eos = self.compiled.vocab.eos_token_ids
        fallback = ([eos[0]] if eos else []) + [self.byte_token[int(b)] for b in self.class_bytes]
        done: list[int] = []  # the filled slots before ``i``
        for i, slot in enumerate(out):
            if slot >= 0:
                done.append(slot)
                continue
            rest = out[i + 1 :]
            tried: list[int | None] = []
            if preferred is not None:
                tried += [int(t) for t in preferred[i]]
            if slot == MASK_OPT:
                tried.append(None)  # nothing
            for t in [*tried, *fallback]:
                if self.check([*done, *rest] if t is None else [*done, t, *rest]):
                    if t is not None:
                        done.append(t)
                    break
            else:  # pragma: no cover - a completable output has a one-byte filling
                raise AssertionError("no candidate keeps the output completable")
        return done


class RegularChecker:
    """Exact completability for regular constraints, at the token level.

    For a constraint whose language is one terminal's (``Grammar.from_regex``) the
    token-level DFA (:class:`~corral.automata.token_dfa.TokenDFA`) is small, so an
    unknown slot is exactly "any token" (not one byte): the check propagates the set of
    DFA states through the slots and asks whether an accepting state remains (an
    optional slot, ``MASK_OPT``, keeps the states before it as well). Same slot
    semantics as :class:`CompletionChecker`, and complete as well as sound.
    """

    def __init__(self, compiled: CompiledGrammar, tdfa: TokenDFA) -> None:
        self.compiled = compiled
        self.tdfa = tdfa
        self.checks = 0

    def states_before(self, slots: Sequence[int], pos: int) -> np.ndarray:
        """``bool [Q + 1]``: the DFA states the slots before ``pos`` may lead to."""
        tdfa = self.tdfa
        cur: np.ndarray = np.zeros(tdfa.trans.shape[0], bool)
        cur[tdfa.start] = True
        for t in _read_slots(slots[:pos], tdfa.trans.shape[1]):
            if t == MASK:
                cur = np.asarray(tdfa.adjacency[cur].any(axis=0), bool)
            elif t == MASK_OPT:
                cur = cur | np.asarray(tdfa.adjacency[cur].any(axis=0), bool)
            else:
                nxt = np.zeros_like(cur)
                r = tdfa.trans[cur, t]
                nxt[r[r >= 0]] = True
                cur = nxt
            if not cur.any():
                break
        return cur

    def check(self, slots: Sequence[int]) -> bool:
        """Whether the unknown slots can be filled into a word of the language."""
        self.checks += 1
        end = self.states_before(slots, len(slots))
        return bool((end & self.tdfa.accept).any())

    def candidates(self, slots: Sequence[int], pos: int) -> np.ndarray:
        """Token ids that may go at ``pos`` given the slots before it (a superset of
        those the check accepts there)."""
        before = self.states_before(slots, pos)
        rows = self.tdfa.trans[before]
        return np.flatnonzero((rows >= 0).any(axis=0))

    def fallback(self, slots: Sequence[int], pos: int) -> tuple[np.ndarray, np.ndarray]:
        """``(tokens, groups)`` as in :meth:`CompletionChecker.fallback`: the
        :meth:`candidates`, each token a group of its own."""
        tokens = self.candidates(slots, pos).astype(np.int64)
        return tokens, tokens.copy()


def _read_slots(slots: Sequence[int], size: int, first: int = 0) -> list[int]:
    """``slots`` as ints, each a token id below ``size``, ``MASK`` or ``MASK_OPT``
    (``first``: the index of ``slots[0]``, for the error message).

    Raises:
        InvalidArgumentError: a slot holds anything else.
    """
    out = [int(t) for t in slots]
    if out and (min(out) < MASK_OPT or max(out) >= size):
        for i, t in enumerate(out):
            if not (0 <= t < size or t in (MASK, MASK_OPT)):
                raise _bad_slot(first + i, t, size)
    return out


def _bad_slot(i: int, t: int, size: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"slot {i} holds token id {t}, outside the vocabulary: expected an id in "
        f"[0, {size}), MASK ({MASK}) or MASK_OPT ({MASK_OPT})"
    )


def completion_checker(compiled: CompiledGrammar) -> CompletionChecker | RegularChecker:
    """The exact token-level :class:`RegularChecker` when the constraint is regular (a
    regex), else the byte-level :class:`CompletionChecker`."""
    from .token_dfa import TokenDFA

    tdfa = TokenDFA.from_compiled(compiled)
    if tdfa is not None:
        return RegularChecker(compiled, tdfa)
    return CompletionChecker(compiled)


__all__ = ["MASK", "MASK_OPT", "CompletionChecker", "RegularChecker", "completion_checker"]
