"""CompiledGrammar: a grammar laid out for one vocabulary, shared by every matcher.

A compiled grammar is immutable in meaning. It owns the per-lexer-state token caches
(``kernels/mask.py``), which are filled on first use under a lock and never change once
written, so a compiled grammar can be shared across threads and sequences.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..grammar.ir import Grammar
from .bitmask import bitmask_words
from .state_cache import StateEntry
from .subtree_memo import SubtreeMemo
from .tables import Tables, build_tables
from .vocabulary import SPECIAL, Vocabulary

if TYPE_CHECKING:
    from .matcher import Matcher

_DISK_FORMAT = 1  # bump when the layout of the token caches changes
_DENSE_FRACTION = 1 / 16  # cache a state's tokens as a bitmask when more than V/16 stay alive
_SIGNATURE_STATES = 160  # share a state's cache only if its description is this small


class CompiledGrammar:
    """A :class:`Grammar` compiled against a :class:`Vocabulary`.

    Create with :func:`corral.compile`. Call :meth:`matcher` for a per-sequence matcher.
    """

    def __init__(self, grammar: Grammar, vocab: Vocabulary) -> None:
        self.grammar = grammar
        self.vocab = vocab
        special_terms = _special_terminals(grammar, vocab)
        self.tables: Tables = build_tables(grammar, special_terms)
        self.vocab_size = vocab.size
        self.words = bitmask_words(vocab.size)
        G = self.tables.n_lexer_states
        self._lock = threading.Lock()
        self._cmeta = np.zeros((G, 5), np.int32)
        self.rank_words = (vocab.trie.n_tokens + 31) // 32
        self._dense = np.zeros((4, self.words), np.uint32)
        self._dense_rank = np.zeros((4, self.rank_words), np.uint32)
        self._n_dense = 0
        self._sparse = np.zeros(1024, np.int32)
        self._n_sparse = 0
        self._ends = np.zeros(1024, np.int32)
        self._n_ends = 0
        self.eos_ids = np.array(vocab.eos_token_ids, np.int32)
        self._kinds = vocab.kinds
        self._special_term_of_token = {tok: name for name, tok in special_terms.items()}
        self._scratch: tuple[np.ndarray, ...] | None = None
        self._subtrees = SubtreeMemo(vocab.trie.n_large)  # walks' results below large nodes

    def __repr__(self) -> str:
        return (
            f"CompiledGrammar({self.grammar!r}, vocab_size={self.vocab_size}, "
            f"lexer_states={self.tables.n_lexer_states})"
        )

    def matcher(self) -> Matcher:
        """A new matcher at the start of the grammar."""
        from .matcher import Matcher

        return Matcher(self)

    # -- per-lexer-state caches ----------------------------------------------------------
    def lexer_cache(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A consistent snapshot ``(cmeta, dense, dense_rank, sparse, ends)`` of the caches."""
        with self._lock:
            return self._cmeta, self._dense, self._dense_rank, self._sparse, self._ends

    def ensure_cached(self, states: Any) -> None:
        """Build the token caches of lexer states ``states`` that do not have one yet.

        A state's cache is taken from the vocabulary's shared store when an equivalent
        state (same behaviour on the bytes a token can hold) has been built before, by
        this grammar or another one.
        """
        from .kernels.mask import KIND_MISSING
        from .kernels.signature import state_signature

        store = self.vocab.state_cache
        max_depth = self.vocab.trie.max_depth
        lt = self.tables
        with self._lock:
            for g in np.unique(np.asarray(states, dtype=np.int64)).tolist():
                if self._cmeta[g, 0] != KIND_MISSING:
                    continue
                key = b""
                entry = None
                if store.max_bytes > 0:
                    sig = state_signature(lt.gt, lt.lex_trans, g, max_depth, _SIGNATURE_STATES)
                    if sig.shape[0]:
                        key = hashlib.blake2b(sig.tobytes(), digest_size=20).digest()
                        entry = store.get(key)
                if entry is None:
                    entry = self._walk(g)
                    if key:
                        store.put(key, entry)
                self._install(g, entry)

    def _walk(self, g: int) -> StateEntry:
        """Build lexer state ``g``'s token cache with a trie walk."""
        from .kernels.mask import alive_ranks, dense_masks, lexer_state_walk

        trie = self.vocab.trie
        lt = self.tables
        if self._scratch is None:
            G = lt.n_lexer_states
            self._scratch = (
                np.zeros(2 * max(1, trie.n_nodes), np.int32),
                np.zeros(2 * max(1, trie.n_nodes), np.int32),
                np.full(G, -1, np.int32),
                np.full(G, -3, np.int32),
                np.zeros((G, 2), np.int64),
                np.zeros(G, np.int32),
                np.full((G, 2), -1, np.int32),
            )
        dead, ends_buf, run, step, excl, skip, mb = self._scratch
        sm = self._subtrees
        n_dead, n_ends, n_tok = lexer_state_walk(
            lt.gt, lt.lex_trans, trie.node_byte, trie.depth_small, trie.subtree_end,
            trie.rank_at, trie.max_depth, trie.plain, trie.frontier,
            trie.frontier_begin, trie.frontier_end, trie.plain_height, trie.plain_below,
            trie.char_frontier, trie.char_frontier_begin, trie.char_frontier_end,
            trie.char_height, trie.char_below, trie.chars,
            run, step, excl, skip, mb, trie.large_index, sm.state, sm.entry, sm.entries, sm.store,
            sm.ctl, g, dead, ends_buf,
        )  # fmt: skip
        sm.grow_if_full()
        ends = (
            _end_block(ends_buf[: 2 * n_ends].reshape(-1, 2), trie.node_byte)
            if n_ends
            else np.zeros(0, np.int32)
        )
        if n_tok > self.vocab_size * _DENSE_FRACTION:
            ids = np.zeros(self.words, np.uint32)
            rank = np.zeros(self.rank_words, np.uint32)
            dense_masks(dead, n_dead, trie.n_tokens, trie.token_ids, trie.all_ids, ids, rank)
            return StateEntry(n_tok, ids, rank, np.zeros(0, np.int32), ends, n_ends)
        sparse = np.zeros(n_tok, np.int32)
        alive_ranks(dead, n_dead, trie.n_tokens, sparse)
        return StateEntry(n_tok, None, None, sparse, ends, n_ends)

    def _install(self, g: int, entry: StateEntry) -> None:
        """Append ``entry`` to this grammar's cache arrays as lexer state ``g``'s (locked)."""
        from .kernels.mask import KIND_DENSE, KIND_SPARSE

        # new arrays are built whole and then swapped in, so snapshots stay valid
        if entry.dense is not None and entry.dense_rank is not None:
            if self._n_dense == self._dense.shape[0]:
                self._dense = _grow2d(self._dense, self._n_dense)
                self._dense_rank = _grow2d(self._dense_rank, self._n_dense)
            self._dense[self._n_dense] = entry.dense
            self._dense_rank[self._n_dense] = entry.dense_rank
            meta_row = (KIND_DENSE, self._n_dense, entry.n_tokens)
            self._n_dense += 1
        else:
            self._sparse = _append(self._sparse, self._n_sparse, entry.sparse)
            meta_row = (KIND_SPARSE, self._n_sparse, entry.sparse.shape[0])
            self._n_sparse += entry.sparse.shape[0]
        if entry.n_ends:
            self._ends = _append(self._ends, self._n_ends, entry.ends)
            ends_row = (self._n_ends, entry.n_ends)
            self._n_ends += entry.ends.shape[0]
        else:
            ends_row = (0, 0)
        meta = self._cmeta
        meta[g, 1], meta[g, 2] = meta_row[1], meta_row[2]
        meta[g, 3], meta[g, 4] = ends_row
        meta[g, 0] = meta_row[0]

    def warm(self) -> CompiledGrammar:
        """Build every lexer state's token cache now (otherwise each is built on first use)."""
        self.ensure_cached(np.arange(self.tables.n_lexer_states))
        return self

    def cache_stats(self) -> dict[str, int]:
        """Counts and bytes of the token caches built so far."""
        with self._lock:
            built = int((self._cmeta[:, 0] != 0).sum())
            return {
                "lexer_states": self.tables.n_lexer_states,
                "cached_states": built,
                "dense_masks": self._n_dense,
                "sparse_ids": self._n_sparse,
                "end_edges": self._n_ends,
                "bytes": int(
                    self._n_dense * (self.words + self.rank_words) * 4
                    + 4 * (self._n_sparse + self._n_ends)
                    + self.tables.nbytes()
                ),
            }

    # -- on-disk persistence of the token caches ------------------------------------------
    @property
    def cache_key(self) -> str:
        """Hex digest identifying this compilation: grammar, vocabulary and file format."""
        h = hashlib.sha256()
        h.update(f"corral-token-cache-v{_DISK_FORMAT}\0".encode())
        h.update(self.grammar.fingerprint.encode())
        h.update(b"\0" + self.vocab.hash.encode())
        h.update(self.tables.gt.tobytes())
        return h.hexdigest()[:32]

    def save_caches(self, path: str | os.PathLike[str]) -> None:
        """Write the token caches built so far to ``path`` (``.npz``, plain arrays, no
        pickle), atomically: a reader never sees a half-written file."""
        with self._lock:
            arrays: dict[str, np.ndarray] = {
                "key": np.frombuffer(self.cache_key.encode(), np.uint8),
                "cmeta": self._cmeta,
                "dense": self._dense[: self._n_dense],
                "dense_rank": self._dense_rank[: self._n_dense],
                "sparse": self._sparse[: self._n_sparse],
                "ends": self._ends[: self._n_ends],
            }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(
                    f,
                    key=arrays["key"],
                    cmeta=arrays["cmeta"],
                    dense=arrays["dense"],
                    dense_rank=arrays["dense_rank"],
                    sparse=arrays["sparse"],
                    ends=arrays["ends"],
                )
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def load_caches(self, path: str | os.PathLike[str]) -> bool:
        """Replace the token caches with those saved in ``path`` by :meth:`save_caches`.

        Returns ``False`` (and changes nothing) when the file is missing, unreadable, or
        was written for another grammar, vocabulary or format. Never unpickles.
        """
        try:
            with np.load(path, allow_pickle=False) as z:
                if bytes(z["key"]).decode() != self.cache_key:
                    return False
                cmeta, dense, dense_rank = z["cmeta"], z["dense"], z["dense_rank"]
                sparse, ends = z["sparse"], z["ends"]
        except (OSError, KeyError, ValueError, UnicodeDecodeError):
            return False
        ok = (
            cmeta.dtype == np.int32
            and cmeta.shape == self._cmeta.shape
            and dense.dtype == np.uint32
            and dense.ndim == 2
            and dense.shape[1] == self.words
            and dense_rank.dtype == np.uint32
            and dense_rank.shape == (dense.shape[0], self.rank_words)
            and sparse.dtype == np.int32
            and ends.dtype == np.int32
            and sparse.ndim == 1
            and ends.ndim == 1
        )
        if ok:  # every reference must stay inside the arrays the kernels will index
            kind, a, n, e0, ne = (cmeta[:, i].astype(np.int64) for i in range(5))
            trie = self.vocab.trie
            ok = bool(
                np.all((kind >= 0) & (kind <= 2))
                and np.all((kind != 1) | ((a >= 0) & (a < dense.shape[0])))
                and np.all((kind != 2) | ((a >= 0) & (n >= 0) & (a + n <= sparse.shape[0])))
                and np.all((ne == 0) | ((e0 >= 0) & (ne >= 0) & (e0 + 257 + 2 * ne <= len(ends))))
                and (len(sparse) == 0 or (sparse.min() >= 0 and sparse.max() < trie.n_tokens))
                and (len(ends) == 0 or (ends.min() >= 0 and ends.max() < trie.n_nodes))
            )
        if not ok:
            return False
        with self._lock:
            self._cmeta = np.ascontiguousarray(cmeta)
            if len(dense):
                self._dense = np.ascontiguousarray(dense)
                self._dense_rank = np.ascontiguousarray(dense_rank)
            else:
                self._dense = np.zeros((4, self.words), np.uint32)
                self._dense_rank = np.zeros((4, self.rank_words), np.uint32)
            self._n_dense = dense.shape[0]
            self._sparse = np.ascontiguousarray(sparse)
            self._n_sparse = sparse.shape[0]
            self._ends = np.ascontiguousarray(ends)
            self._n_ends = ends.shape[0]
        return True

    def special_start_state(self, token_id: int) -> int:
        """The lexer start state of the terminal that stands for special token ``token_id``."""
        name = self._special_term_of_token[token_id]
        return int(self.tables.term_offsets[self.tables.terminal_names.index(name)])

    def token_data(self, token_id: int) -> tuple[np.ndarray, int, int]:
        """``(data, start, stop)``: the bytes of ``token_id`` as a slice of one array."""
        return self.vocab.token_data(token_id)


def _end_block(pairs: np.ndarray, node_byte: np.ndarray) -> np.ndarray:
    """257 offsets by child byte, then the ``(node, child)`` pairs sorted by child byte."""
    b = node_byte[pairs[:, 1]]
    order = np.argsort(b, kind="stable")
    offsets = np.searchsorted(b[order], np.arange(257)).astype(np.int32)
    return np.concatenate([offsets, pairs[order].reshape(-1).astype(np.int32)])


def _grow2d(a: np.ndarray, n: int) -> np.ndarray:
    grown = np.zeros((2 * a.shape[0], a.shape[1]), a.dtype)
    grown[:n] = a[:n]
    return grown


def _append(buf: np.ndarray, n: int, values: np.ndarray) -> np.ndarray:
    need = n + values.shape[0]
    if need > buf.shape[0]:
        grown = np.zeros(max(need, 2 * buf.shape[0]), buf.dtype)
        grown[:n] = buf[:n]
        buf = grown
    buf[n:need] = values
    return buf


def _special_terminals(grammar: Grammar, vocab: Vocabulary) -> dict[str, int]:
    """Terminals that stand for a special token, by name → token id (see ``ir.Terminal``)."""
    out: dict[str, int] = {}
    specials = None
    for name, t in grammar.terminals.items():
        if t.special is None:
            continue
        if specials is None:
            specials = vocab.special_tokens()
        tok = specials.get(t.special)
        if tok is None and t.special.startswith("<[") and t.special.endswith("]>"):
            try:
                tok = int(t.special[2:-2])
            except ValueError:
                tok = None
        if tok is None or not 0 <= tok < vocab.size or vocab.kinds[tok] != SPECIAL:
            from ..errors import GrammarError

            raise GrammarError(
                f"the grammar names the special token {t.special!r}, which this vocabulary "
                "does not have as a special token"
            )
        out[name] = tok
    return out
