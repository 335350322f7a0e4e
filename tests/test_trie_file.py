"""A vocabulary's token trie on disk (``automata/trie_file.py``): a trie read back is the
trie built, a file that does not match is never read, and writing never fails a compile."""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import warnings
import zlib
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pytest
from support.tokenizers import load_tokenizer

import corral
from corral import Vocabulary
from corral.automata import trie_file
from corral.errors import CacheWarning


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """corral's cache directory in ``tmp_path``, trie files turned on."""
    monkeypatch.setenv("CORRAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CORRAL_TRIE_CACHE", raising=False)
    return tmp_path / "cache" / "tries"


@pytest.fixture(scope="module")
def tok() -> Any:
    return load_tokenizer("gpt2")  # 50,257 tokens: above MIN_TOKENS


def _load(vocab: Vocabulary, trie: Any) -> Any:
    """``trie_file.load`` for ``vocab`` whose trie is ``trie``."""
    return trie_file.load(vocab.hash, trie.token_ids.shape[0], vocab.size, 10**6)


def _no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Vocabulary) -> None:
        raise AssertionError("the trie was built, not read")

    monkeypatch.setattr(Vocabulary, "_new_trie", refuse)


def _assert_same(a: Any, b: Any) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape, f.name
            assert np.array_equal(x, y), f.name
            # the same Numba types: the kernels need no other specialisation
            assert numba.typeof(x) == numba.typeof(y), f.name
        else:
            assert x == y, f.name


def test_a_stored_trie_reads_back_as_the_trie_built(
    folder: Path, tok: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = Vocabulary.from_hf(tok).trie
    files = list(folder.glob("*.trie"))
    assert len(files) == 1 and files[0].stem == Vocabulary.from_hf(tok).hash
    assert not list(folder.glob(".trie-*"))  # no temporary file left behind
    _no_build(monkeypatch)
    vocab = Vocabulary.from_hf(tok)  # makes its trie: read, not built
    _assert_same(vocab.trie, built)
    # and the masks through it are those of a trie built in memory
    schema = '{"type": "object", "properties": {"a": {"type": "string"}}}'
    g = corral.compile(schema, vocab, cache=False)
    m = g.matcher()
    masks = [m.allowed_token_ids()]
    for t in tok.encode('{"a": "x y"}', add_special_tokens=False):
        m.consume(t)
        masks.append(m.allowed_token_ids())
    monkeypatch.undo()
    monkeypatch.setenv("CORRAL_TRIE_CACHE", "0")
    fresh = Vocabulary.from_hf(tok)
    m = corral.compile(schema, fresh, cache=False).matcher()
    want = [m.allowed_token_ids()]
    for t in tok.encode('{"a": "x y"}', add_special_tokens=False):
        m.consume(t)
        want.append(m.allowed_token_ids())
    assert [list(x) for x in masks] == [list(x) for x in want]


def test_a_read_trie_outlives_its_file(folder: Path, tok: Any) -> None:
    """The arrays read (mapped, on POSIX) stay what they were when the file is written
    again or removed, and cannot be written through."""
    built = Vocabulary.from_hf(tok).trie
    (path,) = folder.glob("*.trie")
    read = Vocabulary.from_hf(tok)
    trie = read.trie
    _assert_same(trie, built)
    assert all(
        not getattr(trie, f.name).flags.writeable
        for f in dataclasses.fields(trie)
        if isinstance(getattr(trie, f.name), np.ndarray)
    )
    trie_file.store(built, read.hash)  # replaced by a rename
    path.unlink()
    _assert_same(trie, built)
    with pytest.raises(ValueError, match="read-only"):
        trie.children[0] = 0


def _header(path: Path) -> tuple[dict[str, Any], int]:
    """The file's JSON header and where the arrays start."""
    data = path.read_bytes()
    n0 = len(trie_file.MAGIC) + 8
    _fmt, head_len = struct.unpack("<II", data[len(trie_file.MAGIC) : n0])
    return json.loads(data[n0 : n0 + head_len]), -(-(n0 + head_len) // 64) * 64


def _patch_array(path: Path, name: str, index: int, value: int, redigest: bool = True) -> None:
    """Write ``value`` at ``index`` of the stored array ``name``; with ``redigest``, put
    the arrays' new checksum in the header too (an edit only the checks of the arrays
    themselves can find)."""
    header, start = _header(path)
    (entry,) = [e for e in header["arrays"] if e[0] == name]
    dt = np.dtype(entry[1])
    data = bytearray(path.read_bytes())
    at = start + entry[3] + index * dt.itemsize
    data[at : at + dt.itemsize] = np.array([value], dt).tobytes()
    if redigest:
        new = f"{zlib.crc32(bytes(data[start:])):08x}".encode()
        data = bytearray(bytes(data).replace(header["crc32"].encode(), new, 1))
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size - 64)


def _renamed_field(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"chars"', b'"charz"', 1))


def _float_field(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data.replace(b'["children","<i4"', b'["children","<f4"', 1))


def _oversized(path: Path) -> None:
    with open(path, "ab") as f:
        f.truncate(path.stat().st_size + 300 * 10**6)  # sparse: no disk taken


def _bad_magic(path: Path) -> None:
    with open(path, "r+b") as f:
        f.write(b"X")


@pytest.mark.parametrize(
    "damage",
    [
        _truncate,
        _bad_magic,
        lambda p: p.write_bytes(b""),
        _renamed_field,
        _float_field,
        _oversized,
        # a flipped byte of the trie: an index still in range, a wrong mask if read
        lambda p: _patch_array(p, "node_byte", 7, 0x41, redigest=False),
        # edits that keep the checksum: the arrays' own checks find them
        lambda p: _patch_array(p, "children", 5, 1 << 30),  # a node past the last
        lambda p: _patch_array(p, "token_ids", 0, 60_000),  # an id past the vocabulary
        lambda p: _patch_array(p, "frontier_end", 3, -2),
        lambda p: _patch_array(p, "large_index", 0, 1 << 20),
    ],
    ids=[
        "truncated",
        "magic",
        "empty",
        "renamed",
        "float",
        "oversized",
        "flipped",
        "children",
        "token-id",
        "frontier",
        "large",
    ],
)
def test_a_damaged_file_is_not_read_and_is_written_again(
    folder: Path, tok: Any, damage: Any
) -> None:
    vocab = Vocabulary.from_hf(tok)
    built = vocab.trie
    (path,) = folder.glob("*.trie")
    good = path.read_bytes()
    damage(path)
    assert path.read_bytes() != good
    with pytest.warns(CacheWarning, match="trie file .* ignored"):
        assert _load(vocab, built) is None
    with pytest.warns(CacheWarning, match="trie file .* ignored"):
        again = Vocabulary.from_hf(tok)  # its trie: built, not read
    _assert_same(again.trie, built)
    assert path.read_bytes() == good  # and stored again


def test_a_file_of_other_sources_is_passed_over_silently(folder: Path, tok: Any) -> None:
    """After an upgrade the files of the previous corral do not match: not a warning."""
    vocab = Vocabulary.from_hf(tok)
    built = vocab.trie
    (path,) = folder.glob("*.trie")
    good = path.read_bytes()
    digest = trie_file.builder_digest().encode()
    path.write_bytes(good.replace(digest, b"0" * len(digest), 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _load(vocab, built) is None
        again = Vocabulary.from_hf(tok)
        _assert_same(again.trie, built)
    assert path.read_bytes() == good


def test_another_vocabularys_file_is_not_read(folder: Path, tok: Any) -> None:
    vocab = Vocabulary.from_hf(tok)
    trie = vocab.trie
    (path,) = folder.glob("*.trie")
    other = Vocabulary.from_hf(tok, eos_token_ids=[0])  # another hash
    assert other.hash != vocab.hash
    os.replace(path, folder / f"{other.hash}.trie")  # the file under the other's name
    with pytest.warns(CacheWarning, match="another vocabulary"):
        assert _load(other, trie) is None


def test_turned_off_small_or_unwritable_nothing_is_stored(
    folder: Path, tok: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORRAL_TRIE_CACHE", "0")
    Vocabulary.from_hf(tok).trie  # noqa: B018
    assert not folder.exists()
    monkeypatch.delenv("CORRAL_TRIE_CACHE")
    small = Vocabulary([bytes([b]) for b in range(256)] + [b"ab", b"abc"])
    assert small.trie.token_ids.shape[0] == 258
    assert not folder.exists()
    # a cache directory that cannot be created: the trie is built all the same
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"")
    monkeypatch.setenv("CORRAL_CACHE_DIR", str(blocker))
    vocab = Vocabulary.from_hf(tok)
    assert vocab.trie.token_ids.shape[0] > trie_file.MIN_TOKENS
    assert trie_file.store(vocab.trie, vocab.hash) is None


def test_the_least_recently_used_files_go_past_the_limit(
    folder: Path, tok: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trie_file, "MAX_FILES", 2)
    vocab = Vocabulary.from_hf(tok)
    trie = vocab.trie
    (own,) = folder.glob("*.trie")
    os.utime(own, (999_999, 999_999))
    names = ["a" * 64, "b" * 64, "c" * 64]
    for i, name in enumerate(names):
        path = trie_file.store(trie, name)
        assert path is not None
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    remaining = {p.stem for p in folder.glob("*.trie")}
    assert remaining == {"b" * 64, "c" * 64}  # the oldest two went
    # reading a file makes it the most recent
    assert trie_file.load("b" * 64, trie.token_ids.shape[0], vocab.size, 10**6) is not None
    trie_file.store(trie, "d" * 64)
    assert {p.stem for p in folder.glob("*.trie")} == {"b" * 64, "d" * 64}


def test_from_hf_makes_the_trie_once(
    folder: Path, tok: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``from_hf`` makes the trie (so a first compile does not), and compiles share it."""
    made: list[str] = []
    make = Vocabulary._build_trie

    def counted(self: Vocabulary) -> Any:
        made.append(self.hash)
        return make(self)

    monkeypatch.setattr(Vocabulary, "_build_trie", counted)
    vocab = Vocabulary.from_hf(tok)
    assert made == [vocab.hash]
    corral.compile('{"type": "integer"}', vocab, cache=False).matcher().allowed_token_ids()
    assert made == [vocab.hash]
