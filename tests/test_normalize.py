"""Normalisation of a grammar (``grammar/normalize.py``): exact rules out."""

from __future__ import annotations

from corral.grammar.ir import Rule, Terminal
from corral.grammar.normalize import normalize
from corral.grammar.regex import literal_dfa, python_regex_dfa


def _t(name: str, text: str) -> Terminal:
    return Terminal(name, literal_dfa(text), f'"{text}"', literal=text)


def test_rules_come_out_grouped_deduplicated_reachable_and_left_recursive() -> None:
    terms = {"A": _t("A", "a"), "B": _t("B", "b"), "C": _t("C", "c"), "D": _t("D", "d")}
    rules = [
        Rule("start", ("list",)),
        Rule("list", ("item", "list")),  # tail call: becomes left-recursive
        Rule("unused", ("D",)),  # unreachable
        Rule("item", ("A",)),
        Rule("list", ("B",)),
        Rule("item", ("A",)),  # a repeat
        Rule("item", ("C", "item")),  # tail call through a terminal
        Rule("opt", ()),
        Rule("loop", ("opt", "loop")),  # a tail after an empty-able symbol: kept
        Rule("loop", ("C",)),
        Rule("start", ("loop",)),
    ]
    got_terms, got, ignore = normalize(terms, rules, "start", [])
    assert ignore == []
    assert set(got_terms) == {"A", "B", "C"}  # D only in an unreachable rule
    assert got == [
        Rule("start", ("list",)),
        Rule("start", ("loop",)),
        Rule("list", ("list__rep", "B")),
        Rule("list__rep", ()),
        Rule("list__rep", ("list__rep", "item")),
        Rule("item", ("item__rep", "A")),
        Rule("item__rep", ()),
        Rule("item__rep", ("item__rep", "C")),
        Rule("opt", ()),
        Rule("loop", ("opt", "loop")),
        Rule("loop", ("C",)),
    ]


def test_a_terminal_that_matches_the_empty_string_becomes_optional() -> None:
    terms = {"WS": Terminal("WS", python_regex_dfa(" *"), "/ */"), "X": _t("X", "x")}
    rules = [Rule("start", ("WS", "X", "WS")), Rule("start", ("X",))]
    got_terms, got, _ = normalize(terms, rules, "start", [])
    assert not got_terms["WS"].dfa.accepts_empty()
    assert got == [
        Rule("start", ("__WS_opt", "X", "__WS_opt")),
        Rule("start", ("X",)),
        Rule("__WS_opt", ("WS",)),
        Rule("__WS_opt", ()),
    ]
