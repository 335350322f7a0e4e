"""The lexer-state trie walk against a direct reference, state by state.

The walk (``kernels/mask.lexer_state_walk``) decides tokens by dead subtree and skips
runs of plain bytes from states that loop on them. The reference here runs the lexer DFA
over every trie node, level by level, with no skipping: both must give the same alive
tokens and the same end edges for every lexer state, on vocabularies with many
multi-byte tokens. States are walked one after another, so later walks copy subtrees that
earlier ones stored in the grammar's subtree memo: the comparison covers those copies.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from support.tokenizers import load_vocab

import corral
from corral.automata import tables
from corral.automata.kernels.layout import SM_ENTRIES
from corral.automata.kernels.trie import UTF8_FORMS
from corral.automata.subtree_memo import DEFAULT_MAX_BYTES, FIRST_ARRAYS_BYTES, SubtreeMemo
from corral.automata.tables import (
    H_BYTE_CLASS,
    H_G,
    H_LEX_ACCEPT,
)
from corral.automata.vocabulary import SPECIAL

GRAMMARS = {
    "schema": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$"},
            "short": {"type": "string", "maxLength": 3},
            "oid": {"type": "string", "pattern": "[a-f0-9]{6}"},
            "path": {"type": "string", "pattern": "^[^/#]+/[^/#]+$"},
            "words": {"type": "string", "pattern": "^(?:\\S+\\s+){0,2}\\S+$", "maxLength": 12},
            "tags": {"type": "array", "items": {"type": "string", "format": "email"}},
            "note": {"type": "string", "minLength": 2, "maxLength": 40},
            "plainish": {"type": "string", "pattern": "^[^é]{0,30}$"},
            "tiny": {"type": "string", "minLength": 2, "maxLength": 5},
            "stamp": {"type": "string", "pattern": "\\d{4}-\\d{2}"},
        },
    },
    "lark": r"""
        start: item+
        item: DQ | SQ | WORD | LINE | QUOTE | SHORT
        DQ: /"[^"\n]*"/
        SQ: /'[^']*'/
        WORD: /[ -~]+;/
        LINE: /#[^\n]*\n/
        QUOTE: /«[^»]*»/
        SHORT: /<[^<>é]{0,20}>/
    """,
}


# pieces of crafted tokens: characters of every UTF-8 length, what ends or escapes a
# string, and byte sequences that are not UTF-8 (a bad continuation, a surrogate, a code
# point above U+10FFFF, an overlong form, a stray continuation byte, a cut character)
_PIECES = [
    b"a", b"Z", b" ", "é".encode(), "ß".encode(), "の".encode(), "€".encode(),
    "😀".encode(), b"\n", b'"', b"\\", b"\\n", b"\xff", b"\xc3(", b"\xe3\x81",
    b"\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\x80",
]  # fmt: skip


def _with_crafted_tokens(vocab):  # type: ignore[no-untyped-def]
    """``vocab`` plus 6,000 tokens built from ``_PIECES``, most of them inside a string.

    Real vocabularies hold few tokens where characters of several lengths, quotes and
    invalid bytes meet; these make the subtrees that character runs skip large and
    mixed."""
    rng = random.Random(0)
    known = set(vocab._token_bytes)
    extra: list[bytes] = []
    while len(extra) < 6000:
        head = rng.choice([b'"', b'"', b"", '"é'.encode()])
        tok = head + b"".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 9)))
        if tok not in known:
            known.add(tok)
            extra.append(tok)
    n = vocab.tokenizer_size
    tokens = list(vocab._token_bytes[:n]) + extra
    special = [i for i in range(n) if vocab._kinds[i] == SPECIAL]
    return corral.Vocabulary(tokens, eos_token_ids=vocab.eos_token_ids, special_ids=special)


def _parents(trie):  # type: ignore[no-untyped-def]
    counts = np.diff(trie.child_start)
    parent = np.zeros(trie.n_nodes, np.int64)
    parent[trie.children] = np.repeat(np.arange(trie.n_nodes), counts)
    levels = [np.flatnonzero(trie.depth == d) for d in range(1, trie.max_depth + 1)]
    return parent, levels


def _node_states(trie, parent, levels, lex_trans, byte_class, g):  # type: ignore[no-untyped-def]
    """Lexer state after each trie node's bytes from ``g`` (-1: dead), level by level."""
    state = np.full(trie.n_nodes, -1, np.int64)
    state[0] = g
    for at in levels:
        ps = state[parent[at]]
        live = ps >= 0
        nxt = np.full(at.shape[0], -1, np.int64)
        nxt[live] = lex_trans[ps[live], byte_class[trie.node_byte[at[live]]]]
        state[at] = nxt
    return state


@pytest.mark.parametrize(
    ("name", "tokenizer", "memo_bytes"),
    [
        ("schema", "llama3", DEFAULT_MAX_BYTES),
        ("lark", "llama3", DEFAULT_MAX_BYTES),
        ("schema", "gemma3", DEFAULT_MAX_BYTES),
        ("lark", "gemma3", DEFAULT_MAX_BYTES),
        ("schema", "llama3+crafted", DEFAULT_MAX_BYTES),
        ("lark", "llama3+crafted", DEFAULT_MAX_BYTES),
        # a memo that cannot grow past its first arrays: walks go on once it is full,
        # storing nothing more
        ("schema", "llama3", -1),
        # the lexer form of a dense grammar too large for int16 tables (see below)
        ("schema", "llama3+wide", DEFAULT_MAX_BYTES),
        ("lark", "llama3+wide", DEFAULT_MAX_BYTES),
    ],
)
def test_walk_matches_reference(
    name: str, tokenizer: str, memo_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    vocab = load_vocab(tokenizer.split("+")[0])
    if tokenizer.endswith("+crafted"):
        vocab = _with_crafted_tokens(vocab)
    if tokenizer.endswith("+wide"):
        # tables with more dense states than int16 holds are int32 and take the tuple
        # form with no sparse rows; a limit of 0 gives every grammar that form
        monkeypatch.setattr(tables, "INT16_STATES", 0)
    cg = corral.compile(GRAMMARS[name], vocab, cache=False, precompute=False)
    wide = tokenizer.endswith("+wide")
    assert cg.tables.lex_trans.dtype == (np.int32 if wide else np.int16)
    assert (cg.tables.lex_sparse is not None) == wide
    assert cg.tables.n_dense_states == cg.tables.n_lexer_states
    if memo_bytes < 0:
        memo_bytes = SubtreeMemo(vocab.trie.n_large).nbytes + FIRST_ARRAYS_BYTES
    cg._subtrees = SubtreeMemo(vocab.trie.n_large, max_bytes=memo_bytes)
    trie = vocab.trie
    gt, lex_trans = cg.tables.gt, cg.tables.lex_trans
    byte_class = gt[gt[H_BYTE_CLASS] : gt[H_BYTE_CLASS] + 256]
    accept = gt[gt[H_LEX_ACCEPT] : gt[H_LEX_ACCEPT] + gt[H_G]]
    ranks_of_node = np.repeat(np.arange(trie.n_nodes), trie.tok_count)
    parent, levels = _parents(trie)
    skipping = 0
    for g in range(cg.tables.n_lexer_states):
        state = _node_states(trie, parent, levels, lex_trans, byte_class, g)
        alive = np.flatnonzero(state[ranks_of_node] >= 0)
        entry = cg._walk(g)
        if entry.dense_rank is not None:
            bits = np.unpackbits(entry.dense_rank.view(np.uint8), bitorder="little")
            got = np.flatnonzero(bits[: trie.n_tokens])
            ids = np.unpackbits(entry.dense.view(np.uint8), bitorder="little")
            assert np.array_equal(np.flatnonzero(ids[: vocab.size]), np.sort(trie.token_ids[alive]))
        else:
            got = entry.sparse
        assert np.array_equal(got, alive), f"state {g}: alive tokens differ"
        assert entry.n_tokens == alive.shape[0]
        # end edges: an accepting node and a child byte that leaves the lexeme
        kids = np.arange(1, trie.n_nodes)
        ps = state[parent[kids]]
        b = trie.node_byte[kids]
        ok = ps >= 0
        ok[ok] &= accept[ps[ok]] != 0
        ok[ok] &= lex_trans[ps[ok], byte_class[b[ok]]] < 0
        want = {(int(parent[c]), int(c)) for c in kids[ok]}
        pairs = entry.ends[257:].reshape(-1, 2) if entry.n_ends else np.zeros((0, 2))
        assert {(int(x), int(c)) for x, c in pairs} == want, f"state {g}: end edges differ"
        # how many states the plain-run skipping applies to (so the test exercises it)
        plain = np.flatnonzero(trie.plain)
        if not accept[g] and np.all(lex_trans[g, byte_class[plain]] == g):
            skipping += 1
        else:
            s1 = lex_trans[g, byte_class[ord("a")]]
            if s1 >= 0 and not accept[s1] and np.all(lex_trans[s1, byte_class[plain]] == s1):
                skipping += 1
    assert skipping > 0
    # states that skip runs of whole characters, and states that take plain bytes alike
    # but not some multi-byte character (``[^é]``, ``[^»]``)
    _, step, _, _, mb = cg._walk_memo  # kernels.layout.WalkMemo
    assert np.any(mb[:, 1] > 1)
    assert np.any((mb[:, 0] == 0) & (step >= 0))
    if name == "schema":
        # states that skip runs of all plain bytes but a few (a space, a '/'), and of
        # all but the digits (searching for an unanchored ``\d{4}-\d{2}``)
        run, step, excl, _, _ = cg._walk_memo
        n_excl = [
            sum(bin(int(w) & (2**64 - 1)).count("1") for w in excl[g]) if step[g] >= 0 else 0
            for g in range(cg.tables.n_lexer_states)
        ]
        assert any(0 < n <= 2 and run[g] > 0 for g, n in enumerate(n_excl))
        assert any(n >= 10 and run[g] > 0 for g, n in enumerate(n_excl))
    assert cg._subtrees.hits > 0
    if memo_bytes < DEFAULT_MAX_BYTES:
        assert cg._subtrees.nbytes == memo_bytes  # the first arrays, never grown
        # its entries filled up: later walks went on without storing
        assert cg._subtrees.ctl[SM_ENTRIES] == cg._subtrees.entries.shape[0]


def test_utf8_forms_match_python_decoder() -> None:
    """The lead and second-byte ranges the character runs rely on are exactly the valid
    UTF-8 characters: a lead with any second byte (the rest 80..BF) decodes iff the
    table says so."""
    for lead in range(0x80, 0x100):
        rows = [r for r in UTF8_FORMS if r[0] <= lead <= r[1]]
        for second in range(0x100):
            for n in (2, 3, 4):
                data = bytes([lead, second] + [0x80] * (n - 2))
                try:
                    ok = len(data.decode("utf-8")) == 1
                except UnicodeDecodeError:
                    ok = False
                want = bool(rows) and rows[0][4] == n and rows[0][2] <= second <= rows[0][3]
                assert ok == want, (hex(lead), hex(second), n)
