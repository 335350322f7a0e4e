"""Masks of an ambiguous grammar with one-byte lexemes (the shape of sympy's LaTeX grammar).

Juxtaposition as multiplication (``adj: (s | NUM) m``) with one-letter symbols makes every
letter of a token a lexeme boundary, and ``"\\sin" e`` leaves open where its argument
ends. A mask walks the token trie with a chart set per lexeme, so a long token of letters
starts one nested walk per letter and per lexeme that could follow. These masks used to
stop with ``CompileBudgetError`` after ``2x\\sin(y+``; here they are computed, and each is
compared with the matcher's own byte-level chart on a sample of the vocabulary: allowed
and refused tokens, and long runs of letters.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from support.tokenizers import load_tokenizer, load_vocab
from support.words import lark_accepts, mask_of

import corral

LATEX_LIKE = r"""
start: e
e: m | e "+" m
m: p | m "*" p | adj
adj: (s | NUM) m
p: f | f "^" p
f: s | NUM | "(" e ")" | "\\sin" e
s: /[a-zA-Z]/
NUM: /[0-9]+/
%ignore /[ \t\n]+/
%ignore "\\left"
%ignore "\\right"
"""

DOCUMENT = r"2x\sin(y+3)^2 + 4 a b c \left(xy\right)"


def _sample(
    vocab: corral.Vocabulary, mask: np.ndarray, letters: list[int], rng: random.Random
) -> list[int]:
    """200 allowed tokens, 200 refused ones and 200 of ``letters``, at random."""
    allowed = np.flatnonzero(mask[: vocab.size]).tolist()
    refused = np.flatnonzero(~mask[: vocab.size]).tolist()
    out = [rng.sample(p, min(200, len(p))) for p in (allowed, refused, letters)]
    return sorted(set(out[0] + out[1] + out[2]))


@pytest.mark.parametrize("tokenizer", ["llama3", "gpt2"])
def test_masks_of_an_ambiguous_grammar_match_the_chart(tokenizer: str) -> None:
    assert lark_accepts(LATEX_LIKE, DOCUMENT)
    tok, v = load_tokenizer(tokenizer), load_vocab(tokenizer)
    c = corral.compile(LATEX_LIKE, v, cache=False)  # its own: no masks cached by other tests
    m = c.matcher()
    rng = random.Random(0)
    # tokens of 6 or more ASCII letters (or a space and 5 letters): the deepest walks
    letters = [
        t
        for t in range(v.size)
        if len(b := v.token_bytes(t)) >= 6 and b.isascii() and b.lstrip(b" ").isalpha()
    ]
    assert len(letters) > 1000
    ids = tok.encode(DOCUMENT, add_special_tokens=False)
    for i, t in enumerate(ids):
        mask = mask_of(m)
        assert mask[t], f"token {i} of the document missing from the mask"
        for u in _sample(v, mask, letters, rng):
            probe = m.fork()
            assert probe.try_consume(u) == bool(mask[u]), (i, v.token_bytes(u))
        m.consume(t)
    assert m.is_accepting()
