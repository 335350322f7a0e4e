"""Constrained decoding for masked diffusion language models (any-order decoding).

A masked diffusion LM (LLaDA, Dream, DiffuCoder; or any masked LM such as BERT) is given
the prompt followed by ``gen_length`` mask tokens and returns logits for every position.
Decoding unmasks positions over ``steps`` steps, in semi-autoregressive blocks of
``block_length`` positions: at each step every masked position of the current block
proposes a token (argmax, or a sample at ``temperature``), and the most confident
proposals (``remasking="low_confidence"``) or random ones (``"random"``) are committed;
the rest stay masked for later steps. This is LLaDA's ``generate`` loop.

When the constraint is regular (a regex; the checker is a
:class:`~corral.automata.completion.RegularChecker`), the proposals of a block come from
DINGO (``corral.sampler.dingo``): the most probable block, or an exact sample of one,
that the constraint allows given the known positions.

The constraint enters at the commit: a proposal is committed only if the partial output
can still be completed to a word of the grammar
(:class:`~corral.automata.completion.CompletionChecker`). Before that, the position's
logits are narrowed to the tokens that can follow the slots before it
(``CompletionChecker.allowed_at``, one mask): the others would fail every check, so
drawing from the narrowed logits only skips proposals the check would refuse. A
rejected proposal is struck from that position's logits and the position proposes
again, up to ``max_retries`` times; then it is left masked for a later step. A step
that commits nothing fills the leftmost masked position of the block with the first
token, in the model's order, that passes the check (a single-byte filler always exists
while the output is completable), so decoding always ends, and ends inside the grammar.
The output is the generated tokens up to the first EOS.

Shapes: the model (a :class:`~corral.sampler.lm.MaskedLM`, e.g.
:class:`~corral.integrations.hf_lm.HFMaskedLM`) takes ``int64 [1, P + gen_length]``
(``P`` prompt tokens) and returns ``float [1, P + gen_length, V']`` with
``V' >= len(vocab)``; columns at or above the vocabulary's size, padding ids and the mask
id are never proposed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidArgumentError

if TYPE_CHECKING:
    import torch

    from ..automata.completion import CompletionChecker, RegularChecker
    from .lm import MaskedLM

REMASKING = ("low_confidence", "random")


@dataclass
class DiffusionResult:
    """The outcome of :func:`diffusion_decode`.

    Attributes:
        tokens: the ``gen_length`` generated token ids (EOS padding included).
        output: the tokens before the first EOS.
        stats: ``steps`` (model calls), ``checks`` (completability checks), ``rejected``
            (proposals the check refused), ``forced`` (positions filled because a step
            committed nothing), ``narrowed`` (positions whose logits were narrowed to
            the tokens that can follow the slots before them).
    """

    tokens: list[int]
    output: list[int]
    stats: dict[str, int] = field(default_factory=dict)


def diffusion_decode(
    logits_fn: MaskedLM | Callable[[torch.Tensor], torch.Tensor],
    prompt_ids: Sequence[int],
    *,
    mask_id: int,
    checker: CompletionChecker | RegularChecker | None,
    vocab_size: int,
    eos_ids: Sequence[int] = (),
    banned_ids: Sequence[int] = (),
    gen_length: int = 64,
    steps: int | None = None,
    block_length: int | None = None,
    temperature: float = 0.0,
    remasking: str = "low_confidence",
    max_retries: int = 8,
    seed: int | None = None,
    template: Sequence[int] | None = None,
) -> DiffusionResult:
    """Decode ``gen_length`` tokens after ``prompt_ids`` with a masked diffusion LM.

    Args:
        logits_fn: the model, a :class:`~corral.sampler.lm.MaskedLM` (see the module
            docs for shapes).
        prompt_ids: the prompt's token ids.
        mask_id: the model's mask token id.
        checker: the constraint, or ``None`` for unconstrained decoding.
        vocab_size: ids at or above it are never proposed (padded output layers).
        eos_ids: ids that end the output (everything after the first one is padding).
        banned_ids: ids never proposed (special tokens other than EOS).
        gen_length: number of generated positions.
        steps: model calls in all (default ``gen_length``: one token per step); a multiple
            of the number of blocks.
        block_length: positions per semi-autoregressive block (default ``gen_length``);
            must divide ``gen_length``.
        temperature: 0 proposes the argmax; above 0 samples from ``softmax(logits / T)``.
        remasking: which proposals to commit first: ``"low_confidence"`` (the most
            probable) or ``"random"``.
        max_retries: proposals per position and step after a rejection.
        seed: seed of the sampling and of random remasking.
        template: the generated positions' starting values: token ids, fixed, and -1
            for the positions to decode (infilling); default all -1. Sets
            ``gen_length`` when given.

    Raises:
        InvalidArgumentError: inconsistent lengths, unknown ``remasking``, negative
            temperature; or no output of ``gen_length`` tokens can be completed.
        ArgumentTypeError: a length or count that is not an integer.
    """
    import torch

    from ..automata.bitmask import as_int

    if template is not None:
        gen_length = len(template)
    gen_length = as_int(gen_length, "gen_length", minimum=1)
    steps = gen_length if steps is None else as_int(steps, "steps", minimum=1)
    block_length = (
        gen_length if block_length is None else as_int(block_length, "block_length", minimum=1)
    )
    if gen_length % block_length:
        raise InvalidArgumentError(
            f"block_length must divide gen_length {gen_length}, got {block_length}"
        )
    n_blocks = gen_length // block_length
    if steps % n_blocks:
        raise InvalidArgumentError(
            f"steps must be a multiple of the number of blocks {n_blocks}, got {steps}"
        )
    if remasking not in REMASKING:
        raise InvalidArgumentError(f"remasking must be one of {REMASKING}, got {remasking!r}")
    if temperature < 0:
        raise InvalidArgumentError(f"temperature must be >= 0, got {temperature}")
    steps_per_block = steps // n_blocks
    gen = torch.Generator().manual_seed(0 if seed is None else int(seed))
    p = len(prompt_ids)
    slots = [-1] * gen_length if template is None else [int(t) for t in template]
    x = torch.tensor([[*prompt_ids, *(mask_id if t == -1 else t for t in slots)]])
    eos = {int(e) for e in eos_ids}
    banned = np.array(sorted({int(mask_id), *map(int, banned_ids)}), np.int64)
    stats = {"steps": 0, "checks": 0, "rejected": 0, "forced": 0, "narrowed": 0}

    if checker is not None and not checker.check(slots):
        raise InvalidArgumentError(
            f"no output of {gen_length} tokens can be completed in the grammar when each "
            "undecided position holds one single-byte token (see "
            "corral.automata.completion): a longer gen_length, or a vocabulary with "
            "single-byte tokens for the bytes the grammar needs"
        )

    from ..automata.completion import CompletionChecker, RegularChecker
    from .dingo import finishable

    regular = checker if isinstance(checker, RegularChecker) else None
    tdfa = regular.tdfa if regular is not None else None
    narrow = checker if isinstance(checker, CompletionChecker) else None

    def viable_row(pos: int) -> torch.Tensor:
        """Position ``pos``'s logits, without the tokens that cannot follow the slots
        before it (whatever the slots after it hold: they would fail every check)."""
        row = logits[pos].clone()
        if narrow is not None:
            keep = torch.from_numpy(narrow.allowed_at(slots, pos))
            row[: keep.shape[0]][~keep] = -torch.inf
            stats["narrowed"] += 1
        return row

    def accept(pos: int, tok: int) -> bool:
        if checker is None:
            return True
        slots[pos] = tok
        stats["checks"] += 1
        ok = checker.check(slots)
        if not ok:
            slots[pos] = -1
            stats["rejected"] += 1
        return ok

    def commit(pos: int, tok: int) -> None:
        slots[pos] = tok
        x[0, p + pos] = tok

    for b in range(n_blocks):
        lo, hi = b * block_length, (b + 1) * block_length
        if regular is not None and tdfa is not None:
            # fixed for the whole block: the state after the earlier (complete) blocks,
            # and the states from which the positions after it can finish
            q0 = int(np.flatnonzero(regular.states_before(slots, lo))[0])
            ends = finishable(tdfa, gen_length - hi)
        s = 0
        while True:
            masked = [i for i in range(lo, hi) if slots[i] == -1]
            if not masked:
                break
            # commit ceil(masked / steps left): the block is unmasked by its last step
            # (later steps, one forced commit at least each, only follow rejections)
            quota = -(-len(masked) // max(1, steps_per_block - s))
            s += 1
            with torch.no_grad():
                logits = logits_fn(x)[0, p:].to(torch.float64)
            stats["steps"] += 1
            logits = _restrict(logits, vocab_size, banned)
            if tdfa is not None:  # regular constraint: the block's proposals by DINGO
                props, conf = _propose_dingo(
                    logits, slots, lo, hi, masked, temperature, tdfa, q0, ends, gen
                )
                stats["dingo"] = stats.get("dingo", 0) + 1
            else:
                props, conf = _propose(logits, masked, temperature, gen)
            if remasking == "random":
                conf = torch.rand(len(masked), generator=gen, dtype=torch.float64)
            done = 0
            for k in torch.argsort(conf, descending=True).tolist():
                if done == quota:
                    break
                pos, tok = masked[k], props[k]
                row = viable_row(pos)
                if not torch.isfinite(row).any():
                    continue
                if not torch.isfinite(row[tok]):
                    tok = _redraw(row, temperature, gen)
                for _ in range(max_retries + 1):
                    if accept(pos, tok):
                        commit(pos, tok)
                        done += 1
                        break
                    row[tok] = -torch.inf
                    if not torch.isfinite(row).any():
                        break
                    tok = _redraw(row, temperature, gen)
            if done == 0:
                pos = masked[0]
                commit(pos, _first_accepted(pos, viable_row(pos), accept, checker, slots))
                stats["forced"] += 1
    tokens = [int(t) for t in slots]
    end = next((i for i, t in enumerate(tokens) if t in eos), len(tokens))
    return DiffusionResult(tokens, tokens[:end], stats)


def _restrict(logits: torch.Tensor, vocab_size: int, banned: np.ndarray) -> torch.Tensor:
    """``logits`` ``[L, V']`` with ids never proposed set to ``-inf``."""
    import torch

    out = logits.clone()
    if out.shape[-1] > vocab_size:
        out[:, vocab_size:] = -torch.inf
    b = torch.from_numpy(banned[banned < out.shape[-1]])
    out[:, b] = -torch.inf
    return out


def _propose(
    logits: torch.Tensor, masked: list[int], temperature: float, gen: torch.Generator
) -> tuple[list[int], torch.Tensor]:
    """A token per masked position and its probability under the model (the confidence)."""
    import torch

    rows = logits[masked]
    probs = torch.softmax(rows, dim=-1)
    if temperature == 0:
        toks = rows.argmax(dim=-1)
    else:
        toks = torch.multinomial(torch.softmax(rows / temperature, dim=-1), 1, generator=gen)[:, 0]
    conf = probs.gather(1, toks[:, None])[:, 0]
    return toks.tolist(), conf


def _propose_dingo(
    logits: torch.Tensor,
    slots: list[int],
    lo: int,
    hi: int,
    masked: list[int],
    temperature: float,
    tdfa: Any,
    q0: int,
    ends: np.ndarray,
    gen: torch.Generator,
) -> tuple[list[int], torch.Tensor]:
    """Proposals for the masked positions of block ``lo .. hi``: DINGO's most probable
    valid block (or an exact sample of one at ``temperature > 0``) from DFA state ``q0``
    given the known positions, ending in a state of ``ends``."""
    import torch

    from .dingo import dingo_argmax, dingo_sample

    block = logits[lo:hi]
    scaled = block / temperature if temperature > 0 else block
    logp = torch.log_softmax(scaled, dim=-1).numpy().copy()
    for i in range(lo, hi):
        if slots[i] != -1:
            logp[i - lo] = -np.inf
            logp[i - lo, slots[i]] = 0.0
    if temperature > 0:
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
        toks, _ = dingo_sample(logp, tdfa, q0, ends=ends, rng=np.random.default_rng(seed))
    else:
        toks, _, _ = dingo_argmax(logp, tdfa, q0, ends=ends)
    props = [toks[i - lo] for i in masked]
    probs = torch.softmax(block, dim=-1)
    conf = torch.stack([probs[i - lo, t] for i, t in zip(masked, props, strict=True)])
    return props, conf


def _redraw(row: torch.Tensor, temperature: float, gen: torch.Generator) -> int:
    import torch

    if temperature == 0:
        return int(row.argmax())
    return int(torch.multinomial(torch.softmax(row / temperature, dim=-1), 1, generator=gen))


def _first_accepted(
    pos: int,
    row: torch.Tensor,
    accept: Callable[[int, int], bool],
    checker: Any,
    slots: list[int],
) -> int:
    """The model's most probable token at ``pos`` that passes the check (among its 64
    best), else the checker's candidates (``candidates``): one of those passes while the
    output is completable and ``pos`` is its first unknown slot."""
    import torch

    best = torch.argsort(row, descending=True)[:64]
    cands = [int(t) for t in best.tolist() if torch.isfinite(row[t])]
    if checker is not None:
        cands += [int(t) for t in checker.candidates(slots, pos)]
    for tok in cands:
        if accept(pos, tok):
            return tok
    raise AssertionError(  # pragma: no cover - the checker accepted the output so far
        f"no token keeps the output completable at position {pos}"
    )


__all__ = ["REMASKING", "DiffusionResult", "diffusion_decode"]
