"""Counted repetition (``grammar/json_schema/repeat.py``): the language, unambiguity and
size of the rules, checked with Lark's Earley parser, and arrays with large bounds."""

from __future__ import annotations

import json

import lark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tokenizers import load_tokenizer, load_vocab
from support.words import accepts

import corral
from corral.grammar.json_schema.grammar_builder import GrammarBuilder
from corral.grammar.json_schema.options import Options
from corral.grammar.json_schema.repeat import CHAIN_MAX, HitCounts, repeat


def _lark_text(lo: int, hi: int | None, unit: tuple[str, ...]) -> tuple[str, int]:
    """A Lark grammar of ``repeat(unit, lo, hi)`` (terminal ``X`` is ``x``, ``C`` is
    ``,``) and its number of rules."""
    b = GrammarBuilder(Options())
    top = repeat(b, unit, lo, hi)
    alts: dict[str, list[str]] = {}
    for r in b.rules:
        alts.setdefault(r.lhs, []).append(" ".join(r.rhs))
    lines = [f"start: {top}"]
    lines += [f"{lhs}: " + " | ".join(a) for lhs, a in alts.items()]
    lines += ['X: "x"', 'C: ","']
    return "\n".join(lines), len(b.rules)


def _ambiguous(tree: lark.Tree) -> bool:
    return any(t.data == "_ambig" for t in tree.iter_subtrees())


def _check(lo: int, hi: int | None, unit: tuple[str, ...], word: str) -> None:
    text, _ = _lark_text(lo, hi, unit)
    parser = lark.Lark(text, parser="earley", ambiguity="explicit")
    top = (hi if hi is not None else lo + 2 * CHAIN_MAX) + 3
    for n in range(top):
        want = n >= lo and (hi is None or n <= hi)
        try:
            tree = parser.parse(word * n)
        except lark.exceptions.LarkError:
            assert not want, (lo, hi, n)
            continue
        assert want, (lo, hi, n)
        assert not _ambiguous(tree), (lo, hi, n)


@pytest.mark.parametrize(
    "lo, hi",
    [
        *[(0, 0), (0, 1), (3, 3), (0, CHAIN_MAX), (0, CHAIN_MAX + 1), (0, 31), (0, 32), (0, 33)],
        *[(5, 100), (17, 17), (20, 64), (CHAIN_MAX + 1, None), (40, None), (0, None)],
    ],
)
def test_bounds_around_the_chain_and_powers_of_two(lo: int, hi: int | None) -> None:
    _check(lo, hi, ("X",), "x")
    _check(lo, hi, ("C", "X"), ",x")  # a unit of two symbols


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 60), st.one_of(st.none(), st.integers(0, 70)))
def test_any_bounds_give_the_counts_between_them_unambiguously(lo: int, span: int | None) -> None:
    _check(lo, None if span is None else lo + span, ("X",), "x")


def test_rules_grow_with_the_logarithm_of_the_bounds() -> None:
    sizes = {hi: _lark_text(0, hi, ("X",))[1] for hi in (1_000, 10**6, 10**12)}
    assert sizes[1_000] < 60 and sizes[10**12] < 300, sizes
    assert _lark_text(10**6, 2 * 10**6, ("X",))[1] < 200
    with pytest.raises(ValueError):
        repeat(GrammarBuilder(Options()), ("X",), 3, 2)


def _hits_parser(lo: int, hi: int | None, least: int, need: int) -> lark.Lark | None:
    """Lark's Earley parser of ``HitCounts`` with unit ``X`` (``x``) and hit ``Y`` (``y``),
    or ``None`` where the count range holds no string (no rule for it: the builder's
    ``drop_undefined`` removes its uses)."""
    b = GrammarBuilder(Options())
    top = HitCounts(b, ("X",), ("Y",), least).of(lo, hi, need)
    alts: dict[str, list[str]] = {}
    for r in b.rules:
        alts.setdefault(r.lhs, []).append(" ".join(r.rhs))
    if top not in alts:
        return None
    lines = [f"start: {top}", *(f"{a}: " + " | ".join(x) for a, x in alts.items())]
    return lark.Lark("\n".join([*lines, 'X: "x"', 'Y: "y"']), parser="earley", ambiguity="explicit")


@settings(max_examples=12, deadline=None)
@given(
    st.integers(0, 40),
    st.one_of(st.none(), st.integers(0, 45)),
    st.integers(0, 3),
    st.data(),
)
def test_counts_with_hits_are_exact_and_unambiguous(  # type: ignore[no-untyped-def]
    lo: int, span: int | None, least: int, data
) -> None:
    need = data.draw(st.integers(0, least))
    hi = None if span is None else lo + span
    parser = _hits_parser(lo, hi, least, need)
    top = (hi if hi is not None else lo + 2 * CHAIN_MAX) + 2
    rng = data.draw(st.randoms(use_true_random=False))
    for n in range(top):
        for y in sorted({0, need - 1, need, min(n, need + 1), n} & set(range(n + 1))):
            cells = ["y"] * y + ["x"] * (n - y)
            rng.shuffle(cells)
            want = lo <= n and (hi is None or n <= hi) and y >= need
            if parser is None:
                assert not want, (lo, hi, least, need, cells)
                continue
            try:
                tree = parser.parse("".join(cells))
            except lark.exceptions.LarkError:
                assert not want, (lo, hi, least, need, cells)
                continue
            assert want, (lo, hi, least, need, cells)
            assert not _ambiguous(tree), (lo, hi, least, need, cells)


# -- arrays ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama3():  # type: ignore[no-untyped-def]
    return load_tokenizer("llama3"), load_vocab("llama3")


def _array(n: int, prefix: int) -> str:
    return json.dumps(["p"] * min(n, prefix) + list(range(max(0, n - prefix))))


@pytest.mark.parametrize(
    "lo, hi, prefix",
    [(0, 1000, 0), (20, 300, 0), (0, 100, 2), (50, 5000, 3), (1, 1, 0), (2, 2, 3)],
)
def test_arrays_hold_exactly_min_to_max_items(llama3, lo: int, hi: int, prefix: int) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "array",
        **({"prefixItems": [{"const": "p"}] * prefix} if prefix else {}),
        "items": {"type": "integer"},
        "minItems": lo,
        "maxItems": hi,
    }
    assert len(corral.Grammar.from_json_schema(schema).rules) < 120
    c = corral.compile(schema, vocab)
    for n in sorted({0, 1, lo - 1, lo, lo + 1, hi - 1, hi, hi + 1} - {-1}):
        want = lo <= n <= hi
        assert accepts(c, tok, _array(n, prefix)) == want, n


def test_a_bound_of_any_size_is_exact() -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 10**9}
    findings = {f.pointer: f.status for f in corral.explain(schema).findings}
    assert findings["/maxItems"] == "exact" and findings["/minItems"] == "exact"
    assert len(corral.Grammar.from_json_schema(schema).rules) < 200
    schema = {**schema, "$schema": "https://json-schema.org/draft/2020-12/schema"}
    schema |= {"contains": {"const": 7}, "minContains": 2}
    findings = {f.pointer: f.status for f in corral.explain(schema).findings}
    assert findings["/contains"] == "exact" and findings["/minContains"] == "exact"
    assert len(corral.Grammar.from_json_schema(schema).rules) < 1500


def test_an_item_costs_the_same_chart_work_at_any_position(llama3) -> None:  # type: ignore[no-untyped-def]
    """The Earley items one more item adds do not grow with the items before it (a chain
    of one rule per count was right-recursive: item ``i`` completed ``i`` rules)."""
    from corral.automata.kernels.layout import S_P

    _, vocab = llama3
    c = corral.compile({"type": "array", "items": {"type": "integer"}, "maxItems": 1000}, vocab)
    added = []
    for n in (10, 100, 900):
        m = c.matcher()
        assert m.consume_bytes(("[" + ",".join("7" * n)).encode())
        k = m.chart.n_sets
        assert m.consume_bytes(b",7")
        added.append(int(m.chart.S[m.chart.n_sets, S_P] - m.chart.S[k, S_P]))
    assert max(added) <= min(added) + 4, added
    assert m.consume_bytes(b"]") and m.is_accepting()


@pytest.mark.parametrize("lo, hi, least", [(0, 1000, 1), (30, 200, 3), (25, None, 2)])
def test_arrays_with_contains_hold_exactly_what_they_must(
    llama3, lo: int, hi: int | None, least: int
) -> None:  # type: ignore[no-untyped-def]
    tok, vocab = llama3
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "array",
        "items": {"type": "integer"},
        "contains": {"const": 7},
        "minContains": least,
        "minItems": lo,
        **({"maxItems": hi} if hi is not None else {}),
    }
    assert len(corral.Grammar.from_json_schema(schema).rules) < 600
    c = corral.compile(schema, vocab)
    top = hi if hi is not None else lo + 40
    for n in sorted({lo - 1, lo, lo + 1, top - 1, top, top + 1, least - 1, least} - {-1}):
        for sevens in sorted({least - 1, least, n} & set(range(n + 1))):
            arr = [0] * (n - sevens) + [7] * sevens
            want = max(lo, least) <= n and (hi is None or n <= hi) and sevens >= least
            assert accepts(c, tok, json.dumps(arr)) == want, (n, sevens)


@pytest.mark.parametrize("bound", [{"maxItems": 1000}, {}])
@pytest.mark.parametrize("value", [b"1", b"7"])
def test_an_item_under_contains_costs_the_same_chart_work_at_any_position(  # type: ignore[no-untyped-def]
    llama3, bound: dict[str, int], value: bytes
) -> None:
    """Also when every item satisfies ``contains`` (7): read right to left, each hit that
    may be the one counted started its own rest of the array."""
    from corral.automata.kernels.layout import S_P

    _, vocab = llama3
    schema = {"type": "array", "items": {"type": "integer"}, "contains": {"const": 7}}
    c = corral.compile({**schema, **bound}, vocab)
    added = []
    for n in (10, 100, 900):
        m = c.matcher()
        assert m.consume_bytes(b"[7" + b"," + b",".join([value] * n))
        k = m.chart.n_sets
        assert m.consume_bytes(b"," + value)
        added.append(int(m.chart.S[m.chart.n_sets, S_P] - m.chart.S[k, S_P]))
    assert max(added) <= 2 * min(added), added  # the chain: about 10, 100 and 900 more
    assert m.consume_bytes(b"]") and m.is_accepting()


# -- objects ---------------------------------------------------------------------------


def _object(n: int, named: list[str]) -> str:
    """``n`` pairs: the ``named`` properties first (schema order), then others."""
    pairs = [(k, 1) for k in named[:n]] + [(f"x{i}", 2) for i in range(max(0, n - len(named)))]
    return json.dumps(dict(pairs))


@pytest.mark.parametrize(
    "lo, hi, named, required",
    [
        (0, 1000, 0, 0),  # a map of at most 1,000 pairs
        (20, 300, 2, 1),
        (17, 17, 3, 3),
        (40, None, 1, 0),
        (0, 20, 2, 0),
        (2, 5000, 3, 2),
    ],
)
def test_objects_hold_exactly_min_to_max_properties(  # type: ignore[no-untyped-def]
    llama3, lo: int, hi: int | None, named: int, required: int
) -> None:
    tok, vocab = llama3
    names = [f"n{i}" for i in range(named)]
    schema = {
        "type": "object",
        "properties": {k: {"type": "integer"} for k in names},
        "required": names[:required],
        "additionalProperties": {"type": "integer"},
        "minProperties": lo,
        **({"maxProperties": hi} if hi is not None else {}),
    }
    assert len(corral.Grammar.from_json_schema(schema).rules) < 150
    c = corral.compile(schema, vocab)
    top = hi if hi is not None else lo + 40
    for n in sorted({0, 1, lo - 1, lo, lo + 1, top - 1, top, top + 1} - {-1}):
        want = max(lo, required) <= n and (hi is None or n <= hi)
        assert accepts(c, tok, _object(n, names)) == want, n
        if n > 0 and required < min(n, named):  # the optional named ones left out
            text = json.dumps(
                {k: 1 for k in names[:required]} | {f"x{i}": 2 for i in range(n - required)}
            )
            assert accepts(c, tok, text) == want, (n, "optional left out")


def test_a_property_bound_of_any_size_is_exact() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": {"type": "integer"},
        "maxProperties": 10**9,
    }
    findings = {f.pointer: f.status for f in corral.explain(schema).findings}
    assert findings["/maxProperties"] == "exact"
    assert len(corral.Grammar.from_json_schema(schema).rules) < 200


@pytest.mark.parametrize(
    "bound",
    [{"maxProperties": 1000}, {"minProperties": 400}, {"minProperties": 300, "maxProperties": 900}],
)
def test_a_pair_costs_the_same_chart_work_at_any_position(llama3, bound: dict[str, int]) -> None:  # type: ignore[no-untyped-def]
    """One more additional pair adds Earley items that do not grow with the pairs before
    it (counted by a chain of one rule per count, pair ``i`` completed ``i`` rules)."""
    from corral.automata.kernels.layout import S_P

    _, vocab = llama3
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": {"type": "integer"},
        **bound,
    }
    c = corral.compile(schema, vocab)
    added = []
    for n in (10, 100, 500):
        m = c.matcher()
        assert m.consume_bytes(('{"a":1' + "".join(f',"k{i}":1' for i in range(n))).encode())
        k = m.chart.n_sets
        assert m.consume_bytes(f',"k{n}":1'.encode())
        added.append(int(m.chart.S[m.chart.n_sets, S_P] - m.chart.S[k, S_P]))
    assert max(added) <= 3 * min(added) and max(added) < 100, added  # the chain: 500 more
