"""Misuse of the public API is refused with a corral error that also derives from the
builtin a Python programmer expects, and whose message gives the expected and the actual
value (the rule of ``corral/errors.py``).

Each case: the call, the corral class it raises, the builtin it also is, a part of the
message naming what was expected and one naming what was given. ``{V}`` and ``{W}`` in
them stand for the Llama-3 vocabulary's size and its bitmask's words per row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from support.tokenizers import load_tokenizer

import corral
from corral import (
    ArgumentTypeError,
    CorralError,
    InvalidArgumentError,
    ShapeError,
    TokenizerError,
    VocabularyMismatchError,
)
from corral.automata.completion import CompletionChecker
from corral.integrations.constraint import compile_constraint
from corral.sampler.config import GenerationConfig
from corral.sampler.masking import masked_logits, sample


class FakeModel:
    """Passes for a model object until it is used: enough to reach the argument checks."""

    config = SimpleNamespace(vocab_size=10)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model is never run by these calls")


@pytest.fixture(scope="module")
def ctx() -> SimpleNamespace:
    tok = load_tokenizer("llama3")
    v = corral.Vocabulary.from_hf(tok)
    other = corral.Vocabulary([bytes([i]) for i in range(256)] + [b""], eos_token_ids=[256])
    same_size = corral.Vocabulary([b"x"] * v.size, eos_token_ids=[0])  # another vocabulary
    c = corral.compile('start: "a" | "b"', v)
    read_only = corral.allocate_bitmask(1, v.size)
    read_only.setflags(write=False)
    return SimpleNamespace(
        tok=tok,
        v=v,
        V=v.size,
        W=(v.size + 31) // 32,
        c=c,
        m=c.matcher(),
        c_other=corral.compile('start: "a" | "b"', other),
        c_same_size=corral.compile('start: "x"', same_size),
        bm2=corral.allocate_bitmask(2, v.size),
        read_only=read_only,
    )


def proc(*args: Any, **kwargs: Any) -> Any:
    from corral.integrations.transformers import GrammarLogitsProcessor

    return GrammarLogitsProcessor(*args, **kwargs)


@dataclass(frozen=True)
class Case:
    name: str
    call: Callable[[SimpleNamespace], Any]
    cls: type[CorralError]
    builtin: type[Exception]
    expected: str  # a part of the message naming what was expected
    actual: str  # and one naming what was given


VE, TE = ValueError, TypeError
BM = "bitmask must be int32 [batch, ceil(vocab_size/32)] = "

CASES = [
    # -- the bitmask a matcher fills: type, dtype, width, layout, device, row ---------------
    Case("fill_bitmask int64", lambda x: x.m.fill_bitmask(np.zeros((1, x.W), np.int64)),
         ShapeError, VE, BM + "[1, {W}]", "got int64 [1, {W}]"),
    Case("fill_bitmask one word too wide",
         lambda x: x.m.fill_bitmask(np.zeros((1, x.W + 1), np.int32)),
         ShapeError, VE, BM + "[1, {W}]", "got int32 [1, {W1}]"),
    Case("fill_bitmask 3-D", lambda x: x.m.fill_bitmask(np.zeros((1, 1, x.W), np.int32)),
         ShapeError, VE, BM + "[batch, {W}]", "got int32 [1, 1, {W}]"),
    Case("fill_bitmask not C-contiguous",
         lambda x: x.m.fill_bitmask(np.zeros((x.W, 2), np.int32).T),
         ShapeError, VE, "must be C-contiguous, strides ({W4}, 4)", "got strides (4, 8)"),
    Case("fill_bitmask read-only", lambda x: x.m.fill_bitmask(x.read_only),
         InvalidArgumentError, VE, "must be writeable", "got a read-only array"),
    Case("fill_bitmask list", lambda x: x.m.fill_bitmask([[0] * x.W]),
         ArgumentTypeError, TE, "must be a NumPy array or a torch tensor", "got list"),
    Case("fill_bitmask torch int64",
         lambda x: x.m.fill_bitmask(torch.zeros((1, x.W), dtype=torch.int64)),
         ShapeError, VE, "must be torch.int32 [batch, ceil(vocab_size/32)] = [1, {W}]",
         "got torch.int64 [1, {W}]"),
    Case("fill_bitmask tensor not on the CPU",
         lambda x: x.m.fill_bitmask(torch.zeros((1, x.W), dtype=torch.int32, device="meta")),
         ShapeError, VE, "must be on the CPU", "got device meta"),
    Case("fill_bitmask row past the batch", lambda x: x.m.fill_bitmask(x.bm2, 2),
         InvalidArgumentError, VE, "rows are in [0, 2)", "row 2 is outside"),
    Case("fill_bitmask negative row", lambda x: x.m.fill_bitmask(x.bm2, -1),
         InvalidArgumentError, VE, "rows are in [0, 2)", "row -1 is outside"),
    Case("fill_bitmask str row", lambda x: x.m.fill_bitmask(x.bm2, "1"),
         ArgumentTypeError, TE, "row must be an integer", "not str '1'"),
    # -- allocate_bitmask, bitmask_to_bool and vocab_size ------------------------------------
    Case("allocate_bitmask batch 0", lambda x: corral.allocate_bitmask(0, x.V),
         InvalidArgumentError, VE, "batch must be >= 1", "got 0"),
    Case("allocate_bitmask vocab_size 0", lambda x: corral.allocate_bitmask(1, 0),
         InvalidArgumentError, VE, "vocab_size must be >= 1", "got 0"),
    Case("allocate_bitmask vocab_size -5", lambda x: corral.allocate_bitmask(1, -5),
         InvalidArgumentError, VE, "vocab_size must be >= 1", "got -5"),
    Case("allocate_bitmask vocab_size str", lambda x: corral.allocate_bitmask(1, str(x.V)),
         ArgumentTypeError, TE, "vocab_size must be an integer", "not str '{V}'"),
    Case("allocate_bitmask batch bool", lambda x: corral.allocate_bitmask(True, x.V),
         ArgumentTypeError, TE, "batch must be an integer", "not a bool (True)"),
    Case("allocate_bitmask backend", lambda x: corral.allocate_bitmask(1, x.V, backend="jax"),
         InvalidArgumentError, VE, "backend must be 'numpy' or 'torch'", "got 'jax'"),
    Case("bitmask_to_bool vocab_size -1", lambda x: corral.bitmask_to_bool(x.bm2, -1),
         InvalidArgumentError, VE, "vocab_size must be >= 0", "got -1"),
    Case("bitmask_to_bool vocab_size beyond the bitmask",
         lambda x: corral.bitmask_to_bool(x.bm2, x.V + 64),
         ShapeError, VE, BM + "[2, {W2}]", "got int32 [2, {W}]"),
    Case("bitmask_to_bool int64",
         lambda x: corral.bitmask_to_bool(np.zeros((1, x.W), np.int64), x.V),
         ShapeError, VE, BM + "[1, {W}]", "got int64 [1, {W}]"),
    Case("Vocabulary vocab_size 0", lambda x: corral.Vocabulary([b"a", b"b"], vocab_size=0),
         InvalidArgumentError, VE, "vocab_size must be >= 1", "got 0"),
    Case("Vocabulary.from_hf added_tokens",
         lambda x: corral.Vocabulary.from_hf(x.tok, added_tokens="some", check=False),
         InvalidArgumentError, VE, "'whitespace', 'all' or 'none'", "got 'some'"),
    Case("Vocabulary.token_bytes outside", lambda x: x.v.token_bytes(x.V),
         InvalidArgumentError, VE, "expected an id in [0, {V})", "token id {V} is outside"),
    Case("Vocabulary.decode outside", lambda x: x.v.decode([90, -1]),
         InvalidArgumentError, VE, "expected an id in [0, {V})", "token id -1 is outside"),
    # -- apply_token_bitmask_inplace ---------------------------------------------------------
    Case("apply: bitmask width is not vocab_size's",
         lambda x: corral.apply_token_bitmask_inplace(torch.zeros(2, x.V + 64), x.bm2, x.V + 32),
         ShapeError, VE, BM + "[2, {W1}]", "got int32 [2, {W}]"),
    Case("apply: vocab_size 0",
         lambda x: corral.apply_token_bitmask_inplace(torch.zeros(2, x.V), x.bm2, 0),
         InvalidArgumentError, VE, "vocab_size must be >= 1", "got 0"),
    Case("apply: rows outside the logits",
         lambda x: corral.apply_token_bitmask_inplace(torch.zeros(2, x.V), x.bm2, rows=[0, 5]),
         InvalidArgumentError, VE, "in [0, 2)", "got [0, 5]"),
    Case("apply: fewer bitmask rows than logits rows",
         lambda x: corral.apply_token_bitmask_inplace(torch.zeros(3, x.V), x.bm2),
         ShapeError, VE, "int32 [batch, W] = [>= 3, {W}] (a row per logits row to mask: 3)",
         "got int32 [2, {W}]"),
    Case("apply: fewer bitmask rows than rows=",
         lambda x: corral.apply_token_bitmask_inplace(
             torch.zeros(3, x.V), x.bm2[:1], x.V, rows=[0, 2]),
         ShapeError, VE, BM + "[>= 2, {W}]", "got int32 [1, {W}]"),
    Case("apply: int64 bitmask",
         lambda x: corral.apply_token_bitmask_inplace(
             np.zeros((2, x.V), np.float32), np.zeros((2, x.W), np.int64)),
         ShapeError, VE, "must be int32 [batch, W] = [2, {W}]", "got int64 [2, {W}]"),
    Case("apply: float bitmask tensor",
         lambda x: corral.apply_token_bitmask_inplace(torch.zeros(2, x.V), torch.zeros(2, x.W)),
         ShapeError, VE, "must be torch.int32", "got torch.float32 [2, {W}]"),
    Case("apply: list bitmask",
         lambda x: corral.apply_token_bitmask_inplace(torch.zeros(1, x.V), [[-1] * x.W]),
         ArgumentTypeError, TE, "bitmask must be a NumPy array or a torch tensor", "got list"),
    Case("apply: list logits",
         lambda x: corral.apply_token_bitmask_inplace([[0.0] * x.V], x.bm2[:1]),
         ArgumentTypeError, TE, "logits must be a NumPy array or a torch tensor", "got list"),
    Case("apply: 3-D logits",
         lambda x: corral.apply_token_bitmask_inplace(torch.zeros(1, 2, x.V), x.bm2),
         ShapeError, VE, "logits must be float [batch, V] or [V]",
         "got torch.float32 [1, 2, {V}]"),
    Case("apply: integer logits",
         lambda x: corral.apply_token_bitmask_inplace(np.zeros((2, x.V), np.int64), x.bm2),
         ShapeError, VE, "logits must be float [batch, V] or [V]", "got int64 [2, {V}]"),
    # -- fill_next_token_bitmasks --------------------------------------------------------------
    Case("fill_next: fewer rows than matchers",
         lambda x: corral.fill_next_token_bitmasks([x.c.matcher()] * 3, x.bm2),
         ShapeError, VE, BM + "[>= 3, {W}] (a row per matcher: 3)", "got int32 [2, {W}]"),
    Case("fill_next: only None matchers, fewer rows",
         lambda x: corral.fill_next_token_bitmasks([None, None, None], x.bm2),
         ShapeError, VE, "[>= 3, {W}] (a row per matcher: 3)", "got int32 [2, {W}]"),
    Case("fill_next: only None matchers, list bitmask",
         lambda x: corral.fill_next_token_bitmasks([None], [[0] * x.W]),
         ArgumentTypeError, TE, "must be a NumPy array or a torch tensor", "got list"),
    Case("fill_next: int64 bitmask",
         lambda x: corral.fill_next_token_bitmasks([x.c.matcher()], np.zeros((1, x.W), np.int64)),
         ShapeError, VE, BM + "[1, {W}]", "got int64 [1, {W}]"),
    Case("fill_next: num_threads 0",
         lambda x: corral.fill_next_token_bitmasks([None], x.bm2, num_threads=0),
         InvalidArgumentError, VE, "num_threads must be >= 1", "got 0"),
    Case("fill_next: num_threads str",
         lambda x: corral.fill_next_token_bitmasks([None], x.bm2, num_threads="2"),
         ArgumentTypeError, TE, "num_threads must be an integer", "not str '2'"),
    # -- a compiled grammar with another vocabulary -------------------------------------------
    Case("fill_next: matchers of vocabularies of other sizes",
         lambda x: corral.fill_next_token_bitmasks([x.c.matcher(), x.c_other.matcher()], x.bm2),
         VocabularyMismatchError, VE, "the first one's ({V} tokens", "(257 tokens"),
    Case("fill_next: matchers of another vocabulary of the same size",
         lambda x: corral.fill_next_token_bitmasks(
             [x.c.matcher(), x.c_same_size.matcher()], x.bm2),
         VocabularyMismatchError, VE, "the first one's ({V} tokens", "got matcher 1 of another"),
    Case("generate: a CompiledGrammar of another vocabulary",
         lambda x: compile_constraint(x.v, grammar=x.c_other),
         VocabularyMismatchError, VE, "expected the model's ({V} tokens", "got one of 257 tokens"),
    Case("GrammarLogitsProcessor: grammars of two vocabularies",
         lambda x: proc([x.c, x.c_other]),
         VocabularyMismatchError, VE, "the first one's ({V} tokens", "(257 tokens"),
    Case("GrammarLogitsProcessor: scores narrower than the vocabulary",
         lambda x: proc(x.c)(torch.ones(1, 2, dtype=torch.long), torch.zeros(1, 1000)),
         VocabularyMismatchError, VE, "at least {V} columns", "got 1000"),
    Case("apply: logits narrower than vocab_size",
         lambda x: corral.apply_token_bitmask_inplace(torch.zeros(2, x.V - 1), x.bm2, x.V),
         VocabularyMismatchError, VE, "at least vocab_size = {V} columns", "got {V_1}"),
    Case("masked_logits: logits narrower than the vocabulary",
         lambda x: masked_logits(torch.zeros(1, 10), x.bm2[:1], x.V),
         VocabularyMismatchError, VE, "at least {V} columns", "got 10"),
    # -- the transformers processor and masking -----------------------------------------------
    Case("GrammarLogitsProcessor: empty list", lambda x: proc([]),
         ArgumentTypeError, TE, "a non-empty list of them", "got list"),
    Case("GrammarLogitsProcessor: Lark text", lambda x: proc(['start: "a"']),
         ArgumentTypeError, TE, "must be a CompiledGrammar", "got a list holding str"),
    Case("GrammarLogitsProcessor: healed per grammar", lambda x: proc([x.c], healed=[b"a", b"b"]),
         InvalidArgumentError, VE, "one entry per grammar (1)", "got 2"),
    Case("GrammarLogitsProcessor: rows differ",
         lambda x: proc(x.c)(torch.ones(1, 2, dtype=torch.long), torch.zeros(2, x.V)),
         ShapeError, VE, "with the same rows", "got [1, 2] and [2, {V}]"),
    Case("GrammarLogitsProcessor: rows not split among the grammars",
         lambda x: proc([x.c, x.c])(torch.ones(3, 2, dtype=torch.long), torch.zeros(3, x.V)),
         ShapeError, VE, "expected a multiple of 2 rows", "got 3"),
    Case("masked_logits: rows differ", lambda x: masked_logits(torch.zeros(3, x.V), x.bm2, x.V),
         ShapeError, VE, "one row per logits row (3)", "got 2 rows"),
    Case("sample: temperature", lambda x: sample(torch.zeros(1, 4), temperature=-1.0),
         InvalidArgumentError, VE, "temperature must be >= 0", "got -1.0"),
    Case("sample: no allowed entry", lambda x: sample(torch.full((1, 4), float("-inf"))),
         InvalidArgumentError, VE, "must have an allowed (finite) entry", "got row 0 with none"),
    # -- compiling, the matcher, generation settings ------------------------------------------
    Case("compile: vocab of another type", lambda x: corral.compile('start: "a"', object()),
         ArgumentTypeError, TE, "vocab must be a corral.Vocabulary", "not object"),
    Case("Compiler: max_grammars -1", lambda x: corral.Compiler(x.v, max_grammars=-1),
         InvalidArgumentError, VE, "max_grammars must be >= 0", "got -1"),
    Case("Matcher.consume str", lambda x: x.m.consume("90"),
         ArgumentTypeError, TE, "token_id must be an integer", "not str '90'"),
    Case("Matcher.consume_tokens float array", lambda x: x.m.consume_tokens(np.array([90.0])),
         ArgumentTypeError, TE, "one-dimensional array of integers", "dtype float64"),
    Case("GenerationConfig: sampler", lambda x: GenerationConfig(sampler="beam"),
         InvalidArgumentError, VE, "sampler must be one of ('mask'", "got 'beam'"),
    Case("GenerationConfig: top_k with awrs", lambda x: GenerationConfig(sampler="awrs", top_k=3),
         InvalidArgumentError, VE, "only with 'mask'", "got top_k=3"),
    Case("GenerationConfig: greedy smc", lambda x: GenerationConfig(sampler="smc"),
         InvalidArgumentError, VE, "pass temperature > 0", "got 0.0"),
    Case("GenerationConfig: temperature str", lambda x: GenerationConfig(temperature="0.5"),
         ArgumentTypeError, TE, "temperature must be a number", "not str '0.5'"),
    Case("GenerationConfig: fast_forward int", lambda x: GenerationConfig(fast_forward=1),
         ArgumentTypeError, TE, "must be True, False or None", "not int 1"),
    Case("generate: schema and grammar", lambda x: compile_constraint(x.v, schema={}, grammar="s"),
         InvalidArgumentError, VE, "exactly one of schema=, grammar=, regex=",
         "got schema, grammar"),
    Case("generate: regex of another type", lambda x: compile_constraint(x.v, regex=5),
         ArgumentTypeError, TE, "regex must be a string", "not int"),
    Case("extract: errors", lambda x: corral.extract(FakeModel(), [], {}, errors="ignore"),
         InvalidArgumentError, VE, "'raise' or 'none'", "got 'ignore'"),
    Case("extract: batch_size 0", lambda x: corral.extract(FakeModel(), [], {}, batch_size=0),
         InvalidArgumentError, VE, "batch_size must be >= 1", "got 0"),
    Case("extract: model without tokenizer", lambda x: corral.extract(FakeModel(), ["x"], {}),
         ArgumentTypeError, TE, "pass tokenizer=", "got tokenizer=None"),
    Case("infill: hole_tokens 0",
         lambda x: corral.infill(FakeModel(), "a\u25a2", tokenizer=x.tok, regex="a+",
                                 hole_tokens=0),
         InvalidArgumentError, VE, "hole_tokens must be >= 1", "got 0"),
    Case("infill: no hole",
         lambda x: corral.infill(FakeModel(), "abc", tokenizer=x.tok, regex="a+"),
         InvalidArgumentError, VE, "expected at least one '\u25a2'", "got 'abc'"),
    Case("CompletionChecker: a slot outside the vocabulary",
         lambda x: CompletionChecker(x.c).check([x.V + 5]),
         InvalidArgumentError, VE, "expected an id in [0, {V})", "slot 0 holds token id {V5}"),
]  # fmt: skip


def _fill(text: str, x: SimpleNamespace) -> str:
    return text.format(
        V=x.V, W=x.W, W1=x.W + 1, W2=(x.V + 64 + 31) // 32, W4=4 * x.W, V_1=x.V - 1, V5=x.V + 5
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_misuse_is_a_corral_error_with_expected_and_actual(
    ctx: SimpleNamespace, case: Case
) -> None:
    with pytest.raises(case.cls) as info:
        case.call(ctx)
    e = info.value
    assert isinstance(e, CorralError) and isinstance(e, case.builtin)
    message = str(e)
    assert _fill(case.expected, ctx) in message, message
    assert _fill(case.actual, ctx) in message, message


def test_the_classes() -> None:
    assert issubclass(InvalidArgumentError, CorralError) and issubclass(InvalidArgumentError, VE)
    assert issubclass(ShapeError, InvalidArgumentError)
    assert issubclass(ArgumentTypeError, CorralError) and issubclass(ArgumentTypeError, TE)
    assert issubclass(VocabularyMismatchError, TokenizerError)
    assert issubclass(VocabularyMismatchError, VE)
    for name in ("InvalidArgumentError", "ShapeError", "ArgumentTypeError",
                 "VocabularyMismatchError"):  # fmt: skip
        assert name in corral.__all__ and name in corral.errors.__all__
        assert getattr(corral, name) is getattr(corral.errors, name)


def test_enough_cases() -> None:
    """The issue counted 32 misuse cases; each class is exercised."""
    assert len(CASES) >= 32
    assert {c.cls for c in CASES} == {
        InvalidArgumentError,
        ShapeError,
        ArgumentTypeError,
        VocabularyMismatchError,
    }
