"""Reference models with enumerable distributions, for testing samplers exactly.

* :class:`NGramLM`: a random n-gram model over a small vocabulary, a
  :class:`~corral.sampler.lm.CausalLM` whose conditionals are known;
* :class:`ExactDenoiser`: a :class:`~corral.sampler.lm.MaskedLM` whose predictions are
  the exact conditionals of a known distribution over outputs;
* exact distributions over a grammar's outputs (:func:`constrained_sequences`,
  :func:`grammar_distribution`, :func:`masked_distribution`, :func:`asap_distribution`)
  and distances between distributions (:func:`kl_divergence`, :func:`total_variation`).

A sampler's output frequencies can then be compared with its exact distribution, with no
sampling error in the reference. The functions that enumerate take any model with
``logprob_next(prefix)`` and ``eos_id`` (as :class:`NGramLM` has).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .errors import InvalidArgumentError

__all__ = [
    "ExactDenoiser",
    "NGramLM",
    "asap_distribution",
    "constrained_sequences",
    "grammar_distribution",
    "kl_divergence",
    "masked_distribution",
    "total_variation",
]


class NGramLM:
    """A random n-gram model over a small vocabulary (tokens may be several characters, so
    token and grammar boundaries need not line up), after an empty prompt: a
    :class:`~corral.sampler.lm.CausalLM`.

    Args:
        tokens: the token strings; the last id is EOS (its string is not used).
        order: n (the conditional depends on the previous ``order - 1`` tokens).
        seed: seed of the random table.
        concentration: Dirichlet concentration of each conditional (small = peaked).
    """

    def __init__(
        self, tokens: Sequence[str], *, order: int = 2, seed: int = 0, concentration: float = 0.7
    ) -> None:
        if order < 1:
            raise InvalidArgumentError(f"order must be >= 1, got {order}")
        self.tokens = list(tokens)
        self.eos_id = len(self.tokens) - 1
        self.order = order
        self._rng = np.random.default_rng(seed)
        self._concentration = concentration
        self._table: dict[tuple[int, ...], torch.Tensor] = {}

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def vocabulary(self) -> Any:
        """The corral :class:`~corral.Vocabulary` of this model."""
        from .automata import Vocabulary

        data = [t.encode("utf-8") for t in self.tokens[:-1]] + [b"</s>"]
        return Vocabulary(data, eos_token_ids=[self.eos_id], special_ids=[self.eos_id])

    def _row(self, context: tuple[int, ...]) -> torch.Tensor:
        row = self._table.get(context)
        if row is None:
            p = self._rng.dirichlet(np.full(self.vocab_size, self._concentration))
            row = self._table[context] = torch.from_numpy(np.log(np.maximum(p, 1e-300)))
        return row

    def next_logits(self, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        """``float64 [N, V]`` log-probabilities of the next token after each prefix."""
        k = self.order - 1
        rows = [self._row(tuple(p[len(p) - k :]) if k else ()) for p in prefixes]
        return torch.stack(rows)

    def extend(self, state: Any, tokens: Sequence[int]) -> tuple[torch.Tensor, Any]:
        """``(float64 [V] log-probabilities of the next token, state')``: the
        :class:`~corral.sampler.lm.CausalLM` step; the state is the tokens read so far
        (``None``: none)."""
        seq = (*(state or ()), *(int(t) for t in tokens))
        return self.next_logits([seq])[0], seq

    def logprob_next(self, prefix: Sequence[int]) -> torch.Tensor:
        """Normalised log-probabilities ``float64 [V]`` after ``prefix``."""
        return torch.log_softmax(self.next_logits([prefix])[0], dim=0)


class ExactDenoiser:
    """A masked diffusion LM whose predictions are exact: the conditionals of a known
    distribution over outputs of ``length`` tokens (a :class:`~corral.sampler.lm.MaskedLM`).

    The distribution: an :class:`NGramLM` generates up to ``length`` tokens; once it emits
    EOS, every later position is EOS (as diffusion LMs pad their outputs). Called on
    ``int64 [1, P + length]`` (``P`` prompt tokens, ignored; mask id ``mask_id``), it
    returns ``float64 [1, P + length, V + 1]``: at each position, ``log P(x_i = t | the
    unmasked positions)``, computed by enumerating every output (so keep ``V`` and
    ``length`` small: ``V ** length`` outputs at most). Where the unmasked positions have
    probability 0, every position is uniform. The last column is the mask id (-inf).
    """

    def __init__(self, lm: NGramLM, length: int) -> None:
        self.lm = lm
        self.length = int(length)
        self.mask_id = lm.vocab_size
        seqs: list[list[int]] = []
        logps: list[float] = []

        def visit(prefix: list[int], lp: float) -> None:
            if len(prefix) == self.length:
                seqs.append(prefix)
                logps.append(lp)
                return
            row = lm.logprob_next(prefix)
            for t in range(lm.vocab_size):
                if t == lm.eos_id:
                    seqs.append(prefix + [t] * (self.length - len(prefix)))
                    logps.append(lp + float(row[t]))
                else:
                    visit([*prefix, t], lp + float(row[t]))

        visit([], 0.0)
        self.outputs = np.array(seqs, np.int64)  # [N, length]
        logp = np.array(logps)
        self.probs = np.exp(logp - logp.max())
        self.probs /= self.probs.sum()

    def vocabulary(self) -> Any:
        """The corral :class:`~corral.Vocabulary`: the n-gram model's tokens, EOS, mask."""
        from .automata import Vocabulary

        data = [t.encode("utf-8") for t in self.lm.tokens[:-1]] + [b"</s>", b"<mask>"]
        eos = self.lm.eos_id
        return Vocabulary(data, eos_token_ids=[eos], special_ids=[eos, self.mask_id])

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        gen = x[0, x.shape[1] - self.length :].numpy()
        keep = np.ones(len(self.outputs), bool)
        for i, t in enumerate(gen.tolist()):
            if t != self.mask_id:
                keep &= self.outputs[:, i] == t
        v = self.lm.vocab_size
        out = np.zeros((x.shape[1], v + 1))
        if keep.any():
            w = self.probs[keep]
            for i in range(self.length):
                marg = np.bincount(self.outputs[keep, i], weights=w, minlength=v)
                with np.errstate(divide="ignore"):
                    out[x.shape[1] - self.length + i, :v] = np.log(marg / marg.sum())
        out[:, v] = -np.inf
        return torch.from_numpy(out)[None]

    def distribution(self) -> dict[tuple[int, ...], float]:
        """Output (tokens before the first EOS) → probability."""
        dist: dict[tuple[int, ...], float] = {}
        for row, pr in zip(self.outputs.tolist(), self.probs.tolist(), strict=True):
            end = row.index(self.lm.eos_id) if self.lm.eos_id in row else len(row)
            key = tuple(row[:end])
            dist[key] = dist.get(key, 0.0) + pr
        return dist


def _sequences(
    lm: Any, compiled: Any, max_tokens: int, *, renormalise: bool
) -> dict[tuple[int, ...], float]:
    """Every complete token sequence of the grammar with the product of its step
    probabilities: the model's, or (``renormalise``) the model's restricted to the allowed
    tokens and renormalised at each step."""
    out: dict[tuple[int, ...], float] = {}
    m = compiled.matcher()

    def visit(prefix: list[int], logq: float) -> None:
        lp = lm.logprob_next(prefix)
        allowed = m.allowed_token_ids().tolist()
        log_norm = float(torch.logsumexp(lp[allowed], dim=0)) if renormalise else 0.0
        for t in allowed:
            lq = logq + float(lp[t]) - log_norm
            if t == lm.eos_id:
                out[tuple(prefix)] = float(np.exp(lq))
                continue
            if len(prefix) == max_tokens:
                raise InvalidArgumentError(
                    f"max_tokens must bound the grammar's sequences, got {max_tokens}: "
                    f"sequences longer than {max_tokens} tokens exist"
                )
            m.consume(t)
            visit([*prefix, t], lq)
            m.rollback(1)

    visit([], 0.0)
    return out


def constrained_sequences(
    lm: Any, compiled: Any, *, max_tokens: int
) -> dict[tuple[int, ...], float]:
    """Every complete token sequence of the grammar (EOS excluded) up to ``max_tokens``
    tokens, with its model probability ``P(s) = prod P(t | prefix) * P(EOS | s)``.

    Raises :class:`~corral.errors.InvalidArgumentError` if a grammatical prefix of
    ``max_tokens`` tokens can still go on (the language is longer than the bound: the
    enumeration would be incomplete).
    """
    return _sequences(lm, compiled, max_tokens, renormalise=False)


def grammar_distribution(
    lm: Any, compiled: Any, *, max_tokens: int
) -> dict[tuple[int, ...], float]:
    """``P_G(s) = P(s) / sum P`` over the grammar's complete sequences (exact)."""
    seqs = constrained_sequences(lm, compiled, max_tokens=max_tokens)
    total = sum(seqs.values())
    return {s: p / total for s, p in seqs.items()}


def masked_distribution(lm: Any, compiled: Any, *, max_tokens: int) -> dict[tuple[int, ...], float]:
    """The exact distribution of plain masked sampling: at each step ``P(t | w)``
    restricted to the allowed tokens and renormalised."""
    return _sequences(lm, compiled, max_tokens, renormalise=True)


def kl_divergence(p: dict[Any, float], q: dict[Any, float]) -> float:
    """``KL(p || q)`` (``inf`` if ``q`` misses part of ``p``'s support)."""
    total = 0.0
    for s, ps in p.items():
        if ps <= 0:
            continue
        qs = q.get(s, 0.0)
        if qs <= 0:
            return float("inf")
        total += ps * float(np.log(ps / qs))
    return total


def total_variation(p: dict[Any, float], q: dict[Any, float]) -> float:
    """``(1/2) sum |p - q|``."""
    keys = set(p) | set(q)
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in keys)


def asap_distribution(asap: Any, lm: Any, compiled: Any) -> dict[tuple[int, ...], float]:
    """The exact distribution of an :class:`~corral.sampler.asap.ASAp` sampler's next
    sample given its trie (unexpanded nodes behave as masking: every efg there is 1)."""
    out: dict[tuple[int, ...], float] = {}
    m = compiled.matcher()

    def visit(prefix: list[int], q: float) -> None:
        probs = asap.next_token_probs(prefix)
        if not probs:
            lp = lm.logprob_next(prefix)
            allowed = m.allowed_token_ids().tolist()
            z = sum(np.exp(float(lp[t])) for t in allowed)
            probs = {t: np.exp(float(lp[t])) / z for t in allowed}
        for t, pt in probs.items():
            if pt == 0:
                continue
            if t == lm.eos_id:
                out[tuple(prefix)] = out.get(tuple(prefix), 0.0) + q * pt
                continue
            m.consume(t)
            visit([*prefix, t], q * pt)
            m.rollback(1)

    visit([], 1.0)
    return out
