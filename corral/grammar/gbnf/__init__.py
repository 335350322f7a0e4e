"""GBNF, llama.cpp's grammar format: :func:`from_gbnf` reads it into a :class:`Grammar`.

``syntax.py`` reads the text (llama.cpp's syntax, with errors at their line and column);
``build.py`` turns the rules into a corral grammar with the same language (characters as
terminals, and longer lexemes where maximal munch is exact).
"""

from __future__ import annotations

from ..ir import Grammar


def from_gbnf(text: str, root: str = "root") -> Grammar:
    """The grammar of GBNF ``text`` from the rule ``root`` (see ``docs/grammar_formats.md``).

    Raises:
        GrammarError: a syntax error, an undefined rule, a rule defined twice, or no rule
            ``root``; with line, column and a caret where there is a position.
        UnsupportedFeatureError: the token negation ``!<...>``.
        EmptyLanguageError: the grammar derives no string.
        TypeError: ``text`` is not a ``str``.
    """
    from .build import build_grammar
    from .syntax import parse_gbnf

    return build_grammar(parse_gbnf(text), root)


def from_ebnf(text: str, root: str = "root") -> Grammar:
    """The grammar of XGrammar's EBNF ``text`` (``xgrammar.Grammar.from_ebnf``'s dialect
    of GBNF: see :func:`corral.grammar.gbnf.syntax.parse_gbnf`) from the rule ``root``.

    Raises: as :func:`from_gbnf`; ``UnsupportedFeatureError`` also for lookahead
    assertions ``(= ...)`` and XGrammar's token macros.
    """
    from .build import build_grammar
    from .syntax import parse_gbnf

    return build_grammar(parse_gbnf(text, "ebnf"), root)


__all__ = ["from_ebnf", "from_gbnf"]
