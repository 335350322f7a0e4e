"""Random words of a grammar (for completeness tests) and Lark as an independent oracle."""

from __future__ import annotations

import functools
import random
from collections import deque
from typing import Any

import numpy as np

from corral.grammar import Grammar
from corral.grammar.regex import ByteDFA


def _dist_to_accept(dfa: ByteDFA) -> np.ndarray:
    n = dfa.n_states
    dist = np.full(n, 10**9, np.int64)
    rev: list[list[int]] = [[] for _ in range(n)]
    for s in range(n):
        for t in set(dfa.trans[s][dfa.trans[s] >= 0].tolist()):
            rev[t].append(s)
    q = deque()
    for s in np.flatnonzero(dfa.accept).tolist():
        dist[s] = 0
        q.append(s)
    while q:
        t = q.popleft()
        for s in rev[t]:
            if dist[s] > dist[t] + 1:
                dist[s] = dist[t] + 1
                q.append(s)
    return dist


class WordGenerator:
    """Random words of a :class:`Grammar`: random derivations with bounded depth, random
    lexemes from each terminal's DFA (mostly ASCII, some multi-byte UTF-8), and random
    ignored lexemes between terminals."""

    def __init__(
        self,
        grammar: Grammar,
        seed: int = 0,
        *,
        max_depth: int = 10,
        p_ignore: float = 0.15,
        ascii_bias: float = 0.85,
    ) -> None:
        self.g = grammar
        self.rng = random.Random(seed)
        self.max_depth = max_depth
        self.p_ignore = p_ignore
        self.ascii_bias = ascii_bias
        self.prods: dict[str, list[tuple[str, ...]]] = {}
        for r in grammar.rules:
            self.prods.setdefault(r.lhs, []).append(r.rhs)
        # minimal number of lexemes each symbol derives
        cost: dict[str, float] = {t: 1 for t in grammar.terminals}
        for nt in self.prods:
            cost[nt] = float("inf")
        changed = True
        while changed:
            changed = False
            for lhs, rhss in self.prods.items():
                for rhs in rhss:
                    c = sum(cost[s] for s in rhs)
                    if c < cost[lhs]:
                        cost[lhs] = c
                        changed = True
        self.cost = cost
        self.dist = {n: _dist_to_accept(t.dfa) for n, t in grammar.terminals.items()}

    def lexeme(self, name: str) -> tuple[bytes, int]:
        """A random lexeme of terminal ``name`` and the DFA state it ends in."""
        dfa = self.g.terminals[name].dfa
        dist = self.dist[name]
        s, out = 0, bytearray()
        while True:
            if dfa.accept[s] and (self.rng.random() < 0.3 or len(out) > 12):
                return bytes(out), s
            row = dfa.trans[s]
            cand = np.flatnonzero(row >= 0)
            if len(cand) == 0:  # an accepting state with no way on
                return bytes(out), s
            if len(out) > 12:
                cand = cand[dist[row[cand]] < dist[s]]
            ascii_c = cand[(cand >= 0x20) & (cand < 0x7F)]
            if len(ascii_c) and self.rng.random() < self.ascii_bias:
                cand = ascii_c
            b = int(cand[self.rng.randrange(len(cand))])
            out.append(b)
            s = int(row[b])

    def word(self, tries: int = 50) -> bytes:
        """A random word whose lexemes are maximal (the next lexeme never continues the
        previous one: an ignored lexeme is put between them, else the word is redrawn)."""
        for _ in range(tries):
            out: list[bytes] = []
            self._last: tuple[str, int] | None = None
            self._ok = True
            self._maybe_ignore(out)
            self._derive(self.g.start, 0, out)
            if self._ok:
                return b"".join(out)
        raise RuntimeError("could not draw a word with maximal lexemes")

    def _continues(self, data: bytes) -> bool:
        """Whether the previous lexeme's automaton could read the first byte of ``data``."""
        if self._last is None or not data:
            return False
        name, state = self._last
        return int(self.g.terminals[name].dfa.trans[state, data[0]]) >= 0

    def _append(self, out: list[bytes], name: str) -> None:
        lex, state = self.lexeme(name)
        if self._continues(lex):
            for ign in self.g.ignore:
                sep, sep_state = self.lexeme(ign)
                if not self._continues(sep):
                    self._last = (ign, sep_state)
                    if not self._continues(lex):
                        out.append(sep)
                        break
            else:
                self._ok = False
        out.append(lex)
        self._last = (name, state)

    def _maybe_ignore(self, out: list[bytes]) -> None:
        if self.g.ignore and self.rng.random() < self.p_ignore:
            self._append(out, self.rng.choice(self.g.ignore))

    def _derive(self, sym: str, depth: int, out: list[bytes]) -> None:
        if sym in self.g.terminals:
            self._append(out, sym)
            self._maybe_ignore(out)
            return
        rhss = self.prods[sym]
        if depth >= self.max_depth:
            best = min(sum(self.cost[s] for s in r) for r in rhss)
            rhss = [r for r in rhss if sum(self.cost[s] for s in r) == best]
        for s in self.rng.choice(rhss):
            self._derive(s, depth + 1, out)


@functools.lru_cache(maxsize=64)
def lark_parser(text: str, start: str = "start"):  # type: ignore[no-untyped-def]
    """Lark's own Earley parser with its default (dynamic) lexer: each lexeme is its
    terminal's greedy match, as in corral."""
    from lark import Lark

    return Lark(text, parser="earley", lexer="dynamic", start=start)


class LarkUndecidedError(Exception):
    """Lark's Earley parser failed internally on a word ("Please report this bug"); it gives
    no verdict, so a test cannot use it as the reference for that word."""


def lark_accepts(text: str, word: str, start: str = "start") -> bool:
    from lark.exceptions import LarkError

    try:
        lark_parser(text, start).parse(word)
    except LarkError:
        return False
    except RuntimeError as e:  # Lark's own internal assertion (seen on ambiguous grammars)
        raise LarkUndecidedError(str(e)) from e
    return True


def accepts(compiled: Any, tok: Any, text: str) -> bool:
    """Whether a fresh matcher of ``compiled`` takes ``text`` as ``tok`` splits it (no special
    tokens) and ends accepting."""
    m = compiled.matcher()
    ids = tok.encode(text, add_special_tokens=False)
    return all(m.try_consume(t) for t in ids) and m.is_accepting()


def random_cut(vocab: Any, data: bytes, rng: random.Random) -> list[int] | None:
    """Cut ``data`` into vocabulary tokens at random (any token that is a prefix)."""
    trie = vocab.trie
    out: list[int] = []
    i = 0
    while i < len(data):
        node, cands = 0, []
        for k in range(i, len(data)):
            kids = trie.children[trie.child_start[node] : trie.child_start[node + 1]]
            nb = trie.node_byte[kids]
            j = int(np.searchsorted(nb, data[k]))
            if j >= len(kids) or nb[j] != data[k]:
                break
            node = int(kids[j])
            if trie.tok_count[node]:
                cands.append((int(trie.token_ids[trie.tok_start[node]]), k - i + 1))
        if not cands:
            return None
        tok, ln = rng.choice(cands)
        out.append(tok)
        i += ln
    return out


def mask_of(m: Any) -> np.ndarray:
    """The allowed next tokens of matcher ``m``: ``bool [V]``."""
    import corral

    bm = corral.allocate_bitmask(1, m.vocab_size)
    m.fill_bitmask(bm)
    return corral.bitmask_to_bool(bm, m.vocab_size)[0]


def assert_replays(compiled: Any, ids: list[int]) -> None:
    """Each of ``ids`` is in a fresh matcher's mask before it is consumed; at the end the
    text is complete and EOS is allowed."""
    m = compiled.matcher()
    for i, t in enumerate(ids):
        assert mask_of(m)[t], f"token {i} ({compiled.vocab.token_bytes(t)!r}) not in the mask"
        m.consume(t)
    assert m.is_accepting()
    assert mask_of(m)[compiled.vocab.eos_token_ids[0]]


def guided_walk(
    m: Any,
    target: list[int],
    rng: np.random.Generator,
    lengths: np.ndarray,
    eos: int,
    *,
    follow: float,
    extra_steps: int,
    stop_from: int,
) -> tuple[list[int], bool]:
    """A random walk through matcher ``m`` that follows ``target`` (token ids) with
    probability ``follow`` per step while it can, and otherwise steps to a random allowed
    token (short ones favoured, so walks can end), or ends with probability 1/2 where EOS is
    allowed (always from step ``stop_from`` on). Asserts that some token is always allowed
    (no dead end). Returns the tokens consumed and whether the walk left ``target``."""
    consumed: list[int] = []
    on_target = True
    deviated = False
    for step in range(len(target) + extra_steps):
        a = mask_of(m)
        assert a.any(), "dead end: nothing allowed"
        if on_target and step < len(target) and a[target[step]] and rng.random() < follow:
            t = target[step]
        else:
            if a[eos] and (rng.random() < 0.5 or step >= stop_from):
                break
            ids = np.flatnonzero(a)
            ids = ids[ids != eos]
            if len(ids) == 0:
                break
            p = 1.0 / lengths[ids] ** 3
            t = int(rng.choice(ids, p=p / p.sum()))
            if on_target and not (step < len(target) and t == target[step]):
                on_target = False
                deviated = True
        m.consume(t)
        consumed.append(t)
    return consumed, deviated
