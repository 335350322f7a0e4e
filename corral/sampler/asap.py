"""Grammar-aligned decoding with ASAp (adaptive sampling with approximate expected
futures).

Target: ``P_G(s) ∝ P(s) · 1[s ∈ L(G)]``. The exact next-token rule is
``P_G(t | w) ∝ P(t | w) · EFG(w t)``, where the expected future grammaticality
``EFG(u) = Σ_s P(s | u) · 1[u s ∈ L(G)]`` is unknown. ASAp keeps a trie of the prefixes it
has sampled, across samples for the same prompt and grammar. Each node holds ``raw =
P(t | parent)`` (from the unconstrained softmax) and ``efg``, an upper bound of EFG that
starts at 1. When a node is expanded, a child is made for every allowed token (EOS only if
the prefix is complete; a complete string's EOS child has ``efg = 1`` exactly), the node's
``efg`` becomes ``Σ_children raw · efg`` (disallowed tokens add 0), and the change is
propagated to the root. Tokens are sampled with weight ``raw · efg``.

The first sample is distributed as plain masked sampling (every ``efg`` is 1); once every
path has been expanded, the ``efg`` values are exact and samples follow ``P_G``.

The trie can be saved to and loaded from a JSON file (:meth:`ASAp.save`,
:meth:`ASAp.load`), keyed by prompt, grammar and vocabulary so a trie is never reused
with another of them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..errors import CorralError, InvalidArgumentError
from .lm import NextLogits


class TrieFileError(CorralError):
    """A file given as an ASAp trie cannot be read as one."""


@dataclass
class _Node:
    raw: float  # P(token | parent prefix)
    efg: float = 1.0  # upper bound of the expected future grammaticality
    children: dict[int, _Node] | None = None  # None until expanded
    parent: _Node | None = field(default=None, repr=False)


class ASAp:
    """Grammar-aligned sampler for one prompt and one compiled grammar.

    Args:
        next_logits: ``next_logits(prefixes) -> float [N, V]``: the model's unnormalised
            next-token log-probabilities after each prefix (the prompt is the caller's
            business: the prefixes are generated tokens only), as
            :meth:`CausalLM.next_logits <corral.sampler.lm.CausalLM.next_logits>` gives.
        compiled: the :class:`~corral.CompiledGrammar`.
        key: identifies the prompt (e.g. the prompt text); part of the file key.
        temperature: applied to the logits before the softmax (``1``: the model itself).
    """

    def __init__(
        self, next_logits: NextLogits, compiled: Any, *, key: str = "", temperature: float = 1.0
    ) -> None:
        if temperature <= 0:
            raise InvalidArgumentError(
                f"ASAp needs temperature > 0 (it reweights a distribution), got {temperature}"
            )
        self.next_logits = next_logits
        self.compiled = compiled
        self.temperature = temperature
        self.key = hashlib.sha256(
            f"asap-v1\0{key}\0{compiled.grammar.fingerprint}\0{compiled.vocab.hash}\0"
            f"{temperature}".encode()
        ).hexdigest()
        self.root = _Node(raw=1.0)
        self._eos = set(compiled.eos_ids.tolist())
        self.samples = 0

    # -- sampling ----------------------------------------------------------------------
    def _expand(self, node: _Node, prefix: Sequence[int], matcher: Any) -> None:
        logits = self.next_logits([list(prefix)])[0].double() / self.temperature
        probs = torch.softmax(logits, dim=0)
        allowed = matcher.allowed_token_ids().tolist()
        node.children = {t: _Node(raw=float(probs[t]), parent=node) for t in allowed}
        self._update(node)

    def _update(self, node: _Node | None) -> None:
        while node is not None and node.children is not None:
            node.efg = sum(c.raw * c.efg for c in node.children.values())
            node = node.parent

    def sample(
        self, *, generator: torch.Generator | None = None, max_tokens: int = 512
    ) -> list[int]:
        """One sequence of generated token ids (EOS excluded), and the trie updated."""
        m = self.compiled.matcher()
        node = self.root
        out: list[int] = []
        while True:
            if node.children is None:
                self._expand(node, out, m)
            assert node.children is not None
            if not node.children:  # pragma: no cover - a matcher always allows a token
                raise CorralError("no allowed token: the grammar has a dead end")
            ids = list(node.children)
            w = torch.tensor([node.children[t].raw * node.children[t].efg for t in ids],
                             dtype=torch.float64)  # fmt: skip
            if float(w.sum()) <= 0:  # every raw probability underflowed: fall back to masking
                w = torch.tensor([node.children[t].raw for t in ids], dtype=torch.float64)
                if float(w.sum()) <= 0:
                    w = torch.ones(len(ids), dtype=torch.float64)
            t = ids[int(torch.multinomial(w, 1, generator=generator))]
            child = node.children[t]
            if t in self._eos:
                child.children = {}  # complete: its future is certain
                child.efg = 1.0
                self._update(node)
                self.samples += 1
                return out
            if len(out) >= max_tokens:
                raise CorralError(f"ASAp sample exceeded max_tokens={max_tokens}")
            m.consume(t)
            out.append(t)
            node = child

    def expand_all(self, *, max_nodes: int = 100_000) -> int:
        """Expand every node reachable with positive weight (for finite languages: this
        makes every ``efg`` exact, so samples follow ``P_G`` from then on). Returns the
        number of nodes expanded; raises :class:`CorralError` past ``max_nodes``."""
        m = self.compiled.matcher()
        count = 0

        def visit(node: _Node, prefix: list[int]) -> None:
            nonlocal count
            if node.children is None:
                count += 1
                if count > max_nodes:
                    raise CorralError(f"expand_all: more than {max_nodes} nodes")
                self._expand(node, prefix, m)
            assert node.children is not None
            for t, child in node.children.items():
                if t in self._eos:
                    if child.children is None:
                        child.children = {}
                        child.efg = 1.0
                        self._update(node)
                    continue
                if child.raw > 0:
                    m.consume(t)
                    visit(child, [*prefix, t])
                    m.rollback(1)

        visit(self.root, [])
        return count

    def next_token_probs(self, prefix: Sequence[int]) -> dict[int, float]:
        """The sampling distribution at ``prefix`` given the trie as it is (for analysis);
        ``{}`` if the node has not been expanded."""
        node = self._node(prefix)
        if node is None or not node.children:
            return {}
        w = {t: c.raw * c.efg for t, c in node.children.items()}
        total = sum(w.values())
        return {t: v / total for t, v in w.items()} if total > 0 else {}

    def _node(self, prefix: Sequence[int]) -> _Node | None:
        node: _Node | None = self.root
        for t in prefix:
            if node is None or node.children is None or t not in node.children:
                return None
            node = node.children[t]
        return node

    # -- persistence -------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the trie to ``path`` (JSON), atomically."""

        def dump(n: _Node) -> Any:
            return [n.raw, n.efg, None if n.children is None
                    else {str(t): dump(c) for t, c in n.children.items()}]  # fmt: skip

        data = {"format": "corral-asap-1", "key": self.key, "samples": self.samples,
                "root": dump(self.root)}  # fmt: skip
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)

    def load(self, path: str | os.PathLike[str]) -> None:
        """Replace the trie with the one saved in ``path``.

        Raises:
            TrieFileError: the file cannot be read as an ASAp trie (damaged, cut, not one).
            CorralError: it was saved for another prompt, grammar, vocabulary or
                temperature.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as e:
            raise TrieFileError(f"cannot read the ASAp trie {str(path)!r}: {e}") from None
        if not isinstance(data, dict) or data.get("format") != "corral-asap-1":
            raise TrieFileError(f"{str(path)!r} is not an ASAp trie")
        if data.get("key") != self.key:
            raise CorralError(
                f"{str(path)!r} was saved for another prompt, grammar, vocabulary or temperature"
            )

        def build(item: Any, parent: _Node | None) -> _Node:
            raw, efg, kids = item
            if not (isinstance(raw, float | int) and isinstance(efg, float | int)):
                raise ValueError("a node's weights are not numbers")  # -> TrieFileError
            if not (0 <= raw <= 1 and 0 <= efg <= 1 + 1e-9) or math.isnan(raw + efg):
                raise ValueError("a node's weights are out of range")  # -> TrieFileError
            n = _Node(raw=float(raw), efg=float(efg), parent=parent)
            if kids is not None:
                n.children = {int(t): build(c, n) for t, c in kids.items()}
            return n

        try:
            root = build(data["root"], None)
            samples = int(data.get("samples", 0))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
            raise TrieFileError(f"{str(path)!r} is damaged ({type(e).__name__}: {e})") from None
        self.root, self.samples = root, samples
