"""The global lexer table (``automata/tables.py``): every dense terminal's automaton, byte
by byte, in the coarsest byte classes.

Checked against the definition, not against another layout: for every terminal, state
and byte, ``lex_trans[start + s, byte_class[b]]`` is the terminal's own next state moved
to ``start`` (or ``-1``; the trap where the terminal forbids its lexeme to end before
``b``; nothing at all for a terminal that stands for a special token), and two bytes
share a class only when every row reads them alike.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.automata.kernels.layout import H_TRAP
from corral.automata.lexer_layout import TRAP_MARK, lay_out
from corral.automata.tables import build_tables
from corral.grammar.ir import Grammar
from corral.grammar.json_schema import grammar_from_json_schema
from corral.grammar.regex import ByteDFA

GRAMMARS = Path(__file__).parent / "data" / "grammars"

SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
            "n": {"type": "integer", "minimum": -5, "maximum": 300},
            "kind": {"enum": ["a", "b", "long value", 3.5]},
        },
        "required": ["name"],
    },
    {"type": "array", "items": {"type": "string", "format": "date"}, "maxItems": 4},
]
LARK = [
    # a lookahead at a terminal's end: its lexeme may not end before [a-z] (the trap)
    'start: (OP | NAME | WS)+\nOP: /[+*]|[?](?![a-z])/\nNAME: /[a-z]+/\nWS: " "\n',
    "start: A B\nA: /a+(?!b)/\nB: /[a-z]+/\n",
]


def _check(grammar: Grammar, special: dict[str, int] | None = None) -> None:
    special = special or {}
    t = build_tables(grammar, special)
    lt, cls = t.lex_trans, t.byte_class()
    assert lt.flags.c_contiguous
    assert lt.dtype == (np.int16 if t.lex_sparse is None else np.int32)
    trap = t.header(H_TRAP)
    seen = np.zeros(t.n_dense_states, bool)
    for i, name in enumerate(t.terminal_names):
        d = grammar.terminals[name].dfa
        if not isinstance(d, ByteDFA) or not d.n_states:
            continue
        o = int(t.term_start[i])
        rows = lt[o : o + d.n_states][:, cls]  # [n, 256] as the kernels read them
        seen[o : o + d.n_states] = True
        if name in special:
            assert (rows == -1).all(), name
            continue
        want = np.where(d.trans >= 0, d.trans + o, -1)
        blocked = grammar.terminals[name].end_blocked
        if blocked is not None:
            want[blocked & d.accept[:, None] & (want < 0)] = trap
        assert np.array_equal(rows, want), name
    if trap >= 0:
        assert (lt[trap] == -1).all()
        seen[trap] = True
    assert seen.all()  # every dense state belongs to a terminal or is the trap
    # coarsest: bytes of different classes differ in some row
    cols = {lt[:, c].tobytes() for c in range(lt.shape[1])}
    assert len(cols) == lt.shape[1] or t.lex_sparse is not None


@pytest.mark.parametrize("path", sorted(GRAMMARS.glob("*.lark")), ids=lambda p: p.stem)
def test_lark_grammars(path: Path) -> None:
    _check(Grammar.from_lark(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("text", LARK)
def test_blocked_ends_and_special_tokens(text: str) -> None:
    g = Grammar.from_lark(text)
    assert any(t.end_blocked is not None for t in g.terminals.values())
    _check(g)
    for name in sorted(g.terminals):  # each terminal in turn standing for a special token
        _check(g, {name: 7})


@pytest.mark.parametrize("schema", SCHEMAS, ids=["object", "array"])
def test_json_schemas(schema: dict) -> None:
    _check(grammar_from_json_schema(json.loads(json.dumps(schema))))


def _random_blocks(rnd, m: int, widths: int, height: int, with_trap: bool):  # type: ignore[no-untyped-def]
    """``m`` random blocks as :func:`lay_out` takes them, and the blocks themselves."""
    blocks = []
    for _ in range(m):
        h, w = rnd.randint(1, height), rnd.randint(1, widths)
        low = TRAP_MARK if with_trap else -1
        table = np.array([[rnd.randint(low, h - 1) for _ in range(w)] for _ in range(h)])
        cols = np.array([rnd.randint(0, w - 1) for _ in range(256)], np.uint8)
        blocks.append((table.astype(np.int32), cols))
    heights = np.array([t.shape[0] for t, _ in blocks], np.int64)
    widths_ = np.array([t.shape[1] for t, _ in blocks], np.int64)
    base = np.zeros(m, np.int64)
    np.cumsum((heights * widths_)[:-1], out=base[1:])
    flat = np.concatenate([t.ravel() for t, _ in blocks]).astype(np.int32)
    col_of = np.stack([c for _, c in blocks])
    return blocks, (flat, base, heights, widths_, col_of)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 4),
    st.integers(1, 5),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_lay_out_is_its_definition(m: int, widths: int, height: int, trap: bool, rnd) -> None:  # type: ignore[no-untyped-def]
    blocks, (flat, base, heights, widths_, col_of) = _random_blocks(rnd, m, widths, height, trap)
    sparse_used = np.array([rnd.random() < 0.1 for _ in range(256)], bool)
    trap_row = int(heights.sum()) + 3 if trap else -1
    lex_trans, byte_class, start_reads = lay_out(
        flat, base, heights, widths_, col_of, sparse_used, trap_row
    )
    # classes: equal exactly for equal columns of col_of, a sparse byte alone in its class,
    # numbered by their first byte
    key = [b if sparse_used[b] else col_of[:, b].tobytes() for b in range(256)]
    pairs = set(zip(byte_class.tolist(), key, strict=True))
    assert len(pairs) == len(set(key)) == len(set(byte_class.tolist()))  # a bijection
    firsts = [int(np.flatnonzero(byte_class == c)[0]) for c in range(lex_trans.shape[1])]
    assert firsts == sorted(firsts) and byte_class.max() + 1 == lex_trans.shape[1]
    # rows: each block's own next states moved to where the block lies
    row0 = 0
    for j, (table, cols) in enumerate(blocks):
        want = table[:, cols]  # [h, 256]
        want = np.where(want >= 0, want + row0, np.where(want == TRAP_MARK, trap_row, -1))
        assert np.array_equal(lex_trans[row0 : row0 + table.shape[0]][:, byte_class], want)
        assert np.array_equal(start_reads[j], table[0, cols] >= 0)
        row0 += table.shape[0]
    assert lex_trans.shape[0] == row0


def test_lay_out_with_many_blocks() -> None:
    # thousands of blocks (a grammar with that many terminals): the classes stay exact
    rng = np.random.default_rng(1)
    m = 5000
    col_of = rng.integers(0, 2, (m, 256)).astype(np.uint8)
    col_of[:, 10] = col_of[:, 3]
    flat = np.tile(np.array([0, -1], np.int32), m)
    heights, widths = np.ones(m, np.int64), np.full(m, 2, np.int64)
    base = np.arange(m, dtype=np.int64) * 2
    lex_trans, byte_class, _ = lay_out(flat, base, heights, widths, col_of, np.zeros(256, bool), -1)
    assert byte_class[10] == byte_class[3]
    assert lex_trans.shape[1] == len({col_of[:, j].tobytes() for j in range(256)})


@pytest.mark.parametrize(("count", "wide"), [(32_766, False), (32_767, True)])
def test_tables_too_large_for_int16_take_the_int32_form(count: int, wide: bool) -> None:
    # ``[a-z]{0,n}`` has n + 1 states: int16 holds states 0 to 32,766 (and -1)
    t = build_tables(Grammar.from_regex(f"[a-z]{{0,{count}}}"))
    assert t.n_dense_states == t.n_lexer_states == count + 1
    if wide:
        assert t.lex_trans.dtype == np.int32 and t.lex_sparse is not None
        assert t.lex_sparse[0].tolist() == [0] and not t.lex_sparse[1].size
    else:
        assert t.lex_trans.dtype == np.int16 and t.lex_sparse is None
    assert int(t.lex_trans.max()) == count


def test_int32_form_masks_and_parses_as_the_int16_form(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two forms of a dense lexer give the same mask at every position of a document,
    and the same verdicts on the next bytes."""
    from support.tokenizers import load_tokenizer

    import corral
    from corral.automata import tables

    tok = load_tokenizer("llama3")
    vocab = corral.Vocabulary.from_hf(tok)
    schema = SCHEMAS[0]
    narrow = corral.compile(schema, vocab, cache=False, precompute=False)
    monkeypatch.setattr(tables, "INT16_STATES", 0)
    wide = corral.compile(schema, vocab, cache=False, precompute=False)
    assert narrow.tables.lex_trans.dtype == np.int16
    assert wide.tables.lex_trans.dtype == np.int32 and wide.tables.lex_sparse is not None
    doc = '{"name": "Ada Lovelace", "code": "UK-815", "n": 299, "kind": "long value"}'
    ids = tok.encode(doc, add_special_tokens=False)
    ms = [m.matcher() for m in (narrow, wide)]
    masks = corral.allocate_bitmask(2, vocab.size)
    for token in ids:
        for row, m in enumerate(ms):
            m.fill_bitmask(masks, row)
        assert np.array_equal(np.asarray(masks[0]), np.asarray(masks[1]))
        assert np.asarray(masks[0]).any()
        for m in ms:
            m.consume(token)
    assert all(m.is_accepting() for m in ms)
    for tail in (b" ", b"}", b",", b'"x', b"\xff"):
        assert ms[0].fork().consume_bytes(tail) == ms[1].fork().consume_bytes(tail)
