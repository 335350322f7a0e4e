"""The subset construction and the UTF-8 encoding kernels (``regex/subset.py``,
``regex/utf8_dfa.py``) against the Python constructions they replaced
(``dfa._subset_construction_reference``, ``dfa.utf8_automaton_reference``): the same
minimal DFA, and the same construction steps for the subset construction (budgets refuse
the same patterns). UTF-8 validity is checked exhaustively for short sequences."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.regexes import regexes

from corral.errors import CompileBudgetError
from corral.grammar.regex import ast, dfa, python_regex_dfa
from corral.grammar.regex.nfa import NFA, build_nfa, build_search_nfa
from corral.grammar.regex.python_syntax import parse_python_regex

PATTERNS = [
    r"",
    r"a",
    r"[^\s]+",
    r"(?s).*",
    r"(?s).{0,5}",
    r"(https?|ftp)://[^\s/?.#-]+\.?",
    r"\w+@\w+\.\w{2,4}",
    r"^abc$",
    r"\bfoo\b",
    r"\B\w+",
    r"(?m)^a$\n^b",
    r"(?<=a)b|c(?=d)d",
    r"x(?!y)[a-z]",
    r"(?s).{0,5}$",
    r"\S{3,6}",
    r"[^a]*b",
    r"\d{4}-\d{2}-\d{2}T\d{2}",
    r"(?i)straße|ǅ",
    r"[\u00e9\u4e2d\U0001F600]+",
    r"[\U00010000-\U0010ffff]x",
    r"[\u0100-\uffff]{2}",
    r"[\ud7ff\ue000\uffff\U00010000\U0010ffff]",
    r"(?s)[^\u0800]",
    r"\"([^\"\\]|\\.){0,40}\"",
    r"(\d{1,3}\.){3}\d{1,3}",
    r"[\u0400-\u04ff\u4e00-\u9fff]{2,5}x",
    r"(\b\w+\b\W*){2,3}",
]


def _both(
    pattern: str,
) -> tuple[tuple[np.ndarray, np.ndarray, int], tuple[np.ndarray, np.ndarray, int]]:
    """(minimal trans, accept, subset-construction steps) by the kernels and by the
    reference constructions."""
    nfa = build_nfa(parse_python_regex(pattern, 0, where="t"))
    alpha = dfa._Alphabet(nfa)
    out = []
    for kernel in (True, False):
        with dfa.work_budget(10**12, "t") as budget:
            if kernel:
                ca = dfa._determinise(nfa, alpha, "t", dfa.DEFAULT_MAX_DFA_STATES)
            else:
                ref = dfa._subset_construction_reference(
                    nfa, alpha, "t", dfa.DEFAULT_MAX_DFA_STATES
                )
                ca = dfa._char_automaton(ref)
        assert budget is not None
        steps = budget.units - budget.left
        if not ca.live[0]:
            out.append((np.zeros((0, 256), np.int32), np.zeros(0, bool), steps))
            continue
        ranges = [cs.ranges for cs in ca.blocks]
        if kernel:
            rows, acc, _ = dfa._encode(ca, ranges, 4 * dfa.DEFAULT_MAX_DFA_STATES, "t")
        else:
            rows, acc, _ = dfa.utf8_automaton_reference(
                [
                    dict(
                        zip(
                            ca.edge_block[ca.edge_ptr[q] : ca.edge_ptr[q + 1]].tolist(),
                            ca.edge_target[ca.edge_ptr[q] : ca.edge_ptr[q + 1]].tolist(),
                            strict=True,
                        )
                    )
                    for q in range(ca.accept.shape[0])
                ],
                ca.accept.tolist(),
                ca.live.tolist(),
                ranges,
                4 * dfa.DEFAULT_MAX_DFA_STATES,
                "t",
            )
            acc = np.asarray(acc, bool)
        trans, accept = dfa.minimize(rows, acc)
        out.append((trans, accept, steps))
    return out[0], out[1]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_real_regexes(pattern: str) -> None:
    (kt, ka, ks), (rt, ra, rs) = _both(pattern)
    assert np.array_equal(kt, rt) and np.array_equal(ka, ra)
    assert ks == rs  # the subset construction counts its steps as the Python one did


_ATOMS = st.sampled_from(
    ["a", "b", "é", "中", "😀", ".", r"\w", r"\s", r"\d", "[^a]", "[a-zé]", r"[^\s\u00e9]"]
)
_GUARDS = st.sampled_from(["", "^", "$", r"\b", r"\B", "(?=a)", "(?!b)", "(?<=a)", "(?<!é)"])


@settings(max_examples=300, deadline=None)
@given(regexes(_ATOMS, guards=_GUARDS), st.booleans())
def test_random_regexes(pattern: str, dotall: bool) -> None:
    (kt, ka, ks), (rt, ra, rs) = _both(("(?s)" if dotall else "") + pattern)
    assert np.array_equal(kt, rt) and np.array_equal(ka, ra)
    assert ks == rs


def _accepts(trans: np.ndarray, accept: np.ndarray, seqs: np.ndarray) -> np.ndarray:
    """Which rows of ``seqs`` (``uint8 [m, L]``) the DFA accepts, vectorised."""
    state = np.zeros(seqs.shape[0], np.int64)
    for i in range(seqs.shape[1]):
        alive = state >= 0
        state[alive] = trans[state[alive], seqs[alive, i]]
    out = np.zeros(seqs.shape[0], bool)
    alive = state >= 0
    out[alive] = accept[state[alive]]
    return out


def _valid_utf8_char(seq: bytes) -> bool:
    try:
        return len(seq.decode("utf-8")) == 1
    except UnicodeDecodeError:
        return False


@pytest.mark.parametrize("kernel", [True, False], ids=["kernels", "python"])
def test_utf8_exactly_valid_characters(kernel: bool) -> None:
    """``(?s).`` accepts exactly the UTF-8 encodings of one character: every sequence of
    one, two and three bytes, and every four-byte sequence after a lead byte F0-F4 with
    its second byte from a spread of values, is checked against Python's decoder (no
    overlong forms, no surrogates, nothing past U+10FFFF), built by the kernels and by
    the Python constructions (which small patterns take)."""
    (kt, ka, _), (rt, ra, _) = _both(r"(?s).")
    trans, accept = (kt, ka) if kernel else (rt, ra)
    for n in (1, 2, 3):
        seqs = np.array(list(itertools.product(range(256), repeat=n)), np.uint8)
        got = _accepts(trans, accept, seqs)
        want = np.array([_valid_utf8_char(bytes(s)) for s in seqs.tolist()])
        assert np.array_equal(got, want), n
    seconds = [0x80, 0x8F, 0x90, 0xA5, 0xBF, 0x7F, 0xC0]
    seqs = np.array(
        list(itertools.product(range(0xEF, 0xF6), seconds, range(0x7E, 0xC1), [0x80, 0xBF])),
        np.uint8,
    )
    got = _accepts(trans, accept, seqs)
    want = np.array([_valid_utf8_char(bytes(s)) for s in seqs.tolist()])
    assert np.array_equal(got, want)


def test_small_patterns_take_the_python_constructions() -> None:
    """``nfa_to_byte_dfa`` gives the same automaton whichever side of the size threshold
    a pattern falls, and small ones never call the kernels."""
    from unittest import mock

    for pattern in (r"[a-z]+", r"\bfoo\b", r"(?s).{0,5}", r"[\u00e9\u4e2d]x"):
        nfa = build_nfa(parse_python_regex(pattern, 0, where="t"))
        assert nfa.n_states <= dfa.SMALL_NFA_STATES
        with mock.patch.object(dfa, "_determinise", side_effect=AssertionError("kernel")):
            small = dfa.nfa_to_byte_dfa(nfa, where="t")
        (kt, ka, _), _ = _both(pattern)
        assert np.array_equal(small.trans, kt) and np.array_equal(small.accept, ka)


def _kernel_dfa(pattern: str, max_states: int = dfa.DEFAULT_MAX_DFA_STATES) -> None:
    """Determinise and encode ``pattern`` with the kernels, whatever its size."""
    nfa = build_nfa(parse_python_regex(pattern, 0, where="t"))
    ca = dfa._determinise(nfa, dfa._Alphabet(nfa), "t", max_states)
    dfa._encode(ca, [cs.ranges for cs in ca.blocks], 4 * max_states, "t")


@pytest.mark.parametrize("kernel", [True, False], ids=["kernels", "python"])
def test_budgets_refuse_as_before(kernel: bool) -> None:
    """Past ``max_states`` (character or byte states), or past a work budget, the kernels
    raise the errors the Python constructions raise."""

    def build(pattern: str, max_states: int = dfa.DEFAULT_MAX_DFA_STATES) -> None:
        if kernel:
            _kernel_dfa(pattern, max_states)
        else:
            nfa = build_nfa(parse_python_regex(pattern, 0, where="t"))
            alpha = dfa._Alphabet(nfa)
            cdfa = dfa._subset_construction_reference(nfa, alpha, "t", max_states)
            live = dfa.live_states(cdfa.trans, cdfa.accept)
            ranges = [cs.ranges for cs in cdfa.blocks]
            dfa.utf8_automaton_reference(cdfa.trans, cdfa.accept, live, ranges, 4 * max_states, "t")

    with pytest.raises(CompileBudgetError, match="more than 1000 states"):
        build(r"(a|b)*a(a|b){16}", max_states=1000)
    # a character automaton small enough, a byte automaton too large (4x the states):
    # code points of U+0100-U+06FF whose pattern under each lead byte is its own, so no
    # two lead bytes share their intermediate node
    scattered = "".join(chr(0x100 + 64 * i + j) for i in range(24) for j in range(0, 2 * i + 1, 2))
    with pytest.raises(CompileBudgetError, match="byte automaton needs more than"):
        build(f"[{scattered}]{{30}}", max_states=40)
    pattern = r"(a|b)*a(a|b){8}"
    for units in (10, 5_000):
        with pytest.raises(dfa.WorkBudgetError), dfa.work_budget(units, "the test"):
            build(pattern)
    with dfa.work_budget(10**9, "the test") as budget:
        build(pattern)
    assert budget is not None
    spent = budget.units - budget.left
    with dfa.work_budget(spent, "the test"):
        build(pattern)  # exactly enough
    with pytest.raises(dfa.WorkBudgetError), dfa.work_budget(spent - 1, "the test"):
        build(pattern)


def test_many_guards_use_the_reference() -> None:
    """More distinct guards than one int64 holds: the Python construction, same result."""
    letters = [chr(c) for c in range(0x61, 0x61 + 26)] + [chr(c) for c in range(0x41, 0x41 + 26)]
    letters += [str(d) for d in range(10)]
    pattern = "|".join(f"{c}(?<={c})x(?=[{c}-z])[{c}-z]" for c in letters)  # 124 guards
    d = python_regex_dfa(pattern)
    assert d.n_states > 0
    (kt, ka, _), (rt, ra, _) = _both(pattern)
    assert np.array_equal(kt, rt) and np.array_equal(ka, ra)


def _minimal(ca: dfa._CharAutomaton) -> tuple[np.ndarray, np.ndarray]:
    """The minimal byte DFA of a character automaton (empty arrays for no language)."""
    if not ca.live[0]:
        return np.zeros((0, 256), np.int32), np.zeros(0, bool)
    rows, acc, _ = dfa._encode(ca, [cs.ranges for cs in ca.blocks], 10**6, "t")
    return dfa.minimize(rows, acc)


def _search_automata(
    nfa: NFA,
) -> tuple[dfa._CharAutomaton, dfa._CharAutomaton, dfa._CharAutomaton]:
    """The kernel's character automaton of ``nfa``, the Python construction's, and the
    Python construction's with no set taken as ``{whole}``."""
    alpha = dfa._Alphabet(nfa)
    big = 10**6
    kernel = dfa._determinise(nfa, alpha, "t", big)
    ref = dfa._char_automaton(dfa._subset_construction_reference(nfa, alpha, "t", big))
    plain = dfa._char_automaton(
        dfa._subset_construction_reference(nfa, alpha, "t", big, collapse=False)
    )
    return kernel, ref, plain


_SEARCH_ATOMS = st.sampled_from(["a", "b", "é", '"', "\\\\", ".", r"\w", r"\s", "[^a]", "[ab]"])


@settings(max_examples=200, deadline=None)
@given(
    regexes(_SEARCH_ATOMS, guards=st.sampled_from(["", "", "^", "$", r"\b"])),
    st.sampled_from(["decoded", "encoded"]),
)
def test_search_sets_taken_whole_keep_the_language(pattern: str, form: str) -> None:
    """A pattern searched for in a text (``any* pattern any*``, as JSON Schema's
    ``pattern`` means), built with its tail named (``build_search_nfa``): the kernel and
    the Python construction, which both take a set that reaches the tail as the tail
    alone, give the automaton of the construction that tracks every set, in the decoded
    form (the final check's) and the JSON-encoded one (a string terminal's, where the
    tail reads encoded characters)."""
    from corral.grammar.json_schema.ecma import ANYTHING
    from corral.grammar.json_schema.strings import _has_guards, encode_node

    node = parse_python_regex(pattern, 0, where="t")
    head = ast.Concat((ANYTHING, node))
    if form == "encoded":
        escapes = not _has_guards(node)
        nfa = build_search_nfa(
            encode_node(head, escapes=escapes), encode_node(ANYTHING, escapes=escapes)
        )
    else:
        nfa = build_search_nfa(head, ANYTHING)
    kernel, ref, plain = _search_automata(nfa)
    want = _minimal(plain)
    for ca in (kernel, ref):
        got = _minimal(ca)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert kernel.accept.shape[0] == ref.accept.shape[0]


def test_trailing_any_is_taken_whole_without_a_named_tail() -> None:
    """Without a named tail, a set that holds a state from which every text is accepted
    (a trailing ``[\\s\\S]*``) is taken as one state too: by the kernel and the Python
    construction alike, with the language of the construction that tracks every set."""
    nfa = build_nfa(parse_python_regex(r"(?s).*(ab|a[^b]c).*", 0, where="t"))
    assert nfa.whole is None
    found = dfa.universal_targets(nfa, dfa._Alphabet(nfa))
    assert found is not None and found[0][found[1]]
    kernel, ref, plain = _search_automata(nfa)
    want = _minimal(plain)
    for ca in (kernel, ref):
        got = _minimal(ca)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert kernel.accept.shape[0] == ref.accept.shape[0] < plain.accept.shape[0]


# The `uri` pattern of a MaskBench schema (Github_medium---o19005), unanchored: a URI
# somewhere in the text, which holds as soon as a scheme and its colon are read.
URI = (
    r"([A-Za-z][A-Za-z0-9+\-.]*):(?:(//)(?:((?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*)"
    r"@)?((?:\[(?:(?:(?:(?:[0-9A-Fa-f]{1,4}:){6}|::(?:[0-9A-Fa-f]{1,4}:){5}|(?:[0-9A-Fa-f]"
    r"{1,4})?::(?:[0-9A-Fa-f]{1,4}:){4}|(?:(?:[0-9A-Fa-f]{1,4}:){0,1}[0-9A-Fa-f]{1,4})?::"
    r"(?:[0-9A-Fa-f]{1,4}:){3}|(?:(?:[0-9A-Fa-f]{1,4}:){0,2}[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]"
    r"{1,4}:){2}|(?:(?:[0-9A-Fa-f]{1,4}:){0,3}[0-9A-Fa-f]{1,4})?::[0-9A-Fa-f]{1,4}:|(?:(?:"
    r"[0-9A-Fa-f]{1,4}:){0,4}[0-9A-Fa-f]{1,4})?::)(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:(?:"
    r"25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?))|"
    r"(?:(?:[0-9A-Fa-f]{1,4}:){0,5}[0-9A-Fa-f]{1,4})?::[0-9A-Fa-f]{1,4}|(?:(?:[0-9A-Fa-f]"
    r"{1,4}:){0,6}[0-9A-Fa-f]{1,4})?::)|[Vv][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+)\]|"
    r"(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9]"
    r"[0-9]?)|(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*))(?::([0-9]*))?((?:/(?:"
    r"[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)*)|/((?:(?:[A-Za-z0-9\-._~!$&'()*+,;="
    r":@]|%[0-9A-Fa-f]{2})+(?:/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)*)?)|((?:"
    r"[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+(?:/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|"
    r"%[0-9A-Fa-f]{2})*)*)|)(?:\?((?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*))?"
    r"(?:\#((?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*))?"
)


def test_a_pattern_found_anywhere_stops_tracking_matches_after_one() -> None:
    """An unanchored URI pattern as a JSON string terminal: once a match ends, the subset
    construction reads the rest of the text with the tail alone. It built 11,280
    character states for this pattern (the minimal automaton has 17); the language is
    the same, checked on texts with and without a URI, encoded."""
    from corral.grammar.json_schema.ecma import EcmaPattern
    from corral.grammar.json_schema.strings import body_of_node

    node = EcmaPattern(URI).search_node()
    seen: list[int] = []
    real = dfa._determinise

    def counting(*args: object) -> dfa._CharAutomaton:
        ca = real(*args)  # type: ignore[arg-type]
        seen.append(int(ca.accept.shape[0]))
        return ca

    from unittest import mock

    with mock.patch.object(dfa, "_determinise", counting):
        body = body_of_node(node, where="t", max_states=dfa.DEFAULT_MAX_DFA_STATES)
    assert seen and max(seen) < 200
    for text, ok in [
        ("see http://example.org/a?b=c#d", True),
        ('x \\"mailto:ada@example.org\\" y', True),
        ("C: drive", True),
        ("no scheme here", False),
        ("1http", False),
        ("bad \\x escape http://a", False),
    ]:
        assert body.matches(text.encode()) is ok, text


@pytest.mark.parametrize("n", [2, 50, 32_766])
def test_a_bounded_repeat_of_the_whole_alphabet_is_not_taken_whole(n: int) -> None:
    """``[a-z]{0,n}`` over an alphabet of one block: every character state reads the
    whole alphabet, yet no state accepts every text (the length is bounded). The search
    for such states finds none, whether its fixpoint settles (small ``n``) or gives up
    after a few rounds, rather than peeling one state a round (quadratic)."""
    nfa = build_nfa(parse_python_regex(f"[a-z]{{0,{n}}}", 0, where="t"))
    assert dfa.universal_targets(nfa, dfa._Alphabet(nfa)) is None
