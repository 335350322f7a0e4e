"""Character sets of ECMA-262 patterns: ``.``, ``\\d``, ``\\s``, ``\\w`` and the Unicode
properties ``\\p{...}`` (General_Category values and the binary property names).

General_Category sets are computed from :func:`unicodedata.category` over every code point,
so they follow the Unicode version of the running Python.
"""

from __future__ import annotations

import functools
import unicodedata

from ...regex.charset import MAX_CODE_POINT, UNIVERSE, CharSet, ascii_class

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

# -- Unicode General_Category (\p{...}) ----------------------------------------------------

GC_GROUPS = {
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
GC_ALIASES = {
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
GC_SHORT = frozenset({c for group in GC_GROUPS.values() for c in group} | set(GC_GROUPS) | {"LC"})
# Binary properties ECMA-262 defines (name and alias); all but three are refused.
BINARY_PROPERTIES = frozenset(
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
    members = GC_GROUPS.get(short, (short,))
    ranges: list[tuple[int, int]] = []
    for m in members:
        ranges.extend(table.get(m, ()))
    return CharSet(ranges)
