"""Monitors inside transformers' model.generate (MonitoredLogitsProcessor): a random
model (an adversary with arbitrary preferences) over GPT-2's tokenizer, a padded output
layer and left padding; free text and a grammar; sampling and beam search; prompts that
end at a trigger; failures of the callback."""

from __future__ import annotations

import re

import pytest
import torch
from support.tiny_models import generate_texts, tiny_llama
from support.tokenizers import load_tokenizer

import corral
from corral import Monitor, MonitorContext, MonitorError
from corral.errors import ArgumentTypeError, InvalidArgumentError
from corral.integrations.monitored_processor import MonitoredLogitsProcessor

PADDED = 50_304
MEMBERS = {"os": ["path", "getcwd", "listdir"], "self": ["items", "append", "extend"]}
AFTER = re.compile(r"\b(os|self)\.")


def _members(ctx: MonitorContext) -> list[str]:
    owner = re.findall(r"(\w+)\.$", ctx.prompt + ctx.text)
    return MEMBERS[owner[-1]]


MONITOR = Monitor(r"\b(?:os|self)\.", _members)


@pytest.fixture(scope="module")
def setup():  # type: ignore[no-untyped-def]
    tok = load_tokenizer("gpt2")
    tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok, tiny_llama(tok, vocab_size=PADDED, seed=5)


def _generate(setup, proc, prompts, **kw):  # type: ignore[no-untyped-def]
    tok, model = setup
    return generate_texts(tok, model, proc, prompts, max_new_tokens=24, **kw)


def _check_members(prompt: str, text: str) -> None:
    """After every ``os.`` / ``self.`` of prompt + text comes one of its members and then
    no identifier character."""
    full = prompt + text
    for m in AFTER.finditer(full):
        if m.end() < len(prompt):
            continue  # inside the prompt, before its end: not monitored
        rest = full[m.end() :]
        if not rest:
            continue  # the output ended right at the trigger (the token budget)
        names = "|".join(MEMBERS[m.group(1)])
        assert re.match(rf"({names})(?![\w\x80-\U0010ffff])", rest), (full, rest)


def test_free_text_rows_with_their_own_prompts(setup) -> None:  # type: ignore[no-untyped-def]
    tok, model = setup
    prompts = ["x = os.", "def f(self):\n    return self.", "Hello"]
    for seed in range(3):
        proc = MonitoredLogitsProcessor([MONITOR], tokenizer=tok, model=model)
        torch.manual_seed(seed)
        texts = _generate(setup, proc, prompts, do_sample=True)
        assert re.match(r"(path|getcwd|listdir)", texts[0]), texts[0]
        assert re.match(r"(items|append|extend)", texts[1]), texts[1]
        for p, t in zip(prompts, texts, strict=True):
            _check_members(p, t)


def test_beam_search_under_a_grammar(setup) -> None:  # type: ignore[no-untyped-def]
    tok, model = setup
    vocab = corral.Vocabulary.from_hf(tok, vocab_size=PADDED)
    grammar = corral.compile('start: ("os" | "self") "." /[a-z_]+/ "()"', vocab)
    calls: list[str] = []

    def members(ctx: MonitorContext) -> list[str]:
        calls.append(ctx.text)
        return _members(ctx)

    proc = MonitoredLogitsProcessor(
        [Monitor(r"\b(?:os|self)\.", members)], grammar, tokenizer=tok, model=model
    )
    texts = _generate(setup, proc, ["Call: ", "Do it: "], num_beams=3, num_return_sequences=2)
    assert len(texts) == 4
    for t in texts:
        assert re.fullmatch(r"os\.(path|getcwd|listdir)\(\)|self\.(items|append|extend)\(\)", t), t
    assert calls and all(c in ("os.", "self.") for c in calls)


def test_a_failing_callback_stops_generation(setup) -> None:  # type: ignore[no-untyped-def]
    tok, model = setup

    def broken(ctx: MonitorContext) -> list[str]:
        raise RuntimeError("language server down")

    proc = MonitoredLogitsProcessor([Monitor(r"\bos\.", broken)], tokenizer=tok, model=model)
    with pytest.raises(MonitorError, match="language server down"):
        _generate(setup, proc, ["x = os."])


def test_arguments_are_checked(setup) -> None:  # type: ignore[no-untyped-def]
    tok, _model = setup
    with pytest.raises(ArgumentTypeError, match="tokenizer"):
        MonitoredLogitsProcessor([MONITOR], tokenizer=None)
    with pytest.raises(ArgumentTypeError, match="list of Monitor"):
        MonitoredLogitsProcessor("x", tokenizer=tok)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="at least one Monitor"):
        MonitoredLogitsProcessor([], tokenizer=tok)
