"""Completability of partial outputs, cross-checked against pyformlang's CFG ∩ DFA emptiness.

:class:`~corral.automata.completion.CompletionChecker` decides ``L(G) ∩ C ≠ ∅`` for the
regular language ``C`` of fillings of a slot list, with an Earley parse over byte
positions. This module decides the same question independently: pyformlang intersects
a context-free grammar with a finite automaton (the Bar-Hillel product construction) and
tests the product for emptiness.

Random grammars (a few nonterminals, alternatives, left and right recursion, nested
brackets, empty alternatives) are written twice: as Lark text for corral and as a
pyformlang ``CFG`` built from the same rules. Every terminal is a literal of ONE
character of a small ASCII alphabet, so each character is a lexeme of its own terminal,
lexing is trivial, and both sides define the same set of byte strings.

The automaton for ``C`` is built here from the slot semantics of the checker's docs,
without corral: the output ends at the first known EOS (a known token after it is
impossible, unknown slots after it become EOS); a known token stands for its bytes; an
unknown slot before the last known token is exactly one single-byte token of the
vocabulary; an unknown slot after it is one such byte or nothing (EOS may end the output
early).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

pytest.importorskip("pyformlang")

from pyformlang.cfg import CFG, Production, Terminal, Variable
from pyformlang.finite_automaton import (
    DeterministicFiniteAutomaton,
    State,
    Symbol,
)

import corral
from corral.automata.completion import MASK, CompletionChecker
from corral.errors import CorralError

ALPHABET = "ab()[],"  # plain in a Lark literal, one byte each, no pyformlang keyword
PAIRS = [("(", ")"), ("[", "]")]
Rules = dict[str, list[tuple[str, ...]]]  # rule name -> alternatives; 1-char symbols are terminals

N_GRAMMARS = 40
CASES_PER_GRAMMAR = 25
MAX_BYTES = 14  # bytes a slot list may stand for (pyformlang's product is cubic in states)


# -- grammars ------------------------------------------------------------------------------
def _random_alternative(rng: random.Random, name: str, names: list[str]) -> tuple[str, ...]:
    """One alternative of rule ``name``: a random sequence or a typical shape (brackets,
    left-recursive list, right recursion, empty)."""
    other = rng.choice(names)
    shape = rng.random()
    if shape < 0.15:
        return ()
    if shape < 0.3:
        left, right = rng.choice(PAIRS)
        return (left, other, right) if rng.random() < 0.7 else (left, right)
    if shape < 0.45:
        return (name, rng.choice(",ab"), other)  # left recursion
    if shape < 0.55:
        return (rng.choice(ALPHABET), name)  # right recursion
    seq: list[str] = []
    for _ in range(rng.randint(1, 3)):
        seq.append(rng.choice(ALPHABET) if rng.random() < 0.6 else rng.choice(names))
    return tuple(seq)


def _random_rules(rng: random.Random) -> Rules:
    """A random grammar over :data:`ALPHABET` with ``start`` and up to three more rules."""
    names = ["start", *[f"r{i}" for i in range(rng.randint(0, 3))]]
    rules: Rules = {}
    for name in names:
        alts: list[tuple[str, ...]] = []
        for _ in range(rng.randint(1, 3)):
            alt = _random_alternative(rng, name, names)
            if alt not in alts:
                alts.append(alt)
        rules[name] = alts
    return rules


def _lark_text(rules: Rules) -> str:
    """The grammar as Lark text (an empty alternative is written ``()``)."""

    def sym(s: str) -> str:
        return f'"{s}"' if len(s) == 1 else s

    lines = []
    for name, alts in rules.items():
        bodies = [" ".join(sym(s) for s in alt) if alt else "()" for alt in alts]
        lines.append(f"{name}: " + " | ".join(bodies))
    return "\n".join(lines) + "\n"


def _pyformlang_cfg(rules: Rules) -> CFG:
    """The same grammar as a pyformlang CFG (terminals are the characters)."""
    prods = [
        Production(Variable(name), [Terminal(s) if len(s) == 1 else Variable(s) for s in alt])
        for name, alts in rules.items()
        for alt in alts
    ]
    return CFG(start_symbol=Variable("start"), productions=prods)


def _heights(rules: Rules) -> dict[str, float]:
    """Height of the lowest derivation tree of each rule (inf where it derives no word)."""
    height = {name: float("inf") for name in rules}
    changed = True
    while changed:
        changed = False
        for name, alts in rules.items():
            h = min(1 + max((height[s] for s in a if len(s) > 1), default=0) for a in alts)
            if h < height[name]:
                height[name], changed = h, True
    return height


def _random_word(rules: Rules, rng: random.Random, max_depth: int = 4) -> str:
    """A word of the grammar from a random derivation (lowest subtrees past ``max_depth``,
    which always ends: the height drops at every step)."""
    height = _heights(rules)

    def alt_height(alt: tuple[str, ...]) -> float:
        return max((height[s] for s in alt if len(s) > 1), default=0)

    def derive(name: str, depth: int) -> str:
        alts = [a for a in rules[name] if alt_height(a) < float("inf")]
        alt = min(alts, key=alt_height) if depth >= max_depth else rng.choice(alts)
        return "".join(s if len(s) == 1 else derive(s, depth + 1) for s in alt)

    return derive("start", 0)


# -- vocabularies and slots ------------------------------------------------------------------
def _random_tokens(rng: random.Random, words: list[str]) -> list[bytes]:
    """Single characters (some left out), a stray byte sometimes, random multi-character
    strings and pieces of words of the grammar."""
    tokens = {c for c in ALPHABET if rng.random() < 0.85}
    if rng.random() < 0.2:
        tokens.add("x")  # a byte no grammar uses
    for _ in range(rng.randint(2, 5)):
        tokens.add("".join(rng.choice(ALPHABET) for _ in range(rng.randint(2, 3))))
    for w in words:
        if len(w) >= 2:
            i = rng.randrange(len(w) - 1)
            tokens.add(w[i : i + rng.randint(2, 3)])
    out = sorted(t.encode() for t in tokens)
    rng.shuffle(out)
    return out


def _vocab(tokens: list[bytes], with_eos: bool) -> corral.Vocabulary:
    """The vocabulary: ``tokens``, then EOS (id ``len(tokens)``) if ``with_eos``."""
    if not with_eos:
        return corral.Vocabulary(tokens)
    return corral.Vocabulary([*tokens, b"<eos>"], eos_token_ids=[len(tokens)])


def _cut(tokens: list[bytes], text: bytes, rng: random.Random) -> list[int] | None:
    """A random segmentation of ``text`` into ``tokens`` (ids), or None if there is none."""
    ok = [False] * len(text) + [True]  # ok[i]: text[i:] can be segmented
    for i in range(len(text) - 1, -1, -1):
        ok[i] = any(text.startswith(b, i) and ok[i + len(b)] for b in tokens)
    if not ok[0]:
        return None
    out: list[int] = []
    i = 0
    while i < len(text):
        fits = [t for t, b in enumerate(tokens) if text.startswith(b, i) and ok[i + len(b)]]
        t = rng.choice(fits)
        out.append(t)
        i += len(tokens[t])
    return out


def _random_slots(
    rules: Rules, tokens: list[bytes], eos: int | None, rng: random.Random
) -> list[int]:
    """Slots near a word of the grammar (some masked, replaced or dropped, cut short,
    trailing masks, EOS and what follows it); or, one time in five, random slots."""
    n_ids = len(tokens) + (eos is not None)
    cut = _cut(tokens, _random_word(rules, rng).encode(), rng) if rng.random() > 0.2 else None
    if cut is None:
        return [
            MASK if rng.random() < 0.45 else rng.randrange(n_ids) for _ in range(rng.randint(1, 7))
        ]
    if cut and rng.random() < 0.15:
        cut = cut[: rng.randrange(len(cut))]  # a prefix
    slots: list[int] = []
    for t in cut:
        r = rng.random()
        if r < 0.3:
            slots.append(MASK)
        elif r < 0.38:
            slots.append(rng.randrange(n_ids))
        elif r < 0.42:
            continue  # dropped
        else:
            slots.append(t)
    slots += [MASK] * rng.choice([0, 0, 1, 2, 3])
    if eos is not None and rng.random() < 0.3:
        slots.append(eos)
        slots += [rng.choice([MASK, MASK, eos, 0]) for _ in range(rng.choice([0, 0, 1, 2]))]
    return slots


# -- the language of fillings --------------------------------------------------------------
def _fillings_dfa(
    slots: Sequence[int], tokens: list[bytes], eos: int | None
) -> DeterministicFiniteAutomaton:
    """The DFA of texts the slots may stand for (no accepting state if none).

    A chain of states, one per byte position: a known token steps through its bytes, an
    unknown slot steps on any single-byte token. Past the last known token every state
    accepts (an unknown slot there may be EOS, and then so are all later ones), unless
    the vocabulary has no EOS: then every slot holds a token.
    """
    end = slots.index(eos) if eos in slots else len(slots)
    dfa = DeterministicFiniteAutomaton()
    dfa.add_start_state(State(0))
    if any(t not in (MASK, eos) for t in slots[end:]):
        return dfa  # a token after the end of the output
    body = slots[:end]
    last = max((i for i, t in enumerate(body) if t != MASK), default=-1)
    if eos is None:
        last = len(body) - 1
    singles = sorted({b.decode() for b in tokens if len(b) == 1})
    q = 0
    for i, t in enumerate(body):
        if i > last:
            dfa.add_final_state(State(q))
        steps = [[c] for c in tokens[t].decode()] if t != MASK else [singles]
        for chars in steps:
            for c in chars:
                dfa.add_transition(State(q), Symbol(c), State(q + 1))
            q += 1
    dfa.add_final_state(State(q))
    return dfa


def _n_bytes(slots: Sequence[int], tokens: list[bytes]) -> int:
    """Byte positions of the slots' automaton (one per unknown slot or EOS)."""
    return sum(len(tokens[t]) if 0 <= t < len(tokens) else 1 for t in slots)


def _show(slots: Sequence[int], tokens: list[bytes]) -> list[object]:
    """The slots as bytes, ``MASK`` and ``EOS``, for failure messages."""
    return ["MASK" if t == MASK else tokens[t] if t < len(tokens) else "EOS" for t in slots]


# -- the test --------------------------------------------------------------------------------
def test_agrees_with_pyformlang_intersection() -> None:
    rng = random.Random(20240611)
    seen = {True: 0, False: 0}
    grammars = refused = 0
    while grammars < N_GRAMMARS:
        rules = _random_rules(rng)
        cfg = _pyformlang_cfg(rules)
        if cfg.is_empty():
            continue
        text = _lark_text(rules)
        tokens = _random_tokens(rng, [_random_word(rules, rng) for _ in range(3)])
        eos = len(tokens) if rng.random() < 0.85 else None
        try:
            compiled = corral.compile(text, _vocab(tokens, eos is not None))
        except CorralError:  # pragma: no cover - none seen with this seed
            refused += 1
            continue
        grammars += 1
        checker = CompletionChecker(compiled)
        done = 0
        while done < CASES_PER_GRAMMAR:
            slots = _random_slots(rules, tokens, eos, rng)
            if _n_bytes(slots, tokens) > MAX_BYTES:
                continue
            done += 1
            want = not cfg.intersection(_fillings_dfa(slots, tokens, eos)).is_empty()
            got = checker.check(slots)
            assert got == want, (
                f"corral says {got}, pyformlang says {want}\n"
                f"grammar:\n{text}tokens: {tokens}{' + EOS' if eos is not None else ''}\n"
                f"slots: {_show(slots, tokens)}"
            )
            seen[want] += 1
    assert refused <= N_GRAMMARS // 10, f"corral refused {refused} grammars"
    assert seen[True] >= 100 and seen[False] >= 100, seen
