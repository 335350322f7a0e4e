"""The ``corral`` command: ``corral demo``, ``corral extract`` and ``corral warmup``.

``corral demo`` runs :mod:`corral.demo` (``--tools``: its tool-calling demo).

``corral warmup`` compiles the Numba kernels into their on-disk cache (see
:mod:`corral.warmup`) where the install has no prebuilt kernels (see :mod:`corral.jit`),
so that the first process to constrain a model does not pay the compilation; with them it
only checks that everything loads (seconds).

``corral extract --model PATH --schema schema.json --input docs.jsonl --output out.jsonl``
(``--engine vllm`` runs the documents through vLLM's engine, ``--engine-arg NAME=VALUE``
passing its options, e.g. ``tensor_parallel_size=2``; see docs/vllm.md)

Input: JSON Lines; each line is a JSON string (the document) or an object whose
``--field`` (default ``text``) is the document; an ``id`` field is copied to the output.
Blank lines are skipped.

Output: one line per input line, in input order:
``{"line": N, "id": ..., "record": {...}}`` or ``{"line": N, "id": ..., "error": "...",
"partial": "..."}`` (a malformed input line, or a document whose record failed). Each line
is written whole and flushed, so an interrupted run leaves complete lines (at most one cut
line, which the next run removes). Rerunning with the same output resumes after the last
line written: nothing is lost and nothing is written twice. An existing output file that
is not corral's (a line that is not such a row) is refused before anything is changed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..errors import CorralError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="corral", description="Constrained generation.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo", help="schema-constrained extraction (or, --tools, tool calling) with a small "
        "real model"
    )  # fmt: skip
    demo.add_argument("--model", default=None, help="local Hugging Face model folder")
    demo.add_argument(
        "--max-new-tokens", type=positive_int, default=None,
        help="token budget of each output (default 64, with --tools 128)",
    )  # fmt: skip
    demo.add_argument(
        "--tools", action="store_true",
        help="tool calling: five tools, the hermes format, calls parsed and validated",
    )  # fmt: skip
    ex = sub.add_parser("extract", help="documents (JSONL) in, validated records (JSONL) out")
    ex.add_argument(
        "--model", required=True, help="local Hugging Face model folder, or gemma3-270m"
    )
    ex.add_argument("--schema", required=True, help="JSON Schema file")
    ex.add_argument("--input", required=True, help="input JSONL")
    ex.add_argument("--output", required=True, help="output JSONL (resumed if it exists)")
    ex.add_argument("--field", default="text", help="document field of object lines")
    ex.add_argument("--prompt", default=None, help="prompt template file ({document}, {schema})")
    ex.add_argument("--batch-size", type=positive_int, default=8)
    ex.add_argument("--max-new-tokens", type=positive_int, default=512)
    ex.add_argument("--no-progress", action="store_true", help="no progress bar")
    ex.add_argument(
        "--span",
        action="append",
        default=[],
        metavar="FIELD[,FIELD...]",
        help="top-level properties whose string values must be copied verbatim from the "
        "document (x-corral-span); repeatable",
    )
    ex.add_argument(
        "--engine",
        choices=["transformers", "vllm", "ray"],
        default="transformers",
        help="transformers' generate in this process, vLLM's engine (docs/vllm.md), or "
        "workers on a Ray cluster (docs/ray.md)",
    )
    ex.add_argument(
        "--ray-address",
        default=None,
        help="--engine ray: the cluster to join (host:port, ray://..., auto); default: a local one",
    )
    ex.add_argument("--workers", type=positive_int, default=1, help="--engine ray: model workers")
    ex.add_argument(
        "--cpus-per-worker", type=positive_int, default=1, help="--engine ray: CPUs each"
    )
    ex.add_argument(
        "--engine-arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a vllm.LLM argument (VALUE read as JSON, else as text), e.g. "
        "tensor_parallel_size=2; repeatable; --engine vllm only",
    )
    wu = sub.add_parser(
        "warmup",
        help="compile (or load) every Numba kernel now: needed only where the install has no "
        "prebuilt kernels",
    )
    wu.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        if args.command == "warmup":
            return run_warmup(quiet=args.quiet)
        if args.command == "demo":
            from ..demo import main as demo_main

            return demo_main(
                ([] if args.model is None else ["--model", args.model])
                + ([] if args.max_new_tokens is None else
                   ["--max-new-tokens", str(args.max_new_tokens)])
                + (["--tools"] if args.tools else [])
            )  # fmt: skip
        return run_extract(args)
    except (CorralError, OSError, ValueError, TypeError) as e:
        print(f"corral: error: {e}", file=sys.stderr)
        return 2


def run_warmup(*, quiet: bool = False) -> int:
    """``corral warmup``: :func:`corral.warmup.warmup`, with a progress bar on stderr
    unless ``quiet``."""
    import time

    from ..jit import cache_counts, prebuilt_dir
    from ..warmup import warmup

    if quiet:
        warmup()
        return 0
    t0 = time.perf_counter()

    def progress(done: int, total: int, name: str) -> None:
        bar = "#" * (20 * done // total)
        what = f"kernels for: {name}" if name else "done"
        sys.stderr.write(
            f"\r[{bar:<20}] {done}/{total} {time.perf_counter() - t0:6.1f} s  {what:<45}"
        )
        if not name:
            sys.stderr.write("\n")
        sys.stderr.flush()

    steps = warmup(progress)
    slowest = max(steps, key=lambda s: s.seconds)
    loaded, compiled = cache_counts()
    where = "prebuilt kernels in use" if prebuilt_dir() is not None else "no prebuilt kernels"
    sys.stderr.write(
        f"corral warmup: every kernel ready in {sum(s.seconds for s in steps):.1f} s: "
        f"{compiled} compiled, {loaded} loaded from a cache ({where}; slowest step: "
        f"{slowest.name}, {slowest.seconds:.1f} s)\n"
    )
    return 0


def run_extract(args: argparse.Namespace, stderr: TextIO | None = None) -> int:
    """``corral extract``; returns the exit status (0: every record extracted, 1: some
    lines are error rows)."""
    from .extract import DEFAULT_PROMPT, make_extractor, with_spans

    schema_path, in_path, out_path = Path(args.schema), Path(args.input), Path(args.output)
    try:
        schema_text = schema_path.read_text(encoding="utf-8")
    except OSError as e:
        raise CorralError(f"cannot read the schema file: {e}") from None
    fields = [f.strip() for arg in getattr(args, "span", ()) for f in arg.split(",") if f.strip()]
    if fields:
        schema_text = with_spans(schema_text, fields)
    prompt = DEFAULT_PROMPT if args.prompt is None else Path(args.prompt).read_text("utf-8")
    if getattr(args, "engine", "transformers") == "ray":
        return _extract_on_ray(args, schema_text, prompt, stderr)
    if not in_path.is_file():
        raise CorralError(f"input file {str(in_path)!r} does not exist")
    done, keep = resume_point(out_path)  # proves the file is corral's; changes nothing
    every = list(read_inputs(in_path, args.field))
    inputs = [x for x in every if x[0] > done]
    total = len(every)
    # model and schema are checked (and compiled once) before anything is written
    ex = make_extractor(
        args.model,
        schema_text,
        prompt=prompt,
        max_new_tokens=args.max_new_tokens,
        engine=getattr(args, "engine", "transformers"),
        engine_options=engine_options(getattr(args, "engine_arg", ())) or None,
    )
    try:
        failures = _extract_lines(args, ex, inputs, total, out_path, keep, stderr)
    finally:
        ex.close()  # an engine the extractor started (a vLLM one) stops with it
    return 1 if failures else 0


def _extract_on_ray(
    args: argparse.Namespace, schema_text: str, prompt: str, stderr: TextIO | None
) -> int:
    """``corral extract --engine ray`` (:mod:`corral.integrations.ray.run`)."""
    if getattr(args, "engine_arg", None):
        raise CorralError("--engine-arg applies to --engine vllm")
    try:
        from .ray.run import RayOptions, extract_file
    except ImportError as e:  # pragma: no cover - ray is a test dependency
        raise CorralError(f"--engine ray needs Ray ({e}): pip install 'corral[ray]'") from None
    src = str(args.input)
    if "://" not in src and not Path(src).is_file():
        raise CorralError(f"input file {src!r} does not exist")
    options = RayOptions(
        address=args.ray_address, workers=args.workers, cpus_per_worker=args.cpus_per_worker
    )
    failures = extract_file(
        args.model, schema_text, src, Path(args.output), options=options, field=args.field,
        prompt=prompt, batch_size=args.batch_size, max_new_tokens=args.max_new_tokens,
        progress=not args.no_progress, stderr=stderr,
    )  # fmt: skip
    return 1 if failures else 0


def _extract_lines(
    args: argparse.Namespace,
    ex: Any,
    inputs: list[Any],
    total: int,
    out_path: Any,
    keep: int | None,
    stderr: TextIO | None,
) -> int:
    """Extract the records of ``inputs`` with ``ex`` into ``out_path``; the number of
    error rows written."""
    from tqdm import tqdm

    failures = 0
    bar = tqdm(
        total=total, initial=total - len(inputs), unit="doc", desc="extract",
        file=stderr or sys.stderr, disable=args.no_progress,
    )  # fmt: skip
    with open(out_path, "ab") as out:
        if keep is not None:  # drop the cut line of an interrupted run (corral's own)
            out.truncate(keep)
        pending = list(inputs)
        while pending:
            window, pending = pending[: args.batch_size], pending[args.batch_size :]
            docs = [(n, doc) for n, _ident, doc, err in window if err is None and doc is not None]
            results = ex.run(docs)
            for n, ident, _doc, err in window:
                row = output_row(n, ident, err, None if err is not None else next(results))
                failures += "error" in row
                write_line(out, row)
                bar.update(1)
    bar.close()
    return failures


def engine_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs as keyword arguments (``VALUE`` as JSON, else as text)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.isidentifier():
            raise ValueError(f"--engine-arg {pair!r}: expected NAME=VALUE")
        try:
            out[name] = json.loads(value)
        except ValueError:
            out[name] = value
    return out


def read_inputs(path: Path, field: str) -> Iterator[tuple[int, Any, str | None, str | None]]:
    """``(line number, id, document, error)`` per non-blank input line."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, raw in enumerate(f, start=1):
            if raw.strip():
                yield input_line(n, raw, field)


def input_line(n: int, raw: str, field: str) -> tuple[int, Any, str | None, str | None]:
    """``(line number, id, document, error)`` of the non-blank input line ``n``."""
    try:
        item = json.loads(raw)
    except ValueError as e:
        return n, None, None, f"input line {n}: not JSON ({e})"
    except RecursionError:
        return n, None, None, f"input line {n}: JSON nested too deeply to read"
    if isinstance(item, str):
        return n, None, item, None
    if isinstance(item, dict) and isinstance(item.get(field), str):
        return n, item.get("id"), item[field], None
    return (
        n,
        item.get("id") if isinstance(item, dict) else None,
        None,
        f"input line {n}: expected a JSON string or an object with a string field {field!r}",
    )


def output_row(n: int, ident: Any, err: str | None, item: Any = None) -> dict[str, Any]:
    """The output row of input line ``n``: its error (``err``, a line that is no document),
    or the :class:`~corral.integrations.extract.Extraction` ``item``'s record or error."""
    row: dict[str, Any] = {"line": n}
    if ident is not None:
        row["id"] = ident
    if err is not None:
        row["error"] = err
    elif item.error is None:
        row["record"] = item.value
    else:
        row["error"] = f"{type(item.error).__name__}: {item.error}"
        row["partial"] = item.text
    return row


ROW_KEYS = frozenset({"line", "id", "record", "error", "partial"})
ROW_START = b'{"line": '  # how every row corral writes begins (json.dumps, "line" first)


def resume_point(path: Path) -> tuple[int, int | None]:
    """``(last, keep)``: the input line number of the last complete output line (0 for a
    new or empty file), and the length to cut the file to before appending (``None``:
    leave it; else the file ends with the cut line of an interrupted write).

    Nothing is changed here. The file must be corral's own: every complete line a row as
    :func:`run_extract` writes them (an object of corral's keys, beginning ``{"line": N``,
    with a record or an error, line numbers increasing), and a cut last line the start of
    one. Anything else raises :class:`CorralError`, and the file is left as it is.
    """
    if not path.exists():
        return 0, None
    if not path.is_file():
        raise CorralError(f"{path} is not a file")
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    last = 0
    for raw in data[:end].splitlines():
        if not raw.strip():
            continue
        line = row_line(raw)
        if line is None or line <= last:
            raise CorralError(
                f"{path} has a line that corral did not write ({raw[:80]!r}): refusing to "
                "append to it"
            )
        last = line
    if end == len(data):
        return last, None
    cut = data[end:]
    if not (ROW_START.startswith(cut) or cut.startswith(ROW_START)):
        raise CorralError(
            f"{path} ends with text that corral did not write ({cut[:80]!r}): refusing to "
            "append to it"
        )
    return last, end


def row_line(raw: bytes) -> int | None:
    """The input line number of an output row as corral writes them, else ``None``."""
    if not raw.startswith(ROW_START):
        return None
    try:
        row = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(row, dict) or not ROW_KEYS.issuperset(row):
        return None
    line = row.get("line")
    if type(line) is not int or line < 1 or ("record" in row) == ("error" in row):
        return None
    return line


def positive_int(text: str) -> int:
    """An ``argparse`` type: an integer >= 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def write_line(out: Any, row: dict[str, Any]) -> None:
    """Write one JSON line in a single write, then flush it to the OS."""
    out.write(row_bytes(row))
    out.flush()


def row_bytes(row: dict[str, Any]) -> bytes:
    """An output row as the line written for it."""
    return (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")


if __name__ == "__main__":
    sys.exit(main())
