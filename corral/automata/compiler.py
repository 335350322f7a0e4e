"""The compiler: grammar specs → :class:`CompiledGrammar` for one vocabulary.

* :class:`Compiler` compiles for one :class:`Vocabulary`, with one method per front end
  (:meth:`~Compiler.json_schema`, :meth:`~Compiler.lark`, :meth:`~Compiler.regex`,
  :meth:`~Compiler.grammar`) and :meth:`~Compiler.compile`, which picks the front end from
  the spec's type (``corral/grammar/frontends.py``). It owns its caches, so each model's
  compiler can be sized and cleared on its own.
* :class:`CompileCache` is a compiler's pair of bounded caches: compiled grammars, and the
  grammars built from each source.
* :func:`compile` is the convenience over a default compiler: a :class:`Compiler` over
  :data:`default_cache`, which every vocabulary shares (its keys hold the vocabulary's
  hash).

After a compilation (cached or not) a compiler warms the token caches (``precompute``) or
loads and writes them in a folder (``cache_dir``): see :func:`compile`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..caching import BoundedCache
from ..errors import ArgumentTypeError, CacheWarning
from ..grammar import frontends
from ..grammar.frontends import Source
from ..grammar.ir import Grammar
from .bitmask import as_int
from .compiled import CompiledGrammar
from .gc_pause import gc_paused
from .vocabulary import Vocabulary

DEFAULT_MAX_GRAMMARS = 64
DEFAULT_MAX_BYTES = 512 << 20


class CompileCache:
    """The caches of a :class:`Compiler`: compiled grammars and built grammars. Thread-safe.

    * ``compiled``: compiled grammars keyed by (grammar fingerprint, vocabulary hash), a
      :class:`~corral.caching.BoundedCache` bounded by ``max_entries`` and by ``max_bytes``,
      the bytes of each entry's tables and token caches measured when it is stored;
    * ``grammars``: grammars keyed by their source (``Source.key``: front end, text and
      options), bounded by ``max_sources`` entries (default ``4 * max_entries``).

    A bound of ``0`` entries turns that cache off. ``hits`` and ``misses`` are those of the
    compiled grammars.

    Args:
        max_entries: most compiled grammars kept.
        max_bytes: most bytes of compiled grammars kept.
        max_sources: most built grammars kept (``None``: ``4 * max_entries``).
    """

    def __init__(
        self,
        max_entries: int = DEFAULT_MAX_GRAMMARS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_sources: int | None = None,
    ) -> None:
        self.compiled: BoundedCache[tuple[str, str], CompiledGrammar] = BoundedCache(
            max_entries, max_bytes=max_bytes, size_of=CompiledGrammar.nbytes
        )
        self.grammars: BoundedCache[Hashable, Grammar] = BoundedCache(
            4 * max_entries if max_sources is None else max_sources
        )

    # -- counts (of the compiled grammars) ------------------------------------------------
    @property
    def hits(self) -> int:
        return self.compiled.hits

    @property
    def misses(self) -> int:
        return self.compiled.misses

    def stats(self) -> dict[str, int]:
        """``grammars`` (compiled grammars kept), ``bytes`` (their size when stored),
        ``hits``, ``misses`` (lookups of compiled grammars), ``sources`` (built grammars
        kept), ``source_hits``, ``source_misses``."""
        return {
            "grammars": len(self.compiled),
            "bytes": self.compiled.nbytes,
            "hits": self.compiled.hits,
            "misses": self.compiled.misses,
            "sources": len(self.grammars),
            "source_hits": self.grammars.hits,
            "source_misses": self.grammars.misses,
        }

    def clear(self) -> None:
        """Drop every compiled and built grammar (the counts are kept)."""
        self.compiled.clear()
        self.grammars.clear()

    # -- lookups ----------------------------------------------------------------------------
    def get(self, grammar: Grammar, vocab: Vocabulary) -> CompiledGrammar:
        """The compilation of ``grammar`` for ``vocab`` (reused when an equal grammar was
        compiled for a vocabulary with the same hash)."""
        if self.compiled.max_entries == 0:
            # nothing is kept (``compile(..., cache=False)``): no key to compute, and the
            # key hashes every rule and automaton of the grammar (2.6 ms of a 40 ms schema)
            self.compiled.misses += 1
            return CompiledGrammar(grammar, vocab)
        return self.compiled.get_or_build(
            (grammar.fingerprint, vocab.hash), lambda: CompiledGrammar(grammar, vocab)
        )

    def grammar_of(self, source: Source) -> Grammar:
        """The grammar of a front end's :class:`~corral.grammar.frontends.Source`, built
        once per key (a source without a key is built every time, and so is every source
        when nothing is kept: its key is not computed)."""
        if self.grammars.max_entries == 0:
            self.grammars.misses += 1
            return source.build()
        if source.key is None:
            return source.build()
        return self.grammars.get_or_build(source.key, source.build)

    def grammar_for_regex(self, pattern: str) -> Grammar:
        """The grammar of a regex (Python syntax, matched in full), built once."""
        return self.grammar_of(frontends.source("regex", pattern))


default_cache = CompileCache()
"""The caches of the default compilers behind :func:`compile` (shared by every vocabulary:
compiled grammars are keyed by the vocabulary's hash too). Bounded at
:data:`DEFAULT_MAX_GRAMMARS` compiled grammars and :data:`DEFAULT_MAX_BYTES` bytes."""

_NO_CACHE = CompileCache(0, 0, 0)


def _check_vocab(vocab: Any) -> None:
    if not isinstance(vocab, Vocabulary):
        raise ArgumentTypeError(
            f"vocab must be a corral.Vocabulary (e.g. Vocabulary.from_hf(tokenizer)), "
            f"not {type(vocab).__name__}"
        )


class Compiler:
    """Compiles grammar specs for one vocabulary, keeping what it compiled in caches it owns.

    Args:
        vocab: the model's :class:`Vocabulary`.
        max_grammars: most compiled grammars kept (least recently used dropped first;
            ``0``: none).
        max_bytes: most bytes of compiled grammars kept (each measured when stored: its
            tables and the token caches built by then).
        max_sources: most built grammars kept, by source (``None``: ``4 * max_grammars``).
        precompute: default for every compilation (see :func:`compile`): build every token
            cache now (``True``), or each on its first use (``False``, the default).
        cache_dir: default folder for token caches on disk (see :func:`compile`).

    Every method returns an immutable :class:`CompiledGrammar`, safe to share across
    threads and sequences; an equal spec compiles once and is then returned from the
    cache (the same object). Two compilers never share their caches. Thread-safe.
    """

    def __init__(
        self,
        vocab: Vocabulary,
        *,
        max_grammars: int = DEFAULT_MAX_GRAMMARS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_sources: int | None = None,
        precompute: bool = False,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        _check_vocab(vocab)
        max_grammars = as_int(max_grammars, "max_grammars", minimum=0)
        max_bytes = as_int(max_bytes, "max_bytes", minimum=0)
        if max_sources is not None:
            max_sources = as_int(max_sources, "max_sources", minimum=0)
        self.vocab = vocab
        self.precompute = precompute
        self.cache_dir = cache_dir
        self.caches = CompileCache(max_grammars, max_bytes, max_sources)

    @classmethod
    def _over(cls, vocab: Vocabulary, caches: CompileCache) -> Compiler:
        """A compiler for ``vocab`` that uses ``caches`` instead of owning new ones."""
        compiler = cls.__new__(cls)
        compiler.vocab = vocab
        compiler.precompute = False
        compiler.cache_dir = None
        compiler.caches = caches
        return compiler

    def __repr__(self) -> str:
        s = self.caches.stats()
        return (
            f"Compiler(vocab_size={self.vocab.size}, grammars={s['grammars']}, "
            f"bytes={s['bytes']}, hits={s['hits']}, misses={s['misses']})"
        )

    # -- one method per front end -----------------------------------------------------------
    def json_schema(self, schema: Any, **options: Any) -> CompiledGrammar:
        """Compile a JSON Schema: a dict, a bool, JSON text or a pydantic model class.

        ``options``: see :class:`corral.grammar.json_schema.Options` (``whitespace``,
        ``final_check``...). Raises what :func:`corral.grammar.frontends.from_json_schema`
        raises (``SchemaError``, ``UnsupportedFeatureError``...), and ``TypeError`` for
        another kind of ``schema``.
        """
        return self._compile(frontends.source("json-schema", schema, **options))

    def lark(
        self, text: str, start: str = "start", *, source: str | Sequence[str] | None = None
    ) -> CompiledGrammar:
        """Compile Lark grammar text from rule ``start`` (see
        :func:`corral.grammar.frontends.from_lark`; ``source``: the text ``SPAN``
        terminals match)."""
        if source is None:
            return self._compile(frontends.source("lark", text, start=start))
        return self._compile(frontends.source("lark", text, start=start, source=source))

    def regex(self, pattern: str, flags: int = 0) -> CompiledGrammar:
        """Compile a Python ``re`` pattern, matched in full (see
        :func:`corral.grammar.frontends.from_regex`)."""
        return self._compile(frontends.source("regex", pattern, flags=flags))

    def gbnf(self, text: str, root: str = "root") -> CompiledGrammar:
        """Compile llama.cpp's GBNF text from rule ``root`` (see
        :func:`corral.grammar.frontends.from_gbnf`)."""
        return self._compile(frontends.source("gbnf", text, start=root))

    def ebnf(self, text: str, root: str = "root") -> CompiledGrammar:
        """Compile XGrammar's EBNF text from rule ``root`` (see
        :func:`corral.grammar.frontends.from_ebnf`)."""
        return self._compile(frontends.source("ebnf", text, start=root))

    def grammar(self, grammar: Grammar) -> CompiledGrammar:
        """Compile a :class:`Grammar` built beforehand."""
        return self._compile(frontends.source("grammar", grammar))

    def compile(
        self,
        spec: Any,
        *,
        format: str | None = None,
        start: str | None = None,
        precompute: bool | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        source: str | Sequence[str] | None = None,
        entities: Mapping[str, Any] | None = None,
        **schema_options: Any,
    ) -> CompiledGrammar:
        """Compile a spec of any kind, the front end picked from its type (see
        :func:`corral.grammar.frontends.guess`): a dict, bool, JSON text starting with
        ``{`` or pydantic model class is a JSON Schema, other text is Lark text (from rule
        ``start``), a :class:`Grammar` is used as it is; or named by ``format``
        (``"gbnf"``, ``"lark"``, ``"regex"``, ``"json-schema"``, ``"structural-tag"``).

        ``precompute`` and ``cache_dir`` override the compiler's for this call (``None``:
        the compiler's); ``schema_options`` apply to JSON Schemas only.

        Raises:
            TypeError: a spec of no known kind, or schema options for another kind.
        """
        read = frontends.read(
            spec,
            format=format,
            start=start,
            options=schema_options,
            source=source,
            entities=entities,
        )
        return self._compile(read, precompute, cache_dir)

    # -- caches ---------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        """The counts of this compiler's caches (see :meth:`CompileCache.stats`)."""
        return self.caches.stats()

    def clear(self) -> None:
        """Drop every compiled and built grammar this compiler keeps."""
        self.caches.clear()

    # -- the work -------------------------------------------------------------------------
    def _compile(
        self,
        source: Source,
        precompute: bool | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> CompiledGrammar:
        """Build (or find) the grammar and its compilation, then prepare its token caches.

        Called straight from the public method the user called: warnings are attributed
        to the user's line (``stacklevel``).
        """
        with gc_paused():
            grammar = self.caches.grammar_of(source)
            compiled = self.caches.get(grammar, self.vocab)
            _prepare(
                compiled,
                self.precompute if precompute is None else precompute,
                self.cache_dir if cache_dir is None else cache_dir,
                stacklevel=4,  # _prepare, _compile, the public method, its caller
            )
        return compiled


def _prepare(
    compiled: CompiledGrammar,
    precompute: bool,
    cache_dir: str | os.PathLike[str] | None,
    *,
    stacklevel: int,
) -> None:
    """Warm ``compiled``'s token caches as ``precompute`` says, or load them from and write
    them to ``cache_dir`` (see :func:`compile`); ``stacklevel`` locates the warnings."""
    if cache_dir is None:
        if precompute:
            compiled.warm()
        return
    path = Path(cache_dir) / f"{compiled.cache_key}.npz"
    stats = compiled.cache_stats()
    rejected = False
    if stats["cached_states"] == 0:
        reason = compiled.try_load_caches(path)
        if reason is None:
            return
        if reason:  # "" is a missing file: nothing to say
            rejected = True
            warnings.warn(
                CacheWarning(
                    f"token cache file {path} rejected: {reason}; its caches are built "
                    "again and the file rewritten",
                    path=str(path),
                    reason=reason,
                ),
                stacklevel=stacklevel,
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
                stacklevel=stacklevel,
            )


def compile(
    spec: Any,
    vocab: Vocabulary,
    *,
    format: str | None = None,
    start: str | None = None,
    cache: bool = True,
    precompute: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    source: str | Sequence[str] | None = None,
    entities: Mapping[str, Any] | None = None,
    **schema_options: Any,
) -> CompiledGrammar:
    """Compile a grammar spec for a vocabulary.

    The same as ``Compiler(vocab).compile(spec, ...)`` on a default compiler whose caches,
    :data:`default_cache`, every vocabulary shares. To size or clear the caches of one
    model, use a :class:`Compiler` of your own.

    Args:
        spec: Lark grammar text; a JSON Schema (a dict, a bool, JSON text starting with
            ``{``, or a pydantic model class); or a :class:`Grammar` (e.g. from
            ``Grammar.from_regex``); or text of the kind ``format`` names.
        vocab: the model's :class:`Vocabulary`.
        format: the front end, when not to be guessed from the spec's type: ``"gbnf"``
            (llama.cpp's grammars), ``"lark"``, ``"regex"`` (takes ``flags``),
            ``"json-schema"``, ``"structural-tag"``, ``"grammar"``.
        start: the start rule (``None``: ``start`` for Lark text, ``root`` for GBNF).
        cache: reuse an identical earlier compilation (see :data:`default_cache`).
        precompute: build every lexer state's token cache now (``True``), or each on its
            first use, inside the mask that needs it (``False``, the default: a mask pays
            at most one build per lexer state it meets, 50-100 µs for most states, and a
            compile pays for none, which halves the median time to first mask of a JSON
            Schema; see docs/performance.md).
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
        source: the text (or list of texts) that span constraints copy from: JSON Schema
            strings marked ``"x-corral-span"`` and Lark terminals declared ``SPAN`` match
            only its non-empty substrings (see :mod:`corral.grammar.spans`). Each source
            is a grammar of its own (compiled and cached per text).
        entities: entity sets by name (:class:`~corral.grammar.entities.EntitySet`, or
            iterables of strings): JSON Schema strings marked ``"x-corral-entities":
            "<name>"`` and Lark terminals declared (``%declare``) under a name of this
            mapping match exactly that set's names (see :mod:`corral.grammar.entities`).
            Each set's automaton is built once and shared by every grammar that uses it.
        schema_options: options for a JSON Schema ``spec`` (see
            :class:`corral.grammar.json_schema.Options`: ``whitespace``, ``final_check``...).

    Returns:
        An immutable :class:`CompiledGrammar`, safe to share across threads and sequences.
    """
    _check_vocab(vocab)
    read = frontends.read(
        spec,
        format=format,
        start=start,
        options=schema_options,
        source=source,
        entities=entities,
    )
    compiler = Compiler._over(vocab, default_cache if cache else _NO_CACHE)
    return compiler._compile(read, precompute, cache_dir)
