"""The JSON Schema keywords the translator knows, by how it treats them.

Every keyword of a (sub)schema falls in one class (see ``translate.py`` for what each
status means):

* :data:`ANNOTATIONS`: no effect on validity;
* :data:`HANDLED`: expressed by the grammar (exactly, or noted otherwise where they are
  emitted);
* :data:`CHECKED`: over-approximated by the grammar and enforced by the final check;
  among them, the :data:`DEFERRED` ones are expressed exactly by the array and object
  emitters when they can, and noted there;
* anything else is an unknown keyword (an annotation with no effect).
"""

from __future__ import annotations

__all__ = ["ANNOTATIONS", "CHECKED", "DEFERRED", "HANDLED", "TYPES", "TYPE_NAMES"]

ANNOTATIONS = frozenset(
    {
        "title", "description", "default", "examples", "$comment", "deprecated",
        "readOnly", "writeOnly", "$schema", "$id", "id", "$anchor", "$dynamicAnchor",
        "$recursiveAnchor", "$defs", "definitions", "$vocabulary", "contentMediaType",
        "contentEncoding", "contentSchema",
    }
)  # fmt: skip
# Keywords the grammar over-approximates; the final check enforces them.
CHECKED = frozenset(
    {
        "uniqueItems", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
        "dependencies", "contains", "minContains", "maxContains", "minProperties",
        "maxProperties", "unevaluatedProperties", "unevaluatedItems",
    }
)  # fmt: skip
# Final-check keywords of arrays and objects that ``emit_array`` and ``emit_object`` express
# exactly when they can (counts, finite unique items); they note each occurrence themselves.
DEFERRED = frozenset(
    {
        "uniqueItems", "contains", "minContains", "maxContains", "minProperties",
        "maxProperties", "dependentRequired", "dependencies",
    }
)  # fmt: skip
HANDLED = frozenset(
    {
        "type", "enum", "const", "properties", "required", "additionalProperties",
        "patternProperties", "propertyNames", "items", "prefixItems", "additionalItems",
        "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "minimum",
        "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf",
        "allOf", "$ref", "$dynamicRef", "$recursiveRef", "x-corral-span", "x-corral-entities",
    }
)  # fmt: skip
# The JSON types in the order the grammar offers them ("integer" replaces "number").
TYPES = ("null", "boolean", "object", "array", "string", "number")
TYPE_NAMES = frozenset((*TYPES, "integer"))
"""JSON Schema's simple type names (the value families of :data:`TYPES`, and
``integer``)."""
