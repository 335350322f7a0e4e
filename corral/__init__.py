"""corral: constrained generation for language models.

Grammars (Lark), regular expressions and JSON Schemas compile into token-level automata
whose masks are computed by Numba kernels::

    import corral
    vocab = corral.Vocabulary.from_hf(tokenizer)
    compiled = corral.compile(lark_text, vocab)      # or corral.Grammar.from_regex(...)
    m = compiled.matcher()
    mask = corral.allocate_bitmask(1, vocab.size)
    m.fill_bitmask(mask)                             # int32 [1, ceil(V/32)], bit 1 = allowed
    m.consume(token_id)

    compiler = corral.Compiler(vocab)                # one model's compiler, owning its caches
    compiled = compiler.json_schema(schema)          # or .lark(), .regex(), .compile(spec)

    corral.generate(model, prompt, schema=Person)    # a validated Person
    corral.extract(model, documents, schema)         # one validated record per document

Importing corral is cheap: the submodules (and numba) load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    ArgumentTypeError,
    CompileBudgetError,
    CorralError,
    EmptyLanguageError,
    GrammarError,
    IncompleteGenerationError,
    InvalidArgumentError,
    Location,
    MatcherStateError,
    MonitorError,
    PromptTooLongError,
    ShapeError,
    TokenizerError,
    TokenRejectedError,
    UnsupportedFeatureError,
    ValidationFailedError,
    VocabularyMismatchError,
)

__version__ = "0.1.0"

_LAZY = {
    "Grammar": "corral.grammar",
    "EntitySet": "corral.grammar.entities",
    "Vocabulary": "corral.automata",
    "CompiledGrammar": "corral.automata",
    "Matcher": "corral.automata",
    "compile": "corral.automata",
    "Compiler": "corral.automata.compiler",
    "allocate_bitmask": "corral.automata",
    "apply_token_bitmask_inplace": "corral.automata",
    "bitmask_to_bool": "corral.automata",
    "fill_next_token_bitmasks": "corral.automata",
    "explain": "corral.grammar.json_schema",
    "SchemaError": "corral.grammar.json_schema.load",
    "validate": "corral.grammar.json_schema.validation",
    "generate": "corral.integrations.generate",
    "stream": "corral.integrations.generate",
    "Generation": "corral.integrations.generate",
    "extract": "corral.integrations.extract",
    "infill": "corral.integrations.infill",
    "Infill": "corral.integrations.infill",
    "CompletionChecker": "corral.automata.completion",
    "diffusion_decode": "corral.sampler.diffusion",
    "tool_calls": "corral.grammar.tool_calls",
    "parse_tool_calls": "corral.grammar.tool_calls",
    "Monitor": "corral.monitors.monitor",
    "MonitorContext": "corral.monitors.monitor",
    "MonitoredMatcher": "corral.monitors.matcher",
}

__all__ = [
    "ArgumentTypeError",
    "CompileBudgetError",
    "CompiledGrammar",
    "Compiler",
    "CompletionChecker",
    "CorralError",
    "EmptyLanguageError",
    "EntitySet",
    "Generation",
    "Grammar",
    "GrammarError",
    "IncompleteGenerationError",
    "Infill",
    "InvalidArgumentError",
    "Location",
    "Matcher",
    "MatcherStateError",
    "Monitor",
    "MonitorContext",
    "MonitorError",
    "MonitoredMatcher",
    "PromptTooLongError",
    "SchemaError",
    "ShapeError",
    "TokenRejectedError",
    "TokenizerError",
    "UnsupportedFeatureError",
    "ValidationFailedError",
    "Vocabulary",
    "VocabularyMismatchError",
    "allocate_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_to_bool",
    "compile",
    "diffusion_decode",
    "explain",
    "extract",
    "fill_next_token_bitmasks",
    "generate",
    "infill",
    "parse_tool_calls",
    "stream",
    "tool_calls",
    "validate",
]

if TYPE_CHECKING:  # pragma: no cover
    from .automata import (
        CompiledGrammar,
        Matcher,
        Vocabulary,
        allocate_bitmask,
        apply_token_bitmask_inplace,
        bitmask_to_bool,
        compile,
        fill_next_token_bitmasks,
    )
    from .automata.compiler import Compiler
    from .automata.completion import CompletionChecker
    from .grammar import Grammar
    from .grammar.entities import EntitySet
    from .grammar.json_schema import explain
    from .grammar.json_schema.load import SchemaError
    from .grammar.json_schema.validation import validate
    from .grammar.tool_calls import parse_tool_calls, tool_calls
    from .integrations.extract import extract
    from .integrations.generate import Generation, generate, stream
    from .integrations.infill import Infill, infill
    from .monitors.matcher import MonitoredMatcher
    from .monitors.monitor import Monitor, MonitorContext
    from .sampler.diffusion import diffusion_decode


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'corral' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
