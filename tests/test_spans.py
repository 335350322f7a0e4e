"""Span constraints: values copied verbatim from a source text (``x-corral-span``, Lark
``%declare SPAN``), from the automaton up to token masks on real tokenizers."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tokenizers import load_vocab

import corral
from corral.automata.kernels.lexer import lex_next
from corral.automata.tables import build_tables
from corral.errors import UnsupportedFeatureError
from corral.grammar import Grammar
from corral.grammar.ir import Rule, Terminal
from corral.grammar.json_schema.load import SchemaError
from corral.grammar.regex import ByteDFA, literal_dfa
from corral.grammar.spans import SpanOptions, span_dfa
from corral.integrations.extract import with_spans

# every JSON escape, multi-byte characters (2, 3 and 4 bytes) and a lone surrogate
HARD = 'Dr. Ana "Nana" Silva\\ of Zürich\nsaid:\t“日本語” 😀 \x01\x1f\b\f\r end \ud800.'
ALPHABET = 'ab "\\\n\tZü日😀\x01'


def _json(s: str) -> bytes:
    """``s`` as a JSON string in the canonical form spans use (``\\uXXXX`` for a lone
    surrogate, every other character as ``json.dumps(..., ensure_ascii=False)``)."""
    parts = [
        f"\\u{ord(c):04x}"
        if 0xD800 <= ord(c) <= 0xDFFF
        else json.dumps(c, ensure_ascii=False)[1:-1]
        for c in s
    ]
    return ('"' + "".join(parts) + '"').encode("utf-8")


# -- the automaton ----------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(st.text(ALPHABET, max_size=12), min_size=1, max_size=3),
    probe=st.text(ALPHABET, max_size=6),
)
def test_the_span_automaton_reads_exactly_the_non_empty_substrings(
    texts: list[str], probe: str
) -> None:
    dfa = span_dfa(texts, SpanOptions(), encoding="json")
    raw = span_dfa(texts, SpanOptions(), encoding="raw")
    want = bool(probe) and any(probe in t for t in texts)
    assert dfa.matches(_json(probe)) == want
    assert raw.matches(probe.encode("utf-8")) == want
    # every substring of every text is read (not only the probes hypothesis picks)
    for t in texts:
        for i in range(len(t)):
            assert dfa.matches(_json(t[i : i + 4]))


def test_every_escape_and_multibyte_character_is_read_in_its_canonical_form() -> None:
    dfa = span_dfa([HARD], SpanOptions(), encoding="json")
    for i in range(len(HARD)):
        for j in range(i + 1, min(len(HARD), i + 6) + 1):
            assert dfa.matches(_json(HARD[i:j])), HARD[i:j]
    assert dfa.matches(b'"\\ud800."')
    assert not dfa.matches(b'"\\u00fcrich"')  # another spelling of "ürich": not canonical
    assert not dfa.matches(b'""')  # never empty
    assert not dfa.matches(b'"Silva of"')  # the text has a backslash between them


def test_spans_never_cross_from_one_text_into_the_next() -> None:
    dfa = span_dfa(["abc", "def"], SpanOptions(), encoding="raw")
    assert dfa.matches(b"bc") and dfa.matches(b"de")
    assert not dfa.matches(b"cd") and not dfa.matches(b"abcdef")


def test_ignore_case_and_normalised_whitespace() -> None:
    text = "Dr. Émile  ZOLA\n lived in Paris"
    ic = span_dfa([text], SpanOptions(ignore_case=True), encoding="raw")
    assert ic.matches("émile".encode()) and ic.matches(b"zola") and ic.matches(b"pARIS")
    assert not ic.matches(b"Zola lived")
    ws = span_dfa([text], SpanOptions(whitespace="normalize"), encoding="raw")
    assert ws.matches(b"ZOLA lived in") and ws.matches("Émile ZOLA".encode())
    assert not ws.matches("Émile  ZOLA".encode())  # the run reads as one space
    with pytest.raises(ValueError, match="whitespace"):
        SpanOptions(whitespace="collapse")


def test_a_sparse_automaton_steps_as_its_dense_form() -> None:
    """The tables keep a span automaton as sparse rows, never in 256 columns: the kernels'
    lexer step must behave exactly as the dense layout would, for every state and byte."""
    dfa = span_dfa([HARD], SpanOptions(), encoding="json")
    dense = ByteDFA(np.stack([dfa.row(s) for s in range(dfa.n_states)]), dfa.accept.copy())
    steps = []
    for d in (dfa, dense):
        terms = {
            "SPAN": Terminal("SPAN", d),
            "COMMA": Terminal("COMMA", literal_dfa(",")),
        }
        g = Grammar(terms, [Rule("start", ("SPAN",)), Rule("start", ("start", "COMMA", "SPAN"))],
                    "start")  # fmt: skip
        t = build_tables(g)
        assert t.n_dense_states == (2 if d is dfa else 2 + dfa.n_states)  # COMMA's two
        bc = t.byte_class()
        local: dict[str, np.ndarray] = {}
        for i, name in enumerate(t.terminal_names):
            states = t.term_states(i)
            local[name] = np.array(
                [[lex_next(t.lex, q, int(bc[b])) for b in range(256)] for q in states]
            )
            local[name] = np.where(local[name] >= 0, local[name] - states.start, -1)
        steps.append(local)
    for name in ("SPAN", "COMMA"):
        np.testing.assert_array_equal(steps[0][name], steps[1][name])


# -- token masks on real tokenizers ------------------------------------------------------
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "x-corral-span": True},
        "city": {"anyOf": [{"type": "string", "x-corral-span": True}, {"type": "null"}]},
    },
    "required": ["name", "city"],
    "additionalProperties": False,
}


def _walk(compiled: corral.CompiledGrammar, rng: random.Random) -> bytes:
    """A random complete output: each token drawn from the mask (never a dead end)."""
    vocab = compiled.vocab
    eos = set(vocab.eos_token_ids)
    m = compiled.matcher()
    ids: list[int] = []
    for _ in range(200):
        allowed = [int(i) for i in m.allowed_token_ids()]
        normal = [i for i in allowed if i not in eos]
        if m.is_accepting() and (not normal or rng.random() < 0.3):
            break
        assert normal, f"dead end after {vocab.decode(ids)!r}"
        t = rng.choice(normal)
        m.consume(t)
        ids.append(t)
    assert m.is_accepting()
    return vocab.decode(ids)


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
def test_an_invented_value_is_impossible_under_a_span_constraint(tok: str) -> None:
    vocab = load_vocab(tok)
    compiled = corral.compile(SCHEMA, vocab, source=HARD)
    rng = random.Random(7)
    for _ in range(25):
        out = _walk(compiled, rng)
        value = json.loads(out)
        for field in ("name", "city"):
            v = value[field]
            if v is not None:
                assert v and v in HARD, (out, v)
        assert compiled.grammar.final_check is not None
        assert compiled.grammar.final_check(out)


@settings(max_examples=12, deadline=None)
@given(doc=st.text(ALPHABET, min_size=1, max_size=20), seed=st.integers(0, 2**16))
def test_random_documents_random_walks_copy_from_the_document(doc: str, seed: int) -> None:
    vocab = load_vocab("gpt2")
    schema = {"type": "string", "x-corral-span": True}
    compiled = corral.compile(schema, vocab, source=doc)
    out = _walk(compiled, random.Random(seed))
    v = json.loads(out)
    assert v and v in doc


def test_lark_span_terminal_matches_the_source() -> None:
    vocab = load_vocab("llama2")
    grammar = 'start: "Name: " SPAN\n%declare SPAN'
    compiled = corral.compile(grammar, vocab, source=["Ana Silva", "Bo"])
    rng = random.Random(3)
    for _ in range(10):
        out = _walk(compiled, rng).decode("utf-8")
        assert out.startswith("Name: ")
        assert out[6:] and (out[6:] in "Ana Silva" or out[6:] in "Bo")
    with pytest.raises(UnsupportedFeatureError, match="source=") as e:
        Grammar.from_lark(grammar)
    assert e.value.location.line == 1


# -- errors: refuse what cannot be enforced, naming keyword and pointer --------------------
def test_a_span_without_a_source_is_refused_with_its_pointer() -> None:
    with pytest.raises(SchemaError, match="source=") as e:
        Grammar.from_json_schema(SCHEMA)
    assert e.value.pointer == "/properties/name/x-corral-span"


@pytest.mark.parametrize(
    ("extra", "pointer"),
    [
        ({"type": "integer"}, "/properties/p/type"),
        ({"$ref": "#/$defs/s"}, "/properties/p/$ref"),
        ({"anyOf": [{"minLength": 2}]}, "/properties/p/anyOf"),
    ],
)
def test_a_span_beside_another_assertion_is_refused(extra: dict, pointer: str) -> None:
    schema = {
        "type": "object",
        "properties": {"p": {"type": "string", "x-corral-span": True, **extra}},
        "$defs": {"s": {"type": "string"}},
    }
    with pytest.raises(UnsupportedFeatureError, match="x-corral-span") as e:
        Grammar.from_json_schema(schema, source="abc")
    assert e.value.location.pointer == pointer


@pytest.mark.parametrize("value", ["yes", 1, {"ignore_case": "no"}, {"fuzzy": True}])
def test_a_malformed_span_keyword_is_refused(value: object) -> None:
    with pytest.raises(SchemaError, match="x-corral-span") as e:
        Grammar.from_json_schema({"type": "string", "x-corral-span": value}, source="abc")
    assert e.value.pointer == "/x-corral-span"


# -- string keywords beside a span: the span automaton is cut to them, exactly -----------
SOURCE = 'Invoice /7 from ACME Corp., "Main" St. 12 \\ Zürich 日本 😀\nDue 2024-05-01; ok.'
BESIDE = [
    {"minLength": 3},
    {"maxLength": 4},
    {"minLength": 2, "maxLength": 3},
    {"minLength": 0, "maxLength": 1},
    {"pattern": "^[A-Z]"},
    {"pattern": "[0-9]$", "maxLength": 5},
    {"format": "date"},
    {"enum": ["ACME", "Zürich", "Paris", "Main", 7, "日本 😀"], "minLength": 3},
    {"const": "Corp."},
    {"pattern": "\\s", "minLength": 2, "maxLength": 4},
]


def _probes() -> list[str]:
    out = {
        SOURCE[i:j] for i in range(len(SOURCE)) for j in range(i + 1, min(len(SOURCE), i + 11) + 1)
    }
    return sorted(out | {"", "Paris", "ACME Corp", "2024-05-02", "Main St", "ACMX"})


@pytest.mark.parametrize("extra", BESIDE, ids=[json.dumps(e, ensure_ascii=False) for e in BESIDE])
@pytest.mark.parametrize("keyword", ["x-corral-span", "x-corral-entities"])
def test_string_keywords_beside_a_span_or_entity_set_are_exact(extra: dict, keyword: str) -> None:
    """The grammar alone (no final check) allows exactly the spans (or names) that the
    keywords beside them allow: no value it allows can fail them at the end."""
    import jsonschema

    names = {SOURCE[i : i + n] for i in range(0, len(SOURCE), 3) for n in (1, 4, 6)}
    names = sorted(names | {"2024-05-01", "ACME", "Corp.", "日本 😀", " \n", "Main St"})
    marker = {"x-corral-span": True} if keyword == "x-corral-span" else {keyword: "n"}
    schema = {"type": "string", **marker, **extra}
    g = Grammar.from_json_schema(schema, source=SOURCE, entities={"n": names}, final_check=False)
    assert g.final_check is None
    terms = list(g.terminals.values())
    others = jsonschema.Draft202012Validator(
        {"type": "string", **extra}, format_checker=jsonschema.FormatChecker()
    )
    for probe in _probes():
        inside = bool(probe) and (probe in SOURCE if keyword == "x-corral-span" else probe in names)
        want = inside and others.is_valid(probe)
        got = any(t.dfa.matches(_json(probe)) for t in terms)
        assert got == want, (probe, want)
    for f in corral.explain(schema, source=SOURCE, entities={"n": names}).findings:
        assert f.status in ("exact", "annotation"), f


INVOICE = (SOURCE * 3)[:150]
VENDOR = {  # the report's schema
    "type": "object",
    "properties": {"vendor": {"type": "string", "x-corral-span": True, "minLength": 3}},
    "required": ["vendor"],
    "additionalProperties": False,
}


def test_the_walks_of_a_span_with_a_length_bound_never_dead_end() -> None:
    """The case of the report: a 150-character source and minLength 3 beside the span."""
    vocab = load_vocab("llama3")
    src, schema = INVOICE, VENDOR
    compiled = corral.compile(schema, vocab, source=src)
    rng = random.Random(0)
    for _ in range(30):
        value = json.loads(_walk(compiled, rng))["vendor"]  # _walk fails on a dead end
        assert len(value) >= 3 and value in src


def test_generate_under_a_span_with_a_length_bound_never_runs_out_of_tokens() -> None:
    """The report's second symptom: ``generate`` with a random model raised "a row of
    logits has no allowed (finite) entry" on every seed."""
    from support.tiny_models import tiny_llama
    from support.tokenizers import load_tokenizer

    tok = load_tokenizer("gpt2")
    model = tiny_llama(tok)
    src, schema = INVOICE, VENDOR
    for seed in range(4):
        value = corral.generate(
            model, "Vendor:", schema=schema, tokenizer=tok, source=src, seed=seed,
            temperature=1.0, max_new_tokens=80,
        )  # fmt: skip
        assert len(value["vendor"]) >= 3 and value["vendor"] in src


def test_keywords_beside_a_span_that_the_grammar_cannot_hold_are_refused(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def refused(extra: dict, source: str = SOURCE) -> Exception:
        schema = {"properties": {"p": {"type": "string", "x-corral-span": True, **extra}}}
        with pytest.raises((UnsupportedFeatureError, corral.CompileBudgetError)) as e:
            Grammar.from_json_schema(schema, source=source)
        return e.value

    e = refused({"pattern": "^(a)\\1$"})  # a backreference: not regular
    assert isinstance(e, UnsupportedFeatureError) and e.location.pointer == "/properties/p/pattern"
    e = refused({"format": "regex"})
    assert isinstance(e, UnsupportedFeatureError) and e.location.pointer == "/properties/p/format"
    # a product beyond its budget is refused by the keyword's pointer, never left to a check
    import corral.grammar.json_schema.strings as strings

    monkeypatch.setattr(strings, "RESTRICTED_MAX_STATES", 500)
    e = refused({"maxLength": 40})
    assert isinstance(e, corral.CompileBudgetError)
    assert e.location is not None and e.location.pointer == "/properties/p/maxLength"
    assert "500" in str(e) and "maxLength" in str(e)


def test_a_span_no_length_bound_allows_is_an_empty_language() -> None:
    schema = {
        "type": "object",
        "properties": {"p": {"type": "string", "x-corral-span": True, "minLength": 99}},
        "required": ["p"],
    }
    with pytest.raises(corral.EmptyLanguageError, match="minLength 99") as e:
        Grammar.from_json_schema(schema, source="short text")
    assert e.value.location is not None and e.value.location.pointer == "/properties/p/minLength"
    # optional: the property is just never written
    del schema["required"]
    g = Grammar.from_json_schema(schema, source="short text", final_check=False)
    assert g.final_check is None


def test_a_span_merged_through_all_of_is_still_enforced() -> None:
    """Where the keyword does not reach the grammar on a string schema of its own, the
    final check still refuses a value that is not a span (never silently dropped)."""
    schema = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"properties": {"a": {"x-corral-span": True}}, "required": ["a"]},
        ]
    }
    g = Grammar.from_json_schema(schema, source="hello world")
    assert g.final_check is not None
    assert g.final_check(b'{"a": "world"}')
    assert not g.final_check(b'{"a": "planet"}')


def test_each_source_is_a_grammar_of_its_own() -> None:
    vocab = load_vocab("gpt2")
    a = corral.compile(SCHEMA, vocab, source="Ana in Rome")
    b = corral.compile(SCHEMA, vocab, source="Bo in Oslo")
    assert a.grammar.fingerprint != b.grammar.fingerprint
    assert corral.compile(SCHEMA, vocab, source="Ana in Rome") is a


def test_source_is_refused_where_it_has_no_meaning() -> None:
    vocab = load_vocab("gpt2")
    with pytest.raises(TypeError, match="source"):
        corral.compile(Grammar.from_regex("a+"), vocab, source="aaa")
    with pytest.raises(TypeError, match="str"):
        corral.compile(SCHEMA, vocab, source=b"bytes")


def test_with_spans_marks_the_string_branches_of_top_level_properties() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "city": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "age": {"type": "integer"},
        },
    }
    before = json.dumps(schema)
    out = json.loads(with_spans(schema, ["name", "city"]))
    assert json.dumps(schema) == before  # the caller's schema is not changed
    assert out["properties"]["name"]["x-corral-span"] is True
    assert out["properties"]["city"]["anyOf"][0]["x-corral-span"] is True
    assert "x-corral-span" not in out["properties"]["city"]["anyOf"][1]
    with pytest.raises(corral.CorralError, match="age"):
        with_spans(schema, ["age"])
    with pytest.raises(corral.CorralError, match="nope"):
        with_spans(schema, ["nope"])
