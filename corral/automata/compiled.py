"""CompiledGrammar: a grammar laid out for one vocabulary, shared by every matcher.

A compiled grammar is immutable in meaning. It owns the per-lexer-state token caches
(``kernels/mask.py``), which are filled on first use under a lock and never change once
written, so a compiled grammar can be shared across threads and sequences.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import math
import os
import tempfile
import threading
import warnings
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CacheWarning
from ..grammar.ir import Grammar
from .bitmask import bitmask_words
from .state_cache import StateEntry
from .subtree_memo import SubtreeMemo
from .tables import Tables, build_tables
from .vocabulary import SPECIAL, Vocabulary

if TYPE_CHECKING:
    from .matcher import Matcher

_DISK_FORMAT = 2  # bump when the layout or the meaning of the token cache files changes
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
    @functools.cached_property
    def cache_key(self) -> str:
        """Hex digest (32 characters) naming this compilation's token caches.

        It covers everything the caches are computed from: the file format and corral's
        version, the grammar's fingerprint, the vocabulary's hash, the lexer tables
        (``gt`` and ``lex_trans``: dtype, shape and contents) and the trie layout the
        caches index (node bytes, subtree ranges, rank order of the tokens). Two
        compilations with the same key build identical caches.
        """
        from .. import __version__

        h = hashlib.sha256()
        h.update(f"corral-token-cache-v{_DISK_FORMAT}\0corral-{__version__}\0".encode())
        h.update(self.grammar.fingerprint.encode() + b"\0")
        h.update(self.vocab.hash.encode() + b"\0")
        _hash_array(h, "gt", self.tables.gt)
        _hash_array(h, "lex_trans", self.tables.lex_trans)
        h.update(self.vocab.trie.layout_digest)
        return h.hexdigest()[:32]

    def save_caches(self, path: str | os.PathLike[str]) -> None:
        """Write the token caches built so far to ``path``, atomically (a reader never
        sees a half-written file).

        The file is an uncompressed ``.npz`` of plain arrays (no pickle): ``key`` (this
        :attr:`cache_key`, ASCII), ``digest`` (``uint8 [32]``, SHA-256 over the key and
        every cache array's name, dtype, shape and bytes, see :func:`_file_digest`),
        ``cmeta`` (``int32 [G, 5]``), ``dense`` (``uint32 [D, W]``), ``dense_rank``
        (``uint32 [D, RW]``), ``sparse`` and ``ends`` (``int32 [n]``).
        """
        with self._lock:  # a consistent snapshot: cmeta is written in place by _install
            arrays = {
                "cmeta": self._cmeta.copy(),
                "dense": self._dense[: self._n_dense],
                "dense_rank": self._dense_rank[: self._n_dense],
                "sparse": self._sparse[: self._n_sparse],
                "ends": self._ends[: self._n_ends],
            }
        key = self.cache_key
        digest = _file_digest(key, arrays)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(
                    f,
                    key=np.frombuffer(key.encode(), np.uint8),
                    digest=np.frombuffer(digest, np.uint8),
                    **arrays,
                )
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

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
        reason = self._load_caches(path)
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

    def _load_caches(self, path: str | os.PathLike[str]) -> str | None:
        """Load the caches of ``path`` if the file passes every check.

        Returns ``None`` when they were loaded, ``""`` when there is no file, otherwise why
        the file was rejected (nothing changed then).
        """
        try:
            arrays = _read_cache_file(path)
        except (FileNotFoundError, NotADirectoryError):
            return ""
        except IsADirectoryError:
            return "it is a directory"
        except _CacheFileError as e:
            return str(e)
        except Exception as e:  # whatever a damaged file makes zipfile or numpy raise
            return f"damaged or not a cache file ({type(e).__name__}: {e})"
        reason = self._check_caches(arrays)
        if reason:
            return reason
        with self._lock:
            self._cmeta = arrays["cmeta"]
            dense = arrays["dense"]
            if len(dense):
                self._dense = dense
                self._dense_rank = arrays["dense_rank"]
            else:
                self._dense = np.zeros((4, self.words), np.uint32)
                self._dense_rank = np.zeros((4, self.rank_words), np.uint32)
            self._n_dense = dense.shape[0]
            self._sparse = arrays["sparse"]
            self._n_sparse = self._sparse.shape[0]
            self._ends = arrays["ends"]
            self._n_ends = self._ends.shape[0]
        return None

    def _check_caches(self, arrays: dict[str, np.ndarray]) -> str:
        """Why the arrays of a cache file may not be used here, or ``""`` if they may."""
        return self._identity_problem(arrays) or self._structure_problem(arrays)

    def _identity_problem(self, arrays: dict[str, np.ndarray]) -> str:
        """``""`` when the file's key is this compilation's and its digest matches."""
        key = bytes(arrays["key"])
        if key != self.cache_key.encode():
            return (
                "written for another grammar, vocabulary, format or corral version "
                f"(key {key[:64].decode('ascii', 'replace')!r}, expected {self.cache_key!r})"
            )
        if not hmac.compare_digest(bytes(arrays["digest"]), _file_digest(self.cache_key, arrays)):
            return "its contents do not match the digest stored with them (damaged or edited)"
        return ""

    def _structure_problem(self, arrays: dict[str, np.ndarray]) -> str:
        """``""`` when the arrays fit this compilation and every reference stays inside
        them and the trie (what the kernels index without bounds checks)."""
        cmeta, dense, dense_rank = arrays["cmeta"], arrays["dense"], arrays["dense_rank"]
        sparse, ends = arrays["sparse"], arrays["ends"]
        if (
            cmeta.shape != self._cmeta.shape
            or dense.shape[1] != self.words
            or dense_rank.shape != (dense.shape[0], self.rank_words)
        ):
            return (
                f"array shapes cmeta {cmeta.shape}, dense {dense.shape}, dense_rank "
                f"{dense_rank.shape} do not fit {self._cmeta.shape[0]} lexer states and "
                f"{self.words}/{self.rank_words}-word masks"
            )
        trie = self.vocab.trie
        kind, a, n, e0, ne = (cmeta[:, i].astype(np.int64) for i in range(5))
        dense_ok = (kind != 1) | ((a >= 0) & (a < dense.shape[0]))
        sparse_ok = (kind != 2) | ((a >= 0) & (n >= 0) & (a + n <= sparse.shape[0]))
        ends_ok = (ne == 0) | ((e0 >= 0) & (ne > 0) & (e0 + 257 + 2 * ne <= ends.shape[0]))
        if not (
            np.all((kind >= 0) & (kind <= 2) & dense_ok & sparse_ok & ends_ok)
            and (len(sparse) == 0 or (sparse.min() >= 0 and sparse.max() < trie.n_tokens))
            and (len(ends) == 0 or (ends.min() >= 0 and ends.max() < trie.n_nodes))
        ):
            return "a state's cache refers outside the file's arrays or the trie"
        blocks = e0[(kind != 0) & (ne > 0)]
        if len(blocks):  # each end block: 257 offsets by child byte, from 0 up to its edges
            offsets = ends[blocks[:, None] + np.arange(257)]
            counts = ne[(kind != 0) & (ne > 0)]
            if not (
                np.all(offsets[:, 0] == 0)
                and np.all(np.diff(offsets, axis=1) >= 0)
                and np.all(offsets[:, 256] == counts)
            ):
                return "an end-edge block's offsets are inconsistent"
        # dense rows may hold trie tokens only (never special, EOS or padding ids)
        rank_tail = np.zeros(self.rank_words, np.uint32)
        if trie.n_tokens % 32:
            rank_tail[-1] = np.uint32(~((1 << (trie.n_tokens % 32)) - 1) & 0xFFFFFFFF)
        if np.any(dense & ~trie.all_ids) or np.any(dense_rank & rank_tail):
            return "a dense row allows tokens that are not in the trie"
        return ""

    def special_start_state(self, token_id: int) -> int:
        """The lexer start state of the terminal that stands for special token ``token_id``."""
        name = self._special_term_of_token[token_id]
        return int(self.tables.term_offsets[self.tables.terminal_names.index(name)])

    def token_data(self, token_id: int) -> tuple[np.ndarray, int, int]:
        """``(data, start, stop)``: the bytes of ``token_id`` as a slice of one array."""
        return self.vocab.token_data(token_id)


class _CacheFileError(Exception):
    """A cache file does not have the layout :meth:`CompiledGrammar.save_caches` writes."""


# name -> (dtype, ndim) of every array in a cache file (the digest covers the last five)
_FILE_LAYOUT: dict[str, tuple[np.dtype[Any], int]] = {
    "key": (np.dtype(np.uint8), 1),
    "digest": (np.dtype(np.uint8), 1),
    "cmeta": (np.dtype(np.int32), 2),
    "dense": (np.dtype(np.uint32), 2),
    "dense_rank": (np.dtype(np.uint32), 2),
    "sparse": (np.dtype(np.int32), 1),
    "ends": (np.dtype(np.int32), 1),
}
_DIGESTED = ("cmeta", "dense", "dense_rank", "sparse", "ends")


def _hash_array(h: Any, name: str, a: np.ndarray) -> None:
    """Feed ``name``, ``a``'s dtype, shape and C-order bytes to the hash ``h``."""
    h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
    h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8))  # C-order bytes, no copy


def _file_digest(key: str, arrays: dict[str, np.ndarray]) -> bytes:
    """SHA-256 (32 bytes) over ``key`` and the cache arrays, in the order of ``_DIGESTED``.

    It detects damage and arrays taken from another file; it has no secret, so it does
    not stop someone who rewrites a file on purpose and recomputes it.
    """
    h = hashlib.sha256()
    h.update(f"corral-token-cache-digest\0{key}\0".encode())
    for name in _DIGESTED:
        _hash_array(h, name, arrays[name])
    return h.digest()


def _read_cache_file(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The arrays of a cache file, each a new writable C-contiguous array.

    Reads the zip archive itself rather than through ``np.load``: every entry must be
    one of ``_FILE_LAYOUT``'s, stored uncompressed, with that dtype and number of
    dimensions, and hold exactly the bytes its header declares, which is checked
    before anything is allocated (a header cannot make it allocate more than the file
    holds). Object arrays are refused from their header, so nothing is unpickled.
    Raises :class:`_CacheFileError`, or whatever ``zipfile`` or numpy raise on damage.
    """
    fmt = np.lib.format
    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        expected = sorted(f"{n}.npy" for n in _FILE_LAYOUT)
        if sorted(names) != expected:
            raise _CacheFileError(f"its entries are {sorted(names)[:10]}, not {expected}")
        for info in infos:
            name = info.filename[: -len(".npy")]
            dtype, ndim = _FILE_LAYOUT[name]
            if info.compress_type != zipfile.ZIP_STORED:
                raise _CacheFileError(f"entry {name!r} is compressed")
            with zf.open(info) as f:
                version = fmt.read_magic(f)
                if version == (1, 0):
                    shape, fortran, dt = fmt.read_array_header_1_0(f)
                elif version == (2, 0):
                    shape, fortran, dt = fmt.read_array_header_2_0(f)
                else:
                    raise _CacheFileError(f"entry {name!r} has .npy format version {version}")
                if dt != dtype or len(shape) != ndim or any(d < 0 for d in shape):
                    raise _CacheFileError(
                        f"entry {name!r} is {dt} {shape}, expected {dtype} in {ndim} dimensions"
                    )
                nbytes = math.prod(shape) * dtype.itemsize
                if nbytes > info.file_size:
                    raise _CacheFileError(f"entry {name!r} declares more data than it holds")
                data = f.read(nbytes + 1)  # reading to the end also checks the zip CRC
                if len(data) != nbytes:
                    raise _CacheFileError(f"entry {name!r} holds {len(data)} bytes, not {nbytes}")
            a = np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")
            out[name] = np.array(a, order="C")  # a writable copy
    return out


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
