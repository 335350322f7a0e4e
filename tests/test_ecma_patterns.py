"""ECMA-262 ``pattern`` semantics end to end: every feature is compiled exactly, checked at
the end with ECMA-262 semantics, or refused by name.

Each feature gets a schema, a small alphabet and a predicate written by hand for that
alphabet. Every string over the alphabet up to a length is fed through a compiled matcher
(Llama-3 tokens), and the set of strings it accepts to EOS must be exactly the set the
predicate accepts, and the set Node.js's ``RegExp(pattern, 'u')`` accepts where ``node`` is
installed (an independent ECMA-262 engine). A differential test then runs the evaluator
against Node.js on random patterns.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import ecma_oracle
from support.tokenizers import load_tokenizer, load_vocab

import corral
from corral import GrammarError, UnsupportedFeatureError
from corral.grammar.json_schema import FINAL_CHECK
from corral.grammar.json_schema.ecma import EcmaPattern, MatchBudgetError
from corral.grammar.json_schema.validation import FinalCheckWarning


@pytest.fixture(scope="module")
def llama3():  # type: ignore[no-untyped-def]
    return load_tokenizer("llama3"), load_vocab("llama3")


def _accepted(compiled: corral.CompiledGrammar, tok: Any, text: str) -> bool:
    """Fed token by token, every token allowed by the mask, EOS allowed at the end."""
    m = compiled.matcher()
    mask = corral.allocate_bitmask(1, compiled.vocab_size)
    words = mask.view(np.uint32)[0]
    for t in tok.encode(text, add_special_tokens=False):
        m.fill_bitmask(mask)
        allowed = bool(words[t >> 5] >> (t & 31) & 1)
        if not m.try_consume(t):
            assert not allowed, f"token {t} in the mask but refused in {text!r}"
            return False
        assert allowed, f"token {t} consumed but not in the mask in {text!r}"
    m.fill_bitmask(mask)
    eos = int(compiled.eos_ids[0])
    eos_allowed = bool(words[eos >> 5] >> (eos & 31) & 1)
    assert eos_allowed == m.is_accepting(), text
    return eos_allowed


def _strings(alphabet: str, max_len: int) -> list[str]:
    return ["".join(p) for n in range(max_len + 1) for p in itertools.product(alphabet, repeat=n)]


# (id, pattern, other keywords, alphabet, max length, predicate on the decoded string)
Feature = tuple[str, str, dict[str, Any], str, int, Callable[[str], bool]]
# fmt: off
FEATURES: list[Feature] = [
    ("variable-length lookbehind", "(?<=a+)b", {}, "abz", 4,
     lambda s: re.search("a+b", s) is not None),
    ("negative lookbehind", "^.(?<!a.)$|^..(?<!ab)$", {}, "ab", 3,
     lambda s: len(s) == 1 or (len(s) == 2 and s != "ab")),
    ("lookahead of any length", "^(?=.*b)(?=.*a).{2,3}$", {}, "abz", 3,
     lambda s: 2 <= len(s) <= 3 and "a" in s and "b" in s),
    ("negative lookahead of any length", "^(?!ab)[ab]*$", {}, "ab", 4,
     lambda s: not s.startswith("ab")),
    ("named group", "^(?<x>[a-z]+)$", {"not": {"const": "ab"}}, "ab1", 3,
     lambda s: s != "ab" and bool(s) and set(s) <= set("ab")),
    ("numbered backreference", "^(a|b)\\1$", {}, "ab", 3, lambda s: s in ("aa", "bb")),
    ("named backreference", "^(?<x>a|bb)\\k<x>$", {}, "ab", 4, lambda s: s in ("aa", "bbbb")),
    ("forward reference matches empty", "^\\1(a)$", {}, "ab", 2, lambda s: s == "a"),
    ("captures cleared in each iteration", "^(?:(a)|b)+\\1$", {}, "ab", 4,
     lambda s: _last_iter_a(s)),
    # a lookbehind matches right to left: \1 comes before (a) has matched, so it is empty
    ("backreference inside lookbehind", "(?<=(a)\\1)b", {}, "ab", 4, lambda s: "ab" in s),
    ("backreference inside lookbehind, group on the right", "(?<=\\1(a))b", {}, "ab", 4,
     lambda s: "aab" in s),
    ("General_Category property", "^\\p{Lu}\\p{Ll}$", {}, "aBé", 2,
     lambda s: len(s) == 2 and s[0].isupper() and s[1].islower()),
    ("negated property", "^\\P{L}$", {}, "a1-", 1, lambda s: s in ("1", "-")),
    # read with the u flag, as ajv does: \p{L} is a property, never the letters p{L}
    ("\\p{...} is a property", "^\\p{L}$", {}, "ap{L}1", 4, lambda s: len(s) == 1 and s.isalpha()),
    ("Annex B literal brace", "^a{,2}$", {}, "a{,2}", 5, lambda s: s == "a{,2}"),
    ("Annex B identity escape and class escape range", "^[\\w-.]\\-$", {}, "a.-+", 2,
     lambda s: len(s) == 2 and s[0] in "a.-" and s[1] == "-"),
    ("Annex B quantified lookahead", "^(?=a)*a$", {}, "ab", 2, lambda s: s == "a"),
    ("$ is the end of the text only", "^a$", {"not": {"const": "b"}}, "a\n", 2,
     lambda s: s == "a"),
    ("\\d is ASCII only", "^\\d$", {}, "1\u0663", 1, lambda s: s == "1"),
    ("dot excludes line terminators", "^.$", {}, "a\r\u2028", 1, lambda s: s == "a"),
    ("\\s includes U+FEFF, not U+001C", "^\\s$", {}, " \ufeff\x1c", 1,
     lambda s: s in (" ", "\ufeff")),
    ("\\b uses ASCII word characters", "\\bé", {}, "aé ", 3, lambda s: "aé" in s),
]
# fmt: on


def _last_iter_a(s: str) -> bool:
    """``^(?:(a)|b)+\\1$`` on ``s``: some split ``s = w + t`` where ``w`` matches
    ``(?:(a)|b)+`` and ``t`` equals the group's last value (empty if the last iteration
    took ``b``)."""
    for cut in range(1, len(s) + 1):
        w, t = s[:cut], s[cut:]
        if set(w) <= set("ab") and t == ("a" if w[-1] == "a" else ""):
            return True
    return False


@pytest.mark.parametrize("feature", FEATURES, ids=[f[0] for f in FEATURES])
def test_pattern_feature_end_to_end(llama3, feature: Feature) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    _, pattern, extra, alphabet, max_len, predicate = feature
    schema = {"type": "string", "pattern": pattern, **extra}
    compiled = corral.compile(schema, vocab)
    strings = _strings(alphabet, max_len)
    got = {s for s in strings if _accepted(compiled, tok, json.dumps(s, ensure_ascii=False))}
    want = {s for s in strings if predicate(s)}
    assert got == want, (sorted(got - want)[:5], sorted(want - got)[:5])
    if ecma_oracle.available():
        verdicts = ecma_oracle.search_many([(pattern, s) for s in strings], annex_b=True)
        node = {s for s, v in zip(strings, verdicts, strict=True) if v is True}
        if extra.get("not", {}).get("const") is not None:
            node.discard(extra["not"]["const"])
        assert got == node, (sorted(got - node)[:5], sorted(node - got)[:5])


def test_issue_examples_never_accepted(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    c = corral.compile({"type": "string", "pattern": "(?<=a+)b"}, vocab)
    assert not _accepted(c, tok, '"zzz"')
    assert not _accepted(c, tok, '"b"')
    assert _accepted(c, tok, '"xaab"')
    c = corral.compile(
        {"type": "string", "pattern": "^(?<x>[a-z]+)$", "not": {"const": "abc"}}, vocab
    )
    assert not _accepted(c, tok, '"abc"')
    assert _accepted(c, tok, '"abd"')


def test_not_pattern_uses_ecma_semantics(llama3) -> None:  # type: ignore[no-untyped-def]
    """Inside ``not`` only the final check enforces a pattern: Python's ``re`` would read
    ``\\d`` as any Unicode digit and ``$`` as also before a final newline."""
    tok, vocab = llama3
    c = corral.compile({"type": "string", "not": {"pattern": "^\\d$"}}, vocab)
    assert _accepted(c, tok, json.dumps("\u0663", ensure_ascii=False))
    assert not _accepted(c, tok, '"3"')
    c = corral.compile({"type": "string", "not": {"pattern": "^a$"}}, vocab)
    assert _accepted(c, tok, '"a\\n"')
    assert not _accepted(c, tok, '"a"')


def test_pattern_properties_and_property_names(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    schema = {
        "type": "object",
        "patternProperties": {"^(?<p>[ab])\\k<p>$": {"type": "integer"}},
        "additionalProperties": False,
    }
    c = corral.compile(schema, vocab)
    assert _accepted(c, tok, '{"aa": 1}')
    assert not _accepted(c, tok, '{"ab": 1}')
    c = corral.compile({"type": "object", "propertyNames": {"pattern": "(?<=x)y"}}, vocab)
    assert _accepted(c, tok, '{"xy": 1}')
    assert not _accepted(c, tok, '{"y": 1}')


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        ("(?i:a)b", "inline modifiers"),
        ("^\\p{Script=Greek}$", "Unicode script property"),
        ("^\\p{Alphabetic}$", "Unicode binary property"),
    ],
)
def test_unimplemented_constructs_are_refused_by_name(pattern: str, construct: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}}
    with pytest.raises(UnsupportedFeatureError) as e:
        corral.Grammar.from_json_schema(schema)
    assert construct in e.value.feature
    assert "/properties/a/pattern" in e.value.location


@pytest.mark.parametrize("pattern", ["(?i)a", "(?P<x>a)", "a\\1", "(?<x>a)(?<x>b)", "\\p"])
def test_malformed_patterns_are_errors(pattern: str) -> None:
    with pytest.raises(GrammarError):
        corral.Grammar.from_json_schema({"type": "string", "pattern": pattern})


def test_non_regular_patterns_are_left_to_the_final_check() -> None:
    findings = corral.explain({"type": "string", "pattern": "^(a+)\\1$"})
    f = next(f for f in findings.findings if f.keyword == "pattern")
    assert f.status == FINAL_CHECK and "backreference" in f.detail
    with pytest.raises(UnsupportedFeatureError, match="pattern"):
        corral.Grammar.from_json_schema(
            {"type": "string", "pattern": "^(a+)\\1$"}, final_check=False
        )


def test_backtracking_budget_refuses_instead_of_hanging() -> None:
    p = EcmaPattern("^(a+)+\\1?b$", max_steps=50_000)
    with pytest.raises(MatchBudgetError):
        p.search("a" * 40 + "c")
    grammar = corral.Grammar.from_json_schema({"type": "string", "pattern": "^(a+)+\\1?b$"})
    check = grammar.final_check
    assert check is not None
    check.validation.patterns.max_steps = 50_000  # type: ignore[attr-defined]
    with pytest.warns(FinalCheckWarning, match="backtracking"):
        assert not check(json.dumps("a" * 40 + "c").encode())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check(b'"aab"')


def test_regular_patterns_fall_back_to_their_automaton() -> None:
    """A regular pattern that backtracks exponentially is answered by its automaton."""
    p = EcmaPattern("^(a|a)*b$")
    assert p.irregular is None
    assert not p.search("a" * 60)
    assert p.search("a" * 60 + "b")


# -- differential test against an independent engine -----------------------------------------


def _random_pattern(rng: random.Random, depth: int, groups: list[str | None]) -> str:
    r = rng.random()
    if depth > 3 or r < 0.3:
        c = rng.random()
        if c < 0.45:
            return rng.choice(["a", "b", "1", " "])
        if c < 0.6:
            return rng.choice([".", "[ab]", "[^a]", "\\d", "\\w", "\\s", "\\W", "[a-b1]"])
        if c < 0.75 and groups:
            i = rng.randrange(len(groups))
            name = groups[i]
            return f"\\k<{name}>" if name and rng.random() < 0.5 else f"\\{i + 1}"
        return rng.choice(["^", "$", "\\b", "\\B", "a"])
    if r < 0.45:
        return "".join(_random_pattern(rng, depth + 1, groups) for _ in range(rng.randint(2, 3)))
    if r < 0.55:
        return (
            _random_pattern(rng, depth + 1, groups) + "|" + _random_pattern(rng, depth + 1, groups)
        )
    if r < 0.7:
        kind = rng.choice(["(", "(?:", "(?<"])
        if kind == "(?:":
            return "(?:" + _random_pattern(rng, depth + 1, groups) + ")"
        name = f"g{len(groups)}" if kind == "(?<" else None
        groups.append(name)
        head = f"(?<{name}>" if name else "("
        return head + _random_pattern(rng, depth + 1, groups) + ")"
    if r < 0.85:
        body = _random_pattern(rng, depth + 1, groups)
        q = rng.choice(["*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}", "*?", "+?", "??", "{1,2}?"])
        return "(?:" + body + ")" + q
    look = rng.choice(["(?=", "(?!", "(?<=", "(?<!"])
    return look + _random_pattern(rng, depth + 1, groups) + ")"


@pytest.mark.skipif(
    not ecma_oracle.available(), reason="node (an independent ECMA-262 engine) is not installed"
)
@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_evaluator_agrees_with_node(seed: int) -> None:
    rng = random.Random(seed)
    cases = []
    for _ in range(60):
        pattern = _random_pattern(rng, 0, [])
        for _ in range(4):
            text = "".join(rng.choice("ab1 é") for _ in range(rng.randint(0, 8)))
            cases.append((pattern, text))
    verdicts = ecma_oracle.search_many(cases)
    for (pattern, text), want in zip(cases, verdicts, strict=True):
        if want == "syntax":  # not valid with the u flag (an Annex B leniency of corral's)
            continue
        try:
            got = EcmaPattern(pattern).search(text)
        except MatchBudgetError:
            continue
        assert got == want, (pattern, text)
