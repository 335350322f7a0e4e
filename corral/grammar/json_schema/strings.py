"""JSON string terminals: the encoded form of strings with length, pattern and format.

A JSON Schema constrains the *decoded* string; a grammar terminal reads the *encoded*
bytes between the quotes. Every function here returns a :class:`ByteDFA` over the encoded
bytes, quotes included.

Encoding rules:

* Plain strings (only ``minLength``/``maxLength``, or nothing) accept every JSON escape:
  ``\\" \\\\ \\/ \\b \\f \\n \\r \\t``, ``\\uXXXX`` (either case) and surrogate pairs, each
  counting as one character; lone surrogates are refused (they are not Unicode text).
* Strings with ``pattern`` or ``format`` are written literally, except the characters
  JSON requires to be escaped (``"``, ``\\``, control characters), which may take any of
  their escaped forms; ``/`` may also be ``\\/``. (Writing e.g. ``é`` as ``\\u00e9`` is
  valid JSON but not offered there: the automaton would grow by a hex range per class.)
  If the pattern has lookaround or ``\\b`` next to such characters, they are left out
  altogether: an escape would otherwise be seen as the characters that spell it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

from ...caching import BoundedCache
from ..regex import ast, python_regex_dfa
from ..regex.charset import CharSet
from ..regex.dfa import (
    ByteDFA,
    dfa_of_columns,
    intersect,
    metered,
    nfa_to_byte_dfa,
    quoted,
    shared_automata,
    spend,
)
from ..regex.nfa import build_nfa, build_search_nfa
from ..regex.restrict import restrict_quoted
from ..regex.sparse import SparseDFA
from .ecma import search_tail

# One character of a JSON string body, encoded (Python regex over code points).
UNIT = (
    r'[^"\\\x00-\x1f]'
    r'|\\["\\/bfnrt]'
    r"|\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})"
    r"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
MAX_EXACT_LENGTH = 256  # longer minLength/maxLength bounds are left to the final check

_SHORT = {0x22: '"', 0x5C: "\\", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
_MUST_ESCAPE = CharSet([(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])
_GUARDS = frozenset({ast.BEHIND, ast.AHEAD, ast.BOUNDARY, ast.LINE_START, ast.LINE_END})

_unit_cache: dict[str, ByteDFA] = {}


def unit_dfa() -> ByteDFA:
    """The DFA of one encoded character (prefix-free: a complete unit reads nothing more)."""
    d = _unit_cache.get("unit")
    if d is None:
        d = _unit_cache["unit"] = python_regex_dfa(f"(?:{UNIT})")
    return d


@shared_automata(maxsize=64)
def counted_body(lo: int, hi: int | None) -> ByteDFA:
    """Encoded bodies of ``lo`` to ``hi`` characters (``hi=None``: no upper bound).

    State ``k * nu + s``: ``k`` characters read, then unit state ``s`` of the one being
    read (``nu`` states in :func:`unit_dfa`). A unit's completing byte leads to state
    ``(k + 1) * nu``, past ``top = hi or lo`` nowhere (``hi`` given) or back to ``top * nu``
    (no upper bound). Built over the unit's byte classes (its compact columns: 22, where
    the bytes are 256) with one broadcast for all counts; a bound of 255 characters is
    5,101 states.
    """
    u = unit_dfa()
    table, classes = u.columns()  # int32 [nu, m], uint8 [256]
    nu = u.n_states
    top = lo if hi is None else hi
    done = table >= 0
    completes = done & u.accept[np.where(done, table, 0)]
    base = (np.arange(top + 1, dtype=np.int32) * nu)[:, None, None]  # [top + 1, 1, 1]
    nxt_count = base + nu  # where a completed unit leads, count k + 1 ...
    if hi is None:
        nxt_count[top] = top * nu  # ... past `lo` with no bound: stay
    else:
        nxt_count[top] = -1  # ... past `hi`: nowhere
    trans = np.where(
        completes[None], nxt_count, np.where(done[None], base + table[None], -1)
    ).reshape(-1, table.shape[1])
    accept = np.zeros(trans.shape[0], bool)
    accept[lo * nu :: nu] = True
    # Already minimal up to the trim (in dfa_of_columns): unit states are minimal and counts
    # are distinguishable (each count level has a different set of remaining lengths), so
    # skip Hopcroft here.
    return dfa_of_columns(trans.astype(np.int32, copy=False), classes, accept, minimal=False)


@shared_automata(maxsize=64)
def plain_string(lo: int = 0, hi: int | None = None) -> ByteDFA:
    """A quoted JSON string of ``lo``..``hi`` characters (code points)."""
    return quoted(counted_body(lo, hi), minimal=False)


def _has_guards(node: ast.Node) -> bool:
    if isinstance(node, ast.Assert):
        return node.kind in _GUARDS
    if isinstance(node, (ast.Concat, ast.Alt)):
        return any(_has_guards(x) for x in node.items)
    if isinstance(node, ast.Repeat):
        return _has_guards(node.item)
    return False


def _lit(text: str) -> ast.Node:
    return ast.Concat(tuple(ast.Chars(CharSet.of(c)) for c in text))


def _hex_digit(d: str) -> ast.Node:
    return ast.Chars(CharSet.of(d.lower(), d.upper()))


_HEX = "0123456789abcdef"


def _escapes(cs: CharSet) -> tuple[ast.Node, ...]:
    """The escaped spellings of the members of ``cs`` that JSON requires to be escaped
    (plus ``\\/``): short forms, and ``\\uXXXX`` grouped by the third hex digit so a
    whole class costs a few alternatives, not one per character."""
    forms: list[ast.Node] = []
    for cp, letter in _SHORT.items():
        if cp in cs:
            forms.append(_lit("\\" + letter))
    if 0x2F in cs:
        forms.append(_lit("\\/"))
    need = cs.intersection(_MUST_ESCAPE)
    groups: dict[int, set[int]] = {}
    for lo, hi in need.ranges:
        for cp in range(lo, hi + 1):
            groups.setdefault(cp >> 4, set()).add(cp & 15)
    for high, lows in sorted(groups.items()):
        digits = "".join(_HEX[x] for x in sorted(lows))
        low = ast.Chars(CharSet.of(*digits, *digits.upper()))
        forms.append(ast.Concat((_lit("\\u00"), _hex_digit(_HEX[high]), low)))
    return tuple(forms)


@functools.lru_cache(maxsize=4096)
def _encoded_chars(chars: CharSet, escapes: bool) -> ast.Node:
    """:func:`encode_node` of one character class, kept once a process for each class
    (the last 4,096): patterns and formats repeat their classes."""
    raw = chars.difference(_MUST_ESCAPE)
    alts: list[ast.Node] = [ast.Chars(raw)] if raw else []
    if escapes:
        alts.extend(_escapes(chars))
    if len(alts) == 1:
        return alts[0]
    return ast.Alt(tuple(alts))


def encode_node(node: ast.Node, *, escapes: bool = True) -> ast.Node:
    """The tree of the encoded forms of the strings ``node`` matches (see module docs)."""
    if isinstance(node, ast.Chars):
        return _encoded_chars(node.chars, escapes)
    if isinstance(node, ast.Concat):
        return ast.Concat(tuple(encode_node(x, escapes=escapes) for x in node.items))
    if isinstance(node, ast.Alt):
        return ast.Alt(tuple(encode_node(x, escapes=escapes) for x in node.items))
    if isinstance(node, ast.Repeat):
        return ast.Repeat(encode_node(node.item, escapes=escapes), node.min, node.max, node.lazy)
    return node


@dataclass(frozen=True)
class FormatLanguage:
    """The decoded strings of a ``format`` value, given by its regex (``rx``, from
    :data:`.formats.FORMAT_REGEXES`). Its tree is read only when its automaton is built:
    a built package ships the automata (:mod:`.format_store`), and reading the e-mail or
    URI expression alone takes milliseconds."""

    rx: str

    def tree(self) -> ast.Node:
        """The regex's tree (read once per process)."""
        return _format_tree(self.rx)


@functools.lru_cache(maxsize=64)
def _format_tree(rx: str) -> ast.Node:
    from ..regex.python_syntax import parse_python_regex

    return parse_python_regex(rx, where="format")


Language: TypeAlias = ast.Node | FormatLanguage
"""A decoded-string language: a regex tree (a pattern's), or a format's."""

_BODY_CACHE_SIZE = 256
# (decoded language, state budget) -> (encoded-body DFA, steps); vocabulary-free
_BODY_CACHE: BoundedCache[tuple[Language, int], tuple[ByteDFA, int]] = BoundedCache(
    _BODY_CACHE_SIZE
)


def build_body(node: ast.Node, *, where: str, max_states: int) -> ByteDFA:
    """The encoded-body DFA of the decoded strings ``node`` matches, built (compact form;
    :func:`body_of_node` caches it). Raises ``CompileBudgetError`` beyond ``max_states``."""
    escapes = not _has_guards(node)
    parts = search_tail(node)
    if parts is None:
        nfa = build_nfa(encode_node(node, escapes=escapes))
    else:
        # a pattern found somewhere, not only at the end: the rest of the text after a
        # match is read by the tail alone (the subset construction stops tracking
        # other matches there)
        head, tail = (encode_node(x, escapes=escapes) for x in parts)
        nfa = build_search_nfa(head, tail)
    dfa = nfa_to_byte_dfa(nfa, where=where, max_states=max_states)
    return dfa.compacted()  # kept in the cache


def body_of_node(node: Language, *, where: str, max_states: int) -> ByteDFA:
    """The encoded-body DFA of a decoded-string language (cached: schemas repeat their
    patterns and formats). A format's is read from the package's prebuilt automata where
    they hold it (:func:`.format_store.stored_body`), with the steps its build counted."""

    def find() -> tuple[ByteDFA, int]:
        if isinstance(node, FormatLanguage):
            from .format_store import stored_body

            found = stored_body(node.rx, max_states)
            if found is not None:
                return found
            tree = node.tree()
        else:
            tree = node
        return metered(lambda: build_body(tree, where=where, max_states=max_states), where)

    dfa, cost = _BODY_CACHE.get_or_build((node, max_states), find)
    spend(cost, where)  # the same steps whether built now or before (a budget's outcome)
    return dfa


# Length bounds on a pattern/format string are compiled when the product automaton stays
# small (estimated as body states x longest length); otherwise the final check enforces them.
LENGTH_PRODUCT_BUDGET = 20_000


def constrained_string(
    *,
    lo: int = 0,
    hi: int | None = None,
    nodes: list[tuple[Language, str]] = (),  # type: ignore[assignment]
    max_states: int = 50_000,
) -> tuple[ByteDFA, bool]:
    """A quoted JSON string whose decoded value matches every tree in ``nodes`` (each with a
    description for messages) and has ``lo``..``hi`` characters.

    Returns ``(dfa, lengths_enforced)``: ``False`` when the length bounds were left out
    because the automaton would grow too large (see :data:`LENGTH_PRODUCT_BUDGET`).
    """
    if not nodes:
        return plain_string(lo, hi), True
    body: ByteDFA | None = None
    for node, where in nodes:
        d = body_of_node(node, where=where, max_states=max_states)
        body = d if body is None else intersect(body, d, max_states=max_states, where=where)
    assert body is not None
    enforced = True
    if lo > 0 or hi is not None:
        longest = hi if hi is not None else lo
        if body.n_states * (longest + 1) <= LENGTH_PRODUCT_BUDGET:
            body = intersect(
                body, counted_body(lo, hi), max_states=max_states, where="string length"
            )
        else:
            enforced = False
    # both operands were minimal, so quoting keeps the DFA minimal
    return quoted(body, minimal=False), enforced


RESTRICTED_MAX_STATES = 2_000_000
"""Most states of a span or entity-set automaton restricted by the string keywords beside
it (about 300 MB at the peak of the build; a span of at most 20 characters of a
100,000-character text needs 1.7 million)."""


def restricted_strings(
    base: SparseDFA,
    *,
    lo: int = 0,
    hi: int | None = None,
    nodes: list[tuple[Language, str]] = (),  # type: ignore[assignment]
    max_states: int = 50_000,
    max_restricted_states: int = RESTRICTED_MAX_STATES,
) -> SparseDFA | None:
    """The quoted JSON strings of ``base`` (a sparse automaton of quoted JSON strings:
    spans of a source, names of an entity set) whose decoded value matches every tree in
    ``nodes`` and has ``lo`` to ``hi`` characters: exact, with no length cap.

    ``max_states`` bounds each pattern's dense automaton (``CompileBudgetError`` beyond),
    ``max_restricted_states`` the result (``None`` beyond it).
    """
    dense = matching_strings(nodes, max_states=max_states)
    return restrict_quoted(
        base, dense=dense, unit=unit_dfa(), lo=lo, hi=hi, max_states=max_restricted_states
    )


def matching_strings(
    nodes: list[tuple[Language, str]], *, max_states: int = 50_000
) -> ByteDFA | None:
    """The quoted JSON strings whose decoded value matches every tree in ``nodes`` (each
    with a description for messages), with no length bound; ``None`` for no trees."""
    dense: ByteDFA | None = None
    for node, where in nodes:
        d = body_of_node(node, where=where, max_states=max_states)
        dense = d if dense is None else intersect(dense, d, max_states=max_states, where=where)
    return None if dense is None else quoted(dense, minimal=False)
