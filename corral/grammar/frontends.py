"""The front ends: every kind of grammar spec corral reads, and how each becomes a Grammar.

One table, :data:`FRONT_ENDS`, lists them in the order :func:`guess` tries them:

* ``json-schema``: a dict, a bool, JSON text (a ``str`` whose first non-blank character
  is ``{``) or a pydantic model class; takes the JSON Schema options
  (:class:`corral.grammar.json_schema.Options`);
* ``grammar``: a :class:`Grammar`, used as it is;
* ``lark``: Lark grammar text (any other ``str``), with its ``start`` rule;
* ``regex``: a Python ``re`` pattern matched in full, with ``flags``; never guessed (text
  is read as Lark text), only asked for by name;
* ``gbnf``: llama.cpp's GBNF text, from its ``root`` rule (or ``start``); never guessed,
  only asked for by name (``format="gbnf"``);
* ``ebnf``: XGrammar's EBNF (its dialect of GBNF), likewise (``format="ebnf"``).

A front end turns a spec into a :class:`Source`: the *key* that identifies the grammar
the spec denotes (equal keys always build equal grammars, so a compiler builds each once)
and the *build* itself. :func:`source` asks one front end by name; :func:`guess` picks the
front end from the spec's type, as :func:`corral.compile` does. The builds themselves are
:func:`from_lark`, :func:`from_regex` and :func:`from_json_schema` (also reachable as
``Grammar.from_lark`` etc.). This module imports Lark and the JSON Schema translator only
when a grammar is built.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ArgumentTypeError, InvalidArgumentError, refusing_raw_errors
from .ir import Grammar, Rule, Terminal

__all__ = [
    "FRONT_ENDS",
    "FrontEnd",
    "Source",
    "from_ebnf",
    "from_gbnf",
    "from_json_schema",
    "from_lark",
    "from_regex",
    "from_structural_tag",
    "guess",
    "read",
    "source",
]


# -- the builds -------------------------------------------------------------------------
def from_lark(
    text: str,
    start: str = "start",
    *,
    import_paths: Sequence[str] = (),
    strict_lexemes: bool = False,
    source: str | Sequence[str] | None = None,
    entities: Mapping[str, Any] | None = None,
    postlex: Any = None,
    max_indent_width: int | None = None,
) -> Grammar:
    """Read a grammar in Lark's grammar language.

    Everything Lark's loader accepts works: rules, terminals, string and regex literals
    with flags, ``?``/``*``/``+``/``[]``/``~`` ranges, templates, ``%import`` (e.g.
    ``common.*``), ``%ignore``, ``%override``/``%extend``. The grammar may be ambiguous or
    left-recursive. ``%declare`` is refused (a declared terminal has no pattern to
    generate), except for terminals named ``SPAN`` or ``SPAN_...``: these match any
    non-empty substring of ``source`` (a text or a list of texts; see
    :mod:`corral.grammar.spans`), e.g. ``start: "Name: " SPAN`` with ``%declare SPAN``,
    and for terminals ``entities`` names: these match exactly the names of that
    :class:`~corral.grammar.entities.EntitySet` (``entities={"CITY": cities}`` with
    ``%declare CITY``).

    ``postlex``: an indentation post-lexer, as Lark's ``Indenter`` (e.g.
    ``lark.indenter.PythonIndenter()`` with Lark's ``python.lark``, whose
    ``%declare _INDENT _DEDENT`` it defines) or a
    :class:`~corral.grammar.indentation.Indentation`; corral compiles it into the rules
    (:mod:`corral.grammar.indentation`): the language is the texts whose tokens, passed
    through the post-lexer, the rules derive. Lines may be indented up to
    ``max_indent_width`` columns (default 64; the grammar grows with its square).

    A terminal's lexemes are the matches Lark's lexer finds (Python's ``re.match``:
    alternatives in order, lazy quantifiers shortest first), except where Python's
    search comes back to an earlier match after a longer attempt fails: corral does
    not backtrack inside a lexeme, so it rejects such text. With
    ``strict_lexemes=True`` a grammar with a terminal where that can happen is refused
    (``UnsupportedFeatureError`` naming the terminals, their lines and an example; see
    :func:`corral.grammar.lexeme_backtracking.backtracking_lexemes`).

    Special (control) tokens are named as in llguidance: ``<|im_end|>`` (by text) or
    ``<[128009]>`` (by id), outside strings and regexes. Such a symbol matches only that
    token, never its spelling in ordinary tokens; special tokens the grammar does not
    name are never allowed.

    Raises:
        GrammarError: syntax errors and undefined symbols, with line, column and a caret.
        UnsupportedFeatureError: a construct corral cannot enforce (e.g. backreferences,
            a lookbehind at the start of a terminal); with ``strict_lexemes``, a
            terminal whose lexemes can differ from Lark's.
        EmptyLanguageError: the grammar derives no string.
        TypeError: ``text`` is not a ``str``.
    """
    with refusing_raw_errors("the Lark grammar"):
        return _from_lark(
            text, start, import_paths, strict_lexemes, source, entities, postlex, max_indent_width
        )


def _from_lark(
    text: str,
    start: str,
    import_paths: Sequence[str],
    strict_lexemes: bool,
    source: str | Sequence[str] | None,
    entities: Mapping[str, Any] | None,
    postlex: Any = None,
    max_indent_width: int | None = None,
) -> Grammar:
    from .lark_frontend import grammar_from_lark

    texts = None
    if source is not None:
        from .spans import source_texts

        texts = source_texts(source)
    sets = None
    if entities is not None:
        from .entities import entity_sets

        sets = entity_sets(entities)
    indentation = None
    if postlex is not None:
        from .indentation import Indentation

        indentation = Indentation.of(postlex, max_indent_width)
    elif max_indent_width is not None:
        raise InvalidArgumentError("max_indent_width is given without a postlex")
    return grammar_from_lark(
        text,
        start,
        import_paths=import_paths,
        strict_lexemes=strict_lexemes,
        span_source=texts,
        entities=sets,
        indentation=indentation,
    )


def from_regex(pattern: str, flags: int = 0) -> Grammar:
    """A grammar whose language is ``{s : re.fullmatch(pattern, s, flags)}``.

    Python ``re`` syntax. Lookaround over one character, ``\\b``, anchors and flags are
    enforced exactly; backreferences, conditional and atomic groups, possessive
    quantifiers and longer lookaround raise ``UnsupportedFeatureError``. Non-multiline
    ``$`` is read as the end of the text (Python also lets it match before a final
    newline; corral does not, so it never accepts more than ``re`` does).
    """
    from .regex import python_regex_dfa

    with refusing_raw_errors("the regular expression"):
        dfa = python_regex_dfa(pattern, flags, where=f"regex {pattern!r}")
    term = Terminal("REGEX", dfa, source=f"/{pattern}/")
    return Grammar({"REGEX": term}, [Rule("start", ("REGEX",))], "start", (), description=pattern)


def from_gbnf(text: str, root: str = "root") -> Grammar:
    """Read a grammar in GBNF, llama.cpp's grammar format, from the rule ``root``.

    llama.cpp's syntax (``::=`` rules, literals, ``[...]`` classes, ``.``, groups, ``*``
    ``+`` ``?`` ``{m,n}``, comments, special tokens ``<[id]>`` / ``<text>``) with its
    meaning: a context-free grammar over characters, no lexer. The grammar keeps exactly
    that language; runs of it that are regular become single terminals only where that
    changes nothing (see :mod:`corral.grammar.gbnf.build`). Left recursion is accepted.
    Stricter than llama.cpp: a rule defined twice, a reversed range and a repetition
    count above 10,000 are errors; the token negation ``!<...>`` is refused.

    Raises:
        GrammarError: syntax errors, undefined rules, no rule ``root``: with line, column
            and a caret.
        UnsupportedFeatureError: ``!<...>``.
        EmptyLanguageError: the grammar derives no string.
        TypeError: ``text`` is not a ``str``.
    """
    from .gbnf import from_gbnf as build

    with refusing_raw_errors("the GBNF grammar"):
        return build(text, root)


def from_ebnf(text: str, root: str = "root") -> Grammar:
    """Read a grammar in XGrammar's EBNF (``xgrammar.Grammar.from_ebnf``), from the rule
    ``root``: GBNF's syntax and meaning (see :func:`from_gbnf`), except that newlines never
    end a rule (a rule starts at a name followed by ``::=``), names may hold ``_`` and
    ``.``, character classes may escape regex punctuation, and ``Regex("...")`` is an
    ECMA-262 pattern matched in full.

    Raises:
        GrammarError: as :func:`from_gbnf`.
        UnsupportedFeatureError: lookahead assertions ``(= ...)`` (which restrict what may
            follow a rule) and XGrammar's ``TagDispatch``, ``Token``, ``ExcludeToken``,
            ``TokenTagDispatch`` (write those as structural tags).
        EmptyLanguageError: the grammar derives no string.
    """
    from .gbnf import from_ebnf as build

    with refusing_raw_errors("the EBNF grammar"):
        return build(text, root)


def from_json_schema(schema: Any, **options: Any) -> Grammar:
    """The grammar of the JSON texts valid for a JSON Schema.

    ``schema``: a dict or bool, JSON text, or a pydantic v2 model class. Options (see
    :class:`corral.grammar.json_schema.Options`): ``whitespace``, ``max_whitespace``,
    ``additional_properties``, ``final_check``, budgets. Use :func:`corral.explain` to see
    how each keyword is enforced.

    Raises:
        SchemaError (a ``GrammarError``): malformed JSON or an invalid schema, with the
            line/column or JSON pointer.
        UnsupportedFeatureError: a keyword corral cannot enforce, with its JSON pointer.
        EmptyLanguageError: no value satisfies the schema.
        CompileBudgetError: the grammar would exceed a budget.
    """
    from .json_schema import grammar_from_json_schema

    with refusing_raw_errors("the JSON Schema"):
        grammar: Grammar = grammar_from_json_schema(schema, **options)
    return grammar


# -- sources ----------------------------------------------------------------------------
class Source:
    """A spec read by a front end, not built yet.

    Attributes:
        front_end: the name of the front end (a key of :data:`FRONT_ENDS`).
        key: what identifies the grammar: ``(front_end, text, options...)``, strings only;
            equal keys build equal grammars. ``None`` when the spec is not worth caching
            (it is a :class:`Grammar` already) or cannot be identified by its text (a
            schema holding values other than JSON data, e.g. tuples or non-string keys).
            Given, or computed on first use by ``key_of`` (a schema given as a dict is
            written out as JSON text for its key: a cache that keeps nothing never asks).
        build: builds the grammar (raising the front end's errors).
    """

    __slots__ = ("_key", "_key_of", "build", "front_end")

    def __init__(
        self,
        front_end: str,
        key: Hashable | None,
        build: Callable[[], Grammar],
        *,
        key_of: Callable[[], Hashable | None] | None = None,
    ) -> None:
        self.front_end = front_end
        self.build = build
        self._key = key
        self._key_of = key_of

    @property
    def key(self) -> Hashable | None:
        if self._key_of is not None:
            self._key, self._key_of = self._key_of(), None
        return self._key

    def __repr__(self) -> str:
        return f"Source({self.front_end!r})"


@dataclass(frozen=True)
class FrontEnd:
    """One kind of spec.

    Attributes:
        name: ``"json-schema"``, ``"grammar"``, ``"lark"`` or ``"regex"``.
        recognises: whether :func:`guess` reads a spec with this front end (``None``: never
            guessed, only asked for by name).
        read: ``read(spec, options) -> Source``; raises ``TypeError`` for a spec of the
            wrong type.
        options: the names of the options it takes (``None``: any, checked when the
            grammar is built: the JSON Schema options).
    """

    name: str
    recognises: Callable[[Any], bool] | None
    read: Callable[[Any, Mapping[str, Any]], Source]
    options: frozenset[str] | None


def _is_schema(spec: Any) -> bool:
    if isinstance(spec, (dict, bool)):
        return True
    if isinstance(spec, type) and hasattr(spec, "model_json_schema"):
        return True
    return isinstance(spec, str) and spec.lstrip().startswith("{")


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


def _is_json_data(value: Any) -> bool:
    """Whether ``value`` holds only dicts with ``str`` keys, lists and JSON scalars (of these
    exact types), so that its JSON text tells it apart from every other such value."""
    if type(value) in _JSON_SCALARS:
        return True
    if not isinstance(value, (dict, list)):
        return False
    stack: list[Any] = [value]  # containers only
    scalars = _JSON_SCALARS
    while stack:
        v = stack.pop()
        pairs = v.items() if isinstance(v, dict) else (("", x) for x in v)
        for k, x in pairs:
            if type(k) is not str:
                return False
            t = type(x)
            if t not in scalars:
                if t is dict or t is list or isinstance(x, (dict, list)):
                    stack.append(x)
                else:
                    return False
    return True


def _read_schema(spec: Any, options: Mapping[str, Any]) -> Source:
    from .json_schema.load import as_schema

    schema = as_schema(spec)
    opts = dict(options)
    key_opts = dict(opts)
    if opts.get("source") is not None:  # identified by its digest, not its (long) text
        from .spans import source_texts, sources_digest

        opts["source"] = source_texts(opts["source"])
        key_opts["source"] = sources_digest(opts["source"])
    if opts.get("entities") is not None:  # identified by digests, not the names
        from .entities import entities_key, entity_sets

        opts["entities"] = entity_sets(opts["entities"])
        key_opts["entities"] = entities_key(opts["entities"])

    def key_of() -> Hashable | None:
        # the schema written out, so that a dict, its JSON text and the pydantic class it
        # comes from are one source (key order is kept: properties come in the order given)
        try:
            text = json.dumps(schema, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):  # not JSON data: the build reports it
            return None
        if not isinstance(spec, (str, bytes)) and not _is_json_data(schema):
            return None  # (parsed text is JSON data)
        return ("json-schema", text, json.dumps(key_opts, sort_keys=True, default=repr))

    return Source("json-schema", None, lambda: from_json_schema(schema, **opts), key_of=key_of)


def _read_grammar(spec: Any, options: Mapping[str, Any]) -> Source:
    if not isinstance(spec, Grammar):
        raise ArgumentTypeError(f"expected a corral.Grammar, not {type(spec).__name__}")
    return Source("grammar", None, lambda: spec)


def _text_and_start(what: str, spec: Any, options: Mapping[str, Any], default: str) -> str:
    """Check that a grammar ``spec`` is text, and return its start rule (the option
    ``start``, else ``default``)."""
    if not isinstance(spec, str):
        raise ArgumentTypeError(f"{what} must be str, not {type(spec).__name__}")
    start = options.get("start", default)
    if not isinstance(start, str):
        raise ArgumentTypeError(f"start must be a rule name (str), not {type(start).__name__}")
    return start


def _read_lark(spec: Any, options: Mapping[str, Any]) -> Source:
    start = _text_and_start("grammar text", spec, options, "start")
    texts = options.get("source")
    sets = options.get("entities")
    if texts is None and sets is None:
        return Source("lark", ("lark", spec, start), lambda: from_lark(spec, start))
    from .entities import entities_key, entity_sets
    from .spans import source_texts, sources_digest

    read = source_texts(texts)
    sets = entity_sets(sets) if sets is not None else None
    key = (
        "lark",
        spec,
        start,
        sources_digest(read) if read is not None else "",
        entities_key(sets) if sets is not None else "",
    )
    return Source("lark", key, lambda: from_lark(spec, start, source=read, entities=sets))


def _read_regex(spec: Any, options: Mapping[str, Any]) -> Source:
    if not isinstance(spec, str):
        raise ArgumentTypeError(f"regex must be a string, not {type(spec).__name__}")
    flags = int(options.get("flags", 0))
    return Source("regex", ("regex", spec, str(flags)), lambda: from_regex(spec, flags))


def _rules_reader(name: str, build: Callable[[str, str], Grammar]) -> Callable[..., Source]:
    """The reader of a format of ``::=`` rules started from ``root`` (GBNF, EBNF)."""

    def read(spec: Any, options: Mapping[str, Any]) -> Source:
        root = _text_and_start(f"{name.upper()} text", spec, options, "root")
        return Source(name, (name, spec, root), lambda: build(spec, root))

    return read


def _is_structural_tag(spec: Any) -> bool:
    """Whether ``spec`` is a structural tag (``structural.read.is_structural_tag``).

    Where the answer is no, it is found without importing the structural-tag front end
    (9 ms of a process's first compile): a dict is one only with ``"type":
    "structural_tag"``, and a format object exists only once its module is imported."""
    if isinstance(spec, dict):
        if spec.get("type") != "structural_tag":
            return False
    elif f"{__package__}.structural.nodes" not in sys.modules:
        return False
    from .structural.read import is_structural_tag

    return is_structural_tag(spec)


def _read_structural_tag(spec: Any, options: Mapping[str, Any]) -> Source:
    from .structural.read import read_structural_tag

    root = read_structural_tag(spec)
    where = "/format" if isinstance(spec, dict) and spec.get("type") == "structural_tag" else ""
    opts = dict(options)
    key = None
    try:
        text = json.dumps(root.to_json(), ensure_ascii=False)
        key = ("structural-tag", where, text, json.dumps(opts, sort_keys=True, default=repr))
    except (TypeError, ValueError, RecursionError):  # not JSON data (a pydantic class): no key
        pass
    return Source("structural-tag", key, lambda: from_structural_tag(root, where, **opts))


def from_structural_tag(spec: Any, root: str = "", **options: Any) -> Grammar:
    """The grammar of a structural tag: a :class:`corral.grammar.structural.Format` (or
    ``StructuralTag``), or XGrammar's JSON form ``{"type": "structural_tag", "format":
    {...}}`` as a dict or text (see ``docs/structural_tags.md``). ``options`` are the JSON
    Schema options of its ``json_schema`` formats; ``root`` the JSON pointer of ``spec``.

    Raises:
        StructuralTagError (a ``GrammarError``): a malformed or ambiguous spec, with the
            JSON pointer of the node.
        UnsupportedFeatureError, EmptyLanguageError, CompileBudgetError: as the front ends
            of its sub-specs raise them, with their pointers below the structural tag's.
    """
    from .structural.build import build_grammar
    from .structural.read import read_structural_tag

    with refusing_raw_errors("the structural tag"):
        node = read_structural_tag(spec)
        if not root and isinstance(spec, dict) and spec.get("type") == "structural_tag":
            root = "/format"
        return build_grammar(node, root, options)


FRONT_ENDS: tuple[FrontEnd, ...] = (
    FrontEnd("structural-tag", _is_structural_tag, _read_structural_tag, options=None),
    FrontEnd("json-schema", _is_schema, _read_schema, options=None),
    FrontEnd("grammar", lambda spec: isinstance(spec, Grammar), _read_grammar, frozenset()),
    FrontEnd(
        "lark",
        lambda spec: isinstance(spec, str),
        _read_lark,
        frozenset({"start", "source", "entities"}),
    ),
    FrontEnd("regex", None, _read_regex, options=frozenset({"flags"})),
    FrontEnd("gbnf", None, _rules_reader("gbnf", from_gbnf), options=frozenset({"start"})),
    FrontEnd("ebnf", None, _rules_reader("ebnf", from_ebnf), options=frozenset({"start"})),
)
"""Every front end, in the order :func:`guess` tries them."""

_BY_NAME = {f.name: f for f in FRONT_ENDS}


def source(front_end: str, spec: Any, **options: Any) -> Source:
    """Read ``spec`` with the front end named ``front_end`` (no guessing).

    ``options`` are the front end's own: ``start`` for ``"lark"`` and ``"gbnf"``,
    ``flags`` for ``"regex"``, the JSON Schema options for ``"json-schema"``, none for
    ``"grammar"``.

    Raises:
        ValueError: no front end has that name.
        TypeError: a spec of the wrong type, or options the front end does not take.
    """
    return _named(front_end, spec, options)


def _named(front_end: str, spec: Any, options: Mapping[str, Any]) -> Source:
    front = _BY_NAME.get(front_end)
    if front is None:
        raise InvalidArgumentError(f"unknown front end {front_end!r}; known: {sorted(_BY_NAME)}")
    unknown = sorted(set(options) - front.options) if front.options is not None else []
    if unknown:
        raise ArgumentTypeError(
            f"options {unknown} do not apply to {front_end}"
            + (f" (it takes {sorted(front.options)})" if front.options else "")
        )
    return front.read(spec, options)


def read(
    spec: Any,
    *,
    format: str | None = None,
    start: str | None = None,
    options: Mapping[str, Any] | None = None,
    source: str | Sequence[str] | None = None,
    entities: Mapping[str, Any] | None = None,
) -> Source:
    """Read ``spec`` with the front end ``format`` names, or the one :func:`guess` picks
    when ``format`` is ``None``. ``start``: the start rule (``None``: the front end's
    default, ``start`` for Lark text and ``root`` for GBNF).

    Raises:
        ValueError: no front end is named ``format``.
        TypeError: a spec of the wrong type, or options the front end does not take.
    """
    if format is None:
        return guess(
            spec, start=start or "start", options=options, source=source, entities=entities
        )
    opts = dict(options or {})
    if start is not None:
        opts["start"] = start
    if source is not None:
        opts["source"] = source
    if entities is not None:
        opts["entities"] = entities
    return _named(format, spec, opts)


def guess(
    spec: Any,
    *,
    start: str = "start",
    options: Mapping[str, Any] | None = None,
    source: str | Sequence[str] | None = None,
    entities: Mapping[str, Any] | None = None,
) -> Source:
    """Read ``spec`` with the first front end of :data:`FRONT_ENDS` that recognises it.

    ``start`` applies to the front ends that take a start rule (Lark text) and is ignored
    by the others; ``options`` apply to the front end that takes any (JSON Schemas);
    ``source`` (the text of span constraints) and ``entities`` (entity sets by name) to
    JSON Schemas and Lark text.

    Raises:
        TypeError: options given for a spec that is not a JSON Schema, or a spec no front
            end recognises.
    """
    options = options or {}
    front = next((f for f in FRONT_ENDS if f.recognises is not None and f.recognises(spec)), None)
    if options and (front is None or front.options is not None):
        raise ArgumentTypeError(
            f"options {sorted(options)} apply to JSON Schemas only, not to {type(spec).__name__}"
        )
    if front is None:
        raise ArgumentTypeError(
            f"cannot compile a {type(spec).__name__}: pass Lark grammar text, a JSON Schema "
            "(dict, JSON text, pydantic model class) or a corral.Grammar"
        )
    if front.options is not None and "start" in front.options:
        options = {"start": start}
    if source is not None:
        if front.options is not None and "source" not in front.options:
            raise ArgumentTypeError(
                f"source= applies to JSON Schemas and Lark grammars, not to a {front.name}"
            )
        options = {**options, "source": source}
    if entities is not None:
        if front.options is not None and "entities" not in front.options:
            raise ArgumentTypeError(
                f"entities= applies to JSON Schemas and Lark grammars, not to a {front.name}"
            )
        options = {**options, "entities": entities}
    return front.read(spec, options)
