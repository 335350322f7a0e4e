"""corral's folder in the user's cache directory.

``$CORRAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/corral``, else ``~/.cache/corral``. What
lives there: the fp32 copy of the demo model (``models/``, ``integrations/models.py``),
the token tries of large vocabularies (``tries/``, ``automata/trie_file.py``), the
object code of Numba's runtime library (``runtime/``, ``jit_runtime.py``) and Python's
Unicode classes ``\\d``, ``\\s``, ``\\w`` and case-related characters (``unicode/``,
``grammar/regex/unicode_file.py``).

This module imports nothing from the rest of the package.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """corral's cache directory (not created here: each user creates its subfolder)."""
    root = os.environ.get("CORRAL_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "corral"
