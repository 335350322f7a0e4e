"""ECMA-262 regular expressions (JSON Schema ``pattern``) → :mod:`corral.grammar.regex.ast`.

JSON Schema's ``pattern`` and ``patternProperties`` use ECMA-262 regular expressions.
Validators such as ajv compile them with the ``u`` (Unicode) flag and no other flag, so
this front end reads them the same way: the pattern is a sequence of code points, ``.``
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

Refused with :class:`~corral.errors.UnsupportedFeatureError` (well-formed, but not
enforceable exactly): backreferences (``\\1``, ``\\k<name>``), lookaround whose body is
longer than one character, inline modifiers ``(?i:...)``, ``\\p{Script=...}`` and binary
Unicode properties other than ``Any``, ``ASCII`` and ``Assigned``.

Counted repetitions are expanded copy by copy when the automaton is built, so a pattern
whose repetitions would expand beyond :data:`MAX_REPEAT_EXPANSION` copies in total is
refused with :class:`~corral.errors.CompileBudgetError` before anything is built.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from ...errors import CompileBudgetError, GrammarError, UnsupportedFeatureError
from ..regex import ast
from ..regex.charset import EMPTY, MAX_CODE_POINT, UNIVERSE, CharSet, ascii_class

__all__ = ["MAX_REPEAT_EXPANSION", "ecma_search_node", "parse_ecma_regex"]

MAX_REPEAT_EXPANSION = 10_000
"""Most characters/assertions that counted repetitions may expand to, in total."""

MAX_GROUP_DEPTH = 100
"""Deepest nesting of parentheses accepted (deeper patterns are refused as a budget)."""

# -- character sets of ECMA-262 -------------------------------------------------------------

LINE_TERMINATORS = CharSet.of("\n", "\r", 0x2028, 0x2029)
DOT = UNIVERSE.difference(LINE_TERMINATORS)
DIGIT = ascii_class("digit")
WORD = ascii_class("word")
SPACE = CharSet(
    [
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ]
)
_CLASS_ESCAPES = {
    "d": DIGIT,
    "D": DIGIT.complement(),
    "s": SPACE,
    "S": SPACE.complement(),
    "w": WORD,
    "W": WORD.complement(),
}
_CONTROL_ESCAPES = {"t": 0x09, "n": 0x0A, "v": 0x0B, "f": 0x0C, "r": 0x0D}
_SYNTAX_CHARS = frozenset("^$\\.*+?()[]{}|")
_HEX = frozenset("0123456789abcdefABCDEF")
_BRACED = re.compile(r"\{([0-9]+)(?:(,)([0-9]*))?\}")
_MODIFIERS = re.compile(r"\(\?[a-zA-Z]*(?:-[a-zA-Z]*)?:")
_INLINE_FLAGS = re.compile(r"\(\?[a-zA-Z]*(?:-[a-zA-Z]*)?\)")

# -- Unicode General_Category (\p{...}) ----------------------------------------------------

_GC_GROUPS = {
    "C": ("Cc", "Cf", "Cn", "Co", "Cs"),
    "L": ("Lu", "Ll", "Lt", "Lm", "Lo"),
    "LC": ("Lu", "Ll", "Lt"),
    "M": ("Mn", "Mc", "Me"),
    "N": ("Nd", "Nl", "No"),
    "P": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
    "S": ("Sm", "Sc", "Sk", "So"),
    "Z": ("Zs", "Zl", "Zp"),
}
# Every value alias of General_Category that ECMA-262 accepts, mapped to its short name.
_GC_ALIASES = {
    "Other": "C",
    "Control": "Cc",
    "cntrl": "Cc",
    "Format": "Cf",
    "Unassigned": "Cn",
    "Private_Use": "Co",
    "Surrogate": "Cs",
    "Letter": "L",
    "Cased_Letter": "LC",
    "Lowercase_Letter": "Ll",
    "Modifier_Letter": "Lm",
    "Other_Letter": "Lo",
    "Titlecase_Letter": "Lt",
    "Uppercase_Letter": "Lu",
    "Mark": "M",
    "Combining_Mark": "M",
    "Spacing_Mark": "Mc",
    "Enclosing_Mark": "Me",
    "Nonspacing_Mark": "Mn",
    "Number": "N",
    "Decimal_Number": "Nd",
    "digit": "Nd",
    "Letter_Number": "Nl",
    "Other_Number": "No",
    "Punctuation": "P",
    "punct": "P",
    "Connector_Punctuation": "Pc",
    "Dash_Punctuation": "Pd",
    "Close_Punctuation": "Pe",
    "Final_Punctuation": "Pf",
    "Initial_Punctuation": "Pi",
    "Other_Punctuation": "Po",
    "Open_Punctuation": "Ps",
    "Symbol": "S",
    "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk",
    "Math_Symbol": "Sm",
    "Other_Symbol": "So",
    "Separator": "Z",
    "Line_Separator": "Zl",
    "Paragraph_Separator": "Zp",
    "Space_Separator": "Zs",
}
_GC_SHORT = frozenset(
    {c for group in _GC_GROUPS.values() for c in group} | set(_GC_GROUPS) | {"LC"}
)
# Binary properties ECMA-262 defines (name and alias); all but three are refused.
_BINARY_PROPERTIES = frozenset(
    [
        "ASCII",
        "ASCII_Hex_Digit",
        "AHex",
        "Alphabetic",
        "Alpha",
        "Any",
        "Assigned",
        "Bidi_Control",
        "Bidi_C",
        "Bidi_Mirrored",
        "Bidi_M",
        "Case_Ignorable",
        "CI",
        "Cased",
        "Changes_When_Casefolded",
        "CWCF",
        "Changes_When_Casemapped",
        "CWCM",
        "Changes_When_Lowercased",
        "CWL",
        "Changes_When_NFKC_Casefolded",
        "CWKCF",
        "Changes_When_Titlecased",
        "CWT",
        "Changes_When_Uppercased",
        "CWU",
        "Dash",
        "Default_Ignorable_Code_Point",
        "DI",
        "Deprecated",
        "Dep",
        "Diacritic",
        "Dia",
        "Emoji",
        "Emoji_Component",
        "EComp",
        "Emoji_Modifier",
        "EMod",
        "Emoji_Modifier_Base",
        "EBase",
        "Emoji_Presentation",
        "EPres",
        "Extended_Pictographic",
        "ExtPict",
        "Extender",
        "Ext",
        "Grapheme_Base",
        "Gr_Base",
        "Grapheme_Extend",
        "Gr_Ext",
        "Hex_Digit",
        "Hex",
        "IDS_Binary_Operator",
        "IDSB",
        "IDS_Trinary_Operator",
        "IDST",
        "ID_Continue",
        "IDC",
        "ID_Start",
        "IDS",
        "Ideographic",
        "Ideo",
        "Join_Control",
        "Join_C",
        "Logical_Order_Exception",
        "LOE",
        "Lowercase",
        "Lower",
        "Math",
        "Noncharacter_Code_Point",
        "NChar",
        "Pattern_Syntax",
        "Pat_Syn",
        "Pattern_White_Space",
        "Pat_WS",
        "Quotation_Mark",
        "QMark",
        "Radical",
        "Regional_Indicator",
        "RI",
        "Sentence_Terminal",
        "STerm",
        "Soft_Dotted",
        "SD",
        "Terminal_Punctuation",
        "Term",
        "Unified_Ideograph",
        "UIdeo",
        "Uppercase",
        "Upper",
        "Variation_Selector",
        "VS",
        "White_Space",
        "space",
        "XID_Continue",
        "XIDC",
        "XID_Start",
        "XIDS",
    ]
)


@functools.lru_cache(maxsize=1)
def _category_ranges() -> dict[str, tuple[tuple[int, int], ...]]:
    """The code-point ranges of every two-letter General_Category (one pass, cached)."""
    out: dict[str, list[tuple[int, int]]] = {}
    category = unicodedata.category
    start = 0
    current = category(chr(0))
    for cp in range(1, MAX_CODE_POINT + 1):
        cat = category(chr(cp))
        if cat != current:
            out.setdefault(current, []).append((start, cp - 1))
            start, current = cp, cat
    out.setdefault(current, []).append((start, MAX_CODE_POINT))
    return {k: tuple(v) for k, v in out.items()}


@functools.lru_cache(maxsize=64)
def general_category(short: str) -> CharSet:
    """The code points whose General_Category is ``short`` (``"Lu"``) or in group ``"L"``.

    Computed from :func:`unicodedata.category` over every code point, so it follows the
    Unicode version of the running Python.
    """
    table = _category_ranges()
    members = _GC_GROUPS.get(short, (short,))
    ranges: list[tuple[int, int]] = []
    for m in members:
        ranges.extend(table.get(m, ()))
    return CharSet(ranges)


# -- public API ------------------------------------------------------------------------------


def parse_ecma_regex(pattern: str, *, where: str = "") -> ast.Node:
    """The tree of an ECMA-262 pattern, matched against the whole text (full-match language).

    The pattern is read as with the ``u`` flag and no other flag (see the module
    docstring for the Annex B leniencies). ``where`` names the pattern in error messages
    (a JSON pointer, for instance).

    Raises:
        GrammarError: the pattern is malformed (the message names the column).
        UnsupportedFeatureError: a well-formed construct corral cannot enforce exactly.
        CompileBudgetError: counted repetitions would expand beyond
            :data:`MAX_REPEAT_EXPANSION` copies, or parentheses nest too deeply.
    """
    node = _Parser(pattern, where).parse()
    expansion = _repeat_expansion(node)
    if expansion > MAX_REPEAT_EXPANSION:
        name = where or f"pattern {pattern!r}"
        raise CompileBudgetError(
            f"{name}: counted repetitions expand to {expansion} copies "
            f"(more than {MAX_REPEAT_EXPANSION}); simplify the pattern"
        )
    return node


def ecma_search_node(pattern: str, *, where: str = "") -> ast.Node:
    """The language JSON Schema's ``pattern`` means: strings in which the pattern matches
    somewhere (unanchored search): ``Concat(any*, pattern, any*)`` — anchors ``^`` and ``$``
    then act as text start/end assertions."""
    node = parse_ecma_regex(pattern, where=where)
    anything = ast.Repeat(ast.Chars(UNIVERSE), 0, None)
    return ast.Concat((anything, node, anything))


# -- repetition budget -----------------------------------------------------------------------


def _expanded_size(node: ast.Node) -> int:
    """Characters and assertions in ``node`` once every repetition is written out."""
    if isinstance(node, (ast.Chars, ast.Assert)):
        return 1
    if isinstance(node, (ast.Concat, ast.Alt)):
        return sum(_expanded_size(i) for i in node.items)
    copies = node.max if node.max is not None else node.min + 1
    return copies * _expanded_size(node.item)


def _repeat_expansion(node: ast.Node) -> int:
    """Total expanded size of the outermost repetitions in ``node``."""
    if isinstance(node, ast.Repeat):
        return _expanded_size(node)
    if isinstance(node, (ast.Concat, ast.Alt)):
        return sum(_repeat_expansion(i) for i in node.items)
    return 0


# -- the parser --------------------------------------------------------------------------------


def _is_lead(cp: int) -> bool:
    return 0xD800 <= cp <= 0xDBFF


def _is_trail(cp: int) -> bool:
    return 0xDC00 <= cp <= 0xDFFF


def _pair(lead: int, trail: int) -> int:
    return 0x10000 + ((lead - 0xD800) << 10) + (trail - 0xDC00)


def _one_char(node: ast.Node) -> CharSet | None:
    """The set of ``node`` when it matches exactly one character (a char, class or an
    alternation of those), else ``None``."""
    if isinstance(node, ast.Chars):
        return node.chars
    if isinstance(node, ast.Alt):
        acc = EMPTY
        for item in node.items:
            cs = _one_char(item)
            if cs is None:
                return None
            acc = acc.union(cs)
        return acc
    if isinstance(node, ast.Concat) and len(node.items) == 1:
        return _one_char(node.items[0])
    return None


def _count(digits: str) -> int:
    """A decimal count; absurdly long ones are clamped (they exceed every budget anyway)."""
    return int(digits) if len(digits) <= 12 else 10**12


def _concat(items: list[ast.Node]) -> ast.Node:
    return items[0] if len(items) == 1 else ast.Concat(tuple(items))


class _Parser:
    """Recursive-descent parser of the ECMA-262 ``Pattern`` grammar (``u`` flag)."""

    def __init__(self, pattern: str, where: str) -> None:
        self.src = pattern
        self.pos = 0
        self.where = where
        self.name = where or f"pattern {pattern!r}"
        self.depth = 0
        self.n_groups, self.group_names = _scan_groups(pattern)

    # -- helpers ---------------------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> GrammarError:
        col = (self.pos if pos is None else pos) + 1
        in_where = f" in {self.where}" if self.where else ""
        return GrammarError(
            f"invalid regular expression {self.src!r}{in_where}: {message} at column {col}",
            column=col,
            snippet=f"{self.src}\n{' ' * (col - 1)}^",
        )

    def unsupported(self, feature: str, pos: int, detail: str = "") -> UnsupportedFeatureError:
        return UnsupportedFeatureError(
            feature, location=f"{self.name} column {pos + 1}", detail=detail
        )

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
    def parse(self) -> ast.Node:
        node = self.disjunction()
        if not self.eof():  # only an unmatched ')' stops a disjunction early
            raise self.error("unmatched ')'")
        return node

    def disjunction(self) -> ast.Node:
        alts = [self.alternative()]
        while self.peek() == "|":
            self.pos += 1
            alts.append(self.alternative())
        return alts[0] if len(alts) == 1 else ast.Alt(tuple(alts))

    def alternative(self) -> ast.Node:
        items: list[ast.Node] = []
        while not self.eof() and self.peek() not in "|)":
            items.append(self.term())
        return ast.EMPTY_STRING if not items else _concat(items)

    def term(self) -> ast.Node:
        start = self.pos
        c = self.peek()
        node: ast.Node
        quantifiable = True
        if c == "^":
            self.pos += 1
            node, quantifiable = ast.Assert(ast.TEXT_START, text="^"), False
        elif c == "$":
            self.pos += 1
            node, quantifiable = ast.Assert(ast.TEXT_END, text="$"), False
        elif c == "\\" and self.peek(1) in ("b", "B"):
            negate = self.peek(1) == "B"
            self.pos += 2
            text = "\\B" if negate else "\\b"
            node, quantifiable = ast.Assert(ast.BOUNDARY, WORD, negate=negate, text=text), False
        elif self.src.startswith(("(?=", "(?!", "(?<=", "(?<!"), self.pos):
            node = self.lookaround()
            quantifiable = self.src[start + 2] in "=!"  # Annex B: a lookahead may repeat
        else:
            node = self.atom()
        quant = self.quantifier()
        if quant is None:
            return node
        lo, hi, qpos = quant
        if not quantifiable:
            raise self.error("nothing to repeat", qpos)
        if hi is not None and lo > hi:
            raise self.error("numbers out of order in {} quantifier", qpos)
        if lo == hi == 1:
            return node
        return ast.Repeat(node, lo, hi)

    def quantifier(self) -> tuple[int, int | None, int] | None:
        """``(min, max, position)`` of a quantifier at the cursor (consumed), or ``None``."""
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
        if self.peek() == "?":  # lazy: same full-match language
            self.pos += 1
        return lo, hi, qpos

    # -- atoms -----------------------------------------------------------------------------
    def atom(self) -> ast.Node:
        c = self.peek()
        if c == ".":
            self.pos += 1
            return ast.Chars(DOT)
        if c == "(":
            return self.group()
        if c == "[":
            return ast.Chars(self.char_class())
        if c == "\\":
            return self.atom_escape()
        if c in "*+?":
            raise self.error("nothing to repeat")
        if c == "{" and _BRACED.match(self.src, self.pos):
            raise self.error("nothing to repeat")
        return ast.Chars(CharSet.of(self.literal()))

    def group(self) -> ast.Node:
        open_pos = self.pos
        self.pos += 1
        if self.src.startswith("?:", self.pos):
            self.pos += 2
        elif self.src.startswith("?<", self.pos):
            end = self.src.find(">", self.pos + 2)
            name = self.src[self.pos + 2 : end] if end >= 0 else ""
            if not name or not name.replace("$", "_").isidentifier():
                raise self.error("invalid group name", self.pos + 2)
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
        return self.group_body(open_pos)

    def group_body(self, open_pos: int) -> ast.Node:
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

    def lookaround(self) -> ast.Node:
        open_pos = self.pos
        behind = self.src[self.pos + 2] == "<"
        negate = self.src[self.pos + (3 if behind else 2)] == "!"
        self.pos += 4 if behind else 3
        body = self.group_body(open_pos)
        kind = ast.BEHIND if behind else ast.AHEAD
        written = f"(?{'<' if behind else ''}{'!' if negate else '='}...)"
        if body == ast.EMPTY_STRING:  # (?=) always holds, (?!) never does
            return ast.Chars(EMPTY) if negate else ast.EMPTY_STRING
        if isinstance(body, ast.Assert):  # a zero-width body looks in neither direction
            return ast.Assert(body.kind, body.chars, body.negate != negate, text=written)
        cs = _one_char(body)
        if cs is not None:
            return ast.Assert(kind, cs, negate=negate, text=written)
        name = "lookbehind" if behind else "lookahead"
        raise self.unsupported(
            f"{name} assertion {written}",
            open_pos,
            "only lookaround over a single character is supported",
        )

    def atom_escape(self) -> ast.Node:
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
            if _count(digits) <= self.n_groups:
                raise self.unsupported(
                    f"backreference \\{digits}", esc_pos, "its language is not regular"
                )
            raise self.error(f"backreference \\{digits} to a group that does not exist", esc_pos)
        if c == "k":
            m = re.compile(r"<([^>]*)>").match(self.src, self.pos + 2)
            if m is None or m.group(1) not in self.group_names:
                raise self.error("invalid named backreference \\k")
            raise self.unsupported(
                f"backreference \\k<{m.group(1)}>", esc_pos, "its language is not regular"
            )
        cs = self.class_escape_set()
        if cs is not None:
            return ast.Chars(cs)
        return ast.Chars(CharSet.of(self.char_escape()))

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
        if prop in _BINARY_PROPERTIES:
            raise self.unsupported(
                f"Unicode binary property {written}",
                pos,
                "only General_Category, Any, ASCII and Assigned are supported",
            )
        raise self.error(f"unknown Unicode property {written}", pos)

    @staticmethod
    def gc_value(value: str) -> CharSet | None:
        short = _GC_ALIASES.get(value, value)
        return general_category(short) if short in _GC_SHORT else None

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


def _scan_groups(pattern: str) -> tuple[int, frozenset[str]]:
    """Number of capturing groups and their names (needed to read ``\\N`` and ``\\k``)."""
    count = 0
    names: set[str] = set()
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
                    names.add(pattern[i + 3 : end])
        i += 1
    return count, frozenset(names)
