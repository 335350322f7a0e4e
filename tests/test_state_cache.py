"""Token caches shared between equivalent lexer states (within and across grammars).

Sharing must never change a mask: every mask computed with sharing equals the one
computed with each grammar building its own caches.
"""

from __future__ import annotations

import gc
import json

import numpy as np
import pytest
from support.tokenizers import load_tokenizer, load_vocab

import corral
from corral import Vocabulary, allocate_bitmask
from corral.automata.dense_rows import DenseRows
from corral.automata.kernels.layout import KIND_DENSE, M_IDX, M_KIND
from corral.automata.kernels.signature import state_signature
from corral.automata.state_cache import StateCacheStore, StateEntry
from corral.automata.tables import H_BYTE_CLASS
from corral.automata.token_caches import TokenCaches

SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "city": {"type": "string", "maxLength": 12},
            "tags": {"type": "array", "items": {"type": "string"}},
            "id": {"type": "string", "format": "uuid"},
        },
        "required": ["name", "city"],
    },
    {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 12},
            "note": {"type": "string"},
            "when": {"type": "string", "format": "date"},
        },
        "additionalProperties": {"type": "integer"},
    },
]
DOCS = [
    {"name": "Ada Lovelace", "city": "Lond\u00f6n", "tags": ['a"b', "\u6771\u4eac"]},
    {"title": "x\\ny", "note": "caf\u00e9 \u00fcber", "when": "2024-02-29", "zz": 3},
]


@pytest.fixture(scope="module")
def llama3():  # type: ignore[no-untyped-def]
    return load_tokenizer("llama3"), load_vocab("llama3")


def _masks(vocab: Vocabulary, schema: dict | str, ids: list[int]) -> list[bytes]:
    return _replay(corral.compile(schema, vocab, cache=False), ids)


def _replay(cg, ids: list[int]) -> list[bytes]:  # type: ignore[no-untyped-def]
    """The mask before each token of ``ids`` and after the last, as bytes."""
    m = cg.matcher()
    out = []
    for t in [*ids, None]:
        bm = allocate_bitmask(1, cg.vocab_size)
        m.fill_bitmask(bm)
        out.append(bm.tobytes())
        if t is not None:
            m.consume(t)
    return out


def _copy_of(base: Vocabulary) -> Vocabulary:
    """A vocabulary with the same tokens as ``base`` and caches of its own."""
    return Vocabulary(
        [base.token_bytes(i) for i in range(base.tokenizer_size)],
        eos_token_ids=base.eos_token_ids,
        special_ids=[i for i in range(base.tokenizer_size) if base.kind(i) == "special"],
        vocab_size=base.size,
    )


def test_shared_caches_give_identical_masks(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, base = llama3
    # two vocabularies with the same tokens: one shares caches, one does not
    shared, alone = _copy_of(base), _copy_of(base)
    alone.state_cache.max_bytes = 0
    for schema, doc in zip(SCHEMAS, DOCS, strict=True):
        ids = tok.encode(json.dumps(doc, ensure_ascii=False), add_special_tokens=False)
        for a, b in zip(_masks(shared, schema, ids), _masks(alone, schema, ids), strict=True):
            assert a == b
    # the second schema reuses string states built for the first
    assert shared.state_cache.hits > 0
    # after "xa", A and B read the same bytes the same way and differ only in whether they
    # accept: B may end there, so ";" may follow "xab;xa" directly
    lark = 'start: A ";" B ";"\nA: /x[a-z][a-z]/\nB: /x[a-z]?[a-z]?/\n'
    ids = [tok.convert_tokens_to_ids(c) for c in "xab;xa;"]
    for a, b in zip(_masks(shared, lark, ids), _masks(alone, lark, ids), strict=True):
        assert a == b
    assert len(alone.state_cache) == 0 and alone.state_cache.hits == 0


def test_signature_separates_and_matches_states(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, v = llama3
    depth = v.trie.max_depth

    def body_signature(max_length: int, key: str) -> bytes:
        """Signatures of the lexer states live inside the string value of ``key``."""
        prop = {"type": "string", "maxLength": max_length}
        schema = {"type": "object", "properties": {key: prop}}
        cg = corral.compile(schema, v, cache=False)
        m = cg.matcher()
        m.consume_tokens(tok.encode(f'{{"{key}":"', add_special_tokens=False))
        states = m.chart.lexer_states()
        lt = cg.tables
        sigs = {
            state_signature(lt.gt, lt.lex_trans, int(g), depth, 10_000).tobytes() for g in states
        }
        assert sigs and all(sigs)
        return b"|".join(sorted(sigs))

    assert body_signature(5, "a") == body_signature(5, "b")  # same language, other grammar
    assert body_signature(5, "a") != body_signature(6, "a")  # one character more allowed


def test_signature_is_empty_exactly_past_the_state_budget(llama3) -> None:  # type: ignore[no-untyped-def]
    """States with more than ``max_states`` states within reach get no description (the
    cheap count must agree with the description it stands in for)."""
    _, v = llama3
    schema = {"type": "string", "maxLength": 20, "pattern": "^(?:\\S+\\s+){0,3}\\S+$"}
    lt = corral.compile(schema, v, cache=False).tables
    classes = np.unique(lt.gt[lt.gt[H_BYTE_CLASS] : lt.gt[H_BYTE_CLASS] + 256])
    depth = 12
    empty = 0
    for g in range(lt.n_lexer_states):
        reach = {g}
        frontier = [g]
        for _ in range(depth):  # states within `depth` bytes (the classes bytes fall in)
            nxt = set(lt.lex_trans[np.ix_(frontier, classes)].ravel().tolist())
            frontier = [t for t in nxt if t >= 0 and t not in reach]
            reach.update(frontier)
        for budget in (8, 40):
            sig = state_signature(lt.gt, lt.lex_trans, g, depth, budget)
            assert (sig.shape[0] == 0) == (len(reach) > budget), (g, budget, len(reach))
            empty += sig.shape[0] == 0
    assert 0 < empty < 2 * lt.n_lexer_states


def test_store_is_bounded_lru() -> None:
    def entry(n: int) -> StateEntry:
        return StateEntry(n, None, np.zeros(n, np.int32), np.zeros(0, np.int32), 0)

    store = StateCacheStore(max_bytes=4 * 100)
    store.put(b"a", entry(50))
    store.put(b"b", entry(40))
    assert store.get(b"a") is not None  # a is now the most recently used
    store.put(b"c", entry(20))  # 440 bytes > 400: b goes
    assert store.get(b"b") is None
    assert store.get(b"a") is not None and store.get(b"c") is not None
    assert store.nbytes == 4 * 70
    store.put(b"huge", entry(1000))  # larger than the whole store: not kept
    assert store.get(b"huge") is None
    store.clear()
    assert len(store) == 0 and store.nbytes == 0


def _dense_rows_of(cg) -> set[int]:  # type: ignore[no-untyped-def]
    """The vocabulary rows that ``cg``'s dense token caches refer to."""
    cmeta = cg.caches.snapshot()[0]
    return set(cmeta[cmeta[:, M_KIND] == KIND_DENSE, M_IDX].tolist())


def test_dense_rows_are_one_copy_for_the_vocabulary(llama3) -> None:  # type: ignore[no-untyped-def]
    tok, base = llama3
    doc = {"name": "Ada Lovelace", "note": "caf\u00e9 \u00fcber"}
    ids = tok.encode(json.dumps(doc, ensure_ascii=False), add_special_tokens=False)
    schemas = [
        {"type": "object", "properties": {"name": {"type": "string"}, "note": {"type": "string"}}},
        {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "note": {"type": "string"},
                "age": {"type": "integer"},
            },
        },
    ]
    vocab = _copy_of(base)
    pool = vocab.dense_rows
    grammars = [corral.compile(s, vocab, cache=False) for s in schemas]
    masks = [_replay(cg, ids) for cg in grammars]
    rows = [_dense_rows_of(cg) for cg in grammars]
    assert rows[0] & rows[1]  # the string bodies' rows: shared, not copied
    assert pool.rows_in_use == len(rows[0] | rows[1])
    # without the shared store each grammar builds its own rows; when the grammars are
    # gone their rows are reused, and masks read from reused rows are the same
    alone = _copy_of(base)
    alone.state_cache.max_bytes = 0
    first = [corral.compile(s, alone, cache=False) for s in schemas]
    assert [_replay(cg, ids) for cg in first] == masks
    held = [_dense_rows_of(cg) for cg in first]
    assert held[0] and not held[0] & held[1]
    high = alone.dense_rows.rows_in_use
    del first
    gc.collect()
    assert alone.dense_rows.rows_in_use == 0
    again = corral.compile(schemas[1], alone, cache=False)
    assert _replay(again, ids) == masks[1]
    assert _dense_rows_of(again) <= set(range(high))  # freed rows, not new ones


def test_dense_rows_grow_and_reuse_rows() -> None:
    pool = DenseRows(3, 2)
    rng = np.random.default_rng(0)
    data = [
        (rng.integers(0, 2**32, 3, np.uint32), rng.integers(0, 2**32, 2, np.uint32))
        for _ in range(20)
    ]
    handles = [pool.add(a, b) for a, b in data]  # past the first capacity: the arrays grow
    assert [h.row for h in handles] == list(range(20))
    for h, (a, b) in zip(handles, data, strict=True):
        assert np.array_equal(h.ids, a) and np.array_equal(h.ranks, b)
        assert not h.ids.flags.writeable
    before = pool.arrays()
    del handles[5]
    gc.collect()
    assert pool.rows_in_use == 19
    reused = pool.add(np.ones(3, np.uint32), np.ones(2, np.uint32))
    assert reused.row == 5 and pool.rows_in_use == 20
    assert np.array_equal(before[0][4], data[4][0])  # earlier arrays keep the rows they held
    with pytest.raises(ValueError, match="another vocabulary"):
        TokenCaches(1, DenseRows(3, 2)).install(
            0, StateEntry(1, reused, np.zeros(0, np.int32), np.zeros(0, np.int32), 0)
        )
