"""Side-by-side JSON Schema benchmark on MaskBench: corral, llguidance, XGrammar, outlines-core.

Usage (from the repository root, with the project's virtual environment active)::

    python benchmarks/schemas.py --schemas 200 --seed 0

which is also the default (``python benchmarks/schemas.py``). Other options:
``--timeout 30`` (s, TTFM limit per schema), ``--replay-timeout 120``,
``--engines corral,llguidance,xgrammar,xgrammar-strict,outlines-core`` (the default; an
engine that is not installed is skipped with a message), ``--guard auto|none|LIST``,
``--guard-memory-gb 16``, ``--tokenizer llama3``, ``--maskbench DIR``, ``--out DIR``, and
``--ttfm-only`` (step 1 alone: a 600-schema TTFM run takes minutes instead of hours).
Duration: about 20 s per schema on average with all five engines (a 20-schema run took
7.5 min on a loaded machine), so 1 to 1.5 hours for 200; most of it is outlines-core and
non-strict XGrammar compiles, which run twice (guard, then measured), and each timeout
costs ``--timeout`` seconds in a guard process.

The sample: the MaskBench files (``*.json`` under ``--maskbench``, each
``{"schema": ..., "tests": [{"data": ..., "valid": bool}, ...]}``), sorted by name, shuffled
with ``random.Random(seed)``, the first ``--schemas`` of them. Every timing runs in this one
process, on one thread (``OMP/RAYON/NUMBA/MKL_NUM_THREADS=1``); schemas in the outer loop,
engines in the inner loop, so that load changes on the machine hit every engine alike.
Before any timing each engine compiles a small schema and replays an instance through it
(code loading, JIT).

For every schema and engine:

1. **TTFM** (time to first mask): compile the schema from scratch (no compile cache), make a
   matcher and fill its first next-token mask, timed as one interval with
   ``time.perf_counter_ns`` (the JSON also splits it into compile and first mask). Every
   engine receives the same text, ``json.dumps(schema)``, and is set to compact JSON; the
   calls and options of each engine are in ``schema_notes`` (also written to the JSON). A
   failure is recorded with its error class and first line; a TTFM over ``--timeout`` is a
   timeout. Time limits: a ``SIGALRM`` timer (``signal.setitimer``) around the compile and
   first mask interrupts Python code (corral, which also gets ``time_budget_s``), but not a
   Rust or C++ call (llguidance, XGrammar, outlines-core): the handler only runs once the
   call returns. So each of those engines has a *guard process* (:class:`Guard`, on by
   default, ``--guard``) that compiles the schema first and is killed when it overruns the
   limit (or dies, e.g. on its address-space limit): the schema is then a timeout (or a
   compile error) for that engine without running in this process. The guard is idle
   while this process measures. With ``--guard none`` a late Rust/C++ call is still
   reported as a timeout, but only after it returns.
2. **TBM** (time between masks): the first valid test instance, serialised with
   ``json.dumps(v, separators=(",", ":"), ensure_ascii=False)``, every object's keys in
   schema order (:func:`in_local_schema_order`: the order of the ``properties`` describing
   that object), tokenized once with ``tokenizer.encode(text, add_special_tokens=False)``;
   before each token only the engine's mask fill is timed, then the token is consumed;
   finally the last mask is timed (it must allow EOS). Documents an engine rejects are
   listed and left out of its TBM.
3. **Correctness**: every test instance (valid and invalid) is consumed token by token by a
   fresh matcher, which must then be accepting. JSON objects are unordered and the engines
   write properties in schema order, so an instance counts as accepted when one of its
   serialisations is: keys in local schema order, as given, or ordered by the whole
   schema's :func:`property_rank`. A schema *passes* when it compiled and every instance is
   classified right.

The replays of steps 2 and 3 have their own ``SIGALRM`` limit (``--replay-timeout``; same
caveat for Rust/C++ calls, which are not guarded there). Results: a Markdown report on
stdout and a JSON file ``schemas-<tokenizer>-<date>.json`` under ``--out``.
"""

from __future__ import annotations

import single_thread  # noqa: F401  (first: one thread for every engine)

# isort: split
import argparse
import datetime
import functools
import gc
import json
import os
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from engines import (  # noqa: E402
    CorralEngine,
    Engine,
    GrammarCompileError,
    LLGuidanceEngine,
    XGrammarEngine,
)
from run import (  # noqa: E402
    DEFAULT_TOKENIZERS_DIR,
    PACKAGES,
    DocRun,
    fmt,
    resolve_tokenizer,
    run_document,
)
from run import environment as run_environment  # noqa: E402

# the serialisation and schema-order helpers of the conformance runner
sys.path.insert(0, str(BENCH_DIR.parent / "tests"))
from support.schema_runner import in_schema_order, property_rank, serialise  # noqa: E402
from workloads import DEFAULT_MASKBENCH_DIR, Document, encode, maskbench_file_order  # noqa: E402

#: Compiled and replayed by every engine before any timing (code loading, JIT).
WARMUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
        "kind": {"enum": ["a", "b"]},
    },
    "required": ["name", "age"],
}
WARMUP_INSTANCE: dict[str, Any] = {"name": "Ann", "age": 41, "tags": ["x", "y"], "kind": "b"}


# ---------------------------------------------------------------------------------------
# JSON helpers
# ---------------------------------------------------------------------------------------
_MAX_DEPTH = 40


def _resolve(node: Any, root: Any) -> Any:
    """``node`` with local ``$ref`` chains followed (siblings of a ``$ref`` kept as allOf)."""
    for _ in range(_MAX_DEPTH):
        if not isinstance(node, dict) or not isinstance(node.get("$ref"), str):
            return node
        ref = node["$ref"]
        if not ref.startswith("#"):
            return node
        target: Any = root
        for part in ref[1:].split("/")[1:]:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return node
        rest = {k: v for k, v in node.items() if k != "$ref"}
        node = {"allOf": [target, rest]} if rest else target
    return node


def _layout(node: Any, root: Any, keys: set[str], depth: int = 0) -> dict[str, list[Any]]:
    """Property names of an object schema in the order corral writes them, each with its
    subschemas: ``properties``, then those of ``allOf`` branches, then of the ``anyOf`` /
    ``oneOf`` branch naming most of ``keys`` (the instance's keys), then ``required``."""
    node = _resolve(node, root)
    out: dict[str, list[Any]] = {}
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return out

    def merge(more: dict[str, list[Any]]) -> None:
        for name, subs in more.items():
            out.setdefault(name, []).extend(subs)

    props = node.get("properties")
    if isinstance(props, dict):
        merge({name: [sub] for name, sub in props.items()})
    for sub in node.get("allOf", []) if isinstance(node.get("allOf"), list) else []:
        merge(_layout(sub, root, keys, depth + 1))
    for kw in ("anyOf", "oneOf"):
        branches = node.get(kw)
        if isinstance(branches, list) and branches:
            layouts = [_layout(b, root, keys, depth + 1) for b in branches]
            merge(max(layouts, key=lambda lay: len(keys & lay.keys())))
    required = node.get("required")
    if isinstance(required, list):
        merge({name: [] for name in required if isinstance(name, str)})
    return out


def _extra_schema(node: Any, root: Any, name: str, depth: int = 0) -> Any:
    """The schema of a property ``name`` not listed in ``properties`` (patternProperties or
    additionalProperties), or ``None``."""
    node = _resolve(node, root)
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return None
    pattern_props = node.get("patternProperties")
    if isinstance(pattern_props, dict):
        for pattern, sub in pattern_props.items():
            try:
                if re.search(pattern, name):
                    return sub
            except re.error:
                continue
    if isinstance(node.get("additionalProperties"), dict):
        return node["additionalProperties"]
    for sub in node.get("allOf", []) if isinstance(node.get("allOf"), list) else []:
        found = _extra_schema(sub, root, name, depth + 1)
        if found is not None:
            return found
    return None


def _item_schema(node: Any, root: Any, index: int, depth: int = 0) -> Any:
    """The schema of item ``index`` of an array schema, or ``None``."""
    node = _resolve(node, root)
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return None
    prefix = node.get("prefixItems")
    items = node.get("items")
    if isinstance(prefix, list):
        if index < len(prefix):
            return prefix[index]
        return items if isinstance(items, dict) else None
    if isinstance(items, list):
        if index < len(items):
            return items[index]
        extra = node.get("additionalItems")
        return extra if isinstance(extra, dict) else None
    if isinstance(items, dict):
        return items
    for kw in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(kw, []) if isinstance(node.get(kw), list) else []:
            found = _item_schema(sub, root, index, depth + 1)
            if found is not None:
                return found
    return None


def in_local_schema_order(
    value: Any, schema: Any, root: Any, rank: dict[str, int], depth: int = 0
) -> Any:
    """``value`` with every object's keys in the order of the schema that describes it.

    Follows local ``$ref``, ``allOf``, the best-matching ``anyOf``/``oneOf`` branch,
    ``items``/``prefixItems`` and ``patternProperties``/``additionalProperties`` down the
    value; keys the schema does not name come last, as given. Where no schema is known the
    keys are ordered by the whole schema's :func:`property_rank`.
    """
    if depth > _MAX_DEPTH or schema is None:
        return in_schema_order(value, rank)
    if isinstance(value, dict):
        layout = _layout(schema, root, set(value), depth)
        pos = {name: i for i, name in enumerate(layout)}
        keys = sorted(enumerate(value), key=lambda p: (pos.get(p[1], len(pos)), p[0]))
        out = {}
        for _, k in keys:
            subs = layout.get(k) or []
            if len(subs) > 1:
                child: Any = {"allOf": subs}
            elif subs:
                child = subs[0]
            else:
                child = _extra_schema(schema, root, k)
            out[k] = in_local_schema_order(value[k], child, root, rank, depth + 1)
        return out
    if isinstance(value, list):
        return [
            in_local_schema_order(x, _item_schema(schema, root, i), root, rank, depth + 1)
            for i, x in enumerate(value)
        ]
    return value


# ---------------------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------------------
class CompileTimeoutError(Exception):
    """The engine gave up on its own time budget (counted as a timeout)."""


class SchemaEngine(Engine):
    """An :class:`Engine` that also compiles JSON Schemas.

    :meth:`compile_schema` returns an engine-specific handle; :meth:`start_matcher` gives
    the matcher whose first mask is part of TTFM, :meth:`new_matcher` a fresh matcher at the
    start state for the replays (the start matcher is never advanced).
    """

    #: Whether a ``SIGALRM`` handler can interrupt :meth:`compile_schema` (pure Python).
    interruptible: ClassVar[bool] = False
    schema_notes: ClassVar[str] = ""

    def compile(self, lark_text: str, workload: str) -> Any:  # pragma: no cover - unused
        raise NotImplementedError("schemas.py compiles JSON Schemas only")

    def compile_schema(self, schema_text: str, timeout_s: float) -> Any:
        raise NotImplementedError

    def start_matcher(self, handle: Any) -> Any:
        return self.new_matcher(handle)

    def new_matcher(self, handle: Any) -> Any:
        raise NotImplementedError

    def warmup(self, tokenizer: Any) -> None:
        """Compile :data:`WARMUP_SCHEMA` and replay :data:`WARMUP_INSTANCE` (untimed)."""
        handle = self.compile_schema(json.dumps(WARMUP_SCHEMA), 60.0)
        bm = self.new_bitmask()
        self.fill(self.start_matcher(handle), bm)
        m = self.new_matcher(handle)
        for tok in encode(tokenizer, serialise(WARMUP_INSTANCE)):
            self.fill(m, bm)
            if not self.consume(m, tok):
                raise RuntimeError(f"{self.name}: the warm-up instance was rejected")
        self.fill(m, bm)
        if not self.is_accepting(m):
            raise RuntimeError(f"{self.name}: the warm-up instance was not accepted")


class CorralSchemaEngine(SchemaEngine, CorralEngine):
    interruptible = True
    schema_notes = (
        "corral.compile(schema_text, vocab, cache=False, time_budget_s=timeout): schema "
        "translation, grammar and automata; lexer-state token caches are built lazily (the "
        "default), on first use inside mask calls (the first mask of TTFM "
        "builds the start state's); whitespace='compact' (no whitespace but one optional "
        "space after ',' and ':'); final_check on (jsonschema validation of the complete "
        "document inside is_accepting and the EOS decision of the last mask)"
    )

    def compile_schema(self, schema_text: str, timeout_s: float) -> Any:
        from corral.errors import CompileBudgetError

        try:
            return self._corral.compile(
                schema_text, self.vocab, cache=False, time_budget_s=timeout_s
            )
        except CompileBudgetError as e:
            raise CompileTimeoutError(str(e)) from e

    def new_matcher(self, handle: Any) -> Any:
        return handle.matcher()


class LLGuidanceSchemaEngine(SchemaEngine, LLGuidanceEngine):
    schema_notes = (
        "LLMatcher(tokenizer, LLMatcher.grammar_from_json_schema(schema_text, "
        "defaults={whitespace_flexible: False, item_separator: ',', key_separator: ':'})) "
        "(the same as grammar_from('json_schema', ...) with compact separators); llguidance "
        "builds lexer states lazily, so part of the work is in the masks; TTFM's first mask "
        "is filled on the constructed matcher, replays run on deep_copy() of it; the "
        "construction drops the GIL and cannot be interrupted by the timeout"
    )
    options: ClassVar[dict[str, Any]] = {
        "whitespace_flexible": False,
        "item_separator": ",",
        "key_separator": ":",
    }

    def compile_schema(self, schema_text: str, timeout_s: float) -> Any:
        llg = self._llg
        grammar = llg.LLMatcher.grammar_from_json_schema(schema_text, defaults=self.options)
        matcher = llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise GrammarCompileError(matcher.get_error())
        return matcher

    def start_matcher(self, handle: Any) -> Any:
        return handle

    def new_matcher(self, handle: Any) -> Any:
        return handle.deep_copy()


class XGrammarSchemaEngine(SchemaEngine, XGrammarEngine):
    strict_mode: ClassVar[bool] = False
    schema_notes = (
        "one GrammarCompiler(max_threads=1, cache_enabled=False) for all schemas (compile "
        "cache disabled, not a fresh compiler per schema); compile_json_schema(schema_text, "
        "any_whitespace=False, separators=(',', ':'), strict_mode=False: additional "
        "properties and items allowed where the schema does not forbid them, as the spec "
        "says), which includes XGrammar's adaptive token-mask cache, + "
        "GrammarMatcher(compiled); C++, cannot be interrupted by the timeout"
    )

    def compile_schema(self, schema_text: str, timeout_s: float) -> Any:
        return self.compiler.compile_json_schema(
            schema_text,
            any_whitespace=False,
            separators=(",", ":"),
            strict_mode=self.strict_mode,
        )

    def new_matcher(self, handle: Any) -> Any:
        return self._xgr.GrammarMatcher(handle)


class XGrammarStrictSchemaEngine(XGrammarSchemaEngine):
    """XGrammar with its default ``strict_mode=True``."""

    name = "xgrammar-strict"
    strict_mode = True
    schema_notes = (
        "as xgrammar, but strict_mode=True (XGrammar's default): no properties or items "
        "beyond those the schema names, even where the schema allows them (so valid "
        "instances with extra properties are rejected); a much smaller grammar"
    )


class OutlinesCoreEngine(SchemaEngine):
    """outlines-core: a regex from the schema, an ``Index`` (token-level DFA) over it."""

    name = "outlines-core"
    modules = ("outlines_core",)
    packages = ("outlines-core",)
    schema_notes = (
        "Index(build_regex_from_schema(schema_text, whitespace_pattern=''), vocabulary) "
        "+ Guide(index): the whole token-level DFA is built at compile time; the "
        "Vocabulary maps every normal token's bytes (corral.Vocabulary.from_hf's decoding; "
        "special tokens and EOS left out) to its ids; masks are written by "
        "Guide.write_mask_into into a NumPy int32 bitmask; Rust, cannot be interrupted by "
        "the timeout"
    )

    def __init__(self, tokenizer: Any, vocab_size: int, eos_id: int) -> None:
        super().__init__(tokenizer, vocab_size, eos_id)
        import outlines_core

        import corral
        from corral.automata.vocabulary import NORMAL

        self._oc = outlines_core
        cv = corral.Vocabulary.from_hf(tokenizer, vocab_size=vocab_size, eos_token_ids=[eos_id])
        by_bytes: dict[bytes, list[int]] = {}
        for i in np.flatnonzero(cv.kinds == NORMAL).tolist():
            by_bytes.setdefault(cv.token_bytes(i), []).append(i)
        self.vocabulary = outlines_core.Vocabulary(eos_id, by_bytes)
        self.words = (vocab_size + 31) // 32

    def compile_schema(self, schema_text: str, timeout_s: float) -> Any:
        oc = self._oc
        regex = oc.json_schema.build_regex_from_schema(schema_text, "")
        return oc.Index(regex, self.vocabulary)

    def new_matcher(self, handle: Any) -> Any:
        return self._oc.Guide(handle)

    def new_bitmask(self) -> Any:
        return np.zeros((1, self.words), np.int32)

    def fill(self, matcher: Any, bitmask: Any) -> None:
        matcher.write_mask_into(bitmask.ctypes.data, bitmask.size, 4)

    def bind_fill(self, matcher: Any, bitmask: Any) -> Callable[[], object]:
        return functools.partial(matcher.write_mask_into, bitmask.ctypes.data, bitmask.size, 4)

    def consume(self, matcher: Any, token: int) -> bool:
        try:
            matcher.advance(token, False)
        except ValueError:
            return False
        return True

    def is_accepting(self, matcher: Any) -> bool:
        return bool(matcher.is_finished())


SCHEMA_ENGINES: dict[str, type[SchemaEngine]] = {
    "corral": CorralSchemaEngine,
    "llguidance": LLGuidanceSchemaEngine,
    "xgrammar": XGrammarSchemaEngine,
    "xgrammar-strict": XGrammarStrictSchemaEngine,
    "outlines-core": OutlinesCoreEngine,
}


# ---------------------------------------------------------------------------------------
# Time limits
# ---------------------------------------------------------------------------------------
class DeadlineError(Exception):
    """Raised by the ``SIGALRM`` handler when a time limit has passed."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise DeadlineError()


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`DeadlineError` in the main thread once ``seconds`` have passed.

    Python code is interrupted; a Rust/C++ call finishes first, then the handler raises.
    """
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def first_line(e: BaseException) -> str:
    """``ErrorClass: first line of the message`` (at most 200 characters)."""
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:200]


def _guard_main(
    conn: Any,
    engine_name: str,
    tokenizer_path: str,
    vocab_size: int,
    eos_id: int,
    memory_gb: float,
) -> None:
    """Body of a guard process: set up one engine, then compile each schema text received
    (compile, start matcher, first mask) and answer ``(status, detail)``."""
    import resource

    if memory_gb > 0:
        limit = int(memory_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    engine = SCHEMA_ENGINES[engine_name](tokenizer, vocab_size, eos_id)
    bitmask = engine.new_bitmask()
    conn.send(("ready", ""))
    while True:
        try:
            text = conn.recv()
        except EOFError:
            return
        if text is None:
            return
        t0 = time.perf_counter()
        try:
            handle = engine.compile_schema(text, 1e9)
            engine.fill(engine.start_matcher(handle), bitmask)
            conn.send(("ok", f"{time.perf_counter() - t0:.3f} s"))
        except BaseException as e:  # pyo3's PanicException is a BaseException
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            conn.send(("error", first_line(e)))


class Guard:
    """A process that compiles each schema before the measuring process does, and is killed
    when it overruns the time limit.

    A Rust or C++ compile cannot be interrupted inside the measuring process. The engine's
    guard process (spawned, set up once, restarted after a kill) takes each schema first:
    when it does not answer within the limit, or dies (a crash, or its address-space limit
    of ``memory_gb``), the schema is a timeout (or a compile error) for that engine and the
    measuring process skips it. The guard waits idle while the measuring process runs, so
    it does not share the CPU with the timings.
    """

    def __init__(
        self,
        engine_name: str,
        tokenizer_path: Path,
        vocab_size: int,
        eos_id: int,
        memory_gb: float,
    ) -> None:
        self.args = (
            engine_name, str(tokenizer_path), vocab_size, eos_id, memory_gb
        )  # fmt: skip
        self.proc: Any = None
        self.conn: Any = None
        self.kills = 0

    def _start(self) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_guard_main, args=(child, *self.args), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(600) or self.conn.recv()[0] != "ready":
            raise RuntimeError(f"the guard process of {self.args[0]} did not start")

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
            self.conn.close()
            self.proc = self.conn = None

    def probe(self, schema_text: str, timeout_s: float) -> tuple[str, str]:
        """``("ok" | "error" | "timeout" | "crash", detail)`` for one schema."""
        if self.proc is None:
            self._start()
        self.conn.send(schema_text)
        if not self.conn.poll(timeout_s):
            self._stop()
            self.kills += 1
            return "timeout", f"over {timeout_s:g} s in the guard process (killed)"
        try:
            return tuple(self.conn.recv())  # type: ignore[return-value]
        except EOFError:
            self.proc.join()
            code = self.proc.exitcode
            self._stop()
            return "crash", f"the guard process died (exit code {code})"

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.conn.send(None)
                self.proc.join(5)
            except OSError:
                pass
            self._stop()


# ---------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------
@dataclass
class Instance:
    """A MaskBench test instance, tokenized as given and with keys in schema order."""

    valid: bool
    token_seqs: list[tuple[int, ...]]


@dataclass
class Case:
    """One sampled schema."""

    name: str
    schema_text: str
    instances: list[Instance]
    doc: Document | None  # the first valid instance, keys in schema order


@dataclass
class Result:
    """One engine on one schema."""

    engine: str
    schema: str
    status: str = "ok"  # ok | compile error | timeout | replay timeout
    error: str = ""
    compile_ns: int | None = None
    first_mask_ns: int | None = None
    doc: DocRun | None = None
    valid_rejected: list[int] = field(default_factory=list)
    invalid_accepted: list[int] = field(default_factory=list)
    n_instances: int = 0

    @property
    def ttfm_ns(self) -> int | None:
        if self.compile_ns is None or self.first_mask_ns is None:
            return None
        return self.compile_ns + self.first_mask_ns

    @property
    def passing(self) -> bool:
        return self.status == "ok" and not self.valid_rejected and not self.invalid_accepted


def load_cases(
    tokenizer: Any, maskbench_dir: Path, n: int, seed: int, max_tokens: int | None
) -> list[Case]:
    """The first ``n`` MaskBench files in shuffled order (see :func:`maskbench_file_order`)."""
    files = list(maskbench_dir.glob("*.json"))
    if not files:
        raise SystemExit(f"no MaskBench files (*.json) in {maskbench_dir}")
    cases = []
    for path in maskbench_file_order(files, "shuffle", seed)[:n]:
        spec = json.loads(path.read_text(encoding="utf-8"))
        schema = spec["schema"]
        rank = property_rank(schema)
        instances = []
        doc = None
        for t in spec.get("tests", []):
            value = t["data"]
            local = serialise(in_local_schema_order(value, schema, schema, rank))
            texts = dict.fromkeys(
                [local, serialise(value), serialise(in_schema_order(value, rank))]
            )
            instances.append(Instance(bool(t["valid"]), [encode(tokenizer, x) for x in texts]))
            if doc is None and t["valid"] is True:
                text = local
                tokens = encode(tokenizer, text)
                if max_tokens is None or len(tokens) <= max_tokens:
                    doc = Document(path.stem, text, tokens)
        cases.append(Case(path.stem, json.dumps(schema), instances, doc))
    return cases


def accepts(engine: SchemaEngine, handle: Any, tokens: Sequence[int]) -> bool:
    """Whether a fresh matcher consumes every token and is accepting at the end."""
    m = engine.new_matcher(handle)
    consume = engine.consume
    return all(consume(m, t) for t in tokens) and engine.is_accepting(m)


def run_case(
    engine: SchemaEngine,
    case: Case,
    timeout_s: float,
    replay_timeout_s: float,
    guard: Guard | None = None,
    *,
    replay: bool = True,
) -> Result:
    """TTFM, TBM and correctness of one engine on one schema (``guard`` first, if given;
    ``replay=False``: TTFM only)."""
    res = Result(engine.name, case.name, n_instances=len(case.instances))
    if guard is not None:
        status, detail = guard.probe(case.schema_text, timeout_s)
        if status in ("timeout", "crash"):
            res.status = "timeout" if status == "timeout" else "compile error"
            res.error = detail if status == "timeout" else f"GuardCrash: {detail}"
            return res
    pc = time.perf_counter_ns
    bitmask = engine.new_bitmask()
    gc.collect()
    t0 = t1 = pc()
    try:
        with deadline(timeout_s):
            t0 = pc()
            handle = engine.compile_schema(case.schema_text, timeout_s)
            t1 = pc()
            matcher = engine.start_matcher(handle)
            engine.fill(matcher, bitmask)
            t2 = pc()
    except (DeadlineError, CompileTimeoutError) as e:
        res.status = "timeout"
        res.error = f"after {(pc() - t0) / 1e9:.2f} s" + (f": {first_line(e)}" if str(e) else "")
        return res
    except BaseException as e:  # pyo3's PanicException is a BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        res.status, res.error = "compile error", first_line(e)
        return res
    res.compile_ns, res.first_mask_ns = t1 - t0, t2 - t1
    if t2 - t0 > timeout_s * 1e9:  # an uninterruptible call that returned late
        res.status = "timeout"
        res.error = f"returned after {(t2 - t0) / 1e9:.1f} s (not interruptible)"
        return res
    del matcher
    if not replay:
        return res
    try:
        with deadline(replay_timeout_s):
            if case.doc is not None:
                gc.collect()
                res.doc = run_document(
                    engine, functools.partial(engine.new_matcher, handle), case.doc
                )
            for i, inst in enumerate(case.instances):
                ok = any(accepts(engine, handle, toks) for toks in inst.token_seqs)
                if inst.valid and not ok:
                    res.valid_rejected.append(i)
                elif ok and not inst.valid:
                    res.invalid_accepted.append(i)
    except DeadlineError:
        res.status, res.error = "replay timeout", f"replay over {replay_timeout_s:.0f} s"
    except Exception as e:
        res.status, res.error = "replay error", first_line(e)
    return res


# ---------------------------------------------------------------------------------------
# Statistics and report
# ---------------------------------------------------------------------------------------
TTFM_Q = (50, 90, 99)
TBM_Q = (50, 75, 90, 99, 99.9)


def quantiles(values: Sequence[float], qs: Sequence[float]) -> dict[str, float] | None:
    """``{"n", "pQ"..., "max", "mean"}`` of ``values`` (``None`` when empty)."""
    if len(values) == 0:
        return None
    a = np.asarray(values, dtype=np.float64)
    out: dict[str, float] = {"n": len(a)}
    for q, v in zip(qs, np.percentile(a, qs), strict=True):
        out[f"p{q:g}"] = float(v)
    out["max"] = float(a.max())
    out["mean"] = float(a.mean())
    return out


def engine_summary(results: list[Result], n_cases: int) -> dict[str, Any]:
    """Aggregate numbers of one engine over all sampled schemas."""
    ttfm_ms = [r.ttfm_ns / 1e6 for r in results if r.ttfm_ns is not None and r.status != "timeout"]
    docs = [r.doc for r in results if r.doc is not None]
    tbm_us = [t / 1e3 for d in docs if d.accepted for t in d.fill_ns]
    statuses = Counter(r.status for r in results)
    failures = Counter(r.error for r in results if r.status == "compile error")
    return {
        "schemas": n_cases,
        "compiled": sum(r.ttfm_ns is not None and r.status != "timeout" for r in results),
        "ttfm_ms": quantiles(ttfm_ms, TTFM_Q),
        "compile_ms": quantiles(
            [r.compile_ns / 1e6 for r in results if r.compile_ns is not None], TTFM_Q
        ),
        "first_mask_ms": quantiles(
            [r.first_mask_ns / 1e6 for r in results if r.first_mask_ns is not None], TTFM_Q
        ),
        "tbm_us": quantiles(tbm_us, TBM_Q),
        "compile_failures": statuses["compile error"],
        "timeouts": statuses["timeout"],
        "replay_problems": statuses["replay timeout"] + statuses["replay error"],
        "passing_schemas": sum(r.passing for r in results),
        "valid_rejected": sum(len(r.valid_rejected) for r in results),
        "invalid_accepted": sum(len(r.invalid_accepted) for r in results),
        "schemas_with_valid_rejected": sum(bool(r.valid_rejected) for r in results),
        "schemas_with_invalid_accepted": sum(bool(r.invalid_accepted) for r in results),
        "docs": len(docs),
        "docs_accepted": sum(d.accepted for d in docs),
        "docs_rejected": [
            {"schema": d.doc_id, "tokens": d.n_tokens, "reason": d.reason}
            for d in docs
            if not d.accepted
        ],
        "consumed_tokens_not_in_mask": sum(d.token_not_in_mask for d in docs if d.accepted),
        "failure_kinds": dict(failures.most_common()),
    }


def markdown_report(
    summaries: dict[str, dict[str, Any]],
    results: dict[str, list[Result]],
    cases: list[Case],
    env: dict[str, Any],
    args: argparse.Namespace,
) -> str:
    """The human-readable report (Markdown)."""
    pk = env["packages"]
    versions = ", ".join(f"{k} {v}" for k, v in pk.items() if v is not None)
    n_docs = sum(c.doc is not None for c in cases)
    n_inst = sum(len(c.instances) for c in cases)
    lines = [
        f"# JSON Schema benchmark (MaskBench): {len(cases)} schemas (seed {args.seed}), "
        f"tokenizer {env['tokenizer']} (V={env['vocab_size']:,})",
        "",
        f"{env['cpu_model']}, Python {env['python']}, {versions}; single thread; "
        f"{env['date']}; load average {env['loadavg_start'][0]:.1f} -> "
        f"{env['loadavg_end'][0]:.1f}",
        "",
        f"TTFM (compile + first mask, no cache) in ms over the schemas each engine compiled "
        f"within {args.timeout:g} s; TBM (mask fill) in µs over every position of the "
        f"accepted documents ({n_docs} schemas have a valid instance; final EOS mask "
        f"included); correctness over {n_inst} test instances."
        + (" TBM and correctness not measured (--ttfm-only)." if args.ttfm_only else ""),
        "",
        "| engine | TTFM p50 | p90 | p99 | max | TBM p50 | p75 | p90 | p99 | p99.9 | max "
        "| compile failures | timeouts | passing schemas | invalid accepted | valid rejected "
        "| docs rejected |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, s in summaries.items():
        t = s["ttfm_ms"] or {}
        b = s["tbm_us"] or {}
        lines.append(
            f"| {name} | {fmt(t.get('p50'), 2)} | {fmt(t.get('p90'), 2)} "
            f"| {fmt(t.get('p99'), 2)} | {fmt(t.get('max'), 2)} "
            f"| {fmt(b.get('p50'))} | {fmt(b.get('p75'))} | {fmt(b.get('p90'))} "
            f"| {fmt(b.get('p99'))} | {fmt(b.get('p99.9'))} | {fmt(b.get('max'))} "
            f"| {s['compile_failures']} | {s['timeouts']} "
            + (
                "| — | — | — | — |"
                if args.ttfm_only
                else f"| {s['passing_schemas']}/{s['schemas']} | {s['invalid_accepted']} "
                f"| {s['valid_rejected']} | {len(s['docs_rejected'])}/{s['docs']} |"
            )
        )
    # TTFM on the schemas every engine compiled: the like-for-like comparison.
    common = [
        c.name
        for i, c in enumerate(cases)
        if all(rs[i].ttfm_ns is not None and rs[i].status != "timeout" for rs in results.values())
    ]
    if len(results) > 1 and common:
        lines += [
            "",
            f"TTFM (ms) on the {len(common)} schemas every engine compiled:",
            "",
            "| engine | p50 | p90 | p99 | max | mean |",
            "|---|--:|--:|--:|--:|--:|",
        ]
        names = set(common)
        for name, rs in results.items():
            ttfm = [r.ttfm_ns / 1e6 for r in rs if r.schema in names and r.ttfm_ns is not None]
            q = quantiles(ttfm, TTFM_Q) or {}
            lines.append(
                f"| {name} | {fmt(q.get('p50'), 2)} | {fmt(q.get('p90'), 2)} "
                f"| {fmt(q.get('p99'), 2)} | {fmt(q.get('max'), 2)} | {fmt(q.get('mean'), 2)} |"
            )
    lines += ["", "What each engine's compile (TTFM) runs:", ""]
    lines += [f"- {name}: {SCHEMA_ENGINES[name].schema_notes}" for name in summaries]
    notes: list[str] = []
    for name, s in summaries.items():
        for err, k in list(s["failure_kinds"].items())[:8]:
            notes.append(f"- {name}: compile error x{k}: {err}")
        for r in results[name]:
            if r.status in ("timeout", "replay timeout", "replay error"):
                notes.append(f"- {name} / {r.schema}: {r.status}: {r.error}")
        for d in s["docs_rejected"][:10]:
            notes.append(
                f"- {name} / {d['schema']}: document rejected ({d['tokens']} tokens): {d['reason']}"
            )
        if s["consumed_tokens_not_in_mask"]:
            notes.append(
                f"- {name}: {s['consumed_tokens_not_in_mask']} consumed tokens were not set "
                "in the preceding mask"
            )
    if notes:
        lines += ["", "Failures, timeouts and rejections:", "", *notes]
    return "\n".join(lines)


def result_json(r: Result) -> dict[str, Any]:
    d = r.doc
    return {
        "schema": r.schema,
        "status": r.status,
        "error": r.error,
        "ttfm_ms": None if r.ttfm_ns is None else r.ttfm_ns / 1e6,
        "compile_ms": None if r.compile_ns is None else r.compile_ns / 1e6,
        "first_mask_ms": None if r.first_mask_ns is None else r.first_mask_ns / 1e6,
        "doc": None
        if d is None
        else {
            "tokens": d.n_tokens,
            "accepted": d.accepted,
            "reason": d.reason,
            "mask_total_us": sum(d.fill_ns) / 1e3,
            "mask_max_us": max(d.fill_ns) / 1e3 if d.fill_ns else None,
        },
        "instances": r.n_instances,
        "valid_rejected": r.valid_rejected,
        "invalid_accepted": r.invalid_accepted,
        "passing": r.passing,
    }


def environment(tokenizer_name: str, vocab_size: int) -> dict[str, Any]:
    """Machine, interpreter and package versions (``run.environment``, plus outlines-core)."""
    return run_environment(tokenizer_name, vocab_size, (*PACKAGES, "outlines-core"))


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="JSON Schema benchmark on MaskBench: TTFM, TBM and correctness per engine.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--schemas", type=int, default=200, help="number of MaskBench files")
    ap.add_argument("--seed", type=int, default=0, help="shuffle seed of the sorted file list")
    ap.add_argument("--timeout", type=float, default=30.0, help="TTFM limit per schema (s)")
    ap.add_argument(
        "--replay-timeout",
        type=float,
        default=120.0,
        help="limit per schema and engine for the TBM and correctness replays (s)",
    )
    ap.add_argument("--max-tokens", type=int, default=None, help="leave out longer TBM documents")
    ap.add_argument(
        "--ttfm-only",
        action="store_true",
        help="measure TTFM only (no TBM or correctness replays: minutes instead of hours)",
    )
    ap.add_argument(
        "--engines",
        default=",".join(SCHEMA_ENGINES),
        help=f"comma-separated, from: {', '.join(SCHEMA_ENGINES)}",
    )
    ap.add_argument(
        "--guard",
        default="auto",
        help="engines whose compile first runs in a guard process, killed at the timeout: "
        "'auto' (those that cannot be interrupted in-process), 'none', or a list",
    )
    ap.add_argument(
        "--guard-memory-gb",
        type=float,
        default=16.0,
        help="address-space limit of each guard process (0: none)",
    )
    ap.add_argument("--tokenizer", default="llama3", help="name under --tokenizers-dir, or a path")
    ap.add_argument("--tokenizers-dir", type=Path, default=DEFAULT_TOKENIZERS_DIR)
    ap.add_argument("--maskbench", type=Path, default=DEFAULT_MASKBENCH_DIR)
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "results")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    log = functools.partial(print, file=sys.stderr, flush=True)
    engine_names = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in engine_names:
        if e not in SCHEMA_ENGINES:
            raise SystemExit(f"unknown engine {e!r}; known: {', '.join(SCHEMA_ENGINES)}")
    tok_label, tok_path = resolve_tokenizer(args.tokenizer, args.tokenizers_dir)

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tok_path))
    vocab_size = len(tokenizer)
    eos_id = tokenizer.eos_token_id
    if eos_id is None:
        raise SystemExit(f"tokenizer {tok_label} has no eos_token_id")
    cases = load_cases(tokenizer, args.maskbench, args.schemas, args.seed, args.max_tokens)
    log(
        f"{len(cases)} schemas, {sum(c.doc is not None for c in cases)} TBM documents "
        f"({sum(len(c.doc.tokens) for c in cases if c.doc)} tokens), "
        f"{sum(len(c.instances) for c in cases)} test instances"
    )

    engines: dict[str, SchemaEngine] = {}
    setup: dict[str, dict[str, float]] = {}
    for name in engine_names:
        cls = SCHEMA_ENGINES[name]
        missing = cls.missing_modules()
        if missing:
            log(f"skipping engine {name}: not installed ({', '.join(missing)})")
            continue
        t0 = time.perf_counter()
        cls.import_modules()
        t1 = time.perf_counter()
        engine = cls(tokenizer, vocab_size, eos_id)
        t2 = time.perf_counter()
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
        engine.warmup(tokenizer)
        setup[name] = {
            "import_ms": (t1 - t0) * 1e3,
            "setup_ms": (t2 - t1) * 1e3,
            "warmup_ms": (time.perf_counter() - t2) * 1e3,
        }
        log(f"{name}: setup {setup[name]['setup_ms']:.0f} ms, warm-up done")
        engines[name] = engine
    if not engines:
        raise SystemExit("no engine available")

    if args.guard == "auto":
        guarded = [n for n in engines if not SCHEMA_ENGINES[n].interruptible]
    elif args.guard == "none":
        guarded = []
    else:
        guarded = [n.strip() for n in args.guard.split(",") if n.strip() in engines]
    guards = {n: Guard(n, tok_path, vocab_size, eos_id, args.guard_memory_gb) for n in guarded}
    if guards:
        log(f"guard processes for: {', '.join(guards)}")

    loadavg_start = os.getloadavg()
    results: dict[str, list[Result]] = {name: [] for name in engines}
    t_start = time.perf_counter()
    for i, case in enumerate(cases):
        parts = []
        for name, engine in engines.items():
            r = run_case(
                engine,
                case,
                args.timeout,
                args.replay_timeout,
                guards.get(name),
                replay=not args.ttfm_only,
            )
            results[name].append(r)
            ttfm = "-" if r.ttfm_ns is None else f"{r.ttfm_ns / 1e6:.1f}ms"
            parts.append(f"{name} {r.status if r.status != 'ok' else ttfm}")
        log(
            f"[{i + 1}/{len(cases)} {time.perf_counter() - t_start:.0f}s] {case.name}: "
            + ", ".join(parts)
        )
    loadavg_end = os.getloadavg()
    for g in guards.values():
        g.close()

    summaries = {name: engine_summary(rs, len(cases)) for name, rs in results.items()}
    now = datetime.datetime.now()
    env = environment(tok_label, vocab_size)
    env.update(
        date=now.isoformat(timespec="seconds"),
        loadavg_start=loadavg_start,
        loadavg_end=loadavg_end,
        command=" ".join(["benchmarks/schemas.py", *(argv if argv is not None else sys.argv[1:])]),
    )
    report = markdown_report(summaries, results, cases, env, args)
    print(report)

    out = {
        "environment": env,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "engine_notes": {n: SCHEMA_ENGINES[n].schema_notes for n in engines},
        "timeouts_interruptible": {n: SCHEMA_ENGINES[n].interruptible for n in engines},
        "schemas": [
            {
                "name": c.name,
                "instances": len(c.instances),
                "doc_tokens": None if c.doc is None else len(c.doc.tokens),
            }
            for c in cases
        ],
        "setup": setup,
        "guarded_engines": {n: {"kills": g.kills} for n, g in guards.items()},
        "summary": summaries,
        "results": {n: [result_json(r) for r in rs] for n, rs in results.items()},
        "report_markdown": report,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"schemas-{tok_label}-{now.strftime('%Y-%m-%dT%H%M%S')}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=1, default=float), encoding="utf-8")
    tmp.replace(path)
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
