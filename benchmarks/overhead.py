"""Constrained vs unconstrained generation on the same model and prompts.

For each prompt (the demo's extraction prompts), greedy decoding runs three ways with the
same KV-cache loop (``corral.integrations.generate.decode_steps``):

- **free**: no constraint;
- **constrained, no fast-forward**: the JSON Schema mask at every step (each token costs
  one forward pass, as in free decoding), which isolates the constraint's own cost;
- **constrained**: the same with fast-forward (forced tokens appended without sampling and
  read by the model in one forward pass), what ``corral.generate`` does by default.

Reported per configuration: generated tokens, forward passes, time per generated token,
tokens/s, and the mask's share of step time (mask + forced-token work over forward +
mask + sampling). The slowdown is the time per generated token of "constrained, no
fast-forward" over "free". The first prompt is run once beforehand as a warm-up (compile,
lexer-state caches of the start, Numba cache loading); every measured prompt uses a fresh
compile of the schema without the compile cache, so cache building inside masks counts.
Like the other benchmarks here, it runs on one thread (torch included: ``single_thread``).

    python benchmarks/overhead.py [--model PATH] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import single_thread  # noqa: E402, F401  (before torch loads: one thread)
from run import environment  # noqa: E402


def run_one(
    model: Any, tok: Any, vocab: Any, prompt: str, mode: str, max_new: int
) -> dict[str, Any]:
    import corral
    from corral.demo import SCHEMA
    from corral.integrations.generate import decode_steps, prompt_ids
    from corral.sampler.decode import GenerationStats

    ids = prompt_ids(tok, prompt)
    matcher = None
    if mode != "free":
        matcher = corral.compile(SCHEMA, vocab, cache=False).matcher()
    st = GenerationStats()
    out: list[int] = []
    t0 = time.perf_counter()
    for new in decode_steps(model, ids, matcher, tokenizer=tok, eos_ids=vocab.eos_token_ids,
                            max_new_tokens=max_new, fast_forward=mode == "constrained",
                            stats=st):  # fmt: skip
        out.extend(new)
        if mode == "free" and "\n" in tok.decode(out).strip(" "):
            break  # the free model's record ends at the end of the line
    wall = time.perf_counter() - t0
    n = max(1, st.new_tokens)
    return {
        "mode": mode,
        "tokens": st.new_tokens,
        "forward_passes": st.forward_passes,
        "forced": st.forced_tokens,
        "wall_s": wall,
        "ms_per_token": 1000 * wall / n,
        "tokens_per_s": n / wall,
        "mask_share": st.mask_share,
        "mask_ms_per_step": 1000 * st.mask_s / max(1, st.forward_passes + st.forced_tokens),
        "text": tok.decode(out),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="local model folder (default Gemma-3-270M)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from corral.demo import PROMPT, TEXTS
    from corral.integrations.models import DEFAULT_MODEL, resolve_model
    from corral.integrations.vocabularies import vocabulary_for

    model, tok = resolve_model(args.model or DEFAULT_MODEL)
    vocab = vocabulary_for(model, tok)
    prompts = [PROMPT.format(text=t) for t in TEXTS]
    modes = ("free", "constrained-noff", "constrained")
    for mode in modes:  # warm-up
        run_one(model, tok, vocab, prompts[0], mode, args.max_new_tokens)
    runs: list[dict[str, Any]] = []
    for rep in range(args.repeats):
        for p_i, prompt in enumerate(prompts):
            for mode in modes:
                r = run_one(model, tok, vocab, prompt, mode, args.max_new_tokens)
                r.update(prompt=p_i, repeat=rep)
                runs.append(r)
                print(f"[{rep}] prompt {p_i} {mode:17s} {r['tokens']:3d} tok "
                      f"{r['ms_per_token']:7.1f} ms/tok  mask {100 * r['mask_share']:.2f}%",
                      flush=True)  # fmt: skip

    def agg(mode: str) -> dict[str, float]:
        rs = [r for r in runs if r["mode"] == mode]
        tokens = sum(r["tokens"] for r in rs)
        wall = sum(r["wall_s"] for r in rs)
        return {
            "tokens": tokens,
            "forward_passes": sum(r["forward_passes"] for r in rs),
            "ms_per_token": 1000 * wall / tokens,
            "tokens_per_s": tokens / wall,
            "mask_share_median": statistics.median(r["mask_share"] for r in rs),
            "mask_share_max": max(r["mask_share"] for r in rs),
        }

    summary = {m: agg(m) for m in modes}
    slowdown = summary["constrained-noff"]["ms_per_token"] / summary["free"]["ms_per_token"] - 1
    env = environment(
        "gemma3" if args.model is None else Path(args.model).name, vocab.size,
    )  # fmt: skip
    env["torch_threads"] = torch.get_num_threads()
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    lines = [
        f"{env['cpu_model']}, {env['cpus_usable']} usable cores, Python {env['python']}, "
        f"torch {env['packages'].get('torch')} ({env['torch_threads']} threads), "
        f"transformers {env['packages'].get('transformers')}; {stamp}; model {env['tokenizer']} "
        f"(vocabulary {vocab.size}); greedy, {len(prompts)} prompts x {args.repeats} repeats",
        "",
        "| configuration | tokens | forward passes | ms / token | tokens/s "
        "| mask share (median, max) |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for m in modes:
        s = summary[m]
        lines.append(
            f"| {m} | {s['tokens']} | {s['forward_passes']} | {s['ms_per_token']:.1f} | "
            f"{s['tokens_per_s']:.2f} | {100 * s['mask_share_median']:.2f}%, "
            f"{100 * s['mask_share_max']:.2f}% |"
        )
    lines.append("")
    lines.append(f"Slowdown per generated token, constrained without fast-forward vs free: "
                 f"{100 * slowdown:+.1f}%")  # fmt: skip
    report = "\n".join(lines)
    print("\n" + report)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"overhead-{stamp}.json"
    path.write_text(json.dumps({"environment": env, "settings": vars(args), "runs": runs,
                                "summary": summary, "slowdown": slowdown,
                                "report_markdown": report}, indent=1))  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
