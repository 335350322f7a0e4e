"""Token budgets of free text (``AnyText(max_tokens=k)``, a reasoning budget): at most ``k``
tokens hold the text's bytes; after them only the rest of the end string (or the end of the
output) may follow, masks and ``consume`` alike, with no dead end."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from support.tokenizers import load_tokenizer

import corral
from corral.grammar import structural as st


@pytest.fixture(scope="module", params=["llama3", "gemma3"])
def vocab(request: pytest.FixtureRequest) -> Any:
    return corral.Vocabulary.from_hf(load_tokenizer(request.param))


def _tokens_in_text(vocab: Any, ids: list[int], begin: bytes, end: bytes) -> Any:
    """``(tokens holding a byte of the free text, where the text ends, where those tokens
    end, the output's bytes)`` for the first ``begin ... end`` region of the output."""
    data = b"".join(vocab.token_bytes(i) if vocab.kind(i) == "normal" else b"\0" for i in ids)
    a = data.index(begin) + len(begin)
    b = data.index(end, a)  # the text is data[a:b], the end string data[b:b+len(end)]
    pos, spans = 0, []
    for i in ids:
        n = len(vocab.token_bytes(i)) if vocab.kind(i) == "normal" else 1
        spans.append((pos, pos + n))
        pos += n
    overlapping = [(s, e) for s, e in spans if max(s, a) < min(e, b)]
    return len(overlapping), b, [e for _, e in overlapping], data


def _mid_character(data: bytes, end: int) -> bool:
    try:
        data[:end].decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= end - 3 and e.reason == "unexpected end of data"
    return False


@pytest.mark.parametrize("budget", [0, 1, 4])
def test_walks_keep_the_budget_and_never_dead_end(vocab: Any, budget: int) -> None:
    spec = st.Tag("<t>", st.AnyText(max_tokens=budget), "</t>") + st.Const("ok")
    cg = corral.compile(spec, vocab)
    rng = random.Random(budget)
    eos = {i for i in range(len(vocab)) if vocab.kind(i) == "eos"}
    for _ in range(25):
        m = corral.Matcher(cg)
        ids: list[int] = []
        for _step in range(40):
            allowed = [t for t in m.allowed_token_ids().tolist() if t not in eos]
            if not allowed:
                assert m.is_accepting(), vocab.decode(ids)
                break
            # prefer short tokens, which make long texts and reach the budget
            short = [t for t in allowed if len(vocab.token_bytes(t)) <= 2]
            t = rng.choice(short if short and rng.random() < 0.7 else allowed)
            m.consume(t)
            ids.append(t)
        text = vocab.decode(ids)
        if b"</t>" in text:
            n, _, token_ends, data = _tokens_in_text(vocab, ids, b"<t>", b"</t>")
            # a budget that runs out inside a character lets one more token finish it
            cut = n > budget and _mid_character(data, token_ends[budget - 1])
            assert n <= budget + cut, text


def test_a_spent_budget_allows_only_the_end_string_and_consume_agrees() -> None:
    tok = load_tokenizer("llama3")
    vocab = corral.Vocabulary.from_hf(tok)
    cg = corral.compile(st.Tag("<think>", st.AnyText(max_tokens=3), "</think>") + "Answer", vocab)
    m = corral.Matcher(cg)
    for t in tok.encode("<think>a b c", add_special_tokens=False):
        m.consume(t)
    allowed = {vocab.token_bytes(t) for t in m.allowed_token_ids().tolist()}
    assert allowed and all(b"</think>".startswith(a) or a.startswith(b"</think>") for a in allowed)
    d = tok.encode(" d", add_special_tokens=False)[0]
    with pytest.raises(corral.TokenRejectedError, match="budget"):
        m.consume(d)
    for piece in ("</", "think", ">"):
        m.consume(tok.encode(piece, add_special_tokens=False)[0])
    assert {vocab.token_bytes(t) for t in m.allowed_token_ids().tolist()} >= {b"Answer"}


def test_a_partial_end_string_may_be_finished_or_written_whole() -> None:
    tok = load_tokenizer("llama3")
    vocab = corral.Vocabulary.from_hf(tok)
    cg = corral.compile(st.Tag("<think>", st.AnyText(max_tokens=2), "</think>"), vocab)
    m = corral.Matcher(cg)
    m.consume_tokens(tok.encode("<think>a</", add_special_tokens=False))
    allowed = {vocab.token_bytes(t) for t in m.allowed_token_ids().tolist()}
    assert b"think" in allowed and b"</" in allowed  # finish "</" or write "</think>" anew
    assert b"a" not in allowed and b" " not in allowed


def test_text_ending_the_output_ends_when_spent() -> None:
    tok = load_tokenizer("llama3")
    vocab = corral.Vocabulary.from_hf(tok)
    cg = corral.compile("Reply: " + st.AnyText(max_tokens=2), vocab)
    m = corral.Matcher(cg)
    m.consume_tokens(tok.encode("Reply: hello there", add_special_tokens=False))
    assert set(m.allowed_token_ids().tolist()) == set(vocab.eos_token_ids)
    assert m.is_accepting()


def test_rollback_and_fork_keep_the_count() -> None:
    tok = load_tokenizer("llama3")
    vocab = corral.Vocabulary.from_hf(tok)
    cg = corral.compile(st.Tag("<think>", st.AnyText(max_tokens=3), "</think>"), vocab)
    m = corral.Matcher(cg)
    ids = tok.encode("<think>a b c", add_special_tokens=False)
    m.consume_tokens(ids)
    spent = m.allowed_token_ids()
    m.rollback(1)
    free = m.allowed_token_ids()
    assert free.size > 10 * spent.size
    f = m.fork()
    f.consume(ids[-1])
    assert np.array_equal(f.allowed_token_ids(), spent)
    assert np.array_equal(m.allowed_token_ids(), free)


def test_bytes_do_not_count_tokens() -> None:
    tok = load_tokenizer("llama3")
    vocab = corral.Vocabulary.from_hf(tok)
    cg = corral.compile(st.Tag("<think>", st.AnyText(max_tokens=1), "</think>"), vocab)
    m = corral.Matcher(cg)
    assert m.consume_bytes(b"<think>a long text given as bytes ")
    assert m.allowed_token_ids().size > 1000


def test_the_budget_is_part_of_the_grammar_identity() -> None:
    a = corral.Grammar.from_lark('start: "x"')
    from corral.grammar.frontends import from_structural_tag

    g1 = from_structural_tag(st.Tag("<t>", st.AnyText(max_tokens=3), "</t>"))
    g2 = from_structural_tag(st.Tag("<t>", st.AnyText(max_tokens=4), "</t>"))
    g3 = from_structural_tag(st.Tag("<t>", st.AnyText(), "</t>"))
    assert len({g1.fingerprint, g2.fingerprint, g3.fingerprint, a.fingerprint}) == 4
