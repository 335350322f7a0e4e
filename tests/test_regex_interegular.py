"""Regex automata against an independent implementation: ``interegular`` (its own parser
and FSM construction) and Python's ``re``, on every string up to length 3 over a small
alphabet and on random longer strings. The three must agree on every string."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from corral.grammar.regex import python_regex_dfa

interegular = pytest.importorskip("interegular")

PATTERNS = [
    r"[a-c]+",
    r"a(b|c)*d?",
    r"(ab|a)(bc|c)",
    r"[0-9]{2,4}-[a-z]?",
    r"(a|b)*abb",
    r"x?y{0,3}z+",
    r"[^abc]b",
    r"(a+|b+)c",
    r"\d+(\.\d+)?",
    r"[a-z][a-z0-9_]{0,5}",
    r"(?:ab){1,3}|c",
    r"a.c",
    r"[ -~]{0,2}",
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
    r"[A-Za-z_][A-Za-z_0-9]*",
    r"(a|ab)(c|bcd)(d*)",
    r"\s*,\s*",
]
ALPHABET = "abcdxyz019.-_ ,eE+"


def _strings(rng: random.Random) -> list[str]:
    short = ["".join(t) for n in range(4) for t in itertools.product("ab1.-", repeat=n)]
    long = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(4, 12))) for _ in range(2000)]
    return short + long


@pytest.mark.parametrize("pattern", PATTERNS)
def test_regex_dfa_agrees_with_interegular_and_re(pattern: str) -> None:
    ours = python_regex_dfa(pattern)
    theirs = interegular.parse_pattern(pattern).to_fsm()
    for s in _strings(random.Random(pattern)):
        expected = re.fullmatch(pattern, s) is not None
        assert theirs.accepts(s) == expected, (pattern, s)  # the oracles agree
        assert ours.matches(s.encode()) == expected, (pattern, s)
