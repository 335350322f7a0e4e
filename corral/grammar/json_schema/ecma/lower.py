"""ECMA-262 syntax tree → the grammar's regex tree (:mod:`corral.grammar.regex.ast`).

The regex tree describes a *language* (the strings the whole pattern matches), which is
what an automaton can enforce. Capture groups and the greedy/lazy order of quantifiers do
not change that language and are dropped. Two constructs have no regular language in
general and are refused here with :class:`~corral.errors.UnsupportedFeatureError`
(a JSON Schema then leaves the pattern to the final check, which evaluates it with
:mod:`.match`): backreferences, and lookaround whose body is longer than one character.

Counted repetitions are expanded copy by copy when the automaton is built, so a pattern
whose repetitions would expand beyond :data:`MAX_REPEAT_EXPANSION` copies in total is
refused with :class:`~corral.errors.CompileBudgetError` before anything is built.
"""

from __future__ import annotations

from ....errors import CompileBudgetError
from ...regex import ast
from ...regex.charset import EMPTY, CharSet
from . import syntax as sx
from .unicode import WORD

__all__ = ["MAX_REPEAT_EXPANSION", "lower"]

MAX_REPEAT_EXPANSION = 10_000
"""Most characters/assertions that counted repetitions may expand to, in total."""

_ANCHORS = {
    "^": ast.Assert(ast.TEXT_START, text="^"),
    "$": ast.Assert(ast.TEXT_END, text="$"),
    "\\b": ast.Assert(ast.BOUNDARY, WORD, text="\\b"),
    "\\B": ast.Assert(ast.BOUNDARY, WORD, negate=True, text="\\B"),
}


def lower(pattern: sx.Pattern) -> ast.Node:
    """The full-match language of ``pattern`` as a regex tree.

    Raises:
        UnsupportedFeatureError: a backreference, or lookaround longer than one character.
        CompileBudgetError: counted repetitions expand beyond :data:`MAX_REPEAT_EXPANSION`.
    """
    node = _lower(pattern, pattern.root)
    expansion = _repeat_expansion(node)
    if expansion > MAX_REPEAT_EXPANSION:
        raise CompileBudgetError(
            f"{pattern.name}: counted repetitions expand to {expansion} copies "
            f"(more than {MAX_REPEAT_EXPANSION}); simplify the pattern"
        )
    return node


def _lower(p: sx.Pattern, node: sx.Node) -> ast.Node:
    if isinstance(node, sx.Chars):
        return ast.Chars(node.chars)
    if isinstance(node, sx.Seq):
        items = tuple(_lower(p, i) for i in node.items)
        return items[0] if len(items) == 1 else ast.Concat(items)
    if isinstance(node, sx.Alt):
        return ast.Alt(tuple(_lower(p, i) for i in node.items))
    if isinstance(node, sx.Group):
        return _lower(p, node.body)
    if isinstance(node, sx.Repeat):
        body = _lower(p, node.body)
        return body if node.min == node.max == 1 else ast.Repeat(body, node.min, node.max)
    if isinstance(node, sx.Anchor):
        return _ANCHORS[node.kind]
    if isinstance(node, sx.Look):
        return _lookaround(p, node)
    raise p.unsupported(f"backreference {node.text}", node.pos, "its language is not regular")


def _lookaround(p: sx.Pattern, node: sx.Look) -> ast.Node:
    body = _lower(p, node.body)
    if body == ast.EMPTY_STRING:  # (?=) always holds, (?!) never does
        return ast.Chars(EMPTY) if node.negate else ast.EMPTY_STRING
    if isinstance(body, ast.Assert):  # a zero-width body looks in neither direction
        return ast.Assert(body.kind, body.chars, body.negate != node.negate, text=node.written)
    cs = _one_char(body)
    if cs is not None:
        kind = ast.BEHIND if node.behind else ast.AHEAD
        return ast.Assert(kind, cs, negate=node.negate, text=node.written)
    name = "lookbehind" if node.behind else "lookahead"
    raise p.unsupported(
        f"{name} assertion {node.written}",
        node.pos,
        "only lookaround over a single character is supported",
    )


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
