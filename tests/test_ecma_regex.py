"""ECMA-262 patterns (JSON Schema ``pattern``) → byte DFA: search semantics, errors, corpus."""

from __future__ import annotations

import collections
import functools
import itertools
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.errors import CompileBudgetError, GrammarError, UnsupportedFeatureError
from corral.grammar.json_schema.ecma import ecma_search_node, parse_ecma_regex
from corral.grammar.regex import ast
from corral.grammar.regex.charset import CharSet
from corral.grammar.regex.dfa import ByteDFA, nfa_to_byte_dfa
from corral.grammar.regex.nfa import build_nfa

MASKBENCH = Path("/work/shared/data/maskbench")
FAST_SAMPLE = 300


@functools.cache
def search_dfa(pattern: str) -> ByteDFA:
    return nfa_to_byte_dfa(build_nfa(ecma_search_node(pattern)))


def found(pattern: str, text: str) -> bool:
    return search_dfa(pattern).matches(text.encode("utf-8"))


# -- agreement with Python's re.search -------------------------------------------------------

_DOT = "[^\n\r\u2028\u2029]"
_SPACE = "[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"

# (ECMA pattern, the same language in Python syntax; None: the same text). Python's `$`
# also matches before a final newline, so the translations use `\Z`; `.` in ECMA also
# excludes \r, \u2028 and \u2029. The reference runs with re.ASCII (ECMA's \d, \w, \b).
AGREE: list[tuple[str, str | None]] = [
    ("abc", None),
    ("^abc$", r"^abc\Z"),
    ("a|b1", None),
    ("^(a|b)*$", r"^(a|b)*\Z"),
    ("^(?:ab|a)(?:b1|_)$", r"^(?:ab|a)(?:b1|_)\Z"),
    ("a{2}", None),
    ("^a{1,2}b", None),
    ("^a{2,}$", r"^a{2,}\Z"),
    ("a+?b", None),
    ("^a*?$", r"^a*?\Z"),
    ("(?:ab)+_", None),
    ("^(?<name>a)b", "^(?P<name>a)b"),
    ("[a-c1]", None),
    ("[^ab]", None),
    ("^[^a]*$", r"^[^a]*\Z"),
    (r"^[\-ab]+$", r"^[\-ab]+\Z"),
    ("^[-a]$", r"^[-a]\Z"),
    ("^[a-]$", r"^[a-]\Z"),
    (r"\d", None),
    (r"^\d+$", r"^\d+\Z"),
    (r"\D\d", None),
    (r"\w_", None),
    (r"^\W*$", r"^\W*\Z"),
    (r"\bab\b", None),
    (r"\Ba", None),
    (r"b\b", None),
    (".", _DOT),
    ("^.$", f"^{_DOT}\\Z"),
    ("a.b", f"a{_DOT}b"),
    ("^.*$", f"^{_DOT}*\\Z"),
    ("a(?=b)", None),
    ("a(?!b)", None),
    ("(?<=a)b", None),
    ("(?<!a)b", None),
    ("a(?=[b1])", None),
    ("a(?=(b|1))", None),
    (r"(?<=\d)_", None),
    ("a(?=)b", "ab"),
    ("a(?!)", "(?!)"),
    ("^(?!$)", r"^(?!\Z)"),
    ("a{,2}", r"a\{,2\}"),
    ("a{", r"a\{"),
    ("a{1", r"a\{1"),
    ("}", r"\}"),
    ("]a", r"\]a"),
    (r"\-", r"\-"),
    (r"^[\w-]+$", r"^[\w\-]+\Z"),
    (r"^[\w-.]+$", r"^[\w\-.]+\Z"),
    (r"[a-\d]", r"[a\-\d]"),
    (r"\x61", "a"),
    (r"\u0061", "a"),
    (r"\u{61}", "a"),
    (r"\u{000062}", "b"),
    (r"[\x20-\x2d]", None),
    ("^$", r"^\Z"),
    ("a|", None),
    ("()", None),
    (r"\n", None),
    (r"\t|\r|\v|\f", None),
    (r"\0", r"\x00"),
    (r"\cJ", r"\n"),
    (r"[\b]", r"\x08"),
    (r"\/\.", r"/\."),
    ("(a|ab)(c|bcd)(d*)", None),
    ("^(a?){2}$", r"^(a?){2}\Z"),
    ("^(?:a|b|)+$", r"^(?:a|b|)+\Z"),
    ("a{0}b", "b"),
    ("[]", "(?!)"),
    ("^[]*$", r"^\Z"),
    ("[^]", r"(?s:.)"),
    ("^[^]{2}$", r"^(?s:.){2}\Z"),
    (r"^\s*$", f"^{_SPACE}*\\Z"),
    (r"a\sb|\S\S", f"a{_SPACE}b|[^{_SPACE[1:-1]}]{{2}}"),
    ("(?=a)*b", "b"),
    ("(?=a)+a", "a"),
]

SHORT_ALPHABET = "ab1_ -\né"
ALPHABET = "ab01_ -.{},\n\r\t\x00\x08éÉ€中🙂\u2028\u00a0"


def _reference(ecma: str, python: str | None) -> re.Pattern[str]:
    return re.compile(ecma if python is None else python, re.ASCII)


@pytest.mark.parametrize(("ecma", "python"), AGREE, ids=[p for p, _ in AGREE])
def test_agrees_with_python_search_exhaustively(ecma: str, python: str | None) -> None:
    rx = _reference(ecma, python)
    for n in range(4):
        for chars in itertools.product(SHORT_ALPHABET, repeat=n):
            s = "".join(chars)
            expected = rx.search(s) is not None
            assert found(ecma, s) == expected, (ecma, s, expected)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(AGREE), st.text(alphabet=ALPHABET, max_size=10))
def test_agrees_with_python_search_random(case: tuple[str, str | None], s: str) -> None:
    ecma, python = case
    expected = _reference(ecma, python).search(s) is not None
    assert found(ecma, s) == expected, (ecma, s, expected)


# -- ECMA-specific constructs, hand-written expectations ---------------------------------------


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        # [^] is any code point (line terminators and astral characters included); [] is none.
        ("^[^]$", "\n", True),
        ("^[^]$", "\u2028", True),
        ("^[^]$", "😀", True),
        ("^[^]$", "", False),
        ("[]", "", False),
        ("[]|x", "x", True),
        # Astral characters: one code point each (u flag).
        (r"^\u{1F600}$", "😀", True),
        (r"^\u{1F600}$", "😁", False),
        (r"^\uD83D\uDE00$", "😀", True),
        (r"^[\uD83D\uDE00]$", "😀", True),
        ("^[😀-😂]$", "😁", True),
        ("^[😀-😂]$", "😃", False),
        ("^.$", "😀", True),
        ("^..$", "😀", False),
        (r"^\u{10FFFF}$", "\U0010ffff", True),
        # $ is the end of the text only (no newline before it); ^ is the start only.
        ("^a$", "a\n", False),
        ("^a$", "a", True),
        ("a$", "b\na", True),
        ("^b", "a\nb", False),
        # . excludes the four line terminators.
        ("^.$", "\u2028", False),
        ("^.$", "\u2029", False),
        ("^.$", "\r", False),
        ("^.$", "\n", False),
        ("^.$", "\x85", True),
        # \d, \w and \b are ASCII only.
        (r"\d", "٣", False),
        (r"\d", "3", True),
        (r"\w", "é", False),
        (r"\W", "é", True),
        (r"a\b", "aé", True),
        (r"\bé", "é", False),
        # General_Category properties.
        (r"^\p{Lu}$", "É", True),
        (r"^\p{Lu}$", "é", False),
        (r"^\P{Lu}$", "é", True),
        (r"^\p{Ll}$", "é", True),
        (r"^\p{L}$", "中", True),
        (r"^\p{Letter}$", "中", True),
        (r"^\p{L}$", "1", False),
        (r"^\p{gc=Lu}$", "A", True),
        (r"^\p{General_Category=Nd}$", "٣", True),
        (r"^\p{Nd}+$", "12٣", True),
        (r"^\p{digit}$", "٣", True),
        (r"^\p{Decimal_Number}$", "x", False),
        (r"^\p{LC}$", "ǅ", True),
        (r"^\p{Lt}$", "ǅ", True),
        (r"^\p{Sc}$", "€", True),
        (r"^\p{Zs}$", "\u3000", True),
        (r"^\p{Cn}$", "\U000e0fff", True),
        (r"^[\p{Lu}\d]+$", "AB1", True),
        (r"^[^\p{L}]$", "a", False),
        (r"^[^\P{L}]$", "a", True),
        (r"^\p{Any}$", "\U0010ffff", True),
        (r"^\p{ASCII}+$", "abc\x7f", True),
        (r"^\p{ASCII}$", "é", False),
        (r"^\p{Assigned}$", "a", True),
        (r"^\p{Assigned}$", "\U000e0fff", False),
        # Escapes.
        (r"^\cj$", "\n", True),
        (r"^[\cA-\cC]+$", "\x01\x02\x03", True),
        (r"^\'$", "'", True),
        (r"^\_$", "_", True),
        (r"^\é$", "é", True),
        (r"^[\-\]\[\\]+$", "-][\\", True),
        (r"^[\s\S]$", "\n", True),
        (r"^\0$", "\x00", True),
        (r"^(?<$n_1>a)$", "a", True),
    ],
)
def test_ecma_semantics(pattern: str, text: str, expected: bool) -> None:
    assert found(pattern, text) == expected


@pytest.mark.parametrize(
    "ws",
    [
        *["\t", "\n", "\v", "\f", "\r", " ", "\u00a0", "\u1680", "\u2000", "\u200a"],
        *["\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff"],
    ],
)
def test_ecma_whitespace(ws: str) -> None:
    assert found(r"^\s$", ws)
    assert not found(r"^\S$", ws)
    assert found(r"^[^\S]$", ws)


@pytest.mark.parametrize("other", ["\x85", "\u180e", "\u200b", "a", "\x1c"])
def test_ecma_not_whitespace(other: str) -> None:
    # Python's \s matches U+0085 and U+001C; ECMA's does not.
    assert not found(r"\s", other)
    assert found(r"^\S$", other)


def test_parse_is_full_match_and_search_is_unanchored() -> None:
    full = nfa_to_byte_dfa(build_nfa(parse_ecma_regex("a|b")))
    assert full.matches(b"a") and not full.matches(b"ab")
    assert found("a|b", "xxbxx")
    assert not found("^a", "ba")


def test_tree_shapes() -> None:
    assert parse_ecma_regex("a{1}") == ast.Chars(CharSet.of("a"))
    assert parse_ecma_regex("a*?") == ast.Repeat(ast.Chars(CharSet.of("a")), 0, None)
    look = parse_ecma_regex("(?<!x)")
    assert look == ast.Assert(ast.BEHIND, CharSet.of("x"), negate=True, text="(?<!...)")


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "column"),
    [
        ("(ab", 1),
        ("a(b(c)", 2),
        ("ab)", 3),
        ("*a", 1),
        ("a|+", 3),
        ("a**", 3),
        ("^*", 2),
        ("$+", 2),
        (r"\b*", 3),
        ("(?<=a)?", 7),
        ("{2}", 1),
        ("a{3,1}", 2),
        ("[z-a]", 2),
        ("ab[cd", 3),
        (r"[\d", 1),
        (r"\u12", 1),
        (r"\u{110000}", 1),
        (r"\u{}", 1),
        (r"\xg0", 1),
        (r"\z", 1),
        (r"a\A", 2),
        (r"\01", 1),
        (r"\c1", 1),
        ("\\", 1),
        (r"(a)\2", 4),
        (r"\k<x>", 1),
        (r"[\B]", 2),
        (r"[\1]", 2),
        ("(?P<n>a)", 2),
        ("(?#comment)", 2),
        ("(?i)abc", 2),
        ("(?<1a>x)", 4),
        (r"\p{Foo}", 1),
        (r"\p{gc=Foo}", 1),
        (r"\p{Lu", 1),
        (r"\pL", 1),
    ],
)
def test_syntax_errors_name_the_column(pattern: str, column: int) -> None:
    with pytest.raises(GrammarError) as info:
        parse_ecma_regex(pattern, where="#/properties/x/pattern")
    assert info.value.column == column
    assert f"column {column}" in str(info.value)
    assert "#/properties/x/pattern" in str(info.value)


@pytest.mark.parametrize(
    ("pattern", "feature", "column"),
    [
        (r"(a)\1", "backreference", 4),
        (r"(?<n>a)\k<n>", "backreference", 8),
        ("x(?=ab)", "lookahead", 2),
        ("(?!ab)", "lookahead", 1),
        ("(?<=ab)c", "lookbehind", 1),
        ("c(?<!a+)", "lookbehind", 2),
        (r"\p{Script=Greek}", "script", 1),
        (r"a\p{sc=Latn}", "script", 2),
        (r"[\p{scx=Latn}]", "script", 2),
        (r"\P{Alphabetic}", "binary property", 1),
        (r"\p{White_Space}", "binary property", 1),
        ("(?i:a)", "modifiers", 1),
    ],
)
def test_unsupported_constructs(pattern: str, feature: str, column: int) -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        parse_ecma_regex(pattern, where="#/pattern")
    assert feature in info.value.feature.lower()
    assert info.value.location == f"#/pattern column {column}"


def test_repetition_budget_refuses_before_building() -> None:
    start = time.perf_counter()
    huge = "9" * 5000
    for pattern in ["(a{1000}){1000}", "a{10001}", "(?:ab){3000}c{5000}", f"x{{{huge}}}"]:
        with pytest.raises(CompileBudgetError):
            parse_ecma_regex(pattern)
    assert time.perf_counter() - start < 1.0
    assert isinstance(parse_ecma_regex("a{10000}"), ast.Repeat)
    with pytest.raises(GrammarError):
        parse_ecma_regex(f"(a)\\{huge}")
    with pytest.raises(CompileBudgetError):
        parse_ecma_regex("(" * 500 + "a" + ")" * 500)


_TOKENS = [
    *"ab-.^$|()[]*+?{},0é😀",
    "(?:", "(?=", "(?!", "(?<=", "(?<!", "(?<n>", "[^", "{2}", "{1,2}", "{,2}", r"\d", r"\w",
    r"\s", r"\b", r"\B", r"\-", r"\u0061", r"\u{62}", r"\x61", r"\1", r"\0", r"\p{Lu}",
    r"\P{L}", r"\k<n>", "\\", r"\c", r"\cA", r"\z", r"\]", r"\uD83D\uDE00",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=8).map("".join))
def test_any_pattern_parses_or_is_refused_cleanly(pattern: str) -> None:
    try:
        node = ecma_search_node(pattern)
    except (GrammarError, UnsupportedFeatureError, CompileBudgetError):
        return
    nfa_to_byte_dfa(build_nfa(node), max_states=50000)


# -- the JSON Schemas of MaskBench ------------------------------------------------------------


def _patterns_in(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            if key == "patternProperties" and isinstance(value, dict):
                yield from value
            yield from _patterns_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from _patterns_in(value)


@functools.lru_cache(maxsize=1)
def _maskbench_patterns() -> tuple[str, ...]:
    found_: dict[str, None] = {}
    for path in sorted(MASKBENCH.iterdir()):
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(data, dict):
            found_.update(dict.fromkeys(_patterns_in(data.get("schema"))))
    return tuple(found_)


def _reason(feature: str) -> str:
    """The kind of an unsupported construct, without how it was written."""
    words = itertools.takewhile(lambda w: w.replace("-", "").isalpha(), feature.split())
    return " ".join(words) or feature


def _sweep(patterns: tuple[str, ...]) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for pattern in patterns:
        try:
            nfa_to_byte_dfa(build_nfa(ecma_search_node(pattern)), max_states=50000)
        except UnsupportedFeatureError as e:
            counts[f"unsupported: {_reason(e.feature)}"] += 1
        except GrammarError:
            counts["syntax error"] += 1
        except CompileBudgetError:
            counts["over budget"] += 1
        else:
            counts["parsed"] += 1
    print(f"\nMaskBench patterns: {len(patterns)} distinct: {dict(counts)}")
    return counts


needs_maskbench = pytest.mark.skipif(
    not MASKBENCH.is_dir(), reason=f"MaskBench schemas not found at {MASKBENCH}"
)


@needs_maskbench
def test_maskbench_patterns_sample() -> None:
    patterns = _maskbench_patterns()[:FAST_SAMPLE]
    counts = _sweep(patterns)
    assert sum(counts.values()) == len(patterns)
    assert counts["parsed"] >= 0.9 * len(patterns)


@pytest.mark.slow
@needs_maskbench
def test_maskbench_patterns_all() -> None:
    patterns = _maskbench_patterns()
    counts = _sweep(patterns)
    assert sum(counts.values()) == len(patterns)
    assert counts["parsed"] >= 0.9 * len(patterns)
