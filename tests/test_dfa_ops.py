"""Byte-DFA operations (trim, product, difference, quoting, byte classes) against brute force.

Random small DFAs over a few bytes are checked on every string up to a length bound:
the language of each result must be exactly the set operation of its operands' languages,
and every state of a result must be reachable and live (the :class:`ByteDFA` invariant).
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral import Grammar
from corral.grammar.follow import nullable_nonterminals
from corral.grammar.json_schema.load import _declares_identifiers, load_schema
from corral.grammar.json_schema.strings import counted_body, plain_string, unit_dfa
from corral.grammar.regex import literal_dfa, python_regex_dfa
from corral.grammar.regex.dfa import (
    ByteDFA,
    column_classes,
    dfa_of_columns,
    difference,
    difference_of_literals,
    intersect,
    minimal_dfa,
    minimize,
    quoted,
    trim,
    union_of_literals,
)

ALPHABET = (0x61, 0x62, 0x63)  # a b c
MAX_LEN = 5


def strings() -> list[bytes]:
    return [bytes(p) for n in range(MAX_LEN + 1) for p in itertools.product(ALPHABET, repeat=n)]


@st.composite
def raw_dfas(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """An arbitrary (untrimmed) DFA over ``ALPHABET``: ``(trans [n, 256], accept [n])``."""
    n = draw(st.integers(1, 6))
    trans = np.full((n, 256), -1, np.int32)
    for s in range(n):
        for b in ALPHABET:
            trans[s, b] = draw(st.integers(-1, n - 1))
    accept = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    return trans, accept


def run(trans: np.ndarray, accept: np.ndarray, data: bytes) -> bool:
    if trans.shape[0] == 0:
        return False
    s = 0
    for b in data:
        s = int(trans[s, b])
        if s < 0:
            return False
    return bool(accept[s])


def language(trans: np.ndarray, accept: np.ndarray) -> set[bytes]:
    return {w for w in strings() if run(trans, accept, w)}


def as_dfa(raw: tuple[np.ndarray, np.ndarray]) -> ByteDFA:
    t, a = trim(*raw)
    if t.shape[0]:
        t, a = minimize(t, a)
    return ByteDFA(t, a)


def assert_trimmed(d: ByteDFA) -> None:
    """Every state is reachable from 0 and reaches an accepting state."""
    n = d.n_states
    if n == 0:
        return
    t, a = trim(d.trans, d.accept)
    assert t.shape[0] == n and np.array_equal(a, d.accept)


@settings(max_examples=150, deadline=None)
@given(raw_dfas())
def test_trim_keeps_the_language_and_only_useful_states(raw: tuple[np.ndarray, np.ndarray]) -> None:
    t, a = trim(*raw)
    assert language(t, a) == language(*raw)
    assert_trimmed(ByteDFA(t, a))
    if t.shape[0]:
        assert t.shape[1] == 256
    # the states kept are renumbered in their order: each row is the row it was, its
    # targets renamed and those into dropped states dead
    trans, accept = raw
    live = [s for s in range(trans.shape[0]) if _useful(trans, accept, s)]
    if 0 not in live:
        assert t.shape[0] == 0
        return
    new_id = {s: i for i, s in enumerate(live)}
    want = np.array([[new_id.get(int(x), -1) for x in trans[s]] for s in live], np.int32)
    assert np.array_equal(t, want) and np.array_equal(a, accept[live])


def _useful(trans: np.ndarray, accept: np.ndarray, s: int) -> bool:
    """Whether state ``s`` is reachable from 0 and reaches an accepting state (a search
    over the edges, independent of the kernels)."""

    def reach(src: int, edges: dict[int, set[int]]) -> set[int]:
        seen, todo = {src}, [src]
        while todo:
            for y in edges.get(todo.pop(), ()):
                if y not in seen:
                    seen.add(y)
                    todo.append(y)
        return seen

    fwd: dict[int, set[int]] = {}
    for x in range(trans.shape[0]):
        fwd[x] = {int(y) for y in trans[x] if y >= 0}
    return s in reach(0, fwd) and any(accept[y] for y in reach(s, fwd))


@settings(max_examples=150, deadline=None)
@given(raw_dfas(), raw_dfas())
def test_intersect_and_difference_are_the_set_operations(
    x: tuple[np.ndarray, np.ndarray], y: tuple[np.ndarray, np.ndarray]
) -> None:
    a, b = as_dfa(x), as_dfa(y)
    la, lb = language(a.trans, a.accept), language(b.trans, b.accept)
    for minimal in (True, False):
        both = intersect(a, b, minimal=minimal)
        assert language(both.trans, both.accept) == la & lb
        assert_trimmed(both)
        rest = difference(a, b, minimal=minimal)
        assert language(rest.trans, rest.accept) == la - lb
        assert_trimmed(rest)


@settings(max_examples=200, deadline=None)
@given(raw_dfas(), st.lists(st.binary(max_size=4).map(lambda w: bytes(ALPHABET[x % 3] for x in w))))
def test_difference_of_literals_is_the_difference_with_their_union(
    x: tuple[np.ndarray, np.ndarray], words: list[bytes]
) -> None:
    a = as_dfa(x)
    la = language(a.trans, a.accept)
    for minimal in (True, False):
        rest = difference_of_literals(a, words, minimal=minimal)
        assert language(rest.trans, rest.accept) == la - set(words)
        assert_trimmed(rest)
        if minimal:
            same = difference(a, union_of_literals(words)) if words else a
            assert rest.n_states == same.n_states
        assert _same_compact(rest, _difference_of_literals_full(a, words, minimal))


def test_difference_of_literals_drops_paths_through_columns_no_byte_reads() -> None:
    """``a`` reads ``a`` and ``c`` alike (one column); both are words, so each gets a
    column of its own and the shared one is read by no byte: the state it seemed to keep
    alive is trimmed, and nothing is left."""
    trans = np.full((2, 256), -1, np.int32)
    trans[0, [0x61, 0x63]] = 1
    a = ByteDFA(trans, np.array([False, True]))
    for minimal in (False, True):
        assert difference_of_literals(a, [b"a", b"c"], minimal=minimal).n_states == 0
        rest = difference_of_literals(a, [b"a"], minimal=minimal)
        assert rest.matches(b"c") and not rest.matches(b"a")
        assert_trimmed(rest)


def _difference_of_literals_full(a: ByteDFA, words: list[bytes], minimal: bool) -> ByteDFA:
    """``difference_of_literals`` built over all 256 bytes, then compacted (the
    reference)."""
    if a.n_states == 0:
        return ByteDFA.empty()
    a_trans = a.trans
    state_of, children, is_word = [0], [{}], [False]
    for w in words:
        node, s = 0, 0
        for byte in w:
            s = int(a_trans[s, byte])
            if s < 0:
                break
            if byte not in children[node]:
                children[node][byte] = len(state_of)
                state_of.append(s)
                children.append({})
                is_word.append(False)
            node = children[node][byte]
        else:
            is_word[node] = True
    k = len(state_of)
    on_trie = np.array(state_of, np.int64)
    rows = a_trans[on_trie]
    trans = np.concatenate(
        [np.where(rows >= 0, rows + k, -1), np.where(a_trans >= 0, a_trans + k, -1)]
    )
    for node, kids in enumerate(children):
        for byte, child in kids.items():
            trans[node, byte] = child
    accept = np.concatenate([a.accept[on_trie] & ~np.array(is_word), a.accept])
    trans, accept = trim(trans.astype(np.int32), accept)
    if trans.shape[0] == 0:
        return ByteDFA.empty()
    return (minimal_dfa(trans, accept) if minimal else ByteDFA(trans, accept)).compacted()


def test_difference_of_literals_on_json_keys() -> None:
    """The keys of an object other than its listed properties, as the object emitter
    builds them: every listed name refused, its prefixes and extensions kept."""
    keys = plain_string(0, None)
    listed = [b'"name"', b'"nam"', b'"n\\u00e9"', b'"\xc3\xa9t\xc3\xa9"']
    rest = difference_of_literals(keys, listed, minimal=False)
    for w in listed:
        assert run(keys.trans, keys.accept, w) and not run(rest.trans, rest.accept, w)
    for w in [b'"na"', b'"names"', b'"n"', b'""', b'"\xc3\xa9t\xc3"']:
        assert run(rest.trans, rest.accept, w) == run(keys.trans, keys.accept, w)
    for minimal in (False, True):
        got = difference_of_literals(keys, listed, minimal=minimal)
        assert _same_compact(got, _difference_of_literals_full(keys, listed, minimal))
    assert (
        difference_of_literals(keys, listed).n_states
        == difference(keys, union_of_literals(listed)).n_states
    )


@settings(max_examples=100, deadline=None)
@given(raw_dfas())
def test_quoted_reads_the_body_between_quotes(raw: tuple[np.ndarray, np.ndarray]) -> None:
    body = as_dfa(raw)
    q = quoted(body, quote=0x22)
    assert_trimmed(q)
    lb = language(body.trans, body.accept)
    for w in strings():
        if len(w) <= MAX_LEN - 2:
            assert q.matches(b'"' + w + b'"') == (w in lb)
    assert not q.matches(b"") and not q.matches(b'"')


def _quoted_full(body: ByteDFA, quote: int, minimal: bool) -> ByteDFA:
    """``quoted`` built over all 256 bytes, then compacted (the reference)."""
    n = body.n_states
    bt = body.trans
    if np.any(bt[body.accept, quote] >= 0):
        raise ValueError("reads the quote")
    trans = np.full((n + 2, 256), -1, np.int32)
    trans[0, quote] = 1
    trans[1 : n + 1] = np.where(bt >= 0, bt + 1, -1)
    trans[np.flatnonzero(body.accept) + 1, quote] = n + 1
    accept = np.zeros(n + 2, bool)
    accept[n + 1] = True
    return (minimal_dfa(trans, accept) if minimal else ByteDFA(trans, accept)).compacted()


def _same_compact(a: ByteDFA, b: ByteDFA) -> bool:
    (ta, ca), (tb, cb) = a.columns(), b.columns()
    return np.array_equal(ta, tb) and np.array_equal(ca, cb) and np.array_equal(a.accept, b.accept)


@settings(max_examples=150, deadline=None)
@given(raw_dfas(), st.sampled_from([0x00, 0x22, 0x61, 0xFF]), st.booleans())
def test_quoted_is_the_construction_over_all_bytes(
    raw: tuple[np.ndarray, np.ndarray], quote: int, minimal: bool
) -> None:
    """Built over the body's byte classes (the quote byte split off its class, or alone
    in it), ``quoted`` gives the canonical compact arrays of the 256-byte construction."""
    body = as_dfa(raw)
    if body.n_states == 0:
        return
    try:
        want = _quoted_full(body, quote, minimal)
    except ValueError:
        with pytest.raises(ValueError, match="quote"):
            quoted(body, quote, minimal=minimal)
        return
    assert _same_compact(quoted(body, quote, minimal=minimal), want)


@pytest.mark.parametrize("pattern", ['[a"]b', "[!-~]{2}", '(?:[0-9"]{3})+x'])
@pytest.mark.parametrize("minimal", [False, True])
def test_quoted_splits_the_quote_byte_off_its_class(pattern: str, minimal: bool) -> None:
    """Bodies that read the quote byte (not where they may end) as they read other bytes."""
    body = python_regex_dfa(pattern)
    assert np.count_nonzero(body.columns()[1] == body.columns()[1][0x22]) > 1
    q = quoted(body, minimal=minimal)
    assert _same_compact(q, _quoted_full(body, 0x22, minimal))
    if pattern == '[a"]b':
        assert q.matches(b'""b"') and q.matches(b'"ab"') and not q.matches(b'"b"')


def _counted_full(lo: int, hi: int | None) -> ByteDFA:
    """Encoded JSON string bodies of ``lo`` to ``hi`` characters, built row by row over
    all 256 bytes (the reference for ``counted_body``)."""
    u = unit_dfa()
    top = lo if hi is None else hi
    nu = u.n_states
    trans = np.full(((top + 1) * nu, 256), -1, np.int32)
    accept = np.zeros((top + 1) * nu, bool)
    ut = u.trans
    for k in range(top + 1):
        for s in range(nu):
            for b in range(256):
                t = int(ut[s, b])
                if t < 0:
                    continue
                if u.accept[t]:  # the unit is complete
                    k2 = k if hi is None and k == top else k + 1
                    trans[k * nu + s, b] = k2 * nu if k2 <= top else -1
                else:
                    trans[k * nu + s, b] = k * nu + t
        accept[k * nu] = k >= lo
    return ByteDFA(*trim(trans, accept)).compacted()


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(0, None), (0, 0), (0, 1), (1, 1), (2, None), (3, 7), (0, 40), (12, None), (1, 255)],
)
def test_counted_bodies_are_the_construction_over_all_bytes(lo: int, hi: int | None) -> None:
    d = counted_body(lo, hi)
    assert _same_compact(d, _counted_full(lo, hi))
    assert d.matches(b"x" * lo) and (hi is None or not d.matches(b"x" * (hi + 1)))
    assert d.matches("é".encode() * max(lo, 1)) == (hi is None or hi >= max(lo, 1))
    # the quote byte shares its class in the body (it follows a backslash as `n` does)
    for minimal in (False, True):
        assert _same_compact(quoted(d, minimal=minimal), _quoted_full(d, 0x22, minimal))


@settings(max_examples=100, deadline=None)
@given(raw_dfas(), st.integers(256, 520))
def test_column_classes_rebuild_the_table(raw: tuple[np.ndarray, np.ndarray], width: int) -> None:
    trans = np.full((raw[0].shape[0], width), -1, np.int32)
    trans[:, :256] = raw[0]
    small, cls = column_classes(trans)
    assert cls.shape == (width,) and cls[0] == 0
    assert np.array_equal(small[:, cls], trans)
    # distinct classes are distinct columns
    assert len({small[:, c].tobytes() for c in range(small.shape[1])}) == small.shape[1]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_dfa_of_columns_is_the_compact_form_over_all_bytes(data: st.DataObject) -> None:
    """An automaton given over columns (some read by no byte, several by one class of
    bytes) comes out, not minimised, as the canonical compact form of its table spread
    over the 256 bytes and trimmed: the same states, in the same order, the same
    columns (:func:`.product.compact_form`, one kernel)."""
    n = data.draw(st.integers(1, 7))
    k = data.draw(st.integers(1, 6))
    trans = np.array(
        [[data.draw(st.integers(-1, n - 1)) for _ in range(k)] for _ in range(n)], np.int32
    )
    accept = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    runs = data.draw(st.lists(st.integers(0, k - 1), min_size=1, max_size=6))
    # byte b reads a column in runs of bytes, so classes span several bytes
    byte_col = np.array([runs[b * len(runs) // 256] for b in range(256)], np.int64)
    got = dfa_of_columns(trans, byte_col, accept, minimal=False)
    t, a = trim(np.ascontiguousarray(trans[:, byte_col]), accept)
    if t.shape[0] == 0:
        assert got.n_states == 0
        return
    table, classes = column_classes(t)
    got_table, got_classes = got.columns()
    assert np.array_equal(got_table, table) and np.array_equal(got_classes, classes)
    assert np.array_equal(got.accept, a)
    assert got_classes.dtype == np.uint8 and got.accept.dtype == np.bool_


def test_shared_automata_are_read_only() -> None:
    """Process-wide cached automata are shared by every grammar: nobody may write them."""
    d = plain_string(0, 3)
    assert d is plain_string(0, 3)
    with pytest.raises(ValueError):
        d.trans[0, 0] = 5
    assert d.matches(b'"abc"') and not d.matches(b'"abcd"')


@settings(max_examples=100, deadline=None)
@given(raw_dfas())
def test_the_compact_form_is_the_same_automaton(raw: tuple[np.ndarray, np.ndarray]) -> None:
    """``compacted()`` keeps every transition; its ``trans`` and rows are read-only, and
    operations take either form alike (``minimal_dfa`` is ``minimize`` compacted)."""
    full = as_dfa(raw)
    small = full.compacted()
    assert small.compacted() is small
    assert np.array_equal(small.trans, full.trans) and np.array_equal(small.accept, full.accept)
    if full.n_states:
        assert all(np.array_equal(small.row(s), full.trans[s]) for s in range(full.n_states))
        assert small.nbytes < full.nbytes
        with pytest.raises(ValueError):
            small.trans[0, 0] = 5
        t, a = trim(*raw)
        m = minimal_dfa(t, a)
        assert np.array_equal(m.trans, full.trans) and np.array_equal(m.accept, full.accept)
        # the compact form is canonical whichever way it was built (fingerprints hash it)
        canonical = column_classes(full.trans)
        for d in (small, m):
            assert all(np.array_equal(x, y) for x, y in zip(d.columns(), canonical, strict=True))
    other = as_dfa(raw).compacted()
    assert language(intersect(small, other).trans, intersect(small, other).accept) == language(
        full.trans, full.accept
    )


@pytest.mark.parametrize("text", ["", "a", "name", "aaa", "h\u00e9llo\x00!", "\U0001f600x"])
def test_literal_dfas(text: str) -> None:
    """A literal's compact automaton reads its UTF-8 bytes and nothing else."""
    _check_literal(text)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from('ab\x00\u00e9\U0001f600 "\n'), max_size=90))
def test_literal_dfas_of_any_text(text: str) -> None:
    _check_literal(text)


def _check_literal(text: str) -> None:
    d = literal_dfa(text)
    data = text.encode()
    want = np.full((len(data) + 1, 256), -1, np.int32)
    want[np.arange(len(data)), list(data)] = np.arange(1, len(data) + 1)
    assert np.array_equal(d.trans, want)
    assert d.accept.tolist() == [False] * len(data) + [True]
    canonical = column_classes(want)
    assert all(np.array_equal(x, y) for x, y in zip(d.columns(), canonical, strict=True))
    assert literal_dfa(text) is d or len(data) > 64  # short literals are shared
    with pytest.raises(ValueError):
        d.accept[0] = True
    assert not any(a.flags.writeable for a in d.stored_columns())  # shared: read-only


def test_grammars_keep_their_terminals_compact() -> None:
    """A grammar keeps each terminal's automaton in the compact form (a tenth of 256
    columns a state here), and its fingerprint is the same whichever form it is given."""
    g = Grammar.from_regex(r"[a-z]{1,40}@[a-z]{1,40}\.(com|org)")
    (t,) = g.terminals.values()
    assert isinstance(t.dfa, ByteDFA)
    assert t.dfa.nbytes < t.dfa.n_states * 256 * 4 / 10
    again = Grammar({t.name: dataclasses.replace(t, dfa=ByteDFA(t.dfa.trans.copy(), t.dfa.accept))},
                    g.rules, g.start)  # fmt: skip
    assert again.fingerprint == g.fingerprint


def _naive_nullable(prods: list[tuple[int, list[int]]], NT: int, NN: int) -> list[bool]:
    nullable = [False] * NN
    changed = True
    while changed:
        changed = False
        for lhs, rhs in prods:
            if not nullable[lhs] and all(s >= NT and nullable[s - NT] for s in rhs):
                nullable[lhs] = changed = True
    return nullable


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_nullable_worklist_matches_the_fixpoint(data: st.DataObject) -> None:
    NT, NN = 2, data.draw(st.integers(1, 6))
    sym = st.integers(0, NT + NN - 1)
    prods = data.draw(
        st.lists(st.tuples(st.integers(0, NN - 1), st.lists(sym, max_size=3)), max_size=12)
    )
    assert nullable_nonterminals(prods, NT, NN) == _naive_nullable(prods, NT, NN)


def test_identifier_scan_finds_nested_ids_and_anchors() -> None:
    assert not _declares_identifiers({"properties": {"id": {"type": "string"}}})
    assert _declares_identifiers({"$defs": {"a": {"$anchor": "x"}}})
    assert _declares_identifiers({"items": [{"$id": "http://x/y"}]})
    assert _declares_identifiers({"definitions": {"a": {"id": "#x"}}})


def test_anchor_and_embedded_id_references_still_resolve() -> None:
    """References that need the registry crawled (anchors, embedded ``$id``) resolve."""
    schema = {
        "$defs": {
            "a": {"$anchor": "thing", "type": "integer"},
            "b": {"$id": "http://example.com/b", "type": "string"},
        },
        "properties": {"x": {"$ref": "#thing"}, "y": {"$ref": "http://example.com/b"}},
    }
    loaded = load_schema(schema)
    resolver = loaded.registry.resolver()
    assert resolver.lookup("urn:corral:root#thing").contents["type"] == "integer"
    assert resolver.lookup("http://example.com/b").contents["type"] == "string"


@pytest.mark.parametrize(("count", "stored"), [(32_766, np.int16), (32_767, np.int32)])
def test_compact_tables_are_stored_narrow_and_given_out_as_int32(count: int, stored: type) -> None:
    """A compact automaton's table is ``int16`` while its states fit (at most 32,767) and
    ``int32`` past that; every accessor gives ``int32``, the same numbers either way."""
    from corral.grammar.regex import python_regex_dfa

    d = python_regex_dfa(f"[ab]{{0,{count}}}").compacted()
    assert d.n_states == count + 1
    table, classes = d.stored_columns()
    assert table.dtype == stored
    wide, same_classes = d.columns()
    assert wide.dtype == np.int32 and np.array_equal(wide, table) and same_classes is classes
    assert d.trans.dtype == np.int32 and d.row(count - 1).dtype == np.int32
    assert d.row(count - 1)[ord("a")] == count and d.row(count)[ord("a")] == -1
    assert d.matches(b"ab" * (count // 2)) and not d.matches(b"a" * (count + 1))
