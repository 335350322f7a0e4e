"""Soundness and completeness of masks on real grammars and real tokenizers.

* Completeness: every word of a grammar (hand-written examples and random words), cut into
  tokens canonically (the tokenizer's own encoding) or not (random cuts into vocabulary
  tokens, multi-byte characters split), is accepted token by token; each next token is in
  the mask; the end is accepting and allows EOS.
* Soundness: random walks that pick allowed tokens never reach a dead end (the mask always
  allows something), and every complete output is accepted by Lark's own Earley parser.
* Invalid examples are rejected.
"""

from __future__ import annotations

import json
import random
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import grammar_text
from support.tokenizers import ALL, load_tokenizer, load_vocab
from support.words import WordGenerator, guided_walk, lark_accepts, mask_of, random_cut

import corral
from corral import Grammar

EXAMPLES = json.loads((Path(__file__).parent / "data" / "grammars" / "examples.json").read_text())
GRAMMARS = list(EXAMPLES)


def accept_tokens(c: corral.CompiledGrammar, ids: list[int], *, check_masks: bool = True) -> None:
    m = c.matcher()
    for i, t in enumerate(ids):
        if check_masks:
            assert mask_of(m)[t], f"token {i} ({c.vocab.token_bytes(t)!r}) missing from the mask"
        m.consume(t)
    assert m.is_accepting(), "complete word not accepting"
    eos = c.vocab.eos_token_ids
    if eos and check_masks:
        assert mask_of(m)[eos[0]]


def encode(tok, vocab: corral.Vocabulary, text: str) -> list[int] | None:  # type: ignore[no-untyped-def]
    """The tokenizer's canonical encoding, if its tokens spell exactly ``text``."""
    ids = tok.encode(text, add_special_tokens=False)
    if vocab.decode(ids) == text.encode():
        return ids
    if vocab.decode(ids) == b" " + text.encode() and ids:  # SentencePiece dummy prefix
        first = vocab.token_bytes(ids[0])
        if first == b" ":
            return ids[1:]
    return None


@pytest.mark.parametrize("tokenizer", ALL)
@pytest.mark.parametrize("name", GRAMMARS)
def test_valid_examples_accepted(name: str, tokenizer: str) -> None:
    tok, v = load_tokenizer(tokenizer), load_vocab(tokenizer)
    c = corral.compile(grammar_text(name), v)
    rng = random.Random(0)
    for text in EXAMPLES[name]["valid"]:
        assert lark_accepts(grammar_text(name), text), text
        ids = encode(tok, v, text)
        if ids is not None:
            accept_tokens(c, ids)
        cut = random_cut(v, text.encode(), rng)
        assert cut is not None
        accept_tokens(c, cut)


@pytest.mark.parametrize("name", GRAMMARS)
def test_invalid_examples_rejected(name: str) -> None:
    v = load_vocab("llama3")
    c = corral.compile(grammar_text(name), v)
    rng = random.Random(0)
    for text in EXAMPLES[name]["invalid"]:
        assert not lark_accepts(grammar_text(name), text), text
        for _ in range(3):
            cut = random_cut(v, text.encode(), rng)
            assert cut is not None
            m = c.matcher()
            ok = all(m.try_consume(t) for t in cut)
            assert not (ok and m.is_accepting()), (name, text)


@pytest.mark.parametrize("tokenizer", ["gpt2", "llama3", "llama2", "gemma3", "qwen2"])
@pytest.mark.parametrize("name", GRAMMARS)
def test_random_words_accepted(name: str, tokenizer: str) -> None:
    tok, v = load_tokenizer(tokenizer), load_vocab(tokenizer)
    text = grammar_text(name)
    c = corral.compile(text, v)
    gen = WordGenerator(
        Grammar.from_lark(text), seed=zlib.crc32(f"{name}/{tokenizer}".encode()) % 1000
    )
    rng = random.Random(1)
    for _ in range(12):
        word = gen.word()
        s = word.decode("utf-8")
        assert lark_accepts(text, s), s
        ids = encode(tok, v, s)
        if ids is not None:
            accept_tokens(c, ids, check_masks=False)
        cut = random_cut(v, word, rng)
        if cut is not None:
            accept_tokens(c, cut)


@pytest.mark.parametrize("tokenizer", ["gpt2", "llama3", "llama2", "deepseek-coder", "phi3"])
@pytest.mark.parametrize("name", GRAMMARS)
def test_random_walks_are_sound(name: str, tokenizer: str) -> None:
    """Walks that mostly follow a random word of the grammar (cut into random tokens) and
    often step aside to a random allowed token: never a dead end, and every complete
    output is accepted by Lark."""
    v = load_vocab(tokenizer)
    text = grammar_text(name)
    c = corral.compile(text, v)
    gen = WordGenerator(Grammar.from_lark(text), seed=3)
    rng = np.random.default_rng(7)
    prng = random.Random(7)
    eos = v.eos_token_ids[0]
    lengths = np.array([len(v.token_bytes(i)) for i in range(v.size)], dtype=np.float64)
    finished = deviated = 0
    for _walk in range(24):
        target = random_cut(v, gen.word(), prng) or []
        m = c.matcher()
        consumed, left = guided_walk(
            m, target, rng, lengths, eos, follow=0.9, extra_steps=30, stop_from=len(target) + 1
        )
        deviated += left
        if m.is_accepting():
            finished += 1
            word = v.decode(consumed).decode("utf-8")
            assert lark_accepts(text, word), (name, word)
    assert finished >= 4 and deviated >= 4
