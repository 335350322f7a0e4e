"""Compiling corral's Numba kernels ahead of first use (``corral warmup``).

The kernels are compiled by Numba on first use and cached on disk (in each kernel
module's ``__pycache__``, or under ``NUMBA_CACHE_DIR``). With an empty cache (a fresh
install, a new container image) the first compile and the first masks of a process pay
that compilation; :func:`warmup` pays it ahead: it drives every kernel, with the
argument types real use gives it, through the public API on a small built-in vocabulary
and a few constraints, so that later processes load everything from the cache. It needs
no model, tokenizer or network, and is safe to run again (a warm cache makes it fast).

``python -m corral warmup`` (or ``corral warmup``) runs it with a progress bar; run it
once after installing, e.g. in a Dockerfile after ``pip install corral``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .automata import CompiledGrammar, Vocabulary

#: Each step's name, in order (see :func:`warmup`).
STEPS = (
    "vocabulary and token trie",
    "JSON Schema",
    "masks and consumes",
    "Lark grammar",
    "regular expression",
    "batched masks and logits",
    "completion checks (diffusion)",
)


@dataclass(frozen=True)
class WarmupStep:
    """One finished step: its name and wall-clock seconds."""

    name: str
    seconds: float


Progress = Callable[[int, int, str], None]
"""``progress(done, total, name)``: called before each step (``done`` steps finished, the
next one named) and once at the end (``done == total``, ``name == ""``)."""


def _vocabulary() -> Vocabulary:
    """A small vocabulary shaped like a real one: every single byte, multi-byte words and
    punctuation runs, a UTF-8 character, an empty token, an EOS and a control token, and
    padding ids (the logits width rounded up)."""
    from .automata import Vocabulary

    words = [
        b'{"',
        b'":',
        b'",',
        b' "',
        b"name",
        b" name",
        b"age",
        b"true",
        b"false",
        b"null",
        b"12",
        b"3.5",
        b"e-",
        b"},",
        b"]}",
        b"[{",
        b"  ",
        b"\n",
        b"SELECT",
        b" FROM",
        "é".encode(),
        "€".encode(),
        b"\xe2\x82",  # a UTF-8 prefix
    ]
    tokens = [bytes([b]) for b in range(256)] + words + [b"", b"<eos>", b"<sep>"]
    eos = len(tokens) - 2
    return Vocabulary(
        tokens, eos_token_ids=[eos], special_ids=[eos + 1], vocab_size=len(tokens) + 37
    )


def _drive(compiled: CompiledGrammar, text: bytes) -> None:
    """Mask and consume ``text`` greedily token by token (longest allowed token), then
    end it; also forced tokens, rollback and fork."""
    from .automata import allocate_bitmask

    vocab = compiled.vocab
    m = compiled.matcher()
    mask = allocate_bitmask(1, vocab.size)
    m.forced_tokens()
    pos = 0
    while pos < len(text):
        m.fill_bitmask(mask, 0)
        best = -1
        for t in range(vocab.tokenizer_size):
            b = vocab.token_bytes(t)
            allowed = (int(mask[0, t >> 5]) >> (t & 31)) & 1
            longer = best < 0 or len(b) > len(vocab.token_bytes(best))
            if allowed and b and vocab.kind(t) == "normal" and longer and text.startswith(b, pos):
                best = t
        if best < 0:
            raise RuntimeError(f"warmup: no allowed token at byte {pos} of {text!r}")
        m.consume(best)
        pos += len(vocab.token_bytes(best))
        m.forced_tokens()
    m.fill_bitmask(mask, 0)
    f = m.fork()
    f.rollback(1)
    f.fill_bitmask(mask, 0)
    m.is_accepting()
    m.consume(vocab.eos_token_ids[0])


def warmup(progress: Progress | None = None) -> list[WarmupStep]:
    """Compile (or load from Numba's cache) every corral kernel; returns the steps' times.

    Steps: the vocabulary's trie; a JSON Schema compile (token caches, state signatures,
    continuation classes); masks, consumes and forced tokens on it; a Lark grammar with
    ignored whitespace and a special token; a regular expression (token-level DFA);
    batched masks and masking float32 logits; completion checks of partly filled slots
    (diffusion). Raises ``RuntimeError`` if a step does not behave as expected.
    """
    import numpy as np

    from .automata import (
        allocate_bitmask,
        apply_token_bitmask_inplace,
        fill_next_token_bitmasks,
    )
    from .automata.compiler import Compiler
    from .automata.completion import MASK, MASK_OPT, CompletionChecker, completion_checker

    done: list[WarmupStep] = []
    state: dict[str, Any] = {}

    def vocabulary() -> None:
        vocab = _vocabulary()
        _ = vocab.trie
        state["vocab"] = vocab

    def json_schema() -> None:
        compiler = Compiler(state["vocab"])
        schema = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 20},
                "age": {"type": "integer", "minimum": 0},
                "score": {"type": "number"},
                "tags": {"type": "array", "items": {"enum": ["a", "b", "é"]}},
                "ok": {"type": "boolean"},
            },
            "required": ["name"],
        }
        state["compiler"] = compiler
        state["schema_spec"] = schema
        state["schema"] = compiler.json_schema(schema)

    def masks() -> None:
        _drive(
            state["schema"], b'{"name": "\xc3\xa9 x", "age": 12, "score": 3.5e-2, "tags": ["a"]}'
        )
        m = state["schema"].matcher()
        m.consume_bytes(b'{"ok": true')
        m.forced_bytes()

    def lark() -> None:
        grammar = r"""
            start: query (SEP query)*
            query: "SELECT" NAME (","  NAME)* " FROM" NAME
            NAME: /[a-z_][a-z0-9_]*/
            SEP: "<sep>"
            %import common.WS
            %ignore WS
        """
        compiled = state["compiler"].lark(grammar)
        state["lark"] = compiled
        _drive(compiled, b"SELECT name, age FROM t")

    def regex() -> None:
        compiled = state["compiler"].regex(r"[0-9]{1,4}(\.[0-9]+)?")
        state["regex"] = compiled
        _drive(compiled, b"12.5")
        checker = completion_checker(compiled)  # the token-level DFA's exact check
        checker.check([ord("1"), MASK, MASK_OPT])

    def batched() -> None:
        vocab = state["vocab"]
        ms = [state["schema"].matcher(), None, state["lark"].matcher()]
        mask = allocate_bitmask(len(ms), vocab.size)
        fill_next_token_bitmasks(ms, mask, num_threads=1)
        logits = np.zeros((len(ms), vocab.size), np.float32)
        apply_token_bitmask_inplace(logits, mask, vocab.size)

    def completion() -> None:
        vocab = state["vocab"]
        ids = {vocab.token_bytes(t): t for t in range(vocab.tokenizer_size)}
        schema = state["compiler"].json_schema(state["schema_spec"], final_check=False)
        cases = (
            (schema, [ids[b'{"'], MASK, MASK, MASK, MASK, ids[b'":'], MASK, MASK_OPT]),
            (state["lark"], [ids[b"SELECT"], MASK, MASK, ids[b" FROM"], MASK, ids[b"<sep>"], MASK]),
        )
        for compiled, slots in cases:
            checker = CompletionChecker(compiled)
            checker.check(slots)
            checker.allowed_at(slots, 1)

    steps: list[Callable[[], None]] = [
        vocabulary,
        json_schema,
        masks,
        lark,
        regex,
        batched,
        completion,
    ]
    for i, (name, step) in enumerate(zip(STEPS, steps, strict=True)):
        if progress is not None:
            progress(i, len(STEPS), name)
        t = time.perf_counter()
        step()
        done.append(WarmupStep(name, time.perf_counter() - t))
    if progress is not None:
        progress(len(STEPS), len(STEPS), "")
    return done


__all__ = ["STEPS", "WarmupStep", "warmup"]
