"""``compile()``: grammar specs → :class:`CompiledGrammar`, with a bounded in-memory cache."""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import CacheWarning
from ..grammar.ir import Grammar
from .compiled import CompiledGrammar
from .vocabulary import Vocabulary


class CompileCache:
    """A bounded LRU of compiled grammars keyed by (grammar fingerprint, vocabulary hash).

    Bounded by entries and by the bytes of each entry's tables and token caches measured
    when it is stored. Thread-safe.
    """

    def __init__(self, max_entries: int = 64, max_bytes: int = 512 << 20) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str], tuple[CompiledGrammar, int]] = OrderedDict()
        self._texts: OrderedDict[tuple[str, str], Grammar] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._texts.clear()

    def grammar_for_text(self, text: str, start: str) -> Grammar:
        return self.grammar_for((text, start), lambda: Grammar.from_lark(text, start))

    def grammar_for_regex(self, pattern: str) -> Grammar:
        """The grammar of a regex (Python syntax, matched in full), built once."""
        return self.grammar_for(
            ("regex:" + pattern, "\0regex"), lambda: Grammar.from_regex(pattern)
        )

    def grammar_for(self, key: tuple[str, str], build: Callable[[], Grammar]) -> Grammar:
        """The grammar built from a source identified by ``key`` (built once, then reused)."""
        with self._lock:
            g = self._texts.get(key)
            if g is not None:
                self._texts.move_to_end(key)
                return g
        g = build()
        with self._lock:
            self._texts[key] = g
            while len(self._texts) > 4 * self.max_entries:
                self._texts.popitem(last=False)
        return g

    def get(self, grammar: Grammar, vocab: Vocabulary) -> CompiledGrammar:
        key = (grammar.fingerprint, vocab.hash)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return hit[0]
            self.misses += 1
        compiled = CompiledGrammar(grammar, vocab)
        size = compiled.cache_stats()["bytes"]
        with self._lock:
            self._items[key] = (compiled, size)
            total = sum(s for _, s in self._items.values())
            while self._items and (len(self._items) > self.max_entries or total > self.max_bytes):
                _, (_, s) = self._items.popitem(last=False)
                total -= s
        return compiled


default_cache = CompileCache()
PRECOMPUTE_MAX_STATES = 256


def compile(
    spec: Any,
    vocab: Vocabulary,
    *,
    start: str = "start",
    cache: bool = True,
    precompute: bool | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    **schema_options: Any,
) -> CompiledGrammar:
    """Compile a grammar spec for a vocabulary.

    Args:
        spec: Lark grammar text; a JSON Schema (a dict, a bool, JSON text starting with
            ``{``, or a pydantic model class); or a :class:`Grammar` (e.g. from
            ``Grammar.from_regex``).
        vocab: the model's :class:`Vocabulary`.
        start: start rule for Lark text.
        cache: reuse an identical earlier compilation (see :data:`default_cache`).
        precompute: build every lexer state's token cache now (``True``), or on first use
            (``False``); default: now when the grammar has at most
            :data:`PRECOMPUTE_MAX_STATES` lexer states, so small grammars never pay a cache
            build during decoding.
        cache_dir: a folder for token caches on disk (``<key>.npz``, plain arrays, never
            pickled). When a file for this grammar and vocabulary is there, its caches are
            loaded instead of built; otherwise they are built and written there. The key
            covers the grammar, the vocabulary, the lexer tables, the trie layout, the
            file format and corral's version, and each file stores a SHA-256 digest of
            its key and arrays, checked on load with the arrays' dtypes, shapes and
            bounds. So a damaged file (flipped bits, truncated, not an archive, a
            directory in its place), a file of another grammar, vocabulary or version
            (even renamed to this key), or one whose arrays were edited, is never used:
            a :class:`~corral.errors.CacheWarning` names it and says why, its caches are
            built again and the file is rewritten (a write that fails is a warning too;
            a bad cache file never raises). The digest has no secret: whoever can write
            to the folder can forge a file that passes, so ``cache_dir`` must be as
            trusted as the code that uses it. With a ``cache_dir`` every cache is built,
            whatever ``precompute`` says.
        schema_options: options for a JSON Schema ``spec`` (see
            :class:`corral.grammar.json_schema.Options`: ``whitespace``, ``final_check``...).

    Returns:
        An immutable :class:`CompiledGrammar`, safe to share across threads and sequences.
    """
    if not isinstance(vocab, Vocabulary):
        raise TypeError(
            f"vocab must be a corral.Vocabulary (e.g. Vocabulary.from_hf(tokenizer)), "
            f"not {type(vocab).__name__}"
        )
    grammar = _grammar_of(spec, start, cache, schema_options)
    compiled = default_cache.get(grammar, vocab) if cache else CompiledGrammar(grammar, vocab)
    if precompute is None:
        precompute = compiled.tables.n_lexer_states <= PRECOMPUTE_MAX_STATES
    if cache_dir is not None:
        path = Path(cache_dir) / f"{compiled.cache_key}.npz"
        stats = compiled.cache_stats()
        rejected = False
        if stats["cached_states"] == 0:
            reason = compiled._load_caches(path)
            if reason is None:
                return compiled
            if reason:  # "" is a missing file: nothing to say
                rejected = True
                warnings.warn(
                    CacheWarning(
                        f"token cache file {path} rejected: {reason}; its caches are built "
                        "again and the file rewritten",
                        path=str(path),
                        reason=reason,
                    ),
                    stacklevel=2,
                )
        if rejected or stats["cached_states"] < stats["lexer_states"] or not path.is_file():
            compiled.warm()
            try:
                if path.is_dir():  # an empty directory where the file belongs is removed
                    path.rmdir()
                compiled.save_caches(path)
            except OSError as e:
                why = f"{type(e).__name__}: {e}"
                warnings.warn(
                    CacheWarning(
                        f"token cache file {path} could not be written ({why}); the "
                        "caches were built in memory",
                        path=str(path),
                        reason=why,
                    ),
                    stacklevel=2,
                )
    elif precompute:
        compiled.warm()
    return compiled


def _is_schema(spec: Any) -> bool:
    if isinstance(spec, (dict, bool)):
        return True
    if isinstance(spec, type) and hasattr(spec, "model_json_schema"):
        return True
    return isinstance(spec, str) and spec.lstrip().startswith("{")


def _grammar_of(spec: Any, start: str, cache: bool, schema_options: dict[str, Any]) -> Grammar:
    if _is_schema(spec):
        import json

        from ..grammar.json_schema import grammar_from_json_schema
        from ..grammar.json_schema.load import as_schema

        schema = as_schema(spec)
        key = (
            "json-schema:" + json.dumps(schema, sort_keys=True, ensure_ascii=False),
            json.dumps(schema_options, sort_keys=True, default=repr),
        )
        build = lambda: grammar_from_json_schema(schema, **schema_options)  # noqa: E731
        return default_cache.grammar_for(key, build) if cache else build()
    if schema_options:
        raise TypeError(
            f"options {sorted(schema_options)} apply to JSON Schemas only, not to "
            f"{type(spec).__name__}"
        )
    if isinstance(spec, Grammar):
        return spec
    if isinstance(spec, str):
        return (
            default_cache.grammar_for_text(spec, start) if cache else Grammar.from_lark(spec, start)
        )
    raise TypeError(
        f"cannot compile a {type(spec).__name__}: pass Lark grammar text, a JSON Schema "
        "(dict, JSON text, pydantic model class) or a corral.Grammar"
    )
