"""GBNF (llama.cpp's grammar format): the reader and the grammar it builds.

* llama.cpp's own integration cases (``tests/data/gbnf/llama_cpp_cases.json``, from its
  ``test-grammar-integration.cpp``): every passing string accepted, every failing one
  rejected.
* llama.cpp's grammar corpus (``tests/data/gbnf/*.gbnf``): random sentences of an
  independent character-level reading (``support/gbnf_reference.py``) are accepted, byte
  by byte and token by token with each token in the mask; edited sentences get the
  reference's verdict; random walks on the masks never dead-end and end in sentences the
  reference accepts.
* Random small grammars (hypothesis): the same language as the reference on every
  string up to a length, which checks where runs were made single terminals.
* Errors: positions, refusals.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.gbnf_reference import Bnf, edits, recognizes, sentence, to_bnf
from support.tokenizers import load_vocab
from support.words import guided_walk, mask_of, random_cut

import corral
from corral import Grammar
from corral.errors import EmptyLanguageError, GrammarError, UnsupportedFeatureError
from corral.grammar.gbnf.syntax import parse_gbnf

DATA = Path(__file__).parent / "data" / "gbnf"
CORPUS = sorted(p.stem for p in DATA.glob("*.gbnf"))
CASES = json.loads((DATA / "llama_cpp_cases.json").read_text())["cases"]


def accepts(c: corral.CompiledGrammar, text: str) -> bool:
    m = c.matcher()
    return m.consume_bytes(text.encode()) and m.is_accepting()


@pytest.fixture(scope="module")
def vocab() -> corral.Vocabulary:
    return load_vocab("gpt2")


@pytest.mark.parametrize("case", CASES, ids=[c["description"] for c in CASES])
def test_llama_cpp_cases(case: dict, vocab: corral.Vocabulary) -> None:
    if case["passing"] is None:  # token ids and the token negation !<[id]>
        with pytest.raises(UnsupportedFeatureError, match="token negation"):
            Grammar.from_gbnf(case["grammar"])
        return
    c = corral.compile(Grammar.from_gbnf(case["grammar"]), vocab)
    ref = to_bnf(parse_gbnf(case["grammar"]))
    for s in case["passing"]:
        assert recognizes(ref, s), s
        assert accepts(c, s), s
    for s in case["failing"]:
        assert not recognizes(ref, s), s
        assert not accepts(c, s), s


EDIT_CHARS = " ab0\n{}\"',.-+=()[]*x\t9é"


def _corpus(name: str, vocab: corral.Vocabulary) -> tuple[corral.CompiledGrammar, Bnf]:
    """A grammar of llama.cpp's corpus, compiled, and its character-level reading."""
    text = (DATA / f"{name}.gbnf").read_text()
    return corral.compile(text, vocab, format="gbnf"), to_bnf(parse_gbnf(text))


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_sentences(name: str, vocab: corral.Vocabulary) -> None:
    c, ref = _corpus(name, vocab)
    rng = random.Random(name)
    tok_rng = random.Random(0)
    for i in range(25):
        s = sentence(ref, rng, max_depth=10)
        assert recognizes(ref, s), s
        assert accepts(c, s), s
        if i < 5:  # token by token, each token in the mask, cut at random
            m = c.matcher()
            ids = random_cut(vocab, s.encode(), tok_rng)
            assert ids is not None  # the vocabulary has every byte
            for t in ids:
                assert mask_of(m)[t], s
                m.consume(t)
            assert m.is_accepting()
        for e in edits(s, rng, EDIT_CHARS):
            assert accepts(c, e) == recognizes(ref, e), (s, e)


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_walks_never_dead_end(name: str, vocab: corral.Vocabulary) -> None:
    c, ref = _corpus(name, vocab)
    rng = np.random.default_rng(3)
    prng = random.Random(3)
    eos = vocab.eos_token_ids[0]
    lengths = np.array([max(1, len(vocab.token_bytes(i))) for i in range(vocab.size)], float)
    finished = 0
    for _ in range(24):  # as many walks as tests/test_correctness.py's
        m = c.matcher()
        target = random_cut(vocab, sentence(ref, prng, max_depth=8).encode(), prng) or []
        consumed, _left = guided_walk(
            m, target, rng, lengths, eos, follow=0.9, extra_steps=30, stop_from=len(target) + 1
        )
        if m.is_accepting():
            finished += 1
            word = vocab.decode(consumed).decode("utf-8")
            assert recognizes(ref, word), word
    assert finished >= 1


def test_lexemes_where_exact() -> None:
    """``json.gbnf``'s strings and numbers (with their trailing ``ws``) are single
    terminals. In ``arithmetic.gbnf``, ``ws ::= [ \\t\\n]*`` after a number may end before
    the newline that ends a line, so there it is split at newlines: runs of spaces and
    tabs, and a newline with the spaces after it, are terminals; after ``"="`` a term
    follows, which never starts with a space, so ``"=" ws`` is one terminal."""
    j = Grammar.from_gbnf((DATA / "json.gbnf").read_text())
    assert {"/string/", "/number/"} <= set(j.terminals)
    a = Grammar.from_gbnf((DATA / "arithmetic.gbnf").read_text())
    assert {"/[\\t ]*/", "/([\\n] [\\t ]*)/", '/("=" ws)/'} <= set(a.terminals)
    assert not any(t.startswith("[") and "\\n" in t for t in a.terminals)  # no lone newline


# -- random grammars against the reference -----------------------------------------------
NAMES = ["root", "a-b", "c"]


@st.composite
def _nodes(draw: st.DrawFn, depth: int = 0) -> str:
    kinds = ["lit", "class", "ref"] + (["seq", "alt", "rep"] if depth < 3 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "lit":
        return '"' + draw(st.text("ab", min_size=1, max_size=2)) + '"'
    if kind == "class":
        return draw(st.sampled_from(["[a]", "[ab]", "[^a]", "[b]", "."]))
    if kind == "ref":
        return draw(st.sampled_from(NAMES))
    if kind == "seq":
        return " ".join(draw(st.lists(_nodes(depth + 1), min_size=2, max_size=3)))
    if kind == "alt":
        return "(" + " | ".join(draw(st.lists(_nodes(depth + 1), min_size=2, max_size=3))) + ")"
    op = draw(st.sampled_from(["*", "+", "?", "{2}", "{0,2}", "{1,}"]))
    return "(" + draw(_nodes(depth + 1)) + ")" + op


@st.composite
def grammars(draw: st.DrawFn) -> str:
    lines = []
    for name in NAMES:
        body = draw(_nodes())
        if draw(st.booleans()):
            body += ' | ""'  # a nullable alternative now and then
        lines.append(f"{name} ::= {body}")
    return "\n".join(lines)


WORDS = ["".join(p) for n in range(6) for p in __import__("itertools").product("abc", repeat=n)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammars())
def test_random_grammars_have_the_reference_language(text: str) -> None:
    vocab = load_vocab("gpt2")
    ref = to_bnf(parse_gbnf(text))
    try:
        g = Grammar.from_gbnf(text)
    except EmptyLanguageError:
        assert not any(recognizes(ref, w) for w in WORDS)
        return
    c = corral.compile(g, vocab)
    for w in WORDS:
        assert accepts(c, w) == recognizes(ref, w), (text, w)


# -- errors --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ('root ::= "a" | b', "undefined rule 'b'", 1, 16),
        ('root ::= "a"\nroot ::= "b"', "defined twice", 2, 1),
        ('root ::= "a\\q"', "unknown escape \\q", 1, 12),
        ('root ::= "abc', "end of input in a string", 1, 10),
        ("root ::= [z-a]", "ends reversed", 1, 11),
        ('root ::= "a"{3,1}', "bounds reversed", 1, 13),
        ('root ::= "a"{,3}', "expecting an integer", 1, 14),
        ('root ::= "a"{20000}', "above the limit", 1, 13),
        ("root ::= * x", "nothing before it", 1, 10),
        ('root ::= ("a" "b"', "expecting ')'", 1, 18),
        ('root ::= "a" ]', "expecting a newline", 1, 14),
        ('root = "a"', "expecting ::=", 1, 6),
        ('root ::= "\\x4"', "2 hex digits", 1, 11),
        ("root ::= <think", "expecting '>'", 1, 10),
    ],
)
def test_errors_have_positions(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(GrammarError, match="GBNF") as e:
        Grammar.from_gbnf(text)
    assert message in str(e.value)
    assert (e.value.line, e.value.column) == (line, column), str(e.value)
    assert "^" in e.value.snippet


def test_other_refusals() -> None:
    with pytest.raises(GrammarError, match="no rule named 'root'"):
        Grammar.from_gbnf('start ::= "a"')
    assert Grammar.from_gbnf('start ::= "a"', root="start").start == "start"
    with pytest.raises(UnsupportedFeatureError, match="line 1, column 14"):
        Grammar.from_gbnf('root ::= "a" !<[11]>')
    with pytest.raises(EmptyLanguageError):
        Grammar.from_gbnf("root ::= root")
    with pytest.raises(TypeError):
        Grammar.from_gbnf(b'root ::= "a"')  # type: ignore[arg-type]


def test_syntax_as_llama_cpp_reads_it(vocab: corral.Vocabulary) -> None:
    """Comments, newlines after ``|`` and inside parentheses, escapes, ``.``, a ``-``
    before ``]``, repetitions applied twice, and left recursion (which llama.cpp refuses)."""
    text = r"""
# a comment
root ::= item ("," item)* # trailing comment
item ::= [a-c-]+ |
   "\x41\u00e9\U0001F600" | ( "q"
     "r" ) | "\"\\\[\]\-\t" | "." . | "z"{2}? | lr
lr ::= lr "!" | "!"
"""
    c = corral.compile(text, vocab, format="gbnf")
    for s in ["a-b", "Aé😀", "qr", '"\\[]-\t', ".x", ".\n", "zz", "", "!!!", "a,zz,!", "a,"]:
        assert accepts(c, s), s  # "" and "a,": an item may be empty ("z"{2}?)
    for s in ["d", "z", "zzz", "q r", ".", "!a"]:
        assert not accepts(c, s), s


def test_format_names_the_front_end(vocab: corral.Vocabulary) -> None:
    """``format=`` picks the front end (GBNF text is never guessed: it would be read as
    Lark); ``start`` is GBNF's ``root`` by default; unknown formats and options fail."""
    text = 'top ::= "x"{2}\nroot ::= "y"'
    assert accepts(corral.compile(text, vocab, format="gbnf"), "y")
    assert accepts(corral.compile(text, vocab, format="gbnf", start="top"), "xx")
    with pytest.raises(GrammarError):
        corral.compile(text, vocab)  # read as Lark
    with pytest.raises(ValueError, match="unknown front end 'bnf'"):
        corral.compile(text, vocab, format="bnf")
    with pytest.raises(TypeError, match="do not apply to regex"):
        corral.compile("a+", vocab, format="regex", start="x")
    assert accepts(corral.compile("a+", vocab, format="regex"), "aaa")
    compiler = corral.Compiler(vocab)  # one method per front end, one compile per text
    assert compiler.gbnf(text) is compiler.compile(text, format="gbnf")
    assert accepts(compiler.gbnf(text, root="top"), "xx")
    assert accepts(compiler.ebnf('root ::= "a"\n  "b"'), "ab")


def test_special_tokens() -> None:
    """``<|im_end|>`` and ``<[id]>`` are matched by that token only; a name the
    vocabulary has no special token for is refused when compiling."""
    v = load_vocab("qwen2")
    c = corral.compile('root ::= "a" <|im_end|>', v, format="gbnf")
    m = c.matcher()
    assert m.consume_bytes(b"a")
    assert m.allowed_token_ids().tolist() == [v.special_tokens()["<|im_end|>"]]
    with pytest.raises(GrammarError, match="special token '<think>'"):
        corral.compile('root ::= <think> "a"', v, format="gbnf")
