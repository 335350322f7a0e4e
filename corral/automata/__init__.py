"""Token-level automata: vocabulary, compiled grammars, matchers and their kernels."""

from __future__ import annotations

from .batch import fill_next_token_bitmasks
from .bitmask import allocate_bitmask, apply_token_bitmask_inplace, bitmask_to_bool
from .compiled import CompiledGrammar
from .compiler import compile
from .matcher import Matcher
from .vocabulary import Vocabulary

__all__ = [
    "CompiledGrammar",
    "Matcher",
    "Vocabulary",
    "allocate_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_to_bool",
    "compile",
    "fill_next_token_bitmasks",
]
