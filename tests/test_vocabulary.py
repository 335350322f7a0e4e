"""Vocabulary: exact token bytes for every real tokenizer, special/EOS/padding ids, the trie."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from support.tokenizers import ALL, load_tokenizer, load_vocab, tokenizer_path

from corral import TokenizerError, Vocabulary

TEXTS = [
    'Hello, world! {"name": "Zoë", "n": [1, 22, 333, 4444]}',
    "def f(x):\n    return x ** 2  # square\n\n\n",
    "ünïcödé, 中文字符, 日本語, 한국어, emoji 🙂🎉, math ∑∫√",
    "   leading and  double  spaces\ttabs\r\nwindows newlines",
    "<b>bold</b> &amp; <a href='x'>link</a>",
    "SELECT * FROM users WHERE id = 42;",
]
FAMILY = {
    "gpt2": "byte_level",
    "llama3": "byte_level",
    "qwen2": "byte_level",
    "deepseek-coder": "byte_level",
    "llama2": "sentencepiece",
    "phi3": "sentencepiece",
    "gemma3": "sentencepiece",
}


@pytest.mark.parametrize("name", ALL)
def test_token_bytes_spell_the_tokenizers_own_encodings(name: str) -> None:
    tok, v = load_tokenizer(name), load_vocab(name)
    assert v.family == FAMILY[name]
    checked = 0
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False)
        if any(v.kind(i) != "normal" for i in ids):
            # added tokens left out of grammar text: DeepSeek-Coder's ambiguous characters
            # ("ü" encoded from text, decoded as byte 0xFC), Gemma's HTML tags
            assert name in ("deepseek-coder", "gemma3"), (name, text)
            continue
        got = b"".join(v.token_bytes(i) for i in ids)
        want = text.encode("utf-8")
        assert got in (want, b" " + want), (name, text, got)
        checked += 1
    assert checked >= len(TEXTS) - 1


@pytest.mark.parametrize("name", ALL)
def test_token_bytes_agree_with_decode(name: str) -> None:
    tok, v = load_tokenizer(name), load_vocab(name)
    rng = random.Random(0)
    ids = [i for i in range(v.tokenizer_size) if v.kind(i) == "normal"]
    checked = 0
    for i in rng.sample(ids, 3000):
        b = v.token_bytes(i)
        try:
            text = b.decode("utf-8")
        except UnicodeDecodeError:
            continue  # a partial character: decode() would print U+FFFD
        decoded = tok.decode([i])
        ok = decoded == text or (
            v.family == "sentencepiece" and text.startswith(" ") and decoded == text[1:]
        )
        assert ok, (name, i, b, decoded)
        checked += 1
    assert checked > 1000


@pytest.mark.parametrize("name", ALL)
def test_special_and_eos(name: str) -> None:
    tok, v = load_tokenizer(name), load_vocab(name)
    assert v.eos_token_ids == (tok.eos_token_id,)
    assert v.kind(tok.eos_token_id) == "eos"
    for sid in tok.all_special_ids:
        assert v.kind(sid) in ("special", "eos")
    assert v.size == len(tok)
    kinds = v.kinds
    assert (kinds == 0).sum() > 0.9 * v.size  # almost all tokens are normal text


def test_sentencepiece_byte_fallback_and_spaces() -> None:
    v = load_vocab("llama2")
    tok = load_tokenizer("llama2")
    assert v.token_bytes(tok.convert_tokens_to_ids("<0xE4>")) == b"\xe4"
    assert v.token_bytes(tok.convert_tokens_to_ids("▁the")) == b" the"


def test_added_token_policy() -> None:
    tok = load_tokenizer("gemma3")
    v = load_vocab("gemma3")
    nl = tok.convert_tokens_to_ids("\n\n")
    bold = tok.convert_tokens_to_ids("<b>")
    assert v.kind(nl) == "normal" and v.token_bytes(nl) == b"\n\n"
    assert v.kind(bold) == "special"  # an added token that is not whitespace
    v_all = Vocabulary.from_hf(tok, added_tokens="all")
    assert v_all.kind(bold) == "normal" and v_all.token_bytes(bold) == b"<b>"
    with pytest.raises(ValueError):
        Vocabulary.from_hf(tok, added_tokens="some")


def test_deepseek_control_tokens_not_text() -> None:
    tok = load_tokenizer("deepseek-coder")
    v = load_vocab("deepseek-coder")
    assert v.kind(tok.convert_tokens_to_ids("<|EOT|>")) == "special"
    # added single characters that `decode` maps to raw bytes are ambiguous: left out
    assert v.kind(tok.convert_tokens_to_ids("õ")) in ("special", "empty")


def test_padded_model_vocabulary() -> None:
    tok = load_tokenizer("gpt2")
    v = Vocabulary.from_hf(tok, vocab_size=len(tok) + 64)
    assert v.size == len(tok) + 64
    assert v.kind(len(tok) + 3) == "padding" and v.token_bytes(len(tok) + 3) == b""


def test_model_vocabulary_smaller_than_tokenizer() -> None:
    tok = load_tokenizer("llama3")
    assert len(tok) == 128257  # <|endoftext|> added past the model's 128256 rows
    v = Vocabulary.from_hf(tok, vocab_size=128256)
    assert v.size == 128256
    with pytest.raises(TokenizerError, match="smaller"):
        Vocabulary.from_hf(tok, vocab_size=1000)


def test_eos_override_and_validation() -> None:
    tok = load_tokenizer("llama3")
    v = Vocabulary.from_hf(tok, eos_token_ids=[128001, 128009])
    assert v.eos_token_ids == (128001, 128009)
    assert v.kind(128009) == "eos"
    with pytest.raises(TokenizerError):
        Vocabulary.from_hf(tok, eos_token_ids=[10**7])


def test_hash_identifies_content() -> None:
    tok = load_tokenizer("llama2")
    a, b = Vocabulary.from_hf(tok), Vocabulary.from_hf(tok)
    assert a.hash == b.hash
    assert Vocabulary.from_hf(tok, eos_token_ids=[1]).hash != a.hash
    assert Vocabulary.from_hf(tok, vocab_size=32064).hash != a.hash


@pytest.mark.parametrize("name", ["gpt2", "llama2", "gemma3"])
def test_trie_holds_every_normal_token_once(name: str) -> None:
    v = load_vocab(name)
    trie = v.trie
    normal = np.flatnonzero(v.kinds == 0)
    assert sorted(trie.token_ids.tolist()) == normal.tolist()
    # spot-check: walking a token's bytes from the root ends at a node that lists it
    rng = random.Random(1)
    for tid in rng.sample(normal.tolist(), 300):
        node = 0
        for byte in v.token_bytes(tid):
            kids = trie.children[trie.child_start[node] : trie.child_start[node + 1]]
            match = [c for c in kids.tolist() if trie.node_byte[c] == byte]
            assert len(match) == 1
            node = match[0]
        listed = trie.token_ids[trie.tok_start[node] : trie.tok_start[node] + trie.tok_count[node]]
        assert tid in listed.tolist()
        assert trie.depth[node] == len(v.token_bytes(tid))


def _wordpiece() -> Any:
    from tokenizers import Tokenizer, decoders
    from tokenizers.models import WordPiece
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    words = {"[UNK]": 0, "hello": 1, "##lo": 2, "hel": 3, "world": 4, "!": 5, "##!": 6}
    wp = Tokenizer(WordPiece(words, unk_token="[UNK]"))
    wp.pre_tokenizer = Whitespace()
    wp.decoder = decoders.WordPiece()
    return PreTrainedTokenizerFast(tokenizer_object=wp, unk_token="[UNK]")


def test_wordpiece_tokens_spell_word_starts_with_a_space() -> None:
    v = Vocabulary.from_hf(_wordpiece(), check=False)  # no probe text fits 7 words
    assert v.family == "wordpiece"
    assert [v.token_bytes(i) for i in (1, 2, 3, 4, 5, 6)] == [
        b" hello", b"lo", b" hel", b" world", b" !", b"!",
    ]  # fmt: skip
    assert v.kind(0) == "special"


def test_unsupported_tokenizer_family_is_refused() -> None:
    from tokenizers import Tokenizer, decoders
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    wl = Tokenizer(WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
    wl.pre_tokenizer = Whitespace()
    wl.decoder = decoders.CTC()
    fast = PreTrainedTokenizerFast(tokenizer_object=wl, unk_token="[UNK]")
    with pytest.raises(TokenizerError, match="unsupported tokenizer"):
        Vocabulary.from_hf(fast)


def test_custom_vocabulary() -> None:
    v = Vocabulary([b"a", b"b", b"ab", b""], eos_token_ids=[3])
    assert v.size == 4 and v.kind(3) == "eos" and v.decode([2, 0, 3]) == b"aba"


@pytest.mark.parametrize("name", ALL)
def test_backend_spec_agrees_with_the_full_tokenizer_json(name: str) -> None:
    """What extract() reads from the backend's model and decoder objects is what the whole
    serialised tokenizer says (it no longer parses that JSON, merges and all)."""
    import json

    from corral.automata.tokenizer_bytes import _backend_spec

    tok = load_tokenizer(name)
    full = json.loads(tok.backend_tokenizer.to_str())
    spec = _backend_spec(tok)
    assert spec is not None
    assert spec["decoder"] == full["decoder"]
    assert spec["model"]["type"] == full["model"]["type"]
    assert bool(spec["model"]["byte_fallback"]) == bool(full["model"].get("byte_fallback"))


@pytest.mark.parametrize("name", ALL)
def test_whole_vocabulary_reading_matches_token_by_token(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vocabulary is read at once (one translation of the joined strings); reading each
    token on its own, the path taken when a string has a character outside the byte
    alphabet or a NUL, gives the same bytes."""
    from corral.automata import tokenizer_bytes

    tok = load_tokenizer(name)
    fast = tokenizer_bytes.extract(tok)
    monkeypatch.setattr(tokenizer_bytes, "_byte_level_all", lambda *a: None)
    monkeypatch.setattr(tokenizer_bytes, "_sentencepiece_all", lambda *a: None)
    slow = tokenizer_bytes.extract(tok)
    assert fast.token_bytes == slow.token_bytes


def test_whole_vocabulary_reading_declines_strings_it_cannot_read_at_once() -> None:
    from corral.automata.tokenizer_bytes import _byte_level_all, _sentencepiece_all

    assert _byte_level_all(["Ġa", "b"], set()) == [b" a", b"b"]
    # a space is not in the byte alphabet (it is spelled "Ġ"); a skipped id is not read
    assert _byte_level_all(["Ġa", "x y"], set()) is None
    assert _byte_level_all(["Ġa", "x y"], {1}) == [b" a", b""]
    assert _sentencepiece_all(["▁a", "ü", None], set()) == [b" a", "ü".encode(), b""]
    assert _sentencepiece_all(["▁a", "x\0y"], set()) is None


def test_an_added_token_the_byte_alphabet_cannot_spell_is_left_out_of_grammar_text() -> None:
    """An added (not special) token of a byte-level tokenizer whose text has a character
    outside the byte alphabet (here a space) has no certain byte meaning: it gets no bytes,
    so no grammar ever allows it; the other tokens keep theirs."""
    from transformers import AutoTokenizer

    from corral.automata.tokenizer_bytes import extract

    path = tokenizer_path("gpt2")
    if path is None:
        pytest.skip("the gpt2 tokenizer is not available")
    tok = AutoTokenizer.from_pretrained(str(path))
    tok.add_tokens(["hello world"])
    i = tok.convert_tokens_to_ids("hello world")
    info = extract(tok)
    assert i in info.added and i not in info.special
    assert info.token_bytes[i] == b""
    assert info.token_bytes[tok.convert_tokens_to_ids("Ġhello")] == b" hello"


def test_trie_lists_tokens_in_byte_order_equal_ones_by_id() -> None:
    """The token trie's tokens are the normal tokens sorted by their bytes, tokens with
    the same bytes by id (a stable sort in a kernel): against Python's ``sorted`` on
    random vocabularies with many repeated and prefix tokens."""
    from corral.grammar.regex.dawg import byte_order

    rng = random.Random(7)
    for _ in range(30):
        words = [bytes(rng.choice(b"ab\xc3") for _ in range(rng.randint(1, 4))) for _ in range(200)]
        v = Vocabulary([*words, b"<eos>"], eos_token_ids=[len(words)])
        want = sorted(range(len(words)), key=words.__getitem__)
        assert v.trie.token_ids.tolist() == want
        data = np.frombuffer(b"".join(words), np.uint8)
        offs = np.concatenate([[0], np.cumsum([len(w) for w in words])]).astype(np.int64)
        assert byte_order(data, offs).tolist() == want
