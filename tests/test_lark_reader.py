"""corral's reader of Lark grammars (``corral/grammar/lark_reader.py``) against Lark's loader.

For every grammar, the reader either leaves it to Lark's loader (returns ``None``) or gives
what Lark's ``load_grammar(...).compile([start], set())`` gives: the same terminal
definitions (names, pattern types, pattern strings, flags, priorities, in the same order),
the same ignore list and declared terminals, and the same rules up to the names of the
helper rules Lark makes for ``x+``, ``x*``, ``x~n..m`` (compared by structure; the reader
names them as Lark does, which is checked too, but not required).

The grammars: every ``.lark`` file inside the installed Lark package and in this
repository, the grammar strings in the tests (including those written to fail), the
grammars of the PyPI archives cached by ``benchmarks/real_grammars.py`` (SynCode, Lark's
wheel, pddl, sympy), small grammars written here for each construct and each error Lark
reports, random grammars, and corpus grammars with random edits (mostly syntax errors).
"""

from __future__ import annotations

import ast
import hashlib
import io
import os
import random
import re
import subprocess
import tarfile
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import lark
import pytest
from lark.load_grammar import load_grammar

from corral.grammar import lark_reader
from corral.grammar.lark_reader import read_lark

ROOT = Path(__file__).parent.parent
LARK_DIR = Path(lark.__file__).parent
DISTS = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "corral-benchmarks" / "dists"
)

pytestmark = pytest.mark.skipif(
    not lark_reader._VERSION_OK, reason=f"the reader follows Lark 1.3 (this is {lark.__version__})"
)


# -- the comparison ---------------------------------------------------------------------


def lark_load(text: str, start: str) -> Any:
    """What ``grammar_from_lark`` takes from Lark's loader, or the exception it raises."""
    try:
        g, _files = load_grammar(text, "<grammar>", [], False)
        terms, rules, ignore = g.compile([start], set())
    except Exception as e:  # (any error: the reader must fall back)
        return e
    return terms, rules, ignore, {n for n, (tree, _p) in g.term_defs if tree is None}


def term_key(t: Any) -> tuple[Any, ...]:
    p = t.pattern
    return (t.name, type(p).__name__, p.value, p.flags, t.priority)


def canonical_rules(rules: list[Any]) -> Counter[tuple[str, tuple[str, ...]]]:
    """The rules as a multiset, each helper rule (a name starting with ``__``) named by its
    structure: labels refined round by round (a helper's label is a digest of its
    expansions over the previous labels) until the partition of helpers stops changing."""
    exps: dict[str, list[tuple[str, ...]]] = {}
    for r in rules:
        exps.setdefault(r.origin.name, []).append(
            tuple(("T:" if s.is_term else "N:") + s.name for s in r.expansion)
        )

    def is_helper(name: str) -> bool:
        return name.startswith("__")

    label = {n: ("H" if is_helper(n) else n) for n in exps}

    def lab(sym: str) -> str:
        name = sym[2:]
        return sym if sym.startswith("T:") else "N:" + label.get(name, name)

    classes = len(set(label.values()))
    for _ in range(len(exps) + 1):
        new = {}
        for n in exps:
            if not is_helper(n):
                new[n] = n
                continue
            body = sorted(repr(tuple(lab(s) for s in e)) for e in exps[n])
            new[n] = "H" + hashlib.sha256("|".join(body).encode()).hexdigest()[:16]
        label = new
        now = len(set(label.values()))
        if now == classes:
            break
        classes = now
    return Counter((label[n], tuple(lab(s) for s in e)) for n in exps for e in exps[n])


def check(text: str, start: str) -> str:
    """``fast`` (the reader's result equals Lark's), ``fallback`` (the reader left it to
    Lark), or fails the test."""
    ours = read_lark(text, start, [])
    theirs = lark_load(text, start)
    if ours is None:
        return "fallback"
    assert not isinstance(theirs, Exception), f"the reader accepts what Lark refuses: {theirs!r}"
    t_terms, t_rules, t_ignore, t_declared = theirs
    o_terms, o_rules, o_ignore, o_declared = ours
    assert [term_key(t) for t in o_terms] == [term_key(t) for t in t_terms]
    assert list(o_ignore) == list(t_ignore)
    assert o_declared == t_declared
    assert canonical_rules(o_rules) == canonical_rules(t_rules)
    exact = [(r.origin.name, [s.name for s in r.expansion]) for r in o_rules] == [
        (r.origin.name, [s.name for s in r.expansion]) for r in t_rules
    ]
    return "fast" if exact else "fast (helper rules named differently)"


def starts_of(text: str) -> list[str]:
    """``start``, and the first and last rule defined (other sets of unused rules)."""
    names = re.findall(r"^[ \t]*[!?]*(_?[a-z][_a-z0-9]*)[ \t]*(?:\.[-+]?\d+)?[ \t]*:", text, re.M)
    return list(dict.fromkeys(["start", *names[:1], *names[-1:]]))


# -- the corpus -------------------------------------------------------------------------


def _files() -> dict[str, str]:
    out = {f"lark/{p.relative_to(LARK_DIR)}": p.read_text() for p in LARK_DIR.rglob("*.lark")}
    try:
        listed = subprocess.run(
            ["git", "ls-files", "*.lark"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        listed = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.lark") if ".venv" not in p.parts]
    out |= {f"repo/{name}": (ROOT / name).read_text() for name in listed}
    return out


# archive name prefix → which of its files are grammars
ARCHIVES = {
    "syncode-0.4.16": r"syncode/.*\.lark$",
    "lark-1.3.1": r"\.lark$",
    "pddl-0.5.1": r"pddl/parser/grammar\.lark$",
    "sympy-1.14.0": r"sympy/parsing/latex/lark/.*\.lark$",
}


def _archives() -> tuple[dict[str, str], list[str]]:
    found: dict[str, str] = {}
    missing: list[str] = []
    for prefix, wanted in ARCHIVES.items():
        paths = sorted(DISTS.glob(prefix + "*")) if DISTS.is_dir() else []
        if not paths:
            missing.append(prefix)
            continue
        path = paths[0]
        if path.suffix in (".whl", ".zip"):
            with zipfile.ZipFile(path) as z:
                for name in z.namelist():
                    if re.search(wanted, name):
                        found[f"{path.name}/{name}"] = z.read(name).decode()
        else:
            with tarfile.open(path) as t:
                for m in t.getmembers():
                    if m.isfile() and re.search(wanted, m.name):
                        f = t.extractfile(m)
                        assert f is not None
                        found[f"{path.name}/{m.name}"] = io.TextIOWrapper(f).read()
    return found, missing


def _test_strings() -> dict[str, str]:
    """String constants in the tests that look like Lark grammars (a line ``name:``)."""
    looks = re.compile(r"^\s*[?!]?_?[a-zA-Z]\w*(\.-?\d+)?\s*:", re.M)
    out: dict[str, str] = {}
    for f in sorted((ROOT / "tests").rglob("*.py")):
        if f.name == Path(__file__).name:
            continue
        try:
            tree = ast.parse(f.read_text())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                s = node.value
                if looks.search(s) and len(s) < 50_000 and s not in out.values():
                    out[f"{f.name}:{node.lineno}"] = s
    return out


def test_real_grammars() -> None:
    grammars = _files()
    from_archives, missing = _archives()
    grammars |= from_archives
    results: dict[str, dict[str, str]] = {}
    for name, text in grammars.items():
        results[name] = {start: check(text, start) for start in starts_of(text)}
    fast = sorted(n for n, r in results.items() if all(v.startswith("fast") for v in r.values()))
    print(
        f"\nLark reader, real grammars: {len(fast)} of {len(results)} read by the reader "
        f"(every start symbol tried); left to Lark's loader: "
        f"{sorted(set(results) - set(fast))}"
    )
    if missing:
        print(f"archives not cached (run benchmarks/real_grammars.py to fetch): {missing}")
    # the ones that must take the fast path
    must = [
        "lark/grammars/lark.lark",
        "lark/grammars/common.lark",
        "repo/tests/data/grammars/json.lark",
        "repo/tests/data/grammars/sql.lark",
        "repo/tests/data/grammars/clike.lark",
    ]
    for prefix in ("syncode-0.4.16",):
        if prefix not in missing:
            must += [
                n
                for n in from_archives
                if re.search(r"syncode/parsers/grammars/(sql|java|python|go|json)\.lark$", n)
            ]
    if "pddl-0.5.1" not in missing:
        must += [n for n in from_archives if n.endswith("grammar.lark") and "pddl" in n]
    for name in must:
        assert name in fast, (name, results.get(name))
    if missing:
        pytest.skip(f"PyPI archives not cached in {DISTS}: {missing} (the rest passed)")


def test_grammar_strings_of_the_tests() -> None:
    """The grammars in the tests, those written to fail included: a grammar Lark refuses
    is never read."""
    counts: Counter[str] = Counter()
    for _where, text in _test_strings().items():
        for start in starts_of(text):
            counts[check(text, start).split()[0]] += 1
    print(f"\nLark reader, grammar strings of the tests (grammar, start): {dict(counts)}")
    assert counts["fast"] > 100


# -- small grammars: each construct, each error ------------------------------------------

SMALL = [
    # literals and anonymous terminals
    'start: "(" "a" ")" "select"i "x" /[0-9]+/ /y/i "\\n" "\\t" " " "é" "\\"" "\'"\n',
    'start: "a" "A" A\nA: "a"\n',
    'start: "a" B\nA: "a"\nB: "a"\n',
    'start: "if" IF\nIF: "iff"\n',
    'start: "if" "IF"\n',
    'start: "+" PLUS\nPLUS: "++"\n',
    'start: "x"i "x"\n',
    "start: /a/ /a/i A\nA: /a/\n",
    'start: "a".."z" "0".."9"\n',
    'start: "\\\\" "a\\\\b" /\\\\/ /\\// "\\u00e9" "\\x41"\n',
    'start: A\nA: "a\\"b"\n',
    # terminals composed
    'start: A B C D E F G H\nA: "a" "b"\nB: "a" | "bc" | /d+/\nC: "x"? "y"* "z"+\n'
    'D: "d"~3 "e"~2..5\nE: ["e" "f"]\nF: A B\nG: ("g"i | "h") "k"\nH.2: /h/ | /hh/i\n',
    'start: X\nX: Y Y\nY: "y"i\n',
    'start: X\nX: "a" |\n',
    "start: X\nX: ()\n",
    'start: X\nX: "a"i | "b"\n',
    'start: X\nX.-1: "x"\nY.3: "y"\n',
    # EBNF in rules
    "start: a? b* c+ [d] (a | b) e~3 f~0..2 g~2..4\na: A\nb: B\nc: C\nd: D\ne: E\nf: F\ng: G\n"
    'A: "a"\nB: "b"\nC: "c"\nD: "d"\nE: "e"\nF: "f"\nG: "g"\n',
    'start: x+ y\n       | x* z\nx: "x"\ny: x+ "y"\nz: (x "z")+ (x "z")*\n',
    'start: ("a" | "b")+ ["c" "d"] ["e"] ["f" | "g" "h"]\n',
    'start: "a"~60\n',
    'start: "a"~3..70\n',
    'start: "a"~0..55 "b"~50..50\n',
    'start: ("a" "b"?)~1..100\n',
    'start: (("a"))\n',
    'start: a a\na: "x"?\n',
    'start: "x"? "x"?\n',
    'start: ["x"] ["x"]\n',
    'start: [_x] [_x]\n_x: "x"\n',
    '!start: ["x"] ["y"]\n',
    '!start: ["x"] ["x"]\n',
    'start: [X] [X]\nX: "x"\n',
    'start: [_X] [_X]\n_X: "x"\n',
    'start: "a" | "a"\n',
    'start: a | a\na: "x"\n',
    'start: ("a" | "a") "b"\n',
    'start: "a" -> x\n     | "b" -> y\n     | "c"\n',
    'start: "a" -> x\n     | "a"\n',
    'start: "a" -> x\n     | "a" -> x\n',
    'start: ("a" | "b") -> x\n',
    'start: ("a" -> x | "b")\n',
    '_start: "a" -> x\n',
    '?start: a\n?a: "a" | "b"\n',
    '?_a: "x"\nstart: _a\n',
    "start: \n",
    "start: | a\na: A\nA: /a/\n",
    'start.2: a\na.-1: "a"\n',
    "start: a\na: b\nb: a\n",
    'start: "s"\nu: v\nv: u\nw: "w" x\nx: "x"\n',
    'start: "s"\nu: "u"+\n',
    'start: x\nx: "s"+\nu: "s"+\n',
    # directives
    '%import common.WS\n%ignore WS\nstart: "a"\n',
    "%import common (INT, WS, NUMBER)\n%ignore WS\nstart: INT NUMBER\n",
    "%import common.CNAME -> NAME\n%import common.INT\n%import common.WS_INLINE\n"
    "start: NAME INT\n%ignore WS_INLINE\n",
    "%import common.ESCAPED_STRING -> _STRING\nstart: _STRING\n",
    "%import common.INT -> A\n%import common.INT -> B\nstart: A\n",
    '%import common.DIGIT\n%import common.DIGIT -> DIGIT\nstart: DIGIT "x"\n',
    '%import common.NOPE\nstart: "a"\n',
    '%import common.WS\nWS: " "\nstart: "a"\n',
    "%import common.WS\n%import common.WS\nstart: WS\n",
    '%import common.signed_number\nstart: "a"\n',
    '%import .common.WS\nstart: "a"\n',
    '%import lark.RULE\nstart: "a"\n',
    '%import common\nstart: "a"\n',
    'start: "a"\n%ignore " "\n%ignore /\\t/ | "\\n"\n%ignore COMMENT\nCOMMENT: /#.*/\n',
    'start: "a"\n%ignore X\n',
    'start: "a"\n%ignore a\na: "b"\n',
    'start: "a"\n%ignore\n',
    'start: "a"\n%ignore "b" -> c\n',
    '%declare A B\nstart: A "b" B\n',
    '%declare A\nA: "a"\nstart: A\n',
    "%declare a\nstart: a\n",
    '%declare A\nstart: "a"\n%ignore A\n',
    '%declare FOO\nstart: "foo"\n',
    'start: "a" // comment\n# comment\n   | "b"  # comment\n\n\n',
    'start: "a" \\\n  "b"\n',
    'start: "a"\r\n  | "b"\r\n',
    # errors Lark reports (the reader must leave them to Lark)
    'start: ""\n',
    'start: X\nX: ""\n',
    "start: X\nX: \n",
    'start: X\nX: X "a"\n',
    "start: X\nX: Y\nY: X\n",
    'start: X\nX: "a" x\nx: "x"\n',
    "start: X\n",
    "start: x\n",
    'start: "a"\nstart: "b"\n',
    'start: X\nX: "a"\nX: "b"\n',
    'start: "b".."a" "ab".."c"\n',
    'start: "a"i.."z"\n',
    'start: "a"~3..2\n',
    'start: X\nX: "a"~3..2\n',
    'start: "a"~-1\n',
    'start: "a\nb"\n',
    "start: /a\nb/\n",
    "start: /a\nb/x\n",
    'start: "a" "b\n',
    'start: a\na: "a"\n  b: "b"\n',
    "start: a b??\n",
    "start: (a\n",
    "start: a)\n",
    "Start: a\n",
    'start: "a"\n%override start: "b"\n',
    'start: "a"\n%extend start: "b"\n',
    'start: _sep{"a", ","}\n_sep{x, sep}: x (sep x)*\n',
    'start: "a" -> X\n',
    'start: "\\xZZ"\n',
    'start: "\\u"\n',
    "start: /[/\n",
    'start: X\nX: /(/ | "a"\n',
    'start: X\nX: A "b"\n%declare A\n',
    'start: "a" -> b -> c\n',
    "start: A\nA: /a/ -> b\n",
    '%ignore "a"\n%ignore "a"\nstart: "a"\n',
    'a: "a"\n',
    'start: "a"\nA..B\n',
    "%import common.WS -> ws\nstart: ws\n",
]


@pytest.mark.parametrize("text", SMALL)
def test_small_grammars(text: str) -> None:
    outcomes = {start: check(text, start) for start in starts_of(text)}
    assert all(v in ("fast", "fallback") for v in outcomes.values()), outcomes


def test_small_grammars_mostly_fast() -> None:
    fast = sum(check(t, "start") == "fast" for t in SMALL)
    print(f"\nLark reader, small grammars: {fast} of {len(SMALL)} read by the reader")
    assert fast > 60


# -- random grammars ----------------------------------------------------------------------

_LITERALS = ['"a"', '"b"', '"ab"', '"("', '"if"', '"IF"i', '"x"i', "/[0-9]+/", "/c+/i", '"_"']


def _random_body(
    rnd: random.Random, names: list[str], depth: int, in_term: bool, alias: bool = False
) -> str:
    def atom() -> str:
        r = rnd.random()
        if depth > 0 and r < 0.15:
            return "(" + _random_body(rnd, names, depth - 1, in_term) + ")"
        if depth > 0 and r < 0.22:
            return "[" + _random_body(rnd, names, depth - 1, in_term) + "]"
        if r < 0.5 and names:
            return rnd.choice(names)
        if r < 0.55:
            return rnd.choice(['"a".."c"', '"0".."9"'])
        return rnd.choice(_LITERALS)

    def expr() -> str:
        a = atom()
        r = rnd.random()
        if a[0] in "([" and r >= 0.3:  # (no repeated groups: their expansions multiply)
            return a
        if r < 0.1:
            return a + "?"
        if r < 0.2:
            return a + "*"
        if r < 0.3:
            return a + "+"
        if r < 0.35:
            return a + "~" + str(rnd.randint(0, 3))
        if r < 0.4:
            lo = rnd.randint(0, 3)
            return a + f"~{lo}..{lo + rnd.choice([0, 1, 2, 60])}"
        return a

    alts = []
    for _ in range(rnd.randint(1, 3)):
        alt = " ".join(expr() for _ in range(rnd.randint(0 if depth < 2 else 1, 3)))
        if alias and rnd.random() < 0.1:
            alt += " -> " + rnd.choice(["x", "y"])
        alts.append(alt)
    return " | ".join(alts)


def random_grammar(rnd: random.Random) -> str:
    terms = [f"T{i}" for i in range(rnd.randint(0, 4))]
    rules = ["start"] + [rnd.choice(["", "_"]) + f"r{i}" for i in range(rnd.randint(0, 4))]
    lines = []
    imports = rnd.sample(["WS", "INT", "CNAME", "ESCAPED_STRING", "DIGIT"], rnd.randint(0, 2))
    for name in imports:
        lines.append(f"%import common.{name}")
    for i, t in enumerate(terms):
        prio = rnd.choice(["", "", ".2", ".-1"])
        body = _random_body(rnd, terms[:i] + imports, 2, True)
        lines.append(f"{t}{prio}: {body or '/z/'}")
    for r in rules:
        mod = rnd.choice(["", "", "!", "?"]) if not r.startswith("_") else ""
        body = _random_body(rnd, rules + terms + imports, 2, False, not r.startswith("_"))
        lines.append(f"{mod}{r}: {body}")
    if rnd.random() < 0.4:
        lines.append("%ignore " + rnd.choice([*imports, *terms, '" "', '"a" | /b/']))
    if rnd.random() < 0.2:
        lines.append("%declare D")
    rnd.shuffle(lines)
    return "\n".join(lines) + "\n"


def test_random_grammars() -> None:
    rnd = random.Random(20240611)
    counts: Counter[str] = Counter()
    for _ in range(400):
        text = random_grammar(rnd)
        for start in starts_of(text):
            outcome = check(text, start)
            assert outcome in ("fast", "fallback"), (text, start, outcome)
            counts[outcome] += 1
    print(f"\nLark reader, random grammars (grammar, start): {dict(counts)}")
    assert counts["fast"] > 300


def test_edited_real_grammars() -> None:
    """Corpus grammars with a few characters deleted, doubled or swapped: whatever the
    reader reads, Lark reads the same way."""
    texts = list(_files().values())
    rnd = random.Random(7)
    counts: Counter[str] = Counter()
    pieces = ["|", "(", ")", "[", "]", "?", "*", "+", "~", "..", '"', "/", ":", "\n", " ", "->"]
    for _ in range(300):
        text = rnd.choice(texts)
        for _ in range(rnd.randint(1, 3)):
            i = rnd.randrange(len(text))
            r = rnd.random()
            if r < 0.4:
                text = text[:i] + text[i + 1 :]
            elif r < 0.7:
                text = text[:i] + rnd.choice(pieces) + text[i:]
            else:
                text = text[:i] + text[i : i + 5][::-1] + text[i + 5 :]
        counts[check(text, "start")] += 1
    print(f"\nLark reader, edited grammars: {dict(counts)}")
    assert counts["fast"] > 20 and counts["fallback"] > 20


# -- through corral -------------------------------------------------------------------------


def test_grammar_from_lark_same_grammar(monkeypatch: pytest.MonkeyPatch) -> None:
    """corral's grammar (rules, terminals, their sources and automata: the fingerprint, so
    the same masks) is the same on either path."""
    from corral.grammar.lark_frontend import grammar_from_lark

    texts = [p.read_text() for p in sorted((ROOT / "tests/data/grammars").glob("*.lark"))]
    texts.append((LARK_DIR / "grammars/lark.lark").read_text())
    for text in texts:
        fast = grammar_from_lark(text)
        monkeypatch.setattr(lark_reader, "ENABLED", False)
        slow = grammar_from_lark(text)
        monkeypatch.setattr(lark_reader, "ENABLED", True)
        assert list(fast.rules) == list(slow.rules)
        assert list(fast.terminals) == list(slow.terminals)
        for name, t in fast.terminals.items():
            u = slow.terminals[name]
            assert (t.source, t.literal) == (u.source, u.literal)
            assert t.dfa.n_states == u.dfa.n_states
        assert list(fast.ignore) == list(slow.ignore)
        assert fast.fingerprint == slow.fingerprint


def test_disabled_reader_returns_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lark_reader, "ENABLED", False)
    assert read_lark('start: "a"\n', "start", []) is None


def test_import_path_with_its_own_common(tmp_path: Path) -> None:
    """An import path holding a ``common.lark`` is Lark's business (it reads that file)."""
    (tmp_path / "common.lark").write_text('WS: "w"\n')
    text = "%import common.WS\nstart: WS\n"
    assert read_lark(text, "start", [str(tmp_path)]) is None
    assert read_lark(text, "start", [str(tmp_path / "elsewhere")]) is not None
