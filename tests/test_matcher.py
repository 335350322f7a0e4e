"""Matcher API: consume/reject, rollback, fork, EOS, special and padding ids, bitmask checks,
forced tokens, batches, threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import grammar_text
from support.masks import allowed
from support.tokenizers import load_tokenizer, load_vocab

import corral
from corral import (
    Grammar,
    GrammarError,
    MatcherStateError,
    TokenRejectedError,
    Vocabulary,
    allocate_bitmask,
    bitmask_to_bool,
)
from corral.errors import CacheWarning


@pytest.fixture(scope="module")
def gpt2():  # type: ignore[no-untyped-def]
    return load_tokenizer("gpt2"), load_vocab("gpt2")


@pytest.fixture(scope="module")
def json_gpt2(gpt2):  # type: ignore[no-untyped-def]
    return corral.compile(grammar_text("json"), gpt2[1])


def test_consume_and_reject_leave_state_intact(gpt2, json_gpt2) -> None:  # type: ignore[no-untyped-def]
    tok, v = gpt2
    m = json_gpt2.matcher()
    ids = tok.encode('{"a": [1, 2]}')
    m.consume_tokens(ids[:3])
    before = allowed(m)
    bad = tok.encode("}")[0] if not before[tok.encode("}")[0]] else tok.encode("]")[0]
    assert not before[bad]
    with pytest.raises(TokenRejectedError) as e:
        m.consume(bad)
    assert e.value.token_id == bad
    assert np.array_equal(allowed(m), before)
    assert m.num_tokens == 3
    assert not m.try_consume(bad)
    with pytest.raises(TokenRejectedError):
        m.consume(v.size + 5)


def test_rollback_restores_exactly(gpt2, json_gpt2) -> None:  # type: ignore[no-untyped-def]
    tok, _ = gpt2
    ids = tok.encode('{"key": ["x", 12.5, {"y": null}]}')
    m = json_gpt2.matcher()
    masks = [allowed(m)]
    for t in ids:
        m.consume(t)
        masks.append(allowed(m))
    assert m.is_accepting()
    for back in range(len(ids), 0, -1):
        m.rollback(1)
        assert np.array_equal(allowed(m), masks[back - 1])
    with pytest.raises(MatcherStateError):
        m.rollback(1)
    m.consume_tokens(ids)
    m.reset()
    assert m.num_tokens == 0 and np.array_equal(allowed(m), masks[0])


def test_fork_is_independent(gpt2, json_gpt2) -> None:  # type: ignore[no-untyped-def]
    tok, _ = gpt2
    m = json_gpt2.matcher()
    m.consume_tokens(tok.encode('{"a": '))
    f = m.fork()
    m.consume_tokens(tok.encode("1}"))
    f.consume_tokens(tok.encode('"s"}'))
    assert m.is_accepting() and f.is_accepting()
    f.rollback(len(tok.encode('"s"}')))
    m.rollback(len(tok.encode("1}")))
    assert np.array_equal(allowed(f), allowed(m))
    m.consume_tokens(tok.encode("1}"))
    assert m.num_tokens == len(tok.encode('{"a": ')) + len(tok.encode("1}"))


def test_eos_exactly_when_complete(gpt2, json_gpt2) -> None:  # type: ignore[no-untyped-def]
    tok, v = gpt2
    eos = v.eos_token_ids[0]
    m = json_gpt2.matcher()
    assert not allowed(m)[eos]
    with pytest.raises(TokenRejectedError, match="EOS"):
        m.consume(eos)
    m.consume_tokens(tok.encode("[1"))
    assert not m.is_accepting() and not allowed(m)[eos]
    m.consume_tokens(tok.encode("]"))
    assert m.is_accepting() and allowed(m)[eos]
    m.consume(eos)
    assert m.is_finished()
    a = allowed(m)
    assert a[eos] and a.sum() == 1  # after EOS only EOS
    with pytest.raises(TokenRejectedError, match="after EOS"):
        m.consume(tok.encode(" ")[0])
    m.consume(eos)  # padding a finished row with EOS is fine
    m.rollback(2)
    assert not m.is_finished() and m.is_accepting()


def test_padding_ids_never_allowed(gpt2) -> None:  # type: ignore[no-untyped-def]
    tok, _ = gpt2
    v = Vocabulary.from_hf(tok, vocab_size=len(tok) + 47)
    c = corral.compile(grammar_text("json"), v)
    m = c.matcher()
    for t in tok.encode('{"a": "text with spaces", "b": [true]}'):
        a = allowed(m)
        assert a.shape[0] == len(tok) + 47 and not a[len(tok) :].any()
        m.consume(t)
    with pytest.raises(TokenRejectedError):
        m.consume(len(tok) + 3)


def test_special_tokens_only_when_named() -> None:
    tok, v = (
        load_tokenizer("llama3"),
        Vocabulary.from_hf(load_tokenizer("llama3"), eos_token_ids=[128001]),
    )
    eot = tok.convert_tokens_to_ids("<|eot_id|>")
    c = corral.compile('start: "hi" <|eot_id|> "!"', v)
    m = c.matcher()
    m.consume(tok.encode("hi", add_special_tokens=False)[0])
    a = allowed(m)
    assert a[eot] and a.sum() == 1  # only the special token, not its spelling
    m.consume(eot)
    m.consume(tok.encode("!", add_special_tokens=False)[0])
    assert m.is_accepting()
    # a grammar that does not name it never allows it, even inside free text
    m2 = corral.compile(grammar_text("json"), v).matcher()
    m2.consume_tokens(tok.encode('{"a": "', add_special_tokens=False))
    a2 = allowed(m2)
    specials = np.flatnonzero(v.kinds == 1)
    assert a2.sum() > 100000 and not a2[specials].any()
    # by id
    m3 = corral.compile("start: <[128009]>", v).matcher()
    assert allowed(m3)[eot]
    with pytest.raises(GrammarError, match="special token"):
        corral.compile("start: <|no_such_token|>", v)


def test_bitmask_checks(gpt2, json_gpt2) -> None:  # type: ignore[no-untyped-def]
    _, v = gpt2
    m = json_gpt2.matcher()
    words = (v.size + 31) // 32
    with pytest.raises(ValueError, match="int32"):
        m.fill_bitmask(np.zeros((1, words), np.int64))
    with pytest.raises(ValueError, match=rf"= \[1, {words}\], got int32 \[1, {words + 1}\]"):
        m.fill_bitmask(np.zeros((1, words + 1), np.int32))
    with pytest.raises(ValueError, match="C-contiguous"):
        m.fill_bitmask(np.zeros((words, 2), np.int32).T)
    with pytest.raises(ValueError, match="row 3"):
        m.fill_bitmask(np.zeros((2, words), np.int32), row=3)
    with pytest.raises(TypeError, match="NumPy array or a torch tensor"):
        m.fill_bitmask([[0] * words])  # a corral.ArgumentTypeError
    bm = allocate_bitmask(3, v.size)
    assert bm.shape == (3, words) and bm.dtype == np.int32 and (bm == -1).all()
    m.fill_bitmask(bm, row=1)
    assert (bm[0] == -1).all() and (bm[2] == -1).all()
    assert bitmask_to_bool(bm, v.size)[1].sum() < 3000


def test_torch_bitmask_and_logits(gpt2, json_gpt2) -> None:  # type: ignore[no-untyped-def]
    torch = pytest.importorskip("torch")
    _, v = gpt2
    m = json_gpt2.matcher()
    bm = allocate_bitmask(2, v.size, backend="torch")
    assert bm.dtype == torch.int32
    m.fill_bitmask(bm, row=0)
    with pytest.raises(ValueError, match=r"torch\.int32"):
        m.fill_bitmask(torch.zeros((1, bm.shape[1]), dtype=torch.int64))
    logits = torch.zeros((2, v.size + 10))
    corral.apply_token_bitmask_inplace(logits, bm)
    ok = torch.isfinite(logits[0])
    assert torch.equal(ok[: v.size], torch.from_numpy(bitmask_to_bool(bm.numpy(), v.size)[0]))
    assert not ok[v.size :].any()  # logits wider than the vocabulary are masked
    assert torch.isfinite(logits[1, : v.size]).all()
    arr = np.zeros((1, v.size), np.float32)
    corral.apply_token_bitmask_inplace(arr, bm.numpy()[:1])
    assert np.isfinite(arr[0]).sum() == int(ok.sum())


def test_forced_tokens(gpt2) -> None:  # type: ignore[no-untyped-def]
    tok, v = gpt2
    c = corral.compile(
        'start: "{\\"name\\": " ESCAPED_STRING ", \\"age\\": " INT "}"\n'
        "%import common.ESCAPED_STRING\n%import common.INT\n",
        v,
    )
    m = c.matcher()
    assert m.forced_bytes() == b'{"name": "'
    forced = m.forced_tokens()
    assert forced and v.decode(forced) in (b'{"name": ', b'{"name": "', b'{"name":')
    m.consume_tokens(forced)
    rest = m.forced_bytes()
    assert v.decode(forced) + rest == b'{"name": "'
    m.consume_tokens(tok.encode(rest.decode() + "Bob"))
    assert m.forced_bytes() == b""  # inside the string: free choice
    m.consume_tokens(tok.encode('"'))
    assert m.forced_bytes() == b', "age": '
    assert m.is_accepting() is False
    # cut by the tokenizer: the tokens it would produce for the forced text
    canon = m.forced_tokens(lambda b: tok.encode(b.decode()))
    assert canon and canon == tok.encode(', "age": ')[: len(canon)]
    # a tokenizer whose cut does not spell the forced bytes is ignored
    assert m.forced_tokens(lambda b: tok.encode("nonsense")) == m.forced_tokens()
    for t in m.forced_tokens():
        m.consume(t)


def test_batch_fill_matches_single_rows(gpt2, json_gpt2) -> None:  # type: ignore[no-untyped-def]
    tok, v = gpt2
    arith = corral.compile(grammar_text("arithmetic"), v)
    ms = [json_gpt2.matcher(), arith.matcher(), None, json_gpt2.matcher()]
    ms[0].consume_tokens(tok.encode('{"a": '))
    ms[1].consume_tokens(tok.encode("(1 +"))
    bm = allocate_bitmask(4, v.size)
    bm[:] = 0
    corral.fill_next_token_bitmasks(ms, bm, num_threads=2)
    for i, m in enumerate(ms):
        if m is None:
            assert (bm[i] == -1).all()
        else:
            assert np.array_equal(bitmask_to_bool(bm, v.size)[i], allowed(m))
    with pytest.raises(ValueError):
        corral.fill_next_token_bitmasks(ms, allocate_bitmask(2, v.size))


def test_shared_compiled_grammar_across_threads(gpt2) -> None:  # type: ignore[no-untyped-def]
    tok, v = gpt2
    c = corral.compile(grammar_text("clike"), v, cache=False, precompute=False)  # lazy caches
    text = "int x = 3; while (x > 0) { x -= 1; } // bye\n"
    ids = tok.encode(text)
    ref = []
    m = c.matcher()
    for t in ids:
        ref.append(allowed(m))
        m.consume(t)
    c2 = corral.compile(grammar_text("clike"), v, cache=False, precompute=False)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            mm = c2.matcher()
            for i, t in enumerate(ids):
                assert np.array_equal(allowed(mm), ref[i])
                mm.consume(t)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_multibyte_characters_split_across_tokens() -> None:
    tok, v = load_tokenizer("llama2"), load_vocab("llama2")
    c = corral.compile(grammar_text("json"), v)
    m = c.matcher()
    assert m.consume_bytes(b'{"k": "')
    for b in "中🙂".encode():  # byte-fallback tokens, one byte each
        t = tok.convert_tokens_to_ids(f"<0x{b:02X}>")
        assert allowed(m)[t]
        m.consume(t)
    # a lone continuation byte is never allowed where a character must start
    assert not allowed(m)[tok.convert_tokens_to_ids("<0x80>")]
    m.consume(tok.convert_tokens_to_ids('"'))
    m.consume(tok.convert_tokens_to_ids("}"))
    assert m.is_accepting()


def test_consume_bytes_and_validate(gpt2, json_gpt2) -> None:  # type: ignore[no-untyped-def]
    tok, _ = gpt2
    m = json_gpt2.matcher()
    assert m.consume_bytes(b'{"a":')
    assert not m.consume_bytes(b"}")
    ids = tok.encode(" [1, 2]} trailing")
    n = m.validate_tokens(ids)
    assert tok.decode(ids[:n]) == " [1, 2]}"
    assert m.num_tokens == 0


def test_compile_rejects_bad_arguments(gpt2) -> None:  # type: ignore[no-untyped-def]
    _, v = gpt2
    with pytest.raises(TypeError, match="Vocabulary"):
        corral.compile('start: "a"', object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cannot compile"):
        corral.compile(42, v)  # type: ignore[arg-type]
    g = Grammar.from_regex(r"\d+")
    assert corral.compile(g, v) is corral.compile(g, v)  # cached
    assert corral.compile(g, v, cache=False) is not corral.compile(g, v)


def test_disk_cache_roundtrip_and_rejects_foreign_files(gpt2, tmp_path) -> None:  # type: ignore[no-untyped-def]
    vocab = gpt2[1]
    text = grammar_text("json")
    first = corral.compile(text, vocab, cache=False, cache_dir=tmp_path)
    files = list(tmp_path.glob("*.npz"))
    assert [f.name for f in files] == [f"{first.cache_key}.npz"]
    second = corral.compile(text, vocab, cache=False, cache_dir=tmp_path, precompute=False)
    assert second.cache_stats()["cached_states"] == first.cache_stats()["lexer_states"]
    doc = b'{"a": [1, 2.5e3, "x\\u00e9", true], "b": {}}'
    m1, m2 = first.matcher(), second.matcher()
    m1.consume_bytes(doc[:9])
    m2.consume_bytes(doc[:9])
    assert np.array_equal(allowed(m1), allowed(m2))
    # a file written for another grammar is ignored (and nothing changes)
    other = corral.compile('start: "a"+', vocab, cache=False, precompute=False)
    with pytest.warns(CacheWarning, match="another grammar"):
        assert not other.load_caches(files[0])
    assert other.cache_stats()["cached_states"] == 0
    # a damaged file is ignored and rewritten
    files[0].write_bytes(b"not a zip file")
    with pytest.warns(CacheWarning, match="damaged"):
        third = corral.compile(text, vocab, cache=False, cache_dir=tmp_path)
    assert third.cache_stats()["cached_states"] == third.cache_stats()["lexer_states"]
    assert corral.compile(text, vocab, cache=False, precompute=False).load_caches(files[0])
