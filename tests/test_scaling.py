"""Costs that grow with the size of the input stay bounded: long outputs keep chart sets
of one size (tail recursion read as left recursion), long literals are chains of sparse
rows, wide schemas compile in time proportional to their rules (FOLLOW sets by strongly
connected components). Behaviour is asserted (sizes, languages), never time."""

from __future__ import annotations

import json
import re

import lark
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tokenizers import load_vocab

import corral
from corral.automata.kernels.layout import S_L, S_P
from corral.grammar.follow import union_closure
from corral.grammar.regex.sparse import SparseDFA


@pytest.fixture(scope="module")
def vocab():  # type: ignore[no-untyped-def]
    return load_vocab("gpt2")


def largest_set(m: corral.Matcher) -> int:
    """The most parser and lexeme items of one set of the matcher's chart."""
    c = m.chart
    S, k = c.S, c.n_sets
    sizes = np.diff(S[: k + 1, S_P]) + np.diff(S[: k + 1, S_L])
    return int(sizes.max())


LONG = [
    ({"type": "array", "items": {"type": "integer"}}, lambda n: json.dumps(list(range(n)))[:-1]),
    (
        {"type": "object", "additionalProperties": {"type": "integer"}},
        lambda n: json.dumps({f"k{i}": i for i in range(n)})[:-1],
    ),
    ('start: "a" start | "a"', lambda n: "a" * n),
    ('start: item ("," start)?\nitem: /[0-9]+/', lambda n: ",".join(["12"] * n)),
    ('start: x\nx: "(" x ")" x |', lambda n: "()" * n),
]


@pytest.mark.parametrize(("spec", "text"), LONG)
def test_long_outputs_keep_chart_sets_the_same_size(vocab, spec, text) -> None:  # type: ignore[no-untyped-def]
    """A repetition of n or 8n items builds no larger sets (a right-recursive rule would
    hold one item per repetition in each set where an item ends, and the matcher's work
    per token would grow with the output)."""
    c = corral.compile(spec, vocab)
    sizes = []
    for n in (50, 400):
        m = c.matcher()
        assert m.consume_bytes(text(n).encode())
        sizes.append(largest_set(m))
    assert sizes[0] == sizes[1]


GRAMMARS = [
    'start: "a" start | "b"',
    'start: "a" start | "b" start | "c" | ',
    'start: item ("," start)?\nitem: "x" | "[" start? "]"',
    'start: "(" start ")" start | ',  # tail call beside a nested call
    'start: a\na: "x" a | b\nb: "y" b | "z"',
    'start: "a" start "b" | "c"',  # not a tail call: left as it is
]


@pytest.mark.parametrize("grammar", GRAMMARS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_rewritten_rules_keep_the_language(vocab, grammar, data) -> None:  # type: ignore[no-untyped-def]
    """The matcher accepts exactly what Lark's own Earley parser of the grammar parses."""
    alphabet = sorted(set(re.findall(r'"([^"]*)"', grammar)) - {""})
    text = "".join(data.draw(st.lists(st.sampled_from(alphabet), max_size=12)))
    parser = lark.Lark(grammar, parser="earley", lexer="dynamic")
    try:
        parser.parse(text)
        expected = True
    except lark.exceptions.LarkError:
        expected = False
    m = corral.compile(grammar, vocab).matcher()
    assert (m.consume_bytes(text.encode()) and m.is_accepting()) == expected


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 255), min_size=n, max_size=n),
    st.lists(st.lists(st.integers(0, n - 1), max_size=3), min_size=n, max_size=n),
)))  # fmt: skip
def test_union_closure_is_the_least_fixpoint(case: tuple[list[int], list[list[int]]]) -> None:
    init, sources = case
    expected = list(init)
    changed = True
    while changed:  # the naive fixpoint
        changed = False
        for i, srcs in enumerate(sources):
            v = expected[i]
            for j in srcs:
                v |= expected[j]
            if v != expected[i]:
                expected[i], changed = v, True
    assert union_closure(init, sources) == expected


def test_a_megabyte_const_is_a_chain_of_sparse_rows(vocab) -> None:  # type: ignore[no-untyped-def]
    """A dense row per byte would be a gigabyte of lexer table."""
    text = "ab" * 500_000
    g = corral.Grammar.from_json_schema({"const": text})
    (dfa,) = [t.dfa for t in g.terminals.values() if t.dfa.n_states > 1000]
    assert isinstance(dfa, SparseDFA) and dfa.n_transitions == len(text) + 2
    c = corral.compile(g, vocab)
    assert c.tables.nbytes() < 64 << 20
    m = c.matcher()
    doc = json.dumps(text).encode()
    assert m.consume_bytes(doc[:-2])
    assert not m.is_accepting() and not m.fork().consume_bytes(b'a"')
    assert m.consume_bytes(doc[-2:]) and m.is_accepting()


def test_a_megabyte_lark_literal_is_a_chain_of_sparse_rows(vocab) -> None:  # type: ignore[no-untyped-def]
    text = "xy" * 500_000
    g = corral.Grammar.from_lark(f'start: "{text}" "!"')
    assert sorted(type(t.dfa).__name__ for t in g.terminals.values()) == ["ByteDFA", "SparseDFA"]
    m = corral.compile(g, vocab).matcher()
    assert m.consume_bytes(text.encode() + b"!") and m.is_accepting()


def test_literal_chain() -> None:
    d = SparseDFA.literal(b"abc")
    assert d.matches(b"abc") and not d.matches(b"ab") and not d.matches(b"abcd")
    assert SparseDFA.literal(b"").matches(b"") and not SparseDFA.literal(b"").matches(b"a")
    assert np.array_equal(d.row_start, [0, 1, 2, 3, 3])


def test_five_thousand_optional_properties(vocab) -> None:  # type: ignore[no-untyped-def]
    """Each property's FOLLOW set holds the names of all later ones: a worklist fixpoint
    went round the chain of optional properties once per property."""
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(5000)}}
    m = corral.compile(schema, vocab).matcher()
    assert m.consume_bytes(b'{"p3": 1, "p4999": 2}') and m.is_accepting()
    assert not m.fork().consume_bytes(b', "p4999"')  # after p4999, no property may follow
