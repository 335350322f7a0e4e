"""Completability of partial outputs with unknown tokens anywhere (any-order decoding).

A diffusion model (or an infilling task) writes a fixed number of token *slots* in any
order. A partial output is the slot list with some tokens known and the rest unknown
(``MASK``). :class:`CompletionChecker` answers whether the unknown slots can still be
filled so that the whole output is a word of the grammar: ``L(G) ∩ C ≠ ∅`` for the
regular language ``C`` of fillings. It is what keeps constrained any-order decoding free
of dead ends: a token is placed only where the answer stays yes.

**What a filling may be.** Slots are read left to right; the output ends at its first EOS
token (every later slot must be EOS or unknown, and becomes EOS) or at the last slot.
An unknown slot before the last known non-EOS token must hold a token; the unknown slots
after it may hold tokens or EOS (the output may end early), or only tokens if the
vocabulary has no EOS. The check lets an unknown
slot hold any *single-byte* token of the vocabulary (every byte a token spells alone,
which for byte-level vocabularies is all 256). That makes ``C`` a sequence of byte
positions and the check an exact Earley parse over it (``kernels/lattice.py``).

It is **sound**: a yes comes with a filling the decoder can always realise (one
single-byte token per slot), so a decoder that only places tokens the check accepts never
dead-ends. It is **not complete** for multi-byte fillings: a gap of ``k`` slots is
assumed to hold ``k`` bytes, so a yes that would need longer tokens in the gap (a long
required key in a two-slot gap) is a no. Tokens already placed may be as long as they
like. Where the vocabulary lacks single-byte tokens (WordPiece vocabularies), gaps can
hold only the bytes it has.

Incremental: the known prefix (slots before the first unknown one) is kept parsed
between calls, so a call parses only from the first unknown slot on, and stops early
once a complete word is reachable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import UnsupportedFeatureError
from .tables import H_BYTE_CLASS
from .vocabulary import EOS, NORMAL, SPECIAL

if TYPE_CHECKING:
    from .compiled import CompiledGrammar
    from .token_dfa import TokenDFA

MASK = -1  # an unknown slot


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
        self._classes = np.array(sorted(rep), np.int64)
        self._comp = np.zeros(max(1, len(rep)), np.int64)
        self._can_end = bool(vocab.eos_token_ids)
        self._matcher = compiled.matcher()
        self._prefix: list[int] = []
        self.checks = 0
        self._classify = 1  # merge items of equal continuations (0: only equal origins)

    # -- the check ------------------------------------------------------------------------
    def check(self, slots: Sequence[int]) -> bool:
        """Whether the unknown slots (``MASK``) of ``slots`` can be filled into a word of
        the grammar (see the module docs for what a filling may be)."""
        self.checks += 1
        slots = [int(t) for t in slots]
        kinds = self.compiled.vocab.kinds
        size = self.compiled.vocab_size
        end = len(slots)
        for i, t in enumerate(slots):
            if t != MASK and not 0 <= t < size:
                raise ValueError(f"slot {i} holds token id {t}, outside the vocabulary")
            if t != MASK and kinds[t] == EOS:
                end = i
                break
        if any(t != MASK and kinds[t] != EOS for t in slots[end:]):
            return False  # text after the end
        known = [i for i in range(end) if slots[i] != MASK]
        last = known[-1] if known else -1
        if not self._can_end:
            last = end - 1  # no EOS: every slot holds a token
        first_gap = next((i for i in range(end) if slots[i] == MASK), end)
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
        single-byte token); what comes after ``pos`` is ignored. So a token outside the
        result fails :meth:`check` wherever it is placed at ``pos``, whatever the other
        slots hold: a filter that decoders apply before checking, at the cost of one
        mask. EOS ids are always included (the output may end before ``pos``, which the
        check decides).
        """
        from .kernels.lattice import scan_ops

        c = self.compiled
        vocab = c.vocab
        out = np.zeros(c.words, np.uint32)
        prefix = [int(t) for t in slots[:pos]]
        for i, t in enumerate(prefix):
            if t != MASK and not 0 <= t < c.vocab_size:
                raise ValueError(f"slot {i} holds token id {t}, outside the vocabulary")
        ended = any(t != MASK and vocab.kinds[t] == EOS for t in prefix)
        first_gap = next((i for i, t in enumerate(prefix) if t == MASK), pos)
        if not ended and self._advance_prefix(prefix[:first_gap]):
            ops = self._ops(prefix[first_gap:])
            m = self._matcher
            top = m._n_sets
            if ops is not None and len(ops):
                arr = np.array(ops, np.int64)
                top = m._call(
                    scan_ops, m._n_sets, arr, len(arr), self._classes, self._comp, self._classify
                )
            if ops is not None and top > 0:
                m._fill_row(out, top)
        bits = np.unpackbits(out.view(np.uint8), bitorder="little")[: c.vocab_size]
        allowed = bits.astype(bool)
        allowed[list(vocab.eos_token_ids)] = True
        return allowed

    def _ops(self, slots: Sequence[int]) -> list[int] | None:
        """The lattice ops of known tokens and unknown slots (``None``: a token that
        cannot be read inside an output)."""
        from .kernels.lattice import OP_GAP, OP_SPECIAL  # numba: loaded on first use

        c = self.compiled
        kinds = c.vocab.kinds
        ops: list[int] = []
        for t in slots:
            if t == MASK:
                ops.append(OP_GAP)
            elif kinds[t] == NORMAL:
                ops.extend(c.vocab.token_bytes(t))
            elif kinds[t] == SPECIAL and t in c._special_term_of_token:
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

        m = self._matcher  # never finished: EOS ends the slots before the prefix
        st = m._call(
            completable, m._n_sets, ops, len(ops), n_opt, self._classes, self._comp, self._classify
        )
        return st > 0

    # -- filling ----------------------------------------------------------------------------
    def candidates(self, slots: Sequence[int], pos: int) -> np.ndarray:
        """Token ids to try at ``pos`` when nothing else passes: EOS, then one
        single-byte token per byte class (one of them passes while ``slots`` is
        completable and ``pos`` is its first unknown slot)."""
        eos = list(self.compiled.vocab.eos_token_ids)
        return np.array(eos + [self.byte_token[int(b)] for b in self.class_bytes], np.int64)

    def fill(
        self, slots: Sequence[int], preferred: Sequence[Sequence[int]] | None = None
    ) -> list[int]:
        """A completion of ``slots``: every unknown slot filled, left to right, with the
        first candidate that keeps the output completable: the slot's ``preferred`` tokens
        in order (e.g. the model's best), then EOS when the output may end there, then a
        single-byte token of each byte class.

        Raises:
            ValueError: ``slots`` cannot be completed.
        """
        out = [int(t) for t in slots]
        if not self.check(out):
            raise ValueError("the partial output cannot be completed")
        eos = self.compiled.vocab.eos_token_ids
        fallback = ([eos[0]] if eos else []) + [self.byte_token[int(b)] for b in self.class_bytes]
        for i in range(len(out)):
            if out[i] != MASK:
                continue
            tried = list(preferred[i]) if preferred is not None else []
            for t in [*tried, *fallback]:
                out[i] = int(t)
                if self.check(out):
                    break
            else:  # pragma: no cover - a completable output has a one-byte filling
                raise AssertionError("no candidate keeps the output completable")
        return out


class RegularChecker:
    """Exact completability for regular constraints, at the token level.

    For a constraint whose language is one terminal's (``Grammar.from_regex``) the
    token-level DFA (:class:`~corral.automata.token_dfa.TokenDFA`) is small, so an
    unknown slot is exactly "any token" (not one byte): the check propagates the set of
    DFA states through the slots and asks whether an accepting state remains. Same
    slot semantics as :class:`CompletionChecker`, and complete as well as sound.
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
        size = tdfa.trans.shape[1]
        for i in range(pos):
            t = int(slots[i])
            if t == MASK:
                cur = np.asarray(tdfa.adjacency[cur].any(axis=0), bool)
            else:
                if not 0 <= t < size:
                    raise ValueError(f"slot {i} holds token id {t}, outside the vocabulary")
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


def completion_checker(compiled: CompiledGrammar) -> CompletionChecker | RegularChecker:
    """The exact token-level :class:`RegularChecker` when the constraint is regular (a
    regex), else the byte-level :class:`CompletionChecker`."""
    from .token_dfa import TokenDFA

    tdfa = TokenDFA.from_compiled(compiled)
    if tdfa is not None:
        return RegularChecker(compiled, tdfa)
    return CompletionChecker(compiled)


__all__ = ["MASK", "CompletionChecker", "RegularChecker", "completion_checker"]
