"""Normalisation of a grammar IR (see ``ir.py``).

* A terminal whose language contains the empty string ``T`` is split: ``T`` keeps its
  non-empty strings, and each use of ``T`` in a rule becomes a nullable nonterminal
  ``T? → T | ε``. Lexemes are then never empty, which the byte-level parser relies on.
* Unproductive symbols (that derive no string) and unreachable ones are removed.
* An empty language is an error: nothing could ever be generated.
"""

from __future__ import annotations

import numpy as np

from ..errors import EmptyLanguageError, GrammarError
from .ir import Rule, Terminal
from .regex import ByteDFA
from .regex.dfa import minimize_with_blocked


def without_empty_string(
    dfa: ByteDFA, end_blocked: np.ndarray | None = None
) -> tuple[ByteDFA, np.ndarray | None]:
    """``L(dfa) \\ {ε}`` as a trimmed minimal DFA, with its ``end_blocked`` rows (see
    :class:`~corral.grammar.ir.Terminal`) carried over."""
    if dfa.n_states == 0 or not dfa.accept[0]:
        return dfa, end_blocked
    old = dfa.trans
    shifted = np.where(old >= 0, old + 1, -1).astype(np.int32)
    trans = np.vstack([shifted[0:1], shifted])
    accept = np.concatenate([[False], dfa.accept])
    if (trans[0] < 0).all():
        return ByteDFA.empty(), None
    if end_blocked is not None:
        end_blocked = np.vstack([np.zeros((1, 256), bool), end_blocked])
    return minimize_with_blocked(trans, accept, end_blocked)


def normalize(
    terminals: dict[str, Terminal], rules: list[Rule], start: str, ignore: list[str]
) -> tuple[dict[str, Terminal], list[Rule], list[str]]:
    lhs_names = {r.lhs for r in rules}
    if start not in lhs_names and start not in terminals:
        raise GrammarError(f"start symbol {start!r} is not defined")
    for r in rules:
        for s in r.rhs:
            if s not in terminals and s not in lhs_names:
                raise GrammarError(f"symbol {s!r} is used in rule {r.lhs!r} but not defined")
    for s in ignore:
        if s not in terminals:
            raise GrammarError(f"ignored terminal {s!r} is not defined")

    if start in terminals:  # a bare terminal as start symbol
        wrapper = "__start"
        rules = [*rules, Rule(wrapper, (start,))]
        start = wrapper

    # -- terminals that accept the empty string --------------------------------------
    terms: dict[str, Terminal] = {}
    renamed: dict[str, str] = {}
    extra_rules: list[Rule] = []
    for name, t in terminals.items():
        if t.dfa.accepts_empty():
            if not isinstance(t.dfa, ByteDFA):
                raise GrammarError(f"terminal {name}: a span automaton must not accept ''")
            ne, blocked = without_empty_string(t.dfa, t.end_blocked)
            opt = f"__{name}_opt"
            renamed[name] = opt
            if ne.n_states:
                terms[name] = Terminal(name, ne, t.source, t.literal, t.special, blocked)
                extra_rules.append(Rule(opt, (name,)))
            extra_rules.append(Rule(opt, ()))
        else:
            terms[name] = t
    ignore = [s for s in ignore if s in terms]
    rules = [Rule(r.lhs, tuple(renamed.get(s, s) for s in r.rhs)) for r in rules] + extra_rules

    # -- productive symbols ----------------------------------------------------------
    productive = {name for name, t in terms.items() if t.dfa.n_states}
    changed = True
    while changed:
        changed = False
        for r in rules:
            if r.lhs not in productive and all(s in productive for s in r.rhs):
                productive.add(r.lhs)
                changed = True
    if start not in productive:
        raise EmptyLanguageError(
            f"the grammar accepts no string: start symbol {start!r} derives nothing"
            + _why_empty(terms)
        )
    rules = [r for r in rules if r.lhs in productive and all(s in productive for s in r.rhs)]

    # -- reachable symbols -----------------------------------------------------------
    by_lhs: dict[str, list[Rule]] = {}
    for r in rules:
        by_lhs.setdefault(r.lhs, []).append(r)
    reach = {start}
    stack = [start]
    while stack:
        s = stack.pop()
        for r in by_lhs.get(s, ()):
            for x in r.rhs:
                if x not in reach:
                    reach.add(x)
                    stack.append(x)
    ignore = [s for s in ignore if terms[s].dfa.n_states]
    rules = [r for r in rules if r.lhs in reach]
    keep = reach | set(ignore)
    terms = {n: t for n, t in terms.items() if n in keep and t.dfa.n_states}
    # deduplicate rules, keep order
    seen: set[Rule] = set()
    uniq = []
    for r in rules:
        if r not in seen:
            seen.add(r)
            uniq.append(r)
    return terms, uniq, ignore


def _why_empty(terms: dict[str, Terminal]) -> str:
    empty = [n for n, t in terms.items() if not t.dfa.n_states]
    if empty:
        return f" (terminals that match nothing: {', '.join(sorted(empty)[:5])})"
    return ""
