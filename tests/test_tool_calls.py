"""corral.tool_calls / corral.parse_tool_calls: each family's format, token by token with
real tokenizers (their special tokens added as the family's tokenizer has them), wrong
outputs refused, random walks read back and validated, errors, and XGrammar's grammar on
the same outputs."""

# ruff: noqa: E501  (model outputs are written out whole, one literal each)

from __future__ import annotations

import functools
import itertools
import json
import random
from typing import Any

import jsonschema
import numpy as np
import pytest
from support.tokenizers import tokenizer_path

import corral
from corral.grammar.structural import read_structural_tag
from corral.grammar.tool_calls import FORMATS, ToolCallParseError, family_of

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"enum": ["c", "f"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "tags": {"type": "array", "items": {"enum": ["news", "web", "images"]}},
                "limit": {"type": "integer", "minimum": 1},
            },
            "required": ["query"],
        },
    },
}
NOW = {"type": "function", "function": {"name": "now", "description": "The time."}}
TOOLS = [WEATHER, SEARCH, NOW]
SCHEMAS = {
    "get_weather": WEATHER["function"]["parameters"],
    "search": SEARCH["function"]["parameters"],
    "now": {"type": "object", "properties": {}, "additionalProperties": False},
}
FORCE_SEARCH = {"type": "function", "function": {"name": "search"}}

QWEN_ADDED = ["<tool_call>", "</tool_call>", "<think>", "</think>"]
DS_ADDED = [
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "<think>",
    "</think>",
]
KIMI_SPECIAL = [
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<think>",
    "</think>",
]
HARMONY_SPECIAL = [
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|constrain|>",
    "<|call|>",
    "<|end|>",
    "<|return|>",
]

# family -> (base tokenizer, added special tokens, added unmarked tokens, EOS token text)
SETUPS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], str | None]] = {
    "llama": ("llama3", ("<|python_tag|>",), (), None),
    "qwen": ("qwen2", (), tuple(QWEN_ADDED), None),
    "mistral": ("llama2", ("[TOOL_CALLS]",), (), None),
    # special: corral reads an unmarked added token outside the byte alphabet as b"" (see
    # the report), though DeepSeek's tokenizer leaves these unmarked
    "deepseek": ("deepseek-coder", tuple(DS_ADDED), (), None),
    "kimi": ("gpt2", tuple(KIMI_SPECIAL), (), None),
    "harmony": ("gpt2", tuple(HARMONY_SPECIAL), (), "<|return|>"),
    "gpt2": ("gpt2", (), (), None),
}
SETUP_OF = {
    "llama": "llama",
    "qwen": "qwen",
    "qwen2_5": "qwen",
    "qwen3_coder": "qwen",
    "mistral": "mistral",
    "deepseek_r1": "deepseek",
    "deepseek_v3_1": "deepseek",
    "kimi": "kimi",
    "harmony": "harmony",
}


@functools.cache
def env(setup: str, added_tokens: str = "whitespace") -> tuple[Any, Any]:
    """A fresh tokenizer with the family's tokens added, and its corral vocabulary."""
    base, special, plain, eos = SETUPS[setup]
    path = tokenizer_path(base)
    if path is None:
        pytest.skip(f"tokenizer {base!r} unavailable")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    if special:
        tok.add_special_tokens({"additional_special_tokens": list(special)})
    if plain:
        tok.add_tokens(list(plain))
    eos_ids = None if eos is None else [tok.convert_tokens_to_ids(eos)]
    return tok, corral.Vocabulary.from_hf(tok, eos_token_ids=eos_ids, added_tokens=added_tokens)


@pytest.fixture(scope="module", autouse=True)
def _module_caches() -> Any:
    """Each tokenizer's vocabulary and each spec are built once in this module (the cached
    helpers below), and released when it ends."""
    yield
    for cached in (env, compiled, _walk_bias):
        cached.cache_clear()


def run(comp: Any, tok: Any, vocab: Any, text: str) -> bool:
    """Whether ``text`` (tokenized as the model would write it) is accepted, checking the
    mask against ``consume`` at every token."""
    ids = tok.encode(text, add_special_tokens=False)
    assert vocab.decode(ids).decode() == text, "the tokenizer does not round-trip the text"
    m = comp.matcher()
    for i in ids:
        allowed = i in set(m.allowed_token_ids().tolist())
        assert m.try_consume(i) == allowed
        if not allowed:
            return False
    return m.is_accepting()


def accepts(family: str, text: str, **kw: Any) -> bool:
    tok, vocab = env(SETUP_OF[family])
    return run(compiled(family, **_key(kw)), tok, vocab, text)


def _key(kw: dict[str, Any]) -> dict[str, Any]:
    # tool_choice dicts are unhashable: pass them to the cache as JSON
    return {k: (json.dumps(v) if isinstance(v, dict) else v) for k, v in kw.items()}


@functools.cache
def compiled(family: str, **kw: Any) -> Any:
    """The compiled spec (``kw`` hashable: a ``tool_choice`` dict as JSON text)."""
    if isinstance(kw.get("tool_choice"), str) and kw["tool_choice"].startswith("{"):
        kw["tool_choice"] = json.loads(kw["tool_choice"])
    _, vocab = env(SETUP_OF[family])
    return corral.compile(corral.tool_calls(TOOLS, family, **kw), vocab)


# -- hand-written outputs, as each model writes them ------------------------------------------
W = '{"city": "Paris", "unit": "c"}'
S = '{"query": "corral grammars", "tags": ["news", "web"], "limit": 3}'
GOOD: dict[str, list[tuple[dict[str, Any], str, list[tuple[str, dict[str, Any]]], str | None]]] = {
    # family: [(kwargs, text, expected calls, expected reasoning)]
    "llama": [
        (
            {},
            f'Let me check. {{"name": "get_weather", "parameters": {W}}}',
            [("get_weather", json.loads(W))],
            None,
        ),
        (
            {},
            f'<|python_tag|>{{"name": "get_weather", "parameters": {W}}}; {{"name": "now", "parameters": {{}}}}',
            [("get_weather", json.loads(W)), ("now", {})],
            None,
        ),
        ({}, "Hello! How can I help?", [], None),
        (
            {"tool_choice": "required"},
            f'{{"name": "search", "parameters": {S}}}',
            [("search", json.loads(S))],
            None,
        ),
        (
            {"tool_choice": FORCE_SEARCH},
            f'<|python_tag|>{{"name": "search", "parameters": {S}}}',
            [("search", json.loads(S))],
            None,
        ),
    ],
    "qwen": [
        (
            {},
            f'<think>\nThe user wants the weather.\n</think>\n\nLet me check.\n<tool_call>\n{{"name": "get_weather", "arguments": {W}}}\n</tool_call>\n<tool_call>\n{{"name": "now", "arguments": {{}}}}\n</tool_call>',
            [("get_weather", json.loads(W)), ("now", {})],
            "\nThe user wants the weather.\n",
        ),
        ({"reasoning": "disabled"}, "Paris is sunny today.", [], None),
        (
            {"reasoning": "enabled", "tool_choice": "required"},
            f'<think>ok</think>\n\n<tool_call>\n{{"name": "search", "arguments": {S}}}\n</tool_call>',
            [("search", json.loads(S))],
            "ok",
        ),
        (
            {"reasoning": "prefilled", "parallel": False},
            f'\nsearch it\n</think>\n\n<tool_call>\n{{"name": "search", "arguments": {S}}}\n</tool_call>',
            [("search", json.loads(S))],
            "\nsearch it\n",
        ),
    ],
    "qwen2_5": [
        (
            {},
            f'<tool_call>\n{{"name": "get_weather", "arguments": {W}}}\n</tool_call>',
            [("get_weather", json.loads(W))],
            None,
        ),
    ],
    "qwen3_coder": [
        (
            {},
            "<think>\nweather\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>",
            [("get_weather", {"city": "Paris", "unit": "c"})],
            "\nweather\n",
        ),
        (
            {"reasoning": "disabled"},
            'Searching.\n<tool_call>\n<function=search>\n<parameter=query>\n5 < 6\n</parameter>\n<parameter=tags>\n["news"]\n</parameter>\n<parameter=limit>\n3\n</parameter>\n</function>\n</tool_call>',
            [("search", {"query": "5 < 6", "tags": ["news"], "limit": 3})],
            None,
        ),
        (
            {"tool_choice": "required", "reasoning": "disabled"},
            "<tool_call>\n<function=now>\n\n</function>\n</tool_call>",
            [("now", {})],
            None,
        ),
    ],
    "mistral": [
        (
            {},
            f'[TOOL_CALLS] [{{"name": "get_weather", "arguments": {W}}}, {{"name": "now", "arguments": {{}}}}]',
            [("get_weather", json.loads(W)), ("now", {})],
            None,
        ),
        (
            {},
            f' Sure.[TOOL_CALLS][{{"name": "search", "arguments": {S}}}]',
            [("search", json.loads(S))],
            None,
        ),
        (
            {"tool_choice": "required"},
            f'[TOOL_CALLS][{{"name": "search", "arguments": {S}}}]',
            [("search", json.loads(S))],
            None,
        ),
    ],
    "deepseek_r1": [
        (
            {},
            f"<think>\nweather\n</think>Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{W}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>now\n```json\n{{}}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            [("get_weather", json.loads(W)), ("now", {})],
            "\nweather\n",
        ),
        ({"reasoning": "prefilled"}, "\nJust answer.\n</think>\n\nHello.", [], "\nJust answer.\n"),
    ],
    "deepseek_v3_1": [
        (
            {"reasoning": "prefilled"},
            f"weather</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{W}<｜tool▁call▁end｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{S}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            [("get_weather", json.loads(W)), ("search", json.loads(S))],
            "weather",
        ),
        (
            {"reasoning": "disabled", "tool_choice": "required"},
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>now<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            [("now", {})],
            None,
        ),
    ],
    "kimi": [
        (
            {},
            f"<think>weather</think>Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{W}<|tool_call_end|><|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>{{}}<|tool_call_end|><|tool_calls_section_end|>",
            [("get_weather", json.loads(W)), ("now", {})],
            "weather",
        ),
    ],
    "harmony": [
        (
            {},
            f"<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{W}<|call|>",
            [("get_weather", json.loads(W))],
            "Need the weather.",
        ),
        (
            {},
            "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Hello!",
            [],
            "Easy.",
        ),
        (
            {"tool_choice": "required", "reasoning": "disabled"},
            f"<|start|>assistant to=functions.search<|channel|>commentary json<|message|>{S}<|call|><|start|>assistant<|channel|>commentary to=functions.now<|constrain|>json<|message|>{{}}<|call|>".removeprefix(
                "<|start|>assistant"
            ),
            [("search", json.loads(S)), ("now", {})],
            None,
        ),
    ],
}

# (kwargs, text) that must be refused
BAD: dict[str, list[tuple[dict[str, Any], str]]] = {
    "llama": [
        ({"tool_choice": "required"}, '{"name": "get_wether", "parameters": {"city": "Paris"}}'),
        ({"tool_choice": "required"}, '{"name": "get_weather", "parameters": {"unit": "c"}}'),
        ({"tool_choice": "required"}, 'Sure. {"name": "now", "parameters": {}}'),
        (
            {"parallel": False},
            '<|python_tag|>{"name": "now", "parameters": {}}; {"name": "now", "parameters": {}}',
        ),
        ({"tool_choice": "none"}, 'x {"name": "now", "parameters": {}}'),
    ],
    "qwen": [
        (
            {},
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 11}}\n</tool_call>',
        ),
        (
            {"tool_choice": "required"},
            'Ok.<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>',
        ),
        (
            {"parallel": False},
            '<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call><tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>',
        ),
        ({"reasoning": "disabled"}, "<think>x</think>\n\nHi"),
        ({"reasoning": "enabled"}, "Hi"),
        (
            {"tool_choice": FORCE_SEARCH},
            '<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>',
        ),
        ({"tool_choice": "none"}, 'Hi <tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>'),
    ],
    "qwen3_coder": [
        (
            {},
            "<tool_call>\n<function=get_weather>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>",
        ),
        (
            {},
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nk\n</parameter>\n</function>\n</tool_call>",
        ),
        (
            {},
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>",
        ),
    ],
    "mistral": [
        ({"tool_choice": "required"}, ' Ok.[TOOL_CALLS][{"name": "now", "arguments": {}}]'),
        (
            {"parallel": False},
            '[TOOL_CALLS][{"name": "now", "arguments": {}}, {"name": "now", "arguments": {}}]',
        ),
        ({}, '[TOOL_CALLS][{"name": "now", "arguments": {}}] and more'),
    ],
    "deepseek_v3_1": [
        (
            {"reasoning": "disabled"},
            '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{"tags": []}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        ),
    ],
    "kimi": [
        (
            {"reasoning": "disabled", "parallel": False},
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.now:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
        ),
    ],
    "harmony": [
        ({"reasoning": "enabled"}, "<|channel|>final<|message|>Hello!"),
        ({"tool_choice": "required"}, "<|channel|>final<|message|>Hello!"),
        (
            {"parallel": False},
            "<|channel|>commentary to=functions.now<|constrain|>json<|message|>{}<|call|><|start|>assistant<|channel|>final<|message|>Hi",
        ),
    ],
}


@pytest.mark.parametrize(
    "family,index", [(fam, i) for fam, cases in GOOD.items() for i in range(len(cases))]
)
def test_hand_written_output_is_accepted_and_reads_back(family: str, index: int) -> None:
    kw, text, calls, reasoning = GOOD[family][index]
    assert accepts(family, text, **kw)
    out = corral.parse_tool_calls(text, family, tools=TOOLS)
    assert [(c["name"], c["arguments"]) for c in out.tool_calls] == calls
    assert out.reasoning == reasoning


@pytest.mark.parametrize(
    "family,index", [(fam, i) for fam, cases in BAD.items() for i in range(len(cases))]
)
def test_wrong_output_is_refused(family: str, index: int) -> None:
    kw, text = BAD[family][index]
    assert not accepts(family, text, **kw)


@pytest.mark.parametrize("family", sorted(FORMATS))
def test_the_documented_example_is_accepted(family: str) -> None:
    example = FORMATS[family].example
    assert accepts(family, example)
    out = corral.parse_tool_calls(example, family, tools=TOOLS)
    assert out.tool_calls == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert out.reasoning == (None if family in ("llama", "mistral", "qwen2_5") else "TEXT")


def test_every_family_is_covered() -> None:
    assert set(GOOD) == set(FORMATS)
    assert {family_of(f) for f in FORMATS} == set(FORMATS)


# -- random walks: every accepted output reads back, with valid arguments ---------------------
WALK_CONFIGS = [
    {},
    {"tool_choice": "required"},
    {"tool_choice": "required", "parallel": False},
    {"tool_choice": FORCE_SEARCH},
    {"tool_choice": "none"},
]
WALKS, CAP = 6, 300


def _walk_configs(family: str) -> list[dict[str, Any]]:
    """The configurations walked: :data:`WALK_CONFIGS` and one reasoning mode."""
    if not FORMATS[family].reasoning:
        mode = "disabled"
    else:
        mode = "enabled" if family == "harmony" else "prefilled"
    return [*WALK_CONFIGS, {"reasoning": mode}]


@functools.cache
def _walk_bias(family: str, setup: str = "") -> tuple[Any, Any, Any, dict[int, Any]]:
    """(eos, special, realistic) boolean masks over the vocabulary, and each token's
    successors: from this family's hand-written outputs, which the walks imitate (a bigram
    chain keeps them short and well-formed: closing quotes, markers, ``</parameter>``), with
    the tokenizer of ``setup`` (default: the family's)."""
    tok, vocab = env(setup or SETUP_OF[family])
    kinds = np.array([vocab.kind(i) for i in range(vocab.size)])
    real = np.zeros(vocab.size, bool)
    succ: dict[int, set[int]] = {}
    texts = [c[1] for c in GOOD[family]] + [c[1] for c in BAD.get(family, [])]
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False)
        real[ids] = True
        for a, b in itertools.pairwise(ids):
            succ.setdefault(a, set()).add(b)
    return (
        kinds == "eos",
        kinds == "special",
        real,
        {a: np.array(sorted(b)) for a, b in succ.items()},
    )


def _walk(
    comp: Any, bias: tuple[Any, Any, Any, dict[int, Any]], rng: random.Random
) -> list[int] | None:
    """Token ids of one random walk to an accepting state, or ``None`` when capped."""
    eos, special, real, succ = bias
    m = comp.matcher()
    ids: list[int] = []
    for _ in range(CAP):
        allowed = m.allowed_token_ids()
        accepting = m.is_accepting()
        more = allowed[~eos[allowed]]
        if accepting and (len(more) == 0 or rng.random() < 0.25):
            return ids
        assert len(more), f"dead end: nothing allowed after {ids}"
        ok = np.zeros(len(eos), bool)
        ok[more] = True
        after = succ.get(ids[-1], more[:0]) if ids else more[:0]
        nxt = after[ok[after]]
        r = rng.random()
        if r < 0.2 and special[more].any():
            pool = more[special[more]]
        elif r < 0.75 and len(nxt):
            pool = nxt
        elif r < 0.9 and real[more].any():
            pool = more[real[more]]
        else:
            pool = more
        t = int(pool[rng.randrange(len(pool))])
        m.consume(t)
        ids.append(t)
    return None


@pytest.mark.parametrize("family", sorted(FORMATS))
def test_random_walks_read_back_with_valid_arguments(family: str) -> None:
    _, vocab = env(SETUP_OF[family])
    bias = _walk_bias(family)
    rng = random.Random(f"walks-{family}")
    done = 0
    configs = _walk_configs(family)
    for kw in configs:
        comp = compiled(family, **_key(kw))
        for _ in range(WALKS):
            ids = _walk(comp, bias, rng)
            if ids is None:
                continue
            done += 1
            text = vocab.decode(ids).decode("utf-8")
            out = corral.parse_tool_calls(text, family, tools=TOOLS)
            for call in out.tool_calls:
                jsonschema.validate(call["arguments"], SCHEMAS[call["name"]])
            n = len(out.tool_calls)
            choice = kw.get("tool_choice", "auto")
            if choice == "required":
                assert n >= 1, text
            if choice == "none":
                assert n == 0, text
            if isinstance(choice, dict):
                assert [c["name"] for c in out.tool_calls] == ["search"], text
            if kw.get("parallel") is False:
                assert n <= 1, text
            if kw.get("reasoning") in ("enabled", "prefilled"):
                assert out.reasoning is not None, text
    assert done >= len(configs) * WALKS // 2, f"only {done} walks finished"


# -- XGrammar's grammar on the same outputs ---------------------------------------------------
XGR_KEYS = {
    "llama": "llama",
    "qwen": "qwen_3",
    "qwen3_coder": "qwen_3_coder",
    "deepseek_r1": "deepseek_r1",
    "deepseek_v3_1": "deepseek_v3_1",
    "kimi": "kimi",
    "harmony": "harmony",
}
# corral's "prefilled" is XGrammar's "enabled" (the prompt ends with <think>); XGrammar's
# "auto" is an optional complete block; harmony's analysis channel is XGrammar's "enabled"
XGR_REASONING = {"prefilled": "enabled", "enabled": "auto", "auto": "auto", "disabled": "disabled"}
BEYOND_XGRAMMAR = {("llama", 4), ("harmony", 0)}  # <|python_tag|> first; " <|constrain|>"


@pytest.mark.parametrize("family", sorted(XGR_KEYS))
def test_xgrammar_accepts_the_same_outputs(family: str) -> None:
    xgr = pytest.importorskip("xgrammar")
    testing = pytest.importorskip("xgrammar.testing")
    for i, (kw, text, _, _) in enumerate(GOOD[family]):
        reasoning = XGR_REASONING[kw.get("reasoning", "auto")]
        if family == "harmony":
            reasoning = "disabled" if kw.get("reasoning") == "disabled" else "enabled"
        tag = xgr.get_model_structural_tag(
            XGR_KEYS[family],
            tools=TOOLS,
            tool_choice=kw.get("tool_choice", "auto"),
            reasoning=reasoning,
            parallel_tool_calls=kw.get("parallel", True),
        )
        grammar = xgr.Grammar.from_structural_tag(tag.model_dump_json())
        if family == "harmony" and not text.endswith(("<|call|>", "<|end|>")):
            text += "<|return|>"  # corral's test vocabulary has it as EOS: XGrammar wants it
        accepted = testing._is_grammar_accept_string(grammar, text)
        assert accepted == ((family, i) not in BEYOND_XGRAMMAR), (i, text)


# -- markers follow the vocabulary -----------------------------------------------------------
def test_markers_as_text_when_the_vocabulary_spells_them() -> None:
    """With ``added_tokens="all"`` Qwen's <tool_call> is an ordinary token: the default
    spec (markers as special tokens) does not compile, the one given ``vocab`` does and
    reads the same output."""
    tok, _ = env("qwen")
    _, vocab = env("qwen", "all")
    assert "<tool_call>" not in vocab.special_tokens()
    with pytest.raises(corral.GrammarError, match="special token"):
        corral.compile(corral.tool_calls(TOOLS, "qwen"), vocab)
    comp = corral.compile(corral.tool_calls(TOOLS, "qwen", vocab=vocab), vocab)
    for kw, text, _, _ in GOOD["qwen"]:
        if not kw:
            assert run(comp, tok, vocab, text)
    spelled = ["<", "tool", "_call", ">"]  # the marker in ordinary tokens: the same text
    ids = tok.convert_tokens_to_ids(spelled) + tok.encode(
        '\n{"name": "now", "arguments": {}}\n</tool_call>', add_special_tokens=False
    )
    m = comp.matcher()
    m.consume_tokens(ids)
    assert m.is_accepting()


@pytest.mark.parametrize("family", sorted(FORMATS))
def test_every_family_with_its_markers_as_text(family: str) -> None:
    """Given a vocabulary without the family's tokens (GPT-2's), every marker is text: the
    hand-written outputs (harmony's with their closers) are accepted and walks read back."""
    tok, vocab = env("gpt2")
    bias = _walk_bias(family, "gpt2")
    rng = random.Random(f"text-{family}")
    for kw in _walk_configs(family):
        comp = corral.compile(corral.tool_calls(TOOLS, family, vocab=vocab, **kw), vocab)
        for kw_good, text, *_ in GOOD[family]:
            if kw_good == kw and (family != "harmony" or text.endswith(("<|call|>", "<|end|>"))):
                assert run(comp, tok, vocab, text)
        for _ in range(4):
            ids = _walk(comp, bias, rng)
            if ids is not None:
                out = corral.parse_tool_calls(vocab.decode(ids).decode(), family, tools=TOOLS)
                for call in out.tool_calls:
                    jsonschema.validate(call["arguments"], SCHEMAS[call["name"]])


def test_harmony_call_may_end_the_output_when_call_is_eos() -> None:
    tok, _ = env("harmony")
    vocab = corral.Vocabulary.from_hf(
        tok, eos_token_ids=tok.convert_tokens_to_ids(["<|return|>", "<|call|>"])
    )
    comp = corral.compile(corral.tool_calls(TOOLS, "harmony", vocab=vocab), vocab)
    assert run(
        comp,
        tok,
        vocab,
        "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.now<|constrain|>json<|message|>{}",
    )
    with pytest.raises(corral.GrammarError, match="special token"):
        corral.compile(corral.tool_calls(TOOLS, "harmony"), vocab)  # <|call|> as a token


def test_specs_read_back_from_their_json_form() -> None:
    for family in FORMATS:
        for kw in _walk_configs(family):
            spec = corral.tool_calls(TOOLS, family, **kw)
            text = json.dumps({"type": "structural_tag", "format": spec.to_json()})
            assert read_structural_tag(json.loads(text)) == spec


def test_the_json_form_compiles_to_the_same_language() -> None:
    tok, vocab = env("qwen")
    spec = corral.tool_calls(TOOLS, "qwen3_coder", reasoning="disabled")
    comp = corral.compile({"type": "structural_tag", "format": spec.to_json()}, vocab)
    for kw, text, _, _ in GOOD["qwen3_coder"]:
        assert run(comp, tok, vocab, text) == (kw.get("reasoning") == "disabled")


# -- errors ---------------------------------------------------------------------------------
def _fn(name: str, parameters: Any = None, **extra: Any) -> dict[str, Any]:
    f: dict[str, Any] = {"name": name, **extra}
    if parameters is not None:
        f["parameters"] = parameters
    return {"type": "function", "function": f}


@pytest.mark.parametrize(
    "tools,kw,error,message",
    [
        ("get_weather", {}, corral.ArgumentTypeError, "tools must be a list"),
        (
            [WEATHER, WEATHER],
            {},
            corral.InvalidArgumentError,
            r"tools\[1\]\.function\.name: 'get_weather' is also the name of tools\[0\]",
        ),
        (
            [WEATHER, _fn("bad name")],
            {},
            corral.InvalidArgumentError,
            r"tools\[1\]\.function\.name must match",
        ),
        (
            [_fn("a", paramters={})],
            {},
            corral.InvalidArgumentError,
            r"tools\[0\]\.function: unknown key 'paramters'",
        ),
        (
            [_fn("a", {"type": "string"})],
            {},
            corral.InvalidArgumentError,
            r"tools\[0\]\.function\.parameters\.type must be 'object'",
        ),
        (
            [{"type": "web_search"}],
            {},
            corral.InvalidArgumentError,
            r"tools\[0\]\.type must be 'function'",
        ),
        (
            [{"type": "function"}],
            {},
            corral.ArgumentTypeError,
            r"tools\[0\]\.function must be a dict",
        ),
        (
            TOOLS,
            {"tool_choice": {"type": "function", "function": {"name": "nope"}}},
            corral.InvalidArgumentError,
            r"'nope', which is not in tools \(known: \['get_weather', 'search', 'now'\]\)",
        ),
        (
            TOOLS,
            {"tool_choice": "sometimes"},
            corral.InvalidArgumentError,
            "tool_choice must be one of",
        ),
        ([], {"tool_choice": "required"}, corral.InvalidArgumentError, "needs at least one tool"),
        (TOOLS, {"reasoning": True}, corral.ArgumentTypeError, "reasoning must be a str"),
        (TOOLS, {"parallel": 1}, corral.ArgumentTypeError, "parallel must be a bool"),
        (
            TOOLS,
            {"reasoning_budget": -1},
            corral.InvalidArgumentError,
            "reasoning_budget must be >= 0",
        ),
    ],
)
def test_bad_requests_are_refused_naming_the_entry(
    tools: Any, kw: dict[str, Any], error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        corral.tool_calls(tools, "qwen", **kw)


def test_unknown_model_lists_the_families() -> None:
    with pytest.raises(
        corral.InvalidArgumentError, match=r"unknown model 'gpt-5'.*'deepseek_r1'.*'qwen3_coder'"
    ):
        corral.tool_calls(TOOLS, "gpt-5")
    with pytest.raises(corral.ArgumentTypeError):
        corral.tool_calls(TOOLS, None)  # type: ignore[arg-type]


def test_reasoning_options_of_families_without_a_block() -> None:
    for family in ("llama", "mistral", "qwen2_5"):
        for reasoning in ("enabled", "prefilled"):
            with pytest.raises(corral.InvalidArgumentError, match="no reasoning block"):
                corral.tool_calls(TOOLS, family, reasoning=reasoning)
    with pytest.raises(corral.InvalidArgumentError, match="no prefilled reasoning"):
        corral.tool_calls(TOOLS, "harmony", reasoning="prefilled")


def test_reasoning_budget_bounds_the_block() -> None:
    """``reasoning_budget`` is the block's ``AnyText(max_tokens=...)``: enforced where the
    structural front end holds token budgets, refused by pointer where it does not."""
    spec = corral.tool_calls(TOOLS, "qwen", reasoning="enabled", reasoning_budget=3)
    assert '"max_tokens": 3' in json.dumps(spec.to_json())
    tok, vocab = env("qwen")
    try:
        comp = corral.compile(spec, vocab)
    except corral.UnsupportedFeatureError as e:
        assert "max_tokens" in str(e)
        return
    m = comp.matcher()
    m.consume_tokens(tok.encode("<think>a b c", add_special_tokens=False))
    assert m.allowed_token_ids().tolist() == tok.convert_tokens_to_ids(["</think>"])


@pytest.mark.parametrize(
    "family,parameters,error,pointer",
    [
        (
            "qwen",
            {"type": "object", "properties": {"x": {"$ref": "http://example.com/s.json"}}},
            corral.UnsupportedFeatureError,
            "/properties/x/$ref",
        ),
        (
            "kimi",
            {"type": "object", "properties": {"x": {"type": "strin"}}},
            corral.SchemaError,
            "/properties/x/type",
        ),
        (
            "llama",
            {
                "type": "object",
                "properties": {"x": {"type": "integer", "minimum": 5, "maximum": 1}},
                "required": ["x"],
            },
            corral.EmptyLanguageError,
            "/properties/x",
        ),
        (
            "qwen3_coder",
            {"type": "object", "properties": {"x": {"type": "string", "pattern": "a+"}}},
            corral.UnsupportedFeatureError,
            "/properties/x/pattern",
        ),
    ],
)
def test_a_schema_that_cannot_compile_names_the_tool_and_pointer(
    family: str, parameters: Any, error: type, pointer: str
) -> None:
    with pytest.raises(error) as info:
        corral.tool_calls([WEATHER, SEARCH, NOW, _fn("broken", parameters)], family)
    assert str(info.value).startswith('tools[3] ("broken"): ')
    assert pointer in str(info.value)
    assert info.value.location.pointer == pointer


# -- reading outputs ------------------------------------------------------------------------
def test_parse_reads_content_and_reasoning() -> None:
    out = corral.parse_tool_calls(GOOD["qwen"][0][1], "Qwen/Qwen3-8B", tools=TOOLS)
    assert out.content == "Let me check.\n\n"
    out = corral.parse_tool_calls(GOOD["harmony"][1][1], "openai/gpt-oss-20b")
    assert (out.reasoning, out.content, out.tool_calls) == ("Easy.", "Hello!", [])
    out = corral.parse_tool_calls(GOOD["llama"][0][1], "meta-llama/Llama-3.1-8B-Instruct")
    assert out.content == "Let me check. " and out.reasoning is None


def test_parse_types_xml_values_by_schema() -> None:
    text = "<tool_call>\n<function=search>\n<parameter=query>\n42\n</parameter>\n<parameter=limit>\n42\n</parameter>\n</function>\n</tool_call>"
    typed = corral.parse_tool_calls(text, "qwen3_coder", tools=TOOLS).tool_calls
    assert typed == [{"name": "search", "arguments": {"query": "42", "limit": 42}}]
    guessed = corral.parse_tool_calls(text, "qwen3_coder").tool_calls
    assert guessed == [{"name": "search", "arguments": {"query": 42, "limit": 42}}]


@pytest.mark.parametrize(
    "family,text,message",
    [
        (
            "qwen",
            '<tool_call>\n{"name": "now", "arguments": {}\n</tool_call>',
            "expected a call object",
        ),
        ("qwen", '<tool_call>\n{"name": "now"}\n</tool_call>', "exactly the keys 'name'"),
        ("qwen", "<think>never closed", "ending with '</think>'"),
        ("mistral", '[TOOL_CALLS][{"name": "now", "arguments": {}}] more', "expected the end"),
        (
            "deepseek_v3_1",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>now<｜tool▁sep｜>{}<｜tool▁calls▁end｜>",
            "expected '<｜tool▁call▁end｜>'",
        ),
        (
            "kimi",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.now:x<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
            "numeric index",
        ),
        (
            "harmony",
            "<|channel|>commentary to=functions.now json<|message|>{}<|call|>",
            "expected a message header",
        ),
        ("qwen", '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>', "not in tools"),
    ],
)
def test_malformed_output_raises_with_the_offset(family: str, text: str, message: str) -> None:
    with pytest.raises(ToolCallParseError, match=message) as info:
        corral.parse_tool_calls(text, family, tools=TOOLS)
    assert isinstance(info.value, ValueError) and isinstance(info.value, corral.CorralError)
    assert 0 <= info.value.offset <= len(text)


@pytest.mark.parametrize(
    "model,family",
    [
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2_5"),
        ("Qwen/Qwen3-8B", "qwen"),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_coder"),
        ("Qwen/QwQ-32B", "qwen"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama"),
        ("openai/gpt-oss-20b", "harmony"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek_r1"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek_v3_1"),
        ("moonshotai/Kimi-K2-Instruct", "kimi"),
        ("qwen_3_coder", "qwen3_coder"),
        ("LLAMA", "llama"),
    ],
)
def test_model_ids_map_to_families(model: str, family: str) -> None:
    assert family_of(model) == family


@pytest.mark.parametrize("family", ["deepseek_r1", "deepseek_v3_1", "kimi", "llama", "qwen", "qwen3_coder"])  # fmt: skip
def test_walks_are_in_xgrammars_language(family: str) -> None:
    """Compiled with ``additional_properties=False`` (XGrammar's objects are closed unless
    the schema says otherwise), every walk's text is one XGrammar accepts too, except
    Llama's <|python_tag|> before a required call (XGrammar has no <|python_tag|>)."""
    xgr = pytest.importorskip("xgrammar")
    testing = pytest.importorskip("xgrammar.testing")
    _, vocab = env(SETUP_OF[family])
    bias = _walk_bias(family)
    rng = random.Random(f"xgr-{family}")
    for kw in ({}, {"tool_choice": "required", "parallel": False}):
        spec = corral.tool_calls(TOOLS, family, **kw)
        comp = corral.compile(spec, vocab, additional_properties=False)
        tag = xgr.get_model_structural_tag(
            XGR_KEYS[family],
            tools=TOOLS,
            tool_choice=kw.get("tool_choice", "auto"),
            reasoning="disabled" if family == "llama" else "auto",
            parallel_tool_calls=kw.get("parallel", True),
        )
        grammar = xgr.Grammar.from_structural_tag(tag.model_dump_json())
        for _ in range(5):
            ids = _walk(comp, bias, rng)
            if ids is None:
                continue
            text = vocab.decode(ids).decode()
            if kw and text.startswith("<|python_tag|>"):
                continue
            assert testing._is_grammar_accept_string(grammar, text), text
