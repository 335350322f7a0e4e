"""A small regular-expression syntax tree shared by every regex front end.

Front ends (Python ``re`` syntax today, ECMA-262 for JSON Schema ``pattern``) translate their
own syntax into these nodes; :mod:`corral.grammar.regex.nfa` builds automata from them. The
nodes describe *languages*; the laziness of a quantifier is kept as a flag because Lark
terminals give it a meaning (Python's search order, see ``leftmost.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .charset import CharSet


@dataclass(frozen=True)
class Chars:
    """One character from ``chars``."""

    chars: CharSet


@dataclass(frozen=True)
class Concat:
    """The items one after another; ``Concat(())`` is the empty string."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    """Any one of the items."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Repeat:
    """``item`` repeated ``min`` to ``max`` times (``max=None``: unbounded)."""

    item: Node
    min: int
    max: int | None
    lazy: bool = False


# Guard kinds: zero-width assertions about the characters next to a position.
BEHIND = "behind"  # previous character in `chars` (negate: not in, or no previous character)
AHEAD = "ahead"  # next character in `chars` (negate: not in, or no next character)
BOUNDARY = "boundary"  # word boundary; `chars` is the word-character set (negate: \B)
TEXT_START = "text_start"  # no previous character
TEXT_END = "text_end"  # no next character
LINE_START = "line_start"  # no previous character, or it is a newline
LINE_END = "line_end"  # no next character, or it is a newline

NEEDS_PREV = frozenset({BEHIND, BOUNDARY, TEXT_START, LINE_START})
NEEDS_NEXT = frozenset({AHEAD, BOUNDARY, TEXT_END, LINE_END})


@dataclass(frozen=True)
class Assert:
    """A zero-width assertion on the neighbouring characters (lookaround, anchors).

    ``rest`` (``AHEAD`` only) makes it a lookahead of several characters: the next
    character is in ``chars`` and the ones after it in ``rest[0]``, ``rest[1]``, ... (one
    class each); ``negate`` then means that the whole sequence is not there. Only the
    leftmost construction of Lark terminals (``leftmost.py``) accepts it.
    """

    kind: str
    chars: CharSet | None = None
    negate: bool = False
    text: str = ""  # how the construct was written, for error messages
    rest: tuple[CharSet, ...] = ()


Node = Chars | Concat | Alt | Repeat | Assert

EMPTY_STRING = Concat(())


def ends_at_text_end(node: Node) -> bool:
    """Whether every match of ``node`` ends with ``$`` at the end of the text (an
    unnegated ``TEXT_END`` last on every path; ``False`` where that is not plain)."""
    if isinstance(node, Assert):
        return node.kind == TEXT_END and not node.negate
    if isinstance(node, Concat):
        return bool(node.items) and ends_at_text_end(node.items[-1])
    if isinstance(node, Alt):
        return bool(node.items) and all(ends_at_text_end(x) for x in node.items)
    return False
