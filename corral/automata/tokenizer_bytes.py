"""The exact byte string of every token of a Hugging Face tokenizer.

Two families are supported, recognised from the tokenizer's decoder:

* **byte-level BPE** (GPT-2, Llama-3, Qwen2, DeepSeek-Coder): every character of a token
  string stands for one byte through GPT-2's ``bytes_to_unicode`` table.
* **SentencePiece-style** (Llama-2, Phi-3, Gemma): ``▁`` stands for a space and
  ``<0xNN>`` tokens are single raw bytes (byte fallback); other text is UTF-8.
* **WordPiece** (BERT and other masked LMs): a continuation token ``##x`` is ``x``; any
  other token starts a word and is spelled with a leading space (`` x``), so the text is
  the concatenation of the tokens. (``tokenizer.decode`` also drops the space before
  punctuation; corral's text keeps it: constrain and read the concatenation.) Such
  vocabularies are normalised (BERT uncased lowercases and strips accents) and lack
  many characters: a grammar can only use what the tokens spell.

Tokens that decode to the same bytes as their text inside a sequence are what a grammar
sees; the leading space that some SentencePiece decoders strip at the start of a sequence
is kept (it is real content anywhere else). Any other tokenizer family raises
:class:`~corral.errors.TokenizerError` rather than guessing.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import TokenizerError

_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@functools.lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """GPT-2's inverse ``bytes_to_unicode`` table: printable character → byte value."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=False)}


@functools.lru_cache(maxsize=1)
def _byte_level_lookup() -> np.ndarray:
    """``int16 [0x144]``: for each code point below U+0144 (the byte alphabet's last
    character is U+0143), the byte it stands for in GPT-2's byte alphabet, or ``-1``."""
    lookup = np.full(0x144, -1, np.int16)
    for c, b in byte_decoder().items():
        lookup[ord(c)] = b
    return lookup


def _blanked(strings: list[str | None], skip: set[int]) -> list[str]:
    """``strings`` with ``""`` for missing ids and for the ids in ``skip``."""
    parts = [s or "" for s in strings]
    for i in skip:
        parts[i] = ""
    return parts


def _byte_level_all(strings: list[str | None], skip: set[int]) -> list[bytes] | None:
    """The bytes of every byte-level token string at once (``b""`` for a missing id), or
    ``None`` when some string outside ``skip`` has a character outside the byte alphabet
    (the caller then reads tokens one by one).

    Every alphabet character is one byte, so the whole vocabulary is joined, looked up
    code point by code point in one NumPy gather, and cut at the strings' lengths: the
    same bytes as decoding each token, without a Python loop over characters (Llama-3's
    128,257 tokens: 46-71 ms of CPU against 63-98 for ``str.translate`` over the text).
    """
    lookup = _byte_level_lookup()
    parts = _blanked(strings, skip)
    codes = np.frombuffer("".join(parts).encode("utf-32-le"), np.uint32)
    if codes.size and int(codes.max()) >= lookup.size:
        return None
    values = lookup[codes]
    if values.size and int(values.min()) < 0:
        return None
    data = values.astype(np.uint8).tobytes()
    ends = np.cumsum(np.fromiter(map(len, parts), np.int64, count=len(parts))).tolist()
    return list(map(data.__getitem__, map(slice, [0, *ends[:-1]], ends)))


def _sentencepiece_all(strings: list[str | None], skip: set[int]) -> list[bytes] | None:
    """The bytes of every SentencePiece-style token string at once, ``▁`` read as a space
    (``b""`` for a missing id and for ids in ``skip``), or ``None`` when some string holds
    a NUL character (the caller then reads tokens one by one). Byte tokens (``<0x0A>``)
    are not recognised here: the caller patches them.
    """
    parts = _blanked(strings, skip)
    text = "\0".join(parts)
    if text.count("\0") != len(parts) - 1:
        return None
    return text.replace("\u2581", " ").encode("utf-8").split(b"\0")


@dataclass
class TokenizerBytes:
    """What :func:`extract` finds in a tokenizer.

    Attributes:
        token_bytes: for ids ``0..n-1``: the token's bytes (special tokens: their text).
        special: ids of special tokens (control tokens never produced from text).
        added: ids of added tokens that are not marked special (e.g. Gemma's newline runs,
            DeepSeek's ``<|EOT|>``); :meth:`Vocabulary.from_hf` decides which count as text.
        family: ``"byte_level"``, ``"sentencepiece"`` or ``"wordpiece"``.
        eos_token_id: the tokenizer's own EOS id, if any.
    """

    token_bytes: list[bytes]
    special: set[int]
    added: set[int]
    family: str
    eos_token_id: int | None


def _decoder_types(node: Any) -> list[str]:
    if not isinstance(node, dict):
        return []
    out = [str(node.get("type"))]
    for sub in node.get("decoders", []) or []:
        out += _decoder_types(sub)
    return out


def _backend_spec(tokenizer: Any) -> dict[str, Any] | None:
    """The parts of the ``tokenizers`` backend's JSON that :func:`extract` reads:
    ``{"model": {"type", "byte_fallback", "continuing_subword_prefix"}, "decoder": ...}``.

    Read from the backend's model and decoder objects: serialising the whole tokenizer
    (merges included) and parsing it back costs 0.5 s for Llama-3 and 1.3 s for Gemma-3.
    Falls back to that full JSON for backends without those objects. ``None``: no
    ``tokenizers`` backend.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None or not hasattr(backend, "to_str"):
        return None
    try:
        model, decoder = backend.model, backend.decoder
        return {
            "model": {
                "type": type(model).__name__,
                "byte_fallback": getattr(model, "byte_fallback", False),
                "continuing_subword_prefix": getattr(model, "continuing_subword_prefix", None),
            },
            "decoder": None if decoder is None else json.loads(decoder.__getstate__()),
        }
    except Exception:  # pragma: no cover - exotic backends
        pass
    try:
        return json.loads(backend.to_str())  # type: ignore[no-any-return]
    except Exception:  # pragma: no cover - exotic backends
        return None


def extract(tokenizer: Any) -> TokenizerBytes:
    """Read the byte string of every token id of a Hugging Face ``tokenizer``."""
    spec = _backend_spec(tokenizer)
    if spec is None:
        raise TokenizerError(
            f"{type(tokenizer).__name__}: corral needs a Hugging Face tokenizer with a "
            "`tokenizers` backend (a fast tokenizer) to read exact token bytes"
        )
    model = spec.get("model") or {}
    dec_types = _decoder_types(spec.get("decoder"))
    if "ByteLevel" in dec_types:
        family = "byte_level"
    elif "WordPiece" in dec_types and model.get("type") == "WordPiece":
        family = "wordpiece"
    elif (
        "ByteFallback" in dec_types
        or "Metaspace" in dec_types
        or ("Replace" in dec_types and model.get("type") in ("BPE", "Unigram"))
    ):
        family = "sentencepiece"
    else:
        raise TokenizerError(
            f"unsupported tokenizer decoder {dec_types or None} (model {model.get('type')}): "
            "corral supports byte-level BPE, SentencePiece-style and WordPiece tokenizers"
        )
    byte_fallback = bool(model.get("byte_fallback")) or "ByteFallback" in dec_types

    n = len(tokenizer)
    backend = tokenizer.backend_tokenizer
    n = max(n, backend.get_vocab_size(with_added_tokens=True))
    id_to_token = backend.id_to_token  # faster than inverting get_vocab()
    strings: list[str | None] = [id_to_token(i) for i in range(n)]
    added = backend.get_added_tokens_decoder()
    special = {i for i, at in added.items() if getattr(at, "special", False)}
    for i in getattr(tokenizer, "all_special_ids", []) or []:
        if isinstance(i, int) and 0 <= i < n:
            special.add(i)

    bd = byte_decoder()
    prefix = str(model.get("continuing_subword_prefix") or "##")

    def one(i: int, maybe: str | None) -> bytes:
        """The bytes of token ``i`` whose string is ``maybe``."""
        if maybe is None:
            return b""
        s = maybe
        if i in special:
            return s.encode("utf-8")
        if family == "byte_level":
            as_text = s.encode("utf-8")
            try:
                as_bytes: bytes | None = bytes(bd[c] for c in s)
            except KeyError:
                as_bytes = None
            if i in added and as_bytes != as_text:
                # An added token is matched in raw text ("ü" → the token) but decoded through
                # the byte alphabet ("ü" → byte 0xFC): its meaning is ambiguous, so it is
                # left out of grammar text (an empty entry is never allowed).
                return b""
            return as_text if as_bytes is None else as_bytes
        if family == "wordpiece":
            if s.startswith(prefix) and len(s) > len(prefix):
                return s[len(prefix) :].encode("utf-8")
            return b" " + s.encode("utf-8")
        m = _BYTE_TOKEN.match(s) if byte_fallback else None
        if m:
            return bytes([int(m.group(1), 16)])
        return s.replace("\u2581", " ").encode("utf-8")

    exceptional = {i for i in special | set(added) if 0 <= i < n}
    if family == "byte_level":
        fast = _byte_level_all(strings, exceptional)
    elif family == "sentencepiece":
        fast = _sentencepiece_all(strings, exceptional)
        if fast is not None and byte_fallback:  # byte tokens (``<0x0A>``) are read by one()
            exceptional |= {i for i, s in enumerate(strings) if s and s.startswith("<0x")}
    else:
        fast = None
    if fast is None:
        out = [one(i, s) for i, s in enumerate(strings)]
    else:
        out = fast
        for i in exceptional:
            out[i] = one(i, strings[i])
    eos = getattr(tokenizer, "eos_token_id", None)
    added_text = {i for i in added if i not in special and 0 <= i < n}
    return TokenizerBytes(out, special, added_text, family, eos if isinstance(eos, int) else None)


PROBE_TEXTS = (
    "Hello, world!",
    '{"name": "Zoë", "n": [1, 22, 333]}',
    "\n\tünïcödé",
    "中文 🙂",
    "<b>x</b>  end",
)


def check_roundtrip(
    tokenizer: Any, token_bytes: list[bytes], info: TokenizerBytes | None = None
) -> None:
    """Encode probe texts with ``tokenizer`` and check the tokens' bytes spell them exactly.

    A leading space added by the tokenizer (SentencePiece's dummy prefix) is allowed; a
    probe whose encoding uses a special token or one left out of grammar text (empty
    bytes) is skipped. WordPiece encodings are compared without spaces, with the
    tokenizer's normalised text.
    Raises :class:`TokenizerError` when the bytes disagree: corral would otherwise constrain
    the wrong strings. ``info``: ``extract(tokenizer)`` when the caller has it (reading it
    again parses the tokenizer's JSON again).
    """
    if info is None:
        info = extract(tokenizer)
    checked = 0
    for text in PROBE_TEXTS:
        ids = tokenizer.encode(text, add_special_tokens=False)
        if any(not token_bytes[i] or i in info.special for i in ids):
            continue
        got = b"".join(token_bytes[i] for i in ids)
        want = text.encode("utf-8")
        if info.family == "wordpiece":
            # normalised text, split into words: compare the characters, not the spaces
            norm = tokenizer.backend_tokenizer.normalizer
            if norm is not None:
                want = norm.normalize_str(text).encode("utf-8")
            got, want = b"".join(got.split()), b"".join(want.split())
        if got != want and got != b" " + want:
            raise TokenizerError(
                "token bytes do not spell the tokenizer's own encoding of a probe text: "
                f"expected {want!r}, got {got!r}"
            )
        checked += 1
    if checked == 0:
        raise TokenizerError("could not check the token bytes against any probe text")
