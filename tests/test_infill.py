"""Optional unknown slots (``MASK_OPT``) and causal infilling with several holes.

A run of ``k`` optional slots stands for a gap of between 0 and ``k`` tokens: the check
must answer exactly as the OR of the plain checks over every gap length (which
``tests/test_completion.py`` checks against brute force and Lark). Causal infill uses
such runs for the later holes and for the room left in the current hole, so a later hole
may be filled with fewer than ``hole_tokens`` tokens, and one check covers every length.
When none of the model's best tokens fits, the fallback draws among the tokens that do by
the model's probabilities (seeded), or takes the best of them at temperature 0.
"""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

import jsonschema
import numpy as np
import pytest
from support.words import lark_accepts
from test_completion import CASES, _case, _vocab

import corral
from corral.automata.completion import (
    MASK,
    MASK_OPT,
    CompletionChecker,
    RegularChecker,
    completion_checker,
)
from corral.grammar import Grammar

HOLE = "\u25a2"


def _with_runs(
    slots: list[int], rng: random.Random, runs: int
) -> tuple[list[int], list[tuple[int, int]]]:
    """``slots`` with ``runs`` runs of 1-4 ``MASK_OPT`` inserted, and the runs as
    ``(start, length)``."""
    out = list(slots)
    spans: list[tuple[int, int]] = []
    for _ in range(runs):
        at = rng.randrange(len(out) + 1)
        if any(a < at < a + n for a, n in spans):
            continue  # inside another run
        n = rng.randint(1, 4)
        out[at:at] = [MASK_OPT] * n
        spans = [(a + n if a >= at else a, m) for a, m in spans] + [(at, n)]
    return out, spans


def _variants(slots: list[int], spans: list[tuple[int, int]]) -> list[tuple[list[int], list[int]]]:
    """Every way of giving each run a length ``0..n`` of plain ``MASK`` slots: the slots,
    and for each original index its index in the variant (``-1``: left out)."""
    out = []
    for lengths in itertools.product(*(range(n + 1) for _, n in spans)):
        kept = {i for (a, _n), m in zip(spans, lengths, strict=True) for i in range(a, a + m)}
        variant: list[int] = []
        where: list[int] = []
        for i, t in enumerate(slots):
            if t == MASK_OPT and i not in kept:
                where.append(-1)
                continue
            where.append(len(variant))
            variant.append(MASK if t == MASK_OPT else t)
        out.append((variant, where))
    return out


def _show(vocab: corral.Vocabulary, slots: list[int]) -> list[Any]:
    return [vocab.token_bytes(t) if t >= 0 else {MASK: "?", MASK_OPT: "?opt"}[t] for t in slots]


@pytest.mark.parametrize("with_eos", [True, False])
@pytest.mark.parametrize("name", sorted(CASES))
def test_optional_run_is_the_or_over_run_lengths(name: str, with_eos: bool) -> None:
    """One check of slots with runs of up to ``k`` optional slots answers as the OR of
    the plain checks over every combination of run lengths; so do ``allowed_at`` (as a
    union of masks) and, without EOS, trailing runs (which may then not stay empty)."""
    grammar, tokens = CASES[name]
    vocab = _vocab(tokens) if with_eos else corral.Vocabulary(tokens)
    cg = corral.compile(grammar, vocab)
    opt, plain = CompletionChecker(cg), CompletionChecker(cg)
    rng = random.Random(f"opt-{name}-{with_eos}")
    seen = {True: 0, False: 0}
    for _ in range(120):
        base = _case(name, _vocab(tokens), rng)
        if not with_eos:  # no EOS id here: the EOS of ``_case`` goes
            base = [t for t in base if t < vocab.size]
        slots, spans = _with_runs(base, rng, rng.choice([1, 1, 2]))
        variants = _variants(slots, spans)
        want = any(plain.check(v) for v, _ in variants)
        assert opt.check(slots) == want, _show(vocab, slots)
        seen[want] += 1
        pos = rng.randrange(len(slots) + 1)
        union = np.zeros(vocab.size, bool)
        for v, where in variants:
            # the variant's position of ``pos``: after the kept slots before it
            vpos = sum(1 for i in range(pos) if where[i] >= 0)
            union |= plain.allowed_at(v, vpos)
        assert np.array_equal(opt.allowed_at(slots, pos), union), (_show(vocab, slots), pos)
    # gaps can never close a string of "unclosable": few of its cases are completable
    assert min(seen.values()) >= (5 if name == "unclosable" else 15), seen


@pytest.mark.parametrize("name", ["list", "string", "sums"])
def test_item_classes_change_no_answer_with_optional_runs(name: str) -> None:
    """Long optional runs (up to 10) with item classes on and off give the same answers."""
    grammar, tokens = CASES[name]
    vocab = _vocab(tokens)
    cg = corral.compile(grammar, vocab)
    merged, plain = CompletionChecker(cg), CompletionChecker(cg)
    plain._classify = 0
    rng = random.Random(f"classes-{name}")
    seen = {True: 0, False: 0}
    for _ in range(150):
        slots = _case(name, vocab, rng)
        for _i in range(rng.randint(1, 2)):
            at = rng.randrange(len(slots) + 1)
            slots[at:at] = [rng.choice([MASK, MASK_OPT])] * rng.randint(1, 10)
        got = merged.check(slots)
        assert got == plain.check(slots), _show(vocab, slots)
        seen[got] += 1
    assert min(seen.values()) >= 15, seen


def test_fill_realises_optional_slots() -> None:
    """``fill`` leaves optional slots out or fills them, and the result is a word."""
    grammar, tokens = CASES["string"]
    vocab = _vocab(tokens)
    cg = corral.compile(grammar, vocab)
    checker = CompletionChecker(cg)
    rng = random.Random(3)
    filled = 0
    for _ in range(150):
        slots = [
            rng.choice([MASK, MASK_OPT, MASK_OPT]) if rng.random() < 0.6 else rng.randrange(16)
            for _i in range(8)
        ]
        if not checker.check(slots):
            continue
        out = checker.fill(slots)
        assert all(t >= 0 for t in out)
        assert sum(t != MASK_OPT for t in slots) <= len(out) <= len(slots)
        m = cg.matcher()
        for t in out:
            m.consume(t)
            if m.is_finished():
                break
        assert m.is_finished() or m.is_accepting(), _show(vocab, out)
        filled += 1
    assert filled >= 10


def test_regular_checker_optional_run_is_the_or_over_run_lengths() -> None:
    pattern = r"(ab|b)*c?"
    vocab = _vocab([b"a", b"b", b"ab", b"ba", b"c", b"bc"])
    checker = completion_checker(corral.compile(Grammar.from_regex(pattern), vocab))
    assert isinstance(checker, RegularChecker)
    rng = random.Random(4)
    seen = {True: 0, False: 0}
    for _ in range(300):
        base = [
            MASK if rng.random() < 0.3 else rng.randrange(vocab.size)
            for _i in range(rng.randint(0, 4))
        ]
        slots, spans = _with_runs(base, rng, rng.choice([1, 2]))
        want = any(checker.check(v) for v, _ in _variants(slots, spans))
        assert checker.check(slots) == want, slots
        seen[want] += 1
    assert min(seen.values()) >= 30, seen


def test_slots_outside_the_vocabulary_are_refused() -> None:
    """Ids below ``MASK_OPT`` or past the vocabulary are errors, not unknown slots, in
    both checkers (before or after an EOS)."""
    grammar, tokens = CASES["list"]
    vocab = _vocab(tokens)
    checker = CompletionChecker(corral.compile(grammar, vocab))
    regular = completion_checker(corral.compile(Grammar.from_regex("a+"), vocab))
    eos = vocab.eos_token_ids[0]
    for bad in (MASK_OPT - 1, vocab.size):
        for slots in ([0, bad], [0, eos, bad], [MASK_OPT, bad]):
            for check in (checker.check, regular.check):
                with pytest.raises(ValueError, match=f"slot {len(slots) - 1} holds token id"):
                    check(slots)
        with pytest.raises(ValueError, match="slot 1 holds token id"):
            checker.allowed_at([0, bad, 0], 2)


def test_fallback_groups_pass_or_fail_alike() -> None:
    """The tokens of one fallback group (single-byte tokens of one byte class) get the
    same answer wherever they are placed, on Llama-3 with a JSON Schema."""
    from support.tokenizers import load_tokenizer, load_vocab

    tok, vocab = load_tokenizer("llama3"), load_vocab("llama3")
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "tag": {"type": "string", "pattern": "^[a-f]+$"}},
        "required": ["id", "tag"],
        "additionalProperties": False,
    }
    checker = CompletionChecker(corral.compile(schema, vocab, final_check=False))
    tokens, groups = checker.fallback([], 0)
    assert len(set(tokens.tolist())) == len(tokens)
    assert set(vocab.eos_token_ids) <= set(tokens.tolist())
    assert len(set(groups.tolist())) < len(tokens)  # groups do merge tokens
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    for head, tail in [
        ('{"id": ', ', "tag": "ab"}'),
        ('{"id": 1, "tag": "', '"}'),
        ('{"id": 1, "tag": "a', ""),
    ]:
        answers: dict[int, set[bool]] = {}
        for t, g in zip(tokens.tolist(), groups.tolist(), strict=True):
            slots = [*enc(head), t, *[MASK_OPT] * 3, *enc(tail)]
            answers.setdefault(g, set()).add(checker.check(slots))
        assert all(len(a) == 1 for a in answers.values()), head
        assert {True, False} <= set().union(*answers.values()), head


# -- causal infill ------------------------------------------------------------------------
TWO_VALUES = {
    "type": "object",
    "properties": {
        "a": {"type": "integer", "minimum": 0, "maximum": 99},
        "b": {"enum": ["x", "yz"]},
    },
    "required": ["a", "b"],
    "additionalProperties": False,
}
POINT = r"""
start: "point(" NUM ", " NUM ")"
NUM: /-?[0-9]{1,3}/
"""


@pytest.fixture(scope="module")
def llama3() -> Any:
    from support.tokenizers import load_tokenizer

    return load_tokenizer("llama3")


def test_later_holes_may_be_shorter_than_hole_tokens(llama3: Any) -> None:
    """Two holes, the second value at most 4 bytes with ``hole_tokens=8``: a JSON Schema,
    a Lark grammar and a regex (the token-level checker) all fill, and the text is valid
    by ``jsonschema``, Lark and ``re``."""
    from support.tiny_models import tiny_llama

    model = tiny_llama(llama3, seed=1)
    for seed in range(3):
        res = corral.infill(
            model, '{"a": ' + HOLE + ', "b": ' + HOLE + "}", tokenizer=llama3,
            schema=TWO_VALUES, hole_tokens=8, temperature=1.0, seed=seed,
        )  # fmt: skip
        jsonschema.validate(res.value, TWO_VALUES)
        assert res.text == '{"a": ' + res.fills[0] + ', "b": ' + res.fills[1] + "}"
        res = corral.infill(
            model, f"point({HOLE}, {HOLE})", tokenizer=llama3, grammar=POINT, hole_tokens=8,
            temperature=1.0, seed=seed,
        )  # fmt: skip
        assert lark_accepts(POINT, res.text), res.text
        assert res.text == f"point({res.fills[0]}, {res.fills[1]})"
    pattern = r"\(([0-9]{1,2}), ([a-c]{1,2})\)"
    res = corral.infill(
        model, f"({HOLE}, {HOLE})", tokenizer=llama3, regex=pattern, hole_tokens=8, seed=0
    )
    assert re.fullmatch(pattern, res.text), res.text
    # what no filling can complete is still refused: "1234" cannot start a number
    with pytest.raises(ValueError, match="no filling"):
        corral.infill(
            model, f"point({HOLE}, 1234{HOLE})", tokenizer=llama3, grammar=POINT, hole_tokens=8
        )


def _single_byte_ids(tok: Any) -> dict[int, int]:
    """byte -> the id of a token spelling exactly that byte (Llama-3: all 256)."""
    from support.tokenizers import load_vocab

    vocab = load_vocab("llama3")
    out: dict[int, int] = {}
    for t in range(vocab.size):
        b = vocab.token_bytes(t)
        if len(b) == 1 and t not in vocab.eos_token_ids:
            out.setdefault(b[0], t)
    return out


class _Scripted:
    """A causal LM whose next-token logits are ``logits(input_ids) -> float [V]``: what
    ``corral.infill`` needs of a Hugging Face model (``config``, ``can_generate``, a call
    returning ``logits [1, n, V]``), without the cost of a forward pass."""

    def __init__(self, tokenizer: Any, logits: Any) -> None:
        from types import SimpleNamespace

        self.config = SimpleNamespace(
            vocab_size=len(tokenizer), eos_token_id=tokenizer.eos_token_id
        )
        self.logits = logits
        self.calls = 0

    def can_generate(self) -> bool:
        return True

    def __call__(self, input_ids: Any) -> Any:
        from types import SimpleNamespace

        self.calls += 1
        row = self.logits(input_ids[0].tolist())
        return SimpleNamespace(logits=row.reshape(1, 1, -1).expand(1, input_ids.shape[1], -1))


def test_checks_per_fill_are_bounded(llama3: Any) -> None:
    """A model that writes a given text byte by byte: each token costs one check, each
    hole one check to start, one to close and one at the end; placing a token no longer
    costs one check per length the rest of the hole could have."""
    import torch

    byte_id = _single_byte_ids(llama3)
    target = '{"a": 42, "b": "yz"}'

    def writer(ids: list[int]) -> Any:
        row = torch.zeros(len(llama3))
        done = llama3.decode(ids)
        assert target.startswith(done), done
        row[byte_id[ord(target[len(done)])]] = 10.0
        return row

    model = _Scripted(llama3, writer)
    res = corral.infill(
        model, '{"a": ' + HOLE + ', "b": ' + HOLE + "}", tokenizer=llama3, schema=TWO_VALUES,
        hole_tokens=8,
    )  # fmt: skip
    assert res.text == target and res.fills == ["42", '"yz"']
    assert res.stats["checks"] <= sum(len(f) + 3 for f in res.fills)


def test_fallback_samples_by_the_models_probabilities(llama3: Any) -> None:
    """A model whose 256 best tokens never fit (words where only digits may go): the
    digits come from the fallback, drawn by the model's probabilities with the seed (the
    same seed, the same fill; different seeds, different fills), or the most probable
    digit at temperature 0."""
    import torch

    byte_id = _single_byte_ids(llama3)
    words = [
        t
        for t in range(len(llama3))
        if re.fullmatch(r"[A-Za-z]{4,}", llama3.decode([t]).strip() or "-")
    ][:256]
    assert len(words) == 256
    probs = {"3": 0.5, "7": 0.3, "1": 0.15, "9": 0.05}

    def logits(_ids: list[int]) -> Any:
        row = torch.full((len(llama3),), -torch.inf)
        row[words] = 20.0
        for d, p in probs.items():
            row[byte_id[ord(d)]] = float(np.log(p))
        return row

    model = _Scripted(llama3, logits)
    grammar = 'start: "n=" NUM ";"\nNUM: /[0-9]{1,3}/'

    def fill(template: str, k: int, temperature: float, seed: int, **kw: Any) -> str:
        res = corral.infill(
            model, template, tokenizer=llama3, hole_tokens=k, temperature=temperature,
            seed=seed, fim=None, **kw,
        )  # fmt: skip
        return "".join(res.fills)

    assert fill(f"n={HOLE};", 3, 0.0, 0, grammar=grammar) == "333"
    three = [fill(f"n={HOLE};", 3, 1.0, s, grammar=grammar) for s in range(6)]
    assert len(set(three)) >= 4, three
    assert all(set(f) <= set(probs) and len(f) == 3 for f in three)
    assert three == [fill(f"n={HOLE};", 3, 1.0, s, grammar=grammar) for s in range(6)]
    # the regular (token-level) checker's fallback samples too
    regex = [fill(f"n={HOLE};", 3, 1.0, s, regex=r"n=[0-9]{1,3};") for s in range(4)]
    assert len(set(regex)) >= 3, regex
    # one digit per fill: the draws follow the probabilities
    counts = {d: 0 for d in probs}
    n = 300
    for s in range(n):
        counts[fill(f"n={HOLE};", 1, 1.0, s, grammar=grammar)] += 1
    tv = 0.5 * sum(abs(counts[d] / n - p) for d, p in probs.items())
    assert tv < 0.08, counts
