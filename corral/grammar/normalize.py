"""Normalisation of a grammar IR (see ``ir.py``).

* A terminal whose language contains the empty string ``T`` is split: ``T`` keeps its
  non-empty strings, and each use of ``T`` in a rule becomes a nullable nonterminal
  ``T? → T | ε``. Lexemes are then never empty, which the byte-level parser relies on.
* Unproductive symbols (that derive no string) and unreachable ones are removed.
* An empty language is an error: nothing could ever be generated.
* Tail recursion becomes left recursion (:func:`left_recursive`): ``A → x A | y`` reads
  ``x* y`` with a chart whose sets stay the same size however long the input grows.
"""

from __future__ import annotations

from itertools import chain

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
    used = set(chain.from_iterable(r.rhs for r in rules))
    if not used - lhs_names <= terminals.keys():
        for r in rules:  # the first undefined symbol, in rule order
            for s in r.rhs:
                if s not in terminals and s not in lhs_names:
                    raise GrammarError(f"symbol {s!r} is used in rule {r.lhs!r} but not defined")
    for s in ignore:
        if s not in terminals:
            raise GrammarError(f"ignored terminal {s!r} is not defined")

    # every symbol the rules name, while they stay as given (None once they change)
    symbols: set[str] | None = lhs_names | used
    if start in terminals:  # a bare terminal as start symbol
        wrapper = "__start"
        rules = [*rules, Rule(wrapper, (start,))]
        start = wrapper
        symbols = None

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
    if renamed:  # (a JSON Schema's grammar has no such terminal: its rules stay as they are)
        symbols = None
        rules = [
            Rule(r.lhs, tuple(renamed.get(s, s) for s in r.rhs))
            if any(s in renamed for s in r.rhs)
            else r
            for r in rules
        ] + extra_rules

    # -- productive symbols ----------------------------------------------------------
    # a worklist: each rule counts its symbols not yet known to be productive
    productive = {name for name, t in terms.items() if t.dfa.n_states}
    missing: list[int] = []
    users: dict[str, list[int]] = {}
    work: list[str] = []
    for i, r in enumerate(rules):
        m = 0
        for s in r.rhs:
            if s not in productive:
                m += 1
                users.setdefault(s, []).append(i)
        missing.append(m)
        if m == 0 and r.lhs not in productive:
            productive.add(r.lhs)
            work.append(r.lhs)
    while work:
        for i in users.get(work.pop(), ()):
            missing[i] -= 1
            if missing[i] == 0 and rules[i].lhs not in productive:
                productive.add(rules[i].lhs)
                work.append(rules[i].lhs)
    if start not in productive:
        raise EmptyLanguageError(
            f"the grammar accepts no string: start symbol {start!r} derives nothing"
            + _why_empty(terms)
        )
    if symbols is None or not symbols <= productive:  # some symbols may be unproductive
        rules = [r for r in rules if r.lhs in productive and all(s in productive for s in r.rhs)]

    # -- reachable symbols -----------------------------------------------------------
    by_lhs: dict[str, list[Rule]] = {}  # in the order of first appearance
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
    keep = reach | set(ignore)
    terms = {n: t for n, t in terms.items() if n in keep and t.dfa.n_states}
    # each reachable nonterminal's rules, without repeats (equal rules share their lhs)
    if len(set(rules)) == len(rules):
        groups = {a: alts for a, alts in by_lhs.items() if a in reach}
    else:
        groups = {a: list(dict.fromkeys(alts)) for a, alts in by_lhs.items() if a in reach}
    return terms, left_recursive(groups, set(terms)), ignore


def left_recursive(by_lhs: dict[str, list[Rule]], terminals: set[str]) -> list[Rule]:
    """The rules (grouped by left-hand side, in the order of first appearance: ``by_lhs``)
    with each tail-recursive nonterminal made left-recursive, in that order.

    A nonterminal ``A`` with rules ``A → αᵢ A`` (ending in a tail call) and ``A → βⱼ``
    (the others) derives ``(α₁|…|αₘ)* (β₁|…|βₙ)``: unfolding the tail calls, each
    derivation is a spine of α subtrees ended by one β subtree. Its rules become
    ``A → A__rep βⱼ`` and ``A__rep → ε | A__rep αᵢ``, whose derivations are the same
    spines read from the left; the α and β subtrees are untouched (where they refer to
    ``A``, as in ``A → "(" A ")" A``, they still do), so the language is the same.

    Why: Earley's chart is quadratic in a right-recursive rule. After ``n`` repetitions a
    set where an item ends holds ``n`` items ``A → αᵢ • A``, one per repetition, and
    completing ``A`` there completes them all (and every byte where a lexeme could end
    builds such a set); the matcher's cost per token then grows with the length of the
    output (a JSON array of 1,000 integers took 4.2 s of masks and consumes).
    Left-recursive, each repetition completes one item at the origin of the first.

    ``A`` is left alone when it has no tail call, or when an ``αᵢ`` is empty or made of
    nonterminals that have an empty rule (``A → A``-like cycles).
    """
    rewrite: set[str] = set()
    empty: set[str] = set()
    for alts in by_lhs.values():
        for x in alts:
            if not x.rhs:
                empty.add(x.lhs)
            elif x.rhs[-1] == x.lhs:
                rewrite.add(x.lhs)
    if not rewrite:  # nothing to rewrite
        return [r for alts in by_lhs.values() for r in alts]
    names = set(by_lhs) | terminals
    out: list[Rule] = []
    for a, alts in by_lhs.items():
        if a not in rewrite:
            out.extend(alts)
            continue
        tails = [x.rhs[:-1] for x in alts if x.rhs and x.rhs[-1] == a]
        bases = [x.rhs for x in alts if not x.rhs or x.rhs[-1] != a]
        if any(all(s in empty for s in t) for t in tails):
            out.extend(alts)
            continue
        rep = f"{a}__rep"
        while rep in names:
            rep += "_"
        names.add(rep)
        out.extend(Rule(a, (rep, *b)) for b in bases)
        out.append(Rule(rep, ()))
        out.extend(Rule(rep, (rep, *t)) for t in tails)
    return out


def _why_empty(terms: dict[str, Terminal]) -> str:
    empty = [n for n, t in terms.items() if not t.dfa.n_states]
    if empty:
        return f" (terminals that match nothing: {', '.join(sorted(empty)[:5])})"
    return ""
