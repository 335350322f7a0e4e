"""Distribution-faithful sampling: exact KL to P_G on synthetic models, and constraint
checks per token of AWRS on a real model.

Part 1 (exact, no model): random bigram models over a 6-token vocabulary with
multi-character tokens ("0", "1", "00", "11", "10", "01"), under the skewed grammar
``1[01]{4}|00000`` (16 strings starting with 1, plus 00000). P_G and masking's
distribution are computed by enumeration; ASAp's sampling distribution after k samples is
computed exactly from its trie; SMC's output distribution (one output drawn from the
weighted particles, as ``generate(sampler="smc")`` does) is averaged over many runs.

Part 2 (Gemma-3-270M, 262,144 tokens): constraint checks per sampled token and tokens/s
of AWRS vs masking, greedy and at temperature 1, on the demo's JSON Schema extraction and
on a regex task.

    python benchmarks/sampling.py [--part exact|model|all]

Writes ``benchmarks/results/sampling-*.json`` and the plots ``docs/results/kl_vs_samples.png``
and ``docs/results/checks_per_token.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOKENS = ["0", "1", "00", "11", "10", "01", "</s>"]
SKEWED = r"1[01]{4}|00000"
ASAP_K = (1, 3, 10, 30, 100, 300, 1000)
SMC_N = (1, 4, 16, 64, 256)


def part_exact(seeds: int, smc_runs: int) -> dict[str, Any]:
    import torch

    import corral
    from corral.sampler.asap import ASAp
    from corral.sampler.smc import smc
    from corral.testing import (
        NGramLM,
        asap_distribution,
        grammar_distribution,
        kl_divergence,
        masked_distribution,
        total_variation,
    )

    rows = []
    for seed in range(seeds):
        lm = NGramLM(TOKENS, order=2, seed=seed)
        compiled = corral.compile(corral.Grammar.from_regex(SKEWED), lm.vocabulary())
        p_g = grammar_distribution(lm, compiled, max_tokens=6)
        mask = masked_distribution(lm, compiled, max_tokens=6)
        kl_mask = kl_divergence(p_g, mask)
        tv_mask = total_variation(p_g, mask)
        asap = ASAp(lm.next_logits, compiled, key=f"seed{seed}")
        gen = torch.Generator().manual_seed(seed)
        kl_asap, tv_asap = {}, {}
        done = 0
        for k in ASAP_K:
            while done < k:
                asap.sample(generator=gen)
                done += 1
            q = asap_distribution(asap, lm, compiled)
            kl_asap[k] = kl_divergence(p_g, q)
            tv_asap[k] = total_variation(p_g, q)
        kl_smc, tv_smc = {}, {}
        checks_smc = {}
        for n in SMC_N:
            avg: dict[tuple[int, ...], float] = {}
            checks = steps = 0
            for _ in range(smc_runs):
                res = smc(lm.next_logits, compiled, n_particles=n, generator=gen)
                for s, w in res.distribution().items():
                    avg[s] = avg.get(s, 0.0) + w / smc_runs
                checks += res.checks
                steps += sum(len(p.tokens) + 1 for p in res.particles if p.done)
            kl_smc[n] = kl_divergence(p_g, avg)
            tv_smc[n] = total_variation(p_g, avg)
            checks_smc[n] = checks / max(1, steps)
        rows.append({"seed": seed, "kl_mask": kl_mask, "tv_mask": tv_mask, "kl_asap": kl_asap,
                     "tv_asap": tv_asap, "kl_smc": kl_smc, "tv_smc": tv_smc,
                     "smc_checks_per_token": checks_smc, "strings": len(p_g)})  # fmt: skip
        print(f"seed {seed}: KL mask {kl_mask:.4f}; ASAp "
              + ", ".join(f"k={k}: {v:.2e}" for k, v in kl_asap.items())
              + f"; TV mask {tv_mask:.3f}; SMC TV "
              + ", ".join(f"N={n}: {v:.3f}" for n, v in tv_smc.items()),
              flush=True)  # fmt: skip
    return {"rows": rows, "smc_runs": smc_runs}


def part_model(model_path: str | None, max_new: int) -> dict[str, Any]:
    import corral
    from corral.demo import PROMPT, SCHEMA, TEXTS
    from corral.integrations.models import DEFAULT_MODEL, resolve_model
    from corral.integrations.vocabularies import vocabulary_for

    model, tok = resolve_model(model_path or DEFAULT_MODEL)
    vocab = vocabulary_for(model, tok)
    tasks = [("json-schema", PROMPT.format(text=t), {"schema": SCHEMA}) for t in TEXTS[:3]]
    tasks += [("regex-date", f"Text: {t}\nThe date written as YYYY-MM-DD:",
               {"regex": r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"})
              for t in ("The treaty was signed on the 4th of July, 1976.",
                        "We met on March 3rd 2021 in Rome.")]  # fmt: skip
    corral.generate(model, tasks[0][1], tokenizer=tok, max_new_tokens=max_new, **tasks[0][2])
    rows = []
    for name, prompt, spec in tasks:
        for sampler in ("mask", "awrs"):
            for temperature in (0.0, 1.0):
                t0 = time.perf_counter()
                r = corral.generate(model, prompt, tokenizer=tok, sampler=sampler, seed=0,
                                    temperature=temperature, max_new_tokens=max_new,
                                    details=True, **spec)  # fmt: skip
                wall = time.perf_counter() - t0
                st = r.stats
                checks = st.checks if sampler == "awrs" else vocab.size * st.sampled_tokens
                rows.append({"task": name, "sampler": sampler, "temperature": temperature,
                             "text": r.text, "sampled": st.sampled_tokens,
                             "forced": st.forced_tokens, "checks": checks,
                             "checks_per_sampled_token": checks / max(1, st.sampled_tokens),
                             "tokens_per_s": st.new_tokens / wall,
                             "constraint_ms_per_token": 1000 * (st.mask_s + st.sample_s)
                             / max(1, st.new_tokens)})  # fmt: skip
                print(f"{name:12s} {sampler:5s} T={temperature}: {r.text[:60]!r} "
                      f"checks/token {rows[-1]['checks_per_sampled_token']:.1f} "
                      f"{rows[-1]['tokens_per_s']:.2f} tok/s", flush=True)  # fmt: skip
    return {"rows": rows, "vocab_size": vocab.size}


def plots(exact: dict[str, Any] | None, model: dict[str, Any] | None, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    if exact:
        fig, ax = plt.subplots(figsize=(6, 4))
        for row in exact["rows"]:
            ks = list(row["kl_asap"])
            ax.plot(ks, [max(row["kl_asap"][k], 1e-12) for k in ks], "o-", alpha=0.7,
                    label=f"ASAp (model {row['seed']})")  # fmt: skip
            ax.axhline(row["kl_mask"], ls="--", lw=0.8, color="gray")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ASAp samples drawn (k)")
        ax.set_ylabel("KL(P_G || q), exact")
        ax.set_title("Skewed toy grammar: ASAp vs masking (dashed)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "kl_vs_samples.png", dpi=110)
        plt.close(fig)
    if model:
        fig, ax = plt.subplots(figsize=(6, 4))
        rows = [r for r in model["rows"] if r["sampler"] == "awrs"]
        labels = [f"{r['task']}\nT={r['temperature']}" for r in rows]
        ax.bar(range(len(rows)), [r["checks_per_sampled_token"] for r in rows])
        ax.axhline(model["vocab_size"], color="red", ls="--", label="full mask (V checks)")
        ax.set_yscale("log")
        ax.set_xticks(range(len(rows)), labels, fontsize=6, rotation=45)
        ax.set_ylabel("constraint checks per sampled token")
        ax.set_title(f"AWRS on Gemma-3-270M (V = {model['vocab_size']:,})")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "checks_per_token.png", dpi=110)
        plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("exact", "model", "all"), default="all")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--smc-runs", type=int, default=100)
    ap.add_argument("--model", default=None)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    exact = part_exact(args.seeds, args.smc_runs) if args.part in ("exact", "all") else None
    model = part_model(args.model, args.max_new_tokens) if args.part in ("model", "all") else None
    plots(exact, model, ROOT / "docs" / "results")
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    path = ROOT / "benchmarks" / "results" / f"sampling-{stamp}.json"
    path.write_text(json.dumps({"settings": vars(args), "exact": exact, "model": model},
                               indent=1, default=str))  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
