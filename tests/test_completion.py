"""Completability of partial outputs with unknown slots, against brute-force enumeration.

The reference fills every unknown slot with every allowed choice (a single-byte token or
EOS), keeps the fillings that are well formed (nothing but EOS after the first EOS) and
asks Lark's own Earley parser whether the text is in the language. The checker must
agree on every case: a yes without a filling would let a decoder dead-end, a no with one
would refuse a valid placement.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from support.words import LarkUndecidedError, lark_accepts

import corral
from corral.automata.completion import MASK, CompletionChecker
from corral.automata.kernels.lattice import OP_GAP, scan_ops
from corral.errors import UnsupportedFeatureError

LIST = r"""
start: "[" [item ("," item)*] "]"
item: WORD | start
WORD: /[ab]+/
"""
WORDS = r"""
start: WORD (" " WORD)* "."?
WORD: /[ab]+/
"""
STRING = r"""
start: "{" pair ("," pair)* "}"
pair: KEY ":" VALUE
KEY: /"[^"]{1,3}"/
VALUE: /"[^"]*"/ | /[0-9]+/
"""
# left recursion, a nullable rule and an ignored terminal: what item classes must respect
SUMS = r"""
start: expr
expr: expr "+" term | term
term: sign NUM | "(" expr ")"
sign: "-"?
NUM: /[0-9]+/
%ignore " "
"""

CASES = {
    "list": (LIST, [b"[", b"]", b",", b"a", b"b", b"x", b"[a", b"a,", b"ab", b"],", b"]]", b",["]),
    "words": (WORDS, [b"a", b"b", b" ", b".", b"ab", b"a ", b" b", b"ba.", b"x"]),
    "string": (
        STRING,
        [b"{", b"}", b":", b",", b'"', b"1", b"\xc3", b"\xa9", b"\xc3\xa9", b'"\xc3\xa9"',
         b'":', b'{"', b'":"', b"12", b'"}'],
    ),
    "sums": (
        SUMS,
        [b"1", b"2", b"+", b"-", b"(", b")", b" ", b"12", b" +", b"+ ", b"(1", b"1)", b"x", b"))"],
    ),
    # no single-byte quote: a gap can never close a string (gaps repeat the same set)
    "unclosable": (
        STRING,
        [b"{", b"}", b":", b",", b"1", b"a", b'{"', b'":"', b'"}', b'",'],
    ),
}  # fmt: skip
WORDS_OF = {
    "list": ["[]", "[a]", "[ab,b]", "[[a],b]", "[[]]", "[a,[b,a]]", "[[],[ab]]"],
    "words": ["a", "ab ba.", "a b", "b.", "ab a b.", "ba ab"],
    "string": ['{"é":"1"}', '{"1":11}', '{"11":"é1","é":""}', '{":":"{"}', '{"é1":111}'],
    "unclosable": ['{"a":"1a"}', '{"1":"a"}', '{"aa":"a"}'],
    "sums": ["1+2", "(1 + -2)", "((1))+ 12", "-1 +(2+1)", " 2 ", "(-(1)) + ( 2)"],
}


def _cut(vocab: corral.Vocabulary, text: bytes, rng: random.Random) -> list[int]:
    """A random segmentation of ``text`` into tokens of ``vocab``."""
    toks = {t: vocab.token_bytes(t) for t in range(vocab.size - 1)}
    ok = [False] * len(text) + [True]  # ok[i]: text[i:] can be segmented
    for i in range(len(text) - 1, -1, -1):
        ok[i] = any(text.startswith(b, i) and ok[i + len(b)] for b in toks.values())
    assert ok[0], text
    out = []
    i = 0
    while i < len(text):
        t = rng.choice([t for t, b in toks.items() if text.startswith(b, i) and ok[i + len(b)]])
        out.append(t)
        i += len(toks[t])
    return out


def _case(name: str, vocab: corral.Vocabulary, rng: random.Random) -> list[int]:
    """Slots near a word of the grammar: some masked, some replaced, some trailing masks
    or EOS; or, one time in five, random slots."""
    eos = vocab.eos_token_ids[0]
    if rng.random() < 0.2:
        return [
            MASK if rng.random() < 0.45 else rng.randrange(vocab.size - 1)
            for _ in range(rng.randint(1, 7))
        ]
    slots = _cut(vocab, rng.choice(WORDS_OF[name]).encode(), rng)
    slots = [
        MASK if r < 0.35 else rng.randrange(vocab.size - 1) if r < 0.42 else t
        for t, r in ((t, rng.random()) for t in slots)
    ]
    slots += [MASK] * rng.randint(0, 2) + [eos] * rng.randint(0, 1)
    return slots


def _vocab(tokens: list[bytes]) -> corral.Vocabulary:
    return corral.Vocabulary([*tokens, b"<eos>"], eos_token_ids=[len(tokens)])


def _brute(grammar: str, vocab: corral.Vocabulary, slots: list[int], memo: dict) -> bool | None:
    eos = vocab.eos_token_ids[0]
    singles = [t for t in range(vocab.size - 1) if len(vocab.token_bytes(t)) == 1]
    holes = [i for i, t in enumerate(slots) if t == MASK]
    for fill in itertools.product([*singles, eos], repeat=len(holes)):
        full = list(slots)
        for i, t in zip(holes, fill, strict=True):
            full[i] = t
        end = full.index(eos) if eos in full else len(full)
        if any(t != eos for t in full[end:]):
            continue
        text = b"".join(vocab.token_bytes(t) for t in full[:end])
        if text not in memo:
            try:
                memo[text] = lark_accepts(grammar, text.decode("utf-8"))
            except UnicodeDecodeError:
                memo[text] = False
            except LarkUndecidedError:
                memo[text] = None
        if memo[text] is None:
            return None
        if memo[text]:
            return True
    return False


@pytest.mark.parametrize("name", sorted(CASES))
def test_agrees_with_brute_force(name: str) -> None:
    grammar, tokens = CASES[name]
    vocab = _vocab(tokens)
    checker = CompletionChecker(corral.compile(grammar, vocab))
    rng = random.Random(name)
    memo: dict = {}
    seen = {True: 0, False: 0}
    for _ in range(300):
        slots = _case(name, vocab, rng)
        if sum(t == MASK for t in slots) > 3:
            continue
        want = _brute(grammar, vocab, slots, memo)
        if want is None:
            continue
        got = checker.check(slots)
        assert got == want, f"{name}: {[vocab.token_bytes(t) if t >= 0 else None for t in slots]}"
        seen[want] += 1
    assert seen[True] >= 20 and seen[False] >= 20, seen


def test_incremental_prefix_reuse_matches_fresh_checker() -> None:
    """The kept prefix is rolled back and re-extended correctly across calls."""
    grammar, tokens = CASES["list"]
    vocab = _vocab(tokens)
    cg = corral.compile(grammar, vocab)
    kept = CompletionChecker(cg)
    rng = random.Random(5)
    for _ in range(300):
        slots = [
            MASK if rng.random() < 0.3 else rng.randrange(vocab.size - 1)
            for _i in range(rng.randint(1, 9))
        ]
        assert kept.check(slots) == CompletionChecker(cg).check(slots)


def test_fill_completes_every_completable_output() -> None:
    grammar, tokens = CASES["string"]
    vocab = _vocab(tokens)
    cg = corral.compile(grammar, vocab)
    checker = CompletionChecker(cg)
    rng = random.Random(1)
    filled = 0
    for _ in range(200):
        slots = [MASK if rng.random() < 0.6 else rng.randrange(vocab.size - 1) for _i in range(8)]
        if not checker.check(slots):
            with pytest.raises(ValueError, match="cannot be completed"):
                checker.fill(slots)
            continue
        out = checker.fill(slots)
        assert all(a == b for a, b in zip(slots, out, strict=True) if a != MASK)
        m = cg.matcher()
        for t in out:
            m.consume(t)
            if m.is_finished():
                break
        assert m.is_finished() or m.is_accepting()
        filled += 1
    assert filled >= 10


def test_json_schema_on_a_real_vocabulary() -> None:
    """Gaps next to partial lexemes and multi-byte characters, with Llama-3 tokens."""
    from support.tokenizers import load_tokenizer, load_vocab

    tok, vocab = load_tokenizer("llama3"), load_vocab("llama3")
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 4}, "n": {"type": "integer"}},
        "required": ["name", "n"],
        "additionalProperties": False,
    }
    cg = corral.compile(schema, vocab, final_check=False)
    checker = CompletionChecker(cg)
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    whole = enc('{"name": "Zoë", "n": 12}')
    assert checker.check(whole)
    assert checker.check([*whole, *[MASK] * 5])
    # tokens: {" name ": _" Z o ë ", _" n ": _ 12 }
    holes = list(whole)
    for i in (4, 5, 6, 9, 12):
        holes[i] = MASK
    assert checker.check(holes)
    # a gap slot is one byte: "name" cannot shrink into one slot (the key is fixed)
    assert not checker.check([MASK if i == 1 else t for i, t in enumerate(whole)])
    # five more characters cannot fit maxLength 4 ...
    assert not checker.check([*enc('{"name": "'), MASK, MASK, *enc('zzzzz", "n": 1}')])
    # ... unless the gap starts an escape: "\uabcd" is one character
    assert checker.check([*enc('{"name": "'), MASK, MASK, *enc('abcde", "n": 1}')])
    # "n" is required: closing right after the name leaves no room for it
    assert not checker.check([*enc('{"name": "ab"'), MASK, *enc("}")])
    # one slot holds one byte: ',"n":1' needs 6 (spaces are optional)
    assert checker.check([*enc('{"name": "ab"'), *[MASK] * 6, *enc("}")])
    assert not checker.check([*enc('{"name": "ab"'), *[MASK] * 5, *enc("}")])
    # the first byte of "ë" as a token of its own: a gap must finish the character
    lead = next(t for t in range(vocab.size) if vocab.token_bytes(t) == "ë".encode()[:1])
    head, tail = whole[:6], whole[7:]
    assert checker.check([*head, lead, MASK, *tail])
    assert not checker.check([*head, lead, *tail])
    # Z o ë and one more character of up to 4 bytes: 5 gap bytes fit, 6 do not
    assert checker.check([*head, lead, *[MASK] * 5, *tail])
    assert not checker.check([*head, lead, *[MASK] * 6, *tail])
    out = checker.fill([*enc('{"name": "'), *[MASK] * 12])
    m = cg.matcher()
    m.consume_tokens(t for t in out if t not in vocab.eos_token_ids)
    assert m.is_accepting()
    assert np.all(np.array(out) >= 0)


def test_final_checks_are_refused() -> None:
    from support.tokenizers import load_vocab

    vocab = load_vocab("llama3")
    with pytest.raises(UnsupportedFeatureError, match="check on complete outputs"):
        CompletionChecker(corral.compile({"type": "array"}, vocab))
    with pytest.raises(UnsupportedFeatureError, match="uniqueItems"):
        corral.compile({"type": "array", "uniqueItems": True}, vocab, final_check=False)


def test_regular_checker_agrees_with_token_level_brute_force() -> None:
    """For a regex the check is exact at the token level: an unknown slot is any token
    (multi-byte ones included), not one byte."""
    import re

    from corral.automata.completion import RegularChecker, completion_checker
    from corral.grammar import Grammar

    pattern = r"(ab|b)*c?"
    tokens = [b"a", b"b", b"ab", b"ba", b"c", b"bc"]
    vocab = _vocab(tokens)
    checker = completion_checker(corral.compile(Grammar.from_regex(pattern), vocab))
    assert isinstance(checker, RegularChecker)
    eos = vocab.eos_token_ids[0]
    rng = random.Random(2)
    seen = {True: 0, False: 0}
    for _ in range(300):
        slots = [
            MASK if rng.random() < 0.5 else rng.randrange(vocab.size)
            for _i in range(rng.randint(1, 5))
        ]
        holes = [i for i, t in enumerate(slots) if t == MASK]
        want = False
        for fill in itertools.product(range(vocab.size), repeat=len(holes)):
            full = list(slots)
            for i, t in zip(holes, fill, strict=True):
                full[i] = t
            end = full.index(eos) if eos in full else len(full)
            if any(t != eos for t in full[end:]):
                continue
            text = b"".join(vocab.token_bytes(t) for t in full[:end]).decode()
            if re.fullmatch(pattern, text):
                want = True
                break
        assert checker.check(slots) == want, slots
        seen[want] += 1
    assert min(seen.values()) >= 30, seen


@pytest.mark.parametrize("name", sorted(CASES))
def test_allowed_at_keeps_every_token_the_check_accepts(name: str) -> None:
    """``allowed_at`` is a filter decoders apply before checking: a token it leaves out
    must fail the check at that position whatever the other slots hold, and at the first
    unknown slot of a known prefix it is exactly the next-token mask."""
    grammar, tokens = CASES[name]
    vocab = _vocab(tokens)
    cg = corral.compile(grammar, vocab)
    checker = CompletionChecker(cg)
    eos = vocab.eos_token_ids[0]
    rng = random.Random(f"allowed-{name}")
    excluded = accepted = 0
    for _ in range(150):
        slots = _case(name, vocab, rng)
        pos = rng.randrange(len(slots))
        allowed = checker.allowed_at(slots, pos)
        assert allowed.shape == (vocab.size,) and allowed[eos]
        for t in range(vocab.size):
            trial = list(slots)
            trial[pos] = t
            if checker.check(trial):
                accepted += 1
                assert allowed[t], f"{name}: {slots} pos {pos} token {vocab.token_bytes(t)!r}"
        excluded += int((~allowed).sum())
        if MASK not in slots[:pos]:
            m = cg.matcher()
            prefix = list(slots[:pos])
            if eos in prefix or not all(m.try_consume(t) for t in prefix):
                assert allowed.sum() == 1  # nothing but EOS can follow
                continue
            want = np.zeros(vocab.size, bool)
            want[m.allowed_token_ids()] = True
            want[eos] = True
            assert np.array_equal(allowed, want)
    assert excluded > 100 and accepted > 50, (excluded, accepted)


@pytest.mark.parametrize("name", sorted(CASES))
def test_item_classes_change_no_answer(name: str) -> None:
    """Merging items of equal continuations (``kernels/continuation.py``) gives the same
    answers as keeping one item per origin, on longer gap runs than brute force reaches."""
    grammar, tokens = CASES[name]
    vocab = _vocab(tokens)
    cg = corral.compile(grammar, vocab)
    merged, plain = CompletionChecker(cg), CompletionChecker(cg)
    plain._classify = 0
    rng = random.Random(name + "classes")
    seen = {True: 0, False: 0}
    for _ in range(300):
        slots = _case(name, vocab, rng)
        for _i in range(rng.randint(0, 3)):  # a run of gaps somewhere
            at = rng.randrange(len(slots) + 1)
            slots[at:at] = [MASK] * rng.randint(1, 8)
        got = merged.check(slots)
        assert got == plain.check(slots), [vocab.token_bytes(t) if t >= 0 else None for t in slots]
        seen[got] += 1
        for pos in rng.sample(range(len(slots)), min(2, len(slots))):
            assert np.array_equal(merged.allowed_at(slots, pos), plain.allowed_at(slots, pos))
    assert seen[True] >= 20 and seen[False] >= 20, seen


def test_item_classes_keep_gap_runs_small() -> None:
    """A run of gaps inside a JSON document can start a string or an object at every byte;
    with item classes the chart keeps one item per continuation instead of one per start,
    and the check's answers do not change."""
    from support.tokenizers import load_tokenizer, load_vocab

    tok, vocab = load_tokenizer("llama3"), load_vocab("llama3")
    schema = {
        "type": "object",
        "properties": {
            "users": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "maxLength": 40},
                        "age": {"type": "integer"},
                    },
                    "required": ["name", "age"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["users"],
        "additionalProperties": False,
    }
    cg = corral.compile(schema, vocab, final_check=False)
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    sizes = {}
    for classify in (0, 1):
        checker = CompletionChecker(cg)
        checker._classify = classify
        head, tail = enc('{"users": [{"name": "Ada", "age": 3},'), enc('", "age": 5}]}')
        slots = [*head, *[MASK] * 24, *tail]
        assert checker.check(slots)
        assert not checker.check([*slots[:-3], *enc("]]}")])
        m = checker._matcher
        ops = np.array([OP_GAP] * 24)
        chart = m.chart
        top = chart.run(scan_ops, chart.n_sets, ops, 24, checker._classes, checker._comp, classify)
        sizes[classify] = chart.lexeme_items(top)  # lexeme items after the run
    assert sizes[1] * 2 < sizes[0], sizes
