"""The tables' follow bytes (``automata/follow_bytes.py``, a kernel over 256-bit sets)
against the definition: the grammar's FOLLOW sets of terminals
(:func:`corral.grammar.follow.follow_terminals`, Python bit sets), each mapped to the first
bytes of its terminals, with ignored terminals following anything and special-token
terminals adding no bytes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.automata.tables import H_FOLLOW_BYTES, build_tables
from corral.grammar import Grammar
from corral.grammar.follow import follow_terminals, nullable_nonterminals, numbered

sys.path.insert(0, str(Path(__file__).parent))
from support.schema_runner import maskbench_case, maskbench_files, stratified_sample

GRAMMARS = Path(__file__).parent / "data" / "grammars"


def _reference(grammar: Grammar, special: set[str]) -> np.ndarray:
    term_names, nt_names, prods = numbered(grammar)
    NT, NN = len(term_names), len(nt_names)
    follow = follow_terminals(prods, NT, NN, nullable_nonterminals(prods, NT, NN))
    first = []
    for n in term_names:
        d = grammar.terminals[n].dfa
        bits = 0
        if d.n_states:
            for b in np.flatnonzero(d.row(0) >= 0).tolist():
                bits |= 1 << b
        first.append(bits)
    ignore = {term_names.index(n) for n in grammar.ignore}
    special_idx = {term_names.index(n) for n in special}
    ign = 0
    for i in ignore:
        ign |= first[i]
    every = 0
    for i in range(NT):
        if i not in special_idx:
            every |= first[i]
    out = np.zeros(NT * 8, np.int32)
    for t in range(NT):
        fb = every if t in ignore else ign
        if t not in ignore:
            for u in range(NT):
                if follow[t] >> u & 1 and u not in special_idx:
                    fb |= first[u]
        out[8 * t : 8 * t + 8] = np.frombuffer(fb.to_bytes(32, "little"), np.int32)
    return out


def _check(grammar: Grammar, special: dict[str, int] | None = None) -> None:
    special = special or {}
    tables = build_tables(grammar, special)
    NT = len(tables.terminal_names)
    got = tables.section(H_FOLLOW_BYTES, NT * 8)
    np.testing.assert_array_equal(got, _reference(grammar, set(special)))


@pytest.mark.parametrize("path", sorted(GRAMMARS.glob("*.lark")), ids=lambda p: p.stem)
def test_lark_grammars(path: Path) -> None:
    text = path.read_text()
    start = "start" if "start:" in text else text.split(":")[0].strip().lstrip("?!")
    _check(Grammar.from_lark(text, start=start))


def test_special_tokens_and_ignored_terminals() -> None:
    g = Grammar.from_lark(
        r"""
        start: item (SEP item)* END
        item: "a" | "b" item? | NAME
        NAME: /[x-z]+/
        SEP: "<sep>"
        END: "<end>"
        WS: " "
        %ignore WS
        """
    )
    _check(g, {"SEP": 7, "END": 8})


def test_maskbench_schemas() -> None:
    files = maskbench_files()
    if not files:
        pytest.skip("MaskBench is not in ../shared")
    for f in stratified_sample(files, 40):
        _name, schema, _tests = maskbench_case(f)
        try:
            g = Grammar.from_json_schema(json.dumps(schema))
        except Exception:  # refused schemas have no tables
            continue
        _check(g)


# random grammars: nullable chains, left and right recursion, cycles of unit rules
_NAMES = ["s", "a", "b", "c", "d"]
_TERMS = ['"x"', '"y"', '"zz"', "/[0-9]+/"]


@st.composite
def _grammars(draw: st.DrawFn) -> str:
    lines = []
    for lhs in _NAMES:
        alts = []
        for _ in range(draw(st.integers(1, 3))):
            syms = draw(st.lists(st.sampled_from(_NAMES + _TERMS), max_size=4))
            alts.append(" ".join(syms))  # empty: an empty alternative
        lines.append(f"{lhs}: " + " | ".join(alts))
    return "start: s\n" + "\n".join(lines) + '\n%ignore " "\n'


@settings(max_examples=60, deadline=None)
@given(_grammars())
def test_random_grammars(text: str) -> None:
    from corral.errors import CorralError

    try:
        g = Grammar.from_lark(text)
    except CorralError:
        return  # an empty language and the like
    _check(g)
