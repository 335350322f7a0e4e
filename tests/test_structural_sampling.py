"""The samplers on structural tags, against the exact distributions of an enumerable toy.

A bigram model (:class:`~corral.testing.NGramLM`) over a dozen tokens, some of which cross
from free text into a trigger or an end string (``x<`` then ``t>``, ``</t>`` after text),
and structural tags whose outputs can be enumerated:

* finite languages: a reasoning block with a token budget followed by a choice, and
  budgeted free text followed by a tag of ``triggered_tags``;
* an infinite one: free text with triggered tags, enumerated up to a token budget (the
  per-token samplers then return the output as it is at the budget; SMC's target is the
  model conditioned on the constraint and on fitting the budget, see ``docs/sampling.md``).

Checked as ``tests/test_sampling.py``, ``tests/test_decoding_protocol.py`` and
``tests/test_api_edges.py`` check the plain grammars:

* at every enumerated prefix, exactly: AWRS's check of each token (``try_consume`` and
  ``rollback``; EOS: ``is_accepting``) agrees with the mask, and the masked logits are the
  model's restricted and renormalised; so AWRS's token distribution is masking's (AWRS
  itself is checked exactly in ``tests/test_awrs.py``);
* masking and AWRS run in the decoding loop: chi-square of the sampled outputs against the
  exact per-token (masked) distribution;
* SMC (through the registry): its weighted outputs approach ``P_G`` (total variation well
  below masking's and falling with the particles) and ``Ẑ`` is near ``P(L(G))``;
* ASAp: its first sample is masking's, its distribution approaches ``P_G`` with samples,
  and is ``P_G`` once every path is expanded;
* and AWRS's cost in free text: a couple of matcher checks per token where masking checks
  the whole vocabulary, counted on the matcher itself.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch
from support.sampling import chi_square_p
from support.structural_reference import Reference

import corral
from corral.automata import allocate_bitmask
from corral.grammar import structural as st
from corral.sampler.asap import ASAp
from corral.sampler.awrs import matcher_check
from corral.sampler.config import GenerationConfig
from corral.sampler.decode import GenerationStats, token_steps
from corral.sampler.masking import masked_logits
from corral.sampler.smc import smc
from corral.testing import (
    NGramLM,
    asap_distribution,
    constrained_sequences,
    grammar_distribution,
    kl_divergence,
    masked_distribution,
    total_variation,
)

# tokens crossing from free text into the trigger "<t" (x< then t>) and into "</t>"
TOKENS = ["x", "a", "b", "<", ">", "/", "x<", "<t", "t>", "</", "</t>", "</s>"]
TAG = st.Tag("<t>", st.Or(["a", "b"]), "</t>")


def reasoning(budget: int) -> st.Format:
    """A reasoning block of at most ``budget`` tokens of text, then a choice."""
    return st.Tag("<t>", st.AnyText(max_tokens=budget), "</t>") + st.Or(["a", "b"])


def text_then_tag(budget: int) -> st.Format:
    """At most ``budget`` tokens of free text, then one triggered tag and the end."""
    tags = st.TriggeredTags(["<t"], [TAG], at_least_one=True, stop_after_first=True)
    return st.AnyText(max_tokens=budget) + tags


FINITE = {"reasoning": reasoning, "text_then_tag": text_then_tag}
LONGEST = 8  # no output of the finite specs (budget <= 2) has more tokens
TRIGGERED = st.TriggeredTags(["<t"], [TAG])  # free text with tags: an infinite language
CUT = 4  # the token budget its enumeration and its samplers run with


def bigram(tokens: list[str], seed: int = 0) -> NGramLM:
    """A bigram model whose every conditional is drawn now, in a fixed order (an
    :class:`NGramLM` draws a row when first asked for it: ask in the same order whatever
    the tests run)."""
    lm = NGramLM(tokens, order=2, seed=seed)
    lm.next_logits([[]] + [[t] for t in range(lm.vocab_size)])
    return lm


@pytest.fixture(scope="module")
def lm() -> NGramLM:
    return bigram(TOKENS)


@pytest.fixture(scope="module")
def compiled(lm: NGramLM) -> Callable[[str], Any]:
    vocab = lm.vocabulary()
    cache: dict[str, Any] = {}

    def get(name: str) -> Any:
        if name not in cache:
            spec: st.Format
            if name == "triggered":
                spec = TRIGGERED
            else:
                kind, budget = name.rsplit("/", 1)
                spec = FINITE[kind](int(budget))
            cache[name] = corral.compile(spec, vocab)
        return cache[name]

    return get


# ---------------------------------------------------------------------------------------
# exact enumeration, with the per-step checks of the samplers' building blocks
# ---------------------------------------------------------------------------------------
def enumerate_outputs(
    lm: NGramLM, compiled: Any, budget: int, *, fresh: bool = False
) -> tuple[dict[tuple[int, ...], float], dict[tuple[int, ...], float], int]:
    """``(masked, complete, prefixes)`` over the outputs of at most ``budget`` tokens
    (``prefixes``: how many prefixes shorter than ``budget`` were checked).

    ``masked``: the exact distribution of per-token masked sampling stopped after
    ``budget`` tokens (an output of ``budget`` tokens is returned as it is, complete or
    not). ``complete``: every complete output ``s`` of at most ``budget`` tokens with
    ``P(s) · P(EOS | s)``. For a language of outputs shorter than ``budget`` these are
    :func:`masked_distribution` and :func:`constrained_sequences`.

    At every prefix shorter than ``budget``, asserts that AWRS's check agrees with the mask
    on every token, that the masked logits are the model's restricted to the mask and
    renormalised, and that a fork of the matcher allows the same tokens (``fresh``: so does
    a new matcher that read the prefix, as a sampler's does, where this one got there by
    consuming and rolling back, as the reference enumerations do).
    """
    masked: dict[tuple[int, ...], float] = {}
    complete: dict[tuple[int, ...], float] = {}
    m = compiled.matcher()
    check = matcher_check(m)
    eos = lm.eos_id
    bitmask = allocate_bitmask(1, m.vocab_size)
    prefixes = 0

    def visit(prefix: list[int], log_q: float, log_p: float) -> None:
        nonlocal prefixes
        lp = lm.logprob_next(prefix)
        if len(prefix) == budget:  # the samplers stop here, drawing nothing
            masked[tuple(prefix)] = math.exp(log_q)
            if m.is_accepting():
                complete[tuple(prefix)] = math.exp(log_p + float(lp[eos]))
            return
        prefixes += 1
        allowed = m.allowed_token_ids().tolist()
        assert allowed, f"a dead end after {prefix}"
        checked = [t for t in range(lm.vocab_size) if check(t)]
        assert checked == allowed, f"AWRS's checks differ from the mask after {prefix}"
        assert m.num_tokens == len(prefix)  # the checks leave the matcher where it was
        assert (eos in allowed) is m.is_accepting()
        assert m.fork().allowed_token_ids().tolist() == allowed  # SMC resamples by forking
        if fresh:
            new = compiled.matcher()
            new.consume_tokens(prefix)
            assert new.allowed_token_ids().tolist() == allowed
        m.fill_bitmask(bitmask)
        log_norm = float(torch.logsumexp(lp[allowed], dim=0))
        got = torch.log_softmax(masked_logits(lp, bitmask, m.vocab_size), dim=0)
        want = torch.full_like(lp, -math.inf)
        want[allowed] = lp[allowed] - log_norm
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
        if eos in allowed:
            complete[tuple(prefix)] = math.exp(log_p + float(lp[eos]))
        for t in allowed:
            lq = log_q + float(lp[t]) - log_norm
            if t == eos:
                masked[tuple(prefix)] = math.exp(lq)
                continue
            m.consume(t)
            visit([*prefix, t], lq, log_p + float(lp[t]))
            m.rollback(1)

    visit([], 0.0, 0.0)
    return masked, complete, prefixes


def normalised(d: dict[Any, float]) -> dict[Any, float]:
    total = sum(d.values())
    return {k: v / total for k, v in d.items()}


def draw(lm: NGramLM, compiled: Any, sampler: str, n: int, budget: int) -> tuple[Counter, int]:  # type: ignore[type-arg]
    """``n`` outputs of the decoding loop with ``sampler`` (seeds 0..n-1), and the checks
    it reported."""
    counts: Counter[tuple[int, ...]] = Counter()
    checks = 0
    for seed in range(n):
        config = GenerationConfig(sampler=sampler, temperature=1.0, seed=seed,
                                  max_new_tokens=budget, fast_forward=False)  # fmt: skip
        stats = GenerationStats()
        out = [t for s in token_steps(lm, [], compiled.matcher(), config, stats=stats) for t in s]
        counts[tuple(out)] += 1
        checks += stats.checks
    return counts, checks


def text_of(lm: NGramLM, seq: tuple[int, ...]) -> str:
    return "".join(lm.tokens[t] for t in seq)


# ---------------------------------------------------------------------------------------
# the finite specs
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(FINITE))
def test_finite_language_is_the_spec_and_the_reference_agrees(lm, compiled, kind) -> None:  # type: ignore[no-untyped-def]
    c = compiled(f"{kind}/2")
    masked, complete, prefixes = enumerate_outputs(lm, c, LONGEST + 1, fresh=True)
    # the project's reference enumeration gives the same distributions
    assert max(len(s) for s in complete) <= LONGEST
    ref_mask = masked_distribution(lm, c, max_tokens=LONGEST)
    ref_seqs = constrained_sequences(lm, c, max_tokens=LONGEST)
    assert set(ref_mask) == set(masked) == set(complete) == set(ref_seqs)
    assert total_variation(ref_mask, masked) < 1e-12
    assert max(abs(ref_seqs[s] - p) for s, p in complete.items()) < 1e-15
    # every output is the spec's (the independent Lark reference) within its token budget
    ref = Reference(FINITE[kind](2))
    texts = {text_of(lm, s) for s in complete}
    assert all(ref.accepts(t) for t in texts)
    start, stop = (3, "</t>") if kind == "reasoning" else (0, "<t>")
    for s in complete:
        end = text_of(lm, s).index(stop, start)  # the text ends at the first "</t>" / "<t>"
        pos, holding = 0, 0
        for t in s:
            size = len(lm.tokens[t])
            holding += pos < end and pos + size > start
            pos += size
        assert holding <= 2, (kind, [lm.tokens[t] for t in s])
    # tokens cross from the text into what ends it
    crossing = {"reasoning": ("</", "x<"), "text_then_tag": ("x<",)}[kind]
    assert all(any(lm.tokens.index(tok) in s for s in complete) for tok in crossing)
    print(f"{kind}: {len(complete)} outputs, {len(texts)} texts, {prefixes} prefixes")


@pytest.mark.parametrize("sampler", ["mask", "awrs"])
@pytest.mark.parametrize("kind", sorted(FINITE))
def test_token_samplers_sample_the_masked_distribution(lm, compiled, kind, sampler) -> None:  # type: ignore[no-untyped-def]
    c = compiled(f"{kind}/2")
    exact = masked_distribution(lm, c, max_tokens=LONGEST)
    counts, checks = draw(lm, c, sampler, 400, LONGEST + 1)
    p = chi_square_p(counts, exact)
    print(f"{kind} {sampler}: chi-square p = {p:.3f}, {checks} checks")
    assert p > 1e-3
    assert (checks > 0) is (sampler == "awrs")


@pytest.mark.parametrize("kind", sorted(FINITE))
def test_smc_approaches_p_g(lm, compiled, kind) -> None:  # type: ignore[no-untyped-def]
    c = compiled(f"{kind}/1")
    p_g = grammar_distribution(lm, c, max_tokens=LONGEST)
    z = sum(constrained_sequences(lm, c, max_tokens=LONGEST).values())
    tv_mask = total_variation(masked_distribution(lm, c, max_tokens=LONGEST), p_g)
    tv: dict[int, float] = {}
    z_hat = []
    for n in (16, 512):
        config = GenerationConfig(sampler="smc", temperature=1.0, n_particles=n,
                                  max_new_tokens=LONGEST)  # fmt: skip
        vals = []
        for seed in range(3):
            res = config.make_sampler().sample(lm, c, generator=torch.Generator().manual_seed(seed),
                                               context=None, prompt_key="")  # fmt: skip
            dist = dict(res.particles)
            assert set(dist) <= set(p_g) and tuple(res.tokens) in dist
            vals.append(total_variation(dist, p_g))
            if n == 512:
                z_hat.append(math.exp(res.log_z))
        tv[n] = sum(vals) / len(vals)
    ratio = sum(z_hat) / len(z_hat) / z
    print(f"{kind}: TV(mask) {tv_mask:.3f}, SMC TV {tv}, mean Z-hat / Z {ratio:.2f}")
    assert tv[512] < 0.6 * tv[16] and tv[512] < 0.6 * tv_mask
    assert 0.6 < ratio < 1.5


@pytest.mark.parametrize("budget", [1, 2])
@pytest.mark.parametrize("kind", sorted(FINITE))
def test_asap_starts_as_masking_and_ends_at_p_g(lm, compiled, kind, budget) -> None:  # type: ignore[no-untyped-def]
    c = compiled(f"{kind}/{budget}")
    p_g = grammar_distribution(lm, c, max_tokens=LONGEST)
    mask = masked_distribution(lm, c, max_tokens=LONGEST)
    kl_mask = kl_divergence(p_g, mask)
    assert kl_mask > 0.1  # masking is far from P_G here
    asap = ASAp(lm.next_logits, c, key=kind)
    assert total_variation(asap_distribution(asap, lm, c), mask) < 1e-12
    gen = torch.Generator().manual_seed(0)
    if budget == 1:  # (with budget 2, a few hundred samples are too few to tell)
        for _ in range(300):
            asap.sample(generator=gen, max_tokens=LONGEST)
        kl = kl_divergence(p_g, asap_distribution(asap, lm, c))
        print(f"{kind}/{budget}: KL(P_G || mask) {kl_mask:.3f}, after 300 ASAp samples {kl:.4f}")
        assert kl < 0.2 * kl_mask
    assert asap.expand_all() > 0
    final = asap_distribution(asap, lm, c)
    assert max(abs(final.get(s, 0.0) - p) for s, p in p_g.items()) < 1e-9


# ---------------------------------------------------------------------------------------
# free text with triggered tags (infinite), up to a token budget
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def triggered(lm, compiled):  # type: ignore[no-untyped-def]
    c = compiled("triggered")
    masked, complete, prefixes = enumerate_outputs(lm, c, CUT)
    assert abs(sum(masked.values()) - 1) < 1e-12
    assert any(len(s) == CUT and s not in complete for s in masked)  # cut mid-tag
    print(f"triggered: {len(masked)} outputs at budget {CUT}, {prefixes} prefixes checked")
    return c, masked, complete


@pytest.mark.parametrize("sampler", ["mask", "awrs"])
def test_token_samplers_in_triggered_free_text(lm, triggered, sampler) -> None:  # type: ignore[no-untyped-def]
    c, masked, _ = triggered
    counts, _ = draw(lm, c, sampler, 1500, CUT)
    p = chi_square_p(counts, masked)
    print(f"triggered {sampler}: chi-square p = {p:.3f}")
    assert p > 1e-3
    # the samples went through a trigger spelled across free text
    x_lt, t_gt = lm.tokens.index("x<"), lm.tokens.index("t>")
    assert any(s[i : i + 2] == (x_lt, t_gt) for s in counts for i in range(len(s)))


def features(lm: NGramLM, seq: tuple[int, ...]) -> tuple[int, str]:
    """Length and the tags' contents: a coarse view of an output (to compare SMC's few
    thousand weighted particles with a target spread over thousands of outputs)."""
    return len(seq), "".join(re.findall(r"<t>([ab])</t>", text_of(lm, seq)))


def coarsen(lm: NGramLM, dist: dict[tuple[int, ...], float]) -> dict[tuple[int, str], float]:
    out: dict[tuple[int, str], float] = {}
    for s, p in dist.items():
        out[features(lm, s)] = out.get(features(lm, s), 0.0) + p
    return out


def test_smc_in_triggered_free_text_targets_the_budget(lm, triggered) -> None:  # type: ignore[no-untyped-def]
    c, masked, complete = triggered
    z = sum(complete.values())
    target = normalised(complete)
    coarse_target = coarsen(lm, target)
    z_hat, tvs = [], []
    for seed in range(2):
        res = smc(lm.next_logits, c, n_particles=512, max_tokens=CUT,
                  generator=torch.Generator().manual_seed(seed))  # fmt: skip
        dist = res.distribution()
        assert dist and set(dist) <= set(complete)
        tvs.append(total_variation(coarsen(lm, dist), coarse_target))
        z_hat.append(math.exp(res.log_z))
    # masking's complete outputs, for scale
    mask = normalised({s: p for s, p in masked.items() if s in complete})
    tv_mask = total_variation(coarsen(lm, mask), coarse_target)
    ratio = sum(z_hat) / len(z_hat) / z
    print(f"triggered SMC: coarse TV {tvs} (mask {tv_mask:.3f}), mean Z-hat / Z {ratio:.2f}")
    assert max(tvs) < 0.5 * tv_mask
    assert 0.6 < ratio < 1.5


# ---------------------------------------------------------------------------------------
# AWRS's cost in free text
# ---------------------------------------------------------------------------------------
class CountingMatcher:
    """A matcher that counts the calls a sampler makes: token checks (``try_consume``,
    ``is_accepting``) and masks (``fill_bitmask``), per step (a step ends with
    ``consume``), with whether the step began in free text (nearly every token allowed,
    from a mask computed here and not counted)."""

    def __init__(self, matcher: Any) -> None:
        self._m = matcher
        self.calls = Counter[str]()
        self.steps: list[tuple[int, bool]] = []  # (checks, in free text)
        self._checks = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._m, name)

    def try_consume(self, token: int) -> bool:
        self.calls["try_consume"] += 1
        self._checks += 1
        return self._m.try_consume(token)

    def is_accepting(self) -> bool:
        self.calls["is_accepting"] += 1
        self._checks += 1
        return self._m.is_accepting()

    def fill_bitmask(self, out: Any, row: int = 0) -> None:
        self.calls["fill_bitmask"] += 1
        self._m.fill_bitmask(out, row)

    def consume(self, token: int) -> None:
        free = len(self._m.allowed_token_ids()) >= 0.9 * self._m.vocab_size
        self.steps.append((self._checks, free))
        self._checks = 0
        self._m.consume(token)


def test_awrs_checks_a_few_tokens_per_step_in_free_text() -> None:
    chars = "xab<>/t"
    pairs = [a + b for a in chars for b in chars]
    tokens = sorted({*chars, *pairs, *(a + b for a in "xab" for b in pairs), "<t>", "</t>"})
    lm = bigram([*tokens, "</s>"], seed=1)
    c = corral.compile(TRIGGERED, lm.vocabulary())
    v = lm.vocab_size
    awrs_steps: list[tuple[int, bool]] = []
    awrs_checks = reported = tokens_out = 0
    mask_fills = mask_steps = 0
    for seed in range(20):
        for sampler in ("awrs", "mask"):
            config = GenerationConfig(sampler=sampler, temperature=1.0, seed=seed,
                                      max_new_tokens=30, fast_forward=False)  # fmt: skip
            m = CountingMatcher(c.matcher())
            stats = GenerationStats()
            for _ in token_steps(lm, [], m, config, stats=stats):
                pass
            if sampler == "awrs":
                awrs_steps += m.steps
                awrs_checks += m.calls["try_consume"] + m.calls["is_accepting"]
                reported += stats.checks
                tokens_out += stats.sampled_tokens
                assert m.calls["fill_bitmask"] == 0  # AWRS never computes a mask here
            else:
                mask_fills += m.calls["fill_bitmask"]
                mask_steps += stats.sampled_tokens
    free = [k for k, f in awrs_steps if f]
    per_free = sum(free) / len(free)
    per_token = awrs_checks / tokens_out
    print(f"vocabulary {v}: AWRS {per_free:.2f} checks per free-text step ({len(free)} steps), "
          f"{per_token:.2f} per token overall; masking {mask_fills / mask_steps:.2f} masks "
          f"({v} tokens each) per token")  # fmt: skip
    assert awrs_checks == reported  # AWRS's own count is the matcher calls
    assert len(free) > 200 and per_free < 3
    assert per_token < 0.1 * v
    assert mask_fills >= mask_steps  # a mask of the whole vocabulary per step
