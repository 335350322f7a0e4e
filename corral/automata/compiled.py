"""CompiledGrammar: a grammar laid out for one vocabulary, shared by every matcher.

A compiled grammar is immutable in meaning. It holds the grammar's tables
(``tables.py``) and its token caches of lexer states (:class:`TokenCaches`), which are
built on first use under a lock and never change once written, so a compiled grammar can
be shared across threads and sequences. Cache files on disk: ``cache_file.py``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import warnings
from typing import Any

import numpy as np

from ..errors import CacheWarning
from ..grammar.ir import Grammar
from . import cache_file
from .mask_cache import MaskCache
from .matcher import Matcher
from .state_cache import StateEntry
from .subtree_memo import SubtreeMemo
from .tables import Tables, build_tables
from .thread_scratch import per_thread
from .token_caches import TokenCaches
from .vocabulary import SPECIAL, Vocabulary
from .walk_cache import DEFAULT_MAX_BYTES as WALK_CACHE_MAX_BYTES
from .walk_cache import WalkCache

_DENSE_FRACTION = 1 / 16  # cache a state's tokens as a bitmask when more than V/16 stay alive
_SIGNATURE_STATES = 160  # share a state's cache only if its description is this small


class CompiledGrammar:
    """A :class:`Grammar` compiled against a :class:`Vocabulary`.

    Create with :func:`corral.compile`. Call :meth:`matcher` for a per-sequence matcher.

    Attributes:
        grammar, vocab, tables: what it was compiled from, and the grammar's flat tables.
        caches: the token caches of its lexer states (see :meth:`ensure_cached`).
        vocab_size, words, rank_words: ``V``, ``ceil(V/32)`` and the rank-space words.
        eos_ids: ``int32 [k]`` the vocabulary's EOS token ids.
        token_kinds: ``int8 [V]`` ``NORMAL``, ``SPECIAL`` or ``EOS`` per token id.
    """

    def __init__(self, grammar: Grammar, vocab: Vocabulary) -> None:
        self.grammar = grammar
        self.vocab = vocab
        special_terms = _special_terminals(grammar, vocab)
        self.tables: Tables = build_tables(grammar, special_terms)
        self.vocab_size = vocab.size
        self.caches = TokenCaches(self.tables.n_lexer_states, vocab.dense_rows)
        self.words, self.rank_words = self.caches.words, self.caches.rank_words
        self.eos_ids = np.array(vocab.eos_token_ids, np.int32)
        self.token_kinds = vocab.kinds
        self._special_term_of_token = {tok: name for name, tok in special_terms.items()}
        self._walk_memo: tuple[np.ndarray, ...] | None = None  # kernels.layout.WalkMemo
        # lexer states of sparse automata (spans, entity sets): many, often their own to
        # this grammar, and never worth a signature (whose cost grows with the states)
        self._sparse_states = np.zeros(self.tables.n_lexer_states, bool)
        self._sparse_states[self.tables.n_dense_states :] = True
        # lexer states of fixed strings: a walk follows one path of the trie, cheaper than
        # the signature that would find it in the shared store (a structural tag has one
        # such string per tool, all in play where a tool call begins)
        names = sorted(grammar.terminals)
        literal = np.array([grammar.terminals[n].literal is not None for n in names], bool)
        self._unshared_states = self._sparse_states.copy()
        if literal.size:
            self._unshared_states[: self.tables.n_dense_states] |= literal[
                self.tables.lex_term()[: self.tables.n_dense_states]
            ]
        # walks' results below large nodes, made by the first walk: most grammars' first
        # masks need none (their lexer states' caches come from the shared store)
        self._subtrees: SubtreeMemo | None = None
        self.mask_cache = MaskCache(self.words)  # masks by parse state, across matchers
        # what lexemes find below trie nodes, per thread (walk_cache.py); its budget
        self._walk_caches = threading.local()
        self.walk_cache_max_bytes = WALK_CACHE_MAX_BYTES
        self.chart_rows = [0, 0, 0]  # rows new matchers' charts start with (chart.py)
        self.budgets: TokenBudgets | None = None  # lexemes of at most so many tokens
        if grammar.token_budgets:
            from .token_budgets import TokenBudgets

            self.budgets = TokenBudgets(grammar, self.tables, vocab)

    def __repr__(self) -> str:
        return (
            f"CompiledGrammar({self.grammar!r}, vocab_size={self.vocab_size}, "
            f"lexer_states={self.tables.n_lexer_states})"
        )

    def matcher(self) -> Matcher:
        """A new matcher at the start of the grammar."""
        return Matcher(self)

    def walk_cache(self) -> WalkCache:
        """The calling thread's walk cache of this grammar (``walk_cache.py``), made on
        first use with a budget of ``walk_cache_max_bytes`` (0: off)."""
        wc: WalkCache | None = getattr(self._walk_caches, "cache", None)
        if wc is None:
            wc = self._walk_caches.cache = WalkCache(self.walk_cache_max_bytes)
        return wc

    # -- token caches of lexer states -------------------------------------------------------
    def ensure_cached(self, states: Any) -> None:
        """Build the token caches of lexer states ``states`` that do not have one yet.

        A state's cache is taken from the vocabulary's shared store when an equivalent
        state (same behaviour on the bytes a token can hold) has been built before, by
        this grammar or another one.
        """
        from .kernels.signature import state_signature

        store = self.vocab.state_cache
        max_depth = self.vocab.trie.max_depth
        lt = self.tables
        caches = self.caches
        with caches.lock:
            for g in np.unique(np.asarray(states, dtype=np.int64)).tolist():
                if caches.has(g):
                    continue
                key = b""
                entry = None
                if store.max_bytes > 0 and not self._unshared_states[g]:
                    sig = state_signature(lt.gt, lt.lex, g, max_depth, _SIGNATURE_STATES)
                    if sig.shape[0]:
                        key = hashlib.blake2b(sig.tobytes(), digest_size=20).digest()
                        entry = store.get(key)
                if entry is None:
                    entry = self._walk(g)
                    if key:
                        store.put(key, entry)
                caches.install(g, entry)

    def _walk(self, g: int) -> StateEntry:
        """Build lexer state ``g``'s token cache with a trie walk."""
        from .kernels.mask import alive_ranks, dense_masks, lexer_state_walk

        trie = self.vocab.trie
        lt = self.tables
        if self._walk_memo is None:
            G, D = lt.n_lexer_states, lt.n_dense_states
            # a sparse automaton (a span, an entity set) is acyclic, so it has no runs of
            # plain bytes to jump: its walks go byte by byte from the start (2), without
            # searching its many states for runs first, and never read the other memos
            # of its states, which are left unwritten (the sparse states come last: a
            # monitor's 10,000 names are 50,000 of them, 1.6 MB not touched)
            skip = np.zeros(G, np.int32)
            skip[D:] = 2
            run, step = np.empty(G, np.int32), np.empty(G, np.int32)
            excl, mb = np.empty((G, 2), np.int64), np.empty((G, 2), np.int32)
            run[:D], step[:D], excl[:D], mb[:D] = -1, -3, 0, -1
            self._walk_memo = (run, step, excl, skip, mb)
        dead, ends_buf = _walk_buffers(trie.n_nodes)
        walk_memo = self._walk_memo  # run, step, excl, skip, mb
        sm = self._subtrees
        if sm is None:
            sm = self._subtrees = SubtreeMemo(trie.n_large)
        n_dead, n_ends, n_tok = lexer_state_walk(
            lt.gt,
            lt.lex,
            trie.kernel_arrays,
            trie.kernel_runs,
            walk_memo,
            sm.kernel_arrays(),
            g,
            dead,
            ends_buf,
        )
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
            row = self.vocab.dense_rows.add(ids, rank)
            return StateEntry(n_tok, row, np.zeros(0, np.int32), ends, n_ends)
        sparse = np.zeros(n_tok, np.int32)
        alive_ranks(dead, n_dead, trie.n_tokens, sparse)
        return StateEntry(n_tok, None, sparse, ends, n_ends)

    def warm(self) -> CompiledGrammar:
        """Build every lexer state's token cache now (otherwise each is built on first use)."""
        self.ensure_cached(np.arange(self.tables.n_lexer_states))
        return self

    def cache_stats(self) -> dict[str, int]:
        """Counts and bytes of the token caches built so far (``bytes`` includes the
        grammar's tables)."""
        stats = self.caches.stats()
        stats["bytes"] = self.nbytes()
        return {"lexer_states": self.tables.n_lexer_states, **stats}

    def nbytes(self) -> int:
        """Bytes of the grammar's tables and of the token caches built so far (what a
        compile cache counts; ``cache_stats()["bytes"]``)."""
        return self.caches.nbytes() + int(self.tables.nbytes())

    # -- on-disk persistence of the token caches (format: cache_file.py) ---------------------
    @functools.cached_property
    def cache_key(self) -> str:
        """Hex digest (32 characters) naming this compilation's token caches (see
        :func:`corral.automata.cache_file.cache_key`): two compilations with the same key
        build identical caches."""
        return cache_file.cache_key(
            self.grammar.fingerprint, self.vocab.hash, self.tables, self.vocab.trie.layout_digest
        )

    def save_caches(self, path: str | os.PathLike[str]) -> None:
        """Write the token caches built so far to ``path``, atomically (a reader never
        sees a half-written file), in the format of ``cache_file.py``."""
        cache_file.write_cache_file(path, self.cache_key, self.caches.export())

    def load_caches(self, path: str | os.PathLike[str]) -> bool:
        """Replace the token caches with those saved in ``path`` by :meth:`save_caches`.

        Returns ``True`` when they were loaded. Returns ``False`` and changes nothing when
        the file is missing (silently) or is rejected, with a
        :class:`~corral.errors.CacheWarning` naming the file and the reason. A file is
        rejected unless it has exactly the arrays :meth:`save_caches` writes, with their
        dtypes and shapes, this compilation's :attr:`cache_key`, a digest that matches its
        contents, and references that stay inside its arrays and the trie. Never unpickles
        and never raises for a bad file.
        """
        reason = self.try_load_caches(path)
        if reason:
            warnings.warn(
                CacheWarning(
                    f"token cache file {os.fspath(path)} ignored: {reason}",
                    path=os.fspath(path),
                    reason=reason,
                ),
                stacklevel=2,
            )
        return reason is None

    def try_load_caches(self, path: str | os.PathLike[str]) -> str | None:
        """Load the caches of ``path`` if the file passes every check, without warning.

        Returns ``None`` when they were loaded, ``""`` when there is no file, otherwise why
        the file was rejected (nothing changed then).
        """
        arrays, reason = cache_file.read_problem(path)
        if arrays is None:
            return reason
        reason = cache_file.identity_problem(
            arrays, self.cache_key
        ) or self.caches.structure_problem(arrays, self.vocab.trie)
        if reason:
            return reason
        self.caches.replace(arrays)
        return None

    # -- tokens -------------------------------------------------------------------------------
    def is_special_terminal(self, token_id: int) -> bool:
        """Whether special token ``token_id`` stands for a terminal of the grammar."""
        return token_id in self._special_term_of_token

    def special_start_state(self, token_id: int) -> int:
        """The lexer start state of the terminal that stands for special token ``token_id``."""
        name = self._special_term_of_token[token_id]
        return int(self.tables.term_start[self.tables.terminal_names.index(name)])

    def token_data(self, token_id: int) -> tuple[np.ndarray, int, int]:
        """``(data, start, stop)``: the bytes of ``token_id`` as a slice of one array."""
        return self.vocab.token_data(token_id)


def _end_block(pairs: np.ndarray, node_byte: np.ndarray) -> np.ndarray:
    """257 offsets by child byte, then the ``(node, child)`` pairs sorted by child byte."""
    b = node_byte[pairs[:, 1]]
    order = np.argsort(b, kind="stable")
    offsets = np.searchsorted(b[order], np.arange(257)).astype(np.int32)
    return np.concatenate([offsets, pairs[order].reshape(-1).astype(np.int32)])


def _walk_buffers(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The calling thread's output buffers of a token-cache walk over a trie of ``n_nodes``
    nodes (``int32 [2 * n_nodes]`` each: dead rank pairs, end edges; 2.1 MB each with
    Llama-3), shared by every grammar's walks on the thread: each walk's results are
    copied out before the next."""
    size = 2 * max(1, n_nodes)
    return per_thread(
        ("walk", n_nodes), lambda: (np.zeros(size, np.int32), np.zeros(size, np.int32))
    )


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
