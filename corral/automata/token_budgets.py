"""Token budgets: terminals whose lexemes may hold at most so many tokens.

A structural tag's free text with ``max_tokens`` (a reasoning budget) compiles to terminals
with a budget (``Grammar.token_budgets``: terminal → ``(max_tokens, tail)``). A matcher
counts, for each lexeme of such a terminal in progress, the tokens that hold at least one
of its bytes. Once a lexeme has ``max_tokens`` of them it is *spent*: it may only be
finished, by a *tail*: at most ``tail`` more bytes reaching the first accepting state of
its automaton. For free text up to a stop string ``e`` (``tail = len(e)``) the tails are
the rest of ``e``: the text so far may already end with a part of it, and no new free text
may come before it; for free text ending the output or before a special token (``tail =
3``) the tail is the rest of a UTF-8 character, and then the text ends.

The budget restricts a mask only where every lexeme in progress is spent (another parse
still in the middle of a lexeme keeps its tokens). Then the allowed tokens are those the
grammar allows that either lie inside a tail (a prefix of it) or begin with a whole tail
(the rest of the token belongs to what follows); with an empty tail (the text has ended),
only special tokens and EOS. ``Matcher.consume`` refuses the same tokens, so a budget
never fails open. Text given as bytes (``consume_bytes``) does not count.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import numpy as np

from .kernels.layout import L_ORIGIN, L_STATE, S_L
from .vocabulary import EOS, NORMAL

if TYPE_CHECKING:
    from ..grammar.ir import Grammar
    from .chart import Chart
    from .tables import Tables
    from .vocabulary import Vocabulary

__all__ = ["TokenBudgets"]


class TokenBudgets:
    """The budgets of one compiled grammar (built only for grammars that have some).

    Attributes:
        limit: ``int64 [n_lexer_states]``: the token budget of the terminal each lexer state
            belongs to, ``-1`` where it has none.
    """

    def __init__(self, grammar: Grammar, tables: Tables, vocab: Vocabulary) -> None:
        from .kernels.layout import H_TERM_START

        names = sorted(grammar.terminals)  # the tables' order (grammar.follow.numbered)
        starts = tables.section(H_TERM_START, len(names))
        lex_term = tables.lex_term()
        self.limit = np.full(tables.n_lexer_states, -1, np.int64)
        self._tail = np.zeros(tables.n_lexer_states, np.int64)
        self._local: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}  # term -> dfa
        for i, name in enumerate(names):
            if name not in grammar.token_budgets:
                continue
            max_tokens, tail = grammar.token_budgets[name]
            states = lex_term == i
            self.limit[states] = max_tokens
            self._tail[states] = tail
            dfa = grammar.terminals[name].dfa
            self._local[i] = (dfa.trans, dfa.accept, int(starts[i]))  # type: ignore[union-attr]
        self._lex_term = lex_term
        self._vocab = vocab
        self._tails: dict[tuple[int, int], tuple[bytes, ...]] = {}
        self._dist: dict[int, np.ndarray] = {}
        self._masks: dict[frozenset[bytes], np.ndarray] = {}

    # -- which lexemes are spent ------------------------------------------------------------
    def tails(
        self, chart: Chart, top: int, ends: list[tuple[int, int]], text: bytes | bytearray
    ) -> frozenset[bytes] | None:
        """The tails the input may still take, or ``None`` where no budget restricts it.

        ``top``: the number of chart sets of the input; ``ends``: ``(chart sets, text
        length)`` after each consumed token, in order (a token holds a byte of a lexeme that
        began at set ``o`` when it ends after set ``o + 1``); ``text``: the text so far.
        """
        lo, hi = int(chart.S[top - 1, S_L]), int(chart.S[top, S_L])
        if lo == hi:
            return None
        rows = chart.L[lo:hi]
        spent: set[bytes] = set()
        any_spent = False
        states, origins = rows[:, L_STATE].tolist(), rows[:, L_ORIGIN].tolist()
        for state, origin in zip(states, origins, strict=True):
            limit = int(self.limit[state])
            started = origin < top - 1
            if limit < 0:
                if started:  # a lexeme without budget is in progress: no restriction
                    return None
                continue  # what may follow once the spent text ends
            if self._finished(state):
                continue  # the lexeme is complete and reads no more: what follows decides
            used = len(ends) - bisect.bisect_right(ends, origin + 1, key=_sets)
            if used < limit:
                return None
            # bytes written since the budget ran out (at the end of the limit-th token of
            # the lexeme) count against the tail: what was written after it and is not
            # part of the finishing string would be more text
            sets, text_len = ends[len(ends) - used + limit - 1]  # where the budget ran out
            since = top - sets
            # a character the budget ran out in the middle of is finished first
            need = _unfinished(text, text_len)
            spent.update(self._state_tails(state, int(self._tail[state]) + need - since))
            any_spent = True
        return frozenset(spent) if any_spent else None

    def _state_tails(self, state: int, bound: int) -> tuple[bytes, ...]:
        """The ways to finish a lexeme from lexer state ``state``: byte strings of at most
        ``bound`` bytes reaching its first accepting state."""
        tails = self._tails.get((state, bound))
        if tails is None:
            term = int(self._lex_term[state])
            trans, accept, start = self._local[term]
            dist = self._distance(term)
            out: list[bytes] = []

            def walk(q: int, path: bytes) -> None:
                if accept[q]:
                    out.append(path)
                    return
                left = bound - len(path) - 1  # bytes left after the next one
                for b in np.flatnonzero(trans[q] >= 0).tolist():
                    r = int(trans[q, b])
                    if dist[r] <= left:
                        walk(r, path + bytes([b]))

            if bound >= 0:
                walk(state - start, b"")
            tails = self._tails[(state, bound)] = tuple(out)
        return tails

    def _finished(self, state: int) -> bool:
        """Whether lexer state ``state`` accepts and reads no further byte."""
        trans, accept, start = self._local[int(self._lex_term[state])]
        q = state - start
        return bool(accept[q]) and not bool((trans[q] >= 0).any())

    def _distance(self, term: int) -> np.ndarray:
        """``int64 [n]``: the fewest bytes from each state of ``term``'s automaton to an
        accepting state."""
        d = self._dist.get(term)
        if d is None:
            trans, accept, _ = self._local[term]
            n = trans.shape[0]
            d = np.where(accept, 0, n + 1).astype(np.int64)
            for _ in range(n):
                nxt = np.where(trans >= 0, d[np.maximum(trans, 0)], n + 1).min(axis=1) + 1
                new = np.minimum(d, np.where(accept, 0, nxt))
                if (new == d).all():
                    break
                d = new
            self._dist[term] = d
        return d

    # -- the tokens they allow -----------------------------------------------------------------
    def mask(self, tails: frozenset[bytes]) -> np.ndarray:
        """``uint32 [ceil(V/32)]``: the tokens that lie inside a tail or begin with a whole
        one, and with an empty tail (the text has ended) special tokens and EOS."""
        m = self._masks.get(tails)
        if m is None:
            allowed = np.zeros(self._vocab.size, bool)
            data, offsets = self._vocab.byte_table()
            lengths = np.diff(offsets)
            kinds = self._vocab.kinds
            normal = kinds == NORMAL
            for tail in tails:
                if not tail:
                    allowed |= ~normal
                    continue
                k = len(tail)
                # inside the tail: a non-empty prefix of it
                inside = normal & (lengths >= 1) & (lengths <= k)
                # begins with the whole tail
                begins = normal & (lengths >= k)
                for j, byte in enumerate(tail):
                    pos = np.minimum(offsets[:-1] + j, max(data.shape[0] - 1, 0))
                    hit = data[pos] == byte
                    inside &= (lengths <= j) | hit
                    begins &= hit
                allowed |= inside | begins
            allowed |= kinds == EOS  # EOS is the grammar's to allow
            m = np.packbits(allowed, bitorder="little")
            m = np.concatenate([m, np.zeros((-m.shape[0]) % 4, np.uint8)]).view(np.uint32)
            self._masks[tails] = m
        return m

    def allows(self, tails: frozenset[bytes], token_id: int) -> bool:
        """Whether ``token_id`` is in :meth:`mask` of ``tails``."""
        m = self.mask(tails)
        return bool((int(m[token_id >> 5]) >> (token_id & 31)) & 1)


def _sets(end: tuple[int, int]) -> int:
    return end[0]


def _unfinished(text: bytes | bytearray, end: int) -> int:
    """How many bytes the UTF-8 character cut at ``text[:end]`` still needs (0 if none)."""
    for back in range(1, min(3, end) + 1):
        b = text[end - back]
        if b < 0x80:
            return 0
        if b >= 0xC0:  # a lead byte: the character's length
            n = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return max(0, n - back)
    return 0
