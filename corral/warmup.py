"""Driving every Numba kernel once (``corral warmup``, and the package build).

Each kernel's machine code is compiled by Numba the first time it runs with some argument
types, unless a cache has it (see :mod:`corral.jit`): Numba's on-disk cache (each kernel
module's ``__pycache__``, or ``NUMBA_CACHE_DIR``) or the prebuilt kernels a built package
carries. :func:`warmup` drives every kernel, with the argument types real use gives it,
through the public API on a small built-in vocabulary and a few constraints. Building the
package runs it for a generic CPU to make the prebuilt kernels (:func:`corral.jit.prebuild`),
so it is also the list of what a fresh install has ready. It needs no model, tokenizer or
network, and is safe to run again.

``python -m corral warmup`` (or ``corral warmup``) runs it with a progress bar. With the
prebuilt kernels in place it only loads them (seconds); an install without them (built with
``CORRAL_NO_PREBUILD=1``, or with another Numba than the one it runs with) compiles
everything once (minutes), e.g. in a Dockerfile after ``pip install``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .automata import CompiledGrammar, Vocabulary


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
    punctuation runs, UTF-8 characters and a UTF-8 prefix, an empty token, an EOS and a
    control token, and padding ids (a logits width past the tokens)."""
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


State = dict[str, Any]
"""What the steps hand on to each other: the vocabulary, its token ids by their bytes, the
compiler, compiled grammars."""


def _step_vocabulary(state: State) -> None:
    vocab = state["vocab"] = _vocabulary()
    _ = vocab.trie
    state["ids"] = {vocab.token_bytes(t): t for t in range(vocab.tokenizer_size)}


def _step_json_schema(state: State) -> None:
    from .automata.compiler import Compiler

    state["compiler"] = Compiler(state["vocab"])
    # final_check=False: the completion checks below need it, and the check is Python
    state["schema"] = state["compiler"].json_schema(
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 20},
                "code": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                "age": {"type": "integer", "minimum": 0},
                "score": {"type": "number"},
                "tags": {"type": "array", "items": {"enum": ["a", "b", "é"]}},
                "ok": {"type": "boolean"},
            },
            "required": ["name"],
        },
        final_check=False,
    )


def _step_masks(state: State) -> None:
    _drive(state["schema"], b'{"name": "\xc3\xa9 x", "age": 12, "score": 3.5e-2, "tags": ["a"]}')
    if not state["schema"].matcher().consume_bytes(b'{"name": "a", "ok": true'):
        raise RuntimeError("warmup: the JSON Schema rejected its text")


def _step_lark(state: State) -> None:
    grammar = r"""
        start: query (SEP query)*
        query: "SELECT" NAME (","  NAME)* " FROM" NAME
        NAME: /[a-z_][a-z0-9_]*/
        SEP: "<sep>"
        %import common.WS
        %ignore WS
    """
    state["lark"] = state["compiler"].lark(grammar)
    _drive(state["lark"], b"SELECT name, age FROM t")
    # the walk cache's table grows with a kernel (automata/walk_cache.py); this small
    # vocabulary's walks are too short to be kept, so grow one here
    state["lark"].walk_cache().grow_table()


def _step_sparse(state: State) -> None:
    from .grammar.entities import EntitySet

    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "x-corral-entities": "cities"},
            "quote": {"type": "string", "x-corral-span": True, "minLength": 2},
        },
        "required": ["city", "quote"],
    }
    # final_check=False: the completion checks below take it (infill with source=)
    state["sparse"] = state["compiler"].compile(
        schema,
        source="Lena moved to Wien.",
        entities={"cities": EntitySet(["Wien", "Graz", "São Paulo"])},
        final_check=False,
    )
    _drive(state["sparse"], b'{"city": "Wien", "quote": "moved to"}')


def _step_regex(state: State) -> None:
    from .automata.completion import MASK, MASK_OPT, completion_checker
    from .grammar.regex.dfa import warm_kernels

    compiled = state["compiler"].regex(r"[0-9]{1,4}(\.[0-9]+)?")
    _drive(compiled, b"12.5")
    warm_kernels()  # large patterns' determinisation kernels (small ones take Python's)
    completion_checker(compiled).check([ord("1"), MASK, MASK_OPT])  # the token-level DFA
    state["regex"] = compiled


def _step_monitor(state: State) -> None:
    from .automata import allocate_bitmask
    from .monitors.matcher import MonitoredMatcher
    from .monitors.monitor import Monitor

    vocab = state["vocab"]
    monitor = Monitor(trigger=r"\.", allowed=lambda ctx: ["path", "getcwd", "sep"])
    m = MonitoredMatcher(vocab, [monitor], compiler=state["compiler"])
    mask = allocate_bitmask(1, vocab.size)
    for b in b"os.path(":
        m.fill_bitmask(mask, 0)
        m.consume(b)  # the single-byte tokens are ids 0 to 255
    m.fill_bitmask(mask, 0)


def _step_batched(state: State) -> None:
    import numpy as np

    from .automata import allocate_bitmask, apply_token_bitmask_inplace, fill_next_token_bitmasks

    vocab = state["vocab"]
    ms = [state["schema"].matcher(), None, state["lark"].matcher()]
    mask = allocate_bitmask(len(ms), vocab.size)
    fill_next_token_bitmasks(ms, mask, num_threads=1)
    logits = np.zeros((len(ms), vocab.size), np.float32)
    apply_token_bitmask_inplace(logits, mask, vocab.size)


def _step_completion(state: State) -> None:
    from .automata.completion import MASK, MASK_OPT, CompletionChecker

    ids = state["ids"]
    gap4 = [MASK] * 4
    query = [ids[b"SELECT"], MASK, MASK, ids[b" FROM"], MASK]
    city = [ids[b'{"'], *gap4, ids[b'":'], *b' "']
    quote = [*b'", "quote', ids[b'":'], *b' "']
    cases = (  # each completable: {"name":""}, SELECT a FROM t<sep>SELECTb FROMc, and
        # {"city": "Wien", "quote": "mo"}; ids 0 to 255 are the single bytes (the grammar's
        # "<sep>" is text, not the special token <sep>)
        (state["schema"], [ids[b'{"'], *gap4, ids[b'":'], MASK, MASK, MASK, MASK_OPT]),
        (state["lark"], [*query, *b"<sep>", ids[b"SELECT"], MASK, ids[b" FROM"], MASK]),
        # sparse lexer rows (a span, an entity set): their own compiled form of each kernel
        (state["sparse"], [*city, *gap4, *quote, *gap4, MASK_OPT]),
    )
    for compiled, slots in cases:
        checker = CompletionChecker(compiled)
        if not checker.check(slots):
            raise RuntimeError(f"warmup: slots {slots} cannot be completed")
        checker.allowed_at(slots, 1)
        checker.allowed_at(slots, 3)  # past unknown slots


def _step_healing(state: State) -> None:
    from .automata import allocate_bitmask
    from .sampler.healing import HealingView, heal_prompt

    vocab = state["vocab"]
    mask = allocate_bitmask(1, vocab.size)
    # the prompt "x[" ends in a token that '[{' extends: '[' is healed (prompt text)
    ids, healed = heal_prompt(vocab, [ord("x"), ord("[")])
    if ids != [ord("x")] or healed != b"[":
        raise RuntimeError(f"warmup: the prompt was not healed ({ids}, {healed!r})")
    word = state["ids"][b"[{"]
    for compiled in (state["schema"], state["sparse"]):  # a dense and a sparse lexer
        view = HealingView(compiled.matcher(), healed)
        view.fill_bitmask(mask, 0)
        view.consume(word)  # spells the healed '[', then the output's '{'
        if not view.done:
            raise RuntimeError("warmup: healing did not end")
        view.commit()


def _step_dingo(state: State) -> None:
    import numpy as np

    from .automata.token_dfa import TokenDFA
    from .sampler.dingo import dingo_argmax, dingo_sample

    tdfa = TokenDFA.from_compiled(state["regex"])
    if tdfa is None:
        raise RuntimeError("warmup: the regular expression has no token-level DFA")
    logp = np.zeros((3, state["vocab"].size), np.float32)
    dingo_argmax(logp, tdfa, last=True)
    dingo_sample(logp, tdfa, last=True, rng=np.random.default_rng(0))


_STEPS: tuple[tuple[str, Callable[[State], None]], ...] = (
    ("vocabulary and token trie", _step_vocabulary),
    ("JSON Schema", _step_json_schema),
    ("masks and consumes", _step_masks),
    ("Lark grammar", _step_lark),
    ("entity set and span (sparse lexer rows)", _step_sparse),
    ("regular expression", _step_regex),
    ("monitor (a callback's names)", _step_monitor),
    ("batched masks and logits", _step_batched),
    ("completion checks (diffusion)", _step_completion),
    ("token healing", _step_healing),
    ("DINGO blocks (diffusion)", _step_dingo),
)

#: Each step's name, in order (see :func:`warmup`).
STEPS = tuple(name for name, _ in _STEPS)


def warmup(progress: Progress | None = None) -> list[WarmupStep]:
    """Compile (or load from Numba's cache) every corral kernel; returns the steps' times.

    Steps: the vocabulary's trie; a JSON Schema compile (token caches, state signatures,
    continuation classes); masks, consumes and forced tokens on it; a Lark grammar with
    ignored whitespace and a special token; an entity set and a span constraint (the
    kernels' form for sparse lexer rows, and the product of a span with a length bound);
    a regular expression (token-level DFA); a monitor whose callback returns names (their
    trie, compiled per region); batched masks and masking float32 logits;
    completion checks of partly filled slots (diffusion). Raises ``RuntimeError`` if a
    constraint rejects its built-in text.
    """
    done: list[WarmupStep] = []
    state: State = {}
    for i, (name, step) in enumerate(_STEPS):
        if progress is not None:
            progress(i, len(_STEPS), name)
        t = time.perf_counter()
        step(state)
        done.append(WarmupStep(name, time.perf_counter() - t))
    if progress is not None:
        progress(len(_STEPS), len(_STEPS), "")
    return done


__all__ = ["STEPS", "WarmupStep", "warmup"]
