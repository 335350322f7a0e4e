"""Writing a file of corral's cache folder (``corral/user_cache.py``, ``write_file``)."""

from __future__ import annotations

from pathlib import Path

from corral.user_cache import write_file


def test_a_file_is_written_whole_and_replaces_the_old(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "x.bin"
    assert write_file(path, (b"ab", memoryview(b"cd")), tmp_prefix=".x-")
    assert path.read_bytes() == b"abcd"
    assert write_file(path, (b"e",), tmp_prefix=".x-")
    assert path.read_bytes() == b"e"
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.bin"]


def test_a_failed_write_leaves_nothing_and_does_not_raise(tmp_path: Path) -> None:
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the folder should be")
    assert not write_file(blocker / "x.bin", (b"ab",), tmp_prefix=".x-")

    def failing():  # type: ignore[no-untyped-def]
        yield b"ab"
        raise OSError("disk full")

    path = tmp_path / "x.bin"
    assert not write_file(path, failing(), tmp_prefix=".x-")
    assert list(tmp_path.iterdir()) == [blocker]
