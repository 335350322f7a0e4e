"""The fast meta-schema check (``json_schema/meta_check.py``) against ``jsonschema``.

``conforms(schema, draft)`` may say ``True`` only where ``jsonschema`` finds the schema
valid against the draft's meta-schema; it should say so for nearly every real schema (else
loading is slow again). Checked: its tables cover exactly the meta-schemas' keywords, on
generated schemas with keyword values of every kind, and on real schemas.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.schema_runner import MASKBENCH_DIR, SUITE_DIR, maskbench_files, stratified_sample

from corral.grammar.json_schema import meta_check as mc
from corral.grammar.json_schema.load import DRAFTS, SchemaError, load_schema, meta_validator
from corral.grammar.json_schema.meta_check import TABLES, conforms

URI = {short: uri for uri, short in DRAFTS.items()}


def jsonschema_valid(schema: Any, draft: str) -> bool:
    return not any(True for _ in meta_validator(URI[draft]).iter_errors(schema))


def meta_keywords(draft: str) -> set[str]:
    """The keywords the draft's meta-schema (and its vocabularies) has ``properties`` for."""
    from jsonschema_specifications import REGISTRY

    root = URI[draft] + ("#" if draft in ("4", "6", "7") else "")
    schema = REGISTRY.contents(root)
    found = set(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        ref = part["$ref"]
        base = URI[draft].rsplit("/", 1)[0]
        found |= set(REGISTRY.contents(f"{base}/{ref}").get("properties", {}))
    return found


@pytest.mark.parametrize("draft", sorted(TABLES))
def test_tables_cover_exactly_the_meta_schema_keywords(draft: str) -> None:
    assert set(TABLES[draft]) == meta_keywords(draft)


# Values of every kind a meta-schema asks for (near misses included), and of the kinds it
# refuses.
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, 2.5, -1.5]),
    st.sampled_from(["", "string", "integer", "a#b", "#x", "x:y", "_a", "1a", "a\n", "null"]),
)
TYPE_NAMES = st.sampled_from(["string", "integer", "number", "object", "null", "void"])
STRINGS = st.lists(st.sampled_from(["a", "b", "c"]), max_size=3)


def right_kind(kind: str, inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Values of (or just beside) what ``kind`` asks for."""
    schema_list = st.lists(inner, min_size=1, max_size=3)
    return {
        mc.SCHEMA: inner,
        mc.SCHEMA_MAP: st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
        mc.SCHEMA_LIST: schema_list,
        mc.SCHEMA_OR_LIST: st.one_of(inner, schema_list),
        mc.BOOL_OR_SCHEMA: st.one_of(st.booleans(), inner),
        mc.DEPENDENCIES: st.dictionaries(st.sampled_from(["a", "b"]), st.one_of(inner, STRINGS)),
        mc.NON_NEGATIVE_INT: st.one_of(st.integers(-1, 4), st.sampled_from([0.0, 2.0, 2.5])),
        mc.NUMBER: st.one_of(st.integers(-3, 3), st.sampled_from([0.0, -2.5, 1e30])),
        mc.POSITIVE_NUMBER: st.one_of(st.integers(-1, 3), st.sampled_from([0.0, 0.5, 1.0])),
        mc.BOOLEAN: st.booleans(),
        mc.STRING: st.sampled_from(["", "a", "^a$"]),
        mc.ARRAY: st.lists(SCALARS, max_size=3),
        mc.ANY: SCALARS,
        mc.STRING_LIST: STRINGS,
        mc.STRING_LIST_MAP: st.dictionaries(st.sampled_from(["a", "b"]), STRINGS, max_size=2),
        mc.TYPE: st.one_of(TYPE_NAMES, st.lists(TYPE_NAMES, max_size=3)),
        mc.ENUM: st.lists(SCALARS, max_size=3),
        mc.BOOLEAN_MAP: st.dictionaries(st.sampled_from(["u", "v"]), SCALARS, max_size=2),
        mc.ID: st.sampled_from(["x", "x#", "x#y", "#", ""]),
        mc.ANCHOR: st.sampled_from(["_a", "a", "1a", "a:b", "a\n", ""]),
        mc.ANCHOR_2019: st.sampled_from(["_a", "a", "1a", "a:b", "a\n", ""]),
    }[kind]


def schema_strategy(draft: str) -> st.SearchStrategy[Any]:
    table = TABLES[draft]
    keys = st.sampled_from([*sorted(table), "x-custom"])

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        wrong = st.one_of(SCALARS, inner, st.lists(SCALARS, max_size=2), st.just({"a": 1}))

        def entry(key: str) -> st.SearchStrategy[tuple[str, Any]]:
            kind = table.get(key, mc.ANY)
            right = right_kind(kind, inner)
            # mostly values of the right kind: the cases where `conforms` says True
            return st.tuples(st.just(key), st.one_of(right, right, right, wrong))

        return st.lists(keys.flatmap(entry), max_size=4).map(dict)

    bottom = st.just({}) if draft == "4" else st.one_of(st.booleans(), st.just({}))
    return st.recursive(bottom, extend, max_leaves=12)


@pytest.mark.parametrize("draft", sorted(TABLES))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_conforms_only_where_jsonschema_finds_no_error(draft: str, data: st.DataObject) -> None:
    schema = data.draw(schema_strategy(draft))
    if conforms(schema, draft):
        assert jsonschema_valid(schema, draft), json.dumps(schema)


# Each keyword's value made wrong, in a schema otherwise valid in every draft.
WRONG = [
    ("minLength", -1),
    ("minLength", "3"),
    ("maxItems", True),
    ("multipleOf", 0),
    ("multipleOf", -2),
    ("minimum", "0"),
    ("type", "void"),
    ("type", []),
    ("type", ["string", "string"]),
    ("required", ["a", "a"]),
    ("required", [1]),
    ("properties", []),
    ("properties", {"a": 3}),
    ("items", 3),
    ("items", []),
    ("allOf", []),
    ("anyOf", {}),
    ("not", "x"),
    ("pattern", 5),
    ("enum", "x"),
    ("dependencies", {"a": 3}),
    ("dependencies", {"a": [1]}),
    ("uniqueItems", "yes"),
    ("format", 1),
    ("title", None),
]


@pytest.mark.parametrize("draft", sorted(TABLES))
@pytest.mark.parametrize(("keyword", "value"), WRONG, ids=[f"{k}={v!r}" for k, v in WRONG])
def test_wrong_keyword_values_are_refused(draft: str, keyword: str, value: Any) -> None:
    schema = {"type": "object", "properties": {"p": {keyword: value}}}
    assert conforms({"type": "object", "properties": {"p": {}}}, draft)
    assert not conforms(schema, draft)
    assert not jsonschema_valid(schema, draft)
    spec = {"$schema": URI[draft], **schema}
    with pytest.raises(SchemaError) as e:
        load_schema(spec)
    assert e.value.pointer.startswith("/properties/p")


@pytest.mark.parametrize(
    ("draft", "schema", "expected"),
    [
        ("4", {"exclusiveMinimum": True}, False),  # draft 4: needs "minimum" beside it
        ("4", {"exclusiveMinimum": True, "minimum": 0}, True),
        ("4", {"properties": {"a": True}}, False),  # no boolean schemas in draft 4
        ("4", {"additionalProperties": False}, True),
        ("4", {"enum": []}, False),
        ("4", {"enum": [1, 1.0]}, False),  # equal JSON numbers
        ("4", {"enum": [1, True, "1", None]}, True),
        ("6", {"enum": []}, True),
        ("2020-12", {"$anchor": "1a"}, False),
        ("2020-12", {"$anchor": "_a"}, True),
        ("2019-09", {"$anchor": "_a"}, False),
        ("2020-12", {"$id": "x#frag"}, False),
        ("2020-12", {"$id": "x#"}, True),
        ("7", {"$id": "x#frag"}, True),
        ("2020-12", {"prefixItems": [{}], "items": False}, True),
        ("2020-12", {"items": [{}]}, False),
        ("7", {"items": [{}], "additionalItems": False}, True),
        ("2020-12", {"$vocabulary": {"u": 1}}, False),
        ("2020-12", {"dependentRequired": {"a": ["b", "b"]}}, False),
    ],
)
def test_draft_specific_rules(draft: str, schema: Any, expected: bool) -> None:
    assert conforms(schema, draft) is expected
    assert jsonschema_valid(schema, draft) is expected


def _dialect(schema: Any) -> str | None:
    from corral.grammar.json_schema.load import DEFAULT_DIALECT, _normalise_dialect

    if isinstance(schema, dict) and "$schema" in schema:
        given = schema["$schema"]
        d = _normalise_dialect(given) if isinstance(given, str) else None
        return DRAFTS.get(d) if d else None
    return DRAFTS[DEFAULT_DIALECT]


def _differential(schemas: list[Any]) -> None:
    agree = 0
    checked = 0
    for schema in schemas:
        draft = _dialect(schema)
        if draft is None:
            continue
        checked += 1
        fast, slow = conforms(schema, draft), jsonschema_valid(schema, draft)
        assert slow or not fast, json.dumps(schema)[:500]
        agree += fast == slow
    assert checked and agree >= 0.97 * checked, (agree, checked)


def test_real_schemas_maskbench_sample() -> None:
    files = maskbench_files()
    if not files:
        pytest.skip(f"MaskBench is not at {MASKBENCH_DIR} (../shared missing)")
    docs = [json.loads(f.read_text(encoding="utf-8")) for f in stratified_sample(files, 400)]
    _differential([d["schema"] for d in docs])


def test_real_schemas_json_schema_test_suite() -> None:
    if not SUITE_DIR.is_dir():
        pytest.skip(f"the JSON-Schema-Test-Suite is not at {SUITE_DIR} (../shared missing)")
    schemas = []
    for draft in ("draft2020-12", "draft7"):
        for path in sorted((SUITE_DIR / draft).glob("*.json")):
            for case in json.loads(path.read_text(encoding="utf-8")):
                schema = case["schema"]
                if draft == "draft7" and isinstance(schema, dict) and "$schema" not in schema:
                    schema = {"$schema": URI["7"] + "#", **schema}
                schemas.append(schema)
    _differential(schemas)
