"""XGrammar's EBNF (``Grammar.from_ebnf``): its dialect of GBNF, read as XGrammar reads it.

The language is checked against XGrammar itself where it is installed (the benchmark
extras): llama.cpp's grammars that XGrammar reads, and grammars written in its dialect,
on random sentences of the character-level reference and edits of them.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from support.gbnf_reference import edits, recognizes, sentence, to_bnf
from support.tokenizers import load_vocab

import corral
from corral import Grammar
from corral.errors import GrammarError, UnsupportedFeatureError
from corral.grammar.gbnf.syntax import parse_gbnf

DATA = Path(__file__).parent / "data" / "gbnf"
# llama.cpp's grammars XGrammar reads (json.gbnf and json_arr.gbnf start an alternative
# with nothing, which XGrammar refuses)
XGRAMMAR_READS = ["arithmetic", "c", "chess", "english", "japanese", "list"]
DIALECT = r"""
root ::= item.list
item.list ::= item_one
    ("," item_one)*
item_one ::= [a-c\.\*]+ | number | "'q\'" | ( )
number ::= [0-9]{1, -1} ("." [0-9]{2})?
"""


def accepts(c: corral.CompiledGrammar, text: str) -> bool:
    m = c.matcher()
    return m.consume_bytes(text.encode()) and m.is_accepting()


def test_the_dialect() -> None:
    """Rules over several lines, names with ``.`` and ``_``, escaped regex punctuation in
    classes, ``{1, -1}`` for no bound, ``( )`` for nothing, ``\\'`` in strings."""
    c = corral.compile(DIALECT, load_vocab("gpt2"), format="ebnf")
    for s in ["a", "a.*,b", "12.34", "'q'", "", "a,,b", "7"]:
        assert accepts(c, s), s
    for s in ["d", "1.2", "a,d", "'q"]:
        assert not accepts(c, s), s


def test_regex_macro() -> None:
    """``Regex("...")`` is an ECMA-262 pattern matched in full; where its lexemes would
    not be exact as one terminal (``[a-z]+`` before a letter), it becomes rules over
    bytes, and the language stays the grammar's."""
    v = load_vocab("gpt2")
    c = corral.compile(
        'root ::= Regex("[a-z]+") "x" | "<" Regex("\\\\d{2,3}") ">"', v, format="ebnf"
    )
    for s in ["abx", "xx", "<12>", "<123>"]:
        assert accepts(c, s), s
    for s in ["x", "ab", "<1>", "<1234>", "AB x"]:
        assert not accepts(c, s), s
    # a Regex(...) in a rule another rule uses: that rule is not a regular run
    c = corral.compile('root ::= x "a"\nx ::= Regex("[a-z]+")', v, format="ebnf")
    assert accepts(c, "bca") and accepts(c, "aa") and not accepts(c, "a")
    with pytest.raises(GrammarError, match="line 1, column 16"):
        Grammar.from_ebnf('root ::= Regex("[a-")')


@pytest.mark.parametrize(
    ("text", "feature"),
    [
        ('root ::= "a" r\nr ::= "b" (= "c")', "lookahead assertion"),
        ('root ::= TagDispatch(("<a>", r))\nr ::= "b"', "TagDispatch"),
        ("root ::= Token(1, 2)", "Token"),
    ],
)
def test_refusals(text: str, feature: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match=feature):
        Grammar.from_ebnf(text)


@pytest.mark.parametrize("name", [*XGRAMMAR_READS, "dialect"])
def test_the_language_is_xgrammars(name: str) -> None:
    pytest.importorskip("xgrammar")
    import xgrammar
    from xgrammar.testing import _is_grammar_accept_string

    text = DIALECT if name == "dialect" else (DATA / f"{name}.gbnf").read_text()
    xg = xgrammar.Grammar.from_ebnf(text)
    c = corral.compile(text, load_vocab("gpt2"), format="ebnf")
    ref = to_bnf(parse_gbnf(text, "ebnf"))
    rng = random.Random(name)
    for _ in range(15):
        s = sentence(ref, rng, max_depth=8)
        assert recognizes(ref, s) and _is_grammar_accept_string(xg, s), s
        assert accepts(c, s), s
        for e in edits(s, rng, " a1,.\n'*(x", 10):
            assert accepts(c, e) == _is_grammar_accept_string(xg, e), (s, e)
