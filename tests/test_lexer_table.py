"""The global lexer table (``automata/tables.py``): every dense terminal's automaton, byte
by byte, in the coarsest byte classes.

Checked against the definition, not against another layout: for every terminal, state
and byte, ``lex_trans[start + s, byte_class[b]]`` is the terminal's own next state moved
to ``start`` (or ``-1``; the trap where the terminal forbids its lexeme to end before
``b``; nothing at all for a terminal that stands for a special token), and two bytes
share a class only when every row reads them alike.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.automata.kernels.layout import H_TRAP
from corral.automata.tables import _equal_columns, build_tables
from corral.grammar.ir import Grammar
from corral.grammar.json_schema import grammar_from_json_schema
from corral.grammar.regex import ByteDFA

GRAMMARS = Path(__file__).parent / "data" / "grammars"

SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
            "n": {"type": "integer", "minimum": -5, "maximum": 300},
            "kind": {"enum": ["a", "b", "long value", 3.5]},
        },
        "required": ["name"],
    },
    {"type": "array", "items": {"type": "string", "format": "date"}, "maxItems": 4},
]
LARK = [
    # a lookahead at a terminal's end: its lexeme may not end before [a-z] (the trap)
    'start: (OP | NAME | WS)+\nOP: /[+*]|[?](?![a-z])/\nNAME: /[a-z]+/\nWS: " "\n',
    "start: A B\nA: /a+(?!b)/\nB: /[a-z]+/\n",
]


def _check(grammar: Grammar, special: dict[str, int] | None = None) -> None:
    special = special or {}
    t = build_tables(grammar, special)
    lt, cls = t.lex_trans, t.byte_class()
    assert lt.dtype == np.int32 and lt.flags.c_contiguous
    trap = t.header(H_TRAP)
    seen = np.zeros(t.n_dense_states, bool)
    for i, name in enumerate(t.terminal_names):
        d = grammar.terminals[name].dfa
        if not isinstance(d, ByteDFA) or not d.n_states:
            continue
        o = int(t.term_start[i])
        rows = lt[o : o + d.n_states][:, cls]  # [n, 256] as the kernels read them
        seen[o : o + d.n_states] = True
        if name in special:
            assert (rows == -1).all(), name
            continue
        want = np.where(d.trans >= 0, d.trans + o, -1)
        blocked = grammar.terminals[name].end_blocked
        if blocked is not None:
            want[blocked & d.accept[:, None] & (want < 0)] = trap
        assert np.array_equal(rows, want), name
    if trap >= 0:
        assert (lt[trap] == -1).all()
        seen[trap] = True
    assert seen.all()  # every dense state belongs to a terminal or is the trap
    # coarsest: bytes of different classes differ in some row
    cols = {lt[:, c].tobytes() for c in range(lt.shape[1])}
    assert len(cols) == lt.shape[1] or t.lex_sparse is not None


@pytest.mark.parametrize("path", sorted(GRAMMARS.glob("*.lark")), ids=lambda p: p.stem)
def test_lark_grammars(path: Path) -> None:
    _check(Grammar.from_lark(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("text", LARK)
def test_blocked_ends_and_special_tokens(text: str) -> None:
    g = Grammar.from_lark(text)
    assert any(t.end_blocked is not None for t in g.terminals.values())
    _check(g)
    for name in sorted(g.terminals):  # each terminal in turn standing for a special token
        _check(g, {name: 7})


@pytest.mark.parametrize("schema", SCHEMAS, ids=["object", "array"])
def test_json_schemas(schema: dict) -> None:
    _check(grammar_from_json_schema(json.loads(json.dumps(schema))))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 40),
    st.integers(0, 3),
    st.randoms(use_true_random=False),
)
def test_equal_columns_groups_exactly_equal_columns(m: int, n: int, k: int, rnd) -> None:  # type: ignore[no-untyped-def]
    a = np.array([[rnd.randint(0, k) for _ in range(n)] for _ in range(m)], np.int32)
    cls = _equal_columns(a)
    for x in range(n):
        for y in range(n):
            assert (cls[x] == cls[y]) == bool(np.array_equal(a[:, x], a[:, y]))


def test_equal_columns_past_the_hash_rows() -> None:
    # more rows than the hash has multipliers: the sorting path
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, (5000, 64)).astype(np.int32)
    a[:, 10] = a[:, 3]
    cls = _equal_columns(a)
    assert cls[10] == cls[3] and len(set(cls.tolist())) == len(
        {a[:, j].tobytes() for j in range(64)}
    )
