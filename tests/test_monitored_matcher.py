"""MonitoredMatcher on a real vocabulary: regions begin where triggers fire, end where the
allowed names end, compose with a base grammar, roll back and fork; callbacks that fail
fail the generation."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from support.tokenizers import load_tokenizer, load_vocab

import corral
from corral.errors import MonitorError, TokenRejectedError
from corral.monitors.matcher import MonitoredMatcher
from corral.monitors.monitor import Monitor, MonitorContext

METHODS = {"os": ["path", "getcwd", "listdir"], "self": ["items", "append"]}


def _members(ctx: MonitorContext) -> list[str]:
    owner = ctx.text[:-1].split()[-1] if ctx.text[:-1].split() else ""
    return METHODS.get(owner, [])


def _ids(text: str) -> list[int]:
    return load_tokenizer("llama3").encode(text, add_special_tokens=False)


def test_a_region_allows_only_the_members_the_callback_names() -> None:
    v = load_vocab("llama3")
    calls: list[str] = []

    def allowed(ctx: MonitorContext) -> list[str]:
        calls.append(ctx.text)
        return _members(ctx)

    m = MonitoredMatcher(v, [Monitor(r"\.", allowed, on_empty="skip")])
    m.consume_tokens(_ids("x = os"))
    m.consume(_ids(".")[0])
    allowed_now = {v.token_bytes(t) for t in m.allowed_token_ids().tolist()}
    assert calls == ["x = os."]
    assert b"path" in allowed_now and b"get" in allowed_now
    assert b"items" not in allowed_now and b"sep" not in allowed_now
    m.consume_tokens(_ids("path"))
    m.consume_tokens(_ids(" and more"))  # the region ended with the name
    assert m.is_accepting()
    with pytest.raises(TokenRejectedError):
        MonitoredMatcher(v, [Monitor(r"\.", allowed)]).consume(_ids(".append")[0])


def test_rollback_and_fork_keep_regions_apart() -> None:
    v = load_vocab("llama3")
    m = MonitoredMatcher(v, [Monitor(r"\.", _members, on_empty="skip")])
    m.consume_tokens(_ids("os."))
    before = m.allowed_token_ids().tolist()
    f = m.fork()
    m.consume_tokens(_ids("getcwd()"))
    m.rollback(len(_ids("getcwd()")))
    assert m.allowed_token_ids().tolist() == before
    m.rollback(1)  # back before the dot: outside text again
    assert len(m.allowed_token_ids()) > 100_000
    assert f.allowed_token_ids().tolist() == before


def test_with_a_base_grammar_both_constrain() -> None:
    v = load_vocab("llama3")
    base = corral.compile('start: "call " /[a-z]+/ "." /[a-z]+/ "()"', v).matcher()
    m = MonitoredMatcher(v, [Monitor(r"\.", _members)], base=base)
    m.consume_tokens(_ids("call self."))
    allowed = {v.token_bytes(t) for t in m.allowed_token_ids().tolist()}
    assert b"items" in allowed and b"path" not in allowed and b"(" not in allowed
    m.consume_tokens(_ids("items()"))
    assert m.is_accepting()


def test_failing_callbacks_fail_the_generation() -> None:
    v = load_vocab("llama3")

    def boom(ctx: MonitorContext) -> list[str]:
        raise KeyError("no analyzer")

    def slow(ctx: MonitorContext) -> list[str]:
        time.sleep(0.5)
        return ["x"]

    for mon, what in [
        (Monitor(r"\.", boom), "KeyError"),
        (Monitor(r"\.", slow, timeout_s=0.05), "longer than 0.05 s"),
        (Monitor(r"\.", lambda ctx: "path"), "return [name]"),
        (Monitor(r"\.", lambda ctx: []), "allowed no names"),
    ]:
        m = MonitoredMatcher(v, [mon])
        m.consume_tokens(_ids("os."))  # asked when the next mask needs the region
        with pytest.raises(MonitorError, match=re.escape(what)):
            m.allowed_token_ids()
        with pytest.raises(MonitorError, match=re.escape(what)):
            m.consume(_ids("x")[0])  # still not asked successfully: never unconstrained


def test_async_callbacks_are_awaited() -> None:
    v = load_vocab("llama3")

    async def allowed(ctx: MonitorContext) -> list[str]:
        await asyncio.sleep(0)
        return ["path"]

    m = MonitoredMatcher(v, [Monitor(r"\.", allowed)])
    m.consume_tokens(_ids("os."))  # "os.path" is "os" ".path": no token crosses a trigger
    assert {v.token_bytes(t) for t in m.allowed_token_ids().tolist()} >= {b"path", b"p"}
    assert b"get" not in {v.token_bytes(t) for t in m.allowed_token_ids().tolist()}
    m.consume_tokens(_ids("path"))
    assert m.is_accepting()


def test_checking_a_token_that_fires_a_trigger_does_not_ask_the_monitor() -> None:
    """AWRS checks a drawn token with try_consume and rolls it back: a trigger at its end
    is asked only when the next mask needs the region."""
    v = load_vocab("llama3")
    calls: list[str] = []

    def allowed(ctx: MonitorContext) -> list[str]:
        calls.append(ctx.text)
        return ["path"]

    m = MonitoredMatcher(v, [Monitor(r"\.", allowed)])
    m.consume_tokens(_ids("os"))
    dot = _ids(".")[0]
    assert m.try_consume(dot)
    m.rollback(1)
    assert calls == [] and m.try_consume(dot) and calls == []
    assert m.allowed_token_ids().size and calls == ["os."]
