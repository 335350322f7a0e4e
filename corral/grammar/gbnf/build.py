"""A GBNF syntax tree to a corral :class:`Grammar`, with the same language.

GBNF is a context-free grammar over characters: it has no lexer, and a ``[0-9]+`` may
end anywhere the rest of the grammar lets it. A corral grammar's terminals are regular
languages whose lexemes are *maximal* (a lexeme ends only where its automaton cannot read
the next byte; see :mod:`corral.grammar.ir`). Both are reconciled exactly:

* **Characters as terminals.** Each literal, character class and ``.`` can be a terminal
  of its own: a fixed string or one character can never read on past its end, so
  maximality changes nothing. Groups, alternatives and repetitions become rules
  (``x*`` is ``S ::= ε | S x``, left-recursive, which an Earley parser handles in linear
  time; ``x{m,n}`` is ``m`` copies of ``x`` and a chain of ``n - m`` optional ones).
  This alone is the GBNF language, but a string of ``n`` characters is ``n`` lexemes.
* **Longer lexemes where they are exact.** A run of consecutive items that is regular
  (characters, literals, groups and repetitions of them, and rules that are regular and
  not recursive) becomes one terminal when its maximal lexemes are all its lexemes in
  that place: no byte that can continue it from an accepting state can begin what
  follows it (its FOLLOW set, in first bytes, computed on the GBNF rules). Then a lexeme
  of the run that stops before such a byte could not have been followed anyway, and the
  language is unchanged. ``json.gbnf``'s ``string`` and ``number`` (with their trailing
  ``ws``) become single terminals this way. A run that is not exact as a whole is cut
  into its longest exact pieces (:meth:`_Builder.pieces`), and a repeated class at the
  characters that may begin what follows (:meth:`_Builder.split_star`):
  ``arithmetic.gbnf``'s ``ws ::= [ \\t\\n]*`` may end before the newline that ends a
  line, so it becomes ``[ \\t]* ("\\n" [ \\t]*)*``, whose runs are terminals. A
  nullable run becomes ``N ::= ε | T`` with ``T`` its non-empty lexemes.

Special tokens (``<think>``, ``<[128009]>``) are terminals matched by their token only, as
in the Lark front end. Left recursion, which llama.cpp refuses, is accepted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ...errors import CompileBudgetError, EmptyLanguageError, GrammarError
from ..ir import Grammar, Rule, Terminal
from ..regex import ast, literal_dfa
from ..regex.charset import CharSet
from ..regex.dfa import ByteDFA, difference, nfa_to_byte_dfa
from ..regex.nfa import build_nfa
from .syntax import (
    Choice,
    GbnfGrammar,
    Literal,
    Node,
    Ref,
    RegexItem,
    Rep,
    Seq,
    Special,
    line_col,
    syntax_error,
)

LEXEME_MAX_STATES = 4096
"""The most states a run's automaton may have to become one terminal; larger runs stay
rules (the language is the same, the walk slower)."""
SPLIT_MAX_ITEMS = 8
"""A run of at most this many items that is not exact as one terminal is split into its
longest exact pieces; a longer one item by item."""
LEXEME_MAX_POSITIONS = 4096
"""The most character positions a run may have, its repetitions and rules expanded, to
be tried as one terminal (its automaton is not built beyond: ``("," item){9,99}`` with
a 100-character ``item`` stays a rule)."""

_NO_BYTES = np.zeros(256, bool)
# UTF-8 by length: (first code point, last code point, shift of the lead byte's bits,
# first lead byte, number of lead bytes)
_UTF8_BLOCKS = (
    (0, 0x7F, 0, 0, 0x80),
    (0x80, 0x7FF, 6, 0xC0, 0x20),
    (0x800, 0xFFFF, 12, 0xE0, 0x10),
    (0x10000, 0x10FFFF, 18, 0xF0, 0x08),
)


def lead_bytes(cs: CharSet) -> np.ndarray:
    """``bool [256]``: the first bytes of the UTF-8 encodings of ``cs``'s characters (a
    superset where a lead byte's block is only partly in ``cs``)."""
    out = np.zeros(256, bool)
    for lo, hi in cs.ranges:
        for a, b, shift, mark, _ in _UTF8_BLOCKS:
            lo2, hi2 = max(lo, a), min(hi, b)
            if lo2 <= hi2:
                out[mark | (lo2 >> shift) : (mark | (hi2 >> shift)) + 1] = True
    return out


def chars_led_by(lead: np.ndarray) -> CharSet:
    """The characters whose UTF-8 encoding begins with a byte where ``lead`` (``bool
    [256]``) is set (the inverse of :func:`lead_bytes`)."""
    ranges: list[tuple[int, int]] = []
    for b in np.flatnonzero(lead).tolist():
        for lo, hi, shift, mark, leads in _UTF8_BLOCKS:
            if mark <= b < mark + leads:
                first = (b - mark) << shift
                last = ((b - mark + 1) << shift) - 1
                if max(first, lo) <= min(last, hi):
                    ranges.append((max(first, lo), min(last, hi)))
    return CharSet(ranges)


@dataclass
class _Analysis:
    """First bytes, nullability and FOLLOW sets (first bytes) of the rules and nodes."""

    g: GbnfGrammar
    first_r: dict[str, np.ndarray]
    null_r: dict[str, bool]
    follow_r: dict[str, np.ndarray]
    regular_r: dict[str, bool]
    _memo: dict[int, tuple[Node, np.ndarray, bool]] = field(default_factory=dict)

    def _get(self, node: Node) -> tuple[np.ndarray, bool]:
        hit = self._memo.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1], hit[2]
        f, n = _first_null(node, self.first_r, self.null_r)
        self._memo[id(node)] = (node, f, n)  # the node is kept, so its id is not reused
        return f, n

    def first(self, node: Node) -> np.ndarray:
        return self._get(node)[0]

    def nullable(self, node: Node) -> bool:
        return self._get(node)[1]

    def before(self, node: Node, follow: np.ndarray) -> np.ndarray:
        """What may follow the position before ``node``, when ``follow`` may follow it."""
        return self.first(node) | follow if self.nullable(node) else self.first(node)

    def regular(self, node: Node) -> bool:
        """Whether ``node`` is a regular expression: characters and literals only, and
        rules that are regular (no recursion through them). A special token, and a
        ``Regex(...)`` (a terminal of its own: its anchors are its own), are not."""
        return all(
            self.regular_r[x.name] if isinstance(x, Ref) else _plain(x) for x in _leaves(node)
        )


def _first_null(
    node: Node, first_r: dict[str, np.ndarray], null_r: dict[str, bool]
) -> tuple[np.ndarray, bool]:
    if isinstance(node, ast.Chars):
        return lead_bytes(node.chars), False
    if isinstance(node, Literal):
        b = np.zeros(256, bool)
        b[node.text.encode("utf-8")[0]] = True
        return b, False
    if isinstance(node, Special):
        return _NO_BYTES, False
    if isinstance(node, RegexItem):
        d = node_dfa(node, "")
        return (d.row(0) >= 0 if d.n_states else _NO_BYTES), d.accepts_empty()
    if isinstance(node, Ref):
        return first_r[node.name], null_r[node.name]
    if isinstance(node, Seq):
        out = np.zeros(256, bool)
        for x in node.items:
            f, n = _first_null(x, first_r, null_r)
            out |= f
            if not n:
                return out, False
        return out, True
    if isinstance(node, Choice):
        out = np.zeros(256, bool)
        any_null = False
        for x in node.items:
            f, n = _first_null(x, first_r, null_r)
            out |= f
            any_null |= n
        return out, any_null
    assert isinstance(node, Rep)
    if node.max == 0:
        return _NO_BYTES, True
    f, n = _first_null(node.item, first_r, null_r)
    return f, n or node.min == 0


def _propagate(node: Node, follow: np.ndarray, a: _Analysis) -> bool:
    """OR into ``a.follow_r[r]`` what may follow each reference to ``r`` inside ``node``,
    which ``follow`` may follow; whether anything was added."""
    if isinstance(node, Ref):
        have = a.follow_r[node.name]
        if (follow & ~have).any():
            a.follow_r[node.name] = have | follow
            return True
        return False
    changed = False
    if isinstance(node, Seq):
        f = follow
        for x in reversed(node.items):
            changed |= _propagate(x, f, a)
            f = a.before(x, f)
    elif isinstance(node, Choice):
        for x in node.items:
            changed |= _propagate(x, follow, a)
    elif isinstance(node, Rep):
        again = node.max is None or node.max > 1
        changed |= _propagate(node.item, follow | a.first(node.item) if again else follow, a)
    return changed


def analyse(g: GbnfGrammar) -> _Analysis:
    """Check every reference, then compute the first bytes, nullability, FOLLOW sets and
    regularity of every rule (fixpoints)."""
    rules = g.rules
    refs: dict[str, list[Ref]] = {}
    for r in rules.values():
        leaves = list(_leaves(r.body))
        for x in leaves:
            if isinstance(x, RegexItem):
                node_dfa(x, g.text)  # a malformed pattern is reported at its position
        refs[r.name] = [x for x in leaves if isinstance(x, Ref)]
        for ref in refs[r.name]:
            if ref.name not in rules:
                raise g.error(f"undefined rule {ref.name!r}", ref.pos)
    first_r = {n: np.zeros(256, bool) for n in rules}
    null_r = dict.fromkeys(rules, False)
    changed = True
    while changed:
        changed = False
        for n, r in rules.items():
            f, z = _first_null(r.body, first_r, null_r)
            if z != null_r[n] or (f & ~first_r[n]).any():
                first_r[n] = first_r[n] | f
                null_r[n] = null_r[n] or z
                changed = True
    regular_r = _regular_rules(refs, g)
    a = _Analysis(g, first_r, null_r, {n: np.zeros(256, bool) for n in rules}, regular_r)
    changed = True
    while changed:
        changed = False
        for n, r in rules.items():
            changed |= _propagate(r.body, a.follow_r[n], a)
    return a


def _leaves(node: Node) -> Iterator[Node]:
    """The leaves of ``node`` (every node but sequences, choices and repetitions)."""
    if isinstance(node, (Seq, Choice)):
        for x in node.items:
            yield from _leaves(x)
    elif isinstance(node, Rep):
        yield from _leaves(node.item)
    else:
        yield node


def _plain(leaf: Node) -> bool:
    """Whether ``leaf`` is characters or a literal (the leaves a run's regex is made of)."""
    return isinstance(leaf, (ast.Chars, Literal))


def _regular_rules(refs: dict[str, list[Ref]], g: GbnfGrammar) -> dict[str, bool]:
    """A rule is regular when its leaves are characters, literals and rules that are
    regular, none of which leads back to it."""
    state: dict[str, int] = {}  # 1: being visited, 2: done
    out: dict[str, bool] = {}

    def visit(n: str) -> bool:
        if state.get(n) == 2:
            return out[n]
        if state.get(n) == 1:
            return False  # recursion
        state[n] = 1
        ok = all(isinstance(x, Ref) or _plain(x) for x in _leaves(g.rules[n].body))
        for ref in refs[n]:
            ok = visit(ref.name) and ok
        state[n] = 2
        out[n] = ok
        return ok

    for n in g.rules:
        if state.get(n) != 2:
            visit(n)
    return out


_REGEX_DFAS: dict[str, ByteDFA] = {}


def node_dfa(node: RegexItem, text: str) -> ByteDFA:
    """The automaton of a ``Regex("...")`` (ECMA-262, matched in full); ``text`` is the
    grammar's, for the position of an error (empty once the pattern was read)."""
    have = _REGEX_DFAS.get(node.pattern)
    if have is None:
        from ..json_schema.ecma import parse_ecma_regex

        where = f"Regex({node.pattern!r})"
        try:
            have = nfa_to_byte_dfa(
                build_nfa(parse_ecma_regex(node.pattern, where=where)), where=where
            )
        except GrammarError as e:
            if not text:
                raise
            raise syntax_error(text, e.message, node.pos) from None
        if len(_REGEX_DFAS) < 1024:
            _REGEX_DFAS[node.pattern] = have
    return have


# -- rendering (terminal names and messages) ---------------------------------------------
def _char(cp: int, in_class: bool) -> str:
    c = chr(cp)
    specials = '\\"[]-^' if in_class else '\\"'
    if c in specials:
        return "\\" + c
    if c == "\n":
        return "\\n"
    if c == "\t":
        return "\\t"
    if c == "\r":
        return "\\r"
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02X}"
    return c


def render(node: Node) -> str:
    """``node`` written back in GBNF (for names and messages)."""
    if isinstance(node, Literal):
        return '"' + "".join(_char(ord(c), False) for c in node.text) + '"'
    if isinstance(node, ast.Chars):
        rs = node.chars.ranges
        if rs == ((0, 0xD7FF), (0xE000, 0x10FFFF)):
            return "."
        parts = [
            _char(lo, True) if lo == hi else f"{_char(lo, True)}-{_char(hi, True)}" for lo, hi in rs
        ]
        return "[" + "".join(parts) + "]"
    if isinstance(node, (Ref,)):
        return node.name
    if isinstance(node, Special):
        return node.text
    if isinstance(node, RegexItem):
        return f"Regex({node.pattern!r})"
    if isinstance(node, Seq):
        return "(" + " ".join(render(x) for x in node.items) + ")" if node.items else '""'
    if isinstance(node, Choice):
        return "(" + " | ".join(render(x) for x in node.items) + ")"
    assert isinstance(node, Rep)
    op = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((node.min, node.max))
    if op is None:
        op = (
            f"{{{node.min}}}"
            if node.min == node.max
            else f"{{{node.min},{'' if node.max is None else node.max}}}"
        )
    return render(node.item) + op


# -- building ----------------------------------------------------------------------------
class _Builder:
    def __init__(self, g: GbnfGrammar, a: _Analysis) -> None:
        self.g = g
        self.a = a
        self.terminals: dict[str, Terminal] = {}
        self.rules: list[Rule] = []
        self._fresh: dict[str, int] = {}
        self._emitted: set[str] = set()
        self._todo: list[str] = []
        self._regex: dict[str, ast.Node] = {}
        self._optional: dict[str, str] = {}
        self._positions: dict[str, int] = {}

    def fresh(self, hint: str) -> str:
        k = self._fresh.get(hint, 0) + 1
        self._fresh[hint] = k
        return f"{hint}#{k}"

    def terminal(
        self, name: str, dfa: ByteDFA, *, literal: str | None = None, special: str | None = None
    ) -> str:
        have = self.terminals.get(name)
        if have is None:
            self.terminals[name] = Terminal(
                name, dfa, source=name, literal=literal, special=special
            )
        return name

    def ref(self, name: str) -> str:
        if name not in self._emitted:
            self._emitted.add(name)
            self._todo.append(name)
        return name

    def build(self, root: str) -> list[Rule]:
        self.ref(root)
        while self._todo:
            name = self._todo.pop()
            body = self.g.rules[name].body
            follow = self.a.follow_r[name]
            for option in body.items if isinstance(body, Choice) else (body,):
                self.rules.append(Rule(name, tuple(self.seq(option, follow, name))))
        return self.rules

    # -- sequences --------------------------------------------------------------------
    def seq(self, node: Node, follow: np.ndarray, hint: str) -> list[str]:
        """The symbols of ``node`` read in sequence, which ``follow`` (first bytes) may follow."""
        items = node.items if isinstance(node, Seq) else (node,)
        out: list[list[str]] = []
        f = follow
        i = len(items)
        while i > 0:
            j = i
            while j > 0 and self.a.regular(items[j - 1]):
                j -= 1
            if j < i:  # items[j:i] is a regular run
                run = items[j:i]
                whole = run[0] if len(run) == 1 else Seq(tuple(run))
                syms = self.lexeme(whole, f)
                if syms is None:  # not exact as a whole: the longest exact pieces
                    f = self.pieces(run, f, hint, out)
                else:
                    out.append(syms)
                    f = self.a.before(whole, f)
                i = j
            else:
                x = items[i - 1]
                out.append(self.item(x, f, hint))
                f = self.a.before(x, f)
                i -= 1
        return [s for part in reversed(out) for s in part]

    def pieces(
        self, run: tuple[Node, ...], follow: np.ndarray, hint: str, out: list[list[str]]
    ) -> np.ndarray:
        """A regular run that is not exact as one terminal, from its end: at each step the
        longest exact piece ending there (up to :data:`SPLIT_MAX_ITEMS` items; ``[a-z]
        [a-z0-9_]*`` of ``[a-z] [a-z0-9_]* ws``), else its last item by its structure.
        Appends each piece's symbols to ``out`` (last piece first); returns what may follow
        the run's start."""
        f = follow
        k = len(run)
        while k > 0:
            start, syms = k - 1, None
            piece: Node = run[k - 1]
            if len(run) <= SPLIT_MAX_ITEMS:
                for s0 in range(0 if k < len(run) else 1, k - 1):  # longest first
                    syms = self.lexeme(Seq(run[s0:k]), f)
                    if syms is not None:
                        start, piece = s0, Seq(run[s0:k])
                        break
            if syms is None:
                syms = self.lexeme(piece, f) if len(run) > 1 else None
                if syms is None:
                    syms = self.item(piece, f, hint)
            out.append(syms)
            f = self.a.before(piece, f)
            k = start
        return f

    def item(self, node: Node, follow: np.ndarray, hint: str) -> list[str]:
        """``node``'s symbols by its structure (its parts may still become lexemes)."""
        if isinstance(node, (Literal, ast.Chars)):
            syms = self.lexeme(node, follow)
            assert syms is not None  # one character or one string never reads on
            return syms
        if isinstance(node, Special):
            return [self.terminal(node.text, literal_dfa(node.text), special=node.text)]
        if isinstance(node, RegexItem):
            syms = self.lexeme(node, follow)
            return self.dfa_rules(node) if syms is None else syms
        if isinstance(node, Ref):
            return [self.ref(node.name)]
        if isinstance(node, Seq):
            return self.seq(node, follow, hint)
        if isinstance(node, Choice):
            name = self.fresh(hint)
            for option in node.items:
                self.rules.append(Rule(name, tuple(self.seq(option, follow, hint))))
            return [name]
        assert isinstance(node, Rep)
        if node.max == 0:
            return []
        if isinstance(node.item, ast.Chars) and node.max is None:
            split = self.split_star(node.item.chars, node.min, follow)
            if split is not None:
                return self.seq(split, follow, hint)
        again = node.max is None or node.max > 1
        inner = self.seq(node.item, follow | self.a.first(node.item) if again else follow, hint)
        if not inner:
            return []
        if len(inner) == 1:
            x = inner[0]
        else:
            x = self.fresh(hint)
            self.rules.append(Rule(x, tuple(inner)))
        out = [x] * node.min
        if node.max is None:
            star = self.fresh(hint)
            self.rules += [Rule(star, ()), Rule(star, (star, x))]
            out.append(star)
        elif node.max > node.min:
            prev: str | None = None
            for _ in range(node.max - node.min):
                opt = self.fresh(hint)
                self.rules += [Rule(opt, ()), Rule(opt, (x,) if prev is None else (x, prev))]
                prev = opt
            assert prev is not None
            out.append(prev)
        return out

    # -- lexemes ----------------------------------------------------------------------
    def lexeme(self, node: Node, follow: np.ndarray) -> list[str] | None:
        """``node`` (regular) as one terminal if its maximal lexemes are exact before
        ``follow`` (see the module docs): ``[T]``, ``[N]`` with ``N ::= ε | T`` when it is
        nullable, ``[]`` when it matches only the empty string; ``None`` otherwise."""
        if isinstance(node, Literal):
            return [self.terminal(render(node), literal_dfa(node.text), literal=node.text)]
        if not isinstance(node, RegexItem) and self.positions(node) > LEXEME_MAX_POSITIONS:
            return None
        name = render(node) if isinstance(node, ast.Chars) else f"/{render(node)}/"
        have = self.terminals.get(name)
        if have is not None:
            dfa = have.dfa
            assert isinstance(dfa, ByteDFA)
            nullable = self.a.nullable(node)
        else:
            try:
                if isinstance(node, RegexItem):
                    full = node_dfa(node, "")
                else:
                    full = nfa_to_byte_dfa(
                        build_nfa(self.to_regex(node)),
                        where=f"GBNF {name}",
                        max_states=LEXEME_MAX_STATES,
                    )
            except CompileBudgetError:
                return None
            nullable = full.accepts_empty()
            dfa = difference(full, literal_dfa("")) if nullable else full
            if dfa.is_empty():
                return [] if nullable else [self.terminal(name, dfa)]
        table, classes = dfa.columns()
        cont = (table[dfa.accept] >= 0).any(axis=0)[classes]  # bytes read after a match
        if (cont & follow).any():
            return None
        t = self.terminal(name, dfa)
        if not nullable:
            return [t]
        opt = self._optional.get(t)
        if opt is None:
            opt = self._optional[t] = f"{t}?"
            self.rules += [Rule(opt, ()), Rule(opt, (t,))]
        return [opt]

    @staticmethod
    def split_star(chars: CharSet, least: int, follow: np.ndarray) -> Node | None:
        """``[S]{least,}`` whose lexemes are not exact before ``follow``, written so that
        most of it still is: with ``C`` the characters of ``S`` that may begin what
        follows and ``K`` the others, ``[S]*`` is ``[K]* (C [K]*)*``, where the runs of
        ``K`` can be single terminals (``ws ::= [ \t\n]*`` before a newline becomes
        runs of spaces and tabs between newlines, not one lexeme a character). ``None``
        when no character or every character conflicts."""
        conflict = chars.intersection(chars_led_by(follow))
        keep = chars.difference(conflict)
        if not conflict or not keep:
            return None
        runs = Rep(ast.Chars(keep), 0, None)
        tail = Rep(Seq((ast.Chars(conflict), runs)), 0, None)
        return Seq((*([ast.Chars(chars)] * least), runs, tail))

    def dfa_rules(self, node: RegexItem) -> list[str]:
        """A ``Regex(...)`` whose lexemes would not be exact as one terminal, as rules
        over single bytes: a nonterminal a state of its automaton, ``S -> b S'`` for each
        transition (bytes with the same target are one terminal) and ``S -> ε`` where it
        accepts."""
        dfa = node_dfa(node, "")
        base = f"/{render(node)}/"
        names = [f"{base}@{q}" for q in range(dfa.n_states)]
        trans = dfa.trans
        for q in range(dfa.n_states):
            targets = trans[q]
            for t in np.unique(targets[targets >= 0]).tolist():
                byte_set = targets == t
                tb = np.full((2, 256), -1, np.int32)
                tb[0, byte_set] = 1
                label = "".join(f"{b:02x}" for b in np.flatnonzero(byte_set).tolist())
                term = self.terminal(f"<bytes {label}>", ByteDFA(tb, np.array([False, True])))
                self.rules.append(Rule(names[q], (term, names[t])))
            if dfa.accept[q]:
                self.rules.append(Rule(names[q], ()))
        return [names[0]] if dfa.n_states else [self.terminal(base, dfa)]

    def positions(self, node: Node) -> int:
        """The characters of ``node`` (regular) with its repetitions and rules expanded:
        about the states of its automaton before determinisation."""
        if isinstance(node, ast.Chars):
            return 1
        if isinstance(node, Literal):
            return len(node.text)
        if isinstance(node, Ref):
            have = self._positions.get(node.name)
            if have is None:
                have = self._positions[node.name] = self.positions(self.g.rules[node.name].body)
            return have
        if isinstance(node, (Seq, Choice)):
            return sum(self.positions(x) for x in node.items)
        assert isinstance(node, Rep)
        copies = node.min + 1 if node.max is None else node.max
        return self.positions(node.item) * copies

    def to_regex(self, node: Node) -> ast.Node:
        """``node`` (regular) as a regex syntax tree, its rules inlined."""
        if isinstance(node, ast.Chars):
            return node
        if isinstance(node, Literal):
            return ast.Concat(tuple(ast.Chars(CharSet.of(c)) for c in node.text))
        if isinstance(node, Ref):
            have = self._regex.get(node.name)
            if have is None:
                have = self._regex[node.name] = self.to_regex(self.g.rules[node.name].body)
            return have
        if isinstance(node, Seq):
            return ast.Concat(tuple(self.to_regex(x) for x in node.items))
        if isinstance(node, Choice):
            return ast.Alt(tuple(self.to_regex(x) for x in node.items))
        assert isinstance(node, Rep)
        return ast.Repeat(self.to_regex(node.item), node.min, node.max)


def build_grammar(g: GbnfGrammar, root: str = "root") -> Grammar:
    """The :class:`Grammar` of ``g`` from rule ``root``.

    Raises:
        GrammarError: no rule ``root``, or an undefined rule (with line and column).
        EmptyLanguageError: the grammar derives no string.
    """
    if root not in g.rules:
        raise GrammarError(f"GBNF: the grammar has no rule named {root!r} to start from")
    a = analyse(g)
    b = _Builder(g, a)
    rules = b.build(root)
    try:
        return Grammar(b.terminals, rules, root, description=f"GBNF from {root!r}")
    except EmptyLanguageError as e:
        line, col = line_col(g.text, g.rules[root].pos)
        raise EmptyLanguageError(
            f"GBNF: rule {root!r} (line {line}, column {col}) derives no string ({e})"
        ) from None


__all__ = ["build_grammar", "lead_bytes", "render"]
