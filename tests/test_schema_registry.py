"""The reference registry of a loaded schema: crawled for embedded identifiers only.

A schema whose only identifier is the root's own ``$id`` is registered under it without
a crawl of the document (``load._registry``); references through that identifier, through
the document's own pointers, and to embedded identifiers all still resolve, in the
grammar and in the final check.
"""

from __future__ import annotations

from typing import Any

import pytest
from referencing import Registry
from support.tokenizers import load_tokenizer, load_vocab
from support.words import accepts

import corral
from corral.grammar.json_schema.load import load_schema

ROOT_ID_ONLY = {
    "$id": "https://example.com/person.json",
    "type": "object",
    "properties": {
        "by_uri": {"$ref": "https://example.com/person.json#/$defs/n"},
        "by_pointer": {"$ref": "#/$defs/n"},
    },
    "required": ["by_uri", "by_pointer"],
    "additionalProperties": False,
    "$defs": {"n": {"type": "integer"}},
}

EMBEDDED_ID = {
    "$id": "https://example.com/root.json",
    "type": "object",
    "properties": {"x": {"$ref": "item.json"}, "y": {"$ref": "#flag"}},
    "required": ["x", "y"],
    "additionalProperties": False,
    "$defs": {
        "item": {"$id": "item.json", "type": "string", "enum": ["a", "b"]},
        "flag": {"$anchor": "flag", "type": "boolean"},
    },
}


@pytest.fixture
def crawls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import jsonschema_specifications  # noqa: F401  (its import crawls the meta-schemas)

    calls: list[int] = []
    crawl = Registry.crawl

    def counting(self: Any) -> Any:
        calls.append(1)
        return crawl(self)

    monkeypatch.setattr(Registry, "crawl", counting)
    return calls


def test_root_id_alone_is_not_crawled(crawls: list[int]) -> None:
    load_schema(ROOT_ID_ONLY)
    assert crawls == []
    load_schema(EMBEDDED_ID)
    assert crawls == [1]
    load_schema({"$anchor": "top", "type": "integer"})  # an anchor at the root is crawled
    assert crawls == [1, 1]


@pytest.mark.parametrize(
    ("schema", "text", "expected"),
    [
        (ROOT_ID_ONLY, '{"by_uri":1,"by_pointer":2}', True),
        (ROOT_ID_ONLY, '{"by_uri":"1","by_pointer":2}', False),
        (ROOT_ID_ONLY, '{"by_uri":1,"by_pointer":true}', False),
        (EMBEDDED_ID, '{"x":"a","y":true}', True),
        (EMBEDDED_ID, '{"x":"c","y":true}', False),
        (EMBEDDED_ID, '{"x":"b","y":1}', False),
    ],
)
def test_references_resolve_with_and_without_a_crawl(
    schema: dict[str, Any], text: str, expected: bool
) -> None:
    vocab = load_vocab("gpt2")
    compiled = corral.compile(schema, vocab, cache=False)
    assert accepts(compiled, load_tokenizer("gpt2"), text) is expected
