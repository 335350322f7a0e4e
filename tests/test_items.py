"""The parser's item arrays (``automata/items.py``, one kernel) against their definition:
each production's symbols then ``-1``, the productions each nonterminal predicts in
production order, and the nullable nonterminals of the Python worklist
(:func:`corral.grammar.follow.nullable_nonterminals`)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.automata.items import items_of
from corral.grammar.follow import nullable_nonterminals


@st.composite
def productions(draw):  # type: ignore[no-untyped-def]
    NT = draw(st.integers(0, 4))
    NN = draw(st.integers(1, 8))
    symbol = st.integers(0, NT + NN - 1)
    prods = [(0, [NT + draw(st.integers(0, NN - 1))])]  # S' -> a nonterminal, first
    prods += draw(
        st.lists(st.tuples(st.integers(0, NN - 1), st.lists(symbol, max_size=4)), max_size=14)
    )
    return NT, NN, prods


@settings(max_examples=200, deadline=None)
@given(productions())
def test_items_of_is_its_definition(case) -> None:  # type: ignore[no-untyped-def]
    NT, NN, prods = case
    lhs = np.array([p[0] for p in prods], np.int32)
    lens = np.array([len(p[1]) for p in prods], np.int64)
    rhs = np.array([s for p in prods for s in p[1]], np.int32)
    item_sym, item_lhs, first_item, pred_start, pred_items, nullable = items_of(
        lhs, lens, rhs, NT, NN
    )
    want_sym: list[int] = []
    want_lhs: list[int] = []
    want_first: list[int] = []
    for a, r in prods:
        want_first.append(len(want_sym))
        want_sym += [*r, -1]
        want_lhs += [a] * (len(r) + 1)
    assert item_sym.tolist() == want_sym and item_lhs.tolist() == want_lhs
    assert first_item.tolist() == want_first
    for a in range(NN):
        got = pred_items[pred_start[a] : pred_start[a + 1]].tolist()
        assert got == [want_first[p] for p, (b, _) in enumerate(prods) if b == a]
    assert pred_start[NN] == len(prods)
    assert nullable.astype(bool).tolist() == nullable_nonterminals(prods, NT, NN)
