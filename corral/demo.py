"""``python -m corral.demo``: grammar-constrained extraction with a small real model.

For a few short texts, the model (Gemma-3-270M by default) writes a JSON record under a
Lark grammar, and the same model writes freely from the same prompt; both are printed,
with whether each output parses and has the expected fields, and the time spent.

Options: ``--model PATH`` (a local Hugging Face model folder), ``--max-new-tokens N``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

TEXTS = [
    "Maria Lopez, 34, moved from Seville to Berlin last spring and works as a nurse there.",
    "The parcel was signed for by Tom Becker (age 52) at our office in Dublin.",
    "Aiko Tanaka is 27 and lives in Osaka, where she teaches piano to children.",
]

PROMPT = """Extract the person from the text as JSON.
Text: John Smith, 45, has lived in Paris for ten years.
JSON: {{"name": "John Smith", "age": 45, "city": "Paris"}}
Text: {text}
JSON:"""

# The record's shape as a Lark grammar: fixed keys, a short string, a plausible age.
GRAMMAR = r"""
start: " "? "{\"name\": " NAME ", \"age\": " AGE ", \"city\": " NAME "}"
NAME: /"[A-Z][^"\\\n]{0,40}"/
AGE: /[1-9][0-9]?/
"""


def greedy(model: Any, prompt_ids: Any, *, matcher: Any = None, eos_ids: set[int],
           max_new_tokens: int, stop_text: str | None = None, tokenizer: Any = None
           ) -> tuple[list[int], dict[str, float]]:  # fmt: skip
    """Greedy decoding with a KV cache; with ``matcher``, only allowed tokens are chosen
    and forced tokens are appended without sampling. Returns the new token ids and timings.
    """
    import numpy as np
    import torch

    import corral

    stats = {"forward_s": 0.0, "mask_s": 0.0, "forced": 0.0, "steps": 0.0}

    def tokenize(data: bytes) -> list[int]:
        # the model's own tokenization of forced text (complete characters only)
        text = data.decode("utf-8", "ignore")
        return list(tokenizer.encode(text, add_special_tokens=False)) if tokenizer else []

    out: list[int] = []
    bitmask = corral.allocate_bitmask(1, matcher.vocab_size) if matcher is not None else None
    past = None
    feed = prompt_ids
    for _ in range(max_new_tokens):
        t0 = time.perf_counter()
        with torch.no_grad():
            res = model(input_ids=feed, past_key_values=past, use_cache=True)
        past = res.past_key_values
        logits = res.logits[0, -1].float()
        stats["forward_s"] += time.perf_counter() - t0
        stats["steps"] += 1
        new: list[int]
        if matcher is not None:
            t0 = time.perf_counter()
            forced = (
                matcher.forced_tokens(tokenize)
                if os.environ.get("CORRAL_DEMO_FF", "1") == "1"
                else []
            )
            if forced:
                new = forced
                stats["forced"] += len(forced)
            else:
                matcher.fill_bitmask(bitmask)
                allowed = corral.bitmask_to_bool(bitmask, matcher.vocab_size)[0]
                n = min(logits.shape[0], allowed.shape[0])
                masked = torch.full_like(logits, float("-inf"))
                keep = torch.from_numpy(np.ascontiguousarray(allowed[:n]))
                masked[:n][keep] = logits[:n][keep]
                new = [int(masked.argmax())]
            stats["mask_s"] += time.perf_counter() - t0
        else:
            new = [int(logits.argmax())]
        if new[0] in eos_ids:
            break
        if matcher is not None:
            matcher.consume_tokens(new)
        out.extend(new)
        if stop_text and tokenizer is not None and stop_text in tokenizer.decode(out):
            break
        feed = torch.tensor([new])
    return out, stats


def check(text: str) -> str:
    try:
        record = json.loads(text)
    except ValueError:
        return "not JSON"
    if not isinstance(record, dict) or set(record) != {"name", "age", "city"}:
        return "JSON, wrong fields"
    return "valid record"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m corral.demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--model", default=None, help="local Hugging Face model folder")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    import corral
    from corral.integrations.models import load_model

    torch.manual_seed(0)
    t0 = time.perf_counter()
    model, tok = load_model(args.model)
    print(f"model: {model.config.model_type}, vocabulary {model.config.vocab_size} "
          f"(loaded in {time.perf_counter() - t0:.1f} s)")  # fmt: skip
    gen_eos = getattr(model.generation_config, "eos_token_id", None)
    eos = [gen_eos] if isinstance(gen_eos, int) else list(gen_eos or [])
    vocab = corral.Vocabulary.from_hf(
        tok, vocab_size=model.config.vocab_size, eos_token_ids=eos or None
    )
    t0 = time.perf_counter()
    compiled = corral.compile(GRAMMAR, vocab)
    print(f"grammar compiled in {1000 * (time.perf_counter() - t0):.0f} ms\n")
    eos_ids = set(vocab.eos_token_ids)
    ok = 0
    for text in TEXTS:
        ids = tok(PROMPT.format(text=text), return_tensors="pt").input_ids
        m = compiled.matcher()
        c_ids, c_stats = greedy(model, ids, matcher=m, eos_ids=eos_ids, tokenizer=tok,
                                max_new_tokens=args.max_new_tokens)  # fmt: skip
        f_ids, _f_stats = greedy(model, ids, eos_ids=eos_ids, max_new_tokens=args.max_new_tokens,
                                stop_text="\n", tokenizer=tok)  # fmt: skip
        constrained = vocab.decode(c_ids).decode("utf-8", "replace").strip()
        free = tok.decode(f_ids).split("\n")[0].strip()
        verdict = check(constrained)
        ok += verdict == "valid record" and m.is_accepting()
        share = c_stats["mask_s"] / max(1e-9, c_stats["mask_s"] + c_stats["forward_s"])
        print(f"Text: {text}")
        print(f"  corral : {constrained}   [{verdict}; {len(c_ids)} tokens, "
              f"{int(c_stats['forced'])} forced; mask {share:.0%} of step time]")  # fmt: skip
        print(f"  free   : {free}   [{check(free)}]\n")
    print(f"{ok}/{len(TEXTS)} constrained outputs are valid records.")
    return 0 if ok == len(TEXTS) else 1


if __name__ == "__main__":
    sys.exit(main())
