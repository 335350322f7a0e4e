"""JSON Schemas that several test modules use."""

from __future__ import annotations

#: A small person record: two required properties, a bounded string, no other keys.
NAME_AGE = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
