"""Monitors in the vLLM processor, driven by vLLM's own ``BatchUpdate`` (no engine).

Requests name monitors registered in the engine's process (``CORRAL_MONITORS`` here);
each constrained row's mask must equal a :class:`~corral.MonitoredMatcher` built by hand
from the same prompt, base constraint and tokens, and a monitor that fails must end its
own request only.
"""

from __future__ import annotations

import pytest
from support import monitors as test_monitors
from support.tokenizers import load_tokenizer, load_vocab

pytest.importorskip("vllm", reason="vLLM is not installed (the README's vLLM test step has it)")
torch = pytest.importorskip("torch")

from vllm import SamplingParams  # noqa: E402
from vllm.exceptions import VLLMValidationError  # noqa: E402
from vllm.v1.sample.logits_processor import BatchUpdate  # noqa: E402

import corral  # noqa: E402
from corral.integrations.vllm import CorralLogitsProcessor, sampling_params  # noqa: E402
from corral.monitors.registry import ENV  # noqa: E402

REGEX = r"[A-Za-z ]+: [a-z]+\."


@pytest.fixture(autouse=True)
def _registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, test_monitors.ENV)


@pytest.fixture(scope="module")
def vocab():
    return load_vocab("gpt2")


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("gpt2")


def _allowed(logits: torch.Tensor, row: int) -> list[int]:
    return torch.isfinite(logits[row]).nonzero().flatten().tolist()


def _reference(vocab, monitor, prompt: str, tokens: list[int], base=None, state=None) -> list[int]:
    m = corral.MonitoredMatcher(vocab, [monitor], base=base, prompt=prompt, state=state)
    for t in tokens:
        m.consume(t)
    allowed = [t for t in m.allowed_token_ids().tolist() if t not in vocab.eos_token_ids]
    return sorted(allowed + (list(vocab.eos_token_ids[:1]) if m.is_accepting() else []))


def test_a_request_names_monitors_with_and_without_its_own_constraint(vocab, tok) -> None:
    """Row 0: monitors only, its prompt ending at the trigger (the region starts at once).
    Row 1: a regex and the monitor, the trigger firing in the output. Every step's mask
    equals the hand-built matcher's."""
    eos = vocab.eos_token_ids[0]
    proc = CorralLogitsProcessor.for_vocabulary(vocab)
    free = sampling_params(monitors=["colours"], stop_token_ids=[eos], max_tokens=16)
    both = sampling_params(regex=REGEX, monitors=["colours"], stop_token_ids=[eos], max_tokens=16)
    prompts = ["The car's colour: ", "Write one line."]
    outs: list[list[int]] = [[], []]
    added = [(i, p, tok.encode(prompts[i]), outs[i]) for i, p in enumerate((free, both))]
    proc.update_state(BatchUpdate(batch_size=2, removed=[], added=added, moved=[]))
    base = corral.compile(corral.Grammar.from_regex(REGEX), vocab)
    space = tok.encode(" ")
    assert len(space) == 1  # no token crosses the trigger's end: the space stands alone
    written = [tok.encode("teal."), tok.encode("Paint colour:") + space + tok.encode("ochre.")]
    for step in range(max(len(w) for w in written) + 1):
        logits = proc.apply(torch.zeros(2, vocab.size))
        want0 = _reference(vocab, test_monitors.COLOURS, prompts[0], outs[0])
        want1 = _reference(vocab, test_monitors.COLOURS, prompts[1], outs[1], base.matcher())
        assert _allowed(logits, 0) == want0, step
        assert _allowed(logits, 1) == want1, step
        for i in (0, 1):
            if step < len(written[i]):
                assert written[i][step] in _allowed(logits, i)
                outs[i].append(written[i][step])
        proc.update_state(None)
    # after the trigger, only the catalogue's names: `ochre` and nothing else
    region = _reference(vocab, test_monitors.COLOURS, "", tok.encode("Paint colour: "))
    assert region and all(
        any(n.startswith(vocab.token_bytes(t).decode()) for n in test_monitors.NAMES)
        for t in region
    )


def test_monitor_state_reaches_the_callback(vocab, tok) -> None:
    eos = vocab.eos_token_ids[0]
    proc = CorralLogitsProcessor.for_vocabulary(vocab)
    params = sampling_params(
        monitors=["from_state"],
        monitor_state={"names": ["mauve", "umber"]},
        stop_token_ids=[eos],
        max_tokens=8,
    )
    prompt = "Its colour: "
    proc.update_state(
        BatchUpdate(batch_size=1, removed=[], added=[(0, params, tok.encode(prompt), [])], moved=[])
    )
    got = _allowed(proc.apply(torch.zeros(1, vocab.size)), 0)
    state = {"names": ["mauve", "umber"]}
    assert got == _reference(vocab, test_monitors.FROM_STATE, prompt, [], state=state)
    assert {vocab.token_bytes(t)[:1] for t in got} == {b"m", b"u"}


def test_a_failing_monitor_ends_its_own_request_only(vocab, tok) -> None:
    """The callback raises: that row allows only its end token (fail closed), the other
    row keeps its constraint, and ``apply`` itself does not raise."""
    eos = vocab.eos_token_ids[0]
    proc = CorralLogitsProcessor.for_vocabulary(vocab)
    broken = sampling_params(monitors=["broken"], stop_token_ids=[eos], max_tokens=8)
    digits = sampling_params(regex="[0-9]+", stop_token_ids=[eos], max_tokens=8)
    added = [(0, broken, tok.encode("Its colour: "), []), (1, digits, [], [])]
    proc.update_state(BatchUpdate(batch_size=2, removed=[], added=added, moved=[]))
    logits = proc.apply(torch.zeros(2, vocab.size))
    assert _allowed(logits, 0) == [eos]
    assert all(vocab.token_bytes(t).isdigit() for t in _allowed(logits, 1))
    failed = proc._rows.rows[0]
    assert "broken" in failed.error and "the catalogue is offline" in failed.error


def test_unknown_or_malformed_monitors_are_refused_at_admission() -> None:
    with pytest.raises(VLLMValidationError, match=r"no monitor is called 'nope'.*colours"):
        CorralLogitsProcessor.validate_params(sampling_params(monitors=["nope"]))
    for bad, why in (
        ('{"monitors": []}', "at least one"),
        ('{"monitors": "colours"}', "list of monitor names"),
        ('{"monitors": ["colours", "colours"]}', "twice"),
        ('{"monitors": ["a b"]}', "monitor's name"),
        ('{"monitor_state": 1, "regex": "a"}', "applies to a request with 'monitors'"),
        ('{"monitors": ["colours"], "options": {}}', "apply to a schema or a grammar"),
    ):
        with pytest.raises(VLLMValidationError, match=why):
            CorralLogitsProcessor.validate_params(SamplingParams(extra_args={"corral": bad}))
    CorralLogitsProcessor.validate_params(sampling_params(monitors=["colours", "python_members"]))


def test_model_runner_v2_refuses_monitors_instead_of_dropping_them(vocab) -> None:
    """V2 gives a logits processor no prompt tokens: a request with monitors fails (its
    row allows only its end token) rather than running without them."""
    eos = vocab.eos_token_ids[0]
    proc = CorralLogitsProcessor.for_vocabulary(vocab)
    row = proc._new_slot_row(3, sampling_params(monitors=["colours"], stop_token_ids=[eos]), [])
    assert row is not None
    row.catch_up()
    assert row.error is not None and "Model Runner V2" in row.error
