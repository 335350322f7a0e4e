"""The on-disk token caches (``compile(..., cache_dir=)``) never change what is allowed.

A cache file that is damaged, edited, or written for another grammar is rejected with a
``CacheWarning``; the caches are built again and the file is rewritten. Masks are
compared, step by step over real documents tokenized with GPT-2's tokenizer, with those of
a compilation that never saw a cache file.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import GRAMMAR_DIR, grammar_text
from support.tokenizers import load_tokenizer, load_vocab

import corral
import corral.automata.cache_file as cache_file_module
from corral import CompiledGrammar, Vocabulary, allocate_bitmask
from corral.errors import CacheWarning

ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "customer": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 40},
                "email": {"type": "string", "format": "email"},
            },
            "required": ["name"],
        },
        "status": {"enum": ["pending", "shipped", "delivered"]},
        "placed": {"type": "string", "format": "date"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string"},
                    "qty": {"type": "integer", "minimum": 1, "maximum": 99},
                    "price": {"type": "number", "minimum": 0},
                },
                "required": ["sku", "qty"],
            },
            "minItems": 1,
        },
        "note": {"type": "string"},
    },
    "required": ["id", "status", "items"],
}
ORDER_DOCS = [
    {
        "id": "ABC-0042",
        "customer": {"name": "Zo\u00eb M\u00fcller", "email": "zoe@example.org"},
        "status": "shipped",
        "placed": "2024-02-29",
        "items": [{"sku": "kb-01", "qty": 2, "price": 19.5}, {"sku": "\u6771\u4eac", "qty": 1}],
    },
    {"id": "XYZ-9999", "status": "pending", "items": [{"sku": 'a"b\\c', "qty": 99}], "note": ""},
]
SQL = grammar_text("sql")
SQL_DOCS = json.loads((GRAMMAR_DIR / "examples.json").read_text())["sql"]["valid"]
# A sibling differs from its grammar in one detail and has as many lexer states, so its
# cache arrays have the very shapes this grammar's have: only the key and the digest tell
# its file apart.
SIBLING_SCHEMA = json.loads(json.dumps(ORDER_SCHEMA).replace('"delivered"', '"cancelled"'))
SIBLING_SQL = SQL.replace("/'[^']*'/", "/'[^'\\n]*'/")  # strings may not span lines
# name: (spec, documents, sibling spec)
CASES = {
    "json-schema": (
        ORDER_SCHEMA,
        [json.dumps(d, ensure_ascii=False) for d in ORDER_DOCS],
        SIBLING_SCHEMA,
    ),
    "lark-sql": (SQL, SQL_DOCS, SIBLING_SQL),
}
OTHER = grammar_text("arithmetic")


@pytest.fixture(scope="module")
def gpt2() -> tuple[Any, Vocabulary]:
    return load_tokenizer("gpt2"), load_vocab("gpt2")


def _walk_masks(cg: CompiledGrammar, tok: Any, docs: list[str]) -> list[np.ndarray]:
    """The mask before every token of each document and after its last one."""
    out = []
    for doc in docs:
        m = cg.matcher()
        for t in [*tok.encode(doc, add_special_tokens=False), None]:
            bm = allocate_bitmask(1, cg.vocab_size)
            m.fill_bitmask(bm)
            out.append(bm.copy())
            if t is not None:
                m.consume(t)
        assert m.is_accepting()
    return out


_REFERENCE: dict[str, list[np.ndarray]] = {}


def _reference(case: str, gpt2: tuple[Any, Vocabulary]) -> list[np.ndarray]:
    """Masks of a compilation that never touched a cache file (computed once per case)."""
    if case not in _REFERENCE:
        tok, vocab = gpt2
        spec, docs, _ = CASES[case]
        _REFERENCE[case] = _walk_masks(corral.compile(spec, vocab, cache=False), tok, docs)
    return _REFERENCE[case]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def _compile_recording(
    spec: Any, vocab: Vocabulary, cache_dir: Path
) -> tuple[CompiledGrammar, list[CacheWarning]]:
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        cg = corral.compile(spec, vocab, cache=False, cache_dir=cache_dir)
    return cg, [w.message for w in rec if isinstance(w.message, CacheWarning)]


def _sibling_file(sibling: Any, vocab: Vocabulary, folder: Path) -> Path:
    cg = corral.compile(sibling, vocab, cache=False, cache_dir=folder)
    return folder / f"{cg.cache_key}.npz"


def _arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k].copy() for k in z.files}


def _savez(path: Path, arrays: dict[str, np.ndarray], *, compress: bool = False) -> None:
    with path.open("wb") as f:
        (np.savez_compressed if compress else np.savez)(f, **arrays)


# -- ways to spoil a cache file: (this grammar's valid file, the sibling's valid file,
# vocabulary) -> None. Those that edit arrays keep every reference inside the arrays, so
# only the digest stands between the edit and the masks.
Spoil = Callable[[Path, Path, Vocabulary], None]


def _edit(change: Callable[[dict[str, np.ndarray], Vocabulary], None]) -> Spoil:
    def spoil(path: Path, other: Path, vocab: Vocabulary) -> None:
        arrays = _arrays(path)
        change(arrays, vocab)
        _savez(path, arrays)  # a valid zip with the old digest

    return spoil


def _flip_sparse(a: dict[str, np.ndarray], vocab: Vocabulary) -> None:
    s = a["sparse"]
    assert len(s), "the grammar must have sparse caches for this scenario"
    flipped = s ^ 1  # the neighbouring rank, where it exists
    a["sparse"] = np.where(flipped < vocab.trie.n_tokens, flipped, s).astype(np.int32)


def _flip_dense(a: dict[str, np.ndarray], vocab: Vocabulary) -> None:
    assert len(a["dense"]), "the grammar must have dense caches for this scenario"
    a["dense"] ^= vocab.trie.all_ids  # flip every trie token's bit in every row


def _widen_counts(a: dict[str, np.ndarray], vocab: Vocabulary) -> None:
    cmeta = a["cmeta"]
    sparse_states = cmeta[:, 0] == 2
    assert sparse_states.any()
    cmeta[sparse_states, 1] = 0  # every sparse state allows every sparse entry
    cmeta[sparse_states, 2] = len(a["sparse"])


def _swap_end_offsets(a: dict[str, np.ndarray], vocab: Vocabulary) -> None:
    cmeta = a["cmeta"]
    with_ends = np.flatnonzero(cmeta[:, 4] > 0)
    assert len(with_ends) > 1
    cmeta[with_ends, 3:5] = np.roll(cmeta[with_ends, 3:5], 1, axis=0)  # another state's edges


def _flip_raw_byte(path: Path, other: Path, vocab: Vocabulary) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _truncate(path: Path, other: Path, vocab: Vocabulary) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])


def _npy_not_zip(path: Path, other: Path, vocab: Vocabulary) -> None:
    buf = io.BytesIO()
    np.save(buf, np.arange(10, dtype=np.int32))
    path.write_bytes(buf.getvalue())


def _empty_directory(path: Path, other: Path, vocab: Vocabulary) -> None:
    path.unlink()
    path.mkdir()


def _sibling_renamed(path: Path, other: Path, vocab: Vocabulary) -> None:
    shutil.copyfile(other, path)


def _sibling_with_this_key(path: Path, other: Path, vocab: Vocabulary) -> None:
    key = _arrays(path)["key"]
    arrays = _arrays(other)
    arrays["key"] = key
    _savez(path, arrays)


def _object_array(path: Path, other: Path, vocab: Vocabulary) -> None:
    arrays: dict[str, Any] = _arrays(path)
    arrays["sparse"] = np.array([1, "x"], dtype=object)
    with path.open("wb") as f:
        np.savez(f, **arrays)  # pickles the object array


def _compressed(path: Path, other: Path, vocab: Vocabulary) -> None:
    _savez(path, _arrays(path), compress=True)  # right contents, but not what corral writes


def _header_too_large(path: Path, other: Path, vocab: Vocabulary) -> None:
    arrays = _arrays(path)
    with zipfile.ZipFile(path, "w") as zf:
        for name, a in arrays.items():
            buf = io.BytesIO()
            if name == "sparse":  # claims 4 TiB, holds 16 bytes
                np.lib.format.write_array_header_1_0(
                    buf, {"descr": "<i4", "fortran_order": False, "shape": (1 << 40,)}
                )
                buf.write(bytes(16))
            else:
                np.lib.format.write_array(buf, a)
            zf.writestr(f"{name}.npy", buf.getvalue())


SCENARIOS: dict[str, tuple[Spoil, str]] = {
    # name: (spoil, words the warning's reason contains)
    "sparse-bits": (_edit(_flip_sparse), "digest"),
    "dense-rows-bits": (_edit(_flip_dense), "digest"),
    "cmeta-counts": (_edit(_widen_counts), "digest"),
    "cmeta-end-offsets": (_edit(_swap_end_offsets), "digest"),
    "raw-byte-flipped": (_flip_raw_byte, ""),
    "truncated": (_truncate, "damaged"),
    "npy-not-zip": (_npy_not_zip, "damaged"),
    "empty-directory": (_empty_directory, "directory"),
    "sibling-grammar-renamed": (_sibling_renamed, "another grammar"),
    "sibling-grammar-with-this-key": (_sibling_with_this_key, "digest"),
    "object-array": (_object_array, "object"),
    "compressed": (_compressed, "compressed"),
    "header-larger-than-file": (_header_too_large, "declares more data"),
}
# files that read cleanly and fit this grammar's shapes and bounds
EDITS_IN_BOUNDS = (
    "sparse-bits",
    "dense-rows-bits",
    "cmeta-counts",
    "cmeta-end-offsets",
    "sibling-grammar-renamed",
    "sibling-grammar-with-this-key",
)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("case", list(CASES))
def test_spoiled_file_is_rejected_rebuilt_and_rewritten(
    gpt2: tuple[Any, Vocabulary], tmp_path: Path, case: str, scenario: str
) -> None:
    tok, vocab = gpt2
    spec, docs, sibling = CASES[case]
    reference = _reference(case, gpt2)
    sibling_file = _sibling_file(sibling, vocab, tmp_path / "sibling")
    cache = tmp_path / "cache"
    first, warned = _compile_recording(spec, vocab, cache)
    assert not warned
    path = cache / f"{first.cache_key}.npz"
    assert path.is_file()
    spoil, reason = SCENARIOS[scenario]
    spoil(path, sibling_file, vocab)

    cg, warned = _compile_recording(spec, vocab, cache)
    # (a) one warning, naming the file and why
    assert len(warned) == 1, [str(w) for w in warned]
    assert warned[0].path == str(path) and str(path) in str(warned[0])
    assert reason in warned[0].reason, warned[0].reason
    # (b) the masks are those of a compilation that never saw the file
    assert cg.cache_stats()["cached_states"] == cg.tables.n_lexer_states
    assert _same(_walk_masks(cg, tok, docs), reference)
    # (c) the file was rewritten valid: it loads without a warning and gives the same masks
    assert path.is_file()
    fresh = corral.compile(spec, vocab, cache=False, precompute=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert fresh.load_caches(path)
    assert _same(_walk_masks(fresh, tok, docs), reference)


@pytest.mark.parametrize("scenario", EDITS_IN_BOUNDS)
@pytest.mark.parametrize("case", list(CASES))
def test_edits_would_change_masks_if_trusted(
    gpt2: tuple[Any, Vocabulary], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str,
    scenario: str,
) -> None:  # fmt: skip
    """The edited files above are dangerous, not merely different: checked for their
    layout, shapes and bounds but not for their key and digest, they change the masks."""
    tok, vocab = gpt2
    spec, docs, sibling = CASES[case]
    first = corral.compile(spec, vocab, cache=False, cache_dir=tmp_path)
    path = tmp_path / f"{first.cache_key}.npz"
    SCENARIOS[scenario][0](path, _sibling_file(sibling, vocab, tmp_path / "sibling"), vocab)
    monkeypatch.setattr(cache_file_module, "identity_problem", lambda arrays, key: "")
    trusting = corral.compile(spec, vocab, cache=False, precompute=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert trusting.load_caches(path)
    assert not _same(_walk_masks(trusting, tok, docs), _reference(case, gpt2))


@pytest.mark.parametrize("case", list(CASES))
def test_valid_file_round_trips_silently(
    gpt2: tuple[Any, Vocabulary], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    tok, vocab = gpt2
    spec, docs, _ = CASES[case]
    first, warned = _compile_recording(spec, vocab, tmp_path)
    assert not warned
    (path,) = tmp_path.iterdir()
    assert path.name == f"{first.cache_key}.npz"
    written = path.read_bytes()

    def no_build(*args: Any) -> None:
        raise AssertionError("the caches should come from the file")

    monkeypatch.setattr(CompiledGrammar, "_walk", no_build)
    monkeypatch.setattr(CompiledGrammar, "warm", no_build)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        loaded = corral.compile(spec, vocab, cache=False, cache_dir=tmp_path)
    assert loaded.cache_stats()["cached_states"] == loaded.tables.n_lexer_states
    assert _same(_walk_masks(loaded, tok, docs), _reference(case, gpt2))
    assert path.read_bytes() == written  # read, not rewritten


def test_missing_file_is_silent_and_public_loader_warns(
    gpt2: tuple[Any, Vocabulary], tmp_path: Path
) -> None:
    _, vocab = gpt2
    cg = corral.compile(OTHER, vocab, cache=False, precompute=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert not cg.load_caches(tmp_path / "absent.npz")
        assert not cg.load_caches(tmp_path / "no-folder" / "absent.npz")
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.warns(CacheWarning, match="bad.npz") as rec:
        assert not cg.load_caches(bad)
    assert rec[0].filename == __file__  # points at the caller
    assert cg.cache_stats()["cached_states"] == 0


def test_unusable_folder_warns_and_compiles(gpt2: tuple[Any, Vocabulary], tmp_path: Path) -> None:
    """A cache folder that cannot be written (here a file stands where the folder should
    be, or a non-empty directory where the file should be) is a warning, never an error."""
    tok, vocab = gpt2
    spec, docs, _ = CASES["lark-sql"]
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    cg, warned = _compile_recording(spec, vocab, not_a_folder)
    assert len(warned) == 1 and "could not be written" in str(warned[0])
    assert _same(_walk_masks(cg, tok, docs), _reference("lark-sql", gpt2))

    path = tmp_path / f"{cg.cache_key}.npz"
    path.mkdir()
    (path / "keep").write_text("user data")
    cg, warned = _compile_recording(spec, vocab, tmp_path)
    # rejected, then not written
    assert ["directory" in w.reason.lower() for w in warned] == [True, True]
    assert (path / "keep").read_text() == "user data"
    assert _same(_walk_masks(cg, tok, docs), _reference("lark-sql", gpt2))


def test_key_covers_format_and_tables(
    gpt2: tuple[Any, Vocabulary], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, vocab = gpt2

    base = corral.compile(OTHER, vocab, cache=False, precompute=False).cache_key
    assert corral.compile(OTHER, vocab, cache=False, precompute=False).cache_key == base
    monkeypatch.setattr(cache_file_module, "FORMAT", cache_file_module.FORMAT + 1)
    assert corral.compile(OTHER, vocab, cache=False, precompute=False).cache_key != base
    monkeypatch.undo()
    cg = corral.compile(OTHER, vocab, cache=False, precompute=False)
    lex_trans = cg.tables.lex_trans.copy()
    lex_trans[0, 0] ^= 1  # same grammar and vocabulary, other lexer tables
    cg.tables = dataclasses.replace(cg.tables, lex_trans=lex_trans)
    assert cg.cache_key != base
