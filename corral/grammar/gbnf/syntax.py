"""GBNF text to a syntax tree: llama.cpp's grammar format, read as llama.cpp reads it.

The syntax (llama.cpp's ``grammars/README.md`` and its parser, ``src/llama-grammar.cpp``):

* a grammar is rules ``name ::= alternatives``; names are words of ASCII letters, digits
  and ``-``; ``#`` starts a comment to the end of the line;
* a rule ends at a newline, except after ``::=`` or ``|`` and inside parentheses;
* items: ``"literal"``, ``[class]`` / ``[^class]`` (ranges ``a-z``; a ``-`` before ``]``
  is itself), ``.`` (any character), a rule name, ``( ... )``, and the special tokens
  ``<[id]>`` and ``<text>``; each may be followed by ``*``, ``+``, ``?``, ``{m}``,
  ``{m,}`` or ``{m,n}``, several times;
* escapes in literals and classes: ``\\x`` (2 hex digits), ``\\u`` (4), ``\\U`` (8),
  ``\\t \\r \\n \\\\ \\" \\[ \\] \\-``; any other is an error.

Where llama.cpp is silent or lenient, this reader is strict, so nothing is read
differently from what its author meant: a rule defined twice, a class range whose ends
are reversed, and a repetition above :data:`MAX_REPEAT` are errors with their line and
column (llama.cpp keeps the last definition, matches nothing, and reads a bound above
2,000 as no bound). The token negation ``!<...>`` (any one token but that one) is refused:
corral's grammars constrain bytes and name special tokens, not arbitrary token ids.

The tree: :class:`Seq`, :class:`Choice`, :class:`Rep`, :class:`Ref` (a rule),
:class:`Literal`, :class:`Special`, and the regex node ``Chars`` for a character class.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import GrammarError, InvalidArgumentError, UnsupportedFeatureError, caret_snippet
from ..regex import ast
from ..regex.charset import MAX_CODE_POINT, CharSet

MAX_REPEAT = 10_000
"""The largest count a repetition ``{m,n}`` may give (each unit of a bound is a rule)."""


@dataclass(frozen=True)
class Ref:
    """A reference to the rule ``name``, written at offset ``pos`` of the text."""

    name: str
    pos: int = field(compare=False)


@dataclass(frozen=True)
class Literal:
    """A quoted string (never empty: ``""`` is read as the empty sequence)."""

    text: str


@dataclass(frozen=True)
class Special:
    """A special token: ``<[128009]>`` by id or ``<think>`` by text (``text`` is how it is
    written, which is how corral's grammars name special tokens)."""

    text: str


@dataclass(frozen=True)
class RegexItem:
    """XGrammar's ``Regex("...")``: an ECMA-262 pattern the element matches in full."""

    pattern: str
    pos: int = field(compare=False)


@dataclass(frozen=True)
class Seq:
    """The items one after another (``Seq(())``: the empty string)."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Choice:
    """Any one of the items."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Rep:
    """``item`` repeated ``min`` to ``max`` times (``max=None``: no bound)."""

    item: Node
    min: int
    max: int | None


Node = ast.Chars | Seq | Choice | Rep | Ref | Literal | Special | RegexItem
EMPTY = Seq(())


@dataclass(frozen=True)
class RuleDef:
    """A rule: its name, body, and the offset of its name in the text."""

    name: str
    body: Node
    pos: int


@dataclass(frozen=True)
class GbnfGrammar:
    """A parsed GBNF text: its rules in the order written."""

    text: str
    rules: dict[str, RuleDef]

    def error(self, message: str, pos: int) -> GrammarError:
        return syntax_error(self.text, message, pos)


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of offset ``pos``."""
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def syntax_error(text: str, message: str, pos: int) -> GrammarError:
    line, col = line_col(text, pos)
    return GrammarError(
        f"GBNF: {message}",
        line=line,
        column=col,
        snippet=caret_snippet(text, line, col),
    )


def unsupported(text: str, feature: str, pos: int, detail: str) -> UnsupportedFeatureError:
    line, col = line_col(text, pos)
    return UnsupportedFeatureError(feature, location=f"line {line}, column {col}", detail=detail)


_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_SIMPLE_ESCAPES = {
    "t": "\t",
    "r": "\r",
    "n": "\n",
    "\\": "\\",
    '"': '"',
    "[": "[",
    "]": "]",
    "-": "-",
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
# XGrammar's EBNF: names may also hold `_` and `.` (not first a digit); strings may escape
# `'`; classes may escape regex punctuation
_EBNF_WORD = _WORD | frozenset("_.")
_EBNF_STRING_ESCAPES = _SIMPLE_ESCAPES | {"'": "'"}
_EBNF_CLASS_ESCAPES = _SIMPLE_ESCAPES | {c: c for c in "^$.*+?(){}|/'"}
_XGRAMMAR_MACROS = ("TagDispatch", "Token", "ExcludeToken", "TokenTagDispatch")
_ANY = ast.Chars(CharSet([(0, MAX_CODE_POINT)]))


class _Reader:
    """A recursive-descent reader over ``text`` (positions are offsets into it)."""

    def __init__(self, text: str, dialect: str = "gbnf") -> None:
        self.text = text
        self.pos = 0
        self.rules: dict[str, RuleDef] = {}
        self.ebnf = dialect == "ebnf"
        self.word = _EBNF_WORD if self.ebnf else _WORD

    # -- lexical ------------------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> GrammarError:
        return syntax_error(self.text, message, self.pos if pos is None else pos)

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.text[i] if i < len(self.text) else ""

    def space(self, newline_ok: bool) -> None:
        t, n = self.text, len(self.text)
        while self.pos < n:
            c = t[self.pos]
            if c == "#":
                while self.pos < n and t[self.pos] not in "\r\n":
                    self.pos += 1
            elif c in " \t" or (newline_ok and c in "\r\n"):
                self.pos += 1
            else:
                break

    def word_end(self) -> int:
        """Where the word (name characters) at the reader's position ends."""
        i, t = self.pos, self.text
        while i < len(t) and t[i] in self.word:
            i += 1
        return i

    def name(self) -> str:
        start, end = self.pos, self.word_end()
        if end == start or (self.ebnf and self.text[start].isdigit()):
            raise self.error("expecting a rule name", start)
        self.pos = end
        return self.text[start:end]

    def at_rule_start(self) -> bool:
        """(EBNF, where newlines do not end rules) whether a name and ``::=`` come next."""
        i, t = self.word_end(), self.text
        if i == self.pos:
            return False
        while i < len(t) and t[i] in " \t":
            i += 1
        return t.startswith("::=", i)

    def integer(self) -> int:
        start = self.pos
        while self.peek().isascii() and self.peek().isdigit():
            self.pos += 1
        if self.pos == start:
            raise self.error("expecting an integer")
        return int(self.text[start : self.pos])

    def char(self, in_class: bool = False) -> int:
        """One character of a literal or class (an escape or a plain character)."""
        escapes = _SIMPLE_ESCAPES
        if self.ebnf:
            escapes = _EBNF_CLASS_ESCAPES if in_class else _EBNF_STRING_ESCAPES
        c = self.peek()
        if not c:
            raise self.error("unexpected end of input")
        if c != "\\":
            self.pos += 1
            return ord(c)
        start = self.pos
        e = self.peek(1)
        if e in escapes:
            self.pos += 2
            return ord(escapes[e])
        if e in _HEX_ESCAPES:
            size = _HEX_ESCAPES[e]
            digits = self.text[self.pos + 2 : self.pos + 2 + size]
            if len(digits) != size or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(f"expecting {size} hex digits after \\{e}", start)
            value = int(digits, 16)
            if value > MAX_CODE_POINT:
                raise self.error(f"\\{e}{digits} is past the last code point U+10FFFF", start)
            self.pos += 2 + size
            return value
        raise self.error(f"unknown escape \\{e}" if e else "unexpected end of input", start)

    # -- grammar ------------------------------------------------------------------------
    def grammar(self) -> dict[str, RuleDef]:
        self.space(True)
        while self.pos < len(self.text):
            self.rule()
        return self.rules

    def rule(self) -> None:
        start = self.pos
        name = self.name()
        self.space(False)
        if not self.text.startswith("::=", self.pos):
            raise self.error("expecting ::=")
        self.pos += 3
        self.space(True)
        body = self.alternatives(nested=self.ebnf)  # in EBNF, newlines never end a rule
        if self.ebnf:
            if self.text.startswith("(=", self.pos):
                raise unsupported(
                    self.text,
                    "lookahead assertion (= ...)",
                    self.pos,
                    "it restricts what may follow the rule; corral would have to enforce it "
                    "and does not yet",
                )
            if self.peek() and not self.at_rule_start():
                raise self.error("expecting a rule (name ::= ...) or the end of the text")
        elif self.peek() == "\r":
            self.pos += 2 if self.peek(1) == "\n" else 1
        elif self.peek() == "\n":
            self.pos += 1
        elif self.peek():
            raise self.error("expecting a newline or the end of the text")
        if name in self.rules:
            line, col = line_col(self.text, self.rules[name].pos)
            raise self.error(
                f"rule {name!r} is defined twice (first at line {line}, column {col})", start
            )
        self.rules[name] = RuleDef(name, body, start)
        self.space(True)

    def alternatives(self, nested: bool) -> Node:
        options = [self.sequence(nested)]
        while self.peek() == "|":
            self.pos += 1
            self.space(True)
            options.append(self.sequence(nested))
        return options[0] if len(options) == 1 else Choice(tuple(options))

    def sequence(self, nested: bool) -> Node:
        items: list[Node] = []
        while True:
            c = self.peek()
            at = self.pos
            if c == '"':
                text = self.string()
                items.append(Literal(text) if text else EMPTY)
            elif c == "[":
                items.append(self.char_class())
            elif c == "<":
                items.append(self.special())
            elif c == "!":
                raise unsupported(
                    self.text,
                    "token negation !<...>",
                    at,
                    "a grammar constrains text and names special tokens; it cannot allow "
                    "every token but one",
                )
            elif self.ebnf and c and c in self.word and self.at_rule_start():
                break  # the next rule
            elif self.ebnf and c and c in self.word and self.macro() is not None:
                items.append(self.macro_item())
            elif c and c in self.word:
                items.append(Ref(self.name(), at))
            elif c == "(" and self.ebnf and self.text.startswith("(=", self.pos):
                break  # a lookahead assertion ends the rule
            elif c == "(":
                self.pos += 1
                self.space(True)
                inner = self.alternatives(nested=True)
                if self.peek() != ")":
                    raise self.error("expecting ')'")
                self.pos += 1
                items.append(inner)
            elif c == ".":
                self.pos += 1
                items.append(_ANY)
            elif c in ("*", "+", "?", "{"):
                if not items:
                    raise self.error(f"{c} with nothing before it to repeat")
                items[-1] = self.repetition(items[-1], nested)
            else:
                break
            self.space(nested)
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def macro(self) -> str | None:
        """(EBNF) the name of XGrammar's macro called here (``Regex(``...), if any."""
        i, t = self.word_end(), self.text
        name = t[self.pos : i]
        if name in (*_XGRAMMAR_MACROS, "Regex") and t.startswith("(", i):
            return name
        return None

    def macro_item(self) -> Node:
        at = self.pos
        name = self.name()
        if name != "Regex":
            raise unsupported(
                self.text,
                f"XGrammar's {name}(...)",
                at,
                "token sets and tag dispatch are XGrammar's own; corral writes them as "
                "structural tags",
            )
        self.pos += 1  # (
        self.space(True)
        if self.peek() != '"':
            raise self.error('expecting a string: Regex("...")')
        str_at = self.pos
        pattern = self.string()
        self.space(True)
        if self.peek() != ")":
            raise self.error("expecting ')'")
        self.pos += 1
        return RegexItem(pattern, str_at)

    def string(self) -> str:
        """A quoted string, from its opening quote (at the reader's position)."""
        at = self.pos
        self.pos += 1
        chars: list[str] = []
        while self.peek() != '"':
            if not self.peek():
                raise self.error("unexpected end of input in a string", at)
            chars.append(chr(self.char()))
        self.pos += 1
        return "".join(chars)

    def char_class(self) -> ast.Chars:
        at = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while self.peek() != "]":
            if not self.peek():
                raise self.error("unexpected end of input in a character class", at)
            lo_at = self.pos
            lo = self.char(in_class=True)
            hi = lo
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                hi = self.char(in_class=True)
                if hi < lo:
                    raise self.error(
                        f"range {self.text[lo_at : self.pos]} has its ends reversed", lo_at
                    )
            ranges.append((lo, hi))
        self.pos += 1
        cs = CharSet(ranges)
        return ast.Chars(cs.complement() if negated else cs)

    def special(self) -> Special:
        at = self.pos
        end = self.text.find(">", at + 1)
        if end < 0 or "\n" in self.text[at:end]:
            raise self.error("expecting '>' to close the token", at)
        inner = self.text[at + 1 : end]
        if inner.startswith("["):
            if not (inner.endswith("]") and inner[1:-1].isascii() and inner[1:-1].isdigit()):
                raise self.error("expecting a token id as <[123]>", at)
        elif not inner:
            raise self.error("expecting a token's text or id inside <>", at)
        self.pos = end + 1
        return Special(self.text[at : end + 1])

    def repetition(self, item: Node, nested: bool) -> Node:
        at = self.pos
        c = self.peek()
        self.pos += 1
        lo: int
        hi: int | None
        if c == "*":
            lo, hi = 0, None
        elif c == "+":
            lo, hi = 1, None
        elif c == "?":
            lo, hi = 0, 1
        else:
            self.space(nested)
            lo = self.integer()
            self.space(nested)
            if self.peek() == "}":
                hi = lo
            elif self.peek() == ",":
                self.pos += 1
                self.space(nested)
                hi = self.integer() if self.peek().isascii() and self.peek().isdigit() else None
                if hi is None and self.ebnf and self.text.startswith("-1", self.pos):
                    self.pos += 2  # XGrammar writes {m, -1} for no bound
                self.space(nested)
                if self.peek() != "}":
                    raise self.error("expecting '}'")
            else:
                raise self.error("expecting ',' or '}'")
            self.pos += 1
            for n in (lo, hi):
                if n is not None and n > MAX_REPEAT:
                    raise self.error(f"repetition count {n} is above the limit of {MAX_REPEAT}", at)
            if hi is not None and hi < lo:
                raise self.error(f"repetition {{{lo},{hi}}} has its bounds reversed", at)
        return Rep(item, lo, hi)


def parse_gbnf(text: str, dialect: str = "gbnf") -> GbnfGrammar:
    """Read GBNF ``text`` (see the module docs); ``dialect="ebnf"``: XGrammar's EBNF
    (``Grammar.from_ebnf``), the same syntax but that newlines never end a rule (a rule
    starts at a name followed by ``::=``), names may hold ``_`` and ``.``, classes may
    escape regex punctuation, and ``Regex("...")`` is an ECMA-262 pattern; its lookahead
    assertions ``(= ...)`` and token macros (``TagDispatch``, ``Token``,
    ``ExcludeToken``, ``TokenTagDispatch``) are refused.

    Raises:
        GrammarError: a syntax error or a rule defined twice, with line, column and a caret.
        UnsupportedFeatureError: the token negation ``!<...>``.
    """
    if not isinstance(text, str):
        raise TypeError(f"GBNF text must be str, not {type(text).__name__}")
    if dialect not in ("gbnf", "ebnf"):
        raise InvalidArgumentError(f"dialect must be 'gbnf' or 'ebnf', not {dialect!r}")
    return GbnfGrammar(text, _Reader(text, dialect).grammar())
