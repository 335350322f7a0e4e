"""The automata of the ``format`` values, built with the package and shipped beside its
prebuilt kernels.

A format's string body (:func:`.strings.build_body` of its regex,
:data:`.formats.FORMAT_REGEXES`) depends on corral's sources and on nothing a schema says,
yet each process built it the first time a schema named the format: a fresh process's
first ``email`` schema took 42-45 ms of CPU to its first mask against 6-8 ms with the
file (its domain and IPv6 literals), and all 16 formats 320 ms, on a two-core machine.
Building the package (``jit.prebuild``) therefore also writes every format's body, for
the default state budget, into ``formats.npz`` in the prebuilt directory; a process
reads the file once, when a schema first names a format, and
:func:`.strings.body_of_node` takes a format's body from it instead of parsing its regex
and building the automaton.

The file is read only where :func:`corral.jit.prebuilt_dir` says the prebuilt directory
was built from these sources, with this Python, Numba and platform (an edited checkout,
``CORRAL_PREBUILT=0`` or ``CORRAL_NO_PREBUILD=1`` build the bodies as before). An entry is
used only for the same regex text, the same state budget and the same Unicode tables, and
only after its arrays are checked (dtypes, shapes, every target a state); it carries the
steps its build counted, which are charged to the compile's budgets as a build's would be,
so a budget runs out at the same place with or without the file. A file that fails a
check is passed over with a :class:`~corral.errors.CacheWarning` (its formats are then
built).

Layout (``numpy.savez``, no pickled objects): ``meta``, the JSON text (UTF-8 bytes) of
``{"layout": 1, "unicode": ..., "entries": [{"rx", "max_states", "cost", "n", "k"}, ...]}``,
and the compact forms of the automata one after the other: ``tables`` (``int32``, entry
``i``'s ``[n, k]`` table flattened), ``classes`` (``uint8 [entries, 256]``) and ``accept``
(``bool``, ``n`` for each entry).
"""

from __future__ import annotations

import functools
import json
import unicodedata
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import CacheWarning
from ..regex.dfa import ByteDFA, metered

__all__ = ["FILE", "read", "stored_body", "write"]

FILE = "formats.npz"
"""The file's name in the prebuilt directory."""

_LAYOUT = 1


def write(target: str | Path) -> Path:
    """Build every format's body for the compile's default state budget and write them to
    ``target``/:data:`FILE`. Returns the file's path."""
    from .formats import FORMAT_REGEXES
    from .options import Options
    from .strings import FormatLanguage, build_body

    budget = Options().max_states
    tables, classes, accepts, entries = [], [], [], []
    for rx in sorted(set(FORMAT_REGEXES.values())):
        build = functools.partial(
            build_body, FormatLanguage(rx).tree(), where="format", max_states=budget
        )
        dfa, cost = metered(build, "format")
        table, cls = dfa.columns()
        tables.append(table.ravel())
        classes.append(cls)
        accepts.append(dfa.accept)
        n, k = table.shape
        entries.append({"rx": rx, "max_states": budget, "cost": cost, "n": n, "k": k})
    meta = {"layout": _LAYOUT, "unicode": unicodedata.unidata_version, "entries": entries}
    arrays: dict[str, Any] = {
        "meta": np.frombuffer(json.dumps(meta).encode(), np.uint8),
        "tables": np.concatenate(tables).astype(np.int32),
        "classes": np.stack(classes).astype(np.uint8),
        "accept": np.concatenate(accepts).astype(np.bool_),
    }
    path = Path(target) / FILE
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def read(path: str | Path) -> dict[tuple[str, int], tuple[ByteDFA, int]]:
    """The entries of the file ``path``: ``(regex, state budget) -> (body, steps)``.

    Raises ``OSError`` if it cannot be read and ``ValueError`` if it is not such a file or
    fails a check; a file built with other Unicode tables gives no entries."""
    with np.load(path, allow_pickle=False) as z:
        try:
            meta = json.loads(bytes(z["meta"]).decode())
            tables, classes, accept = z["tables"], z["classes"], z["accept"]
        except (KeyError, UnicodeDecodeError) as e:
            raise ValueError(f"not a file of format automata: {e}") from None
    if not isinstance(meta, dict) or meta.get("layout") != _LAYOUT:
        raise ValueError("another layout")
    if meta.get("unicode") != unicodedata.unidata_version:
        return {}
    entries = meta.get("entries")
    if (
        not isinstance(entries, list)
        or tables.dtype != np.int32
        or tables.ndim != 1
        or classes.dtype != np.uint8
        or classes.shape != (len(entries), 256)
        or accept.dtype != np.bool_
        or accept.ndim != 1
    ):
        raise ValueError("arrays of the wrong type or shape")
    out: dict[tuple[str, int], tuple[ByteDFA, int]] = {}
    t = a = 0
    for i, entry in enumerate(entries):
        try:
            rx, budget, cost, n, k = (entry[x] for x in ("rx", "max_states", "cost", "n", "k"))
        except (KeyError, TypeError):
            raise ValueError(f"entry {i}: malformed") from None
        if not (
            isinstance(rx, str)
            and all(isinstance(x, int) for x in (budget, cost, n, k))
            and n > 0
            and k > 0
            and t + n * k <= tables.shape[0]
            and a + n <= accept.shape[0]
        ):
            raise ValueError(f"entry {i}: malformed")
        table = tables[t : t + n * k].reshape(n, k)
        cls = classes[i]
        if int(cls.max()) >= k or int(table.min()) < -1 or int(table.max()) >= n:
            raise ValueError(f"entry {i}: a target or column out of range")
        out[(rx, budget)] = (ByteDFA.from_columns(table, cls, accept[a : a + n]), cost)
        t += n * k
        a += n
    if t != tables.shape[0] or a != accept.shape[0]:
        raise ValueError("arrays longer than the entries")
    return out


@functools.cache
def _stored() -> dict[tuple[str, int], tuple[ByteDFA, int]]:
    """The prebuilt directory's entries, read once per process (none where there is no
    usable prebuilt directory or file)."""
    from ...jit import prebuilt_dir

    d = prebuilt_dir()
    if d is None or not (d / FILE).is_file():
        return {}
    try:
        return read(d / FILE)
    except (OSError, ValueError) as e:
        warnings.warn(
            f"{d / FILE}: not used ({e}); formats are built in each process",
            CacheWarning,
            stacklevel=2,
        )
        return {}


def stored_body(rx: str, max_states: int) -> tuple[ByteDFA, int] | None:
    """The prebuilt body of the format regex ``rx`` for the state budget ``max_states``
    and the steps its build counted, or ``None`` where none is stored."""
    return _stored().get((rx, max_states))
