"""Lark text and regexes → grammar IR: what is accepted, normalised, and refused (with where)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import grammar_text

from corral import EmptyLanguageError, Grammar, GrammarError, UnsupportedFeatureError

GRAMMARS = ["json", "arithmetic", "sql", "clike", "lisp"]


@pytest.mark.parametrize("name", GRAMMARS)
def test_real_grammars_load(name: str) -> None:
    g = Grammar.from_lark(grammar_text(name))
    assert g.rules and g.terminals
    assert len(g.fingerprint) == 64


def test_ebnf_templates_imports_ignore() -> None:
    g = Grammar.from_lark(
        """
        start: _pair{NAME, NUMBER} ("," _pair{NAME, NUMBER})* [";"]
        _pair{k, v}: k "=" v
        NAME: /[a-z]+/
        DIGIT2: "0".."9"
        %import common.NUMBER
        %import common.WS
        %ignore WS
        """
    )
    assert "WS" in g.ignore
    assert {"NAME", "NUMBER"} <= set(g.terminals)


def test_fingerprint_identifies_content() -> None:
    a = Grammar.from_lark('start: "a" B\nB: /[0-9]+/\n')
    b = Grammar.from_lark('start: "a" B  // same grammar, other spelling\nB: /[0-9]+/\n')
    c = Grammar.from_lark('start: "a" B\nB: /[0-8]+/\n')
    assert a == b and hash(a) == hash(b)
    assert a != c


def test_syntax_error_has_line_column_and_caret() -> None:
    with pytest.raises(GrammarError) as e:
        Grammar.from_lark('start: "a" | \n  | B ]\nB: "b"\n')
    err = e.value
    assert err.line == 2 and err.column == 7
    assert "^" in err.snippet and "| B ]" in err.snippet


def test_undefined_rule_is_located() -> None:
    with pytest.raises(GrammarError) as e:
        Grammar.from_lark('start: "a" foo\n')
    assert "foo" in str(e.value)
    assert (e.value.line, e.value.column) == (1, 12)


def test_undefined_terminal_is_an_error() -> None:
    with pytest.raises(GrammarError, match="BAR"):
        Grammar.from_lark("start: BAR\n")


def test_declare_is_refused_clearly() -> None:
    with pytest.raises(UnsupportedFeatureError) as e:
        Grammar.from_lark("start: A\n%declare A\n")
    assert "%declare" in str(e.value) and "line 1" in str(e.value)


def test_invalid_regex_in_terminal_is_located() -> None:
    with pytest.raises(GrammarError) as e:
        Grammar.from_lark("start: A\nA: /a(/\n")
    assert e.value.line == 2
    assert "terminal A" in str(e.value)


def test_unsupported_regex_feature_names_terminal_and_line() -> None:
    with pytest.raises(UnsupportedFeatureError) as e:
        Grammar.from_lark('start: "x" A\nA: /(a)\\1/\n')
    assert e.value.feature == "backreference"
    assert "terminal A" in e.value.location and "line 2" in e.value.location


def test_empty_language_is_an_error() -> None:
    with pytest.raises(EmptyLanguageError):
        Grammar.from_lark('start: a\na: a "x"\n')  # a derives no finite string
    with pytest.raises(EmptyLanguageError):
        Grammar.from_regex(r"a(?=b)c")


def test_terminals_matching_empty_string_become_optional() -> None:
    g = Grammar.from_lark('start: "<" A ">"\nA: /a*/\n')
    assert not g.terminals["A"].dfa.accepts_empty()
    assert any(r.rhs == () for r in g.rules)  # A? -> ε


def test_unproductive_and_unreachable_symbols_removed() -> None:
    g = Grammar.from_lark('start: "a" | dead\ndead: dead "x"\nunused: "u"\n')
    assert g.nonterminals() == ["start"]
    assert set(g.terminals) == {"A"}


def test_from_regex_language() -> None:
    g = Grammar.from_regex(r"[0-9]{3}-[0-9]{4}")
    dfa = next(iter(g.terminals.values())).dfa
    assert dfa.matches(b"555-1234") and not dfa.matches(b"5555-1234")


def test_special_token_syntax() -> None:
    g = Grammar.from_lark('start: "a" <|im_end|> x\nx: "y" <[128009]>\n')
    specials = {t.special for t in g.terminals.values() if t.special}
    assert specials == {"<|im_end|>", "<[128009]>"}
    # inside strings, regexes and comments it is text
    g2 = Grammar.from_lark('start: "<|x|>" A  // <|c|>\nA: /<\\|y\\|>/\n')
    assert not any(t.special for t in g2.terminals.values())


def test_case_insensitive_literal() -> None:
    g = Grammar.from_lark('start: "select"i\n')
    dfa = next(iter(g.terminals.values())).dfa
    assert dfa.matches(b"SeLeCt") and not dfa.matches(b"selec")


def test_grammar_text_must_be_str() -> None:
    with pytest.raises(TypeError):
        Grammar.from_lark(b"start: 'a'")  # type: ignore[arg-type]


def test_lark_grammar_parser_is_built_without_validating_lark_own_terminals() -> None:
    """The first Lark grammar of a process read by Lark's loader (here all of them: corral's
    reader is turned off) primes Lark's parser of grammars with ``skip_validation`` (no
    interegular collision check over Lark's own terminals), and that parser reads grammars
    as Lark's own does."""
    code = (
        "import lark\n"
        "from lark import load_grammar as lg\n"
        "from corral.grammar.frontends import from_lark\n"
        'g = from_lark(\'start: A B\\nA: /a+/\\nB: "b"i\\n%ignore " "\\n\')\n'
        "print(lg._get_parser.cache.lexer_conf.skip_validation, len(g.rules))\n"
        "print(lark.Lark('start: A+ \"b\"i\\nA: /a/\\n').parse('aaB').children)\n"
    )
    env = {**os.environ, "CORRAL_LARK_READER": "0"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.splitlines()
    assert out == ["True 1", "[Token('A', 'a'), Token('A', 'a')]"]


def test_reading_other_specs_leaves_the_structural_tag_front_end_unimported() -> None:
    """Guessing a spec's front end imports the structural-tag front end only for a spec
    that may be a structural tag, and still recognises one as a dict and as an object."""
    code = (
        "import sys\n"
        "from corral.grammar.frontends import read\n"
        "kinds = [read('start: \"a\"').front_end, read({'type': 'object'}).front_end,\n"
        '         read(\'{"type": "string"}\').front_end]\n'
        "print(kinds, 'corral.grammar.structural' in sys.modules)\n"
        "tag = {'type': 'structural_tag', 'format': {'type': 'const_string', 'value': 'x'}}\n"
        "print(read(tag).front_end, 'corral.grammar.structural' in sys.modules)\n"
        "from corral.grammar.structural import read_structural_tag\n"
        "print(read(read_structural_tag(tag)).front_end)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [
        "['lark', 'json-schema', 'json-schema'] False",
        "structural-tag True",
        "structural-tag",
    ]
