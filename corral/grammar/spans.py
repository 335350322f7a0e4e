"""Span automata: the strings that occur verbatim in a source text.

A *span constraint* makes a value a non-empty substring of a source document (or of one
of several documents), so that an extraction can copy from the text and never invent.
Its language is built here as a byte automaton (a :class:`SparseDFA`, laid out by the
lexer tables like any terminal):

1. the **suffix automaton** of the source's characters: the smallest DFA that reads
   exactly the substrings of a text, with at most ``2n - 1`` states and ``3n - 4``
   transitions for ``n`` characters (Blumer et al., 1985), built online in linear time;
   several texts are joined by a separator character whose transitions are then dropped,
   so a span never crosses from one text into the next;
2. every character transition becomes the bytes of the character's **encoding**:
   ``"raw"`` is UTF-8 (a Lark terminal), ``"json"`` is its canonical escaped form inside a
   JSON string (``json.dumps`` with ``ensure_ascii=False``: ``\\"``, ``\\\\``, ``\\n``,
   ``\\t``, ``\\r``, ``\\b``, ``\\f``, ``\\u00XX`` for the other control characters,
   ``\\uXXXX`` for a lone surrogate, every other character as its UTF-8 bytes). Both
   encodings are prefix-free, so the byte automaton stays deterministic; states inside a
   character do not accept, so a span never ends inside one;
3. for ``"json"``, the quotes around the value.

Options: ``ignore_case`` (a character matches where its lowercase equals the text's, for
the characters whose lowercase is one character) and ``whitespace="normalize"`` (every
run of whitespace in the text is read as one space, and the value writes one space
there).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentTypeError, CompileBudgetError, InvalidArgumentError
from .regex.sparse import SparseDFA

__all__ = [
    "MAX_SOURCE_CHARS",
    "SpanOptions",
    "json_string_bytes",
    "prepare_text",
    "source_texts",
    "sources_digest",
    "span_dfa",
]

MAX_SOURCE_CHARS = 2_000_000
"""Most characters a source may have in all (building the automaton of 100,000 characters
of English peaks at 1.3 KB a character)."""

WHITESPACE_MODES = ("exact", "normalize")


@dataclass(frozen=True)
class SpanOptions:
    """How a value must match the source (see the module docs)."""

    ignore_case: bool = False
    whitespace: str = "exact"

    def __post_init__(self) -> None:
        if self.whitespace not in WHITESPACE_MODES:
            raise InvalidArgumentError(
                f"whitespace must be one of {WHITESPACE_MODES}, not {self.whitespace!r}"
            )

    @property
    def key(self) -> str:
        return f"ic={int(self.ignore_case)},ws={self.whitespace}"


def source_texts(source: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """``source`` as a tuple of texts (``None`` stays ``None``).

    Raises:
        TypeError: not a string or a sequence of strings.
        CompileBudgetError: more than :data:`MAX_SOURCE_CHARS` characters in all.
    """
    if source is None:
        return None
    if isinstance(source, str):
        texts: tuple[str, ...] = (source,)
    elif isinstance(source, (bytes, bytearray)):
        raise ArgumentTypeError("source must be text (str) or a list of texts, not bytes")
    else:
        texts = tuple(source)
        bad = next((t for t in texts if not isinstance(t, str)), None)
        if bad is not None:
            raise ArgumentTypeError(f"source texts must be str, not {type(bad).__name__}")
    total = sum(len(t) for t in texts)
    if total > MAX_SOURCE_CHARS:
        raise CompileBudgetError(
            f"the source has {total:,} characters; span constraints take at most "
            f"{MAX_SOURCE_CHARS:,}"
        )
    return texts


def sources_digest(texts: Sequence[str]) -> str:
    """A SHA-256 hex digest that identifies a tuple of texts (for compile-cache keys)."""
    h = hashlib.sha256()
    for t in texts:
        data = t.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def span_dfa(texts: Sequence[str], options: SpanOptions, *, encoding: str) -> SparseDFA:
    """The automaton of the non-empty substrings of ``texts`` (``encoding``: ``"json"``,
    a JSON string with its quotes; ``"raw"``, UTF-8). An empty language (no text has a
    character) has no states."""
    if encoding not in ("json", "raw"):
        raise InvalidArgumentError(f"encoding must be 'json' or 'raw', not {encoding!r}")
    prepared = [prepare_text(t, options) for t in texts]
    prepared = [t for t in prepared if t]
    if not prepared:
        return SparseDFA.empty()
    sep = _separator(prepared)
    nxt = _suffix_automaton(sep.join(prepared))
    return _byte_automaton(nxt, sep, options, json_encoding=encoding == "json")


# -- 0. the text --------------------------------------------------------------------------
def prepare_text(text: str, options: SpanOptions) -> str:
    """``text`` as spans are matched against it (whitespace runs as one space, and
    lowercase, as ``options`` ask)."""
    if options.whitespace == "normalize":
        text = " ".join(text.split())
    if options.ignore_case:
        text = "".join(c if len(low := c.lower()) != 1 else low for c in text)
    return text


def _separator(texts: list[str]) -> str:
    """A character no text holds (joins texts; its transitions are dropped)."""
    used = set().union(*texts)
    for cp in range(0xF0000, 0x110000):  # a private use plane
        if chr(cp) not in used:
            return chr(cp)
    raise ValueError("no separator character is free")  # pragma: no cover


# -- 1. the suffix automaton ----------------------------------------------------------------
def _suffix_automaton(text: str) -> list[dict[str, int]]:
    """The transitions of the suffix automaton of ``text`` (state 0 is the start)."""
    nxt: list[dict[str, int]] = [{}]
    link = [-1]
    length = [0]
    last = 0
    for c in text:
        cur = len(nxt)
        nxt.append({})
        length.append(length[last] + 1)
        link.append(0)
        p = last
        while p != -1 and c not in nxt[p]:
            nxt[p][c] = cur
            p = link[p]
        if p != -1:
            q = nxt[p][c]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = len(nxt)
                nxt.append(dict(nxt[q]))
                length.append(length[p] + 1)
                link.append(link[q])
                while p != -1 and nxt[p].get(c) == q:
                    nxt[p][c] = clone
                    p = link[p]
                link[q] = clone
                link[cur] = clone
        last = cur
    return nxt


# -- 2. characters to bytes -------------------------------------------------------------------
_PLAIN = re.compile(r'[^"\\\x00-\x1f\ud800-\udfff]*\Z')  # nothing JSON escapes
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def json_string_bytes(name: str) -> bytes:
    """``name`` as the grammar spells a JSON string: ``json.dumps`` without ASCII
    escapes, and a lone surrogate as its ``\\uXXXX`` escape (the only JSON for it)."""
    if _PLAIN.match(name):
        return b'"' + name.encode("utf-8") + b'"'
    text = json.dumps(name, ensure_ascii=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def _json_bytes(c: str) -> bytes:
    return json_string_bytes(c)[1:-1]


def _variants(c: str, ignore_case: bool) -> list[str]:
    """The characters that match text character ``c`` (lowercased when ``ignore_case``)."""
    if not ignore_case:
        return [c]
    out = [c]
    for u in (c.upper(), c.title()):
        if len(u) == 1 and u not in out and u.lower() == c:
            out.append(u)
    return out


def _byte_automaton(
    nxt: list[dict[str, int]], sep: str, options: SpanOptions, *, json_encoding: bool
) -> SparseDFA:
    n_sam = len(nxt)
    # byte states: [quote start] + SAM states + states inside characters [+ closed quote]
    base = 1 if json_encoding else 0
    encode = _json_bytes if json_encoding else (lambda c: c.encode("utf-8", "surrogatepass"))
    codes: dict[str, list[bytes]] = {}
    src: list[int] = []
    byt: list[int] = []
    dst: list[int] = []
    n_states = base + n_sam
    inner: dict[tuple[int, bytes], int] = {}
    for s, edges in enumerate(nxt):
        for c, t in edges.items():
            if c == sep:
                continue
            encs = codes.get(c)
            if encs is None:
                encs = codes[c] = [encode(u) for u in _variants(c, options.ignore_case)]
            for enc in encs:
                if len(enc) == 1:
                    src.append(base + s)
                    byt.append(enc[0])
                    dst.append(base + t)
                    continue
                at = base + s
                for i in range(len(enc) - 1):
                    key = (base + s, enc[: i + 1])
                    q = inner.get(key)
                    if q is None:
                        q = inner[key] = n_states
                        n_states += 1
                        src.append(at)
                        byt.append(enc[i])
                        dst.append(q)
                    at = q
                src.append(at)
                byt.append(enc[-1])
                dst.append(base + t)
    accept = np.zeros(n_states + (1 if json_encoding else 0), bool)
    accept[base + 1 : base + n_sam] = True  # every SAM state but the start: non-empty spans
    s_arr = np.asarray(src, np.int64)
    b_arr = np.asarray(byt, np.int64)
    d_arr = np.asarray(dst, np.int32)
    if json_encoding:
        close = n_states
        done = np.flatnonzero(accept[:close])
        s_arr = np.concatenate([[0], done, s_arr])
        b_arr = np.concatenate([[0x22], np.full(done.shape[0], 0x22), b_arr])
        d_arr = np.concatenate([[base], np.full(done.shape[0], close, np.int32), d_arr])
        accept[:] = False
        accept[close] = True
        n_states += 1
    return SparseDFA.from_edges(n_states, s_arr, b_arr, d_arr, accept)
