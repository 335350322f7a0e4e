"""JSON Schema ``format`` regexes: soundness against the RFCs and ``jsonschema``'s checker.

Strings are drawn two ways: random walks over the byte DFA that corral compiles from each
regex, and ``hypothesis.strategies.from_regex``. Each drawn string must satisfy both the
format checker (``Draft202012Validator.FORMAT_CHECKER``) and an independent RFC-level
reference predicate written here. The regexes must also accept common values, agree with
the JSON-Schema-Test-Suite, and compile to small DFAs.
"""

from __future__ import annotations

import calendar
import functools
import ipaddress
import json
import random
import re
import zlib
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from corral.grammar.json_schema.formats import FORMAT_REGEXES, format_regex
from corral.grammar.regex import python_regex_dfa
from corral.grammar.regex.dfa import ByteDFA

CHECKER = Draft202012Validator.FORMAT_CHECKER
SUITE_DIR = Path("/work/shared/data/json-schema-test-suite/tests/draft2020-12/optional/format")
MAX_DFA_STATES = 2_000
FORMATS = sorted(FORMAT_REGEXES)
# The IRI checker (an Earley parser) is slow, so the IRI formats get fewer samples.
SLOW_CHECKER = {"iri", "iri-reference"}


def _checks(name: str) -> bool:
    """Whether this ``jsonschema`` really checks ``name`` (the format extras are installed)."""
    return name in CHECKER.checkers


pytestmark = pytest.mark.skipif(
    not all(_checks(name) for name in FORMATS),
    reason="jsonschema format extras missing: pip install 'jsonschema[format-nongpl]'",
)


@functools.cache
def _dfa(name: str) -> ByteDFA:
    return python_regex_dfa(FORMAT_REGEXES[name])


@functools.cache
def _compiled(name: str) -> re.Pattern[str]:
    return re.compile(FORMAT_REGEXES[name])


def _accepts(name: str, value: str) -> bool:
    return _compiled(name).fullmatch(value) is not None


# --- independent RFC-level reference predicates -------------------------------------------

_ALNUM = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_LDH = _ALNUM | {"-"}
_ASCII_DIGITS = set("0123456789")


def _is_label(label: str) -> bool:
    """RFC 1123 label, not an RFC 5890 reserved LDH label (``--`` at positions 3-4)."""
    return (
        1 <= len(label) <= 63
        and set(label) <= _LDH
        and label[0] != "-"
        and label[-1] != "-"
        and label[2:4] != "--"
    )


def _is_hostname(value: str, max_len: int = 253) -> bool:
    return len(value) <= max_len and all(_is_label(x) for x in value.split("."))


def _is_date(value: str) -> bool:
    if len(value) != 10 or value[4] != "-" or value[7] != "-":
        return False
    y, m, d = value[:4], value[5:7], value[8:]
    if not set(y + m + d) <= _ASCII_DIGITS:
        return False
    year, month, day = int(y), int(m), int(d)
    if not (1 <= year <= 9999 and 1 <= month <= 12):
        return False
    return 1 <= day <= calendar.monthrange(year, month)[1]


_TIME_RE = re.compile(
    r"([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?([Zz]|[+-]([0-9]{2}):([0-9]{2}))"
)


def _is_time(value: str) -> bool:
    m = _TIME_RE.fullmatch(value)
    if m is None:
        return False
    hh, mm, ss = int(m[1]), int(m[2]), int(m[3])
    if not (hh <= 23 and mm <= 59 and ss <= 59):
        return False
    return m[6] is None or (int(m[6]) <= 23 and int(m[7]) <= 59)


def _is_date_time(value: str) -> bool:
    return len(value) > 11 and value[10] in "Tt" and _is_date(value[:10]) and _is_time(value[11:])


def _is_duration(value: str) -> bool:
    """RFC 3339 appendix A, by hand: units in order, no gaps, weeks alone."""

    def units(text: str) -> list[tuple[str, str]] | None:
        out: list[tuple[str, str]] = []
        digits = ""
        for ch in text:
            if ch in _ASCII_DIGITS:
                digits += ch
            elif digits:
                out.append((digits, ch))
                digits = ""
            else:
                return None
        return None if digits else out

    def run(found: list[tuple[str, str]], order: str) -> bool:
        letters = "".join(u for _, u in found)
        return bool(letters) and letters in order and all(n for n, _ in found)

    if not value.startswith("P"):
        return False
    body = value[1:]
    date_part, _, time_part = body.partition("T")
    d, t = units(date_part), units(time_part)
    if d is None or t is None:
        return False
    if "T" in body:
        return run(t, "HMS") and (not d or run(d, "YMD"))
    return run(d, "YMD") or (len(d) == 1 and d[0][1] == "W")


def _is_dot_atom(value: str) -> bool:
    atext = _ALNUM | set("!#$%&'*+/=?^_`{|}~-")
    return all(part and set(part) <= atext for part in value.split("."))


def _is_quoted_local(value: str) -> bool:
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        return False
    inner, i = value[1:-1], 0
    while i < len(inner):
        ch = inner[i]
        if ch == "\\":
            if i + 1 >= len(inner) or not " " <= inner[i + 1] <= "~":
                return False
            i += 2
            continue
        if ch == '"' or not " " <= ch <= "~":
            return False
        i += 1
    return True


def _is_ipv6(value: str) -> bool:
    if "%" in value:
        return False
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


def _ipv6_pieces(value: str) -> int:
    """Explicit 16-bit pieces written in an IPv6 text form (a dotted quad counts two)."""
    parts = [p for p in value.replace("::", ":").split(":") if p]
    return sum(2 if "." in p else 1 for p in parts)


def _is_email(value: str) -> bool:
    """RFC 5321 Mailbox with the section 4.5.3.1 size limits."""
    local, at, domain = value.rpartition("@")
    if not at or len(local.encode()) > 64 or len(value.encode()) > 254:
        return False
    if not (_is_dot_atom(local) or _is_quoted_local(local)):
        return False
    if domain.startswith("[IPv6:") and domain.endswith("]"):
        addr = domain[6:-1]
        # RFC 5321 section 4.1.3: "::" stands for at least two groups.
        return _is_ipv6(addr) and ("::" not in addr or _ipv6_pieces(addr) <= 6)
    if domain.startswith("[") and domain.endswith("]"):
        return _is_ipv4(domain[1:-1])
    return _is_hostname(domain)


def _is_ipv4(value: str) -> bool:
    parts = value.split(".")
    return len(parts) == 4 and all(
        p and set(p) <= _ASCII_DIGITS and int(p) <= 255 and str(int(p)) == p for p in parts
    )


def _is_uuid(value: str) -> bool:
    groups = value.split("-")
    return [len(g) for g in groups] == [8, 4, 4, 4, 12] and all(
        set(g) <= set("0123456789abcdefABCDEF") for g in groups
    )


def _printable_ascii(value: str) -> bool:
    return all("!" <= ch <= "~" for ch in value)


def _no_bad_iri_chars(value: str) -> bool:
    """RFC 3987: no ASCII space or control, no surrogate, nothing outside the BMP here."""
    return all(
        ("!" <= ch <= "~") or ("\u00a0" <= ch <= "\ud7ff") or ("\ue000" <= ch <= "\uffef")
        for ch in value
    )


# The RFC-level predicate per format; the URI family is checked by its character set here
# and by the checker (which implements the RFC 3986/3987 grammars) for its structure.
REFERENCE: dict[str, Callable[[str], bool]] = {
    "date": _is_date,
    "time": _is_time,
    "date-time": _is_date_time,
    "duration": _is_duration,
    "email": _is_email,
    "hostname": _is_hostname,
    "ipv4": _is_ipv4,
    "ipv6": _is_ipv6,
    "uuid": _is_uuid,
    "uri": lambda v: _printable_ascii(v) and re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", v) is not None,
    "uri-reference": _printable_ascii,
    "iri": lambda v: _no_bad_iri_chars(v) and re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", v) is not None,
    "iri-reference": _no_bad_iri_chars,
    # RFC 6570: balanced braces, no characters outside the literal set
    "uri-template": lambda v: v.count("{") == v.count("}") and not set(v) & set(" \"'<>\\^`|"),
    # RFC 6901: empty, or '/'-separated tokens where '~' is always followed by 0 or 1
    "json-pointer": lambda v: (v == "" or v.startswith("/")) and re.search("~(?![01])", v) is None,
    "relative-json-pointer": lambda v: (
        re.match(r"(0|[1-9][0-9]*)(#|/|$)", v) is not None and re.search("~(?![01])", v) is None
    ),
}


# jsonschema's relative-json-pointer check refuses any digit that follows a "0" ("7707"),
# not only a leading zero; the draft's grammar is the reference for that format.
CHECKER_BUGS = {"relative-json-pointer"}


def _assert_valid(name: str, value: str) -> None:
    if name not in CHECKER_BUGS:
        assert CHECKER.conforms(value, name), (name, value, "refused by the format checker")
    assert REFERENCE[name](value), (name, value, "refused by the RFC reference")


# --- drawing strings from the compiled DFA ------------------------------------------------


def _distance_to_accept(dfa: ByteDFA) -> np.ndarray:
    n = dfa.n_states
    dist = np.where(dfa.accept, 0, n + 1)
    changed = True
    while changed:
        nxt = np.where(dfa.trans >= 0, dist[np.maximum(dfa.trans, 0)] + 1, n + 1).min(axis=1)
        new = np.minimum(dist, nxt)
        changed = bool((new != dist).any())
        dist = new
    return dist


def _random_walks(dfa: ByteDFA, count: int, seed: int, soft_cap: int = 120) -> list[str]:
    """``count`` strings of the DFA's language, by random walks that may stop on acceptance.

    Each step picks a random successor state (then a random byte leading there) half of the
    time, and a random byte otherwise, so both rare and common branches get explored. Past
    ``soft_cap`` bytes the walk heads for the nearest accepting state.
    """
    rng = random.Random(seed)
    dist = _distance_to_accept(dfa)
    out = []
    for _ in range(count):
        stop_p = rng.choice([0.02, 0.1, 0.3])
        s, data = 0, bytearray()
        while True:
            row = dfa.trans[s]
            live = np.flatnonzero(row >= 0)
            if dfa.accept[s] and (not len(live) or rng.random() < stop_p or len(data) > soft_cap):
                break
            if len(data) > soft_cap:
                live = live[dist[row[live]] < dist[s]]
            if rng.random() < 0.5:
                target = rng.choice(sorted({int(row[b]) for b in live}))
                live = live[row[live] == target]
            b = int(rng.choice(live.tolist()))
            data.append(b)
            s = int(row[b])
        out.append(data.decode("utf-8"))
    return out


@pytest.mark.parametrize("name", FORMATS)
def test_dfa_walks_are_valid(name: str) -> None:
    """Strings of the compiled DFA: valid for the checker and the RFC, and the regex agrees."""
    dfa = _dfa(name)
    count = 300 if name in SLOW_CHECKER else 1500
    for value in _random_walks(dfa, count, seed=zlib.crc32(name.encode())):
        assert _accepts(name, value), (name, value, "DFA and regex disagree")
        _assert_valid(name, value)


@pytest.mark.parametrize("name", FORMATS)
def test_dfa_size(name: str) -> None:
    assert 0 < _dfa(name).n_states < MAX_DFA_STATES


# --- drawing strings with hypothesis --------------------------------------------------------


@pytest.mark.parametrize("name", FORMATS)
def test_hypothesis_from_regex_is_valid(name: str) -> None:
    @settings(
        max_examples=50 if name in SLOW_CHECKER else 200,
        deadline=None,
        suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
        database=None,
    )
    @given(st.from_regex(FORMAT_REGEXES[name], fullmatch=True))
    def check(value: str) -> None:
        assert _dfa(name).matches(value.encode("utf-8")), (name, value)
        _assert_valid(name, value)

    check()


# --- common values and edge cases ------------------------------------------------------------

COMMON_VALID = {
    "date": ["2024-02-29", "2000-02-29", "0400-02-29", "1963-06-19", "2023-12-31", "0001-01-01"],
    "time": ["23:59:59Z", "08:30:06.283185z", "12:34:56-00:00", "00:00:00+23:59"],
    "date-time": [
        "2023-12-31T23:59:59Z",
        "2023-12-31T23:59:59.123+05:30",
        "1963-06-19t08:30:06.283185z",
        "2024-02-29T00:00:00-08:00",
    ],
    "duration": [
        "P1Y2M3DT4H5M6S",
        "P1W",
        "P2W",
        "PT0S",
        "P0D",
        "PT36H",
        "P1DT12H",
        "P1Y2M",
        "P1M2D",
        "PT1M2S",
        "P01D",
    ],
    "email": [
        "user.name+tag@example.co.uk",
        "joe.bloggs@example.com",
        "te~st@example.com",
        "x@localhost",
        '"joe bloggs"@example.com',
        '"joe\\"q"@example.com',
        "joe.bloggs@[127.0.0.1]",
        "joe.bloggs@[IPv6:::1]",
        "a" * 64 + "@example.com",
    ],
    "hostname": [
        "example.com",
        "a-b.c",
        "www.example.com",
        "hostname",
        "1host",
        "a--b.com",
        "my-service.us-east-1.elb.amazonaws.com",
        "4.3.2.1.in-addr.arpa",
        "a" * 63 + ".com",
        ".".join(["a" * 63] * 3 + ["b" * 61]),
    ],
    "ipv4": ["192.168.0.1", "0.0.0.0", "255.255.255.255", "10.20.30.40"],
    "ipv6": [
        "::1",
        "::",
        "2001:db8::8a2e:370:7334",
        "::ffff:192.0.2.128",
        "1:2:3:4:5:6:7:8",
        "1:2:3:4:5:6:7::",
        "::2:3:4:5:6:7:8",
        "1:2:3:4:5::1.2.3.4",
        "1000:1000:1000:1000:1000:1000:255.255.255.255",
        "FE80::ABCD",
    ],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000", "2EB8AA08-AA98-11EA-B4AA-73B441D16380"],
    "uri": [
        "https://example.com/path?q=1#frag",
        "urn:isbn:0451450523",
        "mailto:John.Doe@example.com",
        "http://[2001:db8::7]/c=GB?objectClass?one",
        "http://[v1.fe]/",
        "file:///etc/hosts",
        "http://user:pw@host:8080/a%20b",
        "x:",
    ],
    "uri-reference": [
        "../relative/path",
        "#frag",
        "",
        "?query=1",
        "//",
        "/abc",
        "./this:that",
        "https://example.com/path?q=1#frag",
    ],
    "iri": [
        "http://ƒøø.ßår/?∂éœ=πîx#πîüx",
        "https://example.com/path?q=1#frag",
        "http://[2001:0db8:85a3:0000:0000:8a2e:0370:7334]",
        "urn:example:resource",
        "http://例え.jp/パス?\ue000",
    ],
    "iri-reference": ["/âππ", "âππ", "#ƒrägmênt", "", "../relative/path"],
    "uri-template": ["http://example.com/{id}", "/search{?q,lang}", "{+path}/x{#frag}", "x{a:3}"],
    "json-pointer": ["", "/", "/a/b", "/a~1b/~0c", "/0"],
    "relative-json-pointer": ["0", "1#", "2/a/b", "10/0"],
}

COMMON_INVALID = {
    "date": [
        "2021-02-29",
        "1900-02-29",
        "2100-02-29",
        "0000-01-01",
        "2020-04-31",
        "2020-13-01",
        "2020-1-01",
        "২020-01-01",
    ],
    "time": ["23:59:60Z", "24:00:00Z", "12:00:00", "01:02:03+24:00", "08:30:06 PST"],
    "date-time": ["2023-12-31 23:59:59Z", "1990-02-31T15:59:59Z", "2023-12-31T23:59:59"],
    "duration": ["PT0.5S", "P1Y2D", "PT1H2S", "P1Y2W", "P1WT1H", "P", "PT", "P1YT", "-P1D"],
    "email": [
        "2962",
        ".test@example.com",
        "te..st@example.com",
        "test.@example.com",
        "joe.bloggs@invalid=domain.com",
        "joe.bloggs@[127.0.0.300]",
        "a" * 65 + "@example.com",
        "joe.bloggs@[IPv6:1:2:3:4:5:6::8]",
    ],
    "hostname": [
        "",
        "-a.com",
        "a-.com",
        "example.",
        ".example",
        "host_name",
        "xn--X",
        "a" * 64 + ".com",
        ".".join(["a" * 63] * 4),
    ],
    "ipv4": ["256.1.1.1", "01.1.1.1", "1.2.3", "1.2.3.4.5", "0x7f.0.0.1"],
    "ipv6": ["12345::", "1::2::3", "1:2:3:4:5:6:7", "::ffff:192.168.0.01", "fe80::a%eth1"],
    "uuid": ["123e4567e89b12d3a456426614174000", "urn:uuid:123e4567-e89b-12d3-a456-426614174000"],
    "uri": ["/abc", "abc", "http://example.com/%6G", "1http://example.com", "http://a b"],
    "uri-reference": ["1:b", '/a"b', "\\\\WINDOWS\\fileshare", "/[::1]"],
    "iri": ["/abc", "http://ƒøø.ßår/\n", "http://ƒøø.ßår/𐌀"],
    "iri-reference": ["#ƒräg\\mênt", "a b"],
    "uri-template": ["http://example.com/resource/{", "{a b}", "{}", "a}b", "{@a}"],
    "json-pointer": ["a", "/a~2", "#/a"],
    "relative-json-pointer": ["", "01", "-1", "/a", "1#/a"],
}


@pytest.mark.parametrize("name", FORMATS)
def test_common_values(name: str) -> None:
    dfa = _dfa(name)
    for value in COMMON_VALID[name]:
        assert _accepts(name, value), (name, value, "common valid value refused")
        assert dfa.matches(value.encode()), (name, value)
        _assert_valid(name, value)
    for value in COMMON_INVALID[name]:
        assert not _accepts(name, value), (name, value, "invalid value accepted")
        assert not dfa.matches(value.encode()), (name, value)


def test_format_regex_lookup() -> None:
    assert format_regex("date") == FORMAT_REGEXES["date"]
    assert format_regex("idn-hostname") is None
    assert format_regex("no-such-format") is None


def test_leap_years_exhaustive() -> None:
    rx = _compiled("date")
    for year in range(10_000):
        accepted = rx.fullmatch(f"{year:04d}-02-29") is not None
        assert accepted == (year > 0 and calendar.isleap(year)), year


def test_dates_exhaustive_for_sample_years() -> None:
    rx = _compiled("date")
    for year in (1, 4, 100, 400, 1900, 1999, 2000, 2023, 2024, 2100, 9999):
        for month in range(0, 14):
            for day in range(0, 33):
                value = f"{year:04d}-{month:02d}-{day:02d}"
                try:
                    expected = date(year, month, day) is not None
                except ValueError:
                    expected = False
                assert (rx.fullmatch(value) is not None) == expected, value


def test_times_exhaustive_offsets_and_seconds() -> None:
    rx = _compiled("time")
    for hh in range(25):
        for ss in (0, 59, 60):
            for off in ("Z", "z", "+00:00", "-23:59", "+24:00", "+00:60"):
                value = f"{hh:02d}:59:{ss:02d}{off}"
                expected = hh <= 23 and ss <= 59 and off not in ("+24:00", "+00:60")
                assert (rx.fullmatch(value) is not None) == expected, value
                if expected:
                    assert datetime.fromisoformat("2000-01-01T" + value.upper())


def test_hostname_small_strings_exhaustive() -> None:
    """All strings over ``a - .`` up to 8 characters: sound, and exact up to 3 labels."""
    import itertools

    rx = _compiled("hostname")
    for n in range(9):
        for chars in itertools.product("a-.", repeat=n):
            value = "".join(chars)
            got = rx.fullmatch(value) is not None
            ref = _is_hostname(value)
            if got:
                assert ref and CHECKER.conforms(value, "hostname"), value
            if value.count(".") <= 2:
                assert got == ref, value


def test_hostname_length_limits() -> None:
    rx = _compiled("hostname")
    assert rx.fullmatch(".".join(["a" * 63] * 3 + ["b" * 61]))  # 253 octets
    assert not rx.fullmatch(".".join(["a" * 63] * 3 + ["b" * 62]))  # 254 octets
    assert rx.fullmatch(".".join(["a"] * 32))  # 63 octets in 32 labels
    # The documented narrowing: past the third label, at most 61 more octets.
    assert rx.fullmatch(".".join(["a"] * 34))  # "a.a.a." + 61 octets
    assert not rx.fullmatch(".".join(["a"] * 35))
    assert _is_hostname(".".join(["a"] * 127)) and not rx.fullmatch(".".join(["a"] * 127))


def test_ipv6_every_compression() -> None:
    """Every placement of ``::`` over 0-8 groups, with and without a dotted quad."""
    rx = _compiled("ipv6")
    for total in range(9):
        groups = [f"{i + 1:x}" for i in range(total)]
        for cut in range(total + 1):
            value = ":".join(groups[:cut]) + "::" + ":".join(groups[cut:])
            assert (rx.fullmatch(value) is not None) == (total <= 7), value
            if total <= 7:
                assert CHECKER.conforms(value, "ipv6"), value
    for total in range(2, 9):
        groups = [f"{i + 1:x}" for i in range(total - 2)]
        for cut in range(total - 1):
            value = ":".join(groups[:cut]) + "::" + ":".join([*groups[cut:], "1.2.3.4"])
            assert (rx.fullmatch(value) is not None) == (total <= 7), value
            if total <= 7:
                assert CHECKER.conforms(value, "ipv6"), value


# --- the JSON-Schema-Test-Suite ---------------------------------------------------------------


def _suite_counts() -> dict[str, tuple[int, int, int, int]]:
    """Per format: (accepted valid, refused valid, accepted invalid, refused invalid)."""
    counts: dict[str, tuple[int, int, int, int]] = {}
    for name in FORMATS:
        path = SUITE_DIR / f"{name}.json"
        if not path.exists():
            continue
        acc_v = rej_v = acc_i = rej_i = 0
        for group in json.loads(path.read_text()):
            for case in group["tests"]:
                value = case["data"]
                if not isinstance(value, str):
                    continue
                got = _accepts(name, value)
                assert got == _dfa(name).matches(value.encode("utf-8", "surrogatepass")), value
                if case["valid"]:
                    acc_v, rej_v = acc_v + got, rej_v + (not got)
                else:
                    acc_i, rej_i = acc_i + got, rej_i + (not got)
        counts[name] = (acc_v, rej_v, acc_i, rej_i)
    return counts


@pytest.mark.skipif(not SUITE_DIR.is_dir(), reason=f"JSON-Schema-Test-Suite not at {SUITE_DIR}")
def test_json_schema_test_suite() -> None:
    counts = _suite_counts()
    assert set(counts) == set(FORMATS)
    for name, (acc_v, _rej_v, acc_i, _rej_i) in counts.items():
        assert acc_i == 0, f"{name}: accepts a value the test suite marks invalid"
        assert acc_v > 0, name
