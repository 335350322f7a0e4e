"""Entity sets (``corral.EntitySet``, ``"x-corral-entities"``, Lark ``%declare``) and the
minimal automaton behind them and behind large enums: the automaton against the set, token
masks against a brute force over whole vocabularies, and the refusals."""

from __future__ import annotations

import json
import random
import unicodedata
from collections.abc import Iterable
from dataclasses import astuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tokenizers import load_vocab

import corral
from corral import EntitySet
from corral.errors import UnsupportedFeatureError
from corral.grammar.json_schema.load import SchemaError
from corral.grammar.regex.dawg import dawg, encoded, trie, trie_of


def _catalogue(n: int, seed: int = 0) -> list[str]:
    """``n`` real names: Unicode character names (shipped with Python), some title-cased
    and some followed by their character, so that names hold spaces, hyphens, non-ASCII
    and, through a few extra names, quotes and backslashes (JSON escapes)."""
    names = sorted(
        {unicodedata.name(chr(c), "") for c in range(0x20, 0x30000)} - {""}
    )  # fmt: skip
    rng = random.Random(seed)
    picked = rng.sample(names, n)
    out = []
    for i, name in enumerate(picked):
        if i % 3 == 1:
            name = name.title()
        elif i % 7 == 2:
            name = f"{name} {unicodedata.lookup(name)}"
        out.append(name)
    return [*out, 'QUOTATION MARK "', "REVERSE SOLIDUS \\", "TAB\there", "NEW\nLINE"]


def _right_languages(words: set[bytes]) -> int:
    """The number of states of the minimal DFA of ``words`` (brute force: its distinct
    non-empty right languages, one per state)."""
    langs = set()
    for w in words:
        for i in range(len(w) + 1):
            p = w[:i]
            langs.add(frozenset(x[i:] for x in words if x.startswith(p)))
    return len(langs)


@settings(max_examples=150, deadline=None)
@given(st.sets(st.binary(max_size=6).map(lambda b: bytes(x % 4 + 97 for x in b)), max_size=25))
def test_the_minimal_automaton_reads_exactly_the_set_with_the_fewest_states(
    words: set[bytes],
) -> None:
    d = dawg(words)
    if not words:
        assert d.is_empty()
        return
    assert d.n_states == _right_languages(words)
    probes = {w[:i] for w in words for i in range(len(w) + 1)} | {w + b"a" for w in words}
    for p in probes:
        assert d.matches(p) == (p in words), p
    # every state reaches acceptance (trimmed)
    accept = set(np.flatnonzero(d.accept).tolist())
    live = set(accept)
    changed = True
    src, dst = d.sources(), d.targets
    while changed:
        changed = False
        for s, t in zip(src.tolist(), dst.tolist(), strict=True):
            if t in live and s not in live:
                live.add(s)
                changed = True
    assert live == set(range(d.n_states))


@settings(max_examples=100, deadline=None)
@given(st.sets(st.binary(max_size=6).map(lambda b: bytes(x % 4 + 97 for x in b)), max_size=25))
def test_the_trie_reads_exactly_the_set_with_one_state_a_prefix(words: set[bytes]) -> None:
    d = trie(words)
    if not words:
        assert d.is_empty()
        return
    prefixes = {w[:i] for w in words for i in range(len(w) + 1)}
    assert d.n_states == len(prefixes)
    for p in prefixes | {w + b"a" for w in words} | {b"b" + w for w in words}:
        assert d.matches(p) == (p in words), p
    # states in preorder (children by increasing byte), whatever the order of the input
    spelled = [b""] * d.n_states
    for s in range(d.n_states):
        lo, hi = int(d.row_start[s]), int(d.row_start[s + 1])
        assert list(d.labels[lo:hi]) == sorted(set(d.labels[lo:hi].tolist()))
        for b, t in zip(d.labels[lo:hi].tolist(), d.targets[lo:hi].tolist(), strict=True):
            spelled[t] = spelled[s] + bytes([b])
    assert spelled == sorted(prefixes)
    # the targets follow from the child counts (all a grammar's fingerprint hashes of them)
    assert d.preorder_trie
    targets = np.full(d.n_transitions, -1)

    def subtree(x: int) -> int:  # the first state after x's subtree
        after = x + 1
        for e in range(int(d.row_start[x]), int(d.row_start[x + 1])):
            targets[e] = after
            after = subtree(after)
        return after

    assert subtree(0) == d.n_states and np.array_equal(targets, d.targets)
    again = trie(sorted(words, reverse=True) + sorted(words))
    for a, b in zip(astuple(d), astuple(again), strict=True):
        assert np.array_equal(a, b)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.binary(max_size=14).map(lambda b: bytes(x % 5 for x in b)), max_size=400),
    st.integers(0, 1),
)
def test_the_names_are_sorted_in_byte_order(words: list[bytes], sep: int) -> None:
    """The trie's sort (by the next byte of each run of equal prefixes, short runs by
    insertion) is Python's order of the byte strings, repeats next to each other, with or
    without a separator byte after each string."""
    from corral.grammar.regex.dawg import _byte_order, concatenated

    words = words + words[: len(words) // 3]
    buf, offs = concatenated([w + b"\xff" * sep for w in words])
    order = _byte_order(buf, offs, sep)
    assert [words[i] for i in order.tolist()] == sorted(words)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet="ab\0é", max_size=5), max_size=12))
def test_names_encoded_in_one_go_give_the_trie_of_their_bytes(names: list[str]) -> None:
    """``encoded`` joins ASCII names with NUL separators (one name per NUL) and encodes
    the others one by one; both give the trie of the names' UTF-8 bytes."""
    buf, offs, sep = encoded(names)
    assert sep == int(all(x.isascii() and "\0" not in x for x in names) and bool(names))
    got, want = trie_of(buf, offs, sep), trie([x.encode() for x in names])
    for a, b in zip(astuple(got), astuple(want), strict=True):
        assert np.array_equal(a, b)


def test_an_entity_set_is_read_from_a_file_one_name_a_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "cities.txt"
    p.write_bytes("Wien\r\n\nSão Paulo\n  \nNew York \nWien\n".encode())
    es = EntitySet.from_file(p)
    assert sorted(es) == ["New York ", "São Paulo", "Wien"] and len(es) == 3
    assert "São Paulo" in es and "Sao Paulo" not in es
    assert es.label == "cities.txt"
    assert es.digest == EntitySet(["Wien", "New York ", "São Paulo"]).digest
    assert es.digest != EntitySet(["Wien", "New York", "São Paulo"]).digest
    assert es.dfa("json") is es.dfa("json")  # built once
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9\n")
    with pytest.raises(ValueError, match="not utf-8"):
        EntitySet.from_file(bad)
    with pytest.raises(ValueError, match="empty"):
        EntitySet(["a", ""])
    with pytest.raises(ValueError, match="at least one"):
        EntitySet([])
    with pytest.raises(TypeError, match="not a str"):
        EntitySet(["a", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not one string"):
        EntitySet("abc")
    with pytest.raises(ValueError, match="encoding"):
        es.dfa("utf-16")
    with pytest.raises(ValueError, match=r"max_chars=10 .*at name 2"):
        EntitySet(["abcd", "efgh", "ijkl"], max_chars=10)


def _prefixes(docs: Iterable[bytes]) -> set[bytes]:
    return {d[:i] for d in docs for i in range(len(d) + 1)}


def _check_masks(vocab, compiled, docs: list[bytes], points: list[bytes]) -> None:  # type: ignore[no-untyped-def]
    """At each consumed prefix in ``points``: a normal token is allowed exactly when the
    prefix plus its bytes begins some document of ``docs``, and EOS exactly when the
    prefix is a whole document."""
    prefixes = _prefixes(docs)
    whole = set(docs)
    normal = np.flatnonzero(vocab.kinds == 0)
    tb = {int(i): vocab.token_bytes(int(i)) for i in normal}
    eos = set(vocab.eos_token_ids)
    for q in points:
        m = compiled.matcher()
        assert m.consume_bytes(q), q
        got = set(m.allowed_token_ids().tolist())
        want = {i for i, b in tb.items() if q + b in prefixes}
        assert got - eos == want, (q, sorted(got - eos - want)[:5], sorted(want - got)[:5])
        assert bool(got & eos) == (q in whole), q


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
def test_entity_masks_equal_a_brute_force_over_the_vocabulary(tok: str) -> None:
    """A few thousand real names on a byte-level and a SentencePiece vocabulary: every
    mask allows exactly the tokens that keep the text a prefix of some valid document."""
    vocab = load_vocab(tok)
    names = _catalogue(3000)
    es = EntitySet(names)
    compiled = corral.compile(
        {"type": "string", "x-corral-entities": "unicode"}, vocab, entities={"unicode": es}
    )
    assert compiled.tables.n_dense_states < compiled.tables.n_lexer_states  # sparse rows
    docs = [json.dumps(n, ensure_ascii=False).encode() for n in names]
    rng = random.Random(1)
    points = [b"", b'"']
    for d in rng.sample(docs, 12):
        points.append(d[: rng.randrange(2, len(d) + 1)])
    # JSON escapes: a whole name with \n, and cuts inside \t, \\ and \"
    points += [docs[-1], docs[-2][:5], docs[-3][:-2], docs[-4][:-2]]
    _check_masks(vocab, compiled, docs, points)
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "x-corral-entities": "unicode"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    compiled = corral.compile(schema, vocab, entities={"unicode": es})
    doc = b'{"name":' + docs[7] + b"}"
    assert compiled.matcher().consume_bytes(doc)
    assert not compiled.matcher().consume_bytes(b'{"name":"LATIN SMALL LETTER Q WITH NOTHING"}')
    m = compiled.matcher()
    assert not m.consume_bytes(b'{"name":"LATIN SMALL LETTER Q WITH NOTHING"}')


def test_a_large_enum_takes_the_minimal_automaton_and_stays_exact() -> None:
    """An enum of thousands of strings: one sparse terminal (not one per value), with
    the same language."""
    vocab = load_vocab("gpt2")
    names = _catalogue(2500, seed=2)
    compiled = corral.compile({"enum": names}, vocab)
    assert compiled.tables.n_terminals == 1
    assert compiled.tables.n_dense_states == 0
    docs = [json.dumps(n, ensure_ascii=False).encode() for n in names]
    rng = random.Random(3)
    points = [b"", b'"'] + [d[: rng.randrange(2, len(d) + 1)] for d in rng.sample(docs, 10)]
    _check_masks(vocab, compiled, docs, points)


def test_a_declared_lark_terminal_is_bound_to_an_entity_set() -> None:
    vocab = load_vocab("gpt2")
    cities = EntitySet(["Wien", "São Paulo", "New York", "Newark"])
    g = corral.compile(
        'start: "from " CITY " to " CITY\n%declare CITY', vocab, entities={"CITY": cities}
    )
    assert g.matcher().consume_bytes("from São Paulo to Newark".encode())
    assert not g.matcher().consume_bytes(b"from New Yor to Wien")
    m = g.matcher()
    assert m.consume_bytes(b"from New") and not m.is_accepting()
    with pytest.raises(UnsupportedFeatureError, match="CITY"):
        corral.compile("start: CITY\n%declare CITY", vocab)


def test_entity_constraints_are_refused_where_they_cannot_hold() -> None:
    vocab = load_vocab("gpt2")
    es = EntitySet(["a", "b"])
    s = {"properties": {"x": {"type": "string", "x-corral-entities": "letters"}}}
    with pytest.raises(SchemaError, match="/properties/x/x-corral-entities") as e:
        corral.compile(s, vocab)
    assert "entities=" in str(e.value)
    with pytest.raises(SchemaError, match=r"'letters'.*given: \['other'\]"):
        corral.compile(s, vocab, entities={"other": es})
    with pytest.raises(SchemaError, match="must name an entity set"):
        corral.compile({"x-corral-entities": ["a"]}, vocab, entities={"letters": es})
    with pytest.raises(UnsupportedFeatureError, match="/properties/x/anyOf"):
        corral.compile(
            {"properties": {"x": {"x-corral-entities": "letters", "anyOf": [{"pattern": "a"}]}}},
            vocab,
            entities={"letters": es},
        )
    with pytest.raises(UnsupportedFeatureError, match="/properties/x/pattern"):
        corral.compile(  # a backreference: no automaton can hold it
            {"properties": {"x": {"x-corral-entities": "letters", "pattern": "(a)\\1"}}},
            vocab,
            entities={"letters": es},
        )
    with pytest.raises(TypeError, match="entities must map"):
        corral.compile(s, vocab, entities=["a"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="entities= applies"):
        corral.compile(corral.Grammar.from_regex("a"), vocab, entities={"letters": es})


def test_the_final_check_enforces_an_entity_set_the_grammar_merged_away() -> None:
    """Where the keyword does not reach the grammar on a string schema of its own (an
    ``allOf`` merge), the final check still refuses a value outside the set."""
    es = EntitySet(["Wien", "Graz"])
    schema = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"properties": {"a": {"x-corral-entities": "c"}}, "required": ["a"]},
        ]
    }
    g = corral.Grammar.from_json_schema(schema, entities={"c": es})
    assert g.final_check is not None
    assert g.final_check(b'{"a": "Graz"}')
    assert not g.final_check(b'{"a": "Linz"}')
    report = str(corral.explain(schema, entities={"c": es}))
    assert "/allOf/1/properties/a/x-corral-entities" in report


def test_an_entity_set_is_shared_and_cached_across_compiles() -> None:
    vocab = load_vocab("gpt2")
    names = _catalogue(500, seed=4)
    s = {"type": "string", "x-corral-entities": "u"}
    a = corral.compile(s, vocab, entities={"u": EntitySet(names)})
    b = corral.compile(s, vocab, entities={"u": EntitySet(reversed(names))})
    assert a is b  # same names: the same compiled grammar
    c = corral.compile(s, vocab, entities={"u": EntitySet(names[1:])})
    assert c is not a
    assert c.matcher().consume_bytes(json.dumps(names[1], ensure_ascii=False).encode())
    assert not c.matcher().consume_bytes(json.dumps(names[0], ensure_ascii=False).encode())


def test_generate_and_extract_take_entity_sets() -> None:
    """``generate`` (a schema and Lark text) and ``extract`` pass ``entities=`` on: a
    random model writes names of the set only."""
    from support.tiny_models import tiny_llama
    from support.tokenizers import load_tokenizer

    tok = load_tokenizer("gpt2")
    model = tiny_llama(tok)
    cities = EntitySet(["Wien", "Graz", "São Paulo", "Linz an der Donau"])
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "x-corral-entities": "cities"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    for seed in range(3):
        value = corral.generate(
            model, "City:", schema=schema, tokenizer=tok, entities={"cities": cities},
            seed=seed, max_new_tokens=40,
        )  # fmt: skip
        assert value["city"] in cities
    text = corral.generate(
        model, "From", grammar='start: " " CITY\n%declare CITY', tokenizer=tok,
        entities={"CITY": cities}, max_new_tokens=20,
    )  # fmt: skip
    assert text[1:] in cities
    records = corral.extract(
        model, ["She lives in Graz.", "He moved to Wien."], schema=schema, tokenizer=tok,
        entities={"cities": cities}, max_new_tokens=40,
    )  # fmt: skip
    assert [r["city"] in cities for r in records] == [True, True]


def test_infill_takes_spans_and_entity_sets() -> None:
    """``corral.infill`` passes ``source=`` and ``entities=`` on to the compile: holes of a
    random tiny Llama (left to right) and a random tiny BERT (any order) are filled with
    a span of the source and a name of the set only."""
    import copy

    from support.tiny_models import tiny_bert, tiny_llama
    from support.tokenizers import load_tokenizer

    tok = load_tokenizer("gpt2")
    source = "Lena Vogel moved to Graz in May."
    cities = EntitySet(["Wien", "Graz", "Linz"])
    schema = {
        "type": "object",
        "properties": {
            "who": {"type": "string", "x-corral-span": True},
            "city": {"type": "string", "x-corral-entities": "cities"},
        },
        "required": ["who", "city"],
    }
    template = '{"who": \u25a2, "city": \u25a2}'
    causal = tiny_llama(tok, seed=1)
    masked_tok = copy.deepcopy(tok)
    masked_tok.add_special_tokens({"mask_token": "<mask>"})
    bert = tiny_bert(len(masked_tok), layers=1)
    for model, t in ((causal, tok), (bert, masked_tok)):
        for seed in range(2):
            res = corral.infill(
                model, template, tokenizer=t, schema=schema, temperature=1.0, seed=seed,
                hole_tokens=6, source=source, entities={"cities": cities},
            )  # fmt: skip
            assert res.value["who"] and res.value["who"] in source
            assert res.value["city"] in cities
