"""GrammarLogitsProcessor inside transformers' model.generate: greedy, sampling, beam
search, per-row grammars, left padding, padded vocabularies, several EOS ids, assisted
decoding; and the LogitsProcessor contract."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import torch
from support.tiny_models import generate_texts, tiny_llama
from support.tokenizers import load_tokenizer
from transformers import LogitsProcessorList

import corral
from corral.integrations.transformers import GrammarLogitsProcessor

OBJ = {
    "type": "object",
    "properties": {
        "a": {"type": "integer", "minimum": 0, "maximum": 999},
        "b": {"type": "boolean"},
    },
    "required": ["a", "b"],
    "additionalProperties": False,
}
ANSWER = r"(yes|no)( maybe)?"
PADDED = 50_304  # GPT-2's 50,257 tokens in an output layer padded to a multiple of 64


@pytest.fixture(scope="module")
def setup():  # type: ignore[no-untyped-def]
    tok = load_tokenizer("gpt2")
    tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model = tiny_llama(tok, vocab_size=PADDED)
    vocab = corral.Vocabulary.from_hf(tok, vocab_size=PADDED)
    obj = corral.compile(OBJ, vocab)
    ans = corral.compile(corral.Grammar.from_regex(ANSWER), vocab)
    return tok, model, obj, ans


def _run(setup, grammars, prompts, **kw):  # type: ignore[no-untyped-def]
    tok, model, _, _ = setup
    proc = GrammarLogitsProcessor(grammars)
    return generate_texts(tok, model, proc, prompts, max_new_tokens=40, **kw)


def _check(kind: str, text: str) -> None:
    if kind == "obj":
        jsonschema.validate(json.loads(text), OBJ)
    else:
        assert re.fullmatch(ANSWER, text), text


@pytest.mark.parametrize(
    "kw",
    [
        {"do_sample": False},
        {"do_sample": True, "temperature": 1.3, "top_k": 100, "top_p": 0.95},
        {"num_beams": 3, "do_sample": False},
        {"num_beams": 2, "num_return_sequences": 2, "do_sample": False},
    ],
    ids=["greedy", "sampling", "beam", "beam-multi"],
)
def test_mixed_grammars_per_row(setup, kw) -> None:  # type: ignore[no-untyped-def]
    _, _, obj, ans = setup
    torch.manual_seed(0)
    prompts = ["A longer first prompt, so the second row is left padded:", "Answer:"]
    texts = _run(setup, [obj, ans], prompts, **kw)
    per = len(texts) // 2
    for i, text in enumerate(texts):
        _check("obj" if i < per else "ans", text)


def test_sampling_many_seeds(setup) -> None:  # type: ignore[no-untyped-def]
    _, _, obj, _ = setup
    seen = set()
    for seed in range(8):
        torch.manual_seed(seed)
        (text,) = _run(setup, obj, ["JSON:"], do_sample=True, temperature=1.5)
        _check("obj", text)
        seen.add(text)
    assert len(seen) > 1


def test_assisted_decoding(setup) -> None:  # type: ignore[no-untyped-def]
    tok, model, obj, _ = setup
    assistant = tiny_llama(tok, vocab_size=PADDED, seed=1)  # disagrees with the model often
    enc = tok(["JSON:"], return_tensors="pt")
    proc = GrammarLogitsProcessor(obj)
    out = model.generate(
        **enc, assistant_model=assistant, logits_processor=LogitsProcessorList([proc]),
        max_new_tokens=40, do_sample=False, pad_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
    )  # fmt: skip
    row = out[0, enc["input_ids"].shape[1] :].tolist()
    ids = row[: row.index(tok.eos_token_id)] if tok.eos_token_id in row else row
    _check("obj", tok.decode(ids))
    plain = _run(setup, obj, ["JSON:"], do_sample=False)[0]
    assert tok.decode(ids) == plain  # greedy with a draft model = greedy without


def test_contract_new_tensor_and_shapes(setup) -> None:  # type: ignore[no-untyped-def]
    tok, _, obj, _ = setup
    proc = GrammarLogitsProcessor(obj)
    ids = torch.tensor([[1, 2, 3]])
    scores = torch.randn(1, PADDED)
    before = scores.clone()
    out = proc(ids, scores)
    assert torch.equal(scores, before)  # not modified in place
    assert out.shape == scores.shape and out is not scores
    allowed = torch.isfinite(out[0]).nonzero().flatten().tolist()
    assert allowed and all(tok.decode([t]).startswith("{") for t in allowed)
    assert not torch.isfinite(out[0, len(tok) :]).any()  # padding ids never allowed
    with pytest.raises(ValueError, match="rows"):
        proc(torch.tensor([[1, 2, 3]]), torch.randn(2, PADDED))
    with pytest.raises(ValueError, match="split evenly"):
        GrammarLogitsProcessor([obj, obj])(
            torch.ones(3, 3, dtype=torch.long), torch.randn(3, PADDED)
        )
    with pytest.raises(corral.TokenizerError):
        GrammarLogitsProcessor(obj)(ids, torch.randn(1, 1000))  # narrower than the vocabulary


def test_rows_reordered_and_cut_back(setup) -> None:  # type: ignore[no-untyped-def]
    tok, _, obj, _ = setup
    proc = GrammarLogitsProcessor(obj)
    prompt = [5, 6]
    seq = tok.encode('{"a":12,"b":true}')
    proc(torch.tensor([prompt]), torch.zeros(1, PADDED))
    for k in range(1, len(seq) + 1):
        out = proc(torch.tensor([prompt + seq[:k]]), torch.zeros(1, PADDED))
    assert torch.isfinite(out[0, tok.eos_token_id])  # complete: EOS allowed
    # cut back (a rejected draft) and two rows at different points (beams)
    rows = torch.tensor([prompt + seq[:3], prompt + seq[:1] + [tok.eos_token_id] * 2])
    out = proc(rows, torch.zeros(2, PADDED))
    assert not torch.isfinite(out[0, tok.eos_token_id])
    # row 1 left the grammar (EOS inside the object): it may only end
    assert torch.isfinite(out[1]).nonzero().flatten().tolist() == [tok.eos_token_id]


def test_reuse_without_reset_is_refused(setup) -> None:  # type: ignore[no-untyped-def]
    _, _, obj, _ = setup
    proc = GrammarLogitsProcessor(obj)
    proc(torch.ones(1, 5, dtype=torch.long), torch.zeros(1, PADDED))
    with pytest.raises(corral.MatcherStateError, match="new GrammarLogitsProcessor"):
        proc(torch.ones(1, 3, dtype=torch.long), torch.zeros(1, PADDED))
    proc.reset()
    proc(torch.ones(1, 3, dtype=torch.long), torch.zeros(1, PADDED))


def test_awrs_processor(setup) -> None:  # type: ignore[no-untyped-def]
    from corral.integrations.transformers import AWRSLogitsProcessor

    tok, model, obj, ans = setup
    enc = tok(["A longer first prompt, so the second row is left padded:", "Answer:"],
              return_tensors="pt", padding=True)  # fmt: skip
    width = enc["input_ids"].shape[1]

    def run(proc, **kw):  # type: ignore[no-untyped-def]
        out = model.generate(**enc, logits_processor=LogitsProcessorList([proc]),
                             max_new_tokens=40, pad_token_id=tok.eos_token_id,
                             eos_token_id=tok.eos_token_id, **kw)  # fmt: skip
        texts = []
        for row in out[:, width:].tolist():
            ids = row[: row.index(tok.eos_token_id)] if tok.eos_token_id in row else row
            texts.append(tok.decode(ids))
        return texts

    greedy = AWRSLogitsProcessor([obj, ans], temperature=0)
    assert run(greedy, do_sample=False) == run(GrammarLogitsProcessor([obj, ans]), do_sample=False)
    assert greedy.checks > 0
    for seed in range(3):
        texts = run(AWRSLogitsProcessor([obj, ans], temperature=1.0, seed=seed), do_sample=True)
        _check("obj", texts[0])
        _check("ans", texts[1])
