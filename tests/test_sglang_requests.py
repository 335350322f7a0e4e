"""SGLang's grammar keys read as corral specs (``corral.integrations.sglang.requests``) and
the serving options mapped to corral's JSON options. Needs no SGLang: the backend's own
tests (``test_sglang_backend.py``) run where SGLang is installed."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from support.tokenizers import load_vocab

import corral
from corral.grammar.structural.read import StructuralTagError
from corral.integrations.sglang import json_options_of
from corral.integrations.sglang.requests import (
    Request,
    from_legacy_structural_tag,
    read_key,
)

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 10}},
    "required": ["city"],
    "additionalProperties": False,
}
LEGACY = {  # what SGLang's function-call code sends (and llguidance's backend requires)
    "type": "structural_tag",
    "structures": [
        {"begin": "<function=get_weather>", "schema": WEATHER, "end": "</function>"},
        {"begin": "<function=now>", "end": "</function>"},
    ],
    "triggers": ["<function="],
}


def test_keys_name_their_front_end() -> None:
    text = json.dumps(WEATHER)
    assert read_key("json", text) == Request("json", text)
    assert read_key("json", "$$ANY$$") == Request("json", True)
    assert read_key("regex", "[0-9]+") == Request("regex", "[0-9]+")
    current = {"type": "structural_tag", "format": {"type": "const_string", "value": "hi"}}
    assert read_key("structural_tag", json.dumps(current)) == Request("structural_tag", current)


@pytest.mark.parametrize("key_type", ["ebnf", "full_assistant_ebnf"])
def test_gbnf_is_refused_naming_the_lark_route(key_type: str) -> None:
    with pytest.raises(corral.UnsupportedFeatureError, match="GBNF") as e:
        read_key(key_type, 'root ::= "yes" | "no"')
    assert '"type": "grammar"' in str(e.value)


def test_unknown_key_types_and_non_json_tags_are_refused() -> None:
    with pytest.raises(corral.UnsupportedFeatureError, match="'xml'"):
        read_key("xml", "<a/>")
    with pytest.raises(StructuralTagError, match="not JSON"):
        read_key("structural_tag", "{")


def test_the_legacy_form_is_xgrammars_conversion() -> None:
    """Equal to what XGrammar's ``StructuralTag.from_legacy_structural_tag`` gives (its
    default fields left out), which SGLang's XGrammar backend compiles."""
    xgr = pytest.importorskip("xgrammar")
    items = [
        xgr.StructuralTagItem(begin=s["begin"], schema=s.get("schema", {}), end=s["end"])
        for s in LEGACY["structures"]
    ]
    theirs = xgr.StructuralTag.from_legacy_structural_tag(items, LEGACY["triggers"]).model_dump()
    defaults = {"style": "json", "any_order": False, "max_whitespace_cnt": None, "excludes": []}
    fmt = theirs["format"]
    for tag in fmt["tags"]:
        tag["content"] = {k: v for k, v in tag["content"].items() if defaults.get(k, 0) != v}
    fmt.pop("stop_after_first")
    fmt.pop("excludes")
    ours = from_legacy_structural_tag(LEGACY)
    ours["format"]["tags"][1]["content"]["json_schema"] = {}  # XGrammar writes {} for none
    assert ours == theirs


def test_a_legacy_tag_constrains_as_its_structures_say() -> None:
    vocab = load_vocab("gpt2")
    compiled = corral.compile(read_key("structural_tag", json.dumps(LEGACY)).spec, vocab)

    def accepts(text: str) -> bool:
        m = compiled.matcher()
        return bool(m.consume_bytes(text.encode()) and m.is_accepting())

    assert accepts('Sure. <function=get_weather>{"city": "Oslo"}</function> Done.')
    assert accepts("<function=now>[1, {}]</function>")  # no schema: any JSON value
    assert accepts("no call at all")  # at_least_one defaults to false
    assert not accepts('<function=get_weather>{"town": "Oslo"}</function>')
    assert not accepts("<function=later>{}</function>")
    required = {**LEGACY, "at_least_one": True}
    compiled = corral.compile(from_legacy_structural_tag(required), vocab)
    m = compiled.matcher()
    assert not m.consume_bytes(b"no call at all")  # as XGrammar: a call comes first
    m = compiled.matcher()
    assert m.consume_bytes(b"<function=now>{}</function>") and m.is_accepting()


@pytest.mark.parametrize(
    ("tag", "pointer"),
    [
        ({**LEGACY, "structures": []}, "/structures"),
        ({**LEGACY, "triggers": [""]}, "/triggers"),
        ({**LEGACY, "at_least_one": "yes"}, "/at_least_one"),
        ({**LEGACY, "extra": 1}, "/extra"),
        ({**LEGACY, "structures": [{"begin": "<a>", "end": 3}]}, "/structures/0/end"),
        ({**LEGACY, "structures": [{"begin": "<a>", "end": "</a>", "x": 1}]}, "/structures/0/x"),
        ({**LEGACY, "structures": ["<a>"]}, "/structures/0"),
    ],
)
def test_malformed_legacy_tags_are_refused_by_pointer(tag: dict, pointer: str) -> None:
    with pytest.raises(StructuralTagError) as e:
        read_key("structural_tag", json.dumps(tag))
    assert e.value.pointer == pointer


def test_serving_options_become_json_options() -> None:
    serving = SimpleNamespace(
        constrained_json_whitespace_pattern=None,
        constrained_json_disable_any_whitespace=False,
        constrained_json_max_whitespace_cnt=None,
    )
    assert json_options_of(serving) == {}  # compact JSON
    serving.constrained_json_max_whitespace_cnt = 2
    assert json_options_of(serving) == {"whitespace": "flexible", "max_whitespace": 2}
    serving.constrained_json_disable_any_whitespace = True
    assert json_options_of(serving) == {}
    serving.constrained_json_whitespace_pattern = r"[ \n]*"
    with pytest.raises(ValueError, match="--constrained-json-max-whitespace-cnt"):
        json_options_of(serving)
    assert json_options_of(None) == {}


def test_corrals_tool_call_formats_travel_as_structural_tags() -> None:
    """``corral.tool_calls``'s format, as the JSON a client sends in ``structural_tag``,
    reads back into the same constraint."""
    from corral.grammar.structural import StructuralTag

    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
    vocab = load_vocab("gpt2")
    spec = corral.tool_calls(tools, "qwen2_5", tool_choice="required", vocab=vocab)
    wire = StructuralTag(spec).to_json()
    request = read_key("structural_tag", wire if isinstance(wire, str) else json.dumps(wire))
    m = corral.compile(request.spec, vocab).matcher()
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    assert m.consume_bytes(call.encode()) and m.is_accepting()
    m = corral.compile(request.spec, vocab).matcher()
    assert not m.consume_bytes(b"Sure, no call.")  # tool_choice="required"
