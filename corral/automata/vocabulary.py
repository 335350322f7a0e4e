"""The vocabulary: the exact bytes of every token id, special tokens, EOS ids, and the trie.

A :class:`Vocabulary` is immutable and shared by every grammar compiled for one model.
Token ids run over ``0..size-1`` where ``size`` is the width of the model's logits, which
may exceed the tokenizer (padded embedding matrices): padding ids are never allowed.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, TokenizerError
from .bitmask import as_int, as_int_list, bitmask_words
from .dense_rows import DenseRows
from .kernels.layout import TrieArrays, TrieRuns
from .state_cache import StateCacheStore

NORMAL, SPECIAL, EOS, PADDING, EMPTY = 0, 1, 2, 3, 4
CHAR_HEIGHT_NONE = 1 << 30  # char_height of nodes that end inside a character
# bytes whose runs trie walks may skip: printable ASCII but '"' and '\\'
PLAIN_BYTES = frozenset(range(0x20, 0x7F)) - {ord('"'), ord("\\")}
_KIND_NAMES = {NORMAL: "normal", SPECIAL: "special", EOS: "eos", PADDING: "padding", EMPTY: "empty"}


@dataclass(frozen=True)
class TokenTrie:
    """All grammar-usable tokens (normal, non-empty) in one byte trie, as flat arrays.

    Nodes are in depth-first preorder; node 0 is the root (no byte). For node ``i``:
    ``node_byte[i]`` is its byte, ``depth[i]`` its depth, its subtree is the index range
    ``[i, subtree_end[i])`` (first child ``i+1``, next sibling ``subtree_end[i]``), and the
    token ids ending exactly at it are ``token_ids[tok_start[i] : tok_start[i]+tok_count[i]]``.
    Its children, in byte order, are ``children[child_start[i] : child_start[i+1]]``.

    A token's *rank* is its index in ``token_ids`` (byte order); the tokens of node ``i``'s
    subtree are exactly the ranks ``rank_at[i] .. rank_at[subtree_end[i]]``.

    Walks skip runs of *plain* bytes (printable ASCII but ``"`` and ``\\``, what a JSON
    string holds unescaped) from lexer states that loop on all of them: node ``i``'s
    first non-plain descendants are ``frontier[frontier_begin[i] : frontier_end[i]]``;
    ``plain_height[i]`` is the length of the longest all-plain path down from it, and
    ``plain_below[i]`` the set of bytes on those paths.

    Walks also skip runs of whole *characters* (plain bytes and valid multi-byte UTF-8
    characters, ``kernels.trie.utf8_chars``) from states that loop on all of them: node
    ``i``'s first descendants outside such a run are ``char_frontier[char_frontier_begin[i]
    : char_frontier_end[i]]``; ``char_height[i]`` is the number of whole characters on the
    longest run down from it (``CHAR_HEIGHT_NONE`` where ``i`` ends inside a character:
    no run starts there), ``char_below[i]`` the ASCII bytes on those runs, and
    ``chars[i]`` the number of characters decoded from the root up to ``i``.

    Nodes with at least ``MEMO_MIN`` nodes in their subtree are numbered ``0 ..
    n_large``, in preorder, by ``large_index`` (-1 for the others): walks remember
    what they found below these (``subtree_memo.SubtreeMemo``).
    """

    node_byte: np.ndarray  # uint8 [n_nodes]
    depth: np.ndarray  # int32 [n_nodes]
    subtree_end: np.ndarray  # int32 [n_nodes]
    tok_start: np.ndarray  # int32 [n_nodes]
    tok_count: np.ndarray  # int32 [n_nodes]
    token_ids: np.ndarray  # int32 [n_tokens]
    child_start: np.ndarray  # int32 [n_nodes + 1]
    children: np.ndarray  # int32 [n_nodes - 1]
    rank_at: np.ndarray  # int32 [n_nodes + 1]
    max_depth: int
    depth_small: np.ndarray  # depth as uint8 when every depth fits (faster walks), else depth
    plain: np.ndarray  # uint8 [256]: 1 for the bytes a walk may skip runs of (PLAIN_BYTES)
    frontier: np.ndarray  # int32: non-plain nodes; see kernels.trie.skip_frontier
    frontier_begin: np.ndarray  # int32 [n_nodes]
    frontier_end: np.ndarray  # int32 [n_nodes]
    plain_height: np.ndarray  # int32 [n_nodes]: nodes on the longest plain path down from i
    plain_below: np.ndarray  # int64 [n_nodes, 2]: bit set of the bytes on those paths
    char_frontier: np.ndarray  # int32: nodes outside character runs; kernels.trie.skip_frontier
    char_frontier_begin: np.ndarray  # int32 [n_nodes]
    char_frontier_end: np.ndarray  # int32 [n_nodes]
    char_height: np.ndarray  # int32 [n_nodes]: characters on the longest run down from i
    char_below: np.ndarray  # int64 [n_nodes, 2]: bit set of the ASCII bytes on those runs
    chars: np.ndarray  # int32 [n_nodes]: characters decoded on the path from the root
    all_ids: np.ndarray  # uint32 [ceil(vocab_size / 32)]: id bitmask of every trie token
    large_index: np.ndarray  # int32 [n_nodes]: index among the large nodes, or -1
    n_large: int

    @functools.cached_property
    def kernel_arrays(self) -> tuple[Any, ...]:
        """The trie as mask kernels take it: a plain tuple of the fields named by
        :class:`~corral.automata.kernels.layout.TrieArrays`, in its order."""
        return tuple(getattr(self, name) for name in TrieArrays._fields)

    @functools.cached_property
    def kernel_runs(self) -> tuple[Any, ...]:
        """The trie's run indexes as the token-cache walk takes them: a plain tuple of the
        fields named by :class:`~corral.automata.kernels.layout.TrieRuns`."""
        return tuple(getattr(self, name) for name in TrieRuns._fields)

    @property
    def n_nodes(self) -> int:
        return int(self.node_byte.shape[0])

    def child(self, node: int, byte: int) -> int:
        """The child of ``node`` along ``byte``, or -1."""
        lo, hi = int(self.child_start[node]), int(self.child_start[node + 1])
        kids = self.children[lo:hi]
        j = int(np.searchsorted(self.node_byte[kids], byte))
        if j < len(kids) and int(self.node_byte[kids[j]]) == byte:
            return int(kids[j])
        return -1

    def node_of(self, data: bytes) -> int:
        """The node that spells ``data`` (the root for ``b""``), or -1."""
        node = 0
        for b in data:
            node = self.child(node, b)
            if node < 0:
                return -1
        return node

    def extended(self, data: bytes) -> bool:
        """Whether some token starts with ``data`` and is longer than it."""
        node = self.node_of(data)
        return node >= 0 and int(self.subtree_end[node]) > node + 1

    @property
    def n_tokens(self) -> int:
        return int(self.token_ids.shape[0])

    @functools.cached_property
    def layout_digest(self) -> bytes:
        """SHA-256 of the layout token caches index: node bytes (their order numbers the
        nodes of end edges), subtree ends, token ids in rank order, ranks per node."""
        h = hashlib.sha256()
        for name in ("node_byte", "subtree_end", "token_ids", "rank_at"):
            a = np.ascontiguousarray(getattr(self, name))
            h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
            h.update(a.reshape(-1).view(np.uint8).data)
        return h.digest()


class Vocabulary:
    """Token id → bytes, with special tokens, EOS ids and the model's logits width.

    Args:
        token_bytes: bytes of token ids ``0..len-1`` (special tokens: their text).
        eos_token_ids: ids that end generation; allowed exactly when the output is complete.
        special_ids: control tokens; never allowed inside grammar text.
        vocab_size: logits width; defaults to ``len(token_bytes)``. Ids at or above
            ``len(token_bytes)`` are padding and never allowed.

    Ids and sizes are integers (``int`` or NumPy integers); anything else, a ``bool``
    included, raises :class:`~corral.errors.ArgumentTypeError` (a ``TypeError``); a
    ``vocab_size`` below 1, :class:`~corral.errors.InvalidArgumentError`.
    """

    def __init__(
        self,
        token_bytes: Sequence[bytes],
        *,
        eos_token_ids: Iterable[int] = (),
        special_ids: Iterable[int] = (),
        vocab_size: int | None = None,
        family: str = "custom",
    ) -> None:
        n_tok = len(token_bytes)
        size = n_tok if vocab_size is None else as_int(vocab_size, "vocab_size", minimum=1)
        if size <= 0:
            raise TokenizerError("a vocabulary needs at least one token, got none")
        eos = sorted(set(as_int_list(eos_token_ids, "eos_token_ids")))
        special = set(as_int_list(special_ids, "special_ids"))
        if size < n_tok:
            dropped = [i for i in range(size, n_tok) if i not in special and token_bytes[i]]
            if dropped:
                raise TokenizerError(
                    f"the model's vocabulary size {size} is smaller than the tokenizer's "
                    f"{n_tok}, and ids {dropped[:5]} are normal tokens: wrong tokenizer for "
                    "this model?"
                )
        for i in eos:
            if not 0 <= i < size:
                raise TokenizerError(f"EOS id {i} is outside the vocabulary (size {size})")
        tb = [b if type(b) is bytes else bytes(b) for b in itertools.islice(token_bytes, size)]
        tb += [b""] * (size - len(tb))
        lengths = np.fromiter(map(len, tb), np.int64, count=size)
        real = min(n_tok, size)  # ids the tokenizer has; the rest are padding
        kinds = np.full(size, PADDING, np.uint8)
        kinds[:real] = np.where(lengths[:real] > 0, NORMAL, EMPTY)
        kinds[[i for i in special if 0 <= i < real]] = SPECIAL
        kinds[[i for i in eos if i < real]] = EOS
        self._token_bytes: tuple[bytes, ...] = tuple(tb)
        self._kinds = kinds
        self._kinds.setflags(write=False)
        self.size = size
        self.tokenizer_size = n_tok
        self.eos_token_ids: tuple[int, ...] = tuple(eos)
        self.family = family
        self._trie: TokenTrie | None = None
        self._state_cache: StateCacheStore | None = None
        self._dense_rows: DenseRows | None = None
        self._offsets = np.zeros(size + 1, np.int64)
        np.cumsum(lengths, out=self._offsets[1:])
        self._data = np.frombuffer(b"".join(tb), dtype=np.uint8)
        self._lock = threading.Lock()
        h = hashlib.sha256()
        h.update(f"size={size};eos={eos};".encode())
        h.update(kinds.tobytes())
        h.update(lengths.astype("<u4").tobytes())
        h.update(self._data.tobytes())
        self.hash = h.hexdigest()

    # -- construction from Hugging Face ------------------------------------------------
    @classmethod
    def from_hf(
        cls,
        tokenizer: Any,
        vocab_size: int | None = None,
        *,
        eos_token_ids: int | Iterable[int] | None = None,
        added_tokens: str = "whitespace",
        check: bool = True,
    ) -> Vocabulary:
        """Build the vocabulary of a Hugging Face tokenizer.

        Args:
            tokenizer: a ``transformers`` tokenizer with a ``tokenizers`` backend.
            vocab_size: the model's logits width (``model.config.vocab_size``) when it
                differs from the tokenizer; extra ids are padding and never allowed. An
                integer (``ArgumentTypeError``, a ``TypeError``, otherwise, e.g. for
                ``"128300"`` or ``True``).
            eos_token_ids: an id or ids that end generation (e.g.
                ``model.generation_config.eos_token_id``); default: the tokenizer's
                ``eos_token_id``.
            added_tokens: which added tokens not marked special may appear in grammar text:
                ``"whitespace"`` (default: only those made of whitespace, such as Gemma's
                newline and tab runs, which the tokenizer always uses for that text),
                ``"all"``, or ``"none"``. The others are treated as special tokens: never
                produced inside grammar text (many are chat-control tokens left unmarked,
                e.g. DeepSeek-Coder's ``<|EOT|>``).
            check: encode a probe text and check the token bytes spell it (fail closed on
                a tokenizer whose bytes corral would misread).

        The vocabulary's token trie is made here, read from corral's cache folder or built
        and stored (``trie_file.py``), so that the first grammar compiled for it does not
        pay for it: 5-9 ms for Llama-3's 128,256 tokens from the file.
        """
        from .tokenizer_bytes import check_roundtrip, extract

        if vocab_size is not None:
            vocab_size = as_int(vocab_size, "vocab_size")
        if eos_token_ids is None:
            eos: list[int] | None = None
        elif isinstance(eos_token_ids, (int, np.integer)):  # bool too: refused by as_int
            eos = [as_int(eos_token_ids, "eos_token_ids")]
        else:
            eos = as_int_list(eos_token_ids, "eos_token_ids")
        if added_tokens not in ("whitespace", "all", "none"):
            raise InvalidArgumentError(
                f"added_tokens must be 'whitespace', 'all' or 'none', got {added_tokens!r}"
            )
        info = extract(tokenizer)
        special = set(info.special)
        for i in info.added:
            text = info.token_bytes[i]
            if added_tokens == "none" or (
                added_tokens == "whitespace" and not (text and text.isspace())
            ):
                special.add(i)
        if eos is None:
            eos = [] if info.eos_token_id is None else [info.eos_token_id]
        if check:
            check_roundtrip(tokenizer, info.token_bytes, info)
        vocab = cls(
            info.token_bytes,
            eos_token_ids=eos,
            special_ids=special,
            vocab_size=vocab_size,
            family=info.family,
        )
        vocab.trie  # noqa: B018 (made now, not inside the first compile)
        return vocab

    # -- queries ------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return (
            f"Vocabulary(size={self.size}, tokenizer_size={self.tokenizer_size}, "
            f"family={self.family!r}, eos={list(self.eos_token_ids)})"
        )

    def _id(self, token_id: Any) -> int:
        """``token_id`` checked: an integer (``ArgumentTypeError``) in ``0 .. size-1``
        (``InvalidArgumentError``)."""
        tid = token_id if type(token_id) is int else as_int(token_id, "token_id")
        if not 0 <= tid < self.size:
            raise self._outside(tid)
        return tid

    def _outside(self, tid: int) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"token id {tid} is outside the vocabulary: expected an id in [0, {self.size})"
        )

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of ``token_id`` (special tokens: their text; padding: ``b""``)."""
        return self._token_bytes[self._id(token_id)]

    def byte_table(self) -> tuple[np.ndarray, np.ndarray]:
        """``(data, offsets)``: token ``i``'s bytes are ``data[offsets[i] : offsets[i+1]]``
        (``uint8`` and ``int64 [size + 1]``, shared and read-only)."""
        return self._data, self._offsets

    def token_data(self, token_id: int) -> tuple[np.ndarray, int, int]:
        """``(data, start, stop)``: the bytes of ``token_id`` as a slice of one shared array."""
        tid = token_id if type(token_id) is int else as_int(token_id, "token_id")
        if not 0 <= tid < self.size:  # inlined: the matcher calls this for every token
            raise self._outside(tid)
        return self._data, int(self._offsets[tid]), int(self._offsets[tid + 1])

    def kind(self, token_id: int) -> str:
        """``"normal"``, ``"special"``, ``"eos"``, ``"padding"`` or ``"empty"``."""
        return _KIND_NAMES[int(self._kinds[self._id(token_id)])]

    @property
    def kinds(self) -> np.ndarray:
        """``uint8 [size]`` kind codes (read-only)."""
        return self._kinds

    def special_tokens(self) -> dict[str, int]:
        """Text → id of every special (control) token."""
        return {
            self._token_bytes[i].decode("utf-8", "replace"): i
            for i in np.flatnonzero(self._kinds == SPECIAL).tolist()
        }

    def decode(self, token_ids: Iterable[int]) -> bytes:
        """Concatenated bytes of ``token_ids`` (EOS contributes nothing).

        ``token_ids``: integer ids in ``0 .. size-1`` (a list, or a 1-D NumPy or torch
        integer array); ``ArgumentTypeError`` / ``InvalidArgumentError`` otherwise.
        """
        ids = as_int_list(token_ids, "token_ids")
        for i in ids:
            if not 0 <= i < self.size:
                raise self._outside(i)
        kinds = self._kinds
        return b"".join(self._token_bytes[i] for i in ids if kinds[i] in (NORMAL, SPECIAL))

    @property
    def trie(self) -> TokenTrie:
        """The trie of all normal tokens (made by ``from_hf``, else on first use; then
        shared)."""
        if self._trie is None:
            with self._lock:
                if self._trie is None:
                    self._trie = self._build_trie()
        return self._trie

    @property
    def state_cache(self) -> StateCacheStore:
        """Lexer-state token caches shared by every grammar compiled for this vocabulary.

        Bounded in bytes (``state_cache.max_bytes``, 256 MiB by default; ``0`` turns
        sharing off). See ``corral/automata/state_cache.py``.
        """
        if self._state_cache is None:
            with self._lock:
                if self._state_cache is None:
                    self._state_cache = StateCacheStore()
        return self._state_cache

    @property
    def dense_rows(self) -> DenseRows:
        """The dense token-cache rows of every grammar compiled for this vocabulary, one
        copy each (``corral/automata/dense_rows.py``)."""
        if self._dense_rows is None:
            words, rank_words = bitmask_words(self.size), (self.trie.n_tokens + 31) // 32
            with self._lock:
                if self._dense_rows is None:
                    self._dense_rows = DenseRows(words, rank_words)
        return self._dense_rows

    def _build_trie(self) -> TokenTrie:
        """The trie, read from its file when a process built it before
        (``trie_file.py``), else built and, for a large vocabulary, stored."""
        from . import trie_file

        n_tokens = int(np.count_nonzero(self._kinds == NORMAL))
        if n_tokens < trie_file.MIN_TOKENS:
            return self._new_trie()
        stored = trie_file.load(self.hash, n_tokens, self.size, int(self._offsets[-1]))
        if stored is not None:
            return TokenTrie(**stored)
        trie = self._new_trie()
        trie_file.store(trie, self.hash)
        return trie

    def _new_trie(self) -> TokenTrie:
        from ..grammar.regex.dawg import byte_order
        from .kernels.mask import MEMO_MIN
        from .kernels.trie import ascii_below, build_trie, skip_frontier, utf8_chars

        # the normal tokens in byte order (equal ones by id: the sort is stable), and
        # their bytes in that order
        order = byte_order(self._data, self._offsets)
        ids = order[self._kinds[order] == NORMAL]
        lengths = np.diff(self._offsets)[ids]
        offsets = np.zeros(ids.shape[0] + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = self._data[
            np.repeat(self._offsets[ids] - offsets[:-1], lengths) + np.arange(offsets[-1])
        ]
        node_byte, depth, subtree_end, tok_start, tok_count, parent = build_trie(data, offsets)
        token_ids = np.array(ids, np.int32)
        # children of each node, in byte order (preorder lists siblings in byte order)
        n = node_byte.shape[0]
        order = np.argsort(parent[1:], kind="stable") + 1
        children = order.astype(np.int32)
        child_start = np.searchsorted(parent[children], np.arange(n + 1)).astype(np.int32)
        rank_at = np.zeros(n + 1, np.int32)
        np.cumsum(tok_count, out=rank_at[1:])
        plain = np.zeros(256, np.uint8)
        plain[list(PLAIN_BYTES)] = 1
        is_plain = plain[node_byte]  # the root's byte is 0: never plain
        frontier, frontier_begin, frontier_end, plain_height = skip_frontier(
            parent, subtree_end, is_plain, is_plain
        )
        plain_below = ascii_below(node_byte, parent, is_plain)
        in_char, boundary, chars = utf8_chars(node_byte, parent, plain)
        char_frontier, char_begin, char_end, char_height = skip_frontier(
            parent, subtree_end, in_char, in_char & boundary
        )
        char_height[boundary == 0] = CHAR_HEIGHT_NONE
        char_below = ascii_below(node_byte, parent, in_char)
        all_ids = np.zeros(bitmask_words(self.size), np.uint32)
        bit = np.uint32(1) << (token_ids & 31).astype(np.uint32)
        np.bitwise_or.at(all_ids, token_ids >> 5, bit)
        max_depth = int(depth.max()) if depth.shape[0] else 0
        large = subtree_end - np.arange(n, dtype=np.int32) >= MEMO_MIN
        large[0] = False  # the root's walk is the lexer state's cache itself
        large_index = np.where(large, np.cumsum(large) - 1, -1).astype(np.int32)
        trie = TokenTrie(
            node_byte,
            depth,
            subtree_end,
            tok_start,
            tok_count,
            token_ids,
            child_start,
            children,
            rank_at,
            max_depth,
            depth.astype(np.uint8) if max_depth <= 255 else depth,
            plain,
            frontier,
            frontier_begin,
            frontier_end,
            plain_height,
            plain_below,
            char_frontier,
            char_begin,
            char_end,
            char_height,
            char_below,
            chars,
            all_ids,
            large_index,
            int(large.sum()),
        )
        for f in fields(trie):
            value = getattr(trie, f.name)
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
        return trie
