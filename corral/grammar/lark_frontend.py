"""Lark grammar text → :class:`~corral.grammar.ir.Grammar`.

The text is read into BNF rules and terminal patterns as Lark's own loader reads it (so EBNF
operators, templates, ``%import`` and friends mean exactly what they mean in Lark): first by
corral's reader (:mod:`.lark_reader`, several times faster), which leaves to Lark's loader
whatever it does not handle (templates, ``%override``, imports other than ``common.lark``,
errors, ...), so that Lark reports errors as it always has. corral then
compiles every terminal pattern into a byte DFA whose lexemes are the matches Lark's lexer
finds (:func:`leftmost_first_dfa`). Errors are re-raised as corral errors that carry the
line, column and a caret snippet.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import (
    ArgumentTypeError,
    CorralError,
    GrammarError,
    Location,
    UnsupportedFeatureError,
    caret_snippet,
)
from .ir import Grammar, Rule, Terminal
from .lexeme_backtracking import backtracking_lexemes
from .regex import literal_automaton, literal_dfa
from .regex.ignorecase_literal import ignorecase_literal_dfa
from .regex.leftmost import leftmost_first_dfa

if TYPE_CHECKING:
    from .entities import EntitySet
    from .indentation import Indentation

_FLAG_LETTERS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE, "u": 0}


_SPECIAL_PREFIX = "SPECIAL_TOKEN__"
# Lark lexemes that may contain `<|`: strings, regexes, comments; and the special syntax.
_SCAN = re.compile(
    r'(?P<str>"(?:\\.|[^"\\])*"i?)'
    r"|(?P<re>/(?!/)(?:\\.|[^/\\\n])+/[imslux]*)"
    r"|(?P<comment>//[^\n]*)"
    r"|(?P<special><\|[^|\s>]+\|>|<\[\d+\]>)"
)


def _extract_special_tokens(text: str) -> tuple[str, dict[str, str]]:
    """Replace ``<|name|>`` and ``<[id]>`` (outside strings, regexes and comments) by
    generated terminals; return the new text and terminal name → special token text."""
    specials: dict[str, str] = {}
    by_text: dict[str, str] = {}
    out: list[str] = []
    pos = 0
    for m in _SCAN.finditer(text):
        if m.lastgroup != "special":
            continue
        tok = m.group("special")
        name = by_text.get(tok)
        if name is None:
            name = by_text[tok] = f"{_SPECIAL_PREFIX}{len(by_text)}"
            specials[name] = tok
        out.append(text[pos : m.start()])
        out.append(name)
        pos = m.end()
    if not specials:
        return text, {}
    out.append(text[pos:])
    defs = "".join(f'\n{name}: "{tok}"' for name, tok in specials.items())
    return "".join(out) + defs + "\n", specials


def _prime_meta_parser() -> None:
    """Build Lark's parser of the grammar language once per process, without validation.

    ``lark.load_grammar`` builds that parser on its first call and keeps it. Building it
    validates Lark's own terminals and, where ``interegular`` is installed, checks every
    pair of them for collisions: about 0.34 s, a third of a process's first compile. Those
    terminals are Lark's, fixed and tested by Lark, so the parser is built here the same
    way with ``skip_validation`` set. Where Lark's internals differ from what this expects,
    nothing is primed and Lark builds its parser as usual.
    """
    from lark import load_grammar as lg

    if hasattr(lg._get_parser, "cache"):
        return
    with _META_PARSER_LOCK:
        if hasattr(lg._get_parser, "cache"):
            return
        try:
            from lark.common import LexerConf, ParserConf
            from lark.grammar import Rule as LarkRule
            from lark.grammar import RuleOptions
            from lark.lexer import PatternRE, TerminalDef
            from lark.parse_tree_builder import ParseTreeBuilder
            from lark.parser_frontends import ParsingFrontend

            terminals = [TerminalDef(n, PatternRE(v)) for n, v in lg.TERMINALS.items()]
            rules = [
                LarkRule(
                    lg.NonTerminal(name.lstrip("?")),
                    [lg.symbol_from_strcase(s) for s in x.split()],
                    i,
                    None,
                    RuleOptions(expand1=name.startswith("?")),
                )
                for name, xs in lg.RULES.items()
                for i, x in enumerate(xs)
            ]
            callback = ParseTreeBuilder(rules, lg.ST).create_callback()
            lexer_conf = LexerConf(
                terminals, re, ["WS", "COMMENT", "BACKSLASH"], skip_validation=True
            )
            parser_conf = ParserConf(rules, callback, ["start"])
            lexer_conf.lexer_type = "basic"
            parser_conf.parser_type = "lalr"
            parser = ParsingFrontend(lexer_conf, parser_conf, None)
        except Exception:  # other Lark versions: Lark builds its own parser
            return
        lg._get_parser.cache = parser  # type: ignore[attr-defined]


_META_PARSER_LOCK = threading.Lock()

# terminal definitions, rules, ignore list and declared terminals, as Lark's classes
_Loaded = tuple[list[Any], list[Any], list[str], set[str]]


def grammar_from_lark(
    text: str,
    start: str = "start",
    *,
    import_paths: Sequence[str] = (),
    strict_lexemes: bool = False,
    span_source: Sequence[str] | None = None,
    entities: Mapping[str, EntitySet] | None = None,
    indentation: Indentation | None = None,
) -> Grammar:
    """See :func:`corral.grammar.frontends.from_lark`."""
    from .lark_reader import read_lark

    if not isinstance(text, str):
        raise ArgumentTypeError(f"grammar text must be str, not {type(text).__name__}")
    source = text
    text, specials = _extract_special_tokens(text)
    read = read_lark(text, start, import_paths)
    if read is not None:  # the fast reader: what Lark's loader gives, without it
        term_defs, lark_rules, ignore, declared = read
    else:
        term_defs, lark_rules, ignore, declared = _load_with_lark(text, start, import_paths)
    defined = {t.name for t in term_defs}
    terminals: dict[str, Terminal] = {}
    for td in term_defs:
        if td.name in specials:
            tok = specials[td.name]
            terminals[td.name] = Terminal(
                td.name, literal_dfa(tok), source=tok, literal=None, special=tok
            )
        else:
            terminals[td.name] = _terminal(source, td)
    rules: list[Rule] = []
    for r in lark_rules:
        rhs = []
        for sym in r.expansion:
            name = sym.name
            if (
                sym.is_term
                and name not in defined
                and name in declared
                and entities
                and (name in entities)
            ):
                if name not in terminals:
                    dfa = entities[name].dfa("raw")
                    terminals[name] = Terminal(name, dfa, source="%declare (entity set)")
            elif sym.is_term and name not in defined and name in declared and _is_span(name):
                if name not in terminals:
                    terminals[name] = _span_terminal(text, name, span_source)
            elif (
                indentation is not None
                and sym.is_term
                and name not in defined
                and name in (indentation.indent, indentation.dedent)
            ):
                pass  # the post-lexer's tokens: compiled away below
            elif sym.is_term and name not in defined:
                line, col = _locate_word(text, name)
                if name in declared:
                    raise UnsupportedFeatureError(
                        f"%declare'd terminal {name}",
                        location=Location(_where(line, col), line=line, column=col),
                        detail="a declared terminal has no pattern, so corral cannot generate it; "
                        "define it with a string or regex (or name it SPAN, or SPAN_..., "
                        "to bind it to the source text)",
                    )
                raise GrammarError(
                    f"terminal {name!r} is used but not defined",
                    line=line,
                    column=col,
                    snippet=caret_snippet(text, line, col or 1) if line else "",
                )
            rhs.append(name)
        rules.append(Rule(r.origin.name, tuple(rhs)))
    top = start
    if indentation is not None:
        from .indentation import indent_grammar

        terminals, rules, top = indent_grammar(terminals, rules, start, indentation)
    try:
        grammar = Grammar(terminals, rules, top, list(ignore), description=_first_line(source))
    except GrammarError as e:
        if e.line is None:
            quoted = _quoted_name(e.message)
            line, col = _locate_word(source, quoted) if quoted else (None, None)
            if line:
                raise type(e)(
                    e.message, line=line, column=col, snippet=caret_snippet(source, line, col or 1)
                ) from None
        raise
    if strict_lexemes:
        found = backtracking_lexemes(grammar)
        if found:
            where = []
            for b in found:
                line, col = _locate_terminal(source, b.terminal, "")
                if line is None:  # an imported terminal: its %import line
                    m = re.search(
                        rf"^[ \t]*%import\b.*?\b({re.escape(b.terminal)})\b", source, re.M
                    )
                    line, col = _pos_to_line_col(source, m.start(1)) if m else (None, None)
                where.append(b.terminal + (f" ({_where(line, col)})" if line else ""))
            raise UnsupportedFeatureError(
                "terminals whose lexemes Lark may find by backtracking",
                location=", ".join(where),
                detail="; ".join(b.describe() for b in found),
            )
    return grammar


def _load_with_lark(text: str, start: str, import_paths: Sequence[str]) -> _Loaded:
    """Lark's own loader: terminal definitions, rules, ignore list, declared terminals."""
    import lark
    from lark.exceptions import GrammarError as LarkGrammarError
    from lark.exceptions import UnexpectedInput
    from lark.load_grammar import load_grammar

    _prime_meta_parser()
    try:
        g, _files = load_grammar(text, "<grammar>", list(import_paths), False)
        term_defs, lark_rules, ignore = g.compile([start], set())
    except UnexpectedInput as e:
        line, col = getattr(e, "line", None), getattr(e, "column", None)
        raise GrammarError(
            f"Lark syntax error: {_first_line(str(e))}",
            line=line if isinstance(line, int) and line > 0 else None,
            column=col if isinstance(col, int) and col > 0 else None,
            snippet=caret_snippet(text, line, col or 1)
            if isinstance(line, int) and line > 0
            else "",
        ) from None
    except (LarkGrammarError, lark.exceptions.LarkError, KeyError, OSError) as e:
        msg = _first_line(str(e)) if not isinstance(e, KeyError) else f"undefined symbol {e}"
        line, col = _locate_message_symbol(text, msg)
        raise GrammarError(
            f"Lark grammar error: {msg}",
            line=line,
            column=col,
            snippet=caret_snippet(text, line, col or 1) if line else "",
        ) from None

    declared = {name for name, (tree, _prio) in g.term_defs if tree is None}
    return term_defs, lark_rules, ignore, declared


def _terminal(text: str, td: object) -> Terminal:
    from lark.lexer import PatternStr

    name: str = td.name  # type: ignore[attr-defined]
    pattern = td.pattern  # type: ignore[attr-defined]
    flags = 0
    for letter in sorted(pattern.flags):
        if letter == "l":
            raise UnsupportedFeatureError("re.LOCALE flag", location=f"terminal {name}")
        flags |= _FLAG_LETTERS.get(letter, 0)
    where = f"terminal {name}"
    try:
        if isinstance(pattern, PatternStr):
            source = f'"{pattern.value}"' + ("i" if flags & re.IGNORECASE else "")
            if flags == re.IGNORECASE:
                return Terminal(name, ignorecase_literal_dfa(pattern.value, where=where), source)
            if flags & re.IGNORECASE:
                dfa, _ = leftmost_first_dfa(re.escape(pattern.value), flags, where=where)
                return Terminal(name, dfa, source)
            return Terminal(name, literal_automaton(pattern.value), source, literal=pattern.value)
        source = f"/{pattern.value}/"
        dfa, blocked = leftmost_first_dfa(pattern.value, flags, where=where)
        return Terminal(name, dfa, source, end_blocked=blocked)
    except CorralError as e:
        line, col = _locate_terminal(text, name, pattern.value)
        r = re.fullmatch(r"\[(.)-(.)\]", pattern.value)
        if line is None and r:  # a range "x".."y" of the grammar
            x, y = (re.escape(c) for c in r.groups())
            found = re.search(rf'"{x}"\s*\.\.\s*"{y}"', text)
            if found:
                line, col = _pos_to_line_col(text, found.start())
        loc = _where(line, col)
        if isinstance(e, UnsupportedFeatureError):
            raise UnsupportedFeatureError(
                e.feature,
                location=Location(where + (f" ({loc})" if loc else ""), line=line, column=col),
                detail=e.detail,
            ) from None
        if isinstance(e, GrammarError):
            raise GrammarError(
                str(e).split("\n")[0],
                line=line,
                column=col,
                snippet=caret_snippet(text, line, col or 1) if line else "",
            ) from None
        raise


# -- locating things in the source, for error messages ----------------------------------------


def _first_line(s: str) -> str:
    return s.strip().split("\n")[0]


def _where(line: int | None, col: int | None) -> str:
    return f"line {line}, column {col}" if line else ""


def _pos_to_line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def _locate_word(text: str, word: str) -> tuple[int | None, int | None]:
    if not word:
        return None, None
    m = re.search(rf"(?<![\w.]){re.escape(word)}(?!\w)", text)
    if not m:
        return None, None
    return _pos_to_line_col(text, m.start())


def _locate_terminal(text: str, name: str, pattern: str) -> tuple[int | None, int | None]:
    m = re.search(rf"^[ \t]*{re.escape(name)}(\.\d+)?[ \t]*:", text, re.M)
    if m:
        return _pos_to_line_col(text, m.start() + m.group(0).index(name))
    i = text.find(pattern) if pattern else -1
    if i >= 0:
        return _pos_to_line_col(text, i)
    return None, None


def _quoted_name(msg: str) -> str | None:
    m = re.search(r"'([^']+)'", msg)
    return m.group(1) if m else None


# Lark errors that name no position: what in the message says where, and how to find it
_MESSAGE_PLACES: list[tuple[str, str]] = [
    (r"template arguments used for (\w+)", r"[:|][^\n]*?(?<![\w.])({0})\s*\{{"),  # a use
    (r"\((\d+\.\.\d+) isn't allowed\)", r"~[ \t]*({0})"),  # Bad Range: the repeat
    (r"(?<!Non)Terminal\('(\w+)'\)", r"^[ \t]*({0})\b[^:\n]*:"),
    (r"nonexisting rule (\w+)", r"^[ \t]*%override[ \t]+({0})\b"),
    (r"extend (?:rule|terminal) (\w+)", r"^[ \t]*%extend[ \t]+({0})\b"),
    (r"NonTerminal\('\w+'\) in (\w+)", r"^[ \t]*({0})\b[^:\n]*:"),
    (r"^\('(.+?)', SyntaxError", r"({0})"),  # a string literal Python cannot read
    (r"Empty terminals are not allowed \((\S+)\)", r"({0})"),
    (r'process rule "range"', r'("[^"\n]*"\s*\.\.\s*"[^"\n]*")'),
    (r"No such file or directory: '([^']+?)(?:\.lark)?'", r"^[ \t]*%import[ \t]+\S*({0})\b"),
]


def _locate_message_symbol(text: str, msg: str) -> tuple[int | None, int | None]:
    m = re.search(r"line (\d+),? column (\d+)", msg)
    if m:
        return int(m.group(1)), int(m.group(2))
    for said, where in _MESSAGE_PLACES:
        m = re.search(said, msg)
        if m is None:
            continue
        # (a name quoted by repr has its backslashes doubled)
        what = re.escape(m.group(1).replace("\\\\", "\\")) if m.groups() else ""
        found = re.search(where.format(what), text, re.M)
        if found:
            return _pos_to_line_col(text, found.start(1))
    name = _quoted_name(msg)
    if name is None:
        m = re.search(r"\{'([^']+)'", msg)
        name = m.group(1) if m else None
    if name is None:
        return None, None
    # prefer a use of the name inside a rule body (after a colon on the same line)
    for m in re.finditer(rf"(?<![\w.]){re.escape(name)}(?!\w)", text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if ":" in text[line_start : m.start()] or text[line_start : m.start()].strip().startswith(
            ("|", "%")
        ):
            return _pos_to_line_col(text, m.start())
    return _locate_word(text, name)


def _is_span(name: str) -> bool:
    """Whether a ``%declare``'d terminal is bound to the source text (``SPAN``,
    ``SPAN_...``)."""
    return name == "SPAN" or name.startswith("SPAN_")


def _span_terminal(text: str, name: str, source: Sequence[str] | None) -> Terminal:
    """The terminal of the non-empty substrings of ``source`` (UTF-8), for a declared
    ``SPAN`` terminal.

    Raises:
        UnsupportedFeatureError: no source was given.
    """
    from .spans import SpanOptions, source_texts, span_dfa

    texts = source_texts(source)
    if texts is None:
        line, col = _locate_word(text, name)
        raise UnsupportedFeatureError(
            f"%declare'd terminal {name}",
            location=Location(_where(line, col), line=line, column=col),
            detail="a SPAN terminal matches the source text: pass source=...",
        )
    return Terminal(name, span_dfa(texts, SpanOptions(), encoding="raw"), source="%declare")
