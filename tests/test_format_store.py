"""The formats' automata built with the package (``grammar/json_schema/format_store.py``):
each entry is the automaton a process would build, with the same steps charged; a schema's
format takes it from the file; a file that fails a check is passed over with a warning."""

from __future__ import annotations

import functools
import json
import unicodedata
import zipfile
from pathlib import Path

import numpy as np
import pytest

from corral.errors import CacheWarning
from corral.grammar.json_schema import format_store, strings
from corral.grammar.json_schema.formats import FORMAT_REGEXES
from corral.grammar.json_schema.options import Options
from corral.grammar.json_schema.strings import FormatLanguage, body_of_node, build_body
from corral.grammar.regex.dfa import WorkBudgetError, metered, work_budget
from corral.jit import prebuilt_dir

BUDGET = Options().max_states


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return format_store.write(tmp_path_factory.mktemp("formats"))


@pytest.fixture
def fresh_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty the process's cache of string bodies (restored afterwards)."""
    monkeypatch.setattr(strings, "_BODY_CACHE", strings.BoundedCache(16))


def _same(a: object, b: object) -> bool:
    assert isinstance(a, strings.ByteDFA) and isinstance(b, strings.ByteDFA)
    (ta, ca), (tb, cb) = a.columns(), b.columns()
    return np.array_equal(ta, tb) and np.array_equal(ca, cb) and np.array_equal(a.accept, b.accept)


def _check_entries(entries: dict[tuple[str, int], tuple[object, int]]) -> None:
    """Every format regex has an entry equal to a fresh build, with the build's steps."""
    assert {rx for rx, _ in entries} == set(FORMAT_REGEXES.values())
    for (rx, budget), (dfa, cost) in entries.items():
        build = functools.partial(
            build_body, FormatLanguage(rx).tree(), where="t", max_states=budget
        )
        built, steps = metered(build, "t")
        assert _same(dfa, built), rx[:60]
        assert cost == steps > 0


def test_written_entries_are_the_automata_a_process_builds(store: Path) -> None:
    entries = format_store.read(store)
    assert all(b == BUDGET for _, b in entries)
    _check_entries(entries)


def test_the_package_file_where_the_package_has_one() -> None:
    d = prebuilt_dir()
    if d is None or not (d / format_store.FILE).is_file():
        pytest.skip("no prebuilt directory for these sources (an edited checkout, or none built)")
    _check_entries(format_store.read(d / format_store.FILE))


def test_a_format_is_taken_from_the_store_with_its_steps_charged(
    store: Path, fresh_bodies: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = format_store.read(store)
    monkeypatch.setattr(format_store, "_stored", lambda: entries)
    rx = FORMAT_REGEXES["email"]
    dfa, cost = entries[(rx, BUDGET)]
    assert body_of_node(FormatLanguage(rx), where="/format", max_states=BUDGET) is dfa
    # a budget smaller than the build's steps runs out on the stored automaton too
    with pytest.raises(WorkBudgetError), work_budget(cost - 1, "the string's automaton"):
        body_of_node(FormatLanguage(rx), where="/format", max_states=BUDGET)
    # another state budget: built, not taken
    other = body_of_node(FormatLanguage(rx), where="/format", max_states=BUDGET + 1)
    assert other is not dfa and _same(other, dfa)


def test_a_schema_format_reads_the_store(
    store: Path, fresh_bodies: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import corral

    entries = format_store.read(store)
    used: list[tuple[str, int]] = []

    def stored_body(rx: str, max_states: int) -> object:
        used.append((rx, max_states))
        return entries.get((rx, max_states))

    monkeypatch.setattr(format_store, "stored_body", stored_body)
    vocab = corral.Vocabulary([b"a", b"@", b".", b'"', b"b.c", b"<eos>"], eos_token_ids=[5])
    schema = {"type": "string", "format": "email"}
    g = corral.compile(json.dumps(schema), vocab, cache=False)
    assert used == [(FORMAT_REGEXES["email"], BUDGET)]
    m = g.matcher()
    for tok in [3, 0, 1, 4, 3]:  # "a@b.c"
        assert m.try_consume(tok)
    assert m.is_accepting()
    m = g.matcher()
    m.consume_tokens([3, 0, 1])  # '"a@'
    assert not m.try_consume(3)  # no domain: not an e-mail address


def _rewrite(src: Path, dst: Path, **replace: np.ndarray) -> Path:
    with np.load(src, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(replace)
    with open(dst, "wb") as f:
        np.savez(f, **arrays)
    return dst


def test_bad_files_are_refused(store: Path, tmp_path: Path) -> None:
    with np.load(store, allow_pickle=False) as z:
        tables, meta = z["tables"].copy(), json.loads(bytes(z["meta"]).decode())
    out_of_range = tables.copy()
    out_of_range[5] = 10**6
    bad_meta = dict(meta, layout=99)
    short_meta = dict(meta, entries=meta["entries"][:-1])
    cases = {
        "target": {"tables": out_of_range},
        "dtype": {"tables": tables.astype(np.int64)},
        "layout": {"meta": np.frombuffer(json.dumps(bad_meta).encode(), np.uint8)},
        "entries": {"meta": np.frombuffer(json.dumps(short_meta).encode(), np.uint8)},
    }
    for name, replace in cases.items():
        with pytest.raises(ValueError):
            format_store.read(_rewrite(store, tmp_path / f"{name}.npz", **replace))
    (tmp_path / "garbage.npz").write_bytes(b"not a zip")
    with pytest.raises((ValueError, zipfile.BadZipFile, OSError)):
        format_store.read(tmp_path / "garbage.npz")
    # other Unicode tables: no entries (the formats are then built)
    other = dict(meta, unicode="0.0." + unicodedata.unidata_version)
    meta_u = np.frombuffer(json.dumps(other).encode(), np.uint8)
    path = _rewrite(store, tmp_path / "u.npz", meta=meta_u)
    assert format_store.read(path) == {}


def test_a_bad_package_file_warns_and_is_passed_over(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with np.load(store, allow_pickle=False) as z:
        tables = z["tables"].copy()
    tables[0] = -7
    _rewrite(store, tmp_path / format_store.FILE, tables=tables)
    monkeypatch.setattr("corral.jit.prebuilt_dir", lambda: tmp_path)
    format_store._stored.cache_clear()
    try:
        with pytest.warns(CacheWarning, match="not used"):
            assert format_store.stored_body(FORMAT_REGEXES["date"], BUDGET) is None
    finally:
        format_store._stored.cache_clear()
