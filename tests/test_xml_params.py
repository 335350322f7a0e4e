"""Qwen XML parameters (``qwen_xml_grammar``, a structural tag's ``style: "qwen_xml"``)
against XGrammar's ``qwen_xml`` style, the reference.

Checked three ways: concrete texts and generated ones are accepted by corral exactly when
XGrammar accepts them (apart from the differences corral documents: no whitespace after
the last parameter, JSON whitespace as corral's JSON options write it, no additional
parameter repeating a declared name); random walks over Qwen2's tokens never dead-end and
end in XGrammar's language; what the format cannot hold is refused by its JSON pointer.
"""

from __future__ import annotations

import functools
import json
import random
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tokenizers import load_vocab

import corral
from corral.errors import EmptyLanguageError, UnsupportedFeatureError
from corral.grammar.frontends import from_structural_tag
from corral.grammar.structural.xml_params import qwen_xml_grammar

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "the city"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"},
    },
    "required": ["city"],
}
MIXED = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "point": {
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x"],
            "additionalProperties": False,
        },
        "mode": {"enum": ["fast", "slow down", 3, None]},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "extra": {},
    },
    "required": ["name", "count"],
}
ADDITIONAL = {
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
    "required": ["b"],
    "additionalProperties": {"type": "integer"},
}
REFS = {  # as pydantic writes a model with an enum field and a nested model
    "$defs": {
        "Color": {"enum": ["red", "green"], "title": "Color", "type": "string"},
        "Point": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "additionalProperties": False,
        },
    },
    "properties": {"color": {"$ref": "#/$defs/Color"}, "at": {"$ref": "#/$defs/Point"}},
    "required": ["color"],
    "title": "Model",
    "type": "object",
}
EDGES = {
    "type": "object",
    "properties": {
        "e": {"enum": ["a\nb", "x.y", "", " lead"]},
        "sa": {"type": ["string", "array"], "items": {"type": "integer"}},
        "oi": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "n": {"type": ["integer", "null"]},
    },
}
SCHEMAS: dict[str, Any] = {
    "edges": EDGES,
    "weather": WEATHER,
    "mixed": MIXED,
    "additional": ADDITIONAL,
    "refs": REFS,
    "any": {},
    "empty": {"type": "object", "properties": {}, "additionalProperties": False},
}


def _p(name: str, value: str) -> str:
    return f"<parameter={name}>{value}</parameter>"


MIXED_OK = _p("name", "x") + _p("count", "1")
CALL = "<tool_call>\n<function=get_weather>\n{}\n</function>\n</tool_call>"
# (schema, text, whether both accept it)
AGREED: list[tuple[str, str, bool]] = [
    ("weather", _p("city", "Paris"), True),
    ("weather", "\n" + _p("city", "\nSan Francisco, CA\n") + "\n" + _p("days", "\n3\n"), True),
    ("weather", _p("city", "") + _p("unit", " celsius\n"), True),
    ("weather", _p("city", "a<b></param></parameter") + ">", False),
    ("weather", _p("city", "x\x00\r\t é 😀 </parameter"), True),
    ("weather", _p("city", "x") + _p("unit", "kelvin"), False),
    ("weather", _p("city", "x") + _p("unit", "Celsius"), False),
    ("weather", _p("city", "x") + _p("days", "3.5"), False),
    ("weather", _p("city", "x") + _p("days", "-0"), False),
    ("weather", _p("city", "x") + _p("days", "+1"), False),
    ("weather", _p("days", "3") + _p("city", "x"), False),
    ("weather", _p("days", "3"), False),
    ("weather", _p("city", "x") + _p("city", "y"), False),
    ("weather", _p("city", "x") + _p("wind", "y"), False),
    ("weather", "", False),
    ("weather", "<parameter=city>x", False),
    ("weather", "<parameter=city >x</parameter>", False),
    ("weather", "x" + _p("city", "y"), False),
    ("mixed", MIXED_OK, True),
    ("mixed", _p("name", "x") + _p("count", "1") + _p("flag", "true"), True),
    ("mixed", MIXED_OK + _p("ratio", " -1.5e3 ") + _p("flag", "\nfalse\n"), True),
    ("mixed", MIXED_OK + _p("tags", '["a", "</parameter>", "b\\"c"]'), True),
    ("mixed", MIXED_OK + _p("tags", "[]") + _p("point", '{"x": 1, "y": 2}'), True),
    ("mixed", MIXED_OK + _p("point", '{"x":1}'), True),
    ("mixed", MIXED_OK + _p("point", '{"y": 1}'), False),
    ("mixed", MIXED_OK + _p("point", '{"x": 1, "z": 2}'), False),
    ("mixed", MIXED_OK + _p("tags", "[1]"), False),
    ("mixed", MIXED_OK + _p("tags", "a"), False),
    ("mixed", MIXED_OK + _p("flag", "True"), False),
    ("mixed", MIXED_OK + _p("ratio", "1."), False),
    ("mixed", MIXED_OK + _p("mode", "slow down"), True),
    ("mixed", MIXED_OK + _p("mode", "\n3 "), True),
    ("mixed", MIXED_OK + _p("mode", "null"), True),
    ("mixed", MIXED_OK + _p("mode", '"fast"'), False),
    ("mixed", MIXED_OK + _p("mode", "slow"), False),
    ("mixed", MIXED_OK + _p("note", "null"), True),
    ("mixed", MIXED_OK + _p("note", "any text, even </param"), True),
    ("mixed", MIXED_OK + _p("extra", "free text"), True),
    ("mixed", MIXED_OK + _p("extra", '\n{"k": ["</parameter>"]}\n'), True),
    ("mixed", MIXED_OK + _p("extra", '["</parameter>"'), False),
    ("mixed", MIXED_OK + _p("extra", "x</parameter>y"), False),
    ("mixed", _p("name", "x"), False),
    ("mixed", _p("count", "1") + _p("name", "x"), False),
    ("additional", _p("b", "1"), True),
    ("additional", _p("a", "x") + _p("b", "1") + _p("c", "2") + "\n" + _p("_d9", " 3 "), True),
    ("additional", _p("b", "1") + _p("c", "2") + _p("c", "3"), True),
    ("additional", _p("b", "1") + _p("c", "x"), False),
    ("additional", _p("c", "2") + _p("b", "1"), False),
    ("additional", _p("b", "1") + _p("9c", "2"), False),
    ("additional", _p("b", "1") + _p("c-d", "2"), False),
    ("refs", _p("color", "red"), True),
    ("refs", _p("color", " green ") + _p("at", '{"x": 4}'), True),
    ("refs", _p("color", '"red"'), False),
    ("refs", _p("color", "red") + _p("at", '{"x": 4, "y": 1}'), False),
    ("any", "", True),
    ("any", _p("x", "1") + "\n" + _p("y", "[1, 2]") + _p("x", "again"), True),
    ("any", _p("x y", "1"), False),
    ("any", _p("x", "[</parameter>"), False),
    ("empty", "", True),
    ("empty", _p("x", "1"), False),
    ("edges", _p("e", "a\nb"), True),
    ("edges", _p("e", "xzy"), False),
    ("edges", _p("e", "  "), True),
    ("edges", _p("e", "  lead"), True),
    ("edges", _p("e", "lead"), False),
    ("edges", _p("sa", " [1, 2] ") + _p("oi", "5") + _p("n", "\nnull"), True),
    ("edges", _p("sa", '["a"]') + _p("oi", "text"), True),
    ("edges", _p("sa", "[1, ") + "</parameter>", False),
    ("edges", _p("n", "abc"), False),
    ("tool_call", CALL.format(_p("city", "\nParis\n") + "\n" + _p("days", "\n2\n")), True),
    ("tool_call", CALL.format("\n" + _p("city", "x")), True),
    ("tool_call", CALL.format(_p("days", "2")), False),
    ("tool_call", CALL.format(_p("city", "x")).replace("\n</f", "</f"), False),
]
# XGrammar accepts these, corral does not (see the module docs of xml_params)
DIFFERENT: list[tuple[str, str]] = [
    ("weather", _p("city", "x") + "\n"),  # whitespace after the last parameter
    ("mixed", MIXED_OK + _p("tags", '[ "a" ]')),  # JSON whitespace corral does not write
    ("additional", _p("a", "x") + _p("b", "1") + _p("a", "2")),  # a declared name again
    ("any", " \n"),
    ("tool_call", CALL.format(_p("city", "x") + "\n")),  # whitespace before the tag's end
    # a raw value holding where vLLM's qwen3_coder parser ends a value
    ("weather", _p("city", "<parameter=days>1") + _p("days", "2")),
    ("weather", _p("city", "a </function> b")),
    ("tool_call", CALL.format(_p("city", "x</function>"))),
]


TOOL_CALL = {  # how XGrammar's builtin Qwen3-Coder tag wraps a tool's parameters
    "type": "tag",
    "begin": "<tool_call>\n<function=get_weather>\n",
    "content": {"type": "json_schema", "json_schema": WEATHER, "style": "qwen_xml"},
    "end": "\n</function>\n</tool_call>",
}


def _format(name: str) -> dict[str, Any]:
    """The structural-tag format of a test grammar."""
    if name == "tool_call":
        return TOOL_CALL
    return {"type": "json_schema", "json_schema": SCHEMAS[name], "style": "qwen_xml"}


class _XGrammar:
    """XGrammar's language of a structural-tag format, decided by its matcher."""

    def __init__(self, fmt: dict[str, Any]) -> None:
        xgr = pytest.importorskip("xgrammar")
        spec = {"type": "structural_tag", "format": fmt}
        g = xgr.Grammar.from_structural_tag(json.dumps(spec))
        self.matcher = xgr.testing._get_matcher_from_grammar(g)

    def accepts(self, data: str | bytes, *, prefix: bool = False) -> bool:
        self.matcher.reset()
        if not self.matcher.accept_string(data):
            return False
        return prefix or bool(self.matcher.is_terminated())


@functools.cache
def _reference(name: str) -> _XGrammar:
    """XGrammar's language of a test grammar (the test is skipped without XGrammar)."""
    return _XGrammar(_format(name))


def _optional_reference(name: str) -> _XGrammar | None:
    """:func:`_reference`, or ``None`` without XGrammar (an optional test dependency, in
    the ``bench`` extra): the corral-only parts of a test still run."""
    try:
        import xgrammar  # noqa: F401
    except ImportError:
        return None
    return _reference(name)


@functools.cache
def _compiled(name: str, tok: str = "gpt2") -> Any:
    if name == "tool_call":
        grammar = from_structural_tag({"type": "structural_tag", "format": TOOL_CALL})
    else:
        grammar = qwen_xml_grammar(SCHEMAS[name], {})
    return corral.compile(grammar, load_vocab(tok))


def _accepts(name: str, text: str) -> bool:
    m = _compiled(name).matcher()
    return bool(m.consume_bytes(text.encode()) and m.is_accepting())


# -- concrete texts ----------------------------------------------------------------------
@pytest.mark.parametrize(("name", "text", "ok"), AGREED)
def test_corral_and_xgrammar_agree_on_concrete_texts(name: str, text: str, ok: bool) -> None:
    assert _accepts(name, text) == ok
    ref = _optional_reference(name)
    if ref is not None:
        assert ref.accepts(text) == ok, "the reference changed"


@pytest.mark.parametrize(("name", "text"), DIFFERENT)
def test_the_documented_differences_only_narrow_the_language(name: str, text: str) -> None:
    assert _reference(name).accepts(text)
    assert not _accepts(name, text)


# -- generated texts ---------------------------------------------------------------------
WS = st.sampled_from(["", "", "\n", " ", "\n\n", "\t \r\n"])
RAW = st.text(st.sampled_from(list("ab <>/=\né😀\x00")), max_size=8) | st.sampled_from(
    ["</parameter", "</parameter>", "<parameter=days>", "</function>", "celsius", "1", "true"]
)
JSON_VALUES = st.sampled_from(
    ["1", "-2", "0.5", "1e3", "true", "null", "[]", '["a", "b"]', '{"x": 1}', '{"x": 1, "y": -3}']
)
WEATHER_VALUES = {
    "city": RAW,
    "unit": st.sampled_from(["celsius", "fahrenheit", "kelvin", ""]) | RAW,
    "days": JSON_VALUES | RAW,
}
MIXED_VALUES = {
    "name": RAW,
    "count": JSON_VALUES,
    "ratio": JSON_VALUES,
    "flag": JSON_VALUES,
    "tags": JSON_VALUES | st.just('["</parameter>"]'),
    "point": JSON_VALUES,
    "mode": st.sampled_from(["fast", "slow down", "3", "null", "slow"]) | JSON_VALUES,
    "note": RAW | JSON_VALUES,
    "extra": RAW | JSON_VALUES,
}


@st.composite
def _object_texts(draw: Any, values: dict[str, Any]) -> str:
    """Parameters in schema order (mostly), some left out, repeated or unknown."""
    names = [n for n in values if draw(st.booleans()) or draw(st.booleans())]
    if draw(st.integers(0, 9)) == 0:
        names = draw(st.permutations([*names, "unknown"]))
    out = []
    for n in names:
        value = draw(values.get(n, RAW))
        if n in ("count", "ratio", "flag", "tags", "point", "mode", "days"):
            value = draw(WS) + value + draw(WS)
        out.append(draw(WS) + _p(n, value))
    return "".join(out)


@settings(max_examples=150, deadline=None)
@given(text=_object_texts(WEATHER_VALUES))
def test_generated_weather_texts_agree_with_xgrammar(text: str) -> None:
    _agree("weather", text)


@settings(max_examples=150, deadline=None)
@given(text=_object_texts(MIXED_VALUES))
def test_generated_mixed_texts_agree_with_xgrammar(text: str) -> None:
    _agree("mixed", text)


def _agree(name: str, text: str) -> None:
    """The two agree, but where corral refuses a raw value holding ``<parameter=`` or
    ``</function>`` (a documented difference)."""
    ours, theirs = _accepts(name, text), _reference(name).accepts(text)
    if theirs and not ours:
        values = re.findall(r"<parameter=[^>]*>(.*?)</parameter>", text, re.DOTALL)
        assert any("<parameter=" in v or "</function>" in v for v in values), text
        return
    assert ours == theirs, text


# -- random walks ------------------------------------------------------------------------
CLOSERS = ("</parameter>", "</parameter>\n<parameter=")


class _Walker:
    """Token choices for walks: mostly pieces of valid texts, often the next piece of a
    ``</parameter>`` the text has begun (so that walks close values and end)."""

    def __init__(self, vocab: Any, texts: list[str]) -> None:
        blob = "".join(texts + list(CLOSERS)).encode()
        by_bytes: dict[bytes, int] = {}
        for i in range(len(vocab)):
            b = vocab.token_bytes(i)
            if vocab.kind(i) == "normal" and 0 < len(b) <= 12 and b in blob:
                by_bytes.setdefault(b, i)
        self.piece = np.zeros(len(vocab), bool)
        self.piece[list(by_bytes.values())] = True
        self.ordinary = np.ones(len(vocab), bool)
        self.ordinary[list(vocab.eos_token_ids)] = False
        # for each closer and how much of it is written, the tokens that continue it
        self.next: dict[tuple[bytes, int], list[int]] = {}
        for closer in (c.encode() for c in CLOSERS):
            for k in range(len(closer)):
                pieces = (closer[k:j] for j in range(k + 1, len(closer) + 1))
                self.next[closer, k] = [by_bytes[p] for p in pieces if p in by_bytes]

    def allowed(self, m: Any) -> np.ndarray:
        """The matcher's allowed tokens but end-of-sequence ones."""
        ids = m.allowed_token_ids()
        return ids[self.ordinary[ids]]

    def choose(self, text: bytes, allowed: np.ndarray, rng: random.Random) -> int:
        ok = np.zeros(self.piece.shape, bool)
        ok[allowed] = True
        closing = [t for t in self._closing(text) if ok[t]]
        if closing and rng.random() < 0.6:
            return rng.choice(closing)
        good = allowed[self.piece[allowed]]
        pool = good if good.size and rng.random() < 0.9 else allowed
        return int(pool[rng.randrange(pool.size)])

    def _closing(self, text: bytes) -> list[int]:
        """Tokens that continue a closer the end of ``text`` has begun (or start one)."""
        out: list[int] = []
        for closer in (c.encode() for c in CLOSERS):
            longest = range(min(len(closer) - 1, len(text)), -1, -1)
            k = next(k for k in longest if text.endswith(closer[:k]))
            out.extend(self.next[closer, k])
        return out


@pytest.mark.parametrize("name", ["weather", "mixed", "additional", "any", "tool_call"])
def test_random_walks_never_dead_end_and_stay_in_xgrammar_language(name: str) -> None:
    """Random allowed tokens until the matcher accepts (taken with some probability):
    every text read is a prefix XGrammar reads too, every accepted text is in its
    language, and no state without acceptance lacks an allowed token."""
    vocab = load_vocab("qwen2")
    compiled = _compiled(name, "qwen2")
    ref = _optional_reference(name)  # without XGrammar: dead ends and endings only
    walker = _Walker(vocab, [t for n, t, ok in AGREED if n == name and ok])
    rng = random.Random(name)
    accepted = 0
    for _ in range(20):
        m = compiled.matcher()
        ids: list[int] = []
        for _step in range(80):
            allowed = walker.allowed(m)
            if m.is_accepting() and (not allowed.size or rng.random() < 0.5):
                break
            text = vocab.decode(ids)
            assert allowed.size, f"dead end after {text!r}"
            t = walker.choose(text, allowed, rng)
            m.consume(t)
            ids.append(t)
            if ref is not None:
                assert ref.accepts(vocab.decode(ids), prefix=True), vocab.decode(ids)
        if m.is_accepting():
            accepted += 1
            if ref is not None:
                assert ref.accepts(vocab.decode(ids)), vocab.decode(ids)
    assert accepted >= 3


# -- refusals ----------------------------------------------------------------------------
def _obj(prop: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": prop}, **extra}


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        (_obj({"type": "string", "pattern": "^a+$"}), "/properties/x/pattern"),
        (_obj({"type": "string", "format": "date"}), "/properties/x/format"),
        (_obj({"type": "string", "minLength": 2}), "/properties/x/minLength"),
        (_obj({"type": ["string", "null"], "maxLength": 2}), "/properties/x/maxLength"),
        (
            _obj({"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "a"}]}),
            "/properties/x/anyOf/1/pattern",
        ),
        (_obj({"oneOf": [{"type": "string"}, {"enum": ["a"]}]}), "/properties/x/oneOf"),
        (_obj({"allOf": [{"type": "string"}]}), "/properties/x/allOf"),
        (_obj({"type": "string", "not": {"const": "a"}}), "/properties/x/not"),
        (_obj({"minimum": 1}), "/properties/x/minimum"),
        (_obj({"enum": ["a", 1.5]}), "/properties/x/enum/1"),
        (_obj({"enum": ["a", "b</parameter>"]}), "/properties/x/enum/1"),
        (_obj({"enum": ["<parameter=y>", "b"]}), "/properties/x/enum/0"),
        (_obj({"const": "a</function>"}), "/properties/x/const"),
        (
            _obj({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
            "/properties/x/uniqueItems",
        ),
        (
            _obj({"$ref": "#/$defs/S"}, **{"$defs": {"S": {"type": "string", "pattern": "a"}}}),
            "/$defs/S/pattern",
        ),
        ({"type": "string"}, "/type"),
        ({"type": ["object", "null"]}, "/type"),
        (_obj({"type": "string"}, patternProperties={"^y": {}}), "/patternProperties"),
        (_obj({"type": "string"}, minProperties=1), "/minProperties"),
        (_obj({"type": "string"}, required=["x", "y"]), "/required/1"),
    ],
)
def test_what_the_format_cannot_hold_is_refused_by_its_pointer(schema: Any, pointer: str) -> None:
    with pytest.raises(UnsupportedFeatureError) as e:
        qwen_xml_grammar(schema, {})
    assert e.value.location.pointer == pointer


def test_a_refusal_inside_a_structural_tag_names_the_pointer_below_the_tag() -> None:
    schema = _obj({"type": "string", "pattern": "^a+$"})
    tag = {"type": "json_schema", "json_schema": schema, "style": "qwen_xml"}
    with pytest.raises(UnsupportedFeatureError) as e:
        from_structural_tag({"type": "structural_tag", "format": tag})
    assert e.value.location.pointer == "/format/json_schema/properties/x/pattern"


def test_a_required_property_with_no_value_is_an_empty_language() -> None:
    with pytest.raises(EmptyLanguageError, match="'x'"):
        qwen_xml_grammar(_obj({"enum": ["a"], "type": "integer"}, required=["x"]), {})
    with pytest.raises(EmptyLanguageError):
        qwen_xml_grammar(False, {})
    # an optional one is left out
    g = qwen_xml_grammar(_obj(False), {})
    m = corral.compile(g, load_vocab("gpt2")).matcher()
    assert m.is_accepting() and not m.consume_bytes(b"<parameter=x>")


def test_json_values_follow_the_json_options() -> None:
    schema = _obj({"type": "array", "items": {"type": "integer"}}, required=["x"])
    text = _p("x", "[1,\n  2]").encode()
    for options, ok in [({}, False), ({"whitespace": "flexible"}, True)]:
        m = corral.compile(qwen_xml_grammar(schema, options), load_vocab("gpt2")).matcher()
        assert bool(m.consume_bytes(text) and m.is_accepting()) == ok
