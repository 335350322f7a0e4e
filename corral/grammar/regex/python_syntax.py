"""Python ``re`` syntax → :mod:`corral.grammar.regex.ast`.

The pattern is parsed by Python's own regex parser (``re._parser``, ``sre_parse`` before
3.11), so every pattern ``re`` accepts is read exactly as ``re`` reads it, flags included.
Character classes that depend on Unicode tables or on ``re.IGNORECASE`` are computed by
``re`` itself (see :func:`charset.python_class`; ``\\d``, ``\\s`` and ``\\w`` are kept on
disk between processes, :mod:`.unicode_file`).

Constructs that are not regular, or whose meaning depends on matching order rather than
on the language, are refused with :class:`~corral.errors.UnsupportedFeatureError`:
backreferences, conditional groups, atomic groups, possessive quantifiers, and
lookaround whose body is longer than one character.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ...caching import BoundedCache
from ...errors import GrammarError, Location, UnsupportedFeatureError
from . import ast
from .charset import (
    EMPTY,
    NEWLINE,
    UNIVERSE,
    CharSet,
    ascii_class,
    python_class_ignorecase,
)
from .unicode_file import case_related, unicode_class

try:  # Python 3.11+
    from re import _constants as C  # type: ignore[attr-defined]  # noqa: N812
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C  # type: ignore[no-redef]  # noqa: N812
    import sre_parse  # type: ignore[no-redef]

_I = re.IGNORECASE
_S = re.DOTALL
_M = re.MULTILINE
_A = re.ASCII
_L = re.LOCALE

_CATEGORY = {
    C.CATEGORY_DIGIT: ("digit", False),
    C.CATEGORY_NOT_DIGIT: ("digit", True),
    C.CATEGORY_SPACE: ("space", False),
    C.CATEGORY_NOT_SPACE: ("space", True),
    C.CATEGORY_WORD: ("word", False),
    C.CATEGORY_NOT_WORD: ("word", True),
}
_CATEGORY_ESCAPE = {"digit": "\\d", "space": "\\s", "word": "\\w"}


def parse_python_regex(
    pattern: str, flags: int = 0, *, where: str = "", long_lookahead: bool = False
) -> ast.Node:
    """Parse ``pattern`` (Python ``re`` syntax, with ``flags``) into a syntax tree.

    ``long_lookahead``: accept lookaheads of several characters whose body is a finite
    set of strings of character classes, at most :data:`MAX_LOOKAHEAD` characters long
    (``(?!"")``, ``(?!\\${)``, ``(?=ab|c)``), as :class:`ast.Assert` nodes with ``rest``
    (only the leftmost construction of Lark terminals enforces them); otherwise they
    are refused.

    Raises:
        GrammarError: the pattern is not valid Python regex syntax (with its position).
        UnsupportedFeatureError: the pattern uses a construct corral cannot enforce.
    """
    if flags & _L:
        raise UnsupportedFeatureError("re.LOCALE flag", location=where)
    try:
        parsed = sre_parse.parse(pattern, flags)
    except re.error as e:
        pos = e.pos if e.pos is not None else 0
        col = pos + 1
        raise GrammarError(
            f"invalid regular expression {pattern!r}{' in ' + where if where else ''}: {e.msg}",
            location=Location(column=col, snippet=f"{pattern}\n{' ' * (col - 1)}^"),
        ) from None
    state_flags = parsed.state.flags
    return _Translator(pattern, where, long_lookahead).seq(parsed.data, state_flags)


MAX_LOOKAHEAD = 8  # characters a lookahead may look at
_MAX_LOOKAHEAD_WORDS = 64  # strings of classes one lookahead may stand for

_Word = tuple[CharSet, ...]


class _Translator:
    def __init__(self, pattern: str, where: str, long_lookahead: bool = False) -> None:
        self.pattern = pattern
        self.where = where or f"regex {pattern!r}"
        self.long_lookahead = long_lookahead

    def unsupported(self, feature: str, detail: str = "") -> UnsupportedFeatureError:
        return UnsupportedFeatureError(feature, location=self.where, detail=detail)

    # -- sequences and items ---------------------------------------------------------
    def seq(self, items: list[tuple[Any, Any]], flags: int) -> ast.Node:
        nodes = [self.item(op, av, flags) for op, av in items]
        return nodes[0] if len(nodes) == 1 else ast.Concat(tuple(nodes))

    def item(self, op: Any, av: Any, flags: int) -> ast.Node:
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            return ast.Chars(self.char_class(op, av, flags))
        if op is C.BRANCH:
            return ast.Alt(tuple(self.seq(list(alt), flags) for alt in av[1]))
        if op is C.SUBPATTERN:
            _group, add, dele, sub = av
            return self.seq(list(sub), (flags | add) & ~dele)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            return ast.Repeat(
                self.seq(list(sub), flags),
                int(lo),
                None if hi is C.MAXREPEAT else int(hi),
                lazy=op is C.MIN_REPEAT,
            )
        if op is C.AT:
            return self.anchor(av, flags)
        if op in (C.ASSERT, C.ASSERT_NOT):
            return self.lookaround(op is C.ASSERT_NOT, av, flags)
        if op in (C.GROUPREF, C.GROUPREF_EXISTS):
            what = "backreference" if op is C.GROUPREF else "conditional group (?(id)yes|no)"
            raise self.unsupported(what, "its language is not regular")
        name = str(op)
        if name == "POSSESSIVE_REPEAT":
            raise self.unsupported("possessive quantifier (*+, ++, ?+)")
        if name == "ATOMIC_GROUP":
            raise self.unsupported("atomic group (?>...)")
        raise self.unsupported(f"regex construct {name}")

    # -- one-character nodes -----------------------------------------------------------
    def char_class(self, op: Any, av: Any, flags: int) -> CharSet:
        if op is C.ANY:
            return UNIVERSE if flags & _S else UNIVERSE.difference(NEWLINE)
        if flags & _I:
            return _ignorecase_set(
                _with_flags(flags, _source_of(op, av)),
                lambda: self.char_class(op, av, flags & ~_I),
            )
        if op is C.LITERAL:
            return CharSet.of(av)
        if op is C.NOT_LITERAL:
            return CharSet.of(av).complement()
        # IN
        negate = False
        acc = EMPTY
        for sub_op, sub_av in av:
            if sub_op is C.NEGATE:
                negate = True
            elif sub_op is C.LITERAL:
                acc = acc.union(CharSet.of(sub_av))
            elif sub_op is C.RANGE:
                acc = acc.union(CharSet([(sub_av[0], sub_av[1])]))
            elif sub_op is C.CATEGORY:
                acc = acc.union(self.category(sub_av, flags))
            else:  # pragma: no cover - sre never emits other items inside a class
                raise self.unsupported(f"character class item {sub_op}")
        return acc.complement() if negate else acc

    def category(self, cat: Any, flags: int) -> CharSet:
        try:
            name, negated = _CATEGORY[cat]
        except KeyError:
            raise self.unsupported(f"character category {cat}") from None
        cs = ascii_class(name) if flags & _A else unicode_class(_CATEGORY_ESCAPE[name])
        return cs.complement() if negated else cs

    # -- zero-width assertions ---------------------------------------------------------
    def word_chars(self, flags: int) -> CharSet:
        return ascii_class("word") if flags & _A else unicode_class("\\w")

    def anchor(self, code: Any, flags: int) -> ast.Node:
        multiline = bool(flags & _M)
        if code is C.AT_BEGINNING:
            if multiline:
                return ast.Assert(ast.LINE_START, text="^ (multiline)")
            return ast.Assert(ast.TEXT_START, text="^")
        if code is C.AT_BEGINNING_STRING:
            return ast.Assert(ast.TEXT_START, text="\\A")
        if code is C.AT_END:
            if multiline:
                return ast.Assert(ast.LINE_END, text="$ (multiline)")
            # Python's `$` also matches before a final newline; corral reads it as the end
            # of the text (a subset of Python's language: sound, never wider).
            return ast.Assert(ast.TEXT_END, text="$")
        if code is C.AT_END_STRING:
            return ast.Assert(ast.TEXT_END, text="\\Z")
        if code is C.AT_BOUNDARY:
            return ast.Assert(ast.BOUNDARY, self.word_chars(flags), text="\\b")
        if code is C.AT_NON_BOUNDARY:
            return ast.Assert(ast.BOUNDARY, self.word_chars(flags), negate=True, text="\\B")
        raise self.unsupported(f"anchor {code}")

    def lookaround(self, negate: bool, av: Any, flags: int) -> ast.Node:
        direction, sub = av
        kind = ast.BEHIND if direction == -1 else ast.AHEAD
        written = {
            (ast.BEHIND, False): "(?<=...)",
            (ast.BEHIND, True): "(?<!...)",
            (ast.AHEAD, False): "(?=...)",
            (ast.AHEAD, True): "(?!...)",
        }[(kind, negate)]
        name = "lookbehind" if kind == ast.BEHIND else "lookahead"
        body = list(sub)
        # Unwrap groups around a single item.
        while len(body) == 1 and body[0][0] is C.SUBPATTERN:
            _g, add, dele, inner = body[0][1]
            flags = (flags | add) & ~dele
            body = list(inner)
        if len(body) == 1 and body[0][0] in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            cs = self.char_class(body[0][0], body[0][1], flags)
            return ast.Assert(kind, cs, negate=negate, text=written)
        words = self.class_words(body, flags) if self.long_lookahead else None
        if kind == ast.BEHIND or words is None:
            raise self.unsupported(
                f"{name} assertion {written}",
                "only lookaround over a single character is supported"
                if kind == ast.BEHIND or not self.long_lookahead
                else f"a lookahead must stand for a few strings of at most {MAX_LOOKAHEAD} "
                "characters (no unbounded repeats)",
            )
        words = list(dict.fromkeys(words))
        asserts: list[ast.Node] = []
        for w in words:
            if not w:  # the empty string is always there
                return ast.Chars(EMPTY) if negate else ast.EMPTY_STRING
            asserts.append(ast.Assert(kind, w[0], negate=negate, text=written, rest=w[1:]))
        if len(asserts) == 1:
            return asserts[0]
        # none of the strings is next (each assertion in turn), or one of them is
        return ast.Concat(tuple(asserts)) if negate else ast.Alt(tuple(asserts))

    def class_words(self, items: list[tuple[Any, Any]], flags: int) -> list[_Word] | None:
        """The strings of character classes a lookahead body stands for, or ``None`` when
        it stands for too many, too long ones (or uses anything but classes, groups,
        alternatives and bounded repeats)."""
        words: list[_Word] = [()]
        for op, av in items:
            options: list[_Word] | None
            if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
                options = [(self.char_class(op, av, flags),)]
            elif op is C.SUBPATTERN:
                _g, add, dele, sub = av
                options = self.class_words(list(sub), (flags | add) & ~dele)
            elif op is C.BRANCH:
                options = []
                for alt in av[1]:
                    got = self.class_words(list(alt), flags)
                    if got is None:
                        return None
                    options += got
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[1] is not C.MAXREPEAT:
                lo, hi, sub = int(av[0]), int(av[1]), av[2]
                one = self.class_words(list(sub), flags)
                if one is None or hi > MAX_LOOKAHEAD:
                    return None
                options = []
                reps: list[_Word] = [()]
                for n in range(hi + 1):
                    if n >= lo:
                        options += reps
                    reps = [a + b for a in reps for b in one]
                    if len(reps) > _MAX_LOOKAHEAD_WORDS:
                        return None
            else:
                return None
            if options is None:
                return None
            words = [w + o for w in words for o in options]
            if len(words) > _MAX_LOOKAHEAD_WORDS or any(len(w) > MAX_LOOKAHEAD for w in words):
                return None
        return words


_IGNORECASE_SETS: BoundedCache[str, CharSet] = BoundedCache(4096)


def _ignorecase_set(source: str, plain: Callable[[], CharSet]) -> CharSet:
    """The set of the one-character pattern ``source`` under ``re.IGNORECASE`` (its flags
    written in it, :func:`_with_flags`), given the set ``plain`` gives without that flag.

    Case-insensitive sets come from ``re`` itself (exact Unicode case folding), asked only
    about the characters where case can matter (:func:`charset.python_class_ignorecase`).
    Kept once a process per source (the last 4,096): the letters of case-insensitive
    keywords recur (SynCode's SQL grammar spells 118 of them), and each asking costs a scan
    of the 2,927 case-related characters.
    """
    hit = _IGNORECASE_SETS.get(source)
    if hit is None:
        hit = python_class_ignorecase(source, plain(), case_related())
        _IGNORECASE_SETS.put(source, hit)
    return hit


def ignorecase_char_set(cp: int) -> CharSet:
    """The characters the one character ``cp`` matches under ``re.IGNORECASE`` (a ``str``
    pattern, Unicode case folding and ``re``'s own equivalences: ``s`` matches ``S``, ``s``
    and U+017F LATIN SMALL LETTER LONG S)."""
    return _ignorecase_set(_with_flags(_I, _source_of(C.LITERAL, cp)), lambda: CharSet.of(cp))


def _with_flags(flags: int, source: str) -> str:
    letters = ("i" if flags & _I else "") + ("a" if flags & _A else "")
    return f"(?{letters}:{source})" if letters else source


def _source_of(op: Any, av: Any) -> str:
    """Rebuild a one-character pattern from an sre node (used to ask `re` for its set)."""
    if op is C.LITERAL:
        return f"\\U{av:08x}"
    if op is C.NOT_LITERAL:
        return f"[^\\U{av:08x}]"
    parts = []
    for sub_op, sub_av in av:
        if sub_op is C.NEGATE:
            parts.append("^")
        elif sub_op is C.LITERAL:
            parts.append(f"\\U{sub_av:08x}")
        elif sub_op is C.RANGE:
            parts.append(f"\\U{sub_av[0]:08x}-\\U{sub_av[1]:08x}")
        elif sub_op is C.CATEGORY:
            name, negated = _CATEGORY[sub_av]
            esc = _CATEGORY_ESCAPE[name]
            parts.append(esc.upper() if negated else esc)
    return "[" + "".join(parts) + "]"
