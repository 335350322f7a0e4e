"""Tasks shared by the diffusion tests and ``benchmarks/diffusion.py``."""

from __future__ import annotations

# a small JSON Schema for random masked LMs over byte-level vocabularies
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 6},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
# WordPiece spells word-start tokens with a leading space and has no single-byte space
# token: gaps (one byte per slot) fill with continuation pieces, so spaces are optional
RECORD = r"""
start: WORD (" " WORD)* (" " NUMBER)?
WORD: /[a-z]+/
NUMBER: /[1-9][0-9]*/
"""
