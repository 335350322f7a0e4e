"""DINGO (Suresh et al., 2025): the most probable block under a regular constraint, and
exact sampling of a block, by dynamic programming over token-DFA states × positions.

A diffusion step gives, for each of the ``d`` positions of a block, a distribution
``v_i`` over tokens. Under a regular constraint (a regex; its token-level DFA
``δ(q, t)``) the most probable block that keeps the output completable is

    W[0, q0] = 0;  W[i, q] = max over (q', t) with δ(q', t) = q of W[i-1, q'] + log v_i(t)

ending at the best state that may end the block (any live state, or an accepting one for
the last block), with back-pointers. Replacing max by log-sum-exp gives the probability
mass of all valid blocks ending in each state; sampling the end state, then each
(state, token) pair backwards, samples exactly from ``Π v_i`` restricted to the valid
blocks. Both cost ``O(d · Q · V)``.

EOS is a token like the others: it is allowed from an accepting state and leads to an
extra state ``ENDED`` that only EOS leaves (to itself).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..automata.token_dfa import TokenDFA
from ..errors import InvalidArgumentError, ShapeError
from ..jit import kernel


@kernel(nogil=True)
def _forward(logp, trans, q0, use_max):  # type: ignore[no-untyped-def]
    """``W [d+1, Q']`` (max or log-sum-exp of log-probabilities) and, for max, the
    back-pointers ``(state, token) [d+1, Q']``."""
    d, v = logp.shape
    nq = trans.shape[0]
    w = np.full((d + 1, nq), -np.inf)
    bq = np.full((d + 1, nq), -1, np.int64)
    bt = np.full((d + 1, nq), -1, np.int64)
    w[0, q0] = 0.0
    for i in range(d):
        for q in range(nq):
            base = w[i, q]
            if base == -np.inf:
                continue
            for t in range(v):
                r = trans[q, t]
                if r < 0:
                    continue
                val = base + logp[i, t]
                if val == -np.inf:
                    continue
                cur = w[i + 1, r]
                if use_max:
                    if val > cur:
                        w[i + 1, r] = val
                        bq[i + 1, r] = q
                        bt[i + 1, r] = t
                elif cur == -np.inf:
                    w[i + 1, r] = val
                else:
                    hi = max(cur, val)
                    w[i + 1, r] = hi + np.log(np.exp(cur - hi) + np.exp(val - hi))
    return w, bq, bt


def _ends(tdfa: TokenDFA, last: bool, ends: Any = None) -> np.ndarray:
    if ends is not None:
        return np.asarray(ends, bool)
    return tdfa.accept if last else np.ones(tdfa.trans.shape[0], bool)


def finishable(tdfa: TokenDFA, remaining: int) -> np.ndarray:
    """``bool [Q + 1]``: states from which exactly ``remaining`` more tokens (EOS
    padding included) can end in an accepting state."""
    ok = tdfa.accept.copy()
    adj = tdfa.adjacency
    for _ in range(remaining):
        ok = (adj & ok[None, :]).any(axis=1)
    return ok


def _check(logp: Any, tdfa: TokenDFA) -> np.ndarray:
    arr = np.asarray(logp, np.float64)
    if arr.ndim != 2:
        raise ShapeError(f"logp must be [d, V], got shape {list(arr.shape)}")
    v = tdfa.trans.shape[1]
    if arr.shape[1] < v:
        raise ShapeError(
            f"logp must have at least {v} columns (the vocabulary), got {arr.shape[1]}"
        )
    return np.ascontiguousarray(arr[:, :v])


def dingo_argmax(
    logp: Any, tdfa: TokenDFA, q0: int | None = None, *, last: bool = False, ends: Any = None
) -> tuple[list[int], float, int]:
    """The most probable block: ``(tokens, log-probability, end state)``.

    Args:
        logp: ``float [d, V']`` log-probabilities per position (``V' >= V``; extra columns
            are ignored). A known position is a row with one finite entry.
        tdfa: the constraint's :class:`TokenDFA`.
        q0: the DFA state before the block (default: the start state).
        last: the block ends the output (it must end in an accepting state).
        ends: ``bool [Q + 1]``, the states the block may end in (overrides ``last``; e.g.
            :func:`finishable` for the positions after the block).

    Raises:
        InvalidArgumentError: no valid block has positive probability under ``logp``.
        ShapeError: ``logp`` is not ``[d, V']`` with ``V' >= V``.
    """
    lp = _check(logp, tdfa)
    q0 = tdfa.start if q0 is None else int(q0)
    w, bq, bt = _forward(lp, tdfa.trans, q0, True)
    d = lp.shape[0]
    score = np.where(_ends(tdfa, last, ends), w[d], -np.inf)
    end = int(np.argmax(score))
    if score[end] == -np.inf:
        raise InvalidArgumentError(
            f"logp must give some block of {d} tokens satisfying the constraint a positive "
            "probability, got none: no block of positive probability satisfies the constraint"
        )
    tokens = []
    q = end
    for i in range(d, 0, -1):
        tokens.append(int(bt[i, q]))
        q = int(bq[i, q])
    return tokens[::-1], float(score[end]), end


def dingo_sample(
    logp: Any,
    tdfa: TokenDFA,
    q0: int | None = None,
    *,
    last: bool = False,
    ends: Any = None,
    rng: Any = None,
) -> tuple[list[int], int]:
    """A block drawn exactly from ``Π v_i`` restricted to the valid blocks:
    ``(tokens, end state)``; arguments as :func:`dingo_argmax`. ``rng``: a
    ``numpy.random.Generator`` (default: fresh)."""
    lp = _check(logp, tdfa)
    q0 = tdfa.start if q0 is None else int(q0)
    rng = np.random.default_rng() if rng is None else rng
    w, _, _ = _forward(lp, tdfa.trans, q0, False)
    d = lp.shape[0]
    score = np.where(_ends(tdfa, last, ends), w[d], -np.inf)
    if not np.isfinite(score).any():
        raise InvalidArgumentError(
            f"logp must give some block of {d} tokens satisfying the constraint a positive "
            "probability, got none: no block of positive probability satisfies the constraint"
        )
    q = int(rng.choice(len(score), p=_normalise(score)))
    tokens = []
    for i in range(d - 1, -1, -1):
        start, states, toks = tdfa.predecessors
        qs, ts = states[start[q] : start[q + 1]], toks[start[q] : start[q + 1]]
        joint = w[i, qs] + lp[i, ts]
        k = int(rng.choice(len(joint), p=_normalise(joint)))
        tokens.append(int(ts[k]))
        q = int(qs[k])
    tokens.reverse()
    return tokens, _end_of(tokens, tdfa, q0)


def _end_of(tokens: list[int], tdfa: TokenDFA, q0: int) -> int:
    q = q0
    for t in tokens:
        q = int(tdfa.trans[q, t])
    return q


def _normalise(logw: np.ndarray) -> np.ndarray:
    m = np.max(logw)
    p = np.exp(logw - m)
    return p / p.sum()


__all__ = ["dingo_argmax", "dingo_sample", "finishable"]
