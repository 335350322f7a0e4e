"""``corral.infill``: fill the holes of a template so that the whole text is in a grammar.

The template is text with holes (``▢`` by default), e.g. ``'{"name": ▢, "age": ▢}'`` or
code with several missing regions. Each hole holds at most ``hole_tokens`` tokens. The
whole filled text must be a word of the constraint (a JSON Schema, Lark grammar or
regex), not just each hole: every placement is checked for completability of the whole
(:class:`~corral.automata.completion.CompletionChecker`), so the result never dead-ends.

Two kinds of model:

* a **masked LM** (BERT-style, or a masked diffusion LM with a Hugging Face interface):
  the holes become ``hole_tokens`` mask tokens each and are decoded in any order by
  :func:`~corral.sampler.diffusion.diffusion_decode`; a hole holds exactly
  ``hole_tokens`` tokens, and its text is what they spell.
* a **causal LM**: the holes are filled left to right. Inside a hole the model proposes
  its next token after the text so far; the hole closes where its best proposal that
  keeps the whole completable is the first token of the text after the hole (or when it
  is full). In the check, the room left in the current hole and each later hole are
  gaps of between 0 and ``hole_tokens`` tokens (``MASK_OPT`` slots: one check covers
  every length). The model's 256 best tokens (or, at ``temperature > 0``, 256 drawn
  without replacement) are tried first; if none keeps the whole completable, the
  checker's fallback tokens (single-byte ones) are tried in the same order, so the token
  placed is the best (or a sample, by the model's probabilities) among those that fit.
  A code model trained for fill-in-the-middle (its tokenizer has the markers of a family
  in ``corral/integrations/fim.py``) reads the text after the hole as well: it is
  prompted with ``<prefix> text before <suffix> text up to the next hole <middle>`` and
  the hole also closes where its best proposal that keeps the whole completable is an
  end-of-text token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..automata.bitmask import as_int
from ..automata.completion import (
    MASK,
    MASK_OPT,
    CompletionChecker,
    RegularChecker,
    completion_checker,
)
from ..automata.vocabulary import NORMAL
from ..errors import ArgumentTypeError, IncompleteGenerationError, InvalidArgumentError
from .fim import FimFormat, fim_format

HOLE = "\u25a2"  # ▢
_NO = -1  # a token that neither fits nor closes the hole


@dataclass
class Infill:
    """The result of :func:`infill`.

    Attributes:
        text: the filled template.
        value: ``text`` parsed (JSON Schema: the JSON value; pydantic: the model
            instance; grammar or regex: the text).
        fills: the text put into each hole, in order.
        stats: ``checks`` (completability checks); for masked LMs, the decoder's
            ``steps``, ``rejected`` and ``forced``; ``fim``: 1 if a causal LM was given
            fill-in-the-middle prompts.
    """

    text: str
    value: Any
    fills: list[str]
    stats: dict[str, int] = field(default_factory=dict)


def infill(
    model: Any,
    template: str,
    *,
    tokenizer: Any = None,
    schema: Any = None,
    grammar: Any = None,
    regex: str | None = None,
    hole: str = HOLE,
    hole_tokens: int = 8,
    temperature: float = 0.0,
    seed: int | None = None,
    steps: int | None = None,
    max_retries: int = 8,
    fim: str | tuple[str, str, str] | None = "auto",
    **schema_options: Any,
) -> Infill:
    """Fill the holes of ``template`` with ``model`` so that the text satisfies exactly
    one of ``schema``, ``grammar``, ``regex`` (see the module docs).

    Args:
        model: a Hugging Face masked LM or causal LM (object, with ``tokenizer=``).
        template: text with ``hole`` markers.
        hole_tokens: tokens per hole (masked LMs: exactly; causal LMs: at most).
        temperature: 0 for the model's best tokens, else sampling at that temperature.
        seed: seed of the sampling.
        steps: masked LMs: decoding steps (default: one per masked position).
        max_retries: masked LMs: proposals per position and step after a rejection.
        fim: causal LMs: the fill-in-the-middle prompt layout (``"auto"``: the family whose
            markers the tokenizer has, else none; a family name of
            ``corral.integrations.fim.FORMATS``; three marker strings; ``None``: prompt
            with the text before the hole only).
        schema_options: JSON Schema options (``final_check`` is always off here: keywords
            the grammar cannot express are refused, since a partial output cannot be
            checked against them).

    Raises:
        InvalidArgumentError: no hole, bad arguments, or no filling of the holes can
            satisfy the constraint (:class:`~corral.errors.ArgumentTypeError` for an
            argument of the wrong type).
    """
    from .constraint import compile_constraint
    from .models import resolve_model
    from .vocabularies import vocabulary_for

    model, tokenizer = resolve_model(model, tokenizer)
    hole_tokens = as_int(hole_tokens, "hole_tokens", minimum=1)
    if not isinstance(template, str):
        raise ArgumentTypeError(f"template must be a string, not {type(template).__name__}")
    pieces = template.split(hole)
    if len(pieces) < 2:
        raise InvalidArgumentError(
            f"the template has no hole: expected at least one {hole!r}, got {template[:60]!r}"
        )
    vocab = vocabulary_for(model, tokenizer)
    if schema is not None:
        schema_options["final_check"] = False
    compiled, parse = compile_constraint(
        vocab, schema=schema, grammar=grammar, regex=regex, **schema_options
    )
    checker = completion_checker(compiled)
    known = [tokenizer.encode(p, add_special_tokens=False) if p else [] for p in pieces]
    if _is_masked_lm(model):
        slots, fills_at, stats = _masked(
            model, tokenizer, vocab, checker, known, hole_tokens, temperature, seed, steps,
            max_retries,
        )  # fmt: skip
    else:
        fmt = fim_format(tokenizer, fim)
        slots, fills_at, stats = _causal(
            model, vocab, checker, known, hole_tokens, temperature, seed, fmt
        )
        if fmt is not None:
            stats["fim"] = 1
    text = vocab.decode(slots).decode("utf-8", "replace")
    fills = [vocab.decode(f).decode("utf-8", "replace") for f in fills_at]
    stats["checks"] = checker.checks
    return Infill(text, parse(text), fills, stats)


def _is_masked_lm(model: Any) -> bool:
    can_generate = getattr(model, "can_generate", None)
    if callable(can_generate):
        return not bool(can_generate())
    return "MaskedLM" in type(model).__name__


def _masked(
    model: Any,
    tokenizer: Any,
    vocab: Any,
    checker: CompletionChecker | RegularChecker,
    known: list[list[int]],
    k: int,
    temperature: float,
    seed: int | None,
    steps: int | None,
    max_retries: int,
) -> tuple[list[int], list[list[int]], dict[str, int]]:
    from ..sampler.diffusion import diffusion_decode
    from .hf_lm import HFMaskedLM

    template: list[int] = []
    spans = []
    for i, piece in enumerate(known):
        template += piece
        if i < len(known) - 1:
            spans.append((len(template), len(template) + k))
            template += [MASK] * k
    mask_id = getattr(tokenizer, "mask_token_id", None)
    if mask_id is None:
        raise InvalidArgumentError(
            "a masked LM needs a tokenizer with a mask token, got mask_token_id=None"
        )
    cls = getattr(tokenizer, "cls_token_id", None)
    res = diffusion_decode(
        HFMaskedLM(model),
        [cls] if cls is not None else [],
        mask_id=mask_id,
        checker=checker,
        vocab_size=vocab.size,
        eos_ids=vocab.eos_token_ids,
        banned_ids=sorted(getattr(tokenizer, "all_special_ids", []) or []),
        gen_length=len(template),
        steps=steps,
        temperature=temperature,
        max_retries=max_retries,
        seed=seed,
        template=template,
    )
    fills = [res.tokens[a:b] for a, b in spans]
    return res.output, fills, dict(res.stats)


def _causal(
    model: Any,
    vocab: Any,
    checker: CompletionChecker | RegularChecker,
    known: list[list[int]],
    k: int,
    temperature: float,
    seed: int | None,
    fmt: FimFormat | None = None,
) -> tuple[list[int], list[list[int]], dict[str, int]]:
    import torch

    from .hf_lm import HFCausalLM

    lm = HFCausalLM(model, kv_cache=False)  # each context is read once
    gen = torch.Generator().manual_seed(0 if seed is None else int(seed))
    out: list[int] = list(known[0])
    fills: list[list[int]] = []
    n_holes = len(known) - 1

    def rest(h: int) -> list[int]:
        """The template after hole ``h``: its text, later holes as ``k`` optional gaps."""
        tail: list[int] = list(known[h + 1])
        for j in range(h + 1, n_holes):
            tail += [MASK_OPT] * k + known[j + 1]
        return tail

    for h in range(n_holes):
        tail = rest(h)
        if not checker.check([*out, *[MASK_OPT] * k, *tail]):
            raise InvalidArgumentError(
                "no filling of the holes can satisfy the constraint: expected a template "
                f"whose holes ({k} tokens each at most) can be filled, got none for hole "
                f"{h + 1} of {n_holes} (after the fills before it)"
            )
        fill: list[int] = []
        # a FIM model reads the text up to the next hole after its suffix marker
        fim_prompt = fmt.prompt(out, list(known[h + 1])) if fmt is not None else None
        while len(fill) < k:
            context = [*fim_prompt, *fill] if fim_prompt is not None else out
            logits, _ = lm.extend(None, context or [vocab.eos_token_ids[0]])
            row = logits.to("cpu", torch.float64)
            row[vocab.size :] = -torch.inf
            step = _Step(checker, vocab, out, fill, k - len(fill) - 1, tail, fmt is not None)
            chosen = step.choose(_scores(row, temperature, gen))
            if chosen is None:
                break  # the hole closes here (or nothing fits: it must be closable)
            out.append(chosen)
            fill.append(chosen)
        if not checker.check([*out, *tail]):  # the hole is full or the model stopped early
            raise IncompleteGenerationError(
                f"hole {h + 1} could not be closed within {k} tokens",
                partial_text=vocab.decode(out).decode("utf-8", "replace"),
                token_ids=out,
            )
        fills.append(fill)
        out += known[h + 1]
    return out, fills, {}


class _Step:
    """One token of a causal fill: which token goes next, or whether the hole closes.

    ``out``: the tokens so far (the current hole's ``fill`` at its end); ``left``: the
    room in the hole after one more token; ``tail``: the template after the hole (later
    holes as ``MASK_OPT`` gaps); ``fim``: end-of-text tokens close the hole too.
    """

    def __init__(
        self,
        checker: CompletionChecker | RegularChecker,
        vocab: Any,
        out: list[int],
        fill: list[int],
        left: int,
        tail: list[int],
        fim: bool,
    ) -> None:
        self.checker = checker
        self.vocab = vocab
        self.out = out
        self.fill = fill
        self.left = left
        self.tail = tail
        self.closing = tail[0] if tail and tail[0] >= 0 else None
        self.fim = fim
        self._closable: bool | None = None

    def choose(self, scores: Any, limit: int = 256) -> int | None:
        """The token to place (``None``: close the hole, or nothing fits).

        ``scores``: ``float64 [V']`` (``V' >= V``), the order to try tokens in (see
        :func:`_scores`): the ``limit`` best, then the checker's fallback tokens, so the
        first token that fits has the highest score among those that fit in both sets.
        A token that closes the hole closes it where the whole is completable as is.
        """
        import torch

        finite = torch.isfinite(scores)
        top = torch.topk(scores, min(limit, int(finite.sum()))).indices.tolist()
        tried: set[int] = set()
        failed: set[int] = set()  # tokens that were checked and do not fit
        for t in top:
            tried.add(t)
            verdict = self._try(t)
            if verdict != _NO:
                return verdict
            failed.add(t)
        # the checker's fallback: one of its tokens fits while the whole is completable
        tokens, groups = self.checker.fallback(self.out, len(self.out))
        s = scores.numpy()[tokens]
        order = np.argsort(-s, kind="stable")  # ties (and -inf) keep the checker's order
        dead = {
            int(g) for t, g in zip(tokens.tolist(), groups.tolist(), strict=True) if t in failed
        }
        for i in order.tolist():
            t, g = int(tokens[i]), int(groups[i])
            if t in tried:
                continue
            tried.add(t)
            if g in dead:  # a token of its group failed: this one fails too, unless it closes
                if self._ends(t) and self.fill and self._can_close():
                    return None
                continue
            verdict = self._try(t)
            if verdict != _NO:
                return verdict
            dead.add(g)
        return None

    def _ends(self, t: int) -> bool:
        return t == self.closing or (self.fim and t in self.vocab.eos_token_ids)

    def _can_close(self) -> bool:
        if self._closable is None:
            self._closable = self.checker.check([*self.out, *self.tail])
        return self._closable

    def _try(self, t: int) -> int | None:
        """``t`` if it fits, ``None`` if it closes the hole, ``_NO`` otherwise."""
        if self._ends(t) and self.fill and self._can_close():
            return None  # the model goes on after the hole (or ends the middle): close it
        if self.vocab.kinds[t] != NORMAL:
            return _NO
        if self.checker.check([*self.out, t, *[MASK_OPT] * self.left, *self.tail]):
            return t
        return _NO


def _scores(row: Any, temperature: float, gen: Any) -> Any:
    """The order to try tokens in, best first: ``row`` itself, or (``temperature > 0``)
    ``row / temperature`` plus Gumbel noise from ``gen``, so that the first token that
    fits, among any set tried in this order, is a sample from ``softmax(row /
    temperature)`` restricted to the tokens of that set that fit (Gumbel-max)."""
    import torch

    if temperature <= 0:
        return row
    u = torch.rand(row.shape, generator=gen, dtype=row.dtype).clamp_(1e-300, 1.0)
    return row / temperature - torch.log(-torch.log(u))  # -inf (never) stays -inf


__all__ = ["HOLE", "Infill", "infill"]
