"""Indentation post-lexers (Lark's ``Indenter``) compiled into the grammar.

Lark parses indentation languages (``python.lark``) with a post-lexer between its lexer and
its parser: each ``_NEWLINE`` token outside brackets is followed by an ``_INDENT`` token
when the line after it is indented deeper than the current block, or by one ``_DEDENT``
per block it closes; a ``_NEWLINE`` inside brackets is dropped; at the end of the text
every open block is closed. The widths of the open blocks form a stack (a space counts 1,
a tab ``tab_len``; Lark counts the spaces and tabs after the token's last newline).

corral enforces the same language with no stack in the matcher: the rules are rewritten
(:func:`indent_grammar`) over terminals ``_NEWLINE`` of each width, ``_NEWLINE__W<k>`` for
``k = 0..max_width`` (the original terminal whose text after its last newline is ``k``
wide), so that every newline's width is decided by the rule that reads it:

* **Blocks by width.** A rule that holds statements is instantiated once per block width
  ``t`` (``stmt@4``): inside it every newline that goes on with the same block is
  ``_NEWLINE__W4``, and ``_NEWLINE _INDENT body _DEDENT`` becomes, for each ``w > t``,
  ``_NEWLINE__W<w>`` followed by ``body`` at width ``w``.
* **Newlines at the end of a rule belong to what follows.** ``simple_stmt`` ends with
  ``_NEWLINE``, but the width of that newline is the width of the next line, which only
  the rule around it knows (the same block goes on, or one or more blocks close). Such a
  rule is instantiated without its last newline (``stmt@4n``, "the newline is pending"),
  and the rule that reads the next symbol reads the pending newline first, at its own
  width; a pending newline before ``_DEDENT`` goes up with the ``_DEDENT`` to the rule
  around. A newline pending at the end of the text may have the width of any open block
  (the end closes them all): the ``@<t>e`` instances allow each.
* **Brackets.** Between an opening and a closing bracket of one rule alternative, every
  terminal may be followed by any number of newlines of any width (Lark drops them), and
  alternatives that need a newline or an indentation token there are dropped (the parser
  never receives one). Rules used inside brackets get one ``@b`` copy.

The rewrite is exact for the texts Lark's ``Indenter`` passes on to the parser, given
corral's lexing of the grammar's terminals (see :mod:`corral.grammar.ir`), up to two
documented limits: a line indented wider than ``max_width`` is refused, and the grammar's
shape must fit (checked, else :class:`~corral.errors.UnsupportedFeatureError` naming the
rule): every ``_INDENT`` right after a newline (``_NEWLINE _INDENT``, or after a rule
that ends with one) and closed by a ``_DEDENT`` in the same alternative; ``_DEDENT`` only
after a newline; brackets balanced within each alternative.

Sizes: statement rules are copied ``max_width + 1`` times (three ways each), and an
indented block has ``max_width - t`` alternatives at width ``t``: ``python.lark`` (537 BNF
rules) becomes 22,139 rules at the default 64 columns, 2,147 at 8.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, UnsupportedFeatureError
from .ir import Rule, Terminal
from .regex import ByteDFA
from .regex.dfa import minimal_dfa

__all__ = ["DEFAULT_MAX_WIDTH", "Indentation", "indent_grammar"]

DEFAULT_MAX_WIDTH = 64
_MAX_NULLABLE_IN_ALTERNATIVE = 8


@dataclass(frozen=True)
class Indentation:
    """What Lark's ``Indenter`` post-lexer is told (the names of its token types), and how
    wide a line corral allows.

    Attributes:
        newline: the newline terminal (``NL_type``), e.g. ``_NEWLINE``.
        indent, dedent: the declared terminals the post-lexer emits (``INDENT_type``,
            ``DEDENT_type``).
        open_brackets, close_brackets: terminals that open and close brackets
            (``OPEN_PAREN_types``, ``CLOSE_PAREN_types``): newlines between them are dropped.
        tab_len: the width of a tab.
        max_width: the widest indentation allowed (columns; a line indented wider is
            refused). Grammar size grows with its square; 64 is deeper than any module
            of Python's standard library (36).
    """

    newline: str = "_NEWLINE"
    indent: str = "_INDENT"
    dedent: str = "_DEDENT"
    open_brackets: tuple[str, ...] = ("LPAR", "LSQB", "LBRACE")
    close_brackets: tuple[str, ...] = ("RPAR", "RSQB", "RBRACE")
    tab_len: int = 8
    max_width: int = DEFAULT_MAX_WIDTH

    def __post_init__(self) -> None:
        if not isinstance(self.max_width, int) or not 0 <= self.max_width <= 1024:
            raise InvalidArgumentError(
                f"max_width must be an int in 0..1024, not {self.max_width!r}"
            )
        if not isinstance(self.tab_len, int) or self.tab_len < 1:
            raise InvalidArgumentError(f"tab_len must be a positive int, not {self.tab_len!r}")

    @classmethod
    def of(cls, postlex: Any, max_width: int | None = None) -> Indentation:
        """An :class:`Indentation` from itself or from a Lark ``Indenter`` (an instance of
        a subclass, e.g. ``lark.indenter.PythonIndenter()``, or the class)."""
        if isinstance(postlex, Indentation):
            out = postlex
        else:
            try:
                out = cls(
                    newline=str(postlex.NL_type),
                    indent=str(postlex.INDENT_type),
                    dedent=str(postlex.DEDENT_type),
                    open_brackets=tuple(str(x) for x in postlex.OPEN_PAREN_types),
                    close_brackets=tuple(str(x) for x in postlex.CLOSE_PAREN_types),
                    tab_len=int(postlex.tab_len),
                )
            except AttributeError:
                raise InvalidArgumentError(
                    "postlex must be a corral Indentation or a Lark Indenter (with NL_type, "
                    "INDENT_type, DEDENT_type, OPEN_PAREN_types, CLOSE_PAREN_types, "
                    f"tab_len), not {type(postlex).__name__}"
                ) from None
        if max_width is not None:
            out = Indentation(**{**out.__dict__, "max_width": max_width})
        return out

    def width_terminal(self, k: int) -> str:
        return f"{self.newline}__W{k}"


def newline_of_width(nl: ByteDFA, k: int, tab_len: int, max_width: int) -> ByteDFA:
    """The lexemes of ``nl`` whose text after their last newline is ``k`` wide (spaces 1,
    tabs ``tab_len``, other bytes 0), as Lark's ``Indenter`` counts; lexemes without a
    newline are not in it. The automaton reads every byte ``nl`` reads (so its lexemes end
    where ``nl``'s do) and accepts only those lexemes."""
    over = max_width + 1
    none = over + 1  # no newline read yet
    trans = np.asarray(nl.trans)
    index: dict[tuple[int, int], int] = {(0, none): 0}
    order = [(0, none)]
    rows: list[np.ndarray] = []
    accept: list[bool] = []
    i = 0
    while i < len(order):
        q, c = order[i]
        i += 1
        row = np.full(256, -1, np.int32)
        for b in np.flatnonzero(trans[q] >= 0).tolist():
            if b == 0x0A:
                c2 = 0
            elif c == none:
                c2 = none
            elif b == 0x20:
                c2 = min(c + 1, over)
            elif b == 0x09:
                c2 = min(c + tab_len, over)
            else:
                c2 = c
            key = (int(trans[q, b]), c2)
            j = index.get(key)
            if j is None:
                j = index[key] = len(order)
                order.append(key)
            row[b] = j
        rows.append(row)
        accept.append(bool(nl.accept[q]) and c == k)
    return minimal_dfa(np.stack(rows), np.array(accept, bool))


_R, _N, _E = "r", "n", "e"  # ends with a real token; with a pending newline; at the end


class _Rewriter:
    """Rewrites BNF rules that use the post-lexer's tokens (see the module docs)."""

    def __init__(
        self, terminals: Mapping[str, Terminal], rules: Sequence[Rule], start: str, ind: Indentation
    ) -> None:
        self.ind = ind
        self.terminals = terminals
        self.start = start
        self.nl = ind.newline
        self.by_lhs: dict[str, list[tuple[str, ...]]] = {}
        for r in rules:
            self.by_lhs.setdefault(r.lhs, []).append(r.rhs)
        self.blocks: dict[str, str] = {}  # block symbol -> its body's nonterminal
        self._split_blocks()
        self.start_nullable = self._eliminate_empty()
        self.depths = {
            (a, rhs): self._depths(a, rhs) for a, alts in self.by_lhs.items() for rhs in alts
        }
        self.sensitive = self._sensitive()
        self.tails = self._tails()
        self.out: list[Rule] = []
        self.done: set[str] = set()
        self.todo: list[tuple[str, int | None, str]] = []
        self.nl_star = f"{self.nl}@brackets"

    def _shape(self, a: str, what: str) -> UnsupportedFeatureError:
        ind = self.ind
        return UnsupportedFeatureError(
            f"indentation post-lexer: {what}",
            location=f"rule {a}",
            detail="corral compiles the post-lexer into the rules and needs every "
            f"{ind.indent} right after a {ind.newline} in the same alternative or after a "
            f"rule that ends with one, closed by a {ind.dedent} in the same alternative, "
            "and brackets balanced in each alternative",
        )

    # -- analysis --------------------------------------------------------------------------
    def _split_blocks(self) -> None:
        """``_INDENT body _DEDENT`` (outside brackets) -> a block symbol whose body is a
        nonterminal of its own."""
        ind = self.ind
        for a in list(self.by_lhs):
            alts = []
            for rhs in self.by_lhs[a]:
                out: list[str] = []
                stack: list[list[str]] = []
                depth = 0
                for s in rhs:
                    if s in ind.close_brackets:
                        depth -= 1
                    if depth == 0 and s == ind.indent:
                        stack.append(out)
                        out = []
                    elif depth == 0 and s == ind.dedent:
                        if not stack:
                            raise self._shape(a, f"a {ind.dedent} with no {ind.indent} before it")
                        body = f"{a}#{len(self.blocks)}"
                        block = f"{body}>"
                        self.by_lhs[body] = [tuple(out)] if out else []
                        self.blocks[block] = body
                        out = stack.pop()
                        out.append(block)
                    else:
                        out.append(s)
                    if s in ind.open_brackets:
                        depth += 1
                if stack:
                    raise self._shape(a, f"an {ind.indent} not closed in the same alternative")
                if out and out[0] in self.blocks:
                    raise self._shape(a, f"an {ind.indent} at the start of an alternative")
                alts.append(tuple(out))
            self.by_lhs[a] = alts

    def _known(self, s: str) -> bool:
        return s in self.by_lhs or s in self.terminals or s in self.blocks

    def _eliminate_empty(self) -> bool:
        """Rewrite the rules so that no nonterminal derives the empty string; return
        whether the start symbol did. (Blocks are never empty: a block needs a line.)"""
        nullable: set[str] = set()
        changed = True
        while changed:
            changed = False
            for a, alts in self.by_lhs.items():
                if a not in nullable and any(all(s in nullable for s in rhs) for rhs in alts):
                    nullable.add(a)
                    changed = True
        new: dict[str, list[tuple[str, ...]]] = {}
        for a, alts in self.by_lhs.items():
            out: dict[tuple[str, ...], None] = {}
            for rhs in alts:
                spots = [i for i, s in enumerate(rhs) if s in nullable]
                if len(spots) > _MAX_NULLABLE_IN_ALTERNATIVE:
                    raise self._shape(
                        a,
                        f"more than {_MAX_NULLABLE_IN_ALTERNATIVE} optional parts in one "
                        "alternative",
                    )
                for drop in itertools.product((False, True), repeat=len(spots)):
                    gone = {i for i, d in zip(spots, drop, strict=True) if d}
                    kept = tuple(s for i, s in enumerate(rhs) if i not in gone)
                    if kept:
                        out[kept] = None
            new[a] = list(out)
        # a symbol that derived only the empty string is gone: so are alternatives using it
        while True:
            alive = {a for a, alts in new.items() if alts}
            pruned = {
                a: [r for r in alts if all(s not in new or s in alive for s in r)]
                for a, alts in new.items()
            }
            if pruned == new:
                break
            new = pruned
        self.by_lhs = {a: alts for a, alts in new.items() if alts}
        return self.start in nullable

    def _depths(self, a: str, rhs: tuple[str, ...]) -> list[int]:
        """The bracket depth of each symbol (an opening bracket is at the depth outside
        it); refuses unbalanced alternatives."""
        out = []
        d = 0
        for s in rhs:
            if s in self.ind.close_brackets:
                d -= 1
                if d < 0:
                    raise self._shape(a, "a closing bracket with no opening one before it")
            out.append(d)
            if s in self.ind.open_brackets:
                d += 1
        if d:
            raise self._shape(a, "an opening bracket not closed in the same alternative")
        return out

    def _sensitive(self) -> set[str]:
        """Nonterminals that read a newline or hold a block outside brackets."""
        sens: set[str] = set()
        changed = True
        while changed:
            changed = False
            for a, alts in self.by_lhs.items():
                if a in sens:
                    continue
                if any(
                    d == 0 and (s == self.nl or s in self.blocks or s in sens)
                    for rhs in alts
                    for s, d in zip(rhs, self.depths[(a, rhs)], strict=True)
                ):
                    sens.add(a)
                    changed = True
        return sens

    def _tails(self) -> dict[str, set[str]]:
        """How the texts of each sensitive nonterminal may end: with a real token (``r``)
        or with a newline (``n``; through the ``_DEDENT`` of a block)."""
        tails: dict[str, set[str]] = {a: set() for a in self.sensitive}
        changed = True
        while changed:
            changed = False
            for a in self.sensitive:
                for rhs in self.by_lhs[a]:
                    got = self._tail_of(rhs[-1], tails)
                    if not got <= tails[a]:
                        tails[a] |= got
                        changed = True
        return tails

    def _tail_of(self, s: str, tails: Mapping[str, set[str]]) -> set[str]:
        if s == self.nl:
            return {_N}
        if s in self.blocks:
            return {_N} & tails.get(self.blocks[s], set())
        if s in self.sensitive:
            return set(tails.get(s, set()))
        return {_R}

    # -- instances -------------------------------------------------------------------------
    def need(self, a: str, t: int | None, tail: str = _R) -> str:
        """The name of an instance of ``a`` (``t``: block width, ``None``: inside
        brackets), queued for its rules on first use."""
        if t is None:
            name = f"{a}@b"
        elif a in self.blocks or a in self.sensitive:
            name = f"{a}@{t}{tail}"
        else:
            name = f"{a}@o"
        if name not in self.done:
            self.done.add(name)
            self.todo.append((a, t, tail))
        return name

    def width(self, k: int) -> str:
        return self.ind.width_terminal(k)

    def brackets_newlines(self) -> str:
        if self.nl_star not in self.done:
            self.done.add(self.nl_star)
            self.out.append(Rule(self.nl_star, ()))
            self.out.append(Rule(self.nl_star, (self.nl_star, self.nl)))
        return self.nl_star

    def run(self) -> tuple[list[Rule], str]:
        start = f"{self.start}@file"
        if self.start in self.by_lhs:
            if self.start in self.sensitive:
                for tail in self.tails[self.start]:
                    name = self.need(self.start, 0, _R if tail == _R else _E)
                    self.out.append(Rule(start, (name,)))
            else:
                self.out.append(Rule(start, (self.need(self.start, 0),)))
        if self.start_nullable:
            self.out.append(Rule(start, ()))
        while self.todo:
            self.instantiate(*self.todo.pop())
        # instances with no rules (a block wider than max_width, a statement that needs
        # one): drop what uses them
        rules = self.out
        while True:
            defined = {r.lhs for r in rules}
            kept = [r for r in rules if all("@" not in s or s in defined for s in r.rhs)]
            if len(kept) == len(rules):
                return rules, start
            rules = kept

    def instantiate(self, a: str, t: int | None, tail: str) -> None:
        if t is None:
            for rhs in self.by_lhs[a]:
                got = self.inside(rhs)
                if got is not None:
                    self.out.append(Rule(f"{a}@b", tuple(got)))
            return
        if a in self.blocks:  # a newline as wide as the block, then its body at that width
            for w in range(t + 1, self.ind.max_width + 1):
                body = self.need(self.blocks[a], w, tail)
                self.out.append(Rule(f"{a}@{t}{tail}", (self.width(w), body)))
            if tail == _E:  # or the text ends on a newline as wide as the block around
                for w in range(t + 1, self.ind.max_width + 1):
                    body = self.need(self.blocks[a], w, _N)
                    self.out.append(Rule(f"{a}@{t}{tail}", (self.width(w), body, self.width(t))))
            return
        lhs = f"{a}@{t}{tail}" if a in self.sensitive else f"{a}@o"
        for rhs in self.by_lhs[a]:
            for out, end in self.rewrite(a, rhs, t, tail == _E):
                if end == tail:
                    self.out.append(Rule(lhs, tuple(out)))

    def inside(self, rhs: tuple[str, ...]) -> list[str] | None:
        """An alternative inside brackets (``None``: it needs a token the post-lexer never
        passes on there)."""
        out: list[str] = []
        for s in rhs:
            if s == self.nl or s in self.blocks or s in (self.ind.indent, self.ind.dedent):
                return None
            if s in self.by_lhs:
                out.append(self.need(s, None))
            else:
                out += [s, self.brackets_newlines()]
        return out

    def rewrite(
        self, a: str, rhs: tuple[str, ...], t: int, eof: bool
    ) -> list[tuple[list[str], str]]:
        """The alternative ``rhs`` of ``a`` at block width ``t``: a list of (symbols, how
        they end: ``r``, ``n``, or with ``eof`` ``e``)."""
        depths = self.depths[(a, rhs)]
        # variants: (symbols, pending newline?, where the pending newline came from:
        # -1 a newline of this alternative, else the index of the instance that ends with it)
        states: list[tuple[list[str], bool, int]] = [([], False, -1)]
        for s, d in zip(rhs, depths, strict=True):
            if d > 0:
                if s == self.nl or s in (self.ind.indent, self.ind.dedent):
                    return []  # never passed on inside brackets
                add = [self.need(s, None)] if s in self.by_lhs else [s, self.brackets_newlines()]
                states = [(out + add, p, src) for out, p, src in states]
                continue
            nxt: list[tuple[list[str], bool, int]] = []
            for out, pending, _src in states:
                if s in self.blocks:
                    if pending and t < self.ind.max_width:  # the newline before the _INDENT
                        nxt.append(([*out, self.need(s, t, _N)], True, len(out)))
                    continue
                lead = [*out, self.width(t)] if pending else out
                if s == self.nl:
                    nxt.append((lead, True, -1))
                elif s in self.sensitive:
                    for tl in sorted(self.tails[s]):
                        nxt.append(([*lead, self.need(s, t, tl)], tl == _N, len(lead)))
                elif s in self.by_lhs:
                    nxt.append(([*lead, self.need(s, 0)], False, -1))
                else:
                    add = [s, self.brackets_newlines()] if s in self.ind.open_brackets else [s]
                    nxt.append((lead + add, False, -1))
            states = nxt
        results: list[tuple[list[str], str]] = []
        for out, pending, src in states:
            if not pending:
                results.append((out, _R))
                continue
            results.append((out, _N))
            if eof:
                if src < 0:  # this alternative's own newline: as wide as this block
                    results.append(([*out, self.width(t)], _E))
                else:  # the instance that ends with it resolves it
                    inst = out[src]
                    base = inst[: -len(_N)]
                    sym, _, _w = base.rpartition("@")
                    out2 = list(out)
                    out2[src] = self.need(sym, t, _E)
                    results.append((out2, _E))
        return results


def keyword_boundaries(terminals: Mapping[str, Terminal]) -> dict[str, Terminal]:
    """Keywords end only where the terminals that match them whole cannot read on.

    Lark runs a post-lexer only with its standard lexer, which reads a string that a
    regexp terminal matches whole (``"class"`` and ``NAME``) as that terminal's longest
    lexeme and renames it when it is exactly the string (Lark's ``unless``): ``classx`` is
    one ``NAME``, never ``class`` then ``x``. corral's lexer tries every terminal, so here
    each such string's lexeme may not end before a byte the regexp terminal reads after
    it (``end_blocked``)."""
    out = dict(terminals)
    patterns: list[ByteDFA] = []
    for t in terminals.values():
        if t.literal is None and isinstance(t.dfa, ByteDFA) and not t.special:
            patterns.append(t.dfa)
    for name, t in terminals.items():
        if t.literal is None or not t.literal or not isinstance(t.dfa, ByteDFA):
            continue
        text = t.literal.encode()
        blocked = np.zeros(256, bool)
        for p in patterns:
            trans = np.asarray(p.trans)
            q = 0
            for b in text:
                q = int(trans[q, b])
                if q < 0:
                    break
            if q >= 0 and p.accept[q]:
                blocked |= trans[q] >= 0
        if blocked.any():
            dfa = t.dfa
            rows = np.zeros((dfa.n_states, 256), bool)
            rows[np.asarray(dfa.accept, bool)] = blocked
            if t.end_blocked is not None:
                rows |= t.end_blocked
            out[name] = Terminal(
                name, dfa, source=t.source, literal=t.literal, special=t.special, end_blocked=rows
            )
    return out


def indent_grammar(
    terminals: Mapping[str, Terminal],
    rules: Sequence[Rule],
    start: str,
    ind: Indentation,
) -> tuple[dict[str, Terminal], list[Rule], str]:
    """Compile an indentation post-lexer into the rules (see the module docs).

    Args:
        terminals: the grammar's terminals; ``ind.newline`` must be one of them.
        rules: BNF rules over terminals, nonterminals, ``ind.indent`` and ``ind.dedent``.
        start: the start symbol.

    Returns:
        The terminals (with ``<newline>__W<k>`` for each width added), the rewritten rules
        and the new start symbol.

    Raises:
        UnsupportedFeatureError: the grammar's shape does not fit (see the module docs).
        GrammarError: the newline terminal is not defined.
    """
    from ..errors import GrammarError

    if ind.newline not in terminals:
        raise GrammarError(
            f"indentation post-lexer: the newline terminal {ind.newline} is not defined "
            "in the grammar"
        )
    nl = terminals[ind.newline]
    if not isinstance(nl.dfa, ByteDFA) or nl.end_blocked is not None:
        raise UnsupportedFeatureError(
            f"indentation post-lexer: newline terminal {ind.newline} with a lookahead at its end",
            location=f"terminal {ind.newline}",
        )
    out_terms = keyword_boundaries(terminals)
    for k in range(ind.max_width + 1):
        name = ind.width_terminal(k)
        dfa = newline_of_width(nl.dfa, k, ind.tab_len, ind.max_width)
        out_terms[name] = Terminal(name, dfa, source=f"{nl.source} ({k} wide)")
    rw = _Rewriter(terminals, rules, start, ind)
    new_rules, new_start = rw.run()
    return out_terms, new_rules, new_start
