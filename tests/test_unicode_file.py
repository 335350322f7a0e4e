"""The running Python's Unicode tables as regular expressions need them, kept on disk
(``grammar/regex/unicode_file.py``): ``\\d``, ``\\s``, ``\\w`` and the case-related
characters read back are those ``re`` gives, and a file that does not check out is never
used."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.errors import CacheWarning
from corral.grammar.regex import charset, unicode_file
from corral.grammar.regex.charset import python_class
from corral.grammar.regex.python_syntax import parse_python_regex


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """corral's cache directory in ``tmp_path``, the file turned on, nothing remembered."""
    monkeypatch.setenv("CORRAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CORRAL_UNICODE_CACHE", raising=False)
    unicode_file._tables.cache_clear()
    yield tmp_path / "cache" / "unicode"
    unicode_file._tables.cache_clear()


def _fresh_process(monkeypatch: pytest.MonkeyPatch, *, scan: bool) -> list[str]:
    """Forget the sets, as a new process would; unless ``scan``, computing them fails.
    Returns the list of classes computed from here on."""
    unicode_file._tables.cache_clear()
    computed: list[str] = []

    def spy(source: str) -> object:
        if not scan:
            raise AssertionError(f"{source} was computed, not read")
        computed.append(source)
        return python_class(source)

    def spy_case() -> object:
        if not scan:
            raise AssertionError("the case-related characters were computed, not read")
        computed.append("case")
        return charset.case_related_points()

    monkeypatch.setattr(unicode_file, "python_class", spy)
    monkeypatch.setattr(unicode_file, "case_related_points", spy_case)
    return computed


def test_the_sets_read_back_are_res(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = {c: unicode_file.unicode_class(c) for c in unicode_file.CLASSES}
    assert first == {c: python_class(c) for c in unicode_file.CLASSES}
    assert len(list(folder.glob("*.json"))) == 1
    assert not list(folder.glob(".unicode-*"))  # no temporary file left behind
    _fresh_process(monkeypatch, scan=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = {c: unicode_file.unicode_class(c) for c in unicode_file.CLASSES}
    assert again == first
    related = unicode_file.case_related()
    assert related is not None and related is not charset.case_related()
    assert related.code_points == charset.case_related().code_points  # type: ignore[union-attr]
    assert related.text == charset.case_related().text  # type: ignore[union-attr]
    # what a pattern matches, through the parser, against re itself
    for pattern in (r"\s", r"\w", r"\d", r"[^\W\d_]", r"\S", "(?i:k)", "(?i:[s-t])", r"(?i:\w)"):
        node = parse_python_regex(pattern)
        rx = re.compile(pattern)
        for cp in (
            *(0x20, 0x85, 0xA0, 0x3000, 0x0660, 0x1D7CE, 0x4E00, ord("_"), 0x10FFFF),
            *(ord("K"), 0x212A, ord("S"), 0x17F, 0x1E9E, ord("t")),
        ):
            assert (cp in node.chars) == bool(rx.fullmatch(chr(cp))), (pattern, hex(cp))


def _edit(path: Path, change: object) -> None:
    data = json.loads(path.read_text())
    change(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))


def _redigest(data: dict) -> None:  # type: ignore[type-arg]
    data["crc32"] = unicode_file._digest(data["sets"])


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: d["sets"]["\\s"].pop(), "checksum"),
        (lambda d: (d["sets"]["\\w"].reverse(), _redigest(d)), "out of order"),
        (lambda d: (d["sets"]["\\s"].append([0x10FFFF, 0x110000]), _redigest(d)), "bounds"),
        (lambda d: d["sets"].update({"\\S": []}), "expected sets"),
        (lambda d: d["sets"]["case-related"].pop(), "checksum"),
        (lambda d: d["built"].update(unicode="0.0.0"), "other Unicode"),
    ],
)
def test_a_file_that_does_not_check_out_is_not_read(
    folder: Path, monkeypatch: pytest.MonkeyPatch, change: object, reason: str
) -> None:
    want = {c: unicode_file.unicode_class(c) for c in unicode_file.CLASSES}
    (path,) = folder.glob("*.json")
    _edit(path, change)
    computed = _fresh_process(monkeypatch, scan=True)
    with pytest.warns(CacheWarning, match=reason):
        got = {c: unicode_file.unicode_class(c) for c in unicode_file.CLASSES}
    assert got == want and sorted(computed) == sorted([*unicode_file.CLASSES, "case"])
    # written again: the next process reads it
    _fresh_process(monkeypatch, scan=False)
    assert unicode_file.unicode_class("\\s") == want["\\s"]


def test_another_layout_is_written_again_silently(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unicode_file.unicode_class("\\s")
    (path,) = folder.glob("*.json")
    _edit(path, lambda d: d.update(format=0))
    computed = _fresh_process(monkeypatch, scan=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert unicode_file.unicode_class("\\s") == python_class("\\s")
    assert "\\s" in computed
    assert json.loads(path.read_text())["format"] == unicode_file._FORMAT


def test_an_unreadable_file_is_computed_again(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unicode_file.unicode_class("\\s")
    (path,) = folder.glob("*.json")
    path.write_text("{not json")
    _fresh_process(monkeypatch, scan=True)
    with pytest.warns(CacheWarning, match="unreadable"):
        assert unicode_file.unicode_class("\\s") == python_class("\\s")


def test_turned_off_or_unwritable_nothing_is_kept(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORRAL_UNICODE_CACHE", "0")
    assert unicode_file.unicode_class("\\w") == python_class("\\w")
    assert not folder.exists()
    monkeypatch.delenv("CORRAL_UNICODE_CACHE")
    unicode_file._tables.cache_clear()
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the folder should be")
    monkeypatch.setenv("CORRAL_CACHE_DIR", str(blocker))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert unicode_file.unicode_class("\\d") == python_class("\\d")


def test_only_the_three_classes() -> None:
    with pytest.raises(ValueError, match="not one of"):
        unicode_file.unicode_class("\\p{L}")
