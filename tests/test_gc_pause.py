"""The cyclic garbage collector is paused during compiles and restored as it was."""

from __future__ import annotations

import gc
import threading

import pytest
from support.tokenizers import load_vocab

import corral
from corral.automata.gc_pause import gc_paused


def test_paused_inside_restored_after_even_on_error() -> None:
    assert gc.isenabled()
    with pytest.raises(ValueError), gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # reentrant
            assert not gc.isenabled()
        assert not gc.isenabled()
        raise ValueError
    assert gc.isenabled()


def test_a_collector_the_process_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_blocks_in_threads_resume_once_the_last_ends() -> None:
    inside = threading.Event()
    release = threading.Event()

    def other() -> None:
        with gc_paused():
            inside.set()
            release.wait(10)

    t = threading.Thread(target=other)
    with gc_paused():
        t.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other thread's block is still running
    release.set()
    t.join(10)
    assert gc.isenabled()


def test_compile_pauses_and_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    from corral.grammar import frontends

    real = frontends.from_lark

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(frontends, "from_lark", spy)
    corral.compile('start: "a" "b"+', load_vocab("gpt2"), cache=False)
    assert seen == [False]
    assert gc.isenabled()
    with pytest.raises(corral.CorralError):
        corral.compile("start: undefined_rule", load_vocab("gpt2"), cache=False)
    assert gc.isenabled()
