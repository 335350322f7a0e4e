"""Regex → byte DFA: agreement with Python's ``re`` (exact language), refusals, budgets."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.regexes import regexes

from corral import CompileBudgetError, GrammarError, UnsupportedFeatureError
from corral.grammar.regex import literal_dfa, python_regex_dfa
from corral.grammar.regex.dfa import minimize, union_of_literals
from corral.grammar.regex.utf8 import utf8_sequences

ALPHABET = 'ab01 _"\\.\n\tXé€中🙂'


def _agree(
    pattern: str, flags: int = 0, n: int = 1500, alphabet: str = ALPHABET, seed: int = 0
) -> None:
    dfa = python_regex_dfa(pattern, flags)
    rx = re.compile(pattern, flags)
    rng = random.Random(seed)
    words = {""}
    for _ in range(n):
        words.add("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7))))
    for w in words:
        expected = rx.fullmatch(w) is not None
        assert dfa.matches(w.encode()) == expected, (pattern, w, expected)


@pytest.mark.parametrize(
    "pattern",
    [
        r"abc",
        r"a*b+",
        r"[a-z]{2,4}",
        r"(ab|cd)*e?",
        r"\d+(\.\d+)?",
        r'[^"\\]*',
        r".+",
        r"\w+",
        r"\s*\S",
        r"(?s).{0,3}",
        r'"(\\.|[^"\\])*"',
        r"[\u4e00-\u9fff]+",
        r"é+ü?",
        r"x\by",
        r"\bab\b",
        r"a(?=b)b",
        r"a(?!b).",
        r"(?<=a)b",
        r".(?<!a)b",
        r"^ab$",
        r"\Aab\Z",
        r"(?m)a$\n^b",
        r"a\B.",
        r"(a|b)*a(a|b){3}",
        r"[^\W\d]+",
        r"(?a)\w+",
        r"🙂{1,2}",
        r"(?:)",
    ],
)
def test_matches_python_re(pattern: str) -> None:
    _agree(pattern)


@pytest.mark.parametrize("pattern", [r"select", r"[a-k]+", r"straße", r"ǅ", r"[^a]"])
def test_ignorecase_matches_python_re(pattern: str) -> None:
    # includes Unicode case folding: KELVIN SIGN ~ k, LONG S ~ s, titlecase digraphs
    alphabet = "aAkKsSſKßẞǄǅǆ ltTrR"
    _agree(pattern, re.IGNORECASE, alphabet=alphabet)


def test_dotall_and_multiline_flags() -> None:
    _agree(r"a.b", re.DOTALL)
    _agree(r"a.b")
    _agree(r"^a$\n^b$", re.MULTILINE)


def test_unicode_categories_are_pythons() -> None:
    # Arabic-Indic digits are \d in Python's Unicode mode; not under re.ASCII
    d = python_regex_dfa(r"\d")
    assert d.matches("٣".encode())
    assert not python_regex_dfa(r"\d", re.ASCII).matches("٣".encode())
    assert python_regex_dfa(r"\w").matches("ß".encode())


def test_dollar_never_wider_than_python() -> None:
    # Python's `$` also matches before a final newline; corral reads it as the end only
    d = python_regex_dfa(r"a$\n")
    assert not d.matches(b"a\n")
    assert re.fullmatch(r"a$\n", "a\n")  # documented: corral accepts a subset here


def test_literal_dfa() -> None:
    d = literal_dfa("héllo")
    assert d.matches("héllo".encode())
    assert not d.matches(b"hello")
    assert not d.matches("héll".encode())


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"(a)\1", "backreference"),
        (r"(?P<x>a)(?P=x)", "backreference"),
        (r"(a)?(?(1)b|c)", "conditional"),
        (r"(?=ab)a", "lookahead"),
        (r"(?<=ab)c", "lookbehind"),
        (r"(?<!ab)c", "lookbehind"),
    ],
)
def test_unsupported_constructs_are_refused(pattern: str, construct: str) -> None:
    with pytest.raises(UnsupportedFeatureError) as e:
        python_regex_dfa(pattern)
    assert construct in str(e.value)


def test_possessive_and_atomic_are_refused() -> None:
    import sys

    if sys.version_info < (3, 11):
        pytest.skip("possessive quantifiers and atomic groups need Python 3.11")
    for pattern in (r"a++b", r"(?>a|ab)c"):
        with pytest.raises(UnsupportedFeatureError):
            python_regex_dfa(pattern)


def test_invalid_regex_is_a_grammar_error_with_position() -> None:
    with pytest.raises(GrammarError) as e:
        python_regex_dfa(r"ab(c")
    assert "missing )" in str(e.value)
    assert "^" in e.value.snippet


def test_state_budget() -> None:
    with pytest.raises(CompileBudgetError):
        python_regex_dfa(r"(a|b)*a(a|b){16}", max_states=1000)


def test_minimal_dfa_sizes() -> None:
    assert python_regex_dfa(r"[0-9]+").n_states == 2
    assert python_regex_dfa(r"(a|b)*a(a|b){3}").n_states == 16  # the textbook 2^(n+1)


def test_empty_language() -> None:
    assert python_regex_dfa(r"a(?=b)c").is_empty()


@given(st.integers(0, 0x10FFFF), st.integers(0, 0x10FFFF))
def test_utf8_sequences_cover_exactly(a: int, b: int) -> None:
    lo, hi = min(a, b), max(a, b)
    if hi - lo > 3000:
        hi = lo + 3000
    seqs = utf8_sequences(lo, hi) if not (lo <= 0xDFFF and hi >= 0xD800) else None
    if seqs is None:
        return
    covered = 0
    for cp in range(lo, hi + 1):
        enc = chr(cp).encode("utf-8")
        hits = [
            s
            for s in seqs
            if len(s) == len(enc) and all(r[0] <= x <= r[1] for r, x in zip(s, enc, strict=False))
        ]
        assert len(hits) == 1
        covered += 1
    total = sum(__import__("math").prod(r[1] - r[0] + 1 for r in s) for s in seqs)
    assert total == covered


# -- property: random regexes agree with `re` ----------------------------------------------

_atoms = st.sampled_from(
    ["a", "b", "ab", "[ab]", "[^a]", ".", r"\d", "é", "[a-c]", r"\.", r"\s", "中"]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(regexes(_atoms), st.lists(st.text(alphabet="abcé.中 1\n", max_size=6), max_size=30))
def test_random_regexes_agree_with_re(pattern: str, words: list[str]) -> None:
    dfa = python_regex_dfa(pattern)
    rx = re.compile(pattern)
    for w in [*words, ""]:
        assert dfa.matches(w.encode()) == (rx.fullmatch(w) is not None), (pattern, w)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=5).map(lambda b: bytes(x % 4 + 0x61 for x in b)), max_size=12),
    st.lists(st.binary(max_size=6).map(lambda b: bytes(x % 4 + 0x61 for x in b)), max_size=20),
)
def test_union_of_literals_is_exact_and_minimal(words: list[bytes], probes: list[bytes]) -> None:
    """The word-set automaton (an enum's strings, an object's listed keys) accepts exactly
    its words and cannot be made smaller."""
    dfa = union_of_literals(words)
    for w in words + probes:
        assert dfa.matches(w) == (w in words)
    if words:
        trans, _ = minimize(dfa.trans, dfa.accept)
        assert trans.shape[0] == dfa.n_states
        assert np.all(dfa.trans[dfa.trans >= 0] < dfa.n_states)
    else:
        assert dfa.is_empty()
