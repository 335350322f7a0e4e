"""Nullable nonterminals and the FOLLOW sets of a grammar's terminals.

Symbols are numbered as the flat tables number them (:func:`numbered`): terminals
``0 .. NT-1`` in name order, then nonterminals ``NT + a`` with ``a = 0`` the added start
symbol ``S'``. Sets of terminals are Python ints used as bit sets; both fixpoints are
worklists over the dependency edges, so large generated grammars (JSON Schemas) stay fast.
"""

from __future__ import annotations

from .ir import Grammar

__all__ = ["follow_terminals", "nullable_nonterminals", "numbered"]

Productions = list[tuple[int, list[int]]]  # (lhs nonterminal a, rhs symbols)


def numbered(grammar: Grammar) -> tuple[list[str], list[str], Productions]:
    """``(terminal names, nonterminal names, productions)``: ``S' -> start`` first, then
    the grammar's rules in order, over symbol numbers (see the module docs)."""
    term_names = sorted(grammar.terminals)
    t_index = {n: i for i, n in enumerate(term_names)}
    nt_names = ["__S'", *grammar.nonterminals()]
    NT = len(term_names)
    n_index = {n: NT + i for i, n in enumerate(nt_names)}

    def sym(name: str) -> int:
        return t_index[name] if name in t_index else n_index[name]

    prods: Productions = [(0, [sym(grammar.start)])]
    for r in grammar.rules:
        prods.append((n_index[r.lhs] - NT, [sym(s) for s in r.rhs]))
    return term_names, nt_names, prods


def nullable_nonterminals(prods: Productions, NT: int, NN: int) -> list[bool]:
    """Which nonterminals derive the empty string (a worklist: each production keeps the
    count of its symbols not yet known to be nullable)."""
    nullable = [False] * NN
    missing = [0] * len(prods)
    users: list[list[int]] = [[] for _ in range(NN)]  # a -> productions with a in their rhs
    work: list[int] = []
    for p_i, (lhs, rhs) in enumerate(prods):
        if any(s < NT for s in rhs):
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
    first_nt = [0] * NN
    users: list[list[int]] = [[] for _ in range(NN)]  # a -> productions whose FIRST reads a
    for p_i, (_lhs, rhs) in enumerate(prods):
        for x in rhs:
            if x < NT:
                break
            users[x - NT].append(p_i)
            if not nullable[x - NT]:
                break
    work = list(range(len(prods)))
    in_work = [True] * len(prods)
    while work:
        p_i = work.pop()
        in_work[p_i] = False
        lhs, rhs = prods[p_i]
        acc = 0
        for x in rhs:
            if x < NT:
                acc |= 1 << x
                break
            acc |= first_nt[x - NT]
            if not nullable[x - NT]:
                break
        if acc & ~first_nt[lhs]:
            first_nt[lhs] |= acc
            for q in users[lhs]:
                if not in_work[q]:
                    in_work[q] = True
                    work.append(q)
    # FOLLOW: constants from what comes next in each rule, plus edges lhs -> symbol where
    # the rest of the rule is nullable.
    follow = [0] * (NT + NN)
    edges: list[set[int]] = [set() for _ in range(NN)]
    for lhs, rhs in prods:
        rest_first = 0
        rest_nullable = True
        for x in reversed(rhs):
            follow[x] |= rest_first
            if rest_nullable:
                edges[lhs].add(x)
            if x < NT:
                rest_first = 1 << x
                rest_nullable = False
            else:
                a = x - NT
                rest_first = first_nt[a] | (rest_first if nullable[a] else 0)
                rest_nullable = rest_nullable and nullable[a]
    work = list(range(NN))
    in_work_nt = [True] * NN
    while work:
        a = work.pop()
        in_work_nt[a] = False
        fa = follow[NT + a]
        for x in edges[a]:
            if fa & ~follow[x]:
                follow[x] |= fa
                if x >= NT and not in_work_nt[x - NT]:
                    in_work_nt[x - NT] = True
                    work.append(x - NT)
    return follow
