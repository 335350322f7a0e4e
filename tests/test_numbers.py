"""Numeric JSON Schema keywords → byte DFAs: exact against Decimal / Fraction arithmetic."""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.errors import CompileBudgetError
from corral.grammar.json_schema.numbers import integer_dfa, multiple_of_dfa, number_dfa
from corral.grammar.regex import ByteDFA, python_regex_dfa
from corral.grammar.regex.dfa import intersect, minimize, trim

D = Decimal

INT_RE = re.compile(r"0|-?[1-9][0-9]*")
NUM_RE = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")
FULL_RE = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?"

MALFORMED = [
    "",
    "-",
    "+1",
    "01",
    "-01",
    "00",
    "1.",
    ".5",
    "-.5",
    "1..0",
    "1.0.0",
    "1e5",
    "1E5",
    "1.5e-3",
    "--1",
    " 1",
    "1 ",
    "0x1",
    "1-",
    "-0-",
    "١",  # a non-ASCII digit
]


# ---------------------------------------------------------------------------------------
# helpers


def accepts(dfa: ByteDFA, words: list[str]) -> np.ndarray:
    """Vectorised membership test of many words."""
    out = np.zeros(len(words), bool)
    if dfa.n_states == 0 or not words:
        return out
    enc = [w.encode() for w in words]
    lens = np.array([len(e) for e in enc])
    width = max(1, int(lens.max()))
    arr = np.zeros((len(enc), width), np.int64)
    for i, e in enumerate(enc):
        arr[i, : len(e)] = list(e)
    state = np.zeros(len(enc), np.int64)
    for i in range(width):
        active = (lens > i) & (state >= 0)
        state[active] = dfa.trans[state[active], arr[active, i]]
    ok = state >= 0
    out[ok] = dfa.accept[state[ok]]
    return out


def equivalent(a: ByteDFA, b: ByteDFA) -> bool:
    """Exact language equality (product walk, dead state = -1)."""
    dead = np.full(256, -1, np.int64)

    def row(d: ByteDFA, s: int) -> np.ndarray:
        return d.trans[s].astype(np.int64) if s >= 0 else dead

    def acc(d: ByteDFA, s: int) -> bool:
        return s >= 0 and bool(d.accept[s])

    start = (0 if a.n_states else -1, 0 if b.n_states else -1)
    seen = {start}
    stack = [start]
    while stack:
        x, y = stack.pop()
        if acc(a, x) != acc(b, y):
            return False
        pairs = set(zip(row(a, x).tolist(), row(b, y).tolist(), strict=True))
        for p in pairs:
            if p != (-1, -1) and p not in seen:
                seen.add(p)
                stack.append(p)
    return True


def assert_minimal(dfa: ByteDFA) -> None:
    if dfa.n_states == 0:
        return
    t, a = trim(dfa.trans, dfa.accept)
    assert t.shape[0] == dfa.n_states
    t, a = minimize(t, a)
    assert t.shape[0] == dfa.n_states
    assert dfa.trans.dtype == np.int32 and dfa.trans.shape == (dfa.n_states, 256)


def in_range(
    v: Decimal,
    lo: Decimal | int | None,
    hi: Decimal | int | None,
    xlo: bool = False,
    xhi: bool = False,
) -> bool:
    if lo is not None and (v < lo or (xlo and v == lo)):
        return False
    return not (hi is not None and (v > hi or (xhi and v == hi)))


def expect_int(words: list[str], lo: int | None, hi: int | None) -> np.ndarray:
    return np.array(
        [INT_RE.fullmatch(w) is not None and in_range(D(w), lo, hi) for w in words], bool
    )


def expect_num(
    words: list[str], lo: Decimal | None, hi: Decimal | None, xlo: bool, xhi: bool
) -> np.ndarray:
    return np.array(
        [NUM_RE.fullmatch(w) is not None and in_range(D(w), lo, hi, xlo, xhi) for w in words],
        bool,
    )


def is_multiple(w: str, m: Decimal | int) -> bool:
    q = Fraction(D(w)) / Fraction(m)
    return q.denominator == 1


def expect_mult(words: list[str], m: Decimal | int, integer: bool) -> np.ndarray:
    rx = INT_RE if integer else NUM_RE
    return np.array([rx.fullmatch(w) is not None and is_multiple(w, m) for w in words], bool)


def check(dfa: ByteDFA, words: list[str], expected: np.ndarray, label: object) -> None:
    got = accepts(dfa, words)
    bad = [w for w, g, e in zip(words, got, expected, strict=True) if g != e]
    assert not bad, (label, bad[:10])


INT_WORDS = [str(i) for i in range(-300, 301)] + ["-0", *MALFORMED, "1.0", "-5.0", "0.0"]


def decimal_words() -> list[str]:
    out = []
    for sign in ("", "-"):
        for ip in ("0", "1", "2", "3", "10"):
            out.append(sign + ip)
            out += [f"{sign}{ip}.{f}" for f in range(10)]
            out += [f"{sign}{ip}.{f:02d}" for f in range(100)]
    return out


DEC_WORDS = decimal_words() + MALFORMED + ["0.000", "-0.000", "0.500", "2.990", "0.0100"]


# ---------------------------------------------------------------------------------------
# integer ranges


INT_BOUNDS = [None, -301, -300, -250, -100, -17, -10, -9, -1, 0, 1, 9, 10, 99, 100, 101, 250, 300]


def test_integer_ranges_exhaustive() -> None:
    for lo in INT_BOUNDS:
        for hi in INT_BOUNDS:
            dfa = integer_dfa(lo, hi)
            check(dfa, INT_WORDS, expect_int(INT_WORDS, lo, hi), (lo, hi))
            if lo is not None and hi is not None and lo > hi:
                assert dfa.n_states == 0
            else:
                assert dfa.n_states > 0
                assert_minimal(dfa)


@pytest.mark.parametrize(
    ("lo", "hi"), [(0, 0), (-3, 3), (5, 17), (-120, -7), (95, 1005), (-1, 0), (0, 1)]
)
def test_integer_range_equals_enumeration(lo: int, hi: int) -> None:
    ref = python_regex_dfa("|".join(str(i) for i in range(lo, hi + 1)))
    assert equivalent(integer_dfa(lo, hi), ref)


def test_integer_unbounded_is_the_integer_grammar() -> None:
    dfa = integer_dfa()
    assert equivalent(dfa, python_regex_dfa(r"0|-?[1-9][0-9]*"))
    assert not dfa.matches(b"-0")
    assert integer_dfa(0).matches(b"0") and not integer_dfa(0).matches(b"-0")
    assert integer_dfa(None, 0).matches(b"0") and not integer_dfa(None, 0).matches(b"-0")


def test_integer_big_bounds() -> None:
    big = 10**30
    dfa = integer_dfa(None, big)
    for v, ok in [(big, True), (big - 1, True), (big + 1, False), (10 * big, False), (-big, True)]:
        assert dfa.matches(str(v).encode()) == ok, v
    assert dfa.n_states < 80
    safe = 9007199254740991
    dfa = integer_dfa(-safe, safe)
    for v, ok in [(safe, True), (-safe, True), (safe + 1, False), (-safe - 1, False), (0, True)]:
        assert dfa.matches(str(v).encode()) == ok, v
    assert not dfa.matches(b"1" + b"0" * 16)
    assert dfa.n_states < 50
    dfa = integer_dfa(-(10**40), -(10**39) + 7)
    assert dfa.matches(str(-(10**39) + 7).encode())
    assert not dfa.matches(str(-(10**39) + 8).encode())
    assert dfa.matches(str(-(10**40)).encode())
    assert not dfa.matches(str(-(10**40) - 1).encode())
    assert_minimal(dfa)


def test_integer_empty_and_bad_arguments() -> None:
    assert integer_dfa(1, 0).n_states == 0
    assert integer_dfa(10**20 + 1, 10**20).n_states == 0
    assert integer_dfa(7, 7).n_states == 2
    for bad in (1.0, D(1), True, "1"):
        with pytest.raises(ValueError):
            integer_dfa(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            integer_dfa(None, bad)  # type: ignore[arg-type]


bounds_int = st.one_of(st.none(), st.integers(-1000, 1000), st.integers(-(10**25), 10**25))
junk = st.text(alphabet="-0123456789.eE+ ", max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lo=bounds_int, hi=bounds_int, data=st.data())
def test_integer_ranges_random(lo: int | None, hi: int | None, data: st.DataObject) -> None:
    dfa = integer_dfa(lo, hi)
    anchors = [b for b in (lo, hi) if b is not None] or [0]
    near = st.builds(lambda a, d: str(a + d), st.sampled_from(anchors), st.integers(-3, 3))
    words = data.draw(
        st.lists(
            st.one_of(near, st.integers().map(str), junk, st.sampled_from(MALFORMED)), max_size=40
        )
    )
    words += [str(a) for a in anchors] + ["0", "-0"]
    check(dfa, words, expect_int(words, lo, hi), (lo, hi))
    if lo is not None and hi is not None and lo > hi:
        assert dfa.n_states == 0


# ---------------------------------------------------------------------------------------
# number ranges


DEC_BOUNDS = [
    None,
    D("-3"),
    D("-2.5"),
    D("-1"),
    D("-0.05"),
    D("0"),
    D("-0"),
    D("0.01"),
    D("0.5"),
    D("0.50"),
    D("5E-1"),
    D("1.000"),
    D("1.25"),
    D("2.99"),
    D("1E+1"),
]


def test_number_ranges_exhaustive() -> None:
    for lo in DEC_BOUNDS:
        for hi in DEC_BOUNDS:
            for xlo in (False, True) if lo is not None else (False,):
                for xhi in (False, True) if hi is not None else (False,):
                    if lo is None and hi is None:
                        continue
                    dfa = number_dfa(lo, hi, exclusive_minimum=xlo, exclusive_maximum=xhi)
                    label = (lo, hi, xlo, xhi)
                    check(dfa, DEC_WORDS, expect_num(DEC_WORDS, lo, hi, xlo, xhi), label)
                    empty = (
                        lo is not None
                        and hi is not None
                        and (lo > hi or (lo == hi and (xlo or xhi)))
                    )
                    assert (dfa.n_states == 0) == empty, label
                    assert_minimal(dfa)


def test_number_exclusive_examples() -> None:
    dfa = number_dfa(D("0.5"), exclusive_minimum=True)
    for w, ok in [
        ("0.5", False),
        ("0.500", False),
        ("0.50001", True),
        ("0.4999999", False),
        ("1", True),
        ("0", False),
        ("-0", False),
        ("01", False),
        ("1.", False),
        (".5", False),
        ("1e5", False),
    ]:
        assert dfa.matches(w.encode()) == ok, w
    dfa = number_dfa(D("-1"), D("0"))
    for w in ("-0", "-0.0", "-0.000", "0", "0.00", "-1", "-1.00", "-0.999"):
        assert dfa.matches(w.encode()), w
    for w in ("-1.0001", "0.0001", "-2", "1"):
        assert not dfa.matches(w.encode()), w
    dfa = number_dfa(D("-1"), D("0"), exclusive_maximum=True)
    for w in ("-0", "-0.0", "0", "0.0"):
        assert not dfa.matches(w.encode()), w
    assert dfa.matches(b"-0.0000001")


def test_number_unbounded_is_the_json_number_grammar() -> None:
    dfa = number_dfa()
    assert equivalent(dfa, python_regex_dfa(FULL_RE))
    assert_minimal(dfa)
    for w in ("1e5", "-0.5E+10", "0e0", "-0"):
        assert dfa.matches(w.encode()), w
    for w in ("1e", "1e+", "01", ".5", "1.", "+1", "--1"):
        assert not dfa.matches(w.encode()), w


def test_number_bounded_has_no_exponent() -> None:
    wide = number_dfa(D("-1E+50"), D("1E+50"))
    assert not wide.matches(b"1e5") and wide.matches(b"100000")
    assert equivalent(number_dfa(D("-1E+50"), D("1E+50")), wide)
    assert number_dfa(0).matches(b"123.456") and not number_dfa(0).matches(b"-0.001")


def test_number_big_and_tiny_bounds() -> None:
    dfa = number_dfa(D("1E-10"), exclusive_minimum=True)
    for w, ok in [
        ("0.0000000001", False),
        ("0.00000000010", False),
        ("0.00000000011", True),
        ("0.0000000002", True),
        ("0.00000000009999", False),
        ("0", False),
        ("1", True),
        ("12345678901234567890.5", True),
    ]:
        assert dfa.matches(w.encode()) == ok, w
    assert dfa.n_states < 40
    dfa = number_dfa(None, D("1E+30"), exclusive_maximum=True)
    assert dfa.matches(b"999999999999999999999999999999.999")
    assert not dfa.matches(b"1" + b"0" * 30)
    assert not dfa.matches(b"1" + b"0" * 30 + b".0")
    assert dfa.matches(b"-" + b"9" * 40)
    assert dfa.n_states < 120
    safe = D(-9007199254740991)
    dfa = number_dfa(safe, D("0.125"))
    assert dfa.matches(b"-9007199254740991") and dfa.matches(b"-9007199254740991.000")
    assert not dfa.matches(b"-9007199254740991.001")
    assert dfa.matches(b"0.125") and not dfa.matches(b"0.1251")
    assert_minimal(dfa)
    # 1E+100000 would need ~100001 states
    with pytest.raises(CompileBudgetError):
        number_dfa(None, D("1E+100000"))
    assert number_dfa(None, D("1E+100"), max_states=500).n_states > 100


def test_number_empty_and_bad_arguments() -> None:
    assert number_dfa(D(1), D(0)).n_states == 0
    assert number_dfa(D("0.5"), D("0.5"), exclusive_minimum=True).n_states == 0
    assert number_dfa(D("0.5"), D("0.50"), exclusive_maximum=True).n_states == 0
    assert number_dfa(D("0.5"), D("0.50")).n_states > 0
    assert number_dfa(D("0.5"), D("0.5000000001"), exclusive_minimum=True).matches(b"0.50000000005")
    for bad in (0.5, True, "1", Fraction(1, 2), D("NaN"), D("Infinity")):
        with pytest.raises(ValueError):
            number_dfa(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        number_dfa(None, D(1), exclusive_minimum=True)
    with pytest.raises(ValueError):
        number_dfa(D(1), exclusive_maximum=True)


def dec(k: int, e: int) -> Decimal:
    return D(f"{k}E{e}")


bounds_dec = st.one_of(
    st.none(),
    st.builds(dec, st.integers(-(10**6), 10**6), st.integers(-8, 8)),
    st.builds(dec, st.integers(-30, 30), st.integers(-3, 1)),
)


def literal_near(b: Decimal, extra: str, bump: int) -> str:
    s = format(b, "f")
    if bump and "." not in s:
        s += "."
    return s + extra + (str(bump) if bump else "")


num_literal = st.builds(
    lambda sign, ip, fp: sign + ip + ("." + fp if fp else ""),
    st.sampled_from(["", "-"]),
    st.one_of(st.integers(0, 30).map(str), st.integers(0, 10**12).map(str)),
    st.one_of(st.just(""), st.text(alphabet="0123456789", min_size=1, max_size=10)),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lo=bounds_dec, hi=bounds_dec, xlo=st.booleans(), xhi=st.booleans(), data=st.data())
def test_number_ranges_random(
    lo: Decimal | None, hi: Decimal | None, xlo: bool, xhi: bool, data: st.DataObject
) -> None:
    xlo = xlo and lo is not None
    xhi = xhi and hi is not None
    dfa = number_dfa(lo, hi, exclusive_minimum=xlo, exclusive_maximum=xhi)
    anchors = [b for b in (lo, hi) if b is not None]
    near = (
        st.builds(
            literal_near,
            st.sampled_from(anchors),
            st.sampled_from(["", "0", "00", "000000"]),
            st.integers(0, 9),
        )
        if anchors
        else num_literal
    )
    words = data.draw(
        st.lists(st.one_of(near, num_literal, junk, st.sampled_from(MALFORMED)), max_size=40)
    )
    words += [format(b, "f") for b in anchors] + ["0", "-0", "-0.0", "0.000"]
    if lo is None and hi is None:
        rx = re.compile(FULL_RE)
        expected = np.array([rx.fullmatch(w) is not None for w in words], bool)
    else:
        expected = expect_num(words, lo, hi, xlo, xhi)
    check(dfa, words, expected, (lo, hi, xlo, xhi))


# ---------------------------------------------------------------------------------------
# multipleOf


@pytest.mark.parametrize("m", [7, 10, 1, 3, 25, 100, D("2.5"), D("0.5"), D("3E+1")])
def test_multiple_of_integer_exhaustive(m: Decimal | int) -> None:
    dfa = multiple_of_dfa(m, integer=True)
    check(dfa, INT_WORDS, expect_mult(INT_WORDS, m, True), m)
    assert not dfa.matches(b"-0")
    assert_minimal(dfa)


@pytest.mark.parametrize(
    "m", [D("0.01"), D("0.5"), D("2.5"), D("0.1"), D("0.10"), D("0.25"), D("0.3"), 7, 10, 1]
)
def test_multiple_of_decimal_exhaustive(m: Decimal | int) -> None:
    words = DEC_WORDS + [f"{i}.{f:03d}" for i in range(3) for f in range(1000)]
    words += ["-0", "-0.0", "0.5000000", "2.5000001", "7.0", "70.00"]
    dfa = multiple_of_dfa(m)
    check(dfa, words, expect_mult(words, m, False), m)
    assert dfa.matches(b"-0") and dfa.matches(b"-0.0") and dfa.matches(b"0.000")
    assert_minimal(dfa)


def test_multiple_of_equivalent_spellings() -> None:
    assert equivalent(multiple_of_dfa(D("0.10")), multiple_of_dfa(D("0.1")))
    assert equivalent(multiple_of_dfa(D("1E+1")), multiple_of_dfa(10))
    assert equivalent(multiple_of_dfa(D("2.5"), integer=True), multiple_of_dfa(5, integer=True))
    assert equivalent(multiple_of_dfa(D("0.01"), integer=True), integer_dfa())
    assert equivalent(multiple_of_dfa(1), python_regex_dfa(r"-?(0|[1-9][0-9]*)(\.0+)?"))


def test_multiple_of_large_factors_stay_small() -> None:
    dfa = multiple_of_dfa(1_000_000, integer=True)
    assert dfa.n_states < 15
    assert dfa.matches(b"-3000000") and not dfa.matches(b"300000")
    dfa = multiple_of_dfa(86_400, integer=True)
    assert dfa.n_states < 300
    for v in (0, 86_400, -172_800, 86_400 * 12345):
        assert dfa.matches(str(v).encode()), v
    for v in (43_200, 86_401, 86_400 * 12345 + 10):
        assert not dfa.matches(str(v).encode()), v
    dfa = multiple_of_dfa(D("1E-30"))
    assert dfa.matches(b"0." + b"0" * 29 + b"1") and not dfa.matches(b"0." + b"0" * 30 + b"1")
    assert dfa.matches(b"0." + b"0" * 29 + b"10000")
    assert dfa.n_states < 50


def test_multiple_of_budget_and_bad_arguments() -> None:
    with pytest.raises(CompileBudgetError):
        multiple_of_dfa(D("1.234567"))
    with pytest.raises(CompileBudgetError):
        multiple_of_dfa(997, max_states=500)
    assert multiple_of_dfa(997, max_states=5000).n_states > 997
    for bad in (0, -3, D(0), D("-0.5"), D("NaN"), 0.5, True, "2"):
        with pytest.raises(ValueError):
            multiple_of_dfa(bad)  # type: ignore[arg-type]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    k=st.integers(1, 400),
    e=st.integers(-3, 3),
    integer=st.booleans(),
    data=st.data(),
)
def test_multiple_of_random(k: int, e: int, integer: bool, data: st.DataObject) -> None:
    m = dec(k, e)
    dfa = multiple_of_dfa(m, integer=integer)
    mult = st.builds(
        lambda q, pad: format(m * q, "f") + pad,
        st.integers(-50, 50),
        st.sampled_from(["", "0", ".0", "00", "1"]),
    )
    words = data.draw(st.lists(st.one_of(mult, num_literal, junk), max_size=40))
    words += ["0", "-0", "0.0", "-0.0"]
    check(dfa, words, expect_mult(words, m, integer), (m, integer))


# ---------------------------------------------------------------------------------------
# combination by the caller


def test_intersect_range_and_multiple() -> None:
    dfa = intersect(integer_dfa(0, 1000), multiple_of_dfa(7, integer=True))
    words = [str(i) for i in range(-50, 1101)] + ["-0", "07", "7.0", "1001"]
    expected = np.array(
        [
            w.lstrip("-").isdigit()
            and INT_RE.fullmatch(w) is not None
            and 0 <= int(w) <= 1000
            and int(w) % 7 == 0
            for w in words
        ]
    )
    check(dfa, words, expected, "0..1000 step 7")
    ref = python_regex_dfa("|".join(str(i) for i in range(0, 1001, 7)))
    assert equivalent(dfa, ref)
    both = intersect(
        number_dfa(D("-1"), D("1"), exclusive_minimum=True), multiple_of_dfa(D("0.25"))
    )
    for w, ok in [("-1", False), ("-0.75", True), ("1.00", True), ("0.5", True), ("0.3", False)]:
        assert both.matches(w.encode()) == ok, w


# ---------------------------------------------------------------------------------------
# a finite set of numbers (an enum's): one automaton, the union of one-value ranges

value_dec = st.one_of(
    st.builds(dec, st.integers(-(10**6), 10**6), st.integers(-8, 8)),
    st.builds(dec, st.integers(-30, 30), st.integers(-3, 1)),
    st.just(D(0)),
)


def _set_matches(dfa: object, word: str) -> bool:
    return dfa.matches(word.encode())  # type: ignore[attr-defined]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(value_dec, min_size=1, max_size=8), data=st.data())
def test_number_set_is_the_union_of_its_values(values: list[Decimal], data: st.DataObject) -> None:
    from corral.grammar.json_schema.number_set import number_set_dfa

    dfa = number_set_dfa(values)
    near = st.builds(
        literal_near,
        st.sampled_from(values),
        st.sampled_from(["", "0", "00", "000000", ".0"]),
        st.integers(0, 9),
    )
    words = data.draw(st.lists(st.one_of(near, num_literal, junk, st.sampled_from(MALFORMED))))
    words += [format(v, "f") for v in values] + ["0", "-0", "-0.0", "0.000"]
    for w in words:
        want = bool(NUM_RE.fullmatch(w)) and D(w) in values
        assert _set_matches(dfa, w) == want, (values, w)


def test_a_large_number_set_is_one_automaton() -> None:
    from corral.grammar.json_schema.number_set import MAX_STEM_BYTES, number_set_dfa, stems

    dfa = number_set_dfa(D(i) for i in range(100_000))
    assert dfa.n_states < 20  # the digits of 0..99999 share every suffix
    for w, want in [("99999", True), ("5.0", True), ("-0", True), ("0.00", True),
                    ("100000", False), ("-1", False), ("5.01", False), ("007", False)]:  # fmt: skip
        assert _set_matches(dfa, w) == want, w
    spread = [D(i) / 1000 for i in range(-50_000, 50_000, 7)]
    sparse = number_set_dfa(spread)
    for v in spread[::97]:
        text = format(v, "f")
        assert _set_matches(sparse, text + ("0" if "." in text else ".0"))
    assert not _set_matches(sparse, "0.0005")
    assert stems([D("1E+2"), D("2.50"), D(0), D("-7.000")]) == [
        b"-0\x00",
        b"-7\x00",
        b"0\x00",
        b"100\x00",
        b"2.5\x01",
    ]
    with pytest.raises(CompileBudgetError, match="digits"):
        stems([D("1E+999"), D("2E+999")], max_bytes=1500)  # 1,000 digits each
    assert MAX_STEM_BYTES >= 10**6
