"""Front ends: Lark grammar text, regular expressions and JSON Schemas → the grammar IR.

The IR (:class:`Grammar`) is a context-free grammar whose terminals are byte-level DFAs; see
``ir.py`` for its exact meaning.
"""

from __future__ import annotations

from .ir import Grammar, Rule, Terminal

__all__ = ["Grammar", "Rule", "Terminal"]
