"""Nullable nonterminals and the FOLLOW sets of a grammar's terminals.

Symbols are numbered as the flat tables number them (:func:`numbered`): terminals
``0 .. NT-1`` in name order, then nonterminals ``NT + a`` with ``a = 0`` the added start
symbol ``S'``. Sets of terminals are Python ints used as bit sets; both fixpoints are
worklists over the dependency edges, so large generated grammars (JSON Schemas) stay fast.
"""

from __future__ import annotations

import numpy as np

from .ir import Grammar

__all__ = ["follow_terminals", "nullable_nonterminals", "numbered", "numbered_flat"]

Productions = list[tuple[int, list[int]]]  # (lhs nonterminal a, rhs symbols)


def _symbols(grammar: Grammar) -> tuple[list[str], list[str], dict[str, int], dict[str, int]]:
    """``(terminal names, nonterminal names, nonterminal index, symbol number)``."""
    term_names = sorted(grammar.terminals)
    nt_names = ["__S'", *grammar.nonterminals()]
    NT = len(term_names)
    n_index = {n: i for i, n in enumerate(nt_names)}
    # every symbol's number: a terminal's where a name is both
    sym = {n: NT + i for n, i in n_index.items()}
    sym.update((n, i) for i, n in enumerate(term_names))
    return term_names, nt_names, n_index, sym


def numbered(grammar: Grammar) -> tuple[list[str], list[str], Productions]:
    """``(terminal names, nonterminal names, productions)``: ``S' -> start`` first, then
    the grammar's rules in order, over symbol numbers (see the module docs)."""
    term_names, nt_names, n_index, sym = _symbols(grammar)
    prods: Productions = [(0, [sym[grammar.start]])]
    prods += [(n_index[r.lhs], [sym[s] for s in r.rhs]) for r in grammar.rules]
    return term_names, nt_names, prods


def numbered_flat(
    grammar: Grammar,
) -> tuple[list[str], list[str], np.ndarray, np.ndarray, np.ndarray]:
    """:func:`numbered`'s productions as three arrays: ``(terminal names, nonterminal
    names, lhs int32 [P], lens int64 [P], rhs int32 [sum(lens)])``, production ``p``
    being ``lhs[p] -> `` the ``lens[p]`` symbols after the previous productions' in
    ``rhs``."""
    term_names, nt_names, n_index, sym = _symbols(grammar)
    rules = grammar.rules
    lhs = [0]
    lhs += [n_index[r.lhs] for r in rules]
    lens = [1]
    lens += [len(r.rhs) for r in rules]
    rhs = [sym[grammar.start]]
    rhs += [sym[s] for r in rules for s in r.rhs]
    return (
        term_names,
        nt_names,
        np.array(lhs, np.int32),
        np.array(lens, np.int64),
        np.array(rhs, np.int32),
    )


def nullable_nonterminals(prods: Productions, NT: int, NN: int) -> list[bool]:
    """Which nonterminals derive the empty string (a worklist: each production keeps the
    count of its symbols not yet known to be nullable)."""
    nullable = [False] * NN
    missing = [0] * len(prods)
    users: list[list[int]] = [[] for _ in range(NN)]  # a -> productions with a in their rhs
    work: list[int] = []
    for p_i, (lhs, rhs) in enumerate(prods):
        if rhs and min(rhs) < NT:
            missing[p_i] = -1  # reads a terminal: never nullable
            continue
        missing[p_i] = len(rhs)
        for s in rhs:
            users[s - NT].append(p_i)
        if not rhs and not nullable[lhs]:
            nullable[lhs] = True
            work.append(lhs)
    while work:
        a = work.pop()
        for p_i in users[a]:
            missing[p_i] -= 1
            lhs = prods[p_i][0]
            if missing[p_i] == 0 and not nullable[lhs]:
                nullable[lhs] = True
                work.append(lhs)
    return nullable


def follow_terminals(prods: Productions, NT: int, NN: int, nullable: list[bool]) -> list[int]:
    """For each symbol (terminal ``t``, or ``NT + a``), the bit set of the terminals that
    may come right after it in a sentential form (FOLLOW; ignored terminals are not
    considered here)."""
    # FIRST of each nonterminal: the terminals its rules begin with, plus the FIRST of
    # each nonterminal in a rule's nullable prefix (an edge from that nonterminal).
    first_init = [0] * NN
    first_in: list[list[int]] = [[] for _ in range(NN)]
    for lhs, rhs in prods:
        for x in rhs:
            if x < NT:
                first_init[lhs] |= 1 << x
                break
            first_in[lhs].append(x - NT)
            if not nullable[x - NT]:
                break
    first_nt = union_closure(first_init, first_in)
    # FOLLOW: constants from what comes next in each rule, plus the FOLLOW of the lhs for
    # each symbol whose rest of the rule is nullable (an edge from the lhs).
    follow = [0] * (NT + NN)
    follow_in: list[list[int]] = [[] for _ in range(NT + NN)]
    for lhs, rhs in prods:
        rest_first = 0
        rest_nullable = True
        for x in reversed(rhs):
            follow[x] |= rest_first
            if rest_nullable:
                follow_in[x].append(NT + lhs)
            if x < NT:
                rest_first = 1 << x
                rest_nullable = False
            else:
                a = x - NT
                rest_first = first_nt[a] | (rest_first if nullable[a] else 0)
                rest_nullable = rest_nullable and nullable[a]
    return union_closure(follow, follow_in)


def union_closure(init: list[int], sources: list[list[int]]) -> list[int]:
    """The least ``v`` with ``v[i] = init[i] | v[j] for each j in sources[i]`` (bit sets
    as ints).

    Each strongly connected component of the ``j -> i`` graph shares one value, computed
    once, in topological order (Tarjan's algorithm, iterative): the work is one union per
    edge, where a worklist fixpoint can go round a long chain of nullable rules once per
    element (5,000 optional properties: a compile of 11.5 s, nearly all of it there).
    """
    n = len(init)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    value = list(init)
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        frames = [(root, 0)]
        while frames:
            v, i = frames[-1]
            srcs = sources[v]
            if i < len(srcs):
                frames[-1] = (v, i + 1)
                w = srcs[i]
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    frames.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            frames.pop()
            if frames:
                u = frames[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] != index[v]:
                continue
            # v roots a component, whose sources outside it are all final already
            members = []
            while True:
                w = stack.pop()
                on_stack[w] = False
                members.append(w)
                if w == v:
                    break
            acc = 0
            for w in members:
                acc |= value[w]
                for x in sources[w]:
                    if not on_stack[x]:
                        acc |= value[x]
            for w in members:
                value[w] = acc
    return value
