"""A fast reader of Lark's grammar language, in front of Lark's own loader.

Lark's loader (``lark.load_grammar``) parses a grammar with an LALR parser into trees and
rewrites them with visitors (terminals composed into patterns, EBNF into BNF, anonymous
terminals named). That is most of the time of compiling a Lark grammar in corral.
:func:`read_lark` reads the same text directly and returns what ``Grammar.compile`` returns
(Lark's own :class:`~lark.lexer.TerminalDef`, :class:`~lark.grammar.Rule`, the ignore list)
with the declared terminals, so that :func:`~corral.grammar.lark_frontend.grammar_from_lark`
takes either path unchanged.

It returns ``None`` for whatever it does not handle, and the caller falls back on Lark's
loader (which then reports errors as it always has):

* templates, ``%override``, ``%extend``, ``%declare`` of rules, aliases inside groups;
* ``%import`` from anything but Lark's bundled ``common.lark`` (or where an import path
  holds a ``common.lark`` of its own), relative imports;
* any syntax error, and anything Lark's loader would refuse (undefined or twice-defined
  names, recursive terminals, rules in terminals, empty literals, bad ranges, rules defined
  twice by optionals, ...);
* Lark versions other than the one whose loader this follows (1.3).

What it accepts it reads as Lark does: the text is split into tokens by the same
patterns in the same order as Lark's lexer of the grammar language; terminals are
composed into the same pattern strings (with the same flags and priorities); anonymous
terminals get the names Lark gives them (``LPAR``, ``SELECT``, ``__ANON_3``, in Lark's
order of visit); optionals, repetitions and groups become the same BNF rules, helper rules
included (named as Lark names them); duplicate expansions, unused rules and unused
terminals are dropped as Lark drops them. ``tests/test_lark_reader.py`` checks this against
Lark's loader on every Lark grammar at hand.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import lark
from lark.grammar import NonTerminal, Rule, Terminal
from lark.lexer import Pattern, PatternRE, PatternStr, TerminalDef

__all__ = ["ENABLED", "read_lark"]

#: Set to False (or the environment variable ``CORRAL_LARK_READER=0``) to always use
#: Lark's own loader.
ENABLED: bool = os.environ.get("CORRAL_LARK_READER", "1") != "0"

Result = tuple[list[TerminalDef], list[Rule], list[str], set[str]]


class _FallbackError(Exception):
    """Raised anywhere in the reader: leave this grammar to Lark's loader."""


def _fallback() -> NoReturn:
    raise _FallbackError


# -- what is taken from Lark: the tables and helpers that define its grammar language ------

try:
    from lark.load_grammar import (
        _TERMINAL_NAMES,
        REPEAT_BREAK_THRESHOLD,
        SMALL_FACTOR_THRESHOLD,
        TERMINALS,
        eval_escaping,
    )
    from lark.utils import is_id_continue, is_id_start, small_factors

    _VERSION_OK = tuple(int(x) for x in lark.__version__.split(".")[:2]) == (1, 3)
except (ImportError, ValueError):  # another Lark: its loader only
    _VERSION_OK = False

_IGNORED_TOKENS = frozenset({"WS", "COMMENT", "BACKSLASH"})
_token_re: re.Pattern[str] | None = None


def _tokens_re() -> re.Pattern[str]:
    """Lark's lexer of its grammar language as one regex: the same patterns, tried in the
    order Lark's basic lexer tries them."""
    global _token_re
    if _token_re is None:
        defs = [TerminalDef(n, PatternRE(v)) for n, v in TERMINALS.items()]
        defs.sort(key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name))
        _token_re = re.compile("|".join(f"(?P<{t.name}>{t.pattern.value})" for t in defs))
    return _token_re


def _tokenize(text: str) -> tuple[list[str], list[str]]:
    rx = _tokens_re()
    kinds: list[str] = []
    values: list[str] = []
    pos, end = 0, len(text)
    match = rx.match
    while pos < end:
        m = match(text, pos)
        if m is None:
            return _fallback()
        kind = m.lastgroup
        assert kind is not None
        pos = m.end()
        if kind not in _IGNORED_TOKENS:
            kinds.append(kind)
            values.append(m.group())
    kinds.append("$END")
    values.append("")
    return kinds, values


# -- the syntax tree: Lark's, as its loader has it when it rewrites rules ------------------


class _Node:
    """``expansions``, ``expansion``, ``expr`` (``arg``: the operator and its numbers),
    ``maybe``, ``alias`` (``arg``: the name). Leaves are Lark symbols and :class:`_Lit`."""

    __slots__ = ("arg", "children", "kind")

    def __init__(self, kind: str, children: list[Any], arg: Any = None) -> None:
        self.kind = kind
        self.children = children
        self.arg = arg


class _Lit:
    """A string or regexp literal (``kind`` STRING, REGEXP) or a range (``kind`` range,
    ``raw`` the two strings)."""

    __slots__ = ("kind", "raw")

    def __init__(self, kind: str, raw: Any) -> None:
        self.kind = kind
        self.raw = raw


_ATOM_START = frozenset({"_LPAR", "_LBRA", "TERMINAL", "RULE", "STRING", "REGEXP"})


class _Parser:
    """Recursive descent over Lark's grammar of grammars (``lark.load_grammar.RULES``);
    whatever that grammar does not derive, and whatever this reader leaves to Lark, falls
    back."""

    def __init__(self, text: str) -> None:
        self.kinds, self.values = _tokenize(text + "\n")
        self.i = 0

    def peek(self) -> str:
        return self.kinds[self.i]

    def take(self, kind: str) -> str:
        if self.kinds[self.i] != kind:
            _fallback()
        v = self.values[self.i]
        self.i += 1
        return v

    def number(self) -> int:
        return int(self.take("NUMBER"))

    def statements(self) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        kinds = self.kinds
        while True:
            k = kinds[self.i]
            if k == "$END":
                return out
            if k == "_NL":
                self.i += 1
            elif k in ("RULE", "RULE_MODIFIERS"):
                out.append(self.rule())
            elif k == "TERMINAL":
                name = self.take("TERMINAL")
                priority = 0
                if kinds[self.i] == "_DOT":
                    self.i += 1
                    priority = self.number()
                self.take("_COLON")
                body = self.expansions()
                self.take("_NL")
                out.append(("term", name, priority, body))
            elif k == "_IGNORE":
                self.i += 1
                body = self.expansions()
                self.take("_NL")
                out.append(("ignore", body))
            elif k == "_DECLARE":
                self.i += 1
                names = [self.take("TERMINAL")]  # (a declared rule: Lark's loader)
                while kinds[self.i] == "TERMINAL":
                    names.append(self.take("TERMINAL"))
                self.take("_NL")
                out.append(("declare", names))
            elif k == "_IMPORT":
                self.i += 1
                out.append(self.import_())
            else:  # %override, %extend, syntax errors
                _fallback()

    def rule(self) -> tuple[Any, ...]:
        modifiers = ""
        if self.peek() == "RULE_MODIFIERS":
            modifiers = self.take("RULE_MODIFIERS")
        name = self.take("RULE")
        if self.peek() == "_DOT":  # a priority: no part of the language
            self.i += 1
            self.number()
        self.take("_COLON")  # (template parameters: Lark's loader)
        body = self.expansions()
        self.take("_NL")
        if "?" in modifiers and name.startswith("_"):
            _fallback()
        return ("rule", name, "!" in modifiers, body)

    def name(self) -> str:
        if self.peek() == "RULE":
            return self.take("RULE")
        return self.take("TERMINAL")

    def import_(self) -> tuple[Any, ...]:
        path = [self.name()]  # (a relative import, `%import .x`: Lark's loader)
        while self.peek() == "_DOT":
            self.i += 1
            path.append(self.name())
        k = self.peek()
        if k == "_LPAR":
            self.i += 1
            names = [self.name()]
            while self.peek() == "_COMMA":
                self.i += 1
                names.append(self.name())
            self.take("_RPAR")
            self.take("_NL")
            return ("import", tuple(path), {n: n for n in names})
        alias = None
        if k == "_TO":
            self.i += 1
            alias = self.name()
        self.take("_NL")
        if len(path) < 2:
            _fallback()
        return ("import", tuple(path[:-1]), {path[-1]: alias or path[-1]})

    def expansions(self) -> _Node:
        alts = [self.alias()]
        kinds = self.kinds
        while kinds[self.i] in ("_OR", "_NL_OR"):
            self.i += 1
            alts.append(self.alias())
        return _Node("expansions", alts)

    def alias(self) -> _Node:
        exp = self.expansion()
        if self.kinds[self.i] == "_TO":
            self.i += 1
            return _Node("alias", [exp], self.take("RULE"))
        return exp

    def expansion(self) -> _Node:
        items = []
        kinds = self.kinds
        while kinds[self.i] in _ATOM_START:
            items.append(self.expr())
        return _Node("expansion", items)

    def expr(self) -> Any:
        atom = self.atom()
        k = self.kinds[self.i]
        if k == "OP":
            op = self.values[self.i]
            self.i += 1
            return _Node("expr", [atom], (op,))
        if k == "TILDE":
            self.i += 1
            counts = [self.take("NUMBER")]
            if self.peek() == "_DOTDOT":
                self.i += 1
                counts.append(self.take("NUMBER"))
            if not all(n.isdigit() for n in counts):  # a signed count: Lark's loader
                _fallback()
            return _Node("expr", [atom], ("~", *map(int, counts)))
        return atom

    def atom(self) -> Any:
        k = self.kinds[self.i]
        v = self.values[self.i]
        self.i += 1
        if k == "TERMINAL":
            return Terminal(v, filter_out=v.startswith("_"))
        if k == "RULE":
            if self.peek() == "_LBRACE":  # a template: Lark's loader
                _fallback()
            return NonTerminal(v)
        if k == "STRING":
            if self.peek() == "_DOTDOT":
                self.i += 1
                return _Lit("range", (v, self.take("STRING")))
            return _Lit("STRING", v)
        if k == "REGEXP":
            return _Lit("REGEXP", v)
        if k == "_LPAR":
            e = self.expansions()
            self.take("_RPAR")
            return e
        assert k == "_LBRA"
        e = self.expansions()
        self.take("_RBRA")
        return _Node("maybe", [e])


# -- literals and terminals -------------------------------------------------------------


def _literal_pattern(lit: _Lit) -> Pattern:
    raw = lit.raw
    if lit.kind == "range":
        a, b = raw
        if a[-1] != '"' or b[-1] != '"':  # "a"i.."z": Lark's loader
            _fallback()
        a, b = a[1:-1], b[1:-1]
        if len(_unescape(a)) != 1 or len(_unescape(b)) != 1:
            _fallback()
        return PatternRE(f"[{a}-{b}]")
    flag_start = max(raw.rfind("/"), raw.rfind('"')) + 1
    flags = raw[flag_start:]
    if "\n" in raw and (lit.kind == "STRING" or "x" not in flags):
        _fallback()
    body = raw[: flag_start - 1]
    if not body or body[0] != raw[flag_start - 1]:
        _fallback()
    s = _unescape(body[1:])
    if not s:
        _fallback()
    if lit.kind == "STRING":
        return PatternStr(s.replace("\\\\", "\\"), flags, raw=raw)
    return PatternRE(s, flags, raw=raw)


def _unescape(s: str) -> str:
    """Lark's reading of the text between the quotes (or slashes) of a literal."""
    if "\\" not in s and s.isascii() and "\r" not in s and "\x00" not in s:
        return s
    try:
        return str(eval_escaping(s))
    except Exception:
        return _fallback()


def _join(items: list[Pattern]) -> Pattern:
    if not items:
        return PatternStr("")
    if len(items) == 1:
        return items[0]
    return PatternRE("".join(p.to_regexp() for p in items))


def _either(alts: list[Pattern]) -> Pattern:
    if len(alts) == 1:
        return alts[0]
    alts.sort(key=lambda p: (-p.max_width, -p.min_width, -len(p.value)))
    return PatternRE("(?:{})".format("|".join(p.to_regexp() for p in alts)))


def _term_pattern(node: Any, resolve: Callable[[str], Pattern]) -> Pattern:
    """The pattern Lark composes for a terminal's body (its references resolved)."""
    if isinstance(node, _Node):
        kind = node.kind
        if kind == "expansions":
            return _either([_term_pattern(c, resolve) for c in node.children])
        if kind == "expansion":
            return _join([_term_pattern(c, resolve) for c in node.children])
        if kind == "expr":
            inner = _term_pattern(node.children[0], resolve)
            op = node.arg
            if op[0] == "~":
                if len(op) == 2:
                    suffix = f"{{{op[1]}}}"
                elif op[2] < op[1]:
                    return _fallback()
                else:
                    suffix = f"{{{op[1]},{op[2]}}}"
            else:
                suffix = op[0]
            return PatternRE(f"(?:{inner.to_regexp()}){suffix}", inner.flags)
        if kind == "maybe":
            inner = _term_pattern(node.children[0], resolve)
            return PatternRE(f"(?:{inner.to_regexp()})?", inner.flags)
        return _fallback()  # an alias in a terminal
    if isinstance(node, _Lit):
        return _literal_pattern(node)
    if isinstance(node, Terminal):
        return resolve(node.name)
    return _fallback()  # a rule in a terminal


def _is_empty_body(body: _Node) -> bool:
    return (
        len(body.children) == 1
        and body.children[0].kind == "expansion"
        and not (body.children[0].children)
    )


class _TermDefs:
    """Terminal definitions (name → body or None when declared), compiled on demand."""

    def __init__(self) -> None:
        self.bodies: dict[str, _Node | None] = {}
        self.priorities: dict[str, int] = {}
        self.compiled: dict[str, Pattern] = {}
        self.busy: set[str] = set()

    def pattern(self, name: str) -> Pattern:
        p = self.compiled.get(name)
        if p is not None:
            return p
        body = self.bodies.get(name)
        if body is None or name in self.busy:  # undefined, declared, or recursive
            _fallback()
        assert body is not None
        self.busy.add(name)
        p = self.compiled[name] = _term_pattern(body, self.pattern)
        self.busy.discard(name)
        return p


_common: dict[str, Pattern] | None = None


def _common_terminals() -> dict[str, Pattern]:
    """The terminals of Lark's bundled ``common.lark``, in its order, compiled once."""
    global _common
    if _common is None:
        import pkgutil

        data = pkgutil.get_data("lark", "grammars/common.lark")
        if data is None:
            _fallback()
        assert data is not None
        defs = _TermDefs()
        for st in _Parser(data.decode()).statements():
            if st[0] != "term" or st[1] in defs.bodies or st[2] != 0:
                _fallback()
            defs.bodies[st[1]] = st[3]
        _common = {name: defs.pattern(name) for name in defs.bodies}
    return _common


# -- rules: EBNF into BNF ---------------------------------------------------------------


class _Empty:
    """The placeholder Lark puts in the empty side of ``[...]`` (dropped from rules)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "_EMPTY"


_EMPTY = _Empty()
_EMPTY_SEQ: tuple[str] = ("expansion",)


def _lark_order(root: _Node) -> list[_Node]:
    """The nodes in the order Lark's in-place transformers visit them (``iter_subtrees``:
    deepest first, left to right)."""
    queue = [root]
    for node in queue:
        for c in reversed(node.children):
            if isinstance(c, _Node):
                queue.append(c)
    queue.reverse()
    return queue


class _Rules:
    """Rule bodies into BNF, the way ``Grammar.compile`` turns them: anonymous terminals
    named (``PrepareAnonTerminals``), EBNF operators turned into helper rules and inline
    alternatives (``EBNF_to_BNF``), alternatives multiplied out (``SimplifyRule_Visitor``)."""

    def __init__(self, terminals: list[TerminalDef]) -> None:
        self.terminals = terminals
        self.term_names = {td.name for td in terminals}
        self.by_pattern = {td.pattern: td for td in terminals}
        self.anon = 0
        self.helper = 0
        self.cache: dict[Any, NonTerminal] = {}
        self.new_rules: list[tuple[str, Any]] = []
        self.prefix = ""
        self.keep_all = False

    # PrepareAnonTerminals
    def name_literal(self, lit: _Lit) -> Terminal:
        p = _literal_pattern(lit)
        td = self.by_pattern.get(p)
        name: str | None = None
        if isinstance(p, PatternStr):
            if td is not None:
                name = td.name
            else:
                value = p.value
                name = _TERMINAL_NAMES.get(value)
                if (
                    name is None
                    and value
                    and is_id_continue(value)
                    and is_id_start(value[0])
                    and value.upper() not in self.term_names
                ):
                    name = value.upper()
                if name in self.term_names:
                    name = None
        elif td is not None:
            name = td.name
        if name is None:
            name = f"__ANON_{self.anon}"
            self.anon += 1
        if name not in self.term_names:
            self.term_names.add(name)
            td = TerminalDef(name, p)
            self.by_pattern[p] = td
            self.terminals.append(td)
        return Terminal(name, filter_out=not self.keep_all and isinstance(p, PatternStr))

    # EBNF_to_BNF
    def _new_rule(self, key: Any, inner: str, body: Any, name: str | None = None) -> NonTerminal:
        if name is None:
            name = f"__{self.prefix}_{inner}_{self.helper}"
            self.helper += 1
        nt = NonTerminal(name)
        self.new_rules.append((name, body))
        self.cache[key] = nt
        return nt

    def _recurse(self, inner: str, x: Any) -> NonTerminal:
        nt = self.cache.get(x)
        if nt is not None:
            return nt
        name = f"__{self.prefix}_{inner}_{self.helper}"
        self.helper += 1
        nt = NonTerminal(name)
        return self._new_rule(
            x, inner, ("expansions", ("expansion", x), ("expansion", nt, x)), name
        )

    def _repeat(self, a: int, b: int, target: Any, atom: Any) -> NonTerminal:
        key = (a, b, target, atom)
        nt = self.cache.get(key)
        if nt is not None:
            return nt
        body = ("expansions", ("expansion",) + (target,) * a + (atom,) * b)
        return self._new_rule(key, f"repeat_a{a}_b{b}", body)

    def _repeat_opt(self, a: int, b: int, target: Any, target_opt: Any, atom: Any) -> NonTerminal:
        key = (a, b, target, atom, "opt")
        nt = self.cache.get(key)
        if nt is not None:
            return nt
        body = (
            "expansions",
            *(("expansion",) + (target,) * i + (target_opt,) for i in range(a)),
            *(("expansion",) + (target,) * a + (atom,) * i for i in range(b)),
        )
        return self._new_rule(key, f"repeat_a{a}_b{b}_opt", body)

    def _repeats(self, x: Any, lo: int, hi: int) -> Any:
        if hi < REPEAT_BREAK_THRESHOLD:
            return ("expansions", *(("expansion",) + (x,) * n for n in range(lo, hi + 1)))
        lo_target = x
        for a, b in small_factors(lo, SMALL_FACTOR_THRESHOLD):
            lo_target = self._repeat(a, b, lo_target, x)
        if hi == lo:
            return lo_target
        factors = small_factors(hi - lo + 1, SMALL_FACTOR_THRESHOLD)
        target: Any = x
        opt: Any = _EMPTY_SEQ
        for a, b in factors[:-1]:
            opt = self._repeat_opt(a, b, target, opt, x)
            target = self._repeat(a, b, target, x)
        a, b = factors[-1]
        opt = self._repeat_opt(a, b, target, opt, x)
        return ("expansions", ("expansion", lo_target, opt))

    def _size(self, x: Any) -> int:
        """``FindRuleSize``: how many children the side of a ``[...]`` leaves in a tree."""
        if isinstance(x, tuple):
            sizes = [self._size(c) for c in x[1:]]
            return sum(sizes) if x[0] == "expansion" else max(sizes)
        if x is _EMPTY:
            return 0
        if isinstance(x, Terminal):
            return 1 if self.keep_all or not x.filter_out else 0
        return 0 if x.name.startswith("_") else 1

    def _transform(self, node: _Node) -> Any:
        kind = node.kind
        c = node.children
        if kind == "expansions":
            return ("expansions", *c)
        if kind == "expansion":
            return ("expansion", *c)
        if kind == "expr":
            x = c[0]
            op = node.arg
            if op[0] == "?":
                return ("expansions", x, _EMPTY_SEQ)
            if op[0] == "+":
                return self._recurse("plus", x)
            if op[0] == "*":
                return ("expansions", self._recurse("star", x), _EMPTY_SEQ)
            assert op[0] == "~"
            lo, hi = op[1], op[-1]
            if hi < lo:
                _fallback()
            return self._repeats(x, lo, hi)
        if kind == "maybe":
            x = c[0]
            return ("expansions", x, ("expansion",) + (_EMPTY,) * self._size(x))
        return _fallback()  # an alias inside a group

    def rule(self, name: str, keep_all: bool, body: _Node) -> Any:
        """The BNF tree of a rule (helper rules go to ``new_rules``)."""
        self.prefix = name
        self.keep_all = keep_all
        order = _lark_order(body)
        for node in order:  # anonymous terminals, in Lark's order
            ch = node.children
            for j, c in enumerate(ch):
                if isinstance(c, _Lit):
                    ch[j] = self.name_literal(c)
        aliases: list[str | None] = []
        for node in order:
            ch = node.children
            for j, c in enumerate(ch):
                if isinstance(c, _Node):
                    if c.kind == "alias":
                        if node is not body:
                            _fallback()
                        continue
                    ch[j] = self._transform(c)
        for j, c in enumerate(body.children):
            if isinstance(c, _Node):  # an alias: its expansion (rewritten), and the name
                aliases.append(c.arg)
                body.children[j] = c.children[0]
            else:
                aliases.append(None)
        return body.children, aliases


def _alternatives(
    x: Any, memo: dict[int, tuple[Any, list[tuple[Any, ...]]]]
) -> list[tuple[Any, ...]]:
    """The sequences a BNF tree stands for, as Lark multiplies them out, duplicates dropped."""
    if not isinstance(x, tuple):
        return [(x,)]
    got = memo.get(id(x))
    if got is not None and got[0] is x:
        return got[1]
    if x[0] == "expansion":
        seqs: list[tuple[Any, ...]] = [()]
        for c in x[1:]:
            cs = _alternatives(c, memo)
            if len(cs) == 1:
                one = cs[0]
                seqs = [s + one for s in seqs]
            else:
                seqs = [s + t for s in seqs for t in cs]
        out = list(dict.fromkeys(seqs))
    else:
        out = list(dict.fromkeys(s for c in x[1:] for s in _alternatives(c, memo)))
    memo[id(x)] = (x, out)
    return out


# -- the whole grammar --------------------------------------------------------------------


def read_lark(text: str, start: str, import_paths: Sequence[Any] = ()) -> Result | None:
    """Read a Lark grammar as ``lark.load_grammar.load_grammar(text, ...)`` and
    ``.compile([start], set())`` do: the terminal definitions, the BNF rules, the ignore
    list, and the names of the ``%declare``'d terminals; or ``None`` where this reader
    leaves the grammar to Lark's loader (see the module's docstring)."""
    if not (ENABLED and _VERSION_OK):
        return None
    try:
        return _read(text, start, import_paths)
    except _FallbackError:
        return None
    except Exception:  # (anything unforeseen: Lark's loader decides)
        return None


def _read(text: str, start: str, import_paths: Sequence[Any]) -> Result:
    statements = _Parser(text).statements()

    terms = _TermDefs()
    declared: set[str] = set()
    rules: list[tuple[str, bool, _Node]] = []
    rule_names: set[str] = set()
    ignore: list[str] = []

    # imports first, in the order of their first statement, as Lark does them
    imported: dict[tuple[str, ...], dict[str, str]] = {}
    for st in statements:
        if st[0] == "import":
            imported.setdefault(st[1], {}).update(st[2])
    for path, renames in imported.items():
        if path != ("common",):
            _fallback()
        for p in import_paths:
            if not isinstance(p, str) or os.path.exists(os.path.join(p, "common.lark")):
                _fallback()
        common = _common_terminals()
        targets = set(renames.values())
        if len(targets) != len(renames) or not set(renames) <= set(common):
            _fallback()
        if any(t.startswith(("common__", "_common__")) or not t.isupper() for t in targets):
            _fallback()
        for name, pattern in common.items():
            if name in renames:
                target = renames[name]
                if target in terms.bodies:
                    _fallback()
                terms.bodies[target] = _Node("expansions", [])  # (compiled already)
                terms.compiled[target] = pattern
                terms.priorities[target] = 0

    for st in statements:
        kind = st[0]
        if kind == "term":
            _, name, priority, body = st
            if name in terms.bodies or _is_empty_body(body):
                _fallback()
            terms.bodies[name] = body
            terms.priorities[name] = priority
        elif kind == "rule":
            name = st[1]
            if name in rule_names:
                _fallback()
            rule_names.add(name)
            rules.append(st[1:])
        elif kind == "ignore":
            body = st[1]
            only: list[Any] = body.children[0].children if len(body.children) == 1 else []
            if (
                len(only) == 1
                and isinstance(only[0], Terminal)
                and body.children[0].kind == "expansion"
            ):
                ignore.append(only[0].name)
            else:
                if _is_empty_body(body):
                    _fallback()
                name = f"__IGNORE_{len(ignore)}"
                ignore.append(name)
                terms.bodies[name] = body
                terms.priorities[name] = 0
        elif kind == "declare":
            for name in st[1]:
                if name in terms.bodies:
                    _fallback()
                terms.bodies[name] = None
                declared.add(name)

    # every name used is defined; every ignored name too
    for name in ignore:
        if name not in terms.bodies:
            _fallback()
    for _name, _keep, body in rules:
        _check_names(body, terms.bodies, rule_names)

    # terminals: every definition compiled, in definition order
    terminals = [
        TerminalDef(name, terms.pattern(name), terms.priorities[name])
        for name, body in terms.bodies.items()
        if body is not None
    ]

    # rules
    conv = _Rules(terminals)
    bnf: list[tuple[str, Any, list[str | None]]] = []
    for name, keep_all, body in rules:
        alts, aliases = conv.rule(name, keep_all, body)
        bnf.append((name, alts, aliases))
    bnf.extend((name, body[1:], [None] * (len(body) - 1)) for name, body in conv.new_rules)

    compiled: dict[tuple[str, tuple[Any, ...]], Rule] = {}
    memo: dict[int, tuple[Any, list[tuple[Any, ...]]]] = {}
    for name, alts, aliases in bnf:
        seen: dict[tuple[tuple[Any, ...], str | None], None] = {}
        for alt, alias in zip(alts, aliases, strict=True):
            for seq in _alternatives(alt, memo):
                seen[(seq, alias)] = None
        origin = NonTerminal(name)
        for i, (seq, alias) in enumerate(seen):
            if alias is not None and name.startswith("_"):
                _fallback()
            expansion = [s for s in seq if s is not _EMPTY]
            key = (name, tuple(expansion))
            if key in compiled:
                if expansion:  # "Rules defined twice"
                    _fallback()
                continue
            compiled[key] = Rule(origin, expansion, i, alias)
    out = list(compiled.values())

    # unused rules dropped, as Lark does: until no rule goes
    while True:
        used = {
            s.name for r in out for s in r.expansion if not s.is_term and s.name != r.origin.name
        }
        used.add(start)
        kept = [r for r in out if r.origin.name in used]
        if len(kept) == len(out):
            break
        out = kept
    used_terms = {s.name for r in out for s in r.expansion if s.is_term}
    terminals = [t for t in conv.terminals if t.name in used_terms or t.name in ignore]
    return terminals, out, ignore, declared


def _check_names(node: Any, terms: dict[str, Any], rules: set[str]) -> None:
    """Every symbol used in a rule is defined (Lark's ``GrammarBuilder.validate``)."""
    for c in node.children:
        if isinstance(c, _Node):
            _check_names(c, terms, rules)
        elif isinstance(c, Terminal):
            if c.name not in terms:
                _fallback()
        elif isinstance(c, NonTerminal) and c.name not in rules:
            _fallback()
