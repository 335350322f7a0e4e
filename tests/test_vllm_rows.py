"""The vLLM processor's batch bookkeeping, driven by vLLM's own ``BatchUpdate``.

A simulated persistent batch does what vLLM's ``InputBatch`` does (requests added into
the lowest freed slot, removed, the batch condensed by one-way moves, rows swapped,
preempted requests re-added with the tokens they already have), feeding the processor
the same ``BatchUpdate`` structures. After every step, each constrained row's mask must
equal that of a reference :class:`~corral.Matcher` that replays the request's tokens from
scratch, unconstrained rows must be untouched, and a row given a token outside its
grammar must be ended (only its end tokens allowed).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from support.tokenizers import load_vocab
from support.vllm_batches import PAD, reference_mask
from support.vllm_batches import constraints as _constraints_of

pytest.importorskip("vllm", reason="vLLM is not installed (the README's vLLM test step has it)")
torch = pytest.importorskip("torch")

from vllm import SamplingParams  # noqa: E402
from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality  # noqa: E402

from corral.integrations.vllm import CorralLogitsProcessor, sampling_params  # noqa: E402


@pytest.fixture(scope="module")
def vocab():
    return load_vocab("gpt2")


class Request:
    def __init__(self, params, compiled, rng: random.Random) -> None:
        self.params = params
        self.compiled = compiled  # None: unconstrained
        self.output: list[int] = []
        self.bad = False  # a token outside the grammar was forced in
        self.rng = rng

    def expected_allowed(self, vocab, width: int) -> np.ndarray | None:
        """bool [width] of the reference matcher (None: unconstrained)."""
        if self.compiled is None:
            return None
        ends = set(self.params.stop_token_ids or ())
        return reference_mask(self.compiled, self.output, ends, vocab, width, self.bad)


class Batch:
    """vLLM's persistent batch bookkeeping, reduced to what logits processors see."""

    def __init__(self) -> None:
        self.slots: list[Request | None] = []
        self.removed: list[int] = []
        self.added: list = []
        self.moved: list = []

    def add(self, req: Request) -> None:
        if self.removed:
            self.removed.sort()
            i = self.removed.pop(0)
            self.slots[i] = req
        else:
            i = len(self.slots)
            self.slots.append(req)
        self.added.append((i, req.params, [], req.output))

    def remove(self, i: int) -> None:
        self.slots[i] = None
        self.removed.append(i)

    def swap(self, a: int, b: int) -> None:
        self.slots[a], self.slots[b] = self.slots[b], self.slots[a]
        self.moved.append((a, b, MoveDirectionality.SWAP))

    def condense(self) -> None:
        holes = sorted(i for i, r in enumerate(self.slots) if r is None)
        while holes:
            while self.slots and self.slots[-1] is None:
                self.slots.pop()
            holes = [h for h in holes if h < len(self.slots)]
            if not holes:
                break
            h = holes.pop(0)
            last = len(self.slots) - 1
            self.slots[h] = self.slots[last]
            self.slots[last] = None
            self.moved.append((last, h, MoveDirectionality.UNIDIRECTIONAL))
        while self.slots and self.slots[-1] is None:
            self.slots.pop()

    def update(self) -> BatchUpdate | None:
        if not (self.removed or self.added or self.moved):
            return None
        up = BatchUpdate(
            batch_size=len(self.slots),
            removed=sorted(self.removed, reverse=True),
            added=list(self.added),
            moved=list(self.moved),
        )
        self.removed, self.added, self.moved = [], [], []
        return up


@pytest.mark.parametrize("seed", range(4))
def test_batch_bookkeeping_matches_per_request_matchers(vocab, seed: int) -> None:
    rng = random.Random(seed)
    width = vocab.size + PAD
    constraints = _constraints_of(vocab)
    proc = CorralLogitsProcessor.for_vocabulary(vocab, width)
    batch = Batch()
    plain = SamplingParams(max_tokens=64)
    preempted: list[Request] = []
    for step in range(40):
        # vLLM's order within a step: removals, additions (into the freed slots first),
        # then the batch is condensed, then rows may be reordered (swaps)
        live = [i for i, r in enumerate(batch.slots) if r is not None]
        for i in rng.sample(live, k=min(len(live), rng.randint(0, 1))):
            req = batch.slots[i]
            batch.remove(i)
            if rng.random() < 0.5 and req is not None:  # preempted: back later, tokens kept
                preempted.append(req)
        for _ in range(rng.randint(0, 2)):
            params, compiled = rng.choice([*constraints, (plain, None)])
            batch.add(Request(params, compiled, rng))
        if preempted and rng.random() < 0.5:
            batch.add(preempted.pop(0))
        batch.condense()
        live = [i for i, r in enumerate(batch.slots) if r is not None]
        if len(live) >= 2 and rng.random() < 0.3:
            a, b = rng.sample(live, 2)
            batch.swap(a, b)
        proc.update_state(batch.update())
        if not batch.slots:
            continue
        logits = torch.randn(len(batch.slots), width)
        before = logits.clone()
        out = proc.apply(logits)
        for i, req in enumerate(batch.slots):
            assert req is not None
            expected = req.expected_allowed(vocab, width)
            if expected is None:
                assert torch.equal(out[i], before[i]), f"unconstrained row {i} was changed"
                req.output.append(rng.randrange(vocab.size))
                continue
            got = torch.isfinite(out[i]).numpy()
            assert np.array_equal(got, expected), (step, i, req.output)
            allowed = np.flatnonzero(got)
            assert len(allowed), "a constrained row with no allowed token"
            token = int(rng.choice(allowed.tolist()))
            if not req.bad and rng.random() < 0.03:  # a token that ignored the mask
                bad = [t for t in range(vocab.size) if not got[t]][:5000]
                token, req.bad = rng.choice(bad), True
            if token in (req.params.stop_token_ids or ()):
                batch.remove(i)  # finished: its slot is reported removed at the next step
            else:
                req.output.append(token)


def test_unconstrained_batch_is_never_touched(vocab) -> None:
    proc = CorralLogitsProcessor.for_vocabulary(vocab, vocab.size + PAD)
    plain = SamplingParams(max_tokens=8)
    proc.update_state(
        BatchUpdate(
            batch_size=2, removed=[], added=[(0, plain, [], []), (1, plain, [], [])], moved=[]
        )
    )
    logits = torch.randn(2, vocab.size + PAD)
    assert proc.apply(logits.clone()).equal(logits)


def test_failed_compile_ends_the_row_not_the_engine(vocab) -> None:
    """A constraint that fails in the worker (admission skipped) ends its own row only."""
    proc = CorralLogitsProcessor.for_vocabulary(vocab)
    eos = vocab.eos_token_ids[0]
    bad = SamplingParams(
        max_tokens=8, stop_token_ids=[eos], extra_args={"corral": '{"regex": "("}'}
    )
    good = sampling_params(regex="[0-9]+", stop_token_ids=[eos], max_tokens=8)
    out_bad: list[int] = []
    proc.update_state(
        BatchUpdate(
            batch_size=2, removed=[], added=[(0, bad, [], out_bad), (1, good, [], [])], moved=[]
        )
    )
    logits = proc.apply(torch.zeros(2, vocab.size))
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [eos]
    digits = [t for t in torch.isfinite(logits[1]).nonzero().flatten().tolist()]
    assert digits and all(vocab.token_bytes(t).isdigit() for t in digits)


def test_placeholder_tokens_wait_for_their_value(vocab) -> None:
    """Asynchronous scheduling: a -1 placeholder is filled in before sampling."""
    proc = CorralLogitsProcessor.for_vocabulary(vocab)
    params = sampling_params(regex="ab+", stop_token_ids=[vocab.eos_token_ids[0]], max_tokens=8)
    out: list[int] = []
    proc.update_state(BatchUpdate(batch_size=1, removed=[], added=[(0, params, [], out)], moved=[]))
    a = next(t for t in range(vocab.size) if vocab.token_bytes(t) == b"a")
    proc.apply(torch.zeros(1, vocab.size))
    out.append(-1)  # what update_state sees under asynchronous scheduling
    proc.update_state(None)
    out[-1] = a  # vLLM replaces the placeholder before the next apply
    logits = proc.apply(torch.zeros(1, vocab.size))
    allowed = torch.isfinite(logits[0]).nonzero().flatten().tolist()
    assert allowed and all(set(vocab.token_bytes(t)) == {ord("b")} for t in allowed)


def test_placeholder_still_unknown_at_sampling_ends_the_row(vocab) -> None:
    """A token still unknown when the next one is due: the row ends (fail closed)."""
    proc = CorralLogitsProcessor.for_vocabulary(vocab)
    eos = vocab.eos_token_ids[0]
    params = sampling_params(regex="ab+", stop_token_ids=[eos], max_tokens=8)
    out: list[int] = [-1]
    proc.update_state(BatchUpdate(batch_size=1, removed=[], added=[(0, params, [], out)], moved=[]))
    logits = proc.apply(torch.zeros(1, vocab.size))
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [eos]


def test_unconstrained_requests_never_wait_for_the_vocabulary(vocab) -> None:
    """Before the first constrained request, the processor does not wait for the
    vocabulary (built in the background while the engine starts)."""
    from concurrent.futures import Future

    proc = CorralLogitsProcessor.__new__(CorralLogitsProcessor)
    proc._start(Future(), vocab.size)  # a vocabulary that is never ready
    plain = SamplingParams(max_tokens=8)
    proc.update_state(BatchUpdate(batch_size=1, removed=[], added=[(0, plain, [], [])], moved=[]))
    logits = torch.randn(1, vocab.size)
    assert proc.apply(logits.clone()).equal(logits)
