"""ECMA-262 regular expressions, as JSON Schema's ``pattern`` and ``patternProperties`` use
them: read with the ``u`` flag (see :mod:`.syntax` for the syntax and its Annex B
leniencies), then either

* **compiled** into the grammar: :func:`parse_ecma_regex` / :func:`ecma_search_node` give
  the pattern's language as a regex tree (:mod:`.lower`), refusing what is not regular
  (backreferences, lookaround longer than one character); or
* **evaluated** on a complete text: :class:`EcmaPattern` answers "does it match
  somewhere?" with ECMA-262's own backtracking semantics (:mod:`.match`), whatever the
  pattern holds. This is what the final check of a schema uses, so a pattern the grammar
  cannot express is still enforced exactly, never by another regex dialect.

A pattern that neither can handle (inline modifiers, script properties) is refused when
parsed, with :class:`~corral.errors.UnsupportedFeatureError`.
"""

from __future__ import annotations

from ....errors import CompileBudgetError, CorralError, UnsupportedFeatureError
from ...regex import ast
from ...regex.charset import UNIVERSE
from .lower import MAX_REPEAT_EXPANSION, lower
from .match import DEFAULT_MAX_STEPS, MatchBudgetError, Program
from .syntax import Pattern, parse

__all__ = [
    "MAX_REPEAT_EXPANSION",
    "EcmaPattern",
    "MatchBudgetError",
    "ecma_search_node",
    "parse_ecma_regex",
]


def parse_ecma_regex(pattern: str, *, where: str = "") -> ast.Node:
    """The tree of an ECMA-262 pattern, matched against the whole text (full-match language).

    ``where`` names the pattern in error messages (a JSON pointer, for instance).

    Raises:
        GrammarError: the pattern is malformed (the message names the column).
        UnsupportedFeatureError: a well-formed construct that has no regular language
            (backreferences, long lookaround) or that corral does not implement.
        CompileBudgetError: counted repetitions would expand beyond
            :data:`MAX_REPEAT_EXPANSION` copies, or parentheses nest too deeply.
    """
    return lower(parse(pattern, where=where))


ANYTHING = ast.Repeat(ast.Chars(UNIVERSE), 0, None)
"""Any text: what a search node reads before and after the pattern's match."""


def _search(node: ast.Node) -> ast.Node:
    return ast.Concat((ANYTHING, node, ANYTHING))


def search_tail(node: ast.Node) -> tuple[ast.Node, ast.Node] | None:
    """``(head, tail)`` of a search node (``Concat(..., ANYTHING)``) whose pattern may
    match before the end of the text, for :func:`~corral.grammar.regex.nfa.build_search_nfa`;
    ``None`` for any other node, and where the pattern ends with ``$`` (the tail then
    reads nothing after a match)."""
    items = node.items if isinstance(node, ast.Concat) else ()
    if len(items) < 2 or items[-1] != ANYTHING or ast.ends_at_text_end(items[-2]):
        return None
    return ast.Concat(items[:-1]), items[-1]


def ecma_search_node(pattern: str, *, where: str = "") -> ast.Node:
    """The language JSON Schema's ``pattern`` means: strings in which the pattern matches
    somewhere (unanchored search): ``Concat(any*, pattern, any*)`` — anchors ``^`` and ``$``
    then act as text start/end assertions."""
    return _search(parse_ecma_regex(pattern, where=where))


# Steps the backtracking matcher may take on a regular pattern before the pattern's
# automaton is built instead (linear in the text from then on).
_STEPS_BEFORE_AUTOMATON = 20_000


class EcmaPattern:
    """One pattern, ready to be evaluated on texts with ECMA-262 semantics.

    Args:
        pattern: the pattern text.
        where: its name in messages (a JSON pointer).
        max_steps: backtracking steps allowed per :meth:`search`.

    Raises:
        GrammarError, UnsupportedFeatureError, CompileBudgetError: as :func:`parse_ecma_regex`,
            except that non-regular constructs are accepted.

    Attributes:
        irregular: ``None`` if the pattern's language is regular (the grammar can hold
            it); else the :class:`~corral.errors.UnsupportedFeatureError` (or budget error)
            explaining why not.
    """

    def __init__(self, pattern: str, *, where: str = "", max_steps: int = DEFAULT_MAX_STEPS):
        self.source = pattern
        self.parsed: Pattern = parse(pattern, where=where)
        self.max_steps = max_steps
        self._program: Program | None = None
        self.irregular: CorralError | None = None
        self._node: ast.Node | None = None
        try:
            self._node = lower(self.parsed)
        except (UnsupportedFeatureError, CompileBudgetError) as e:
            self.irregular = e
        self._dfa: list[list[int]] | None = None
        self._accept: list[bool] = []
        self._no_dfa = False

    def __repr__(self) -> str:
        return f"EcmaPattern({self.source!r})"

    @property
    def program(self) -> Program:
        """The backtracking matcher (built on first use: the grammar needs only the tree)."""
        if self._program is None:
            self._program = Program(self.parsed)
        return self._program

    def search_node(self) -> ast.Node:
        """The regex tree of the strings the pattern matches somewhere in.

        Raises:
            UnsupportedFeatureError, CompileBudgetError: the pattern is not regular.
        """
        if self._node is None:
            assert self.irregular is not None
            raise self.irregular
        return _search(self._node)

    def search(self, text: str) -> bool:
        """Whether the pattern matches somewhere in ``text`` (ECMA-262 semantics).

        Raises:
            MatchBudgetError: the answer needs more backtracking than ``max_steps``
                (only for patterns that are not regular: regular ones switch to their
                automaton, which answers in one pass).
        """
        if self._dfa is not None:
            return self._dfa_search(text)
        if self._node is None or self._no_dfa:
            return self.program.search(text, max_steps=self.max_steps)
        try:
            return self.program.search(text, max_steps=_STEPS_BEFORE_AUTOMATON)
        except MatchBudgetError:
            pass
        try:
            self._build_dfa()
        except CompileBudgetError:
            self._no_dfa = True  # too large: backtracking with the full budget from now on
            return self.program.search(text, max_steps=self.max_steps)
        return self._dfa_search(text)

    def _build_dfa(self) -> None:
        from ...regex.dfa import nfa_to_byte_dfa
        from ...regex.nfa import build_nfa, build_search_nfa

        assert self._node is not None
        node = _search(self._node)
        parts = search_tail(node)
        nfa = build_nfa(node) if parts is None else build_search_nfa(*parts)
        dfa = nfa_to_byte_dfa(nfa, where=self.parsed.name)
        self._dfa = dfa.trans.tolist()
        self._accept = dfa.accept.tolist()

    def _dfa_search(self, text: str) -> bool:
        assert self._dfa is not None
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: no automaton reads it
            return self.program.search(text, max_steps=self.max_steps)
        if not self._dfa:
            return False
        trans = self._dfa
        s = 0
        for b in data:
            s = trans[s][b]
            if s < 0:
                return False
        return self._accept[s]
