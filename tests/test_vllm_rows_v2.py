"""The vLLM processor under Model Runner V2, driven by a simulated V2 batch on CPU tensors.

The simulation does what V2's model runner shows a logits processor
(``vllm/v1/worker/gpu/sample/logits_processor/interface.py``): requests take the lowest
free slot (slots recycled with no callback), ``add_request`` per new or resumed request
(a resumed one with its partial output already committed, ``prefill_len >
prompt_len``), ``apply_staged_writes`` every step before ``apply``, batch order shuffled
every step, prefill chunks that are not the last (rows never sampled), and under
speculative decoding ``1 + d`` rows per request (``d`` drafts of varying number, some
outside the grammar, some not yet known, ``-1``), then rejection sampling that commits
the accepted drafts and one more token into ``all_token_ids`` / ``total_len``.

After every step, each constrained row's mask must equal that of a reference
:class:`~corral.Matcher` replaying from scratch the request's committed output and the
drafts before the row; a row after a draft outside the grammar, and every row of a
request given a token outside its grammar, must allow only the request's end tokens;
rows of unconstrained requests and of unsampled prefill chunks must be untouched.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from support.tokenizers import load_vocab
from support.vllm_batches import PAD, reference_mask
from support.vllm_batches import constraints as _constraints_of
from support.words import mask_of

pytest.importorskip("vllm", reason="vLLM is not installed (the README's vLLM test step has it)")
torch = pytest.importorskip("torch")

from vllm import SamplingParams  # noqa: E402

from corral.integrations.vllm import CorralLogitsProcessor, sampling_params  # noqa: E402

MAX_REQS, MAX_LEN = 6, 256


@pytest.fixture(scope="module")
def vocab():
    return load_vocab("gpt2")


@pytest.fixture(scope="module")
def constraints(vocab):
    return _constraints_of(vocab)


class ReqStates:
    """V2's ``LogitsProcRequestState``: device tensors behind ``.gpu``, host mirrors
    behind ``.np`` (only ``prompt_len`` and ``prefill_len`` have one)."""

    def __init__(self, vocab_size: int) -> None:
        self.device = torch.device("cpu")
        self.max_num_reqs = MAX_REQS
        self.vocab_size = vocab_size
        self.all_token_ids = SimpleNamespace(gpu=torch.zeros(MAX_REQS, MAX_LEN, dtype=torch.int32))
        self.total_len = SimpleNamespace(gpu=torch.zeros(MAX_REQS, dtype=torch.int32))
        self.prompt_len = SimpleNamespace(np=np.zeros(MAX_REQS, np.int32))
        self.prefill_len = SimpleNamespace(np=np.zeros(MAX_REQS, np.int32))


class Request:
    def __init__(self, params: Any, compiled: Any, rng: random.Random, vocab_size: int) -> None:
        self.params = params
        self.compiled = compiled  # None: unconstrained
        self.prompt = [rng.randrange(vocab_size) for _ in range(rng.randint(1, 5))]
        self.output: list[int] = []
        self.bad = False  # a token outside the grammar was committed
        self.slot = -1
        self.chunks_left = 0  # prefill chunks still to run before the last one

    @property
    def ends(self) -> set[int]:
        return set(self.params.stop_token_ids or ())

    def expected(self, vocab: Any, width: int, drafts: list[int]) -> np.ndarray | None:
        """bool [width]: the reference mask after the output and ``drafts`` (None:
        unconstrained)."""
        if self.compiled is None:
            return None
        tokens = [*self.output, *drafts]
        return reference_mask(self.compiled, tokens, self.ends, vocab, width, self.bad)


class Runner:
    """The model runner's side: slots, committed tokens, batch layout."""

    def __init__(self, proc: Any, rs: ReqStates) -> None:
        self.proc = proc
        self.rs = rs
        self.free = list(range(MAX_REQS))
        self.live: list[Request] = []

    def add(self, req: Request, chunks: int = 0) -> None:
        self.free.sort()
        req.slot = s = self.free.pop(0)
        seq = [*req.prompt, *req.output]
        self.rs.all_token_ids.gpu[s].zero_()
        self.rs.all_token_ids.gpu[s, : len(seq)] = torch.tensor(seq, dtype=torch.int32)
        self.rs.prompt_len.np[s] = len(req.prompt)
        self.rs.prefill_len.np[s] = len(seq)
        self.rs.total_len.gpu[s] = len(seq)
        req.chunks_left = chunks
        self.proc.add_request(s, req.params)
        self.live.append(req)

    def remove(self, req: Request) -> None:
        self.live.remove(req)
        self.free.append(req.slot)  # no callback: the processor learns of it on reuse

    def commit(self, req: Request, tokens: list[int]) -> None:
        s, n = req.slot, int(self.rs.total_len.gpu[req.slot])
        self.rs.all_token_ids.gpu[s, n : n + len(tokens)] = torch.tensor(tokens, dtype=torch.int32)
        self.rs.total_len.gpu[s] = n + len(tokens)
        req.output.extend(tokens)

    def context(self, order: list[Request], drafts: dict[int, list[int]]) -> Any:
        slots, local, inputs, bound = [], [], [], []
        for req in order:
            s, n = req.slot, int(self.rs.total_len.gpu[req.slot])
            d = drafts.get(s, [])
            last = int(self.rs.all_token_ids.gpu[s, n - 1])
            for j, tok in enumerate([last, *d]):
                slots.append(s)
                local.append(j)
                inputs.append(tok)
            chunked = req.chunks_left > 0
            bound.append(int(self.rs.prefill_len.np[s]) - 1 if chunked else n + len(d))
        return SimpleNamespace(
            expanded_idx_mapping=torch.tensor(slots, dtype=torch.int32),
            idx_mapping=torch.tensor([r.slot for r in order], dtype=torch.int32),
            idx_mapping_np=np.array([r.slot for r in order], np.int32),
            expanded_local_pos=torch.tensor(local, dtype=torch.int32),
            input_ids=torch.tensor(inputs, dtype=torch.int32),
            pos=torch.zeros(len(slots), dtype=torch.int64),
            seq_lens_upper_bound_np=np.array(bound, np.int32),
        )


def _drafts(req: Request, vocab: Any, k: int, rng: random.Random) -> list[int]:
    """Up to ``k`` draft tokens: mostly ones the grammar allows, some it does not, some
    not known yet (-1)."""
    out: list[int] = []
    m = req.compiled.matcher() if req.compiled is not None else None
    ok = m is not None and not req.bad and all(m.try_consume(t) for t in req.output)
    for _ in range(rng.randint(0, k)):
        roll = rng.random()
        if roll < 0.05:
            out.append(-1)
        elif roll < 0.15 or not ok or m is None:
            out.append(rng.randrange(vocab.size))
        else:
            allowed = [t for t in np.flatnonzero(mask_of(m)).tolist() if t not in req.ends]
            if not allowed:
                break
            t = rng.choice(allowed)
            out.append(t)
            m.consume(t)
    return out


def _run(vocab: Any, constraints: list, seed: int, k: int, steps: int = 40) -> int:
    """A simulated V2 engine with ``k`` speculative tokens; returns the rows checked."""
    rng = random.Random(seed)
    width = vocab.size + PAD
    rs = ReqStates(width)
    proc = CorralLogitsProcessor.for_vocabulary(vocab, width, req_states=rs, window=1 + k)
    runner = Runner(proc, rs)
    plain = SamplingParams(max_tokens=64)
    preempted: list[Request] = []
    checked = 0
    for step in range(steps):
        for req in list(runner.live):
            if rng.random() < 0.08:  # preempted: back later, in some slot, output kept
                runner.remove(req)
                preempted.append(req)
        while runner.free and rng.random() < 0.5:
            if preempted and rng.random() < 0.5:
                runner.add(preempted.pop(0), chunks=rng.choice([0, 0, 1]))
            else:
                params, compiled = rng.choice([*constraints, (plain, None)])
                req = Request(params, compiled, rng, vocab.size)
                runner.add(req, chunks=rng.choice([0, 0, 1]))
        if not runner.live:
            continue
        proc.apply_staged_writes()
        order = rng.sample(runner.live, len(runner.live))
        drafts = {r.slot: _drafts(r, vocab, k, rng) for r in order if r.chunks_left == 0}
        ctx = runner.context(order, drafts)
        logits = torch.randn(len(ctx.expanded_idx_mapping), width)
        before = logits.clone()
        out = proc.apply(logits, ctx)
        row = 0
        for req in order:
            d = drafts.get(req.slot, [])
            rows = list(range(row, row + 1 + len(d)))
            row += 1 + len(d)
            if req.chunks_left > 0 or req.compiled is None:
                for r in rows:
                    assert torch.equal(out[r], before[r]), f"row {r} (unsampled or free) changed"
                if req.chunks_left > 0:
                    req.chunks_left -= 1
                    continue
            else:
                for j, r in enumerate(rows):
                    expected = req.expected(vocab, width, d[:j])
                    got = torch.isfinite(out[r]).numpy()
                    assert np.array_equal(got, expected), (step, req.slot, j, req.output, d)
                    assert got.any(), "a constrained row with no allowed token"
                    checked += 1
            # rejection sampling: drafts are accepted while the row before allows them
            accepted = 0
            for j, t in enumerate(d):
                if t < 0 or not torch.isfinite(out[rows[j], t]) or rng.random() < 0.2:
                    break
                accepted += 1
            allowed = torch.isfinite(out[rows[accepted]]).nonzero().flatten().tolist()
            bonus = rng.choice(allowed)
            if req.compiled is not None and not req.bad and rng.random() < 0.03:
                # a sampler that ignored the mask: the request must be ended
                bonus = rng.choice([t for t in range(vocab.size) if t not in allowed][:5000])
                req.bad = True
            tokens = [*d[:accepted], bonus]
            if bonus in req.ends:
                runner.remove(req)  # finished: the slot is free for the next request
                continue
            runner.commit(req, tokens)
            if int(rs.total_len.gpu[req.slot]) >= MAX_LEN - k - 2:
                runner.remove(req)
    return checked


@pytest.mark.parametrize("seed", range(3))
def test_v2_batch_matches_per_request_matchers(vocab, constraints, seed: int) -> None:
    assert _run(vocab, constraints, seed, k=0) > 40


@pytest.mark.parametrize("seed", range(3))
def test_v2_draft_rows_match_matchers_advanced_through_the_drafts(
    vocab, constraints, seed: int
) -> None:
    assert _run(vocab, constraints, 10 + seed, k=3) > 80


def test_a_slot_given_to_an_unconstrained_request_is_never_touched(vocab, constraints) -> None:
    width = vocab.size + PAD
    rs = ReqStates(width)
    proc = CorralLogitsProcessor.for_vocabulary(vocab, width, req_states=rs)
    runner = Runner(proc, rs)
    rng = random.Random(0)
    first = Request(constraints[2][0], constraints[2][1], rng, vocab.size)
    runner.add(first)
    runner.remove(first)
    second = Request(SamplingParams(max_tokens=8), None, rng, vocab.size)
    runner.add(second)
    assert second.slot == first.slot
    proc.apply_staged_writes()
    ctx = runner.context([second], {})
    logits = torch.randn(1, width)
    assert torch.equal(proc.apply(logits.clone(), ctx), logits)


def test_a_failed_compile_ends_its_request_only(vocab) -> None:
    width = vocab.size
    rs = ReqStates(width)
    proc = CorralLogitsProcessor.for_vocabulary(vocab, width, req_states=rs)
    runner = Runner(proc, rs)
    eos = vocab.eos_token_ids[0]
    rng = random.Random(0)
    bad = SamplingParams(
        max_tokens=8, stop_token_ids=[eos], extra_args={"corral": '{"regex": "("}'}
    )
    good = sampling_params(regex="[0-9]+", stop_token_ids=[eos], max_tokens=8)
    a, b = Request(bad, None, rng, width), Request(good, None, rng, width)
    runner.add(a)
    runner.add(b)
    proc.apply_staged_writes()
    logits = proc.apply(torch.zeros(2, width), runner.context([b, a], {}))
    digits = torch.isfinite(logits[0]).nonzero().flatten().tolist()
    assert digits and all(vocab.token_bytes(t).isdigit() for t in digits)
    assert torch.isfinite(logits[1]).nonzero().flatten().tolist() == [eos]


def test_an_extra_step_after_the_end_token_allows_only_end_tokens(vocab, caplog) -> None:
    """Asynchronous scheduling may run one more step for a request that has sampled its
    end token (here a stop token the grammar knows nothing of): that token is committed,
    the row allows only end tokens, and nothing is reported as a failure."""
    width = vocab.size
    rs = ReqStates(width)
    proc = CorralLogitsProcessor.for_vocabulary(vocab, width, req_states=rs)
    runner = Runner(proc, rs)
    stop = next(t for t in range(vocab.size) if vocab.token_bytes(t) == b".")
    params = sampling_params(regex="a", stop_token_ids=[stop], max_tokens=8)
    req = Request(params, None, random.Random(0), width)
    runner.add(req)
    a = next(t for t in range(vocab.size) if vocab.token_bytes(t) == b"a")
    for token in (a, stop):
        proc.apply_staged_writes()
        logits = proc.apply(torch.zeros(1, width), runner.context([req], {}))
        assert torch.isfinite(logits[0, token])
        runner.commit(req, [token])
    with caplog.at_level("ERROR", logger="vllm.corral"):
        proc.apply_staged_writes()
        logits = proc.apply(torch.zeros(1, width), runner.context([req], {}))
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [stop]
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def test_a_request_resumed_with_output_continues_where_it_was(vocab, constraints) -> None:
    """Preempted with a partial output and resumed in another slot (``prefill_len >
    prompt_len``): its first mask is the reference's after that output, and a token
    outside the grammar in it ends the request."""
    width = vocab.size
    params, compiled = constraints[0]
    walk, m = [], compiled.matcher()
    for _ in range(6):  # a valid partial output: the last allowed token, 6 times over
        t = [t for t in np.flatnonzero(mask_of(m)).tolist() if t not in vocab.eos_token_ids][-1]
        walk.append(t)
        m.consume(t)
    for output, ok in [(walk, True), ([0, 0], False)]:
        rs = ReqStates(width)
        proc = CorralLogitsProcessor.for_vocabulary(vocab, width, req_states=rs, window=2)
        runner = Runner(proc, rs)
        runner.free = [3, 4]
        req = Request(params, compiled, random.Random(0), width)
        req.output = output
        runner.add(req)
        proc.apply_staged_writes()
        logits = proc.apply(torch.randn(1, width), runner.context([req], {}))
        got = torch.isfinite(logits[0]).numpy()
        req.bad = not ok
        assert np.array_equal(got, req.expected(vocab, width, [])), output
        assert ok or np.flatnonzero(got).tolist() == sorted(req.ends)


def test_the_engine_builds_a_v2_processor_with_the_v2_constructor(vocab, monkeypatch) -> None:
    """vLLM calls ``(vllm_config, req_states)`` under V2 and ``(vllm_config, device,
    is_pin_memory)`` under V1; V2's loader accepts the class (a subclass of its
    interface); the window is 1 + the number of speculative tokens."""
    from vllm.v1.worker.gpu.sample.logits_processor.loader import (
        _load_v2_logitsprocs_by_fqcns,
    )

    from corral.integrations.vllm import processor as mod

    assert _load_v2_logitsprocs_by_fqcns(["corral.integrations.vllm:CorralLogitsProcessor"]) == [
        CorralLogitsProcessor
    ]
    monkeypatch.setattr(mod, "engine_vocabulary", lambda model_config, width: vocab)
    config = SimpleNamespace(
        model_config=SimpleNamespace(get_vocab_size=lambda: vocab.size),
        speculative_config=SimpleNamespace(num_speculative_tokens=4),
    )
    rs = ReqStates(vocab.size)
    v2 = CorralLogitsProcessor(config, rs)
    assert v2._v2 is not None and v2._v2.window == 5
    v1 = CorralLogitsProcessor(config, torch.device("cpu"), False)
    assert v1._v2 is None
    with pytest.raises(RuntimeError, match="V1"):
        v1.add_request(0, SamplingParams())
    with pytest.raises(TypeError):
        CorralLogitsProcessor(config)
