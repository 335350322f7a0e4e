"""Structural tags for tool calling: corral, XGrammar and llguidance side by side.

Usage (from the repository root)::

    python benchmarks/structural.py --tokenizer llama3 [--tools 10,100,128,500] [--rounds 3]
        [--specs tools,reasoning] [--engines corral,xgrammar,llguidance]
        [--cell-timeout 180] [--out results.json]

**The spec.** Qwen/Hermes-style tool calling: free text in which the trigger ``<tool_call>``
opens one of N tags, one per tool, ``<tool_call>\\n{"name": "TOOL", "arguments": `` +
the tool's parameter schema (JSON) + ``}\\n</tool_call>``, after which free text resumes
(XGrammar's ``triggered_tags``). ``tools``: that alone; ``reasoning``:
``sequence[tag("<think>", any_text, "</think>"), triggered_tags]``. corral and XGrammar get
the same structural-tag JSON (``{"type": "structural_tag", "format": ...}``, a ``dict``);
llguidance gets its own form of it, :meth:`llguidance.StructTag.to_grammar` (Lark with one
lazy ``TAG_TEXT "<tool_call>"`` lexeme per tool and ``%json`` bodies; ``assume_special=False``,
so the trigger is text, as in the other two), with ``start: "<think>" think tools`` and
``think[lazy]: /(.|\\n)*/ "</think>"`` in front for ``reasoning``.

**The tools.** Real function schemas from MaskBench (``--maskbench``): the files whose
names start with ``BFCL_`` hold ``{"type": "object", "properties": {FUNCTION: PARAMS}}``
(or an ``anyOf`` of those); each FUNCTION whose PARAMS is an object with properties is a
tool (the first occurrence of a name wins); the ``MCPspec---*`` files whose root (after its
``$ref``) is an object with properties are tools named after the file, with the whole schema
(and its ``definitions``) as parameters. Candidates are sorted by file name and shuffled
with ``random.Random(--seed)`` (so every N mixes BFCL categories and MCP); each engine then
checks each candidate alone (corral: ``frontends.from_structural_tag``; XGrammar:
``Grammar.from_structural_tag``; llguidance: ``LLMatcher.validate_grammar``) and a schema
that any engine refuses is left out of every engine's tool list, so that all engines compile
the same spec. The N-tool spec holds the first N tools of that list; the refusals of each
engine are reported.

**Compile, cold grammar cache** (one measurement per engine, spec and N in every round): in
a worker process per engine, set up once (tokenizer preprocessing: corral's
``Vocabulary`` and its token trie, XGrammar's ``TokenizerInfo``, llguidance's
``LLTokenizer``) and warmed up by compiling a different small structural tag and running
text through it (code loading and Numba JIT). Then, before every measurement:

* corral: ``corral.compile(spec, vocab, cache=False)`` (no compiled-grammar or
  built-grammar cache), with the vocabulary's shared lexer-state token-cache store
  (``vocab.state_cache``, in memory) emptied, and the process-wide memos of automata built
  from schema parts (``shared_automata`` builders, the string-body cache) cleared; no
  ``cache_dir`` (nothing read from or written to disk). ``precompute`` is left at its
  default, so token caches are built lazily, inside mask calls;
* XGrammar: a new ``GrammarCompiler(tokenizer_info, max_threads=1, cache_enabled=False)``
  (made outside the timing), then ``compile_structural_tag(spec)``, which builds the
  adaptive token-mask cache of every grammar state;
* llguidance: ``grammar_from("lark", text)`` + ``LLMatcher(tokenizer, grammar)``; it keeps
  no grammar cache between matchers, and builds lexer states lazily, inside mask calls.

Reported: compile time, and time to first mask (TTFM = compile + new matcher + first mask
fill), wall (``perf_counter_ns``) and CPU (``process_time_ns`` of the worker process).

**Per-token masks.** The realistic output (see :func:`build_output`): for ``reasoning`` a
``<think>`` block of about 100 tokens, then about 200 tokens of free text, one tool call with
valid arguments (a MaskBench test instance of one of the first 10 tools, keys in schema
order, ``json.dumps`` separators), and about 50 more tokens of free text, tokenized at once
with the tokenizer. Right after the TTFM measurement, the output is replayed token by token
on the same matcher (replay 1: the first mask is the TTFM one); then on a fresh matcher of
the same compiled grammar (replay 2: lazily built caches, and corral's mask cache, warm).
Before each token only the engine's mask fill is timed (corral ``Matcher.fill_bitmask``,
XGrammar ``GrammarMatcher.fill_next_token_bitmask``, llguidance
``llguidance.numpy.fill_next_token_bitmask``, each into a preallocated bitmask), then the
token's bit must be set (else the engine rejected the output there) and it is consumed; the
final mask must allow EOS. A position is *constrained* when its token starts inside
``<think>`` or inside a tool call after the trigger, else *free* (think text, free text, the
trigger and ``</think>``, the final mask). Timings are pooled over the rounds.

The correctness table also compares each engine's mask sizes with corral's (token ids below
the vocabulary size). The engines do not mean the same language everywhere; as seen with
llama3 on 2026-11-26: in free text XGrammar also allows special tokens and lone UTF-8
continuation-byte tokens (corral and llguidance: UTF-8 text, no special tokens); inside the
JSON, XGrammar's and llguidance's structural-tag JSON allows any whitespace (newlines, runs
of spaces) where corral's default ``whitespace="compact"`` allows one optional space after
``,`` and ``:``; and llguidance allows only the canonical tokenization of forced text (after
the trigger: ``{"`` but not ``{``).

Every engine runs in its own worker process, one job at a time (the others wait idle), and
engines alternate within each round (the engine order rotates every round). A job that
overruns ``--cell-timeout`` is killed with its worker (a Rust/C++ call cannot be interrupted
otherwise) and reported as a timeout; that cell is skipped in later rounds.
"""

from __future__ import annotations

import single_thread  # noqa: F401  (first: one thread for every engine)

# isort: split
import argparse
import datetime
import gc
import json
import os
import random
import resource
import sys
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from engines import CorralEngine, LLGuidanceEngine, XGrammarEngine  # noqa: E402
from run import (  # noqa: E402
    DEFAULT_TOKENIZERS_DIR,
    bit_is_set,
    environment,
    fmt,
    popcount,
    resolve_tokenizer,
    summarize_us,
)
from schemas import _resolve, in_local_schema_order  # noqa: E402
from support.schema_runner import property_rank  # noqa: E402  (tests/ is on sys.path)
from workloads import DEFAULT_MASKBENCH_DIR  # noqa: E402

TRIGGER = "<tool_call>"
TAG_END = "}\n</tool_call>"
THINK_BEGIN, THINK_END = "<think>", "</think>"
ENGINE_ORDER = ("corral", "xgrammar", "llguidance")
SPECS = ("tools", "reasoning")
FREE, CONSTRAINED = 0, 1


def tag_begin(name: str) -> str:
    """The begin string of a tool's tag (Qwen/Hermes style)."""
    return f'{TRIGGER}\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": '


# ---------------------------------------------------------------------------------------
# The realistic output
# ---------------------------------------------------------------------------------------
THINK_TEXT = (
    "The user wants to know whether the new configuration will work before the release on "
    "Friday. I should not guess: the numbers they quoted (3 nodes, 12 GB each, about 40% "
    "headroom) look plausible, but the registry value and the schema settings decide it. "
    "The tools I have can look this up directly, so the right move is to call one of them "
    "with the exact arguments, then summarise the result in plain words. I will keep the "
    "answer short and mention what to check if it fails."
)
PROSE_BEFORE = (
    "Thanks for the detailed description — that helps a lot. Here is how I would approach "
    "it before you roll the change out on Friday.\n\n"
    "1. **Check the current state.** The settings you listed (3 nodes, 12 GB of memory each, "
    "roughly 40% headroom under peak load) are reasonable for a service of this size, but "
    "the behaviour you saw last week suggests that one of the defaults is not what you "
    "expect. It is worth confirming the live values instead of the ones in the deployment "
    "file, because they often drift apart after manual fixes.\n"
    "2. **Compare with the staging environment.** If staging behaves differently, the "
    "difference is usually in a single flag or a schema setting, not in the hardware.\n"
    "3. **Only then change the configuration**, one setting at a time, and keep the old "
    "values somewhere safe so that you can roll back in minutes (not hours) if the error "
    "rate goes up.\n\n"
    "Since I can query the system directly, let me look up the relevant value now instead "
    "of guessing. This takes a second."
)
PROSE_AFTER = (
    "I have sent the request with the values above. Once the result comes back I will "
    "compare it with what you expected and tell you whether the change is safe to deploy, "
    "and which setting to adjust first if it is not."
)


@dataclass
class Output:
    """The realistic output of one spec: its text, tokens and each position's class."""

    text: str
    tokens: list[int]
    classes: list[int]  # per mask position (len(tokens) + 1, the final mask last)
    segments: list[tuple[str, int]]


def build_output(tokenizer: Any, reasoning: bool, call: Tool) -> Output:
    """The output text, tokenized at once, with the class of every mask position."""
    args = json.dumps(call.args, ensure_ascii=False)
    segments: list[tuple[str, int]] = []
    if reasoning:
        segments += [
            (THINK_BEGIN, CONSTRAINED),
            ("\n" + THINK_TEXT + "\n", FREE),
            (THINK_END, FREE),
            ("\n\n", FREE),
        ]
    segments += [
        (PROSE_BEFORE, FREE),
        (TRIGGER, FREE),
        (tag_begin(call.name)[len(TRIGGER) :] + args + TAG_END, CONSTRAINED),
        ("\n" + PROSE_AFTER, FREE),
    ]
    text = "".join(s for s, _ in segments)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    tokens = [int(t) for t in enc["input_ids"]]
    char_class = np.zeros(len(text), np.int8)
    pos = 0
    for s, c in segments:
        char_class[pos : pos + len(s)] = c
        pos += len(s)
    classes = [int(char_class[min(start, len(text) - 1)]) for start, _ in enc["offset_mapping"]]
    classes.append(FREE)  # the final (EOS) mask: end of free text
    if tokenizer.decode(tokens) != text:
        raise SystemExit("the realistic output does not round-trip through the tokenizer")
    return Output(text, tokens, classes, segments)


# ---------------------------------------------------------------------------------------
# Tools from MaskBench
# ---------------------------------------------------------------------------------------
@dataclass
class Tool:
    """One tool: name, parameter schema, a valid arguments instance (or None), source."""

    name: str
    schema: dict[str, Any]
    args: Any
    source: str


def _is_object_with_properties(schema: Any) -> bool:
    s = schema
    ref = s.get("$ref") if isinstance(s, dict) else None
    if isinstance(ref, str) and ref.startswith("#/"):  # a root $ref (the MCP files)
        s = _resolve({"$ref": ref}, schema)
    return (
        isinstance(s, dict)
        and s.get("type", "object") == "object"
        and isinstance(s.get("properties"), dict)
        and bool(s["properties"])
    )


def load_tools(maskbench_dir: Path, seed: int) -> tuple[list[Tool], dict[str, int]]:
    """Every candidate tool (see the module docs), shuffled; and counts of what was left out."""
    files = sorted(
        p
        for p in maskbench_dir.glob("*.json")
        if p.name.startswith("BFCL_") or "mcp" in p.name.lower()
    )
    if not files:
        raise SystemExit(f"no BFCL_/MCP MaskBench files in {maskbench_dir}")
    tools: dict[str, Tool] = {}
    skipped = {"duplicate name": 0, "not an object with properties": 0}
    for path in files:
        spec = json.loads(path.read_text(encoding="utf-8"))
        schema = spec["schema"]
        valid = [t["data"] for t in spec.get("tests", []) if t.get("valid") is True]
        found: list[tuple[str, Any, Any]] = []  # (name, params, args)
        if path.name.startswith("BFCL_"):
            branches = schema.get("anyOf", [schema]) if isinstance(schema, dict) else []
            for b in branches:
                props = b.get("properties") if isinstance(b, dict) else None
                if not (isinstance(props, dict) and len(props) == 1):
                    skipped["not an object with properties"] += 1
                    continue
                ((name, params),) = props.items()
                args = next(
                    (d[name] for d in valid if isinstance(d, dict) and set(d) == {name}), None
                )
                found.append((name, params, args))
        else:
            name = path.stem.split("---")[-1]
            found.append((name, schema, valid[0] if valid else None))
        for name, params, args in found:
            if not _is_object_with_properties(params):
                skipped["not an object with properties"] += 1
                continue
            if name in tools:
                skipped["duplicate name"] += 1
                continue
            if args is not None:
                args = in_local_schema_order(args, params, params, property_rank(params))
            tools[name] = Tool(name, params, args, path.name)
    out = list(tools.values())
    random.Random(seed).shuffle(out)
    return out, skipped


# ---------------------------------------------------------------------------------------
# Specs
# ---------------------------------------------------------------------------------------
def spec_json(tools: Sequence[dict[str, Any]], reasoning: bool) -> dict[str, Any]:
    """The structural tag (XGrammar's JSON form), as corral's Python API writes it."""
    from corral.grammar import structural as st

    fmt_: Any = st.TriggeredTags(
        triggers=[TRIGGER],
        tags=[st.Tag(tag_begin(t["name"]), st.JSONSchema(t["schema"]), TAG_END) for t in tools],
    )
    if reasoning:
        fmt_ = st.Tag(THINK_BEGIN, st.AnyText(), THINK_END) + fmt_
    return st.StructuralTag(fmt_).to_json()


def llg_lark(tools: Sequence[dict[str, Any]], reasoning: bool) -> str:
    """llguidance's form of the spec: ``StructTag.to_grammar`` (+ the think block)."""
    import llguidance

    tags = [
        llguidance.StructTag(
            trigger=TRIGGER, begin=tag_begin(t["name"]), grammar=t["schema"], end=TAG_END
        )
        for t in tools
    ]
    lark = llguidance.StructTag.to_grammar(tags, assume_special=False)
    if reasoning:
        head = "%llguidance {}\n"
        assert lark.startswith(head + "start: "), lark[:80]
        think = (
            f"start: {json.dumps(THINK_BEGIN)} think tools\n"
            f"think[lazy]: /(.|\\n)*/ {json.dumps(THINK_END)}\n"
        )
        lark = head + think + "tools: " + lark[len(head + "start: ") :]
    return lark


# ---------------------------------------------------------------------------------------
# Engines (inside the worker processes)
# ---------------------------------------------------------------------------------------
WARMUP_TOOLS = [
    {
        "name": "warmup_lookup",
        "schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "limit": {"type": "integer", "minimum": 1},
                "mode": {"enum": ["fast", "full"]},
            },
            "required": ["query"],
        },
    },
    {
        "name": "warmup_sum",
        "schema": {
            "type": "object",
            "properties": {"values": {"type": "array", "items": {"type": "number"}}},
        },
    },
]
WARMUP_TEXT = (
    "<think>\nA quick check.\n</think>\n\nLet me see.<tool_call>\n"
    '{"name": "warmup_lookup", "arguments": {"query": "abc", "limit": 3, "mode": "full"}}\n'
    "</tool_call>\nDone."
)


class StructuralMixin:
    """What a worker needs from an engine on top of :class:`engines.Engine`."""

    name: str
    #: what "cold" means for this engine (for the report)
    cold: str = ""

    def reset_cold(self) -> dict[str, Any]:
        """Drop grammar-derived state kept between compiles (untimed); what was dropped."""
        return {}

    def compile_spec(self, tools: Sequence[dict[str, Any]], reasoning: bool, prepared: Any) -> Any:
        raise NotImplementedError

    def prepare(self, tools: Sequence[dict[str, Any]], reasoning: bool) -> Any:
        """The engine's input for the spec, built outside the timing."""
        return spec_json(tools, reasoning)

    def new_matcher(self, handle: Any) -> Any:
        raise NotImplementedError

    def probe(self, tool: dict[str, Any]) -> str | None:
        """``None`` when the engine takes a one-tool spec of ``tool``, else why not."""
        raise NotImplementedError

    def describe(self, handle: Any) -> dict[str, Any]:
        return {}


class CorralST(StructuralMixin, CorralEngine):
    cold = (
        "corral.compile(spec, vocab, cache=False) (no compiled/built-grammar cache, no "
        "cache_dir: nothing on disk); before each measurement vocab.state_cache (the "
        "in-memory per-vocabulary store of lexer-state token caches shared between "
        "grammars) is emptied and the process-wide automata memos (shared_automata "
        "builders, strings._BODY_CACHE) are cleared; kept: the vocabulary and its token "
        "trie (tokenizer preprocessing), Numba's compiled kernels, constant tables "
        "(Unicode classes); precompute default (lazy token caches)"
    )

    _MEMOS = (
        ("corral.grammar.json_schema.grammar_builder", "_punct_dfa"),
        ("corral.grammar.json_schema.strings", "counted_body"),
        ("corral.grammar.json_schema.strings", "plain_string"),
        ("corral.grammar.json_schema.strings", "_BODY_CACHE"),
        ("corral.grammar.json_schema.numbers", "_range_dfa"),
        ("corral.grammar.json_schema.numbers", "_json_number_dfa"),
    )

    def reset_cold(self) -> dict[str, Any]:
        import importlib

        store = self.vocab.state_cache
        dropped: dict[str, Any] = {"state_cache_entries": len(store)}
        store.clear()
        for mod, attr in self._MEMOS:
            obj = getattr(importlib.import_module(mod), attr, None)
            clear = getattr(obj, "cache_clear", None) or getattr(obj, "clear", None)
            if clear is not None:
                clear()
                dropped[attr] = True
            else:
                dropped[attr] = "missing"
        return dropped

    def compile_spec(self, tools: Sequence[dict[str, Any]], reasoning: bool, prepared: Any) -> Any:
        return self._corral.compile(prepared, self.vocab, cache=False)

    def new_matcher(self, handle: Any) -> Any:
        return handle.matcher()

    def probe(self, tool: dict[str, Any]) -> str | None:
        from corral.grammar.frontends import from_structural_tag

        try:
            from_structural_tag(spec_json([tool], False))
        except self._corral.CorralError as e:
            return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
        return None

    def describe(self, handle: Any) -> dict[str, Any]:
        s = handle.cache_stats()
        return {
            "lexer_states": int(s["lexer_states"]),
            "cached_states_after_replays": int(s.get("cached_states", -1)),
            "rules": len(handle.grammar.rules),
            "terminals": len(handle.grammar.terminals),
        }


class XGrammarST(StructuralMixin, XGrammarEngine):
    cold = (
        "a new GrammarCompiler(tokenizer_info, max_threads=1, cache_enabled=False) per "
        "measurement (made outside the timing); compile_structural_tag builds the whole "
        "adaptive token-mask cache; kept: TokenizerInfo (tokenizer preprocessing)"
    )

    def prepare(self, tools: Sequence[dict[str, Any]], reasoning: bool) -> Any:
        spec = spec_json(tools, reasoning)
        compiler = self._xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        return compiler, spec

    def compile_spec(self, tools: Sequence[dict[str, Any]], reasoning: bool, prepared: Any) -> Any:
        compiler, spec = prepared
        return compiler.compile_structural_tag(spec)

    def new_matcher(self, handle: Any) -> Any:
        return self._xgr.GrammarMatcher(handle)

    def probe(self, tool: dict[str, Any]) -> str | None:
        try:
            self._xgr.Grammar.from_structural_tag(json.dumps(spec_json([tool], False)))
        except Exception as e:  # InvalidStructuralTagError, RuntimeError, ValueError...
            return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
        return None

    def describe(self, handle: Any) -> dict[str, Any]:
        try:
            return {"memory_size_bytes": int(handle.memory_size_bytes)}
        except Exception:
            return {}


class LLGuidanceST(StructuralMixin, LLGuidanceEngine):
    cold = (
        "grammar_from('lark', StructTag.to_grammar(...)) + LLMatcher(tokenizer, grammar) "
        "per measurement; llguidance keeps no grammar cache between matchers and builds "
        "lexer states lazily inside mask calls; kept: the LLTokenizer (tokenizer "
        "preprocessing); the matchers of the replays are deep_copy()s of the compiled one"
    )

    def prepare(self, tools: Sequence[dict[str, Any]], reasoning: bool) -> Any:
        return llg_lark(tools, reasoning)

    def compile_spec(self, tools: Sequence[dict[str, Any]], reasoning: bool, prepared: Any) -> Any:
        llg = self._llg
        matcher = llg.LLMatcher(self.tokenizer, llg.grammar_from("lark", prepared), log_level=0)
        if matcher.is_error():
            raise RuntimeError(matcher.get_error())
        return matcher

    def new_matcher(self, handle: Any) -> Any:
        return handle.deep_copy()

    def probe(self, tool: dict[str, Any]) -> str | None:
        llg = self._llg
        try:
            err = llg.LLMatcher.validate_grammar(
                llg.grammar_from("lark", llg_lark([tool], False)), self.tokenizer
            )
        except Exception as e:
            return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
        return f"validate_grammar: {err.strip().splitlines()[0][:300]}" if err else None


WORKER_ENGINES: dict[str, type] = {
    "corral": CorralST,
    "xgrammar": XGrammarST,
    "llguidance": LLGuidanceST,
}


# ---------------------------------------------------------------------------------------
# Worker process
# ---------------------------------------------------------------------------------------
def _replay(
    engine: Any, matcher: Any, tokens: Sequence[int], tokenizer: Any, first: tuple[int, int] | None
) -> dict[str, Any]:
    """Fill, check, consume every token; time each fill (wall and process CPU).

    ``first``: the first fill was done already (TTFM): its ``(wall_ns, cpu_ns)``; the
    bitmask of :attr:`engine._bm` holds its result.
    """
    pc, cpu = time.perf_counter_ns, time.process_time_ns
    bitmask = engine._bm
    words = engine.bitmask_words(bitmask)
    # popcounts count token ids below the vocabulary size only (XGrammar sets the padding
    # bits of the last word)
    valid = np.zeros(len(words), np.uint32)
    full, rest = divmod(engine.vocab_size, 32)
    valid[:full] = 0xFFFFFFFF
    if rest:
        valid[full] = (1 << rest) - 1
    fill = engine.bind_fill(matcher, bitmask)
    consume = engine.consume
    n = len(tokens)
    wall = [0] * (n + 1)
    cpun = [0] * (n + 1)
    pops = [0] * (n + 1)
    out: dict[str, Any] = {"accepted": False, "reason": "", "position": None}
    for i in range(n + 1):
        if i == 0 and first is not None:
            wall[0], cpun[0] = first
        else:
            c0 = cpu()
            t0 = pc()
            fill()
            t1 = pc()
            c1 = cpu()
            wall[i], cpun[i] = t1 - t0, c1 - c0
        pops[i] = popcount(words & valid)
        if i == n:
            break
        tok = tokens[i]
        if not bit_is_set(words, tok):
            out["reason"] = (
                f"token {i} {tokenizer.decode([tok])!r} (id {tok}) not allowed by the mask "
                f"after {tokenizer.decode(list(tokens[:i]))[-60:]!r}"
            )
            out["position"] = i
            break
        if not consume(matcher, tok):
            out["reason"] = f"token {i} {tokenizer.decode([tok])!r} (id {tok}) refused by consume"
            out["position"] = i
            break
    if out["position"] is None:
        if not bit_is_set(words, engine.eos_id):
            out["reason"], out["position"] = "EOS not allowed by the final mask", n
        elif not engine.is_accepting(matcher):
            out["reason"], out["position"] = "not accepting at the end", n
        else:
            out["accepted"] = True
    last = n + 1 if out["accepted"] or out["position"] == n else out["position"] + 1
    out.update(wall_ns=wall[:last], cpu_ns=cpun[:last], popcounts=pops[:last])
    return out


def _run_cell(
    engine: Any, tools: list[dict[str, Any]], job: dict[str, Any], tokenizer: Any
) -> dict[str, Any]:
    """One cold compile + TTFM, then the two replays."""
    pc, cpu = time.perf_counter_ns, time.process_time_ns
    sub = tools[: job["n"]]
    reasoning = job["spec"] == "reasoning"
    prepared = engine.prepare(sub, reasoning)
    res: dict[str, Any] = {"reset": engine.reset_cold()}
    gc.collect()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    j0 = pc()
    c0, t0 = cpu(), pc()
    try:
        handle = engine.compile_spec(sub, reasoning, prepared)
    except Exception as e:
        res["status"] = "compile error"
        res["error"] = f"{type(e).__name__}: {str(e).strip()[:500]}"
        return res
    t1, c1 = pc(), cpu()
    matcher = engine.new_matcher(handle)
    t2, c2 = pc(), cpu()
    engine._bm = engine.new_bitmask()
    fill = engine.bind_fill(matcher, engine._bm)
    c3, t3 = cpu(), pc()
    fill()
    t4, c4 = pc(), cpu()
    res.update(
        status="ok",
        compile_ns=t1 - t0,
        compile_cpu_ns=c1 - c0,
        new_matcher_ns=t2 - t1,
        first_mask_ns=t4 - t3,
        first_mask_cpu_ns=c4 - c3,
        ttfm_ns=(t2 - t0) + (t4 - t3),
        ttfm_cpu_ns=(c2 - c0) + (c4 - c3),
    )
    tokens = job["tokens"]
    res["replay1"] = _replay(engine, matcher, tokens, tokenizer, (t4 - t3, c4 - c3))
    gc.collect()
    m2 = engine.new_matcher(handle)
    res["replay2"] = _replay(engine, m2, tokens, tokenizer, None)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    res["job_wall_s"] = (pc() - j0) / 1e9
    res["job_cpu_s"] = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    res["info"] = engine.describe(handle)
    return res


def _warmup(engine: Any, tokenizer: Any) -> None:
    """Compile a small reasoning + tools spec and run :data:`WARMUP_TEXT` through it."""
    prepared = engine.prepare(WARMUP_TOOLS, True)
    handle = engine.compile_spec(WARMUP_TOOLS, True, prepared)
    engine._bm = engine.new_bitmask()
    out = _replay(
        engine,
        engine.new_matcher(handle),
        [int(t) for t in tokenizer.encode(WARMUP_TEXT, add_special_tokens=False)],
        tokenizer,
        None,
    )
    if not out["accepted"]:
        raise RuntimeError(f"{engine.name}: the warm-up text was rejected: {out['reason']}")


def worker_main(conn: Any, engine_name: str, tokenizer_path: str) -> None:
    """A worker: set up one engine, then answer jobs until told to stop."""
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
        vocab_size, eos_id = len(tokenizer), tokenizer.eos_token_id
        cls = WORKER_ENGINES[engine_name]
        t0 = time.perf_counter()
        cls.import_modules()
        t1 = time.perf_counter()
        engine = cls(tokenizer, vocab_size, eos_id)
        if engine_name == "corral":
            _ = engine.vocab.trie  # tokenizer-side preprocessing, not part of a compile
        t2 = time.perf_counter()
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
        _warmup(engine, tokenizer)
        t3 = time.perf_counter()
        conn.send(("ready", {"import_s": t1 - t0, "setup_s": t2 - t1, "warmup_s": t3 - t2}))
    except Exception:
        conn.send(("error", traceback.format_exc()))
        return
    tools: list[dict[str, Any]] = []
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        op = job["op"]
        try:
            if op == "stop":
                return
            if op == "tools":
                tools = job["tools"]
                conn.send(("ok", None))
            elif op == "probe":
                t0 = time.perf_counter()
                err = engine.probe(job["tool"])
                conn.send(("ok", {"error": err, "s": time.perf_counter() - t0}))
            elif op == "cell":
                conn.send(("ok", _run_cell(engine, tools, job, tokenizer)))
            else:
                conn.send(("error", f"unknown op {op!r}"))
        except Exception:
            conn.send(("error", traceback.format_exc()))


class Worker:
    """A worker process for one engine, (re)started on demand; jobs time out by killing it."""

    def __init__(self, engine: str, tokenizer_path: Path, log: Callable[[str], None]) -> None:
        self.engine = engine
        self.tokenizer_path = str(tokenizer_path)
        self.log = log
        self.proc: Any = None
        self.conn: Any = None
        self.tools: list[dict[str, Any]] | None = None
        self.setups: list[dict[str, float]] = []
        self.kills = 0

    def start(self) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=worker_main, args=(child, self.engine, self.tokenizer_path), daemon=True
        )
        self.proc.start()
        child.close()
        if not self.conn.poll(900):
            self.stop()
            raise RuntimeError(f"{self.engine}: the worker did not start")
        status, payload = self.conn.recv()
        if status != "ready":
            self.stop()
            raise RuntimeError(f"{self.engine}: the worker failed to start:\n{payload}")
        self.setups.append(payload)
        self.log(
            f"{self.engine}: worker ready (import {payload['import_s']:.1f} s, setup "
            f"{payload['setup_s']:.1f} s, warm-up {payload['warmup_s']:.1f} s)"
        )
        if self.tools is not None:
            self._call({"op": "tools", "tools": self.tools}, 600)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
            self.conn.close()
            self.proc = self.conn = None

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.conn.send({"op": "stop"})
                self.proc.join(10)
            except OSError:
                pass
            self.stop()

    def _call(self, job: dict[str, Any], timeout_s: float) -> tuple[str, Any]:
        if self.proc is None:
            self.start()
        self.conn.send(job)
        if not self.conn.poll(timeout_s):
            self.stop()
            self.kills += 1
            return "timeout", f"over {timeout_s:g} s (worker killed)"
        try:
            return self.conn.recv()
        except EOFError:
            self.proc.join()
            code = self.proc.exitcode
            self.stop()
            return "crash", f"the worker died (exit code {code})"

    def set_tools(self, tools: list[dict[str, Any]]) -> None:
        self.tools = tools
        status, payload = self._call({"op": "tools", "tools": tools}, 600)
        if status != "ok":
            raise RuntimeError(f"{self.engine}: {status}: {payload}")

    def call(self, job: dict[str, Any], timeout_s: float) -> tuple[str, Any]:
        return self._call(job, timeout_s)


# ---------------------------------------------------------------------------------------
# Statistics and report
# ---------------------------------------------------------------------------------------
def _ms(ns: Sequence[int]) -> dict[str, float] | None:
    if not ns:
        return None
    a = np.asarray(ns, np.float64) / 1e6
    return {
        "median": float(np.median(a)),
        "min": float(a.min()),
        "max": float(a.max()),
        "all": [float(x) for x in a],
    }


def mask_stats(replays: list[dict[str, Any]], classes: list[int]) -> dict[str, Any]:
    """Pooled per-token statistics (µs) of accepted replays: all, free, constrained;
    wall and CPU."""
    ok = [r for r in replays if r["accepted"]]
    out: dict[str, Any] = {"replays": len(replays), "accepted": len(ok)}
    cls = np.asarray(classes)
    for key, field_ in (("wall", "wall_ns"), ("cpu", "cpu_ns")):
        if not ok:
            out[key] = None
            continue
        a = np.concatenate([np.asarray(r[field_], np.int64) for r in ok])
        c = np.concatenate([cls[: len(r[field_])] for r in ok])
        out[key] = {
            "all": summarize_us(a.tolist()),
            "free": summarize_us(a[c == FREE].tolist()),
            "constrained": summarize_us(a[c == CONSTRAINED].tolist()),
            "total_ms_per_replay": float(a.sum()) / 1e6 / len(ok),
        }
    return out


def _g(d: Any, *path: str) -> float | None:
    for p in path:
        if not isinstance(d, dict) or d.get(p) is None:
            return None
        d = d[p]
    return d  # type: ignore[no-any-return]


def markdown(results: dict[str, Any]) -> str:
    env = results["environment"]
    pk = env["packages"]
    s = results["settings"]
    lines = [
        f"# Structural tags (tool calling): tokenizer {env['tokenizer']} "
        f"(V={env['vocab_size']:,}), {env['cpu_model']} ({env['cpus_usable']} usable CPUs, "
        f"loadavg {env['loadavg_start'][0]:.2f} → {env['loadavg_end'][0]:.2f}), "
        f"corral {pk.get('corral')}, xgrammar {pk.get('xgrammar')}, llguidance "
        f"{pk.get('llguidance')}; single thread; {s['rounds']} rounds; {env['date']}",
        "",
        "## Compile from a cold grammar cache (median over rounds; ms)",
        "",
        "TTFM = compile + new matcher + first mask. Wall = perf_counter, CPU = process CPU "
        "time of the engine's worker.",
        "",
        "| spec | tools | engine | compile wall | compile CPU | 1st mask wall | TTFM wall "
        "| TTFM CPU | all masks of the 1st output, wall | CPU | rounds ok |",
        "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    cells = results["cells"]
    for c in cells:
        if c["status"] != "ok":
            lines.append(
                f"| {c['spec']} | {c['n']} | {c['engine']} | {c['status']} |||||||"
                f" {c['rounds_ok']}/{c['rounds_run']} |"
            )
            continue
        k = c["compile"]
        lines.append(
            f"| {c['spec']} | {c['n']} | {c['engine']} "
            f"| {fmt(_g(k, 'compile_ms', 'median'))} | {fmt(_g(k, 'compile_cpu_ms', 'median'))} "
            f"| {fmt(_g(k, 'first_mask_ms', 'median'), 2)} | {fmt(_g(k, 'ttfm_ms', 'median'))} "
            f"| {fmt(_g(k, 'ttfm_cpu_ms', 'median'))} "
            f"| {fmt(_g(k, 'first_output_masks_ms', 'median'))} "
            f"| {fmt(_g(k, 'first_output_masks_cpu_ms', 'median'))} "
            f"| {c['rounds_ok']}/{c['rounds_run']} |"
        )
    for which, title in (
        ("replay1", "first replay, right after the cold compile (lazy caches built here)"),
        ("replay2", "second replay, a fresh matcher of the same compiled grammar"),
    ):
        lines += [
            "",
            f"## Per-token mask fill (µs), {title}",
            "",
            "Free = think text, free text, trigger, final mask; constrained = `<think>` and "
            "the tool call after the trigger. CPU = process CPU time of the fill.",
            "",
            "| spec | tools | engine | free p50 | free p99 | constr p50 | constr p99 "
            "| all p50 | all p99 | all mean | all max | CPU p50 | CPU p99 | CPU mean "
            "| sum ms | positions | accepted |",
            "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for c in cells:
            m = c.get(which) or {}
            w, u = m.get("wall"), m.get("cpu")
            if c["status"] != "ok" or not w:
                lines.append(
                    f"| {c['spec']} | {c['n']} | {c['engine']} | {c['status']} "
                    f"||||||||||||| {m.get('accepted', 0)}/{m.get('replays', 0)} |"
                )
                continue
            lines.append(
                f"| {c['spec']} | {c['n']} | {c['engine']} "
                f"| {fmt(_g(w, 'free', 'p50'))} | {fmt(_g(w, 'free', 'p99'))} "
                f"| {fmt(_g(w, 'constrained', 'p50'))} | {fmt(_g(w, 'constrained', 'p99'))} "
                f"| {fmt(_g(w, 'all', 'p50'))} | {fmt(_g(w, 'all', 'p99'))} "
                f"| {fmt(_g(w, 'all', 'mean'))} | {fmt(_g(w, 'all', 'max'), 0)} "
                f"| {fmt(_g(u, 'all', 'p50'))} | {fmt(_g(u, 'all', 'p99'))} "
                f"| {fmt(_g(u, 'all', 'mean'))} | {fmt(w.get('total_ms_per_replay'))} "
                f"| {_g(w, 'all', 'n')} "
                f"| {m['accepted']}/{m['replays']} |"
            )
    # agreement
    lines += [
        "",
        "## Correctness",
        "",
        "Every engine must allow each token of the output before consuming it, and EOS at "
        "the end. Agreement with corral: the share of mask positions where the engine "
        "allows as many tokens (ids below the vocabulary size) as corral, and the median "
        "|difference| where it does not (replay 1, rounds pooled).",
        "",
        "| spec | tools | engine | replays accepted | free: same count | free: median Δ "
        "| constrained: same count | constrained: median Δ |",
        "|---|--:|---|--:|--:|--:|--:|--:|",
    ]
    for c in cells:
        a = c.get("agreement_with_corral") or {}
        acc = sum(c.get(w, {}).get("accepted", 0) for w in ("replay1", "replay2"))
        tot = sum(c.get(w, {}).get("replays", 0) for w in ("replay1", "replay2"))
        row = f"| {c['spec']} | {c['n']} | {c['engine']} | {acc}/{tot} "
        for k in ("free", "constrained"):
            x = a.get(k) or {}
            f = x.get("same_fraction")
            row += f"| {'-' if f is None else f'{100 * f:.1f}%'} "
            row += f"| {fmt(x.get('median_abs_diff'), 0) if x else '-'} "
        lines.append(row + "|")
    notes = []
    for c in cells:
        for e in c["errors"]:
            notes.append(f"- {c['engine']} / {c['spec']} / {c['n']} tools: {e}")
    tl = results["tools"]
    notes.append(
        f"- tools: {tl['candidates']} candidates ({tl['skipped']}); probed "
        f"{tl['probed']}, kept {tl['kept']}; the tool call uses `{tl['call_tool']}` "
        f"({tl['call_tool_source']})"
    )
    for e, r in tl["refused"].items():
        names = "; ".join(f"`{x['tool']}` ({x['error'][:120]})" for x in r[:6])
        more = f" and {len(r) - 6} more" if len(r) > 6 else ""
        notes.append(
            f"- {e} refused {len(r)} of {tl['probed']} probed schemas"
            + (f": {names}{more}" if r else "")
        )
    for name, text in results["cold"].items():
        notes.append(f"- cold, {name}: {text}")
    notes.append(f"- llguidance translation: {results['llguidance_translation']}")
    lines += ["", "## Notes", "", *notes]
    return "\n".join(lines)


def agreement(
    a: list[dict[str, Any] | None], b: list[dict[str, Any] | None], classes: list[int]
) -> dict[str, Any] | None:
    """Per class (free / constrained), over the positions of accepted replays of the same
    rounds: the fraction where both engines allow as many tokens, and the median
    |difference| where they do not."""
    cls = np.asarray(classes)
    same = {FREE: 0, CONSTRAINED: 0}
    total = {FREE: 0, CONSTRAINED: 0}
    diffs: dict[int, list[int]] = {FREE: [], CONSTRAINED: []}
    for ra, rb in zip(a, b, strict=False):
        if ra is None or rb is None or not (ra["accepted"] and rb["accepted"]):
            continue
        pa = np.asarray(ra["popcounts"], np.int64)
        pb = np.asarray(rb["popcounts"], np.int64)
        for k in (FREE, CONSTRAINED):
            sel = cls[: len(pa)] == k
            same[k] += int((pa[sel] == pb[sel]).sum())
            total[k] += int(sel.sum())
            d = np.abs(pa[sel] - pb[sel])
            diffs[k] += d[d > 0].tolist()
    if not total[FREE] + total[CONSTRAINED]:
        return None
    return {
        name: {
            "same_fraction": same[k] / total[k] if total[k] else None,
            "positions": total[k],
            "median_abs_diff": float(np.median(diffs[k])) if diffs[k] else 0.0,
        }
        for name, k in (("free", FREE), ("constrained", CONSTRAINED))
    }


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Structural-tag (tool calling) benchmark: corral, XGrammar, llguidance.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--tokenizer", default="llama3", help="name under --tokenizers-dir, or a path")
    ap.add_argument("--tokenizers-dir", type=Path, default=DEFAULT_TOKENIZERS_DIR)
    ap.add_argument("--tools", default="10,100,128,500", help="tool counts N")
    ap.add_argument("--specs", default=",".join(SPECS), help="tools, reasoning")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--engines", default=",".join(ENGINE_ORDER))
    ap.add_argument("--maskbench", type=Path, default=DEFAULT_MASKBENCH_DIR)
    ap.add_argument("--seed", type=int, default=0, help="shuffle of the candidate tools")
    ap.add_argument("--cell-timeout", type=float, default=180.0,
                    help="seconds for one compile + TTFM + two replays")  # fmt: skip
    ap.add_argument("--probe-timeout", type=float, default=60.0, help="seconds per probe")
    ap.add_argument("--call-tool", default=None, help="tool to call (default: see docs)")
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON file (default: results/structural-TOK-DATE.json)")  # fmt: skip
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    cpu_started = time.process_time()
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    ns = sorted({int(x) for x in args.tools.split(",") if x.strip()})
    specs = [s.strip() for s in args.specs.split(",") if s.strip()]
    for s in specs:
        if s not in SPECS:
            raise SystemExit(f"unknown spec {s!r}; known: {', '.join(SPECS)}")
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in engines:
        if e not in WORKER_ENGINES:
            raise SystemExit(f"unknown engine {e!r}; known: {', '.join(WORKER_ENGINES)}")
        missing = WORKER_ENGINES[e].missing_modules()
        if missing:
            raise SystemExit(f"engine {e} is not installed ({', '.join(missing)})")
    tok_label, tok_path = resolve_tokenizer(args.tokenizer, args.tokenizers_dir)

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tok_path))
    candidates, skipped = load_tools(args.maskbench, args.seed)
    log(f"{len(candidates)} candidate tools ({skipped})")

    loadavg_start = os.getloadavg()
    workers = {e: Worker(e, tok_path, log) for e in engines}
    try:
        for w in workers.values():
            w.start()
        # -- probe every candidate with every engine -------------------------------------
        kept: list[Tool] = []
        refused: dict[str, list[dict[str, str]]] = {e: [] for e in engines}
        probe_s: dict[str, float] = dict.fromkeys(engines, 0.0)
        probed = 0
        for tool in candidates:  # all of them, for the refusal counts
            probed += 1
            ok = True
            for e in engines:
                status, payload = workers[e].call(
                    {"op": "probe", "tool": {"name": tool.name, "schema": tool.schema}},
                    args.probe_timeout,
                )
                if status == "ok":
                    probe_s[e] += payload["s"]
                    err = payload["error"]
                else:
                    err = f"{status}: {str(payload)[-300:]}"
                if err is not None:
                    refused[e].append({"tool": tool.name, "source": tool.source, "error": err})
                    ok = False
            if ok:
                kept.append(tool)
        log(
            f"probed {probed} candidates, kept {len(kept)}; refused: "
            + ", ".join(f"{e} {len(r)}" for e, r in refused.items())
            + "; probe time: "
            + ", ".join(f"{e} {s:.1f} s" for e, s in probe_s.items())
        )
        if len(kept) < max(ns):
            log(f"only {len(kept)} tools pass every engine: N capped")
            ns = sorted({min(n, len(kept)) for n in ns})
        # -- the realistic outputs ----------------------------------------------------------
        if args.call_tool:
            call = next((t for t in kept if t.name == args.call_tool), None)
            if call is None or call.args is None:
                raise SystemExit(f"--call-tool {args.call_tool!r}: not kept or no instance")
        else:
            # the first 10 tools are in every N: the one with the longest arguments that
            # stay under 120 tokens
            pool = [t for t in kept[: min(10, min(ns))] if t.args is not None]
            sized = [
                (len(tokenizer.encode(json.dumps(t.args, ensure_ascii=False))), i, t)
                for i, t in enumerate(pool)
            ]
            fitting = [x for x in sized if x[0] <= 120] or sized
            call = max(fitting, key=lambda x: (x[0], -x[1]))[2]
        outputs = {s: build_output(tokenizer, s == "reasoning", call) for s in specs}
        for s, o in outputs.items():
            nf = sum(1 for c in o.classes if c == FREE)
            log(f"output {s}: {len(o.tokens)} tokens ({nf} free / "
                f"{len(o.classes) - nf} constrained mask positions); call {call.name}")  # fmt: skip
        tool_dicts = [{"name": t.name, "schema": t.schema} for t in kept]
        for w in workers.values():
            w.set_tools(tool_dicts)
        # -- rounds -------------------------------------------------------------------------
        raw: dict[tuple[str, int, str], list[dict[str, Any] | None]] = defaultdict(list)
        errors: dict[tuple[str, int, str], list[str]] = defaultdict(list)
        dead: set[tuple[str, int, str]] = set()
        for r in range(args.rounds):
            order = engines[r % len(engines) :] + engines[: r % len(engines)]
            for spec in specs:
                for n in ns:
                    for e in order:
                        key = (spec, n, e)
                        if key in dead:
                            raw[key].append(None)
                            continue
                        job = {"op": "cell", "spec": spec, "n": n,
                               "tokens": outputs[spec].tokens}  # fmt: skip
                        t0 = time.perf_counter()
                        status, payload = workers[e].call(job, args.cell_timeout)
                        dt = time.perf_counter() - t0
                        if status != "ok" or payload.get("status") != "ok":
                            msg = (
                                f"round {r + 1}: {status}: {str(payload)[-400:]}"
                                if status != "ok"
                                else f"round {r + 1}: {payload['status']}: {payload['error']}"
                            )
                            errors[key].append(msg)
                            raw[key].append(None)
                            if status == "timeout" or (
                                isinstance(payload, dict)
                                and payload.get("status") == "compile error"
                            ):
                                dead.add(key)
                            log(f"  r{r + 1} {spec:<9} N={n:<4} {e:<10} {msg[:200]}")
                            continue
                        raw[key].append(payload)
                        for which in ("replay1", "replay2"):
                            if not payload[which]["accepted"]:
                                errors[key].append(
                                    f"round {r + 1} {which}: rejected the output: "
                                    f"{payload[which]['reason']}"
                                )
                        w1 = np.asarray(payload["replay1"]["wall_ns"]) / 1e3
                        log(
                            f"  r{r + 1} {spec:<9} N={n:<4} {e:<10} compile "
                            f"{payload['compile_ns'] / 1e6:8.1f} ms (cpu "
                            f"{payload['compile_cpu_ns'] / 1e6:8.1f}), ttfm "
                            f"{payload['ttfm_ns'] / 1e6:8.1f} ms, mask p50 "
                            f"{np.median(w1):7.1f} µs, max {w1.max() / 1e3:7.1f} ms, "
                            f"ok {payload['replay1']['accepted']}/"
                            f"{payload['replay2']['accepted']} ({dt:.1f} s)"
                        )
    finally:
        for w in workers.values():
            w.close()
    loadavg_end = os.getloadavg()

    # -- aggregate ------------------------------------------------------------------------
    cells = []
    for spec in specs:
        for n in ns:
            for e in engines:
                key = (spec, n, e)
                runs = raw[key]
                ok = [x for x in runs if x is not None]
                cell: dict[str, Any] = {
                    "spec": spec,
                    "n": n,
                    "engine": e,
                    "status": "ok" if ok else ("timeout" if key in dead else "failed"),
                    "rounds_run": len(runs),
                    "rounds_ok": len(ok),
                    "errors": errors[key],
                }
                if ok:
                    cell["compile"] = {
                        "compile_ms": _ms([x["compile_ns"] for x in ok]),
                        "compile_cpu_ms": _ms([x["compile_cpu_ns"] for x in ok]),
                        "new_matcher_ms": _ms([x["new_matcher_ns"] for x in ok]),
                        "first_mask_ms": _ms([x["first_mask_ns"] for x in ok]),
                        "first_mask_cpu_ms": _ms([x["first_mask_cpu_ns"] for x in ok]),
                        "ttfm_ms": _ms([x["ttfm_ns"] for x in ok]),
                        "ttfm_cpu_ms": _ms([x["ttfm_cpu_ns"] for x in ok]),
                        "first_output_masks_ms": _ms(
                            [sum(x["replay1"]["wall_ns"]) for x in ok if x["replay1"]["accepted"]]
                        ),
                        "first_output_masks_cpu_ms": _ms(
                            [sum(x["replay1"]["cpu_ns"]) for x in ok if x["replay1"]["accepted"]]
                        ),
                    }
                    classes = outputs[spec].classes
                    for which in ("replay1", "replay2"):
                        cell[which] = mask_stats([x[which] for x in ok], classes)
                        slow = sorted(
                            (
                                (t, ri, i)
                                for ri, x in enumerate(ok)
                                for i, t in enumerate(x[which]["wall_ns"])
                            ),
                            reverse=True,
                        )[:5]
                        cell[which]["slowest"] = [
                            {"us": t / 1e3, "round_index": ri, "position": i,
                             "class": "free" if classes[i] == FREE else "constrained"}
                            for t, ri, i in slow
                        ]  # fmt: skip
                    for which in ("replay1", "replay2"):
                        full = [x[which]["wall_ns"] for x in ok if x[which]["accepted"]]
                        if full:
                            cell[which]["per_position_median_us"] = [
                                round(float(v), 2) for v in np.median(np.asarray(full), 0) / 1e3
                            ]
                    cell["job_wall_s"] = [x["job_wall_s"] for x in ok]
                    cell["job_cpu_s"] = [x["job_cpu_s"] for x in ok]
                    cell["info"] = ok[-1]["info"]
                    cell["reset"] = ok[-1]["reset"]
                    cell["per_round_replay1_total_ms"] = [
                        sum(x["replay1"]["wall_ns"]) / 1e6 for x in ok
                    ]
                cells.append(cell)
    for c in cells:
        ref = raw[(c["spec"], c["n"], "corral")]
        mine = raw[(c["spec"], c["n"], c["engine"])]
        if c["engine"] == "corral" or not ref:
            c["agreement_with_corral"] = None
            continue
        c["agreement_with_corral"] = agreement(
            [x and x["replay1"] for x in ref],
            [x and x["replay1"] for x in mine],
            outputs[c["spec"]].classes,
        )

    now = datetime.datetime.now()
    env = environment(tok_label, len(tokenizer))
    env.update(
        date=now.isoformat(timespec="seconds"),
        loadavg_start=loadavg_start,
        loadavg_end=loadavg_end,
        command=" ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        run_wall_s=time.perf_counter() - started,
        main_process_cpu_s=time.process_time() - cpu_started,
    )
    results: dict[str, Any] = {
        "environment": env,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "cold": {e: WORKER_ENGINES[e].cold for e in engines},
        "llguidance_translation": (
            "llguidance.StructTag.to_grammar(tags, assume_special=False): `start: (tag_0 | "
            '... | tag_N-1)* tag_end`, `tag_i_trig[lazy]: TAG_TEXT "<tool_call>"`, `tag_i: '
            "tag_i_trig BEGIN_REST %json{schema} END`, `TAG_TEXT: /(.|\\n)*/`; reasoning: "
            '`start: "<think>" think tools`, `think[lazy]: /(.|\\n)*/ "</think>"`. '
            "Faithful for these specs: the lazy lexeme ends free text at the first trigger "
            "(or `</think>`), as triggered_tags / any_text do"
        ),
        "workers": {e: {"setups": w.setups, "kills": w.kills} for e, w in workers.items()},
        "tools": {
            "candidates": len(candidates),
            "skipped": skipped,
            "probed": probed,
            "kept": len(kept),
            "refused": refused,
            "probe_s": probe_s,
            "names": [t.name for t in kept[: max(ns)]],
            "sources": [t.source for t in kept[: max(ns)]],
            "call_tool": call.name,
            "call_tool_source": call.source,
        },
        "outputs": {
            s: {
                "text": o.text,
                "tokens": len(o.tokens),
                "free_positions": sum(1 for c in o.classes if c == FREE),
                "constrained_positions": sum(1 for c in o.classes if c == CONSTRAINED),
            }
            for s, o in outputs.items()
        },
        "cells": cells,
    }
    report = markdown(results)
    results["report_markdown"] = report
    print(report)
    out = args.out or BENCH_DIR / "results" / (
        f"structural-{tok_label}-{now.strftime('%Y-%m-%dT%H%M%S')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1, default=float), encoding="utf-8")
    tmp.replace(out)
    log(f"wrote {out} (run {env['run_wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
