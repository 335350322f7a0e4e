"""An independent reading of a GBNF grammar: a character-level Earley recognizer and a
random sentence generator, over the rules as written (no lexer, no lexemes).

The syntax tree comes from corral's reader (``corral.grammar.gbnf.syntax``, tested on its
own); everything after it is separate from ``corral.grammar.gbnf.build``: the rules are
expanded into plain BNF over character sets, and recognized character by character.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from corral.grammar.gbnf.syntax import Choice, GbnfGrammar, Literal, Node, Ref, Rep, Seq, Special
from corral.grammar.regex import ast
from corral.grammar.regex.charset import CharSet

Symbol = str | CharSet  # a nonterminal's name, or one character from a set


@dataclass
class Bnf:
    rules: dict[str, list[tuple[Symbol, ...]]]
    start: str


def to_bnf(g: GbnfGrammar, root: str = "root") -> Bnf:
    """The rules of ``g`` over characters; groups and repetitions become fresh rules
    (``x*`` right-recursive, ``x{m,n}`` expanded)."""
    rules: dict[str, list[tuple[Symbol, ...]]] = {}
    counter = [0]

    def fresh() -> str:
        counter[0] += 1
        return f"_{counter[0]}"

    def seq(node: Node) -> tuple[Symbol, ...]:
        if isinstance(node, Seq):
            return tuple(s for x in node.items for s in seq(x))
        if isinstance(node, Literal):
            return tuple(CharSet.of(c) for c in node.text)
        if isinstance(node, ast.Chars):
            return (node.chars,)
        if isinstance(node, Ref):
            return (node.name,)
        if isinstance(node, Special):
            raise ValueError("special tokens have no characters")
        if isinstance(node, Choice):
            n = fresh()
            rules[n] = [seq(x) for x in node.items]
            return (n,)
        assert isinstance(node, Rep)
        body = seq(node.item)
        out: list[Symbol] = []
        for _ in range(node.min):
            out += body
        if node.max is None:
            n = fresh()
            rules[n] = [(), (*body, n)]
            out.append(n)
        else:
            tail: tuple[Symbol, ...] = ()
            for _ in range(node.max - node.min):
                n = fresh()
                rules[n] = [(), (*body, *tail)]
                tail = (n,)
            out += tail
        return tuple(out)

    for name, r in g.rules.items():
        body = r.body
        rules[name] = [seq(x) for x in body.items] if isinstance(body, Choice) else [seq(body)]
    return Bnf(rules, root)


def _nullable(b: Bnf) -> set[str]:
    null: set[str] = set()
    changed = True
    while changed:
        changed = False
        for n, alts in b.rules.items():
            if n not in null and any(
                all(isinstance(s, str) and s in null for s in a) for a in alts
            ):
                null.add(n)
                changed = True
    return null


def recognizes(b: Bnf, text: str) -> bool:
    """Whether ``text`` is a sentence of ``b`` (Earley, with nullable completion)."""
    null = _nullable(b)
    # an item: (lhs, alternative index, dot, origin)
    sets: list[set[tuple[str, int, int, int]]] = [set() for _ in range(len(text) + 1)]
    sets[0] = {(b.start, i, 0, 0) for i in range(len(b.rules[b.start]))}
    for k in range(len(text) + 1):
        agenda = list(sets[k])
        while agenda:
            lhs, ai, dot, org = agenda.pop()
            rhs = b.rules[lhs][ai]
            if dot == len(rhs):  # complete
                for l2, a2, d2, o2 in list(sets[org]):
                    r2 = b.rules[l2][a2]
                    if d2 < len(r2) and r2[d2] == lhs:
                        it = (l2, a2, d2 + 1, o2)
                        if it not in sets[k]:
                            sets[k].add(it)
                            agenda.append(it)
                continue
            s = rhs[dot]
            if isinstance(s, str):  # predict
                for i in range(len(b.rules[s])):
                    it = (s, i, 0, k)
                    if it not in sets[k]:
                        sets[k].add(it)
                        agenda.append(it)
                if s in null:
                    it = (lhs, ai, dot + 1, org)
                    if it not in sets[k]:
                        sets[k].add(it)
                        agenda.append(it)
            elif k < len(text) and ord(text[k]) in s:  # scan
                sets[k + 1].add((lhs, ai, dot + 1, org))
    return any(
        lhs == b.start and org == 0 and dot == len(b.rules[lhs][ai])
        for lhs, ai, dot, org in sets[len(text)]
    )


def sentence(b: Bnf, rng: random.Random, max_depth: int = 12) -> str:
    """A random sentence: random alternatives, the shortest ones past ``max_depth``;
    characters mostly ASCII where the set allows."""
    cost = _min_lengths(b)
    out: list[str] = []

    def derive(s: Symbol, depth: int) -> None:
        if isinstance(s, CharSet):
            ascii_part = s.intersection(CharSet([(0x20, 0x7E)]))
            pick = ascii_part if ascii_part and rng.random() < 0.8 else s
            lo, hi = rng.choice(pick.ranges)
            out.append(chr(rng.randint(lo, min(hi, lo + 300))))
            return
        alts = b.rules[s]
        if depth >= max_depth:
            best = min(sum(_cost(x, cost) for x in a) for a in alts)
            alts = [a for a in alts if sum(_cost(x, cost) for x in a) == best]
        for x in rng.choice(alts):
            derive(x, depth + 1)

    derive(b.start, 0)
    return "".join(out)


def _cost(s: Symbol, cost: dict[str, float]) -> float:
    return 1 if isinstance(s, CharSet) else cost[s]


def _min_lengths(b: Bnf) -> dict[str, float]:
    cost = dict.fromkeys(b.rules, float("inf"))
    changed = True
    while changed:
        changed = False
        for n, alts in b.rules.items():
            best = min(sum(_cost(x, cost) for x in a) for a in alts)
            if best < cost[n]:
                cost[n] = best
                changed = True
    return cost


def edits(s: str, rng: random.Random, chars: str, n: int = 6) -> list[str]:
    """``n`` single edits of ``s`` at random places: a character deleted, or one of
    ``chars`` inserted or put in place of one."""
    out = []
    for _ in range(n):
        i = rng.randrange(len(s) + 1)
        kind = rng.randrange(3)
        if kind == 0 and i < len(s):
            out.append(s[:i] + s[i + 1 :])
        elif kind == 1:
            out.append(s[:i] + rng.choice(chars) + s[i:])
        elif i < len(s):
            out.append(s[:i] + rng.choice(chars) + s[i + 1 :])
    return out
