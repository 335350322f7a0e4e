"""corral's folder in the user's cache directory.

``$CORRAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/corral``, else ``~/.cache/corral``. What
lives there: the fp32 copy of the demo model (``models/``, ``integrations/models.py``),
the token tries of large vocabularies (``tries/``, ``automata/trie_file.py``), the
object code of Numba's runtime library (``runtime/``, ``jit_runtime.py``) and Python's
Unicode classes ``\\d``, ``\\s``, ``\\w`` and case-related characters (``unicode/``,
``grammar/regex/unicode_file.py``).

Each file there is written by :func:`write_file`: to a temporary name in its folder, then
renamed into place, so a reader sees a whole file or none.

This module imports nothing from the rest of the package.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["cache_dir", "write_file"]


def cache_dir() -> Path:
    """corral's cache directory (not created here: each user creates its subfolder)."""
    root = os.environ.get("CORRAL_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "corral"


def write_file(path: Path, chunks: Iterable[bytes | memoryview], *, tmp_prefix: str) -> bool:
    """Write ``chunks``, one after the other, as the file ``path`` (its folder created if
    missing): to a temporary file ``<tmp_prefix>*.tmp`` beside it, renamed into place.
    Returns whether the file was written; an error of the file system (a read-only home, a
    full disk) is not raised, and leaves no temporary file behind."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=tmp_prefix, suffix=".tmp")
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
        os.replace(tmp, path)
        tmp = None
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
