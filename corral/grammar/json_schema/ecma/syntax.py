"""ECMA-262 regular expressions (JSON Schema ``pattern``): text → syntax tree.

JSON Schema's ``pattern`` and ``patternProperties`` use ECMA-262 regular expressions.
Validators such as ajv compile them with the ``u`` (Unicode) flag and no other flag, so
this parser reads them the same way: the pattern is a sequence of code points, ``.``
and classes match whole code points, ``\\u{...}`` and ``\\p{...}`` are available.

Real-world schemas are often written for the lenient syntax of ECMA-262 Annex B, so a
few things that the ``u`` flag rejects are accepted with their Annex B meaning:

* ``{``, ``}`` and ``]`` that do not form a quantifier or a class are literals
  (``a{,5}`` is the five characters ``a{,5}``);
* ``\\`` followed by any character that is not an ASCII letter or digit is that character
  (``\\-``, ``\\'``, ``\\_``);
* a class range with a class escape at either end (``[\\w-.]``) means the escape, ``-``
  and the other end, as in Annex B;
* a lookahead may carry a quantifier.

Escapes of ASCII letters and digits that ECMA-262 does not define (``\\a``, ``\\z``,
``\\A``, octal ``\\01``) are rejected with :class:`~corral.errors.GrammarError` rather
than read as Annex B literals: their author almost certainly meant something else.

The tree keeps everything the pattern means, including what no finite automaton can do
(backreferences, lookaround of any length, capture groups, greedy and lazy quantifiers):
:mod:`.lower` turns the regular part into the grammar's regex tree, :mod:`.match` runs
any tree with ECMA-262's backtracking semantics.

Refused with :class:`~corral.errors.UnsupportedFeatureError` (well-formed, but neither
compiled nor evaluated): inline modifiers ``(?i:...)``, ``\\p{Script=...}`` and binary
Unicode properties other than ``Any``, ``ASCII`` and ``Assigned``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ....errors import (
    ArgumentTypeError,
    CompileBudgetError,
    GrammarError,
    Location,
    UnsupportedFeatureError,
)
from ...regex.charset import EMPTY, MAX_CODE_POINT, UNIVERSE, CharSet
from .unicode import (
    BINARY_PROPERTIES,
    DIGIT,
    DOT,
    GC_ALIASES,
    GC_SHORT,
    SPACE,
    WORD,
    general_category,
)

__all__ = [
    "MAX_GROUP_DEPTH",
    "Alt",
    "Anchor",
    "BackRef",
    "Chars",
    "Group",
    "Look",
    "Node",
    "Pattern",
    "Repeat",
    "Seq",
    "parse",
]

MAX_GROUP_DEPTH = 100
"""Deepest nesting of parentheses accepted (deeper patterns are refused as a budget)."""

# -- the tree --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chars:
    """One code point from ``chars``."""

    chars: CharSet


@dataclass(frozen=True)
class Seq:
    """The items one after another; ``Seq(())`` is the empty string."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    """The first item that leads to a match, in order (ECMA alternatives are ordered)."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Group:
    """A capturing group: ``index`` is its number (1-based, by opening parenthesis)."""

    body: Node
    index: int
    name: str | None = None


@dataclass(frozen=True)
class Repeat:
    """``body`` repeated ``min`` to ``max`` times (``None``: unbounded), greedy or lazy.

    ``first_group``/``n_groups``: the capture groups inside ``body`` (numbers
    ``first_group .. first_group + n_groups - 1``), which each iteration clears.
    """

    body: Node
    min: int
    max: int | None
    greedy: bool
    first_group: int
    n_groups: int


@dataclass(frozen=True)
class Anchor:
    """A zero-width assertion: ``"^"``, ``"$"``, ``"\\b"`` or ``"\\B"``."""

    kind: str


@dataclass(frozen=True)
class Look:
    """A lookahead (``behind=False``) or lookbehind, negated or not; ``pos`` is the
    column (0-based) of its ``(`` in the pattern, for messages."""

    body: Node
    behind: bool
    negate: bool
    pos: int

    @property
    def written(self) -> str:
        return f"(?{'<' if self.behind else ''}{'!' if self.negate else '='}...)"


@dataclass(frozen=True)
class BackRef:
    """A backreference to group ``index``, written ``text`` at column ``pos`` (0-based)."""

    index: int
    text: str
    pos: int


Node = Chars | Seq | Alt | Group | Repeat | Anchor | Look | BackRef

EMPTY_SEQ = Seq(())


@dataclass(frozen=True)
class Pattern:
    """A parsed pattern.

    Attributes:
        source: the pattern text.
        root: its tree.
        n_groups: the number of capture groups.
        where: what to call the pattern in messages (a JSON pointer, or empty).
    """

    source: str
    root: Node
    n_groups: int
    where: str = ""

    @property
    def name(self) -> str:
        return self.where or f"pattern {self.source!r}"

    def unsupported(self, feature: str, pos: int, detail: str = "") -> UnsupportedFeatureError:
        """The error refusing ``feature`` found at column ``pos`` (0-based)."""
        return _unsupported(self.name, self.where, feature, pos, detail)


def _unsupported(
    name: str, where: str, feature: str, pos: int, detail: str
) -> UnsupportedFeatureError:
    """The error refusing ``feature`` at column ``pos`` (0-based) of the pattern ``name``
    (at JSON pointer ``where``, if any)."""
    return UnsupportedFeatureError(
        feature,
        location=Location(f"{name} column {pos + 1}", column=pos + 1, pointer=where or None),
        detail=detail,
    )


def parse(pattern: str, *, where: str = "") -> Pattern:
    """The syntax tree of an ECMA-262 pattern (read with the ``u`` flag; see the module
    docstring for the Annex B leniencies).

    Raises:
        GrammarError: the pattern is malformed (the message names the column).
        UnsupportedFeatureError: a well-formed construct corral does not implement.
        CompileBudgetError: parentheses nest deeper than :data:`MAX_GROUP_DEPTH`.
    """
    if not isinstance(pattern, str):
        raise ArgumentTypeError(f"a pattern must be a string, not {type(pattern).__name__}")
    p = _Parser(pattern, where)
    root = p.parse()
    if p.n_groups != p.total_groups or p.names != p.group_names:  # pragma: no cover
        raise p.error("capture groups could not be numbered consistently", 0)
    return Pattern(pattern, root, p.n_groups, where)


# -- the parser --------------------------------------------------------------------------------

_CLASS_ESCAPES = {
    "d": DIGIT,
    "D": DIGIT.complement(),
    "s": SPACE,
    "S": SPACE.complement(),
    "w": WORD,
    "W": WORD.complement(),
}
_CONTROL_ESCAPES = {"t": 0x09, "n": 0x0A, "v": 0x0B, "f": 0x0C, "r": 0x0D}
_HEX = frozenset("0123456789abcdefABCDEF")
_BRACED = re.compile(r"\{([0-9]+)(?:(,)([0-9]*))?\}")
_MODIFIERS = re.compile(r"\(\?[a-zA-Z]*(?:-[a-zA-Z]*)?:")
_INLINE_FLAGS = re.compile(r"\(\?[a-zA-Z]*(?:-[a-zA-Z]*)?\)")
_GROUP_NAME = re.compile(r"<([^>]*)>")


def _is_lead(cp: int) -> bool:
    return 0xD800 <= cp <= 0xDBFF


def _is_trail(cp: int) -> bool:
    return 0xDC00 <= cp <= 0xDFFF


def _pair(lead: int, trail: int) -> int:
    return 0x10000 + ((lead - 0xD800) << 10) + (trail - 0xDC00)


def _count(digits: str) -> int:
    """A decimal count; absurdly long ones are clamped (they exceed every budget anyway)."""
    return int(digits) if len(digits) <= 12 else 10**12


def _seq(items: list[Node]) -> Node:
    return items[0] if len(items) == 1 else Seq(tuple(items))


class _Parser:
    """Recursive-descent parser of the ECMA-262 ``Pattern`` grammar (``u`` flag)."""

    def __init__(self, pattern: str, where: str) -> None:
        self.src = pattern
        self.pos = 0
        self.where = where
        self.name = where or f"pattern {pattern!r}"
        self.depth = 0
        self.n_groups = 0  # capture groups opened so far
        self.total_groups, self.group_names = _scan_groups(pattern)
        self.names: dict[str, int] = {}

    # -- helpers ---------------------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> GrammarError:
        col = (self.pos if pos is None else pos) + 1
        in_where = f" in {self.where}" if self.where else ""
        return GrammarError(
            f"invalid regular expression {self.src!r}{in_where}: {message} at column {col}",
            location=Location(
                column=col, pointer=self.where or None, snippet=f"{self.src}\n{' ' * (col - 1)}^"
            ),
        )

    def unsupported(self, feature: str, pos: int, detail: str = "") -> UnsupportedFeatureError:
        return _unsupported(self.name, self.where, feature, pos, detail)

    def peek(self, offset: int = 0) -> str:
        i = self.pos + offset
        return self.src[i] if i < len(self.src) else ""

    def eof(self) -> bool:
        return self.pos >= len(self.src)

    def literal(self) -> int:
        """Consume one source character (a surrogate pair counts as one code point)."""
        cp = ord(self.src[self.pos])
        self.pos += 1
        if _is_lead(cp) and not self.eof() and _is_trail(ord(self.src[self.pos])):
            cp = _pair(cp, ord(self.src[self.pos]))
            self.pos += 1
        return cp

    # -- Pattern, Disjunction, Alternative, Term --------------------------------------------
    def parse(self) -> Node:
        node = self.disjunction()
        if not self.eof():  # only an unmatched ')' stops a disjunction early
            raise self.error("unmatched ')'")
        return node

    def disjunction(self) -> Node:
        alts = [self.alternative()]
        while self.peek() == "|":
            self.pos += 1
            alts.append(self.alternative())
        return alts[0] if len(alts) == 1 else Alt(tuple(alts))

    def alternative(self) -> Node:
        items: list[Node] = []
        while not self.eof() and self.peek() not in "|)":
            items.append(self.term())
        return EMPTY_SEQ if not items else _seq(items)

    def term(self) -> Node:
        start = self.pos
        first_group = self.n_groups + 1
        c = self.peek()
        node: Node
        quantifiable = True
        if c == "^":
            self.pos += 1
            node, quantifiable = Anchor("^"), False
        elif c == "$":
            self.pos += 1
            node, quantifiable = Anchor("$"), False
        elif c == "\\" and self.peek(1) in ("b", "B"):
            node, quantifiable = Anchor("\\" + self.peek(1)), False
            self.pos += 2
        elif self.src.startswith(("(?=", "(?!", "(?<=", "(?<!"), self.pos):
            node = self.lookaround()
            quantifiable = self.src[start + 2] in "=!"  # Annex B: a lookahead may repeat
        else:
            node = self.atom()
        quant = self.quantifier()
        if quant is None:
            return node
        lo, hi, greedy, qpos = quant
        if not quantifiable:
            raise self.error("nothing to repeat", qpos)
        if hi is not None and lo > hi:
            raise self.error("numbers out of order in {} quantifier", qpos)
        return Repeat(node, lo, hi, greedy, first_group, self.n_groups + 1 - first_group)

    def quantifier(self) -> tuple[int, int | None, bool, int] | None:
        """``(min, max, greedy, position)`` of a quantifier at the cursor (consumed), or
        ``None``."""
        qpos = self.pos
        c = self.peek()
        lo: int
        hi: int | None
        if c == "*":
            lo, hi = 0, None
            self.pos += 1
        elif c == "+":
            lo, hi = 1, None
            self.pos += 1
        elif c == "?":
            lo, hi = 0, 1
            self.pos += 1
        elif c == "{":
            m = _BRACED.match(self.src, self.pos)
            if m is None:
                return None  # Annex B: a literal '{'
            lo = _count(m.group(1))
            hi = lo if m.group(2) is None else (_count(m.group(3)) if m.group(3) else None)
            self.pos = m.end()
        else:
            return None
        greedy = self.peek() != "?"
        if not greedy:
            self.pos += 1
        return lo, hi, greedy, qpos

    # -- atoms -----------------------------------------------------------------------------
    def atom(self) -> Node:
        c = self.peek()
        if c == ".":
            self.pos += 1
            return Chars(DOT)
        if c == "(":
            return self.group()
        if c == "[":
            return Chars(self.char_class())
        if c == "\\":
            return self.atom_escape()
        if c in "*+?":
            raise self.error("nothing to repeat")
        if c == "{" and _BRACED.match(self.src, self.pos):
            raise self.error("nothing to repeat")
        return Chars(CharSet.of(self.literal()))

    def group(self) -> Node:
        open_pos = self.pos
        self.pos += 1
        if self.src.startswith("?:", self.pos):
            self.pos += 2
            return self.group_body(open_pos)
        name = None
        if self.src.startswith("?<", self.pos):
            end = self.src.find(">", self.pos + 2)
            name = self.src[self.pos + 2 : end] if end >= 0 else ""
            if not name or not name.replace("$", "_").isidentifier():
                raise self.error("invalid group name", self.pos + 2)
            if name in self.names:
                raise self.error(f"duplicate group name {name!r}", self.pos + 2)
            self.pos = end + 1
        elif self.peek() == "?":
            if _MODIFIERS.match(self.src, open_pos):
                raise self.unsupported(
                    "inline modifiers (?flags:...)", open_pos, "no regex flags are supported"
                )
            if _INLINE_FLAGS.match(self.src, open_pos):
                raise self.error("inline flags like '(?i)' are not ECMA-262 syntax")
            if self.src.startswith("?P<", self.pos):
                raise self.error("invalid group '(?P<' (Python syntax; ECMA uses '(?<name>')")
            raise self.error(f"invalid group '(?{self.peek(1)}'")
        self.n_groups += 1
        index = self.n_groups
        if name is not None:
            self.names[name] = index
        return Group(self.group_body(open_pos), index, name)

    def group_body(self, open_pos: int) -> Node:
        self.depth += 1
        if self.depth > MAX_GROUP_DEPTH:
            raise CompileBudgetError(
                f"{self.name}: parentheses nest deeper than {MAX_GROUP_DEPTH} levels"
            )
        body = self.disjunction()
        self.depth -= 1
        if self.peek() != ")":
            raise self.error("missing ')' for the group opened", open_pos)
        self.pos += 1
        return body

    def lookaround(self) -> Node:
        open_pos = self.pos
        behind = self.src[self.pos + 2] == "<"
        negate = self.src[self.pos + (3 if behind else 2)] == "!"
        self.pos += 4 if behind else 3
        return Look(self.group_body(open_pos), behind, negate, open_pos)

    def atom_escape(self) -> Node:
        esc_pos = self.pos
        c = self.peek(1)
        if c == "":
            raise self.error("'\\' at the end of the pattern")
        if c in "123456789":
            self.pos += 1
            digits = ""
            while self.peek().isdigit() and self.peek().isascii():
                digits += self.peek()
                self.pos += 1
            n = _count(digits)
            if n > self.total_groups:
                raise self.error(
                    f"backreference \\{digits} to a group that does not exist", esc_pos
                )
            return BackRef(n, f"\\{digits}", esc_pos)
        if c == "k":
            m = _GROUP_NAME.match(self.src, self.pos + 2)
            if m is None or m.group(1) not in self.group_names:
                raise self.error("invalid named backreference \\k")
            self.pos = m.end()
            return BackRef(self.group_names[m.group(1)], f"\\k<{m.group(1)}>", esc_pos)
        cs = self.class_escape_set()
        if cs is not None:
            return Chars(cs)
        return Chars(CharSet.of(self.char_escape()))

    # -- escapes shared by atoms and classes ---------------------------------------------
    def class_escape_set(self) -> CharSet | None:
        """``\\d \\D \\s \\S \\w \\W \\p{..} \\P{..}`` at the cursor (consumed), else ``None``."""
        c = self.peek(1)
        if c in _CLASS_ESCAPES and c:
            self.pos += 2
            return _CLASS_ESCAPES[c]
        if c in ("p", "P") and c:
            esc_pos = self.pos
            if self.peek(2) != "{":
                raise self.error(f"'\\{c}' must be followed by '{{property}}'")
            end = self.src.find("}", self.pos + 3)
            if end < 0:
                raise self.error(f"unterminated '\\{c}{{'")
            prop = self.src[self.pos + 3 : end]
            self.pos = end + 1
            cs = self.property_set(prop, esc_pos)
            return cs.complement() if c == "P" else cs
        return None

    def property_set(self, prop: str, pos: int) -> CharSet:
        written = f"\\p{{{prop}}}"
        if "=" in prop:
            name, _, value = prop.partition("=")
            if name in ("General_Category", "gc"):
                cs = self.gc_value(value)
                if cs is None:
                    raise self.error(f"unknown General_Category value in {written}", pos)
                return cs
            if name in ("Script", "sc", "Script_Extensions", "scx"):
                raise self.unsupported(
                    f"Unicode script property {written}",
                    pos,
                    "only General_Category properties are supported",
                )
            raise self.error(f"unknown Unicode property {written}", pos)
        cs = self.gc_value(prop)
        if cs is not None:
            return cs
        if prop == "Any":
            return UNIVERSE
        if prop == "ASCII":
            return CharSet([(0, 0x7F)])
        if prop == "Assigned":
            return general_category("Cn").complement()
        if prop in BINARY_PROPERTIES:
            raise self.unsupported(
                f"Unicode binary property {written}",
                pos,
                "only General_Category, Any, ASCII and Assigned are supported",
            )
        raise self.error(f"unknown Unicode property {written}", pos)

    @staticmethod
    def gc_value(value: str) -> CharSet | None:
        short = GC_ALIASES.get(value, value)
        return general_category(short) if short in GC_SHORT else None

    def char_escape(self) -> int:
        """A CharacterEscape at the cursor (the backslash included): its code point."""
        esc_pos = self.pos
        self.pos += 1
        c = self.peek()
        if c in _CONTROL_ESCAPES and c:
            self.pos += 1
            return _CONTROL_ESCAPES[c]
        if c == "c":
            letter = self.peek(1)
            if letter.isascii() and letter.isalpha():
                self.pos += 2
                return ord(letter) % 32
            raise self.error("'\\c' must be followed by an ASCII letter", esc_pos)
        if c == "0":
            if self.peek(1).isdigit():
                raise self.error("octal escapes are not allowed with the u flag", esc_pos)
            self.pos += 1
            return 0
        if c == "x":
            hh = self.src[self.pos + 1 : self.pos + 3]
            if len(hh) != 2 or not set(hh) <= _HEX:
                raise self.error("'\\x' must be followed by two hex digits", esc_pos)
            self.pos += 3
            return int(hh, 16)
        if c == "u":
            return self.unicode_escape(esc_pos)
        if c.isascii() and c.isalnum():
            raise self.error(f"invalid escape '\\{c}' (not valid with the u flag)", esc_pos)
        return self.literal()  # identity escape: the character itself

    def unicode_escape(self, esc_pos: int) -> int:
        """``\\uHHHH`` (a surrogate pair of two escapes is one code point) or ``\\u{H...}``."""
        self.pos += 1  # the 'u'
        if self.peek() == "{":
            end = self.src.find("}", self.pos)
            digits = self.src[self.pos + 1 : end] if end >= 0 else ""
            if not digits or not set(digits) <= _HEX or int(digits, 16) > MAX_CODE_POINT:
                raise self.error("invalid '\\u{...}' escape", esc_pos)
            self.pos = end + 1
            return int(digits, 16)
        cp = self.hex4(self.pos)
        if cp is None:
            raise self.error("'\\u' must be followed by four hex digits or '{...}'", esc_pos)
        self.pos += 4
        if _is_lead(cp) and self.src.startswith("\\u", self.pos):
            trail = self.hex4(self.pos + 2)
            if trail is not None and _is_trail(trail):
                self.pos += 6
                return _pair(cp, trail)
        return cp

    def hex4(self, at: int) -> int | None:
        digits = self.src[at : at + 4]
        if len(digits) == 4 and set(digits) <= _HEX:
            return int(digits, 16)
        return None

    # -- character classes -------------------------------------------------------------------
    def char_class(self) -> CharSet:
        open_pos = self.pos
        self.pos += 1
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        acc = EMPTY
        while self.peek() != "]":
            if self.eof():
                raise self.error("unterminated character class", open_pos)
            a_pos = self.pos
            a = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                b = self.class_atom()
                if isinstance(a, int) and isinstance(b, int):
                    if a > b:
                        raise self.error("class range out of order", a_pos)
                    acc = acc.union(CharSet([(a, b)]))
                    continue
                # Annex B: a class escape at either end makes '-' a literal.
                acc = acc.union(CharSet.of("-"))
                for x in (a, b):
                    acc = acc.union(x if isinstance(x, CharSet) else CharSet.of(x))
                continue
            acc = acc.union(a if isinstance(a, CharSet) else CharSet.of(a))
        self.pos += 1
        return acc.complement() if negate else acc

    def class_atom(self) -> int | CharSet:
        """One ClassAtom: a code point, or the set of a class escape."""
        if self.peek() != "\\":
            return self.literal()
        c = self.peek(1)
        if c == "b":
            self.pos += 2
            return 0x08
        if c == "-":
            self.pos += 2
            return ord("-")
        if c == "B":
            raise self.error("'\\B' is not allowed in a character class")
        if c in "123456789" and c:
            raise self.error("backreferences and octal escapes are not allowed in a class")
        if c == "k":
            raise self.error("invalid escape '\\k' in a character class")
        cs = self.class_escape_set()
        if cs is not None:
            return cs
        if c == "":
            raise self.error("'\\' at the end of the pattern")
        return self.char_escape()


def _scan_groups(pattern: str) -> tuple[int, dict[str, int]]:
    """Number of capturing groups and the number of each named one (needed to read
    ``\\N`` and ``\\k<name>`` before the group they refer to)."""
    count = 0
    names: dict[str, int] = {}
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            if not pattern.startswith("?", i + 1):
                count += 1
            elif pattern.startswith("?<", i + 1) and not pattern.startswith(("?<=", "?<!"), i + 1):
                count += 1
                end = pattern.find(">", i + 3)
                if end >= 0:
                    names.setdefault(pattern[i + 3 : end], count)
        i += 1
    return count, names
