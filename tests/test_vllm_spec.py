"""The constraint a vLLM request carries (``extra_args["corral"]``): parsing, the wire form,
and the refusals with corral's own messages. Needs no vLLM."""

from __future__ import annotations

import contextlib
import enum
import importlib.util
import json
import logging
import subprocess
import sys
import types
from dataclasses import dataclass

import numpy as np
import pytest

import corral
from corral import CompileBudgetError, GrammarError, SchemaError, Vocabulary
from corral.grammar.json_schema.load import MAX_SCHEMA_DEPTH
from corral.integrations.vllm import spec as spec_module
from corral.integrations.vllm.spec import ConstraintSpec, SpecError, spec_of

SCHEMA = {"type": "object", "properties": {"zip": {"type": "integer"}, "city": {"type": "string"}}}


def test_wire_form_round_trips_and_keeps_property_order() -> None:
    spec = ConstraintSpec.of(schema=SCHEMA, whitespace="flexible")
    text = spec.to_json()
    assert ConstraintSpec.parse(text) == spec
    assert list(json.loads(text)["schema"]["properties"]) == ["zip", "city"]
    assert spec_of({"corral": text}) == spec
    assert spec_of({"other": 1}) is None and spec_of(None) is None
    g = ConstraintSpec.of(grammar='s: "a"', start="s")
    assert ConstraintSpec.parse(g.to_json()) == g and g.options == (("start", "s"),)


TOOLS_TAG = {
    "type": "structural_tag",
    "format": {
        "type": "triggered_tags",
        "triggers": ["<tool_call>"],
        "tags": [
            {
                "type": "tag",
                "begin": "<tool_call>",
                "content": {"type": "json_schema", "json_schema": SCHEMA},
                "end": "</tool_call>",
            }
        ],
    },
}


def test_monitors_travel_by_name_with_or_without_a_constraint() -> None:
    alone = ConstraintSpec.of(monitors=["python_members"], monitor_state={"path": "a.py"})
    assert alone.kind == "text" and alone.grammar() is None
    assert json.loads(alone.to_json()) == {
        "monitors": ["python_members"],
        "monitor_state": {"path": "a.py"},
    }
    both = ConstraintSpec.of(regex="[a-z]+", monitors=("a", "b"))
    assert both.monitors == ("a", "b") and both.base == ConstraintSpec.of(regex="[a-z]+")
    for spec in (alone, both):
        assert ConstraintSpec.parse(spec.to_json()) == spec
    with pytest.raises(SpecError, match="exactly one of"):
        ConstraintSpec.of()
    with pytest.raises(SpecError, match="at most 16"):
        ConstraintSpec.of(monitors=[f"m{i}" for i in range(17)])


def test_structural_tags_travel_as_json_and_build_their_grammar() -> None:
    spec = ConstraintSpec.parse({"structural_tag": TOOLS_TAG, "options": {"whitespace": "compact"}})
    assert spec.kind == "structural_tag"
    text = spec.to_json()
    assert ConstraintSpec.parse(text) == spec
    assert ConstraintSpec.parse({"structural_tag": json.dumps(TOOLS_TAG)}).source == spec.source
    assert spec.grammar().description == "structural tag"
    bad = {"structural_tag": {"type": "structural_tag", "format": {"type": "tagg"}}}
    with pytest.raises(GrammarError, match="/format/type"):
        ConstraintSpec.parse(bad).grammar()
    with pytest.raises(SpecError, match="'structural_tag' must be a JSON object"):
        ConstraintSpec.parse({"structural_tag": [1]})


def test_a_python_structural_tag_becomes_its_json() -> None:
    from corral.grammar import structural as st

    spec = st.Tag("<a>", st.JSONSchema(SCHEMA), "</a>")
    made = ConstraintSpec.of(structural_tag=spec, whitespace="compact")
    assert made == ConstraintSpec.parse(
        {"structural_tag": st.StructuralTag(spec).to_json(), "options": {"whitespace": "compact"}}
    )
    with pytest.raises(SpecError, match="structural_tag= must be"):
        ConstraintSpec.of(structural_tag=3)


def test_pydantic_models_become_schemas() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str
        age: int

    spec = ConstraintSpec.of(schema=Person)
    assert spec.kind == "schema" and json.loads(spec.source)["required"] == ["name", "age"]


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 12}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
REQUEST = {"tools": [WEATHER_TOOL], "model": "qwen", "tool_choice": "required"}


def test_tool_call_requests_travel_as_json_and_are_checked_without_a_vocabulary() -> None:
    from corral.integrations.vllm import extra_body

    spec = ConstraintSpec.of(tool_calls=REQUEST, whitespace="compact")
    assert spec.kind == "tool_calls" and ConstraintSpec.parse(spec.to_json()) == spec
    body = extra_body(tool_calls=REQUEST, schema_options={"whitespace": "compact"})
    assert body == {"vllm_xargs": {"corral": spec.to_json()}}
    assert spec_of(body["vllm_xargs"]) == spec
    assert spec.grammar().description == "structural tag"
    bad = {**REQUEST, "tools": [{"type": "function", "function": {"name": "a b"}}]}
    with pytest.raises(corral.InvalidArgumentError, match=r"tools\[0\]"):
        ConstraintSpec.of(tool_calls=bad).grammar()
    with pytest.raises(SchemaError, match="/properties/city/maxLength"):
        tool = json.loads(json.dumps(WEATHER_TOOL))
        tool["function"]["parameters"]["properties"]["city"]["maxLength"] = "x"
        ConstraintSpec.of(tool_calls={**REQUEST, "tools": [tool]}).grammar()
    with pytest.raises(SpecError, match="tool_calls= must be a mapping"):
        ConstraintSpec.of(tool_calls=[WEATHER_TOOL])  # type: ignore[arg-type]


def test_tool_call_markers_follow_the_engines_vocabulary() -> None:
    """Built in the engine: Qwen's ``<tool_call>`` is one token in a vocabulary that has it
    (added to GPT-2's here, as Qwen's tokenizer adds it) and plain text in one that does
    not (GPT-2's own), and each compiled grammar takes the call as that tokenizer writes
    it."""
    from support.tokenizers import tokenizer_path
    from transformers import AutoTokenizer

    path = tokenizer_path("gpt2")
    if path is None:
        pytest.skip("the gpt2 tokenizer is unavailable")
    spec = ConstraintSpec.of(tool_calls=REQUEST)
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    for added in ([], ["<tool_call>", "</tool_call>"]):
        tok = AutoTokenizer.from_pretrained(str(path))
        tok.add_tokens(added)
        vocab = corral.Vocabulary.from_hf(tok)
        ids = tok.encode(call, add_special_tokens=False)
        marker = vocab.special_tokens().get("<tool_call>")
        assert (marker is not None) == bool(added)
        assert ids[0] == marker if added else len(ids) > 20
        m = spec.compile(vocab).matcher()
        assert all(m.try_consume(t) for t in ids) and m.is_accepting(), added


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"tool_calls": [1]}, "'tool_calls' must be a JSON object"),
        ({"tool_calls": {"tools": []}}, "'tool_calls' needs 'model'"),
        ({"tool_calls": {**REQUEST, "vocab": 1}}, r"unknown field\(s\) \['vocab'\]"),
        ({"tool_calls": REQUEST, "start": "s"}, "'start' applies to a grammar"),
    ],
)
def test_malformed_tool_call_specs_are_refused(value, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        ConstraintSpec.parse(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ({"schema": 1}, "JSON object or boolean"),
        ({"schema": {}, "regex": "a"}, "exactly one of"),
        ({}, "got none"),
        ({"regex": "a", "options": {}}, "'options' applies to a schema"),
        ({"regex": "a", "start": "s"}, "'start' applies to a grammar"),
        ({"schema": {}, "options": {"nope": 1}}, r"unknown schema option\(s\) \['nope'\]"),
        ({"schema": {}, "options": {"whitespace": ["x"]}}, "JSON scalar"),
        ({"grammar": 3}, "must be a string"),
        ({"grammar": "s: 'a'", "start": ""}, "rule name"),
        ({"foo": 1}, r"unknown key\(s\) \['foo'\]"),
    ],
)
def test_malformed_specs_are_refused(value, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        ConstraintSpec.parse(value)


def test_bad_constraints_fail_with_corrals_errors() -> None:
    with pytest.raises(SchemaError, match="/properties/a/type"):
        ConstraintSpec.of(schema={"properties": {"a": {"type": "integr"}}}).grammar()
    with pytest.raises(GrammarError, match="line 1 column"):
        ConstraintSpec.of(grammar='start: "a" (').grammar()
    with pytest.raises(SpecError, match="exactly one"):
        ConstraintSpec.of(schema=SCHEMA, regex="a")
    with pytest.raises(SpecError, match="apply to schema=, structural_tag= and tool_calls= only"):
        ConstraintSpec.of(regex="a", whitespace="compact")


# the two inputs of the issue: far beyond Python's recursion limit
DEEP_SCHEMA = '{"schema": ' + '{"not":' * 100_000 + "{}" + "}" * 100_001
DEEP_ARRAY = "[" * 10**6


def _nested_not(levels: int) -> dict:
    """A schema of ``levels`` nested objects."""
    schema: dict = {}
    for _ in range(levels - 1):
        schema = {"not": schema}
    return schema


@pytest.mark.parametrize("text", [DEEP_SCHEMA, DEEP_ARRAY], ids=["deep-schema", "deep-array"])
def test_too_deep_json_is_a_spec_error(text: str) -> None:
    """JSON nested beyond the recursion limit: a SpecError (was RecursionError), by every
    path a request's text takes (str, bytes, spec_of, a schema given as JSON text)."""
    message = r"nests too deeply: expected at most 129 levels of objects and arrays"
    for value in (text, text.encode()):
        with pytest.raises(SpecError, match=message):
            ConstraintSpec.parse(value)
    with pytest.raises(SpecError, match=message):
        spec_of({"corral": text})
    with pytest.raises(SpecError, match=r"^'schema' nests too deeply: expected at most 128 "):
        ConstraintSpec.parse({"schema": text})
    with pytest.raises(SpecError, match=r"^'schema' nests too deeply"):
        ConstraintSpec.of(schema=text)


def test_spec_depth_is_the_schema_front_ends() -> None:
    """A schema may nest as deep as the JSON Schema front end allows (128 levels), no
    deeper; between the two checks nothing recurses without a guard (the canonical text,
    the wire form, the hash), and the front end answers with its own errors only."""
    assert spec_module.MAX_DEPTH == MAX_SCHEMA_DEPTH + 1
    deepest = ConstraintSpec.of(schema=_nested_not(MAX_SCHEMA_DEPTH))
    assert ConstraintSpec.parse(deepest.to_json()) == deepest
    assert hash(deepest) == hash(ConstraintSpec.parse(deepest.to_json()))
    with contextlib.suppress(CompileBudgetError):  # too deep to translate: corral's error
        deepest.grammar()
    too_deep = json.dumps({"schema": _nested_not(MAX_SCHEMA_DEPTH + 1)})
    with pytest.raises(SpecError, match=r"found more at /schema(/not)+/\.\.\.$"):
        ConstraintSpec.parse(too_deep)
    with pytest.raises(SpecError, match="nests too deeply"):
        ConstraintSpec.of(schema=_nested_not(MAX_SCHEMA_DEPTH + 1))
    cyclic: dict = {}
    cyclic["a"] = cyclic
    with pytest.raises(SpecError, match="nests too deeply"):
        ConstraintSpec.of(schema=cyclic)
    # a spec built by hand around a bad source: still a SpecError
    for method in (ConstraintSpec.to_json, ConstraintSpec.grammar):
        with pytest.raises(SpecError, match="schema source nests too deeply"):
            method(ConstraintSpec("schema", DEEP_ARRAY))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            '{"schema": {"type": "object"}, "schema": true}',
            r"^extra_args\['corral'\] has a repeated key: expected each key of an object "
            r"once, found 'schema' again at /schema$",
        ),
        (
            '{"regex": "a", "regex": "b"}',
            "found 'regex' again at /regex$",
        ),
        (
            '{"schema": {"properties": {"a/b": {"type": "string", "type": "integer"}}}}',
            "found 'type' again at /schema/properties/a~1b/type$",
        ),
        (
            '{"schema": {"enum": [{"k": 1, "k": 2}]}}',
            "found 'k' again at /schema/enum/0/k$",
        ),
        (
            '{"schema": {"type": "string"}, "options": {"whitespace": "compact", '
            '"whitespace": "flexible"}}',
            "found 'whitespace' again at /options/whitespace$",
        ),
        (
            {"schema": '{"required": ["a"], "required": []}'},
            r"^'schema' has a repeated key: .* found 'required' again at /required$",
        ),
    ],
)
def test_repeated_keys_are_refused_at_any_depth(value, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        ConstraintSpec.parse(value)


def test_repeated_key_in_schema_text_given_to_of() -> None:
    with pytest.raises(SpecError, match="found 'type' again at /type"):
        ConstraintSpec.of(schema='{"type": "string", "type": "integer"}')


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b'{"regex": "\xff"}', r"not UTF-8 text: .* found byte b'\\xff' at offset 11"),
        ('{"schema": {"const": NaN}}', "expected a JSON value, found NaN"),
        ('{"schema": {"const": 1e400}}', "expected a finite number, found inf at /schema/const"),
        ('{"schema": {"const": ' + "1" * 5000 + "}}", "not valid JSON: Exceeds the limit"),
        (
            {"schema": {1: "a", "1": "b"}},
            r"expected string keys, found the key 1 \(int\) at /schema",
        ),
        ({"schema": {"const": {1, 2}}}, "found set at /schema/const"),
        ({"regex": "\ud800"}, r"expected Unicode text, found a lone surrogate '\\ud800' at /regex"),
    ],
)
def test_what_is_not_json_data_is_a_spec_error(value, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        ConstraintSpec.parse(value)


def test_extra_args_that_are_not_a_mapping_hold_no_constraint() -> None:
    assert spec_of(["corral"]) is None  # type: ignore[arg-type]
    assert spec_of({}) is None


# -- the processor's row setup, against stand-ins for the vLLM names it imports ----------


@pytest.fixture
def processor(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """``corral.integrations.vllm.processor`` loaded against stand-ins for the vLLM
    classes it imports (none is used on the row-setup path), whether or not vLLM is
    installed; ``sys.modules`` is restored afterwards and the module is never put in it."""

    class MoveDirectionality(enum.Enum):
        UNIDIRECTIONAL = 0
        SWAP = 1

    @dataclass
    class BatchUpdate:
        batch_size: int
        removed: list
        added: list
        moved: list

    class VLLMValidationError(ValueError):
        def __init__(self, message: str, parameter: str = "") -> None:
            super().__init__(message)

    leaves = {
        "vllm.exceptions": {"VLLMValidationError": VLLMValidationError},
        "vllm.v1.sample.logits_processor": {
            "BatchUpdate": BatchUpdate,
            "MoveDirectionality": MoveDirectionality,
            "LogitsProcessor": type("LogitsProcessor", (), {}),
        },
        "vllm.v1.worker.gpu.sample.logits_processor.interface": {
            "LogitsProcessor": type("LogitsProcessor", (), {})
        },
    }
    for leaf in leaves:
        parts = leaf.split(".")
        for i in range(1, len(parts)):
            monkeypatch.setitem(
                sys.modules, ".".join(parts[:i]), types.ModuleType(".".join(parts[:i]))
            )
    for leaf, names in leaves.items():
        module = types.ModuleType(leaf)
        module.__dict__.update(names)
        monkeypatch.setitem(sys.modules, leaf, module)
    path = spec_module.__file__.replace("spec.py", "processor.py")
    found = importlib.util.spec_from_file_location("corral.integrations.vllm.processor", path)
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


def test_bad_constraint_in_the_worker_fails_its_own_row_only(processor, caplog) -> None:
    """A request that skipped admission, with a constraint that fails in any way, ends at
    its next step (only its end token allowed) and is logged; nothing escapes from the
    engine step, and the other rows are constrained as usual."""
    vocab = Vocabulary([b"a", b"b", b"0", b"1", b"{", b"}"], eos_token_ids=[5])
    eos = 5
    bad = [
        DEEP_SCHEMA,  # SpecError (was RecursionError)
        DEEP_ARRAY,
        '{"schema": {"type": "string"}, "schema": {"type": "integer"}}',  # repeated key
        '{"schema": "{\\"type\\": 1}"}',  # a bad schema: the compile fails
        '{"regex": "("}',
    ]

    class Params:
        def __init__(self, extra_args, stop_token_ids=(eos,)) -> None:
            self.extra_args = extra_args
            self.stop_token_ids = stop_token_ids
            self.eos_token_id = None

    class Exploding(dict):  # a bug below spec_of: the request fails, the step goes on
        def __getitem__(self, key):
            raise KeyError("boom")

    params = [Params({"corral": text}) for text in bad]
    params.append(Params(Exploding(corral="x")))
    params.append(Params({"corral": '{"regex": "a"}'}, stop_token_ids=["not a token id"]))
    params.append(Params({"corral": '{"regex": "[0-9]+"}'}))  # a good one
    params.append(Params(None))  # unconstrained
    proc = processor.CorralLogitsProcessor.for_vocabulary(vocab)
    added = [(i, p, [], []) for i, p in enumerate(params)]
    with caplog.at_level(logging.ERROR, logger="vllm.corral"):
        proc.update_state(processor.BatchUpdate(len(params), [], added, []))
        logits = proc.apply(np.zeros((len(params), vocab.size)))
    allowed = [np.flatnonzero(np.isfinite(row)).tolist() for row in logits]
    assert allowed[: len(params) - 2] == [[eos]] * (len(params) - 2)
    assert allowed[-2] == [2, 3] and allowed[-1] == list(range(vocab.size))
    log = caplog.text
    assert log.count("ends now") == len(params) - 2
    assert "SpecError: extra_args['corral'] nests too deeply" in log
    assert "found 'schema' again at /schema" in log
    assert "SchemaError" in log and "GrammarError" in log
    assert "KeyError: 'boom'" in log and "setting up the request at batch row 5 failed" in log
    assert "ValueError: invalid literal for int()" in log


def test_the_plugin_imports_without_numba() -> None:
    """vLLM imports the plugin in every worker before initialising it; on CPU that
    initialisation scans every loaded module for Triton kernels, and llvmlite's function
    wrappers (loaded with Numba) make the scan raise: the engine does not start."""
    pytest.importorskip("vllm", reason="vLLM is not installed (the README's vLLM test step has it)")
    code = (
        "import sys\n"
        "import corral.integrations.vllm.processor, corral.integrations.vllm.runner_v2\n"
        "loaded = [m for m in ('numba', 'llvmlite.binding') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
