"""Monitors in ``corral.generate``: a random model (an adversary with arbitrary
preferences) over a real tokenizer, with and without the request's own grammar."""

from __future__ import annotations

import re

import pytest
from support.tiny_models import tiny_llama
from support.tokenizers import load_tokenizer

import corral
from corral import InvalidArgumentError, Monitor, MonitorContext

MEMBERS = {"os": ["path", "getcwd", "listdir"], "self": ["items", "append", "extend"]}


def _members(ctx: MonitorContext) -> list[str]:
    owner = re.findall(r"(\w+)\.$", ctx.prompt + ctx.text)
    return MEMBERS.get(owner[-1], []) if owner else []


@pytest.fixture(scope="module")
def llama():  # type: ignore[no-untyped-def]
    tok = load_tokenizer("llama3")
    return tiny_llama(tok, seed=3), tok


@pytest.mark.parametrize(
    ("sampler", "seed"),
    # AWRS with a random model checks about 50,000 tokens a step: one seed
    [("mask", 0), ("mask", 1), ("mask", 2), ("awrs", 1), ("smc", 0)],
)
def test_the_grammar_and_the_monitor_both_hold(llama, sampler: str, seed: int) -> None:  # type: ignore[no-untyped-def]
    model, tok = llama
    calls: list[str] = []

    def allowed(ctx: MonitorContext) -> list[str]:
        calls.append(ctx.text)
        assert ctx.prompt == "Call: " and ctx.state == {"file": "x.py"}
        return _members(ctx)

    out = corral.generate(
        model, "Call: ", tokenizer=tok, grammar='start: ("os" | "self") "." /[a-z_]+/ "()"',
        monitors=[Monitor(r"\.", allowed)], monitor_state={"file": "x.py"},
        sampler=sampler, temperature=1.0, seed=seed, max_new_tokens=30,
        # SMC draws with AWRS, which checks most of a random model's vocabulary each step
        **({"n_particles": 4} if sampler == "smc" else {}),
    )  # fmt: skip
    owner, name = re.fullmatch(r"(os|self)\.([a-z_]+)\(\)", out).groups()  # type: ignore[union-attr]
    assert name in MEMBERS[owner]
    if sampler == "smc":  # each particle asks where its own text fires the trigger
        assert f"{owner}." in calls and set(calls) <= {"os.", "self."}
    else:
        assert calls == [f"{owner}."]


def test_free_text_under_a_monitor(llama) -> None:  # type: ignore[no-untyped-def]
    """No grammar: the text is free, except that after every `self.` comes a member of
    self and then no identifier character; the prompt ends with one, so the output starts
    with a member."""
    model, tok = llama
    for seed in range(3):
        out = corral.generate(
            model, "self.", tokenizer=tok, monitors=[Monitor(r"\bself\.", _members)],
            temperature=1.0, seed=seed, max_new_tokens=24,
        )  # fmt: skip
        assert isinstance(out, str)
        assert re.match(r"(items|append|extend)", out), out
        for m in re.finditer(r"\bself\.", "self." + out):
            rest = ("self." + out)[m.end() :]
            assert re.match(r"(items|append|extend)(?![\w\x80-\U0010ffff])", rest), (out, rest)


def test_monitors_refuse_what_they_cannot_do_yet(llama) -> None:  # type: ignore[no-untyped-def]
    model, tok = llama
    mon = Monitor(r"\.", _members)
    for kwargs, what in [
        ({"sampler": "asap", "temperature": 1.0}, "sampler='mask', 'awrs' or 'smc'"),
        ({"heal": True}, "heal=True"),
        ({"monitors": []}, "at least one Monitor"),
        ({"monitors": "x"}, "list of Monitor"),
    ]:
        args = {"monitors": [mon], **kwargs}
        with pytest.raises((InvalidArgumentError, TypeError), match=re.escape(what)):
            corral.generate(model, "x", tokenizer=tok, max_new_tokens=4, **args)
