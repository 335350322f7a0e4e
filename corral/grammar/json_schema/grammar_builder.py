"""Rules and terminals of a grammar under construction, within budgets.

:class:`GrammarBuilder` hands out fresh nonterminal names, collects rules (bounded by
``Options.max_rules``), shares one terminal per automaton key, writes punctuation in the
chosen whitespace style, and builds the pieces every JSON grammar needs (any JSON value,
a set of literal words). It knows nothing about schemas.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from decimal import Decimal
from itertools import chain

from ...errors import CompileBudgetError
from ..ir import Rule, Terminal
from ..regex import ByteDFA, literal_automaton, python_regex_dfa
from ..regex.dawg import dawg, trie_states
from ..regex.dfa import shared_automata, spend, union_of_literals
from ..regex.sparse import SparseDFA
from .number_set import number_set_dfa
from .numbers import number_dfa
from .options import Options
from .strings import plain_string

__all__ = ["GrammarBuilder", "drop_undefined"]

TICK_STEPS = 100
"""Construction steps one subschema visit costs (``Options.max_work``)."""

DENSE_WORDS_STATES = 4096
"""Largest trie of enum texts laid out as a dense automaton (4 MB at 1 KB a state)."""


class GrammarBuilder:
    """Rules and terminals being built for one grammar.

    Attributes:
        opt: the translation options (whitespace, budgets).
        terms: terminal name -> terminal.
        rules: the rules so far, in the order they were added.
    """

    def __init__(self, options: Options) -> None:
        self.opt = options
        self.terms: dict[str, Terminal] = {}
        self._term_keys: dict[str, str] = {}
        self.rules: list[Rule] = []
        self.n = 0
        self._any: str | None = None

    def fresh(self, hint: str) -> str:
        """A new nonterminal name starting with ``hint``."""
        self.n += 1
        return f"{hint}_{self.n}"

    def add(self, lhs: str, *rhs: str) -> None:
        """Add the rule ``lhs -> rhs``.

        Raises:
            CompileBudgetError: more than ``Options.max_rules`` rules.
        """
        self.rules.append(Rule(lhs, tuple(rhs)))
        if len(self.rules) > self.opt.max_rules:
            raise CompileBudgetError(
                f"the schema needs more than {self.opt.max_rules} grammar rules "
                "(raise Options.max_rules to allow it)"
            )

    def seq(self, hint: str, *syms: str) -> str:
        """A new nonterminal with the one rule ``name -> syms``."""
        name = self.fresh(hint)
        self.add(name, *syms)
        return name

    def tick(self) -> None:
        """Spend a step of the grammar's budget (:data:`TICK_STEPS`): raises
        :class:`CompileBudgetError` once ``Options.max_work`` (or the optional
        ``Options.time_budget_s``) is spent."""
        spend(TICK_STEPS, "building the grammar")

    def term(
        self, key: str, make: Callable[[], ByteDFA | SparseDFA], source: str, hint: str
    ) -> str | None:
        """A terminal for a DFA, shared by every use of the same ``key``; ``None`` if empty."""
        name = self._term_keys.get(key)
        if name is None:
            dfa = make()
            if dfa.n_states == 0:
                self._term_keys[key] = ""
                return None
            name = self.fresh(hint.upper())
            self.terms[name] = Terminal(name, dfa, source=source)
            self._term_keys[key] = name
        return name or None

    def forget_term(self, key: str) -> None:
        """Forget the terminal of ``key`` (a later :meth:`term` builds it again)."""
        self._term_keys.pop(key, None)

    def lit(self, text: str) -> str:
        """The terminal of the literal ``text`` (``regex.literal_automaton``: sparse when long)."""
        known = self._term_keys.get("lit:" + text)
        if known:  # (most calls: a name or punctuation met before)
            return known
        shown = repr(text) if len(text) <= 80 else f"{text[:60]!r}... ({len(text)} characters)"
        name = self.term("lit:" + text, lambda: literal_automaton(text), shown, "LIT")
        assert name is not None
        return name

    def punct(self, ch: str) -> str:
        """The terminal of punctuation ``ch`` (one of ``{}[],:``) with the whitespace the
        options allow around it."""
        known = self._term_keys.get("punct:" + ch)
        if known:
            return known
        ws = f"[ \\t\\n\\r]{{0,{self.opt.max_whitespace}}}"
        if self.opt.whitespace == "compact":
            rx = {",": ", ?", ":": ": ?"}.get(ch, "\\" + ch)
        else:
            e = "\\" + ch
            rx = {"{": e + ws, "[": e + ws, "}": ws + e, "]": ws + e}.get(ch, ws + e + ws)
        name = self.term("punct:" + ch, lambda: _punct_dfa(rx), f"/{rx}/", "P")
        assert name is not None
        return name

    def words(self, texts: list[str]) -> str:
        """One terminal for a set of literal texts (an enum's strings): one lexer state
        reads them all, where a terminal per text would put one lexeme item per text in
        the parse. Up to :data:`DENSE_WORDS_STATES` trie states it is a dense automaton
        (the fastest to step); beyond, the minimal automaton as sparse rows (``dawg.py``),
        whose size grows with the texts' distinct prefixes and suffixes, not 1 KB a
        state."""
        data = sorted(t.encode() for t in texts)
        key = hashlib.blake2b(b"\0".join(data), digest_size=16).hexdigest()
        shown = ", ".join(texts[:3]) + (", ..." if len(texts) > 3 else "")
        name = self.term(
            "words:" + key,  # sized only when first built
            lambda: (
                union_of_literals(data) if trie_states(data) <= DENSE_WORDS_STATES else dawg(data)
            ),
            f"one of {len(texts)} values ({shown})",
            "WORDS",
        )
        assert name is not None
        return name

    def numbers(self, values: list[Decimal]) -> str:
        """One terminal for a set of numbers (an enum's): every spelling of each value
        without an exponent (``number_set.py``), built in time linear in the digits,
        where a terminal per value costs a range automaton each."""
        ordered = sorted(set(values))
        key = hashlib.blake2b("\0".join(map(str, ordered)).encode(), digest_size=16).hexdigest()
        shown = ", ".join(map(str, ordered[:3])) + (", ..." if len(ordered) > 3 else "")
        name = self.term(
            "numbers:" + key,
            lambda: number_set_dfa(ordered),
            f"one of {len(ordered)} numbers ({shown})",
            "NUMS",
        )
        assert name is not None
        return name

    def any_value(self) -> str:
        """The nonterminal of every JSON value (built once)."""
        if self._any is None:
            v = self._any = self.fresh("any")
            obj, arr, pairs, items = (self.fresh(h) for h in ("anyobj", "anyarr", "pairs", "items"))
            string = self.term("string", plain_string, "JSON string", "STRING")
            number = self.term("number", number_dfa, "JSON number", "NUMBER")
            assert string is not None and number is not None
            for sym in (
                obj,
                arr,
                string,
                number,
                self.lit("true"),
                self.lit("false"),
                self.lit("null"),
            ):
                self.add(v, sym)
            lb, rb, lk, rk = self.punct("{"), self.punct("}"), self.punct("["), self.punct("]")
            comma, colon = self.punct(","), self.punct(":")
            self.add(obj, lb, rb)
            self.add(obj, lb, pairs, rb)
            self.add(pairs, string, colon, v)
            self.add(pairs, pairs, comma, string, colon, v)
            self.add(arr, lk, rk)
            self.add(arr, lk, items, rk)
            self.add(items, v)
            self.add(items, items, comma, v)
        return self._any


@shared_automata(maxsize=64)
def _punct_dfa(rx: str) -> ByteDFA:
    """The automaton of a punctuation terminal's regex (the same few in every schema)."""
    return python_regex_dfa(rx)


def drop_undefined(rules: list[Rule], terminals: set[str]) -> list[Rule]:
    """Drop rules that use a nonterminal with no rules (a schema no value satisfies, reached
    through a reference that was named before it was found empty)."""
    used = set(chain.from_iterable(r.rhs for r in rules))
    while True:
        known = {r.lhs for r in rules} | terminals
        if used <= known:
            return list(rules)
        rules = [r for r in rules if all(x in known for x in r.rhs)]
        used = set(chain.from_iterable(r.rhs for r in rules))
