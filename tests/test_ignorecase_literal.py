"""Case-insensitive strings built as a chain (``grammar/regex/ignorecase_literal.py``) give
the automata of the general construction, and match what ``re`` matches."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import corral
from corral.errors import CompileBudgetError
from corral.grammar.regex.charset import case_related
from corral.grammar.regex.ignorecase_literal import ignorecase_literal_dfa
from corral.grammar.regex.leftmost import leftmost_first_dfa
from corral.grammar.regex.python_syntax import ignorecase_char_set

# SQL-92's reserved words (a sample) and strings whose characters have unusual case
# partners in Python's tables: the long s, the Kelvin and Ångström signs, dotless and
# dotted i, final sigma, the micro sign, titlecase digraphs, ligatures, the sharp s
WORDS = [
    "SELECT", "FROM", "WHERE", "GROUP", "ORDER", "BY", "HAVING", "LIMIT", "DISTINCT",
    "INSERT", "INTO", "VALUES", "UPDATE", "DELETE", "JOIN", "INNER", "OUTER", "LEFT",
    "RIGHT", "CROSS", "NATURAL", "UNION", "EXCEPT", "INTERSECT", "CASE", "WHEN", "THEN",
    "ELSE", "END", "CAST", "EXISTS", "BETWEEN", "LIKE", "ESCAPE", "IS", "NULL", "NOT",
    "ASC", "DESC", "CREATE", "TABLE", "KEY", "PRIMARY", "CHECK", "SMALLINT", "TIMESTAMP",
    "count(*)", "order by", "is not null", "<>", "||", "1e9",
    "ſtraße", "Kelvin \u212a", "\u212b", "İstanbul", "ıi", "ΣΑΣ σς", "µμ", "ǅǆǄ", "ﬀ",
    "ẞ", "Ω\u2126", "é\u0301", "😀a", "\n\t\\\"", "日本語", "ǰ",
]  # fmt: skip


def _general(text: str) -> corral.grammar.regex.ByteDFA:  # type: ignore[name-defined]
    dfa, blocked = leftmost_first_dfa(re.escape(text), re.IGNORECASE)
    assert blocked is None
    return dfa


def _assert_equal(a: object, b: object) -> None:
    ta, ca = a.columns()  # type: ignore[attr-defined]
    tb, cb = b.columns()  # type: ignore[attr-defined]
    assert np.array_equal(ta, tb) and np.array_equal(ca, cb)
    assert np.array_equal(a.accept, b.accept)  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", WORDS)
def test_the_chain_is_the_general_automaton(text: str) -> None:
    _assert_equal(ignorecase_literal_dfa(text), _general(text))


_RELATED = case_related()
_ALPHABET = st.sampled_from(
    sorted(set(range(0x20, 0x7F)) | set((_RELATED.code_points if _RELATED else [])[:3000]))
).map(chr)


@settings(max_examples=300, deadline=None)
@given(st.text(_ALPHABET, min_size=1, max_size=10))
def test_any_string_of_cased_characters(text: str) -> None:
    _assert_equal(ignorecase_literal_dfa(text), _general(text))


@settings(max_examples=200, deadline=None)
@given(st.text(_ALPHABET, min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_it_matches_what_re_matches(text: str, rnd: random.Random) -> None:
    """Strings made of each position's case partners, some with one character changed:
    accepted exactly when ``re.fullmatch`` matches them."""
    dfa = ignorecase_literal_dfa(text)
    pattern = re.compile(re.escape(text), re.IGNORECASE)
    for _ in range(10):
        chars = []
        for ch in text:
            partners = [
                chr(cp)
                for lo, hi in ignorecase_char_set(ord(ch)).ranges
                for cp in range(lo, hi + 1)
            ]
            chars.append(rnd.choice(partners))
        if rnd.random() < 0.5:
            chars[rnd.randrange(len(chars))] = chr(rnd.choice([0x41, 0x61, 0x17F, 0x212A, 0xE9]))
        s = "".join(chars)
        assert dfa.matches(s.encode()) == (pattern.fullmatch(s) is not None), s


def test_partners_are_res() -> None:
    """``s`` matches the long s and ``k`` the Kelvin sign, as in ``re``."""
    for ch, want in [("s", "sSſ"), ("K", "kK\u212a"), ("σ", "σςΣ"), ("1", "1")]:
        got = {
            chr(cp) for lo, hi in ignorecase_char_set(ord(ch)).ranges for cp in range(lo, hi + 1)
        }
        assert got == set(want)
        assert all(re.fullmatch(re.escape(ch), c, re.IGNORECASE) for c in want)


@pytest.mark.parametrize("text", ["", "a\ud800b"])
def test_the_empty_string_and_surrogates_take_the_general_construction(text: str) -> None:
    _assert_equal(ignorecase_literal_dfa(text), _general(text))


def test_a_long_string_is_refused_past_the_budget() -> None:
    with pytest.raises(CompileBudgetError, match="more than 8 states"):
        ignorecase_literal_dfa("abcdefghij", max_states=8)
    assert ignorecase_literal_dfa("abcdefg", max_states=8).n_states == 8


def test_a_lark_grammar_reads_its_case_insensitive_strings_so() -> None:
    g = corral.Grammar.from_lark('start: SELECT " " NAME\nSELECT: "select"i\nNAME: /[a-z]+/')
    term = g.terminals["SELECT"]
    _assert_equal(term.dfa, _general("select"))
    assert term.source == '"select"i'
