"""The token-level DFA of a regular constraint: ``δ(q, t)`` for every state and token.

Built from a constraint whose language is one terminal's (``Grammar.from_regex``), it
decides completability exactly at the token level (:class:`RegularChecker` in
``completion.py``) and drives DINGO's dynamic programming (``corral.sampler.dingo``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..grammar.regex import ByteDFA
from ..jit import kernel
from .vocabulary import EOS, NORMAL


@dataclass(frozen=True, eq=False)
class TokenDFA:
    """The token-level DFA of a regular constraint over one vocabulary.

    Attributes:
        trans: ``int32 [Q + 1, V]``: the state after token ``t`` from state ``q``, or -1.
            State ``Q`` is ``ENDED`` (after EOS). The start state is 0.
        accept: ``bool [Q + 1]``: the output may end here (``ENDED`` included).
        start: the state before any token.
    """

    trans: np.ndarray
    accept: np.ndarray
    start: int = 0

    @property
    def ended(self) -> int:
        return int(self.trans.shape[0]) - 1

    @cached_property
    def predecessors(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(start, states, tokens)``: the pairs ``(q, t)`` with ``δ(q, t) = r`` are
        ``states[start[r] : start[r + 1]]``, ``tokens[...]``."""
        flat = self.trans.ravel()
        live = np.flatnonzero(flat >= 0)
        order = live[np.argsort(flat[live], kind="stable")]
        v = self.trans.shape[1]
        start = np.searchsorted(flat[order], np.arange(self.trans.shape[0] + 1))
        return start, order // v, order % v

    @cached_property
    def adjacency(self) -> np.ndarray:
        """``bool [Q + 1, Q + 1]``: some token leads from ``q`` to ``r``."""
        n = self.trans.shape[0]
        adj = np.zeros((n, n), bool)
        for q in range(n):
            r = self.trans[q]
            adj[q, np.unique(r[r >= 0])] = True
        return adj

    @classmethod
    def from_byte_dfa(cls, dfa: Any, vocab: Any, *, empty: bool = False) -> TokenDFA:
        """From a trimmed byte DFA (``ByteDFA``: start 0, every state live); ``empty``:
        the empty output is in the language too."""
        byte_trans = dfa.trans.astype(np.int32)
        accept = dfa.accept.astype(bool)
        start = 0
        if empty:  # a fresh accepting start state with the old start's transitions
            byte_trans = np.vstack([byte_trans, byte_trans[:1]])
            accept = np.append(accept, True)
            start = byte_trans.shape[0] - 1
        q = byte_trans.shape[0]
        kinds = vocab.kinds
        data, offsets = vocab.byte_table()
        normal = (kinds == NORMAL).astype(np.uint8)
        trans = np.full((q + 1, vocab.size), -1, np.int32)
        _token_trans(byte_trans, data, offsets, normal, trans)
        eos = np.flatnonzero(kinds == EOS)
        accept = np.append(accept, True)
        for s in np.flatnonzero(accept):
            trans[s, eos] = q
        return cls(trans, accept, start)

    @classmethod
    def from_compiled(cls, compiled: Any) -> TokenDFA | None:
        """The token DFA of a compiled constraint whose language is one terminal's
        (``Grammar.from_regex``), possibly with the empty output; ``None`` otherwise."""
        g = compiled.grammar
        if len(g.terminals) != 1 or g.ignore or g.final_check is not None:
            return None
        (name,) = g.terminals
        term = g.terminals[name]
        if term.special is not None or any(len(r.rhs) > 1 for r in g.rules):
            return None
        # every rule is unit or empty: the language is L(terminal) (if reachable) plus
        # the empty output (if an empty rule is reachable)
        seen, todo, empty, reaches = {g.start}, [g.start], False, False
        while todo:
            a = todo.pop()
            for r in g.rules:
                if r.lhs != a:
                    continue
                if not r.rhs:
                    empty = True
                elif r.rhs[0] == name:
                    reaches = True
                elif r.rhs[0] not in seen:
                    seen.add(r.rhs[0])
                    todo.append(r.rhs[0])
        if not reaches:
            return None
        if not isinstance(term.dfa, ByteDFA):  # a large (span) automaton: too many states
            return None
        return cls.from_byte_dfa(term.dfa, compiled.vocab, empty=empty)


@kernel(nogil=True)
def _token_trans(byte_trans, data, offsets, normal, out):  # type: ignore[no-untyped-def]
    for q in range(byte_trans.shape[0]):
        for t in range(offsets.shape[0] - 1):
            if normal[t] == 0 or offsets[t + 1] == offsets[t]:
                continue
            s = q
            for k in range(offsets[t], offsets[t + 1]):
                s = byte_trans[s, data[k]]
                if s < 0:
                    break
            out[q, t] = s


__all__ = ["TokenDFA"]
