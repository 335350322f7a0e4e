"""Indentation post-lexers compiled into the grammar: Lark's own ``python.lark`` with
Lark's ``PythonIndenter``, against Lark's LALR parser with the same post-lexer (the
reference), on the standard library's own sources, corrupted copies of them, and random
words of the compiled grammar."""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path

import lark
import pytest
from lark.indenter import PythonIndenter
from support.tokenizers import load_tokenizer, load_vocab
from support.words import WordGenerator, assert_replays

import corral
from corral.errors import GrammarError, InvalidArgumentError, UnsupportedFeatureError
from corral.grammar.indentation import Indentation

PYTHON_LARK = (Path(lark.__file__).parent / "grammars" / "python.lark").read_text()
STDLIB = Path(sysconfig.get_paths()["stdlib"])
WIDTH = 40  # columns: wider than any indentation in the files below


def stdlib_files(lo: int, hi: int, n: int) -> list[Path]:
    """The first ``n`` modules of the standard library (by name) of ``lo..hi`` bytes."""
    return [p for p in sorted(STDLIB.glob("*.py")) if lo < p.stat().st_size < hi][:n]


@pytest.fixture(scope="module")
def reference() -> lark.Lark:
    return lark.Lark(PYTHON_LARK, parser="lalr", postlex=PythonIndenter(), start="file_input")


@pytest.fixture(scope="module")
def grammar() -> corral.Grammar:
    return corral.Grammar.from_lark(
        PYTHON_LARK, "file_input", postlex=PythonIndenter(), max_indent_width=WIDTH
    )


@pytest.fixture(scope="module")
def compiled(grammar: corral.Grammar) -> corral.CompiledGrammar:
    return corral.compile(grammar, load_vocab("llama3"))


def lark_accepts(parser: lark.Lark, text: str) -> bool:
    try:
        parser.parse(text)
    except (lark.exceptions.LarkError, IndexError):  # IndexError: see the random words
        return False
    return True


def corral_accepts(c: corral.CompiledGrammar, text: str) -> bool:
    m = c.matcher()
    return m.consume_bytes(text.encode()) and m.is_accepting()


@pytest.mark.parametrize("path", stdlib_files(1000, 6000, 6), ids=lambda p: p.name)
def test_standard_library_token_by_token(
    compiled: corral.CompiledGrammar, reference: lark.Lark, path: Path
) -> None:
    """Each token of the tokenizer's own encoding is in the mask before it is read; at
    the end, EOS is allowed."""
    text = path.read_text()
    assert lark_accepts(reference, text)
    ids = load_tokenizer("llama3").encode(text, add_special_tokens=False)
    assert_replays(compiled, ids)


def _corrupt(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    kind = rng.randrange(6)
    if kind == 0:  # a line loses its indentation
        lines[i] = lines[i].lstrip()
    elif kind == 1:  # one more space
        lines[i] = " " + lines[i]
    elif kind == 2:  # two fewer columns
        body = lines[i].lstrip()
        lines[i] = lines[i][: max(0, len(lines[i]) - len(body) - 2)] + body
    elif kind == 3:  # a statement inserted at some indentation
        stmt = rng.choice(["pass", "x = 1", "if y:", "else:", "return", "(", ")", "\t"])
        lines.insert(i, " " * rng.randrange(12) + stmt)
    else:  # a character deleted or inserted
        s = "\n".join(lines)
        j = rng.randrange(len(s))
        if kind == 4:
            return s[:j] + s[j + 1 :]
        return s[:j] + rng.choice(" \t\n:()\"'#\\x") + s[j:]
    return "\n".join(lines)


@pytest.mark.parametrize("path", stdlib_files(500, 4000, 8), ids=lambda p: p.name)
def test_corrupted_sources_as_lark_decides(
    compiled: corral.CompiledGrammar, reference: lark.Lark, path: Path
) -> None:
    """Re-indented lines, inserted statements, characters deleted or inserted: corral
    accepts exactly the texts Lark's parser with its post-lexer accepts."""
    rng = random.Random(path.name)
    text = path.read_text()
    for _ in range(12):
        bad = _corrupt(text, rng)
        want = lark_accepts(reference, bad)
        assert corral_accepts(compiled, bad) == want, bad
    assert corral_accepts(compiled, text)


CASES = {
    "if x:\n    y = 2\nelse:\n    z = (1,\n  2)\n": True,  # newlines inside brackets
    "def f():\n\tif a:\n\t\treturn 1\n\treturn 2\n": True,  # tabs
    "if x:\n  y\n  ": True,  # the end of the text closes the block
    "if x:\n  if y:\n    z\n  ": True,
    "if x:\n  if y:\n    z\n ": False,  # one column: no open block is that wide
    "if x:\n  y\n z\n": False,  # a dedent to a width never opened
    "if x:\ny\n": False,  # a block needs an indented line
    "x = 1\n  y = 2\n": False,  # an indent with no block
    'x = """a""" + "" + \'\'\n': True,  # STRING's (?!"") lookahead
    'x = """"\n': False,
    "class C:\n    def f(self):\n        pass\n\n\n    x = [\n1]\n": True,
    "classx:\n  pass\n": False,  # a keyword and a name: one NAME (Lark's standard lexer)
    "x = 1\n# trailing comment\n": True,
}


@pytest.mark.parametrize("text", list(CASES), ids=[repr(c)[:30] for c in CASES])
def test_cases(compiled: corral.CompiledGrammar, reference: lark.Lark, text: str) -> None:
    assert lark_accepts(reference, text) == CASES[text]
    assert corral_accepts(compiled, text) == CASES[text]


def test_random_words_are_python_to_lark(
    grammar: corral.Grammar, compiled: corral.CompiledGrammar, reference: lark.Lark
) -> None:
    """Random words of the compiled grammar that corral accepts, Lark accepts, except a
    text whose last comment has no newline after it, where Lark's post-lexer fails (its
    newline token holds no newline: ``IndexError``)."""
    gen = WordGenerator(grammar, seed=5, max_depth=10)
    n = 0
    for _ in range(150):
        text = gen.word().decode("utf-8", "replace")
        if not corral_accepts(compiled, text):
            continue
        try:
            reference.parse(text)
        except IndexError:  # Lark's post-lexer on a newline token with no newline
            assert "\n" not in text.rsplit("#", 1)[-1], text
            continue
        except lark.exceptions.LarkError as e:
            raise AssertionError(f"Lark rejects {text!r}: {e}") from None
        n += 1
    assert n > 50


def test_wider_than_the_limit_is_refused(reference: lark.Lark) -> None:
    g = corral.Grammar.from_lark(
        PYTHON_LARK, "file_input", postlex=PythonIndenter(), max_indent_width=8
    )
    c = corral.compile(g, load_vocab("gpt2"))
    assert corral_accepts(c, "if x:\n        y\n")
    text = "if x:\n         y\n"  # nine columns
    assert lark_accepts(reference, text) and not corral_accepts(c, text)


SMALL = """
start: (_NL | stmt)*
stmt: NAME _NL | NAME ":" _NL _INDENT stmt+ _DEDENT | "(" NAME* ")" _NL
NAME: /[a-z]+/
_NL: /(\\r?\\n[\\t ]*)+/
%ignore " "
%declare _INDENT _DEDENT
"""


class SmallIndenter(lark.indenter.Indenter):
    NL_type = "_NL"
    OPEN_PAREN_types = ("LPAR",)
    CLOSE_PAREN_types = ("RPAR",)
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 4


def test_a_grammar_of_ones_own() -> None:
    ref = lark.Lark(SMALL, parser="lalr", postlex=SmallIndenter())
    g = corral.Grammar.from_lark(SMALL, postlex=SmallIndenter(), max_indent_width=12)
    c = corral.compile(g, load_vocab("gpt2"))
    rng = random.Random(0)
    texts = ["a\n", "a:\n b\n c\nd\n", "(a\n b\n)\n", "a:\n\tb\n    c\n", "a:\n b:\n  c\n d\n"]
    for _ in range(300):
        texts.append("".join(rng.choice(["a", ":", "\n", " ", "\t", "(", ")"]) for _ in range(12)))
    for text in texts:
        assert corral_accepts(c, text) == lark_accepts(ref, text), text


def test_errors() -> None:
    with pytest.raises(UnsupportedFeatureError, match="_INDENT"):  # no post-lexer
        corral.Grammar.from_lark(PYTHON_LARK, "file_input")
    with pytest.raises(InvalidArgumentError, match="postlex"):
        corral.Grammar.from_lark(SMALL, max_indent_width=8)
    with pytest.raises(InvalidArgumentError, match="Indenter"):
        corral.Grammar.from_lark(SMALL, postlex=object())
    with pytest.raises(InvalidArgumentError, match="max_width"):
        Indentation(max_width=-1)
    bad = SMALL.replace("_INDENT stmt+ _DEDENT", "stmt+ _DEDENT")
    with pytest.raises(UnsupportedFeatureError, match="rule stmt"):
        corral.Grammar.from_lark(bad, postlex=SmallIndenter())
    unbalanced = SMALL.replace('"(" NAME* ")" _NL', '"(" NAME* _NL')
    with pytest.raises(UnsupportedFeatureError, match="bracket"):
        corral.Grammar.from_lark(unbalanced, postlex=SmallIndenter())
    no_nl = SMALL.replace("_NL", "_EOL")
    with pytest.raises(GrammarError, match="_NL"):
        corral.Grammar.from_lark(no_nl, postlex=SmallIndenter())


def test_long_lookahead_only_in_terminals() -> None:
    """Lookahead of several characters is enforced in Lark terminals; a whole-text regex
    still refuses it with a clear error."""
    g = corral.Grammar.from_lark('start: S\nS: /"(?!"")[a-z"]*/\n')
    c = corral.compile(g, load_vocab("gpt2"))
    assert corral_accepts(c, '"a"') and corral_accepts(c, '""') and not corral_accepts(c, '"""')
    with pytest.raises(UnsupportedFeatureError, match="lookahead"):
        corral.Grammar.from_regex('"(?!"")a')
