"""The compiler object and the front-end registry.

A :class:`corral.Compiler` compiles for one vocabulary, one method per front end, and owns
its caches: equal specs compile once, the bounds hold, ``clear`` empties them, and two
compilers never share what they compiled. ``Compiler.compile`` and ``corral.compile``
pick the front end from the spec's type through ``corral.grammar.frontends``.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.schemas import NAME_AGE as PERSON
from support.tokenizers import load_tokenizer, load_vocab
from support.words import accepts

import corral
from corral import Compiler, Grammar
from corral.automata.compiler import default_cache
from corral.errors import CacheWarning, EmptyLanguageError, GrammarError, UnsupportedFeatureError
from corral.grammar import frontends

LARK = 'start: "(" item ("," item)* ")"\nitem: /[0-9]+/ | "x"\n'
PHONE = r"[0-9]{3}-[0-9]{4}"


@pytest.fixture(scope="module", params=["gpt2", "llama3"])
def model(request: pytest.FixtureRequest) -> tuple[Any, corral.Vocabulary]:
    return load_tokenizer(request.param), load_vocab(request.param)


# -- one compiler per vocabulary ------------------------------------------------------------
def test_each_method_compiles_its_language(model: tuple[Any, corral.Vocabulary]) -> None:
    tok, vocab = model
    c = Compiler(vocab)
    person = c.json_schema(PERSON)
    assert person.vocab is vocab and person.vocab_size == vocab.size
    assert accepts(person, tok, '{"name":"Ada","age":36}')
    assert not accepts(person, tok, '{"name":"Ada Lovelace","age":36}')  # maxLength 8
    assert not accepts(person, tok, '{"name":"Ada"}')

    parens = c.lark(LARK)
    assert accepts(parens, tok, "(1,x,23)")
    assert not accepts(parens, tok, "(1,,2)")
    items = c.lark(LARK, start="item")  # another start rule is another grammar
    assert items is not parens
    assert accepts(items, tok, "42") and not accepts(items, tok, "(42)")

    phone = c.regex(PHONE)
    assert accepts(phone, tok, "555-1234") and not accepts(phone, tok, "555-12345")
    shout = c.regex("[a-z]+", flags=re.IGNORECASE)
    assert accepts(shout, tok, "HeLLo") and not accepts(c.regex("[a-z]+"), tok, "HeLLo")

    g = Grammar.from_regex("(yes|no)")
    yn = c.grammar(g)
    assert yn.grammar is g
    assert accepts(yn, tok, "yes") and not accepts(yn, tok, "maybe")


def test_schema_inputs_share_one_compilation(model: tuple[Any, corral.Vocabulary]) -> None:
    """A dict, its JSON text and the pydantic class it comes from are one source."""
    pydantic = pytest.importorskip("pydantic")

    class Point(pydantic.BaseModel):
        x: int
        y: int

    _, vocab = model
    c = Compiler(vocab)
    from_class = c.json_schema(Point)
    assert c.json_schema(Point.model_json_schema()) is from_class
    assert c.json_schema(json.dumps(Point.model_json_schema(), indent=2)) is from_class
    assert c.stats() | {"bytes": 0} == {
        **{"grammars": 1, "bytes": 0, "hits": 2, "misses": 1},
        **{"sources": 1, "source_hits": 2, "source_misses": 1},
    }
    assert c.json_schema(True) is c.json_schema("true ") is not from_class
    with pytest.raises(EmptyLanguageError):
        c.json_schema(False)
    assert c.stats()["grammars"] == 2


def test_compilers_of_two_vocabularies() -> None:
    """The same spec compiles for each vocabulary on its own, with its own token ids."""
    gpt2 = Compiler(load_vocab("gpt2"))
    llama3 = Compiler(load_vocab("llama3"))
    a, b = gpt2.json_schema(PERSON), llama3.json_schema(PERSON)
    assert a.grammar.fingerprint == b.grammar.fingerprint
    assert (a.vocab_size, b.vocab_size) == (gpt2.vocab.size, llama3.vocab.size)
    assert a.vocab_size != b.vocab_size
    for cg, name in ((a, "gpt2"), (b, "llama3")):
        m = cg.matcher()
        mask = corral.allocate_bitmask(1, cg.vocab_size)
        m.fill_bitmask(mask)
        allowed = np.flatnonzero(corral.bitmask_to_bool(mask, cg.vocab_size)[0])
        assert mask.shape == (1, (cg.vocab_size + 31) // 32)
        assert all(cg.vocab.token_bytes(int(i)).startswith(b"{") for i in allowed), name
        brace = load_tokenizer(name).convert_tokens_to_ids("{")
        assert brace in allowed.tolist(), name


# -- caches -----------------------------------------------------------------------------
def test_equal_specs_compile_once(model: tuple[Any, corral.Vocabulary]) -> None:
    _, vocab = model
    c = Compiler(vocab)
    first = c.lark(LARK)
    assert c.stats()["misses"] == 1 and c.stats()["hits"] == 0
    assert c.lark(LARK) is first
    assert c.compile(LARK) is first  # the same source, guessed
    assert c.stats()["hits"] == 2 and c.stats()["misses"] == 1
    assert c.stats()["grammars"] == 1 and c.stats()["sources"] == 1
    assert c.stats()["bytes"] > 0
    # a Grammar equal to a cached one (same fingerprint) finds its compilation
    assert c.grammar(Grammar.from_lark(LARK)) is first


def test_schema_key_keeps_property_order(model: tuple[Any, corral.Vocabulary]) -> None:
    """Properties are written in the order the schema gives them, so two schemas that
    differ only in that order are two grammars, cached apart (corral.compile too)."""
    tok, vocab = model
    ab = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    ab["required"] = ["a", "b"]
    ba = {**ab, "properties": dict(reversed(list(ab["properties"].items())))}
    for compile_ in (Compiler(vocab).json_schema, lambda s: corral.compile(s, vocab)):
        first, second = compile_(ab), compile_(ba)
        assert first is not second
        assert accepts(first, tok, '{"a":1,"b":2}') and not accepts(first, tok, '{"b":2,"a":1}')
        assert accepts(second, tok, '{"b":2,"a":1}') and not accepts(second, tok, '{"a":1,"b":2}')


def test_bounded_by_entries_and_bytes(model: tuple[Any, corral.Vocabulary]) -> None:
    _, vocab = model
    c = Compiler(vocab, max_grammars=2)
    one, two = c.regex("a+"), c.regex("b+")
    c.regex("c+")  # "a+" is the least recently used: dropped
    assert c.stats()["grammars"] == 2
    assert c.regex("b+") is two
    again = c.regex("a+")
    assert again is not one and again.grammar.fingerprint == one.grammar.fingerprint
    assert c.stats()["misses"] == 4

    size = c.stats()["bytes"] // 2  # both kept are regexes of one character class
    fits_one = Compiler(vocab, max_bytes=size + size // 2)
    fits_one.regex("a+")
    fits_one.regex("b+")
    assert fits_one.stats()["grammars"] == 1 and fits_one.stats()["bytes"] <= size + size // 2
    none_fit = Compiler(vocab, max_bytes=size // 4)
    cg = none_fit.regex("a+")
    assert none_fit.stats()["grammars"] == 0 and none_fit.regex("a+") is not cg

    off = Compiler(vocab, max_grammars=0, max_sources=0)
    assert off.regex("a+") is not off.regex("a+")
    assert off.stats()["grammars"] == off.stats()["sources"] == 0


def test_clear(model: tuple[Any, corral.Vocabulary]) -> None:
    _, vocab = model
    c = Compiler(vocab)
    cg = c.json_schema(PERSON)
    c.clear()
    s = c.stats()
    assert (s["grammars"], s["sources"], s["bytes"]) == (0, 0, 0)
    assert c.json_schema(PERSON) is not cg
    assert c.stats()["misses"] == 2


def test_compilers_do_not_share_caches(model: tuple[Any, corral.Vocabulary]) -> None:
    _, vocab = model
    c1, c2 = Compiler(vocab), Compiler(vocab)
    a = c1.json_schema(PERSON)
    b = c2.json_schema(PERSON)
    assert a is not b and a.grammar is not b.grammar
    assert c1.stats()["misses"] == c2.stats()["misses"] == 1
    c2.clear()
    assert c1.json_schema(PERSON) is a and c1.stats()["hits"] == 1
    # nor with the default compiler behind corral.compile
    before = dict(default_cache.stats())
    default = corral.compile(PERSON, vocab)
    assert default is not a
    assert corral.compile(PERSON, vocab) is default
    assert default_cache.hits >= before["hits"] + 1
    assert c1.stats()["hits"] == 1
    assert corral.compile(PERSON, vocab, cache=False) is not default


def test_precompute_and_its_override(model: tuple[Any, corral.Vocabulary]) -> None:
    _, vocab = model
    lazy = Compiler(vocab).regex(PHONE)  # the default: each cache built on first use
    assert lazy.cache_stats()["cached_states"] == 0
    lazy.matcher().allowed_token_ids()
    assert 0 < lazy.cache_stats()["cached_states"] < lazy.cache_stats()["lexer_states"]
    warm = Compiler(vocab, precompute=True).regex(PHONE)
    assert warm.cache_stats()["cached_states"] == warm.cache_stats()["lexer_states"]
    assert (
        corral.compile(PHONE, vocab, format="regex", cache=False).cache_stats()["cached_states"]
        == 0
    )
    override = Compiler(vocab, precompute=False).compile(Grammar.from_regex(PHONE), precompute=True)
    assert override.cache_stats()["cached_states"] == override.cache_stats()["lexer_states"]


def test_cache_dir_and_warnings_point_at_the_caller(tmp_path: Path) -> None:
    vocab = load_vocab("gpt2")
    folder = tmp_path / "caches"
    written = Compiler(vocab, cache_dir=folder).regex(PHONE)
    path = folder / f"{written.cache_key}.npz"
    assert path.is_file()
    loaded = Compiler(vocab, cache_dir=folder).regex(PHONE)
    assert loaded.cache_stats()["cached_states"] == loaded.cache_stats()["lexer_states"]

    for compile_ in (
        lambda: Compiler(vocab, cache_dir=folder).regex(PHONE),
        lambda: Compiler(vocab).compile(Grammar.from_regex(PHONE), cache_dir=folder),
        lambda: corral.compile(Grammar.from_regex(PHONE), vocab, cache=False, cache_dir=folder),
    ):
        path.write_bytes(path.read_bytes()[:100])  # truncated: rejected, rebuilt, rewritten
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            compile_()
        (w,) = [w for w in rec if isinstance(w.message, CacheWarning)]
        assert w.message.path == str(path)  # type: ignore[union-attr]
        assert w.filename == __file__


# -- the front-end registry -------------------------------------------------------------
def test_compile_dispatch(model: tuple[Any, corral.Vocabulary]) -> None:
    tok, vocab = model
    c = Compiler(vocab)
    assert c.compile(PERSON) is c.json_schema(PERSON)
    assert c.compile(json.dumps(PERSON)) is c.json_schema(PERSON)  # text starting with {
    assert c.compile("  " + json.dumps(PERSON)) is c.json_schema(PERSON)
    assert c.compile(LARK) is c.lark(LARK)
    assert c.compile(LARK, start="item") is c.lark(LARK, start="item")
    g = Grammar.from_regex(PHONE)
    assert c.compile(g) is c.grammar(g)
    assert c.compile(g) is c.regex(PHONE)  # one grammar, however it came
    # text is Lark text, never a regex: "[0-9]+" is no Lark grammar
    with pytest.raises(GrammarError):
        c.compile("[0-9]+")
    assert accepts(c.compile(PERSON, whitespace="flexible"), tok, '{"name": "Ada", "age": 3}')
    assert not accepts(c.compile(PERSON), tok, '{"name": "Ada",  "age": 3}')


def test_guess_and_source() -> None:
    assert frontends.guess({"type": "string"}).front_end == "json-schema"
    assert frontends.guess(True).front_end == "json-schema"
    assert frontends.guess(' {"type": "string"}').front_end == "json-schema"
    assert frontends.guess(LARK).front_end == "lark"
    g = Grammar.from_regex("a")
    src = frontends.guess(g)
    assert src.front_end == "grammar" and src.key is None and src.build() is g
    assert [f.name for f in frontends.FRONT_ENDS] == [
        "structural-tag",
        "json-schema",
        "grammar",
        "lark",
        "regex",
        "gbnf",
        "ebnf",
    ]
    assert frontends.guess('root ::= "a"').front_end == "lark"  # GBNF only by name
    assert frontends.read('root ::= "a"', format="gbnf").key == ("gbnf", 'root ::= "a"', "root")
    tag = {"type": "structural_tag", "format": {"type": "const_string", "value": "a"}}
    assert frontends.guess(tag).front_end == "structural-tag"
    regex = frontends.source("regex", PHONE)
    assert regex.key != frontends.source("regex", PHONE, flags=re.I).key
    assert regex.key != frontends.source("lark", PHONE).key
    assert regex.build() == Grammar.from_regex(PHONE)
    # only JSON data is identified by its text: a tuple is not a list to the schema checks
    assert frontends.source("json-schema", {"enum": [1, 2]}).key is not None
    assert frontends.source("json-schema", {"enum": (1, 2)}).key is None
    assert frontends.source("json-schema", {1: {}}).key is None
    with pytest.raises(ValueError, match="unknown front end 'yaml'"):
        frontends.source("yaml", "a: 1")
    with pytest.raises(TypeError, match=r"options \['start'\] do not apply to regex"):
        frontends.source("regex", PHONE, start="s")
    with pytest.raises(TypeError, match=r"options \['flags'\] do not apply to grammar"):
        frontends.source("grammar", g, flags=1)


def test_wrong_spec_types() -> None:
    vocab = load_vocab("gpt2")
    c = Compiler(vocab)
    unknown = (
        "cannot compile a int: pass Lark grammar text, a JSON Schema (dict, JSON text, "
        "pydantic model class) or a corral.Grammar"
    )
    for compile_ in (c.compile, lambda s, **kw: corral.compile(s, vocab, **kw)):
        with pytest.raises(TypeError) as e:
            compile_(42)
        assert str(e.value) == unknown
        with pytest.raises(TypeError) as e:
            compile_(LARK, whitespace="flexible")
        assert str(e.value) == "options ['whitespace'] apply to JSON Schemas only, not to str"
        with pytest.raises(TypeError, match="apply to JSON Schemas only, not to Grammar"):
            compile_(Grammar.from_regex("a"), final_check=False)
    with pytest.raises(TypeError, match="a JSON Schema must be a dict"):
        c.json_schema(42)
    with pytest.raises(TypeError, match="start"):  # no schema option: refused, not ignored
        c.json_schema(PERSON, start="item")
    with pytest.raises(TypeError, match="grammar text must be str, not bytes"):
        c.lark(b'start: "a"')  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="regex must be a string, not int"):
        c.regex(7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"expected a corral\.Grammar, not str"):
        c.grammar(LARK)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"vocab must be a corral\.Vocabulary"):
        Compiler("gpt2")  # type: ignore[arg-type]
    with pytest.raises(UnsupportedFeatureError):
        c.regex(r"(a)\1")
    assert c.stats()["grammars"] == 0  # nothing was compiled or kept
