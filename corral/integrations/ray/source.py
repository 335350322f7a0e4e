"""The input file as a Ray Dataset of numbered lines.

Every row is ``{"line": n, "raw": text}``: for JSONL, ``n`` is the line's number in the
file (1-based) and ``text`` the line (blank lines dropped, as ``corral extract`` does);
for Parquet, ``n`` is the row's number and ``text`` the row as a JSON object (so both
formats are read by :func:`corral.integrations.cli.input_line`). One read task reads the
whole file, in order, and hands it on in blocks of ``rows_per_block`` rows, which the
cluster's workers then take in parallel. Lines up to ``after`` (already in the output: a
resumed run) are skipped where they are read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ...errors import CorralError

__all__ = ["numbered_lines"]


def numbered_lines(path: str, *, after: int = 0, rows_per_block: int = 8) -> Any:
    """A Ray Dataset of the lines (JSONL) or rows (``.parquet``) of the file ``path`` (a
    local path or any URI Ray reads: ``s3://``, ``gs://``, ...), numbered, after line
    ``after``."""
    import ray.data

    if rows_per_block < 1:
        raise CorralError(f"rows_per_block must be at least 1, got {rows_per_block}")
    fmt = "parquet" if path.endswith(".parquet") else "jsonl"
    source = _source_class()(path, fmt=fmt, after=after, rows_per_block=rows_per_block)
    # Reading takes no CPU of its own (the workers may hold every CPU of the cluster).
    ds = ray.data.read_datasource(source, override_num_blocks=1, num_cpus=0)
    # One read task's blocks would reach the workers as one input, which one worker
    # takes (a read fused into the workers' step is read and extracted by one worker): a
    # streaming repartition hands them on block by block, in order. It takes no CPU
    # either (Ray Data has no argument for that: its step is given the setting directly).
    ds = ds.repartition(target_num_rows_per_block=rows_per_block)
    op: Any = getattr(getattr(ds, "_logical_plan", None), "dag", None)
    args = getattr(op, "ray_remote_args", None)
    if isinstance(args, dict):
        object.__setattr__(op, "ray_remote_args", {**args, "num_cpus": 0})
    return ds


_SOURCE: Any = None


def _source_class() -> Any:
    """The datasource class (defined on first use: its base class is Ray's)."""
    global _SOURCE
    if _SOURCE is not None:
        return _SOURCE
    import pyarrow as pa
    from ray.data.datasource import FileBasedDatasource

    class NumberedLines(FileBasedDatasource):  # type: ignore[misc]
        def __init__(self, path: str, *, fmt: str, after: int, rows_per_block: int) -> None:
            super().__init__(path)
            self.fmt, self.after, self.rows_per_block = fmt, after, rows_per_block

        def _read_stream(self, f: Any, path: str) -> Iterator[Any]:
            lines: list[int] = []
            raws: list[str] = []
            for n, raw in self._rows(f):
                if n <= self.after:
                    continue
                lines.append(n)
                raws.append(raw)
                if len(lines) == self.rows_per_block:
                    yield pa.table({"line": lines, "raw": raws})
                    lines, raws = [], []
            if lines:
                yield pa.table({"line": lines, "raw": raws})

        def _rows(self, f: Any) -> Iterator[tuple[int, str]]:
            if self.fmt == "jsonl":
                text = f.readall().decode("utf-8", errors="replace")
                for n, raw in enumerate(text.splitlines(), start=1):
                    if raw.strip():
                        yield n, raw
                return
            import pyarrow.parquet as pq

            n = 0
            data = pa.BufferReader(f.readall())  # the stream Ray opens cannot seek
            for batch in pq.ParquetFile(data).iter_batches():
                for row in batch.to_pylist():
                    n += 1
                    yield n, json.dumps(row, ensure_ascii=False, default=str)

    _SOURCE = NumberedLines
    return _SOURCE
