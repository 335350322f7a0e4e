"""Structural tags: whole outputs made of free text, tags, tool calls and sub-specs.

The formats (:mod:`.nodes`) are the Python API; :func:`.read.read_structural_tag` reads
XGrammar's structural-tag JSON into them; :func:`.build.build_grammar` turns them into one
:class:`~corral.grammar.ir.Grammar` (``corral.compile`` does all of this for a spec it
recognises as a structural tag). See ``docs/structural_tags.md``.
"""

from __future__ import annotations

from .nodes import (
    AnyText,
    AnyTokens,
    Const,
    Dispatch,
    ExcludeToken,
    Format,
    JSONSchema,
    Lark,
    Optional,
    Or,
    Plus,
    Regex,
    Repeat,
    Sequence,
    Star,
    StructuralTag,
    Tag,
    TagsWithSeparator,
    Token,
    TokenDispatch,
    TokenTriggeredTags,
    TriggeredTags,
    as_format,
)
from .read import StructuralTagError, is_structural_tag, read_structural_tag

__all__ = [
    "AnyText",
    "AnyTokens",
    "Const",
    "Dispatch",
    "ExcludeToken",
    "Format",
    "JSONSchema",
    "Lark",
    "Optional",
    "Or",
    "Plus",
    "Regex",
    "Repeat",
    "Sequence",
    "Star",
    "StructuralTag",
    "StructuralTagError",
    "Tag",
    "TagsWithSeparator",
    "Token",
    "TokenDispatch",
    "TokenTriggeredTags",
    "TriggeredTags",
    "as_format",
    "is_structural_tag",
    "read_structural_tag",
]
