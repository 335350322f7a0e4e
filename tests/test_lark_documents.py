"""Lark's grammar of its own grammar language (``lark.lark``, shipped inside Lark) compiled by
corral, with real ``.lark`` files as documents.

Lark's Earley parser with ``lark.lark`` is the reference: every document it accepts must be
accepted by corral, byte-wise (``consume_bytes``) and token by token on the Llama-3
tokenizer, each token allowed by the mask at its step. The documents are the grammars
shipped in the installed Lark package, this project's test grammars, and short texts that
corral used to reject (lines delta debugging kept from real ``.lark`` files, and texts
written for one terminal). The terminals of ``lark.lark`` they exercise:

* ``REGEXP: /\\/(?!\\/)(\\\\\\/|\\\\\\\\|[^\\/])*?\\/[imslux]*/``: a lazy loop whose
  alternatives overlap. Python's ``re.match`` tries ``\\/`` as an escape before ``[^\\/]``
  takes the backslash alone, so ``/a\\/b/`` is one regex; reading the lazy quantifier as
  "the shortest match" ended it at ``/a\\/``.
* ``STRING: _STRING "i"?``: the flag after a lazy string body (``"a"i.."z"``), which the
  shortest-match reading cut off.
* ``OP: /[+*]|[?](?![a-z])/``: a lookahead at the end of a terminal, decided by the byte
  after the lexeme (such a terminal used to be refused, so the grammar did not compile).

Lark's lexer can also come back to an earlier match after a longer attempt fails, which
corral's does not do; ``backtracking_lexemes`` finds the terminals where that can matter,
and ``strict_lexemes=True`` refuses such grammars (tested at the end).
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import lark
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from support.tokenizers import load_tokenizer, load_vocab
from support.words import WordGenerator, assert_replays, guided_walk, lark_accepts, mask_of

import corral
from corral import Grammar
from corral.errors import UnsupportedFeatureError
from corral.grammar.lexeme_backtracking import backtracking_lexemes
from corral.grammar.regex import ByteDFA
from corral.grammar.regex.leftmost import leftmost_first_dfa

LARK_GRAMMARS = Path(lark.__file__).parent / "grammars"
LARK_LARK = (LARK_GRAMMARS / "lark.lark").read_text()
DATA = Path(__file__).parent / "data" / "grammars"

FILES = {f"lark/{p.name}": p for p in sorted(LARK_GRAMMARS.glob("*.lark"))} | {
    f"data/{p.name}": p for p in sorted(DATA.glob("*.lark"))
}
# Short texts Lark accepts that corral once rejected: lines that delta debugging kept from
# Lark's own grammars and the grammars in Lark's repository (the regexes), and texts
# written for STRING's flag and OP's lookahead.
MINIMISED = {
    "escaped slash ends a regex": r"T:/\//",
    "escaped slashes (common.lark)": r"CPP_COMMENT: /\/\/[^\n]*/" + "\n",
    "escaped slash in a class (lisp.lark)": (
        r"SYMBOL: /[a-zA-Z_+\-*\/<>=!?][a-zA-Z0-9_+\-*\/<>=!?]*/" + "\n"
    ),
    "escaped backslash and slash (csv.lark)": r"NON_SEPARATOR_STRING: /[a-zA-z.;\\\/]+/" + "\n",
    "lookahead inside a regex (verilog.lark)": (
        r"MULTILINE_COMMENT: /\/\*(\*(?!\/)|[^*])*\*\//" + "\n"
    ),
    "lark.lark's own REGEXP": r"REGEXP: /\/(?!\/)(\\\/|\\\\|[^\/])*?\/[imslux]*/" + "\n",
    "escaped slash, flag": r"A: /[\/]/i" + "\n",
    "regexes of a backslash and a slash": r"a: /\\/ | /\//" + "\n",
    "case-insensitive strings in a range": 'start: "a"i.."z"i\n',
    "case-insensitive string as a template argument": 't{a}: a\nx: t{"x"i}\n',
    "operators and names": "a: b?c (d)?e f* g+\n",
}
LONG = 5000  # bytes: documents longer than this run token by token only with --run-slow


def _documents() -> list[Any]:
    params = []
    for name, path in FILES.items():
        text = path.read_text()
        marks = [pytest.mark.slow] if len(text) > LONG else []
        params.append(pytest.param(text, id=name, marks=marks))
    params += [pytest.param(text, id=name) for name, text in MINIMISED.items()]
    return params


DOCUMENTS = _documents()


@pytest.fixture(scope="module")
def compiled() -> corral.CompiledGrammar:
    return corral.compile(LARK_LARK, load_vocab("llama3"))


def reference_mask(m: corral.Matcher) -> np.ndarray:
    """The tokens ``try_consume`` accepts, one by one over the whole vocabulary (EOS
    included: it is accepted exactly when the text so far is complete)."""
    out = np.zeros(m.vocab_size, bool)
    for t in range(m.vocab_size):
        if m.try_consume(t):
            out[t] = True
            m.rollback(1)
    return out


def accepts_bytes(c: corral.CompiledGrammar, text: str) -> bool:
    m = c.matcher()
    return m.consume_bytes(text.encode()) and m.is_accepting()


# -- every document Lark accepts, corral accepts ---------------------------------------------


@pytest.mark.parametrize("text", [p.values[0] for p in DOCUMENTS], ids=[p.id for p in DOCUMENTS])
def test_document_accepted_bytewise(compiled: corral.CompiledGrammar, text: str) -> None:
    assert lark_accepts(LARK_LARK, text)
    assert accepts_bytes(compiled, text)


@pytest.mark.parametrize("text", DOCUMENTS)
def test_document_accepted_token_by_token(compiled: corral.CompiledGrammar, text: str) -> None:
    """The tokenizer's own encoding, each token in the mask before it is consumed; at the
    end, EOS is allowed."""
    assert lark_accepts(LARK_LARK, text)
    ids = load_tokenizer("llama3").encode(text, add_special_tokens=False)
    assert compiled.vocab.decode(ids) == text.encode()
    assert_replays(compiled, ids)


@pytest.mark.parametrize(
    "name", [n for n, p in FILES.items() if len(p.read_text()) <= LONG] + ["minimised"]
)
def test_line_prefixes_agree_with_lark(compiled: corral.CompiledGrammar, name: str) -> None:
    """Every prefix of a document that ends a line: corral accepts it exactly when Lark
    does (so corral never accepts a text outside Lark's language on the way)."""
    texts = list(MINIMISED.values()) if name == "minimised" else [FILES[name].read_text()]
    for text in texts:
        m = compiled.matcher()
        done = 0
        for cut in [i + 1 for i, ch in enumerate(text) if ch == "\n"] + [len(text)]:
            assert m.consume_bytes(text[done:cut].encode())
            done = cut
            prefix = text[:cut]
            assert m.is_accepting() == lark_accepts(LARK_LARK, prefix), prefix[-80:]


@pytest.mark.parametrize(
    "prefix",
    [
        "a: b?",  # OP "?" may end only before a byte other than a-z (or start RULE "?x")
        "A: /a\\",  # inside REGEXP after a backslash: "\/" goes on, "\" alone may too
        'a: "x"',  # a STRING may end, or take the flag "i"
        "a: b\n  ",  # _NL, _VBAR and an ignored COMMENT all pending
    ],
)
def test_mask_is_exact(compiled: corral.CompiledGrammar, prefix: str) -> None:
    """The mask equals the tokens ``try_consume`` accepts, over the whole vocabulary."""
    m = compiled.matcher()
    assert m.consume_bytes(prefix.encode())
    assert (mask_of(m) == reference_mask(m)).all()


def test_random_walks_are_sound(compiled: corral.CompiledGrammar) -> None:
    """Walks that follow random words of lark.lark (cut into Llama-3 tokens by the
    tokenizer) and often step aside to a random allowed token: never a dead end, and every
    complete output is accepted by Lark."""
    tok = load_tokenizer("llama3")
    v = compiled.vocab
    gen = WordGenerator(Grammar.from_lark(LARK_LARK), seed=5)
    rng = np.random.default_rng(11)
    eos = v.eos_token_ids[0]
    lengths = np.array([len(v.token_bytes(i)) for i in range(v.size)], dtype=np.float64)
    finished = deviated = 0
    for _walk in range(8):
        word = gen.word().decode("utf-8")
        assert lark_accepts(LARK_LARK, word), word
        target = tok.encode(word, add_special_tokens=False)
        m = compiled.matcher()
        consumed, left = guided_walk(
            m, target, rng, lengths, eos, follow=0.85, extra_steps=12, stop_from=len(target)
        )
        deviated += left
        if m.is_accepting():
            finished += 1
            out = v.decode(consumed).decode("utf-8")
            assert lark_accepts(LARK_LARK, out), out
    assert finished >= 3 and deviated >= 3


# -- the terminal semantics behind it, on small grammars ---------------------------------------

LOOKAHEAD = r"""
start: item+
item: NAME OP*
NAME: /[a-z]+/
OP: /[+*]|[?](?![a-z])/
%ignore " "
"""
FIRST_ALTERNATIVE = 'start: A "b"\nA: /a|ab/\n'
LAZY_THEN_FLAG = 'start: S+\nS: /".*?"i?/\n%ignore " "\n'


@pytest.mark.parametrize(
    ("grammar", "texts"),
    [
        (LOOKAHEAD, ["a?+b", "a?b", "a? b", "a??", "a?", "ab?", "a?*?c", "a?*? c"]),
        (FIRST_ALTERNATIVE, ["ab", "abb", "a", "aab"]),
        (LAZY_THEN_FLAG, ['"x"i', '"x" "y"i', '"x"i"y"', '"x""y"', '"x"ii', '"x" i']),
    ],
    ids=["lookahead at the end", "first alternative", "lazy body then a flag"],
)
def test_terminals_match_as_in_lark(grammar: str, texts: list[str]) -> None:
    """A lexeme is the match Python's ``re.match`` returns: a lookahead at the end of a
    terminal is decided by the next byte, alternatives are tried in order (``/a|ab/``
    never reads ``ab``), a lazy body ends at its first match and what follows it is still
    read."""
    c = corral.compile(grammar, load_vocab("llama3"))
    verdicts = {t: lark_accepts(grammar, t) for t in texts}
    assert any(verdicts.values()) and not all(verdicts.values())
    for text, ok in verdicts.items():
        assert accepts_bytes(c, text) == ok, text


def test_lookahead_at_the_end_in_the_mask() -> None:
    """After ``a?``, no token may start with a letter (``?`` would end before it), and the
    mask is exact."""
    v = load_vocab("llama3")
    m = corral.compile(LOOKAHEAD, v).matcher()
    assert m.consume_bytes(b"a?")
    mask = mask_of(m)
    assert (mask == reference_mask(m)).all()
    starts = np.array([(v.token_bytes(t) or b"\0")[0] for t in range(v.size)])
    assert not mask[(starts >= ord("a")) & (starts <= ord("z"))].any()
    for text in ["?", "+", " b", "*"]:
        ids = [t for t in range(v.size) if v.token_bytes(t) == text.encode()]
        assert mask[ids].all(), text


@pytest.mark.parametrize(
    ("pattern", "what"),
    [
        ("x(?!é)", "same first byte"),  # é and ê start with the same byte
        ("x(?=y)", "needs a next character"),
        ("(?<!y)x", "start of a terminal"),
    ],
)
def test_assertions_that_cannot_be_enforced_are_refused(pattern: str, what: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match=what) as e:
        Grammar.from_lark(f"start: X\nX: /{pattern}/\n")
    assert "terminal X" in str(e.value) and "line 2" in str(e.value)


# -- where Lark backtracks inside a lexeme and corral does not ---------------------------------


def test_backtracking_lexemes_are_found() -> None:
    """lark.lark's REGEXP: ``/a\\/b`` with no later ``/`` is, for Python, the regex
    ``/a\\/`` followed by the rule name ``b``; corral's lexer reads ``\\/`` as an escape and
    fails. The check names REGEXP, and strict mode refuses the grammar at its line."""
    text = "A: /a\\/b\n"
    assert lark_accepts(LARK_LARK, text)
    g = Grammar.from_lark(LARK_LARK)
    c = corral.compile(g, load_vocab("llama3"))
    assert not accepts_bytes(c, text)
    found = backtracking_lexemes(g)
    assert [b.terminal for b in found] == ["REGEXP"]
    line = next(i for i, s in enumerate(LARK_LARK.splitlines(), 1) if s.startswith("REGEXP:"))
    with pytest.raises(UnsupportedFeatureError, match=rf"REGEXP \(line {line}, column 1\)"):
        Grammar.from_lark(LARK_LARK, strict_lexemes=True)


def test_backtracking_lexemes_in_an_imported_terminal() -> None:
    """lisp.lark imports common.SIGNED_NUMBER as NUMBER: ``0E`` reads on into an exponent
    where Python comes back to ``0`` and lexes ``E`` as a SYMBOL."""
    src = (DATA / "lisp.lark").read_text()
    assert lark_accepts(src, "(0E)")
    assert not accepts_bytes(corral.compile(src, load_vocab("llama3")), "(0E)")
    (b,) = backtracking_lexemes(Grammar.from_lark(src))
    assert b.terminal == "NUMBER"
    line = next(i for i, s in enumerate(src.splitlines(), 1) if re.search(r"%import.*NUMBER", s))
    with pytest.raises(UnsupportedFeatureError, match=rf"NUMBER \(line {line},"):
        Grammar.from_lark(src, strict_lexemes=True)


@pytest.mark.parametrize("name", ["json", "arithmetic"])
def test_no_backtracking_lexemes(name: str) -> None:
    """Where no terminal can need it, the strict mode compiles the grammar."""
    src = (DATA / f"{name}.lark").read_text()
    assert backtracking_lexemes(Grammar.from_lark(src)) == []
    Grammar.from_lark(src, strict_lexemes=True)


def test_walks_never_leave_lark_on_the_lookahead_grammar() -> None:
    """Random token walks on the lookahead grammar: every complete output is Lark's."""
    v = load_vocab("llama3")
    c = corral.compile(LOOKAHEAD, v)
    rng = random.Random(3)
    short = [t for t in range(v.size) if 1 <= len(v.token_bytes(t)) <= 2]
    for _ in range(30):
        m = c.matcher()
        out = b""
        for _step in range(12):
            mask = mask_of(m)
            cands = [t for t in short if mask[t]]
            assert cands
            t = rng.choice(cands)
            m.consume(t)
            out += v.token_bytes(t)
            if m.is_accepting():
                assert lark_accepts(LOOKAHEAD, out.decode()), out


# -- the lexeme automaton against Python's re.match ---------------------------------------------

_ATOMS = ["a", "b", "c", "[ab]", "[^a]", ".", "é", r"\/", r"\\", r"[^\/]", "(?:|a)"]
_ATOMS += [r"(?<!\\)/", r"(?<=a)b", r"(?!b)a", r"\bx", r"x\B"]  # assertions inside
# lookaheads of several characters (python.lark's STRING: ``"(?!"")``)
_ATOMS += [r"(?!ab)", r"(?!a[bc]|/)", r"(?=ab|b)", r"(?!a{2})", r'"(?!"")']


@st.composite
def _regexes(draw: st.DrawFn, depth: int = 3) -> str:
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from(_ATOMS))
    kind = draw(st.sampled_from(["cat", "cat", "alt", "rep", "count"]))
    a = draw(_regexes(depth - 1))
    if kind == "cat":
        return a + draw(_regexes(depth - 1))
    if kind == "alt":
        return f"(?:{a}|{draw(_regexes(depth - 1))})"
    lazy = "?" if draw(st.booleans()) else ""
    if kind == "rep":
        return f"(?:{a}){draw(st.sampled_from(['*', '+', '?']))}{lazy}"
    lo = draw(st.integers(0, 2))
    return f"(?:{a}){{{lo},{lo + draw(st.integers(0, 2))}}}{lazy}"


def _lexeme_end(d: ByteDFA, blocked: np.ndarray | None, data: bytes) -> int | None:
    """Where corral's lexer ends a lexeme that starts at ``data[0]``: at the first accepting
    state that cannot read the next byte (and may end before it), or at the end of the
    data; ``None`` where it dies first."""
    if d.n_states == 0:
        return None
    s = 0
    for i, b in enumerate(data):
        t = int(d.trans[s, b])
        if t < 0:
            ok = d.accept[s] and not (blocked is not None and blocked[s, b])
            return i if ok else None
        s = t
    return len(data) if d.accept[s] else None


@settings(max_examples=300, deadline=None)
@given(
    _regexes(),
    st.sampled_from(["", "", "(?!a)", "(?![ab])", "(?!/)", r"\b", "(?!ab)"]),
    st.lists(st.text(alphabet='abc/\\é x"', max_size=8), min_size=1, max_size=25),
)
def test_lexemes_are_python_matches(body: str, end: str, texts: list[str]) -> None:
    """Wherever corral's lexer ends a lexeme, it ends where ``re.match`` does; where it
    fails and Python matches (Python came back to an earlier match), the automaton reads
    from an accepting state into one where a lexeme can fail (not accepting, or not
    ending before some byte), which is what ``backtracking_lexemes`` looks for."""
    pattern = body + end
    rx = re.compile(pattern)
    try:
        d, blocked = leftmost_first_dfa(pattern)
    except UnsupportedFeatureError:
        assume(False)
        return
    fails = ~d.accept if blocked is None else ~d.accept | blocked.any(axis=1)
    reads_past_match = any(fails[q] for s in np.flatnonzero(d.accept) for q in d.trans[s] if q >= 0)
    for text in texts:
        m = rx.match(text)
        got = _lexeme_end(d, blocked, text.encode())
        want = len(text[: m.end()].encode()) if m else None
        if got is None:
            assert want is None or reads_past_match, (pattern, text)
        else:
            assert got == want, (pattern, text)


def test_terminal_automata_are_built_once_per_process() -> None:
    """A terminal's automaton is shared, read-only, by every later grammar that asks for
    the same pattern; a pattern that fails is not kept and fails again with the location
    of the call that asked."""
    pattern = r"[a-z]+[?](?![a-z])"
    d1, b1 = leftmost_first_dfa(pattern, where="terminal NAME")
    d2, b2 = leftmost_first_dfa(pattern, where="terminal OTHER")
    assert d1 is d2 and b1 is b2 and b1 is not None
    assert not d1.accept.flags.writeable and not b1.flags.writeable
    assert leftmost_first_dfa(pattern, re.DOTALL)[0] is not d1  # flags are part of the key
    bad = r"(a)\1"
    for where in ("terminal A", "terminal B"):
        with pytest.raises(UnsupportedFeatureError, match=where):
            leftmost_first_dfa(bad, where=where)
