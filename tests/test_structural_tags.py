"""Structural tags: reading XGrammar's JSON, refusals with pointers, and the exact language
on real tokenizers against an independent Lark reference (``support/structural_reference``).

Exactness is checked three ways on Llama-3, Qwen2 and Gemma-3 vocabularies:

* acceptance at every step of random walks of allowed tokens equals the reference's
  verdict on the decoded prefix (so nothing outside the language is ever accepted, and
  every accepted text is accepted);
* no walk reaches a state with no allowed token that is not accepting (no dead end);
* valid texts, cut into random tokenizations (a token may cross from free text into a
  trigger), are accepted token by token.
"""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest
from support.structural_reference import SPECIAL_CLOSE, SPECIAL_OPEN, Reference, decode
from support.tokenizers import load_tokenizer

import corral
from corral.grammar import structural as st
from corral.grammar.frontends import from_structural_tag

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"},
    },
    "required": ["city"],
    "additionalProperties": False,
}
SEARCH = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "exact": {"type": "boolean"}},
    "required": ["query", "exact"],
    "additionalProperties": False,
}
JSON_OPTS = {"whitespace": "compact"}


def _tool(begin: str, schema: dict[str, Any], end: str) -> st.Tag:
    return st.Tag(begin, st.JSONSchema(schema), end)


def _specs() -> dict[str, st.Format]:
    call = [_tool("<tool_call>", WEATHER, "</tool_call>")]
    funcs = [
        _tool("<function=get_weather>", WEATHER, "</function>"),
        _tool("<function=search>", SEARCH, "</function>"),
    ]
    return {
        "think_then_calls": st.Tag("<think>", st.AnyText(), "</think>")
        + st.TriggeredTags(["<tool_call>"], call),
        "two_tools_one_trigger": st.TriggeredTags(["<function="], funcs, excludes=["<|x|>"]),
        "required_once": st.TriggeredTags(
            ["<function="], funcs, at_least_one=True, stop_after_first=True
        ),
        "at_least_one_loop": st.TriggeredTags(["<tool_call>"], call, at_least_one=True),
        "at_most_one": st.TriggeredTags(["<tool_call>"], call, stop_after_first=True),
        "separated": st.TagsWithSeparator(funcs, "\n", at_least_one=True),
        "separated_optional": st.Sequence(
            ["Answer: ", st.TagsWithSeparator(funcs, ", "), st.Optional(st.Const("."))]
        ),
        "any_text_excludes": st.Tag("<r>", st.AnyText(excludes=["bad", "<r>"]), ["</r>", "</R>"])
        + st.Or(["!", "?"]),
        "dispatch": st.Dispatch(
            [("CALL ", st.JSONSchema(SEARCH)), ("ANSWER: ", st.Regex(r"[0-9]+\."))],
            excludes=["END"],
        )
        + st.Const("END"),
        "repeat": st.Repeat(st.Tag("[", st.Regex("[a-z]{1,3}"), "]"), 1, 3) + st.AnyText(),
    }


SPECS = _specs()

# what free text in the samples is made of: parts of the delimiters, so that the text
# often comes close to a trigger or an end without completing it
FRAGMENTS = [
    "Hi",
    " ",
    "<",
    "tool",
    "_call",
    "<tool_",
    "think",
    "</",
    "func",
    "tion",
    "=",
    ">",
    "é",
    "\n",
    "CALL",
    "END",
    "EN",
    "bad",
    "ba",
    "r>",
    "/",
    "[",
    "x",
    "0",
    ".",
    "ANS",
]


@pytest.fixture(scope="module", params=["llama3", "qwen2", "gemma3"])
def vocab(request: pytest.FixtureRequest) -> Any:
    return corral.Vocabulary.from_hf(load_tokenizer(request.param))


# -- reading the JSON form ----------------------------------------------------------------
def test_json_round_trip_reads_every_format_as_written() -> None:
    for spec in SPECS.values():
        data = st.StructuralTag(spec).to_json()
        assert st.read_structural_tag(data) == spec
        assert st.read_structural_tag(json.dumps(data)) == spec


def test_xgrammar_example_reads_and_compiles() -> None:
    data = {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<function="],
            "tags": [
                {
                    "type": "tag",
                    "begin": "<function=get_weather>",
                    "content": {"type": "json_schema", "json_schema": WEATHER},
                    "end": "</function>",
                }
            ],
            "at_least_one": False,
            "stop_after_first": False,
        },
    }
    g = from_structural_tag(data)
    assert g.summary()["terminals"] > 2


@pytest.mark.parametrize(
    ("spec", "pointer", "words"),
    [
        ({"type": "structural_tag"}, "/", "'format'"),
        (
            {"type": "structural_tag", "format": {"type": "nope"}},
            "/format/type",
            "unknown format type",
        ),
        (
            {
                "type": "structural_tag",
                "format": {"type": "sequence", "elements": [{"type": "const_string", "value": 3}]},
            },
            "/format/elements/0/value",
            "expected a string",
        ),
        (
            {"type": "structural_tag", "format": {"type": "any_text", "exclude": []}},
            "/format/exclude",
            "unknown field",
        ),
        (
            {
                "type": "structural_tag",
                "format": {"type": "tag", "begin": "a", "content": {"type": "any_text"}, "end": []},
            },
            "/format/end",
            "not empty",
        ),
        (
            {
                "type": "structural_tag",
                "format": {
                    "type": "repeat",
                    "min": 3,
                    "max": 2,
                    "content": {"type": "const_string", "value": "a"},
                },
            },
            "/format/max",
            "max must be",
        ),
        (
            {
                "type": "structural_tag",
                "format": {
                    "type": "triggered_tags",
                    "triggers": ["<f"],
                    "tags": [{"type": "const_string", "value": "x"}],
                },
            },
            "/format/tags/0",
            '"tag"',
        ),
    ],
)
def test_malformed_json_is_refused_with_its_pointer(spec: Any, pointer: str, words: str) -> None:
    with pytest.raises(st.StructuralTagError) as e:
        from_structural_tag(spec)
    assert e.value.location is not None and e.value.location.pointer == pointer
    assert words in str(e.value)


# -- refusals of specs that cannot be enforced as written -----------------------------------
def _tt(triggers: list[str], begins: list[str], **kw: Any) -> dict[str, Any]:
    return {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": triggers,
            "tags": [
                {
                    "type": "tag",
                    "begin": b,
                    "content": {"type": "const_string", "value": "x"},
                    "end": "</f>",
                }
                for b in begins
            ],
            **kw,
        },
    }


OPTIONS = [{}, {"at_least_one": True}, {"stop_after_first": True}]
OPTIONS.append({"at_least_one": True, "stop_after_first": True})


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "default")
@pytest.mark.parametrize(
    ("triggers", "begins", "pointer", "words"),
    [
        (["<f"], ["<g>"], "/format/tags/0/begin", "starts with no trigger"),
        (["<f", "<g"], ["<f>"], "/format/triggers/1", "begins no tag"),
        (["<f", "<f="], ["<f=a>"], "/format/tags/0/begin", "ambiguous"),
    ],
)
def test_triggers_and_tag_begins_are_checked_whatever_the_options(
    options: dict[str, Any], triggers: list[str], begins: list[str], pointer: str, words: str
) -> None:
    """With ``at_least_one`` and ``stop_after_first`` the text holds one tag and no free
    text, so no trigger is ever read; the spec is still malformed, and refused alike."""
    with pytest.raises(st.StructuralTagError) as e:
        from_structural_tag(_tt(triggers, begins, **options))
    assert e.value.location is not None and e.value.location.pointer == pointer
    assert words in str(e.value)


def test_a_trigger_that_is_a_prefix_of_another_tags_begin_is_refused_naming_both() -> None:
    with pytest.raises(st.StructuralTagError) as e:
        from_structural_tag(_tt(["<tool", "<tool_call>"], ["<tool>", "<tool_call>"]))
    msg = str(e.value)
    assert "'<tool'" in msg and "'<tool_call>'" in msg and "ambiguous" in msg
    assert e.value.location.pointer == "/format/tags/1/begin"


def test_a_trigger_inside_another_is_refused_naming_both() -> None:
    with pytest.raises(st.StructuralTagError) as e:
        from_structural_tag(_tt(["ab", "xaby"], ["ab1", "xaby2"]))
    msg = str(e.value)
    assert "'ab'" in msg and "'xaby'" in msg and "/format/triggers/0" in msg


def test_a_trigger_inside_the_enclosing_end_is_refused() -> None:
    spec = st.Tag("<a>", st.TriggeredTags(["</"], [st.Tag("</x>", st.Const("1"), "!")]), "</a>")
    with pytest.raises(st.StructuralTagError, match=r"'</'.*'</a>'"):
        from_structural_tag(spec)


@pytest.mark.parametrize(
    ("spec", "pointer"),
    [
        (_tt(["<f"], ["<g>"]), "/format/tags/0/begin"),
        (_tt(["<f", "<h"], ["<f>"]), "/format/triggers/1"),
        (_tt(["<f"], ["<f>"], excludes=["<f"]), "/format/excludes/0"),
    ],
)
def test_triggers_and_tags_must_match(spec: Any, pointer: str) -> None:
    with pytest.raises(st.StructuralTagError) as e:
        from_structural_tag(spec)
    assert e.value.location.pointer == pointer


def test_free_text_with_no_end_is_refused() -> None:
    with pytest.raises(st.StructuralTagError, match=r"has no end.*'json_schema'") as e:
        from_structural_tag(st.AnyText() + st.JSONSchema(WEATHER))
    assert e.value.location.pointer == "/elements/0"
    with pytest.raises(st.StructuralTagError, match="free text"):
        from_structural_tag(st.Sequence([st.AnyText(), st.AnyText()]))


def test_a_keyword_left_to_a_final_check_is_refused_at_its_pointer_below_the_tag() -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    data = {
        "type": "structural_tag",
        "format": {
            "type": "tag",
            "begin": "<a>",
            "content": {"type": "json_schema", "json_schema": schema},
            "end": "</a>",
        },
    }
    with pytest.raises(corral.UnsupportedFeatureError) as e:
        from_structural_tag(data)
    assert e.value.location.pointer == "/format/content/json_schema/uniqueItems"


def test_a_bad_schema_is_refused_at_its_pointer_below_the_tag() -> None:
    data = st.Tag(
        "<a>", st.JSONSchema({"type": "object", "properties": {"x": {"type": 7}}}), "</a>"
    )
    with pytest.raises(corral.GrammarError) as e:
        from_structural_tag(data)
    assert e.value.location.pointer.startswith("/content/json_schema/properties/x")


def test_exclude_token_and_budgets_are_refused_not_dropped() -> None:
    with pytest.raises(corral.UnsupportedFeatureError, match="exclude_token"):
        from_structural_tag(st.ExcludeToken(["<|x|>"]))
    with pytest.raises(corral.UnsupportedFeatureError) as e:
        from_structural_tag(st.Tag("<t>", st.AnyText(max_chars=10), "</t>"))
    assert e.value.location.pointer == "/content/max_chars"


def test_any_order_is_exact_for_json_and_refused_for_qwen_xml() -> None:
    """XGrammar's ``any_order``: properties in any order, each at most once and the
    required ones present (XGrammar leaves those two unchecked)."""
    from support.tokenizers import load_vocab

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    spec = st.Tag("<j>", st.JSONSchema(schema, any_order=True), "</j>")
    c = corral.compile(spec, load_vocab("gpt2"))

    def accepts(text: str) -> bool:
        m = c.matcher()
        return m.consume_bytes(text.encode()) and m.is_accepting()

    for ok in ['{"b":"x","a":1}', '{"c":null,"a":1,"b":"y"}', '{"a":1,"b":"x"}']:
        assert accepts(f"<j>{ok}</j>"), ok
    for bad in ['{"b":"x"}', '{"a":1,"b":"x","a":2}', '{"b":"x","a":1,"d":0}']:
        assert not accepts(f"<j>{bad}</j>"), bad
    with pytest.raises(corral.UnsupportedFeatureError) as e:
        from_structural_tag(
            st.Tag("<j>", st.JSONSchema(schema, style="qwen_xml", any_order=True), "</j>")
        )
    assert e.value.location.pointer == "/content/any_order"


def test_python_api_reads_naturally() -> None:
    spec = "Answer: " + st.Tag("<a>", st.Regex("[0-9]+"), "</a>") + (st.Const("!") | "?")
    assert isinstance(spec, st.Sequence) and len(spec.elements) == 3
    assert spec.elements[0] == st.Const("Answer: ")
    assert from_structural_tag(spec) == from_structural_tag(st.StructuralTag(spec).to_json())


# -- the language, on real tokenizers -------------------------------------------------------
def _compiled(spec: st.Format, vocab: Any) -> Any:
    return corral.compile(spec, vocab, **JSON_OPTS)


def _sample(node: st.Format, rng: random.Random, depth: int = 0) -> str:
    """A text likely (not always) in the language of ``node``: the reference decides."""
    if isinstance(node, st.Const):
        return node.value
    if isinstance(node, st.Sequence):
        return "".join(_sample(e, rng, depth) for e in node.elements)
    if isinstance(node, st.Or):
        return _sample(rng.choice(node.elements), rng, depth)
    if isinstance(node, st.Optional):
        return _sample(node.content, rng, depth) if rng.random() < 0.5 else ""
    if isinstance(node, st.Repeat):
        k = rng.randint(node.min, node.max if node.max >= 0 else node.min + 2)
        return "".join(_sample(node.content, rng, depth) for _ in range(k))
    if isinstance(node, st.Tag):
        end = node.ends if isinstance(node.ends, tuple) else ("",)
        return str(node.begin) + _sample(node.content, rng, depth) + rng.choice(end)
    if isinstance(node, st.AnyText):
        return "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 6)))
    if isinstance(node, st.TriggeredTags):
        out = [] if node.at_least_one else [_sample(st.AnyText(), rng)]
        for _ in range(
            rng.randint(1 if node.at_least_one else 0, 1 if node.stop_after_first else 3)
        ):
            out.append(_sample(rng.choice(node.tags), rng, depth))
            if not node.stop_after_first:
                out.append(_sample(st.AnyText(), rng))
        return "".join(out)
    if isinstance(node, st.TagsWithSeparator):
        k = rng.randint(1 if node.at_least_one else 0, 1 if node.stop_after_first else 3)
        return node.separator.join(_sample(rng.choice(node.tags), rng) for _ in range(k))
    if isinstance(node, st.Dispatch):
        out = []
        for _ in range(rng.randint(0, 2)):
            p, f = rng.choice(node.rules)
            out += [_sample(st.AnyText(), rng), p, _sample(f, rng)]
        return "".join(out) + _sample(st.AnyText(), rng)
    if isinstance(node, st.Regex):
        return rng.choice(["ab", "x", "12.", "7.", "abc", "abcd"])
    if isinstance(node, st.JSONSchema):
        s = node.schema_json()
        if s is SEARCH:
            return json.dumps(
                {"query": rng.choice(["a</function>", "q", "é"]), "exact": rng.random() < 0.5}
            )
        v: dict[str, Any] = {"city": rng.choice(["Paris", "<tool_call>", 'x"y'])}
        if rng.random() < 0.5:
            v["unit"] = "celsius"
        if rng.random() < 0.5:
            v["days"] = rng.randint(-3, 30)
        return json.dumps(v, separators=(",", ":") if rng.random() < 0.5 else (", ", ": "))
    raise NotImplementedError(type(node).__name__)


def _allows(m: Any, token: int) -> bool:
    """Whether the matcher's bitmask allows ``token``."""
    mask = corral.allocate_bitmask(1, m.vocab_size)
    m.fill_bitmask(mask)
    return bool((int(mask[0, token // 32]) >> (token % 32)) & 1)


class _Tokens:
    """Random tokenizations of a text over a vocabulary's ordinary tokens."""

    def __init__(self, vocab: Any) -> None:
        self.by_bytes: dict[bytes, int] = {}
        for i in range(len(vocab)):
            if vocab.kind(i) == "normal":
                b = vocab.token_bytes(i)
                if 0 < len(b) <= 12:
                    self.by_bytes.setdefault(b, i)

    def cut(self, data: bytes, rng: random.Random) -> list[int] | None:
        """A random tokenization of ``data`` (``None`` if a byte has no token)."""
        out, i = [], 0
        while i < len(data):
            ends = [
                j for j in range(i + 1, min(len(data), i + 12) + 1) if data[i:j] in self.by_bytes
            ]
            if not ends:
                return None
            j = rng.choice(ends)
            out.append(self.by_bytes[data[i:j]])
            i = j
        return out

    def longest(self, text: str) -> list[int]:
        """``text`` cut greedily into the longest tokens."""
        out, data, i = [], text.encode(), 0
        while i < len(data):
            j = max(
                j for j in range(i + 1, min(len(data), i + 12) + 1) if data[i:j] in self.by_bytes
            )
            out.append(self.by_bytes[data[i:j]])
            i = j
        return out


@pytest.fixture(scope="module")
def tokens(vocab: Any) -> _Tokens:
    return _Tokens(vocab)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_valid_texts_are_accepted_in_any_tokenization(
    name: str, vocab: Any, tokens: _Tokens
) -> None:
    spec = SPECS[name]
    ref = Reference(spec)
    cg = _compiled(spec, vocab)
    rng = random.Random(name)
    checked = 0
    for _ in range(60):
        text = _sample(spec, rng)
        if not ref.accepts(text):
            continue
        for _ in range(3):
            ids = tokens.cut(text.encode(), rng)
            if ids is None:
                break
            m = corral.Matcher(cg)
            for k, t in enumerate(ids):
                assert _allows(m, t), (text, k)
                m.consume(t)
            assert m.is_accepting(), text
            checked += 1
    assert checked >= 20


def _interesting(vocab: Any, spec: st.Format) -> np.ndarray:
    """Ordinary tokens that are pieces of the spec's strings (walks that pick them often
    reach triggers, ends and JSON)."""
    text = json.dumps(st.StructuralTag(spec).to_json()) + "".join(FRAGMENTS) + '{"city":"a"}'
    ids = [
        i
        for i in range(len(vocab))
        if vocab.kind(i) == "normal"
        and 0 < len(b := vocab.token_bytes(i)) <= 8
        and b in text.encode()
    ]
    return np.asarray(ids)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_random_walks_accept_exactly_the_reference_language(
    name: str, vocab: Any, tokens: _Tokens
) -> None:
    """Walks follow a valid text for a while, then take random allowed tokens (mostly
    pieces of the spec's strings). Wherever the matcher accepts, the reference must
    accept the text too (and at random other steps the two must agree); no state may be
    a dead end."""
    spec = SPECS[name]
    ref = Reference(spec)
    cg = _compiled(spec, vocab)
    pieces = _interesting(vocab, spec)
    rng = random.Random(f"walk-{name}")
    is_eos = np.zeros(len(vocab), bool)
    is_eos[[i for i in range(len(vocab)) if vocab.kind(i) == "eos"]] = True
    is_piece = np.zeros(len(vocab), bool)
    is_piece[pieces] = True
    accepted = 0
    for _ in range(10):
        target = _sample(spec, rng)
        ids = tokens.cut(target.encode(), rng) if ref.accepts(target) else None
        ids = ids or []
        if rng.random() < 0.6:  # else the whole valid text, then random tokens
            ids = ids[: rng.randint(0, len(ids))]
        m = corral.Matcher(cg)
        for t in ids:
            m.consume(t)
        for _step in range(25):
            allowed = m.allowed_token_ids()
            allowed = allowed[~is_eos[allowed]]
            text = decode(vocab, ids)
            if text is not None and (m.is_accepting() or rng.random() < 0.2):
                assert m.is_accepting() == ref.accepts(text), (name, text)
                accepted += m.is_accepting()
            if not allowed.size:
                assert m.is_accepting(), f"dead end after {text!r}"
                break
            good = allowed[is_piece[allowed]]
            pool = good if good.size and rng.random() < 0.8 else allowed
            t = int(pool[rng.randrange(pool.size)])
            m.consume(t)
            ids.append(t)
    assert accepted >= 1


# -- token-level triggers -----------------------------------------------------------------
def _two_specials(vocab: Any) -> tuple[str, str]:
    specials = sorted(t for t, i in vocab.special_tokens().items() if vocab.kind(i) == "special")
    return specials[0], specials[1]


def test_token_triggered_tags_use_the_special_token_not_its_spelling(
    vocab: Any, tokens: _Tokens
) -> None:
    a, b = _two_specials(vocab)
    ids = vocab.special_tokens()
    spec = st.TokenTriggeredTags([a], [st.Tag(st.Token(a), st.JSONSchema(SEARCH), st.Token(b))])
    cg = _compiled(spec, vocab)
    ref = Reference(spec, ids)
    m = corral.Matcher(cg)
    seq = [
        *tokens.longest("Let me search. "),
        ids[a],
        *tokens.longest('{"query":"x","exact":true}'),
        ids[b],
        *tokens.longest(" ok"),
    ]
    for t in seq:
        assert _allows(m, t)
        m.consume(t)
    assert m.is_accepting()
    assert ref.accepts(decode(vocab, seq) or "")
    # the special token's spelling in ordinary tokens is free text, not a trigger
    m = corral.Matcher(cg)
    assert m.consume_bytes(a.encode()) and m.is_accepting()
    m = corral.Matcher(cg)
    assert not _allows(m, ids[b])


def test_a_token_may_cross_from_free_text_into_the_trigger() -> None:
    tok = load_tokenizer("llama3")
    vocab = corral.Vocabulary.from_hf(tok)
    spec = SPECS["think_then_calls"]
    cg = _compiled(spec, vocab)
    crossing = [t for t in ("_call", "call", "_call>") if t in tok.get_vocab()]
    assert crossing
    m = corral.Matcher(cg)
    assert m.consume_bytes(b"<think>x</think>Call <tool")
    ids = [tok.get_vocab()[crossing[0]]]
    assert _allows(m, ids[0])
    m.consume(ids[0])
    assert m.consume_bytes(b'>{"city":"a"}</tool_call>') and m.is_accepting()
    # free text cannot complete the trigger without entering the tag
    m = corral.Matcher(cg)
    assert m.consume_bytes(b"<think>x</think>Call <tool_call>")
    assert not m.consume_bytes(b" plain text")


def test_special_marker_text_is_not_free_text() -> None:
    assert SPECIAL_OPEN not in "".join(FRAGMENTS) and SPECIAL_CLOSE not in "".join(FRAGMENTS)


# -- differential: XGrammar's matcher on the same JSON --------------------------------------
def _mutations(text: str, rng: random.Random) -> list[str]:
    """``text`` and a few edits of it (deleting, duplicating or inserting a character)."""
    out = [text]
    for _ in range(4):
        if not text:
            break
        i = rng.randrange(len(text))
        inserted = text[:i] + rng.choice('<>/{}" a') + text[i:]
        out += [text[:i] + text[i + 1 :], text[:i] + text[i] + text[i:], inserted]
    return out


@pytest.mark.parametrize("name", sorted(SPECS))
def test_xgrammar_accepts_the_same_texts(name: str) -> None:
    xgr = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    spec = SPECS[name]
    vocab = corral.Vocabulary.from_hf(load_tokenizer("llama3"))
    # XGrammar's JSON takes whitespace runs around punctuation: corral's "flexible" style
    cg = corral.compile(spec, vocab, whitespace="flexible")
    xg = xgr.Grammar.from_structural_tag(json.dumps(st.StructuralTag(spec).to_json()))
    rng = random.Random(f"xgr-{name}")
    seen = set()
    agree = accepted = 0
    for _ in range(40):
        for text in _mutations(_sample(spec, rng), rng):
            if text in seen:
                continue
            seen.add(text)
            m = corral.Matcher(cg)
            ours = m.consume_bytes(text.encode()) and m.is_accepting()
            theirs = _is_grammar_accept_string(xg, text)
            assert ours == theirs, (name, text, ours, theirs)
            agree += 1
            accepted += ours
    assert agree > 100 and accepted > 10


def test_a_regex_that_reads_on_into_the_string_after_it_is_refused() -> None:
    """Lexemes are read greedily: ``.+`` before ``</a>`` would read the end string too and
    never stop (no completion), so it is refused; a regex that cannot read ``<`` is not."""
    with pytest.raises(st.StructuralTagError, match=r"'\.\+' can read on into '</a>'") as e:
        from_structural_tag(st.Tag("<a>", st.Regex(".+"), "</a>"))
    assert e.value.location.pointer == "/content"
    from_structural_tag(st.Tag("<a>", st.Regex("[^<]+"), "</a>"))
