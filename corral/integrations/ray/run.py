"""The driver of an extraction on Ray: ``corral extract --engine ray`` and
``corral.extract(..., engine="ray")``.

The driver checks the schema (corral's own error, before any worker starts), connects to
the cluster (``address``; ``None``: a local one on this machine), reads the input as a
Ray Dataset (:mod:`.source`), has ``workers`` actors extract it (:mod:`.worker`), and
takes the rows back in input order (Ray Data's ``preserve_order``). Only the driver
writes the output, one row after another, so a row is never written twice; a worker that
dies is restarted by Ray and its batch run again (``max_restarts``/``max_task_retries``);
a driver that dies leaves a file that the same command resumes (``resume_point``).
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from ...errors import CorralError

__all__ = ["RayOptions", "extract_documents", "extract_file"]

_OPTION_NAMES = ("address", "workers", "cpus_per_worker", "threads")


class RayOptions:
    """Where and how wide an extraction on Ray runs.

    Attributes:
        address: the cluster (``ray://...`` or ``host:port``; ``"auto"``: the one this
            node belongs to); ``None``: a local cluster started for the run.
        workers: actors that run the model (one model each).
        cpus_per_worker: CPUs Ray reserves for each actor.
        threads: torch threads per actor (default: ``cpus_per_worker``).
    """

    def __init__(
        self,
        address: str | None = None,
        workers: int = 1,
        cpus_per_worker: float = 1,
        threads: int | None = None,
    ) -> None:
        if not isinstance(workers, int) or workers < 1:
            raise CorralError(f"workers must be a positive int, got {workers!r}")
        if not isinstance(cpus_per_worker, (int, float)) or cpus_per_worker <= 0:
            raise CorralError(f"cpus_per_worker must be positive, got {cpus_per_worker!r}")
        self.address = address
        self.workers = workers
        self.cpus_per_worker = cpus_per_worker
        self.threads = threads if threads is not None else max(1, int(cpus_per_worker))

    @classmethod
    def of(cls, options: dict[str, Any] | None) -> RayOptions:
        options = dict(options or {})
        unknown = sorted(set(options) - set(_OPTION_NAMES))
        if unknown:
            raise CorralError(
                f"engine_options for engine='ray' are {list(_OPTION_NAMES)}, got {unknown}"
            )
        return cls(**options)


def _connect(options: RayOptions) -> None:
    import logging

    import ray
    import ray.data

    # Ray Data's own lines stay in its log files (the session's logs/ray-data*.log), not
    # on the console: corral reports progress and errors itself
    for handler in logging.getLogger("ray.data").handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(
            handler, logging.FileHandler
        ):
            handler.setLevel(logging.ERROR)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True  # rows come back in input order
    ctx.enable_progress_bars = False
    if ray.is_initialized():  # the caller's connection (its address is the caller's)
        return
    kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    if options.address is not None:
        ray.init(address=options.address, **kwargs)
    else:
        ray.init(include_dashboard=False, **kwargs)


def _check_schema(schema: Any) -> None:
    """Build the schema's grammar here, so that a schema corral cannot compile stops the
    run with corral's message before any worker starts."""
    from ...grammar.ir import Grammar
    from ..constraint import is_pydantic_model

    Grammar.from_json_schema(schema.model_json_schema() if is_pydantic_model(schema) else schema)


def _extracted(ds: Any, model: str, schema: Any, options: RayOptions, batch_size: int,
               worker_args: dict[str, Any]) -> Any:  # fmt: skip
    import ray.data

    from .worker import ExtractWorker

    return ds.map_batches(
        ExtractWorker,
        fn_constructor_args=(model, schema),
        fn_constructor_kwargs={**worker_args, "threads": options.threads},
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=options.workers),
        num_cpus=options.cpus_per_worker,
        # Ray Data's actors are started again when they die, and their batches run
        # again (max_restarts, max_task_retries: -1 by default)
    )


def extract_file(
    model: str,
    schema: Any,
    input_path: str,
    out_path: Path,
    *,
    options: RayOptions,
    field: str = "text",
    prompt: str | None = None,
    batch_size: int = 8,
    max_new_tokens: int = 512,
    progress: bool = True,
    stderr: TextIO | None = None,
) -> int:
    """Extract the records of ``input_path`` (JSONL or ``.parquet``) into ``out_path`` as
    ``corral extract`` writes them, resuming a file a previous run left. Returns the
    number of error rows written."""
    from tqdm import tqdm

    from ..cli import resume_point
    from .source import numbered_lines

    _check_schema(schema)
    done, keep = resume_point(out_path)  # proves the file is corral's; changes nothing
    _connect(options)
    ds = numbered_lines(input_path, after=done, rows_per_block=batch_size)
    worker_args = {"field": field, "prompt": prompt, "max_new_tokens": max_new_tokens}
    rows = _extracted(ds, model, schema, options, batch_size, worker_args)
    failures = 0
    bar = tqdm(unit="doc", desc="extract", file=stderr or sys.stderr, disable=not progress)
    with open(out_path, "ab") as out:
        if keep is not None:  # drop the cut line of an interrupted run (corral's own)
            out.truncate(keep)
        for row in _results(rows):
            data = str(row["row"]).encode("utf-8")
            out.write(data)
            out.flush()
            failures += bool(row["failed"])
            bar.update(1)
    bar.close()
    return failures


def extract_documents(
    model: str,
    documents: Sequence[str],
    schema: Any,
    *,
    options: RayOptions,
    prompt: str | None = None,
    batch_size: int = 8,
    max_new_tokens: int = 512,
    **schema_options: Any,
) -> Iterator[Any]:
    """:class:`~corral.integrations.extract.Extraction` per document, in order."""
    import json

    import ray.data

    if schema_options:
        raise CorralError(
            f"schema options {sorted(schema_options)} are not carried to Ray workers yet: "
            "use engine='transformers'"
        )
    _check_schema(schema)
    _connect(options)
    items = [
        {"line": i + 1, "raw": json.dumps(d, ensure_ascii=False)} for i, d in enumerate(documents)
    ]
    ds = ray.data.from_items(items, override_num_blocks=max(1, -(-len(items) // batch_size)))
    worker_args = {"prompt": prompt, "max_new_tokens": max_new_tokens, "pickled": True}
    for row in _results(_extracted(ds, model, schema, options, batch_size, worker_args)):
        yield pickle.loads(row["item"])


def _results(ds: Any) -> Iterator[dict[str, Any]]:
    """The rows of ``ds``, in order; a worker's error (one that cannot load its model,
    say) ends the run as a :class:`CorralError` with that error's last line."""
    import ray.exceptions

    try:
        yield from ds.iter_rows()
    except ray.exceptions.RayError as e:
        lines = [x.strip() for x in str(e).splitlines() if x.strip()]
        raise CorralError(
            f"a Ray worker failed: {lines[-1] if lines else type(e).__name__}"
        ) from None
