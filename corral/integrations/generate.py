"""``corral.generate`` and ``corral.stream``: constrained generation with a causal LM.

The loop, per step:

1. **fast-forward** (``sampler="mask"`` only, see :func:`resolve_fast_forward`): if the
   grammar leaves a single way to continue for some bytes, those bytes are cut into
   tokens (with the model's own tokenizer) and appended without sampling; the model reads
   them in its next forward pass together;
2. if the output is complete and nothing but EOS may follow, stop (no forward pass);
3. otherwise one forward pass (KV cache), then mask → temperature → top-k → top-p →
   sample (:mod:`corral.sampler.masking`); EOS stops.

When ``max_new_tokens`` is spent before the output is complete,
:class:`~corral.errors.IncompleteGenerationError` is raised with the partial text; an
output the grammar accepts at that point is complete and returned.
"""

from __future__ import annotations

import codecs
import json
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CorralError, IncompleteGenerationError, TokenizerError, ValidationFailedError

SAMPLERS = ("mask", "awrs", "smc", "asap")
# samplers whose output follows a stated distribution: fast-forward would change it
EXACT_SAMPLERS = ("awrs", "smc", "asap")
_ASAP: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_VOCABS: OrderedDict[tuple[int, int, tuple[int, ...]], Any] = OrderedDict()
_MODELS: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
_MATCHED: OrderedDict[tuple[int, int, str], Any] = OrderedDict()  # tokenizer checks passed


@dataclass
class GenerationStats:
    """Counts and times of one generation."""

    new_tokens: int = 0  # tokens generated (sampled + forced)
    sampled_tokens: int = 0  # tokens chosen by sampling
    forced_tokens: int = 0  # tokens appended by fast-forward, without sampling
    forward_passes: int = 0
    forward_s: float = 0.0  # time in the model
    mask_s: float = 0.0  # time computing masks and forced tokens
    sample_s: float = 0.0  # time masking logits and sampling
    checks: int = 0  # tokens checked one by one against the constraint (AWRS, SMC)

    @property
    def mask_share(self) -> float:
        """Mask time as a share of step time (forward + mask + sample)."""
        total = self.forward_s + self.mask_s + self.sample_s
        return self.mask_s / total if total else 0.0


@dataclass
class Generation:
    """What :func:`generate` produced (``details=True``).

    Attributes:
        value: the parsed value (dict/list/... for a JSON Schema, a model instance for a
            pydantic class, the text for a grammar or regex).
        text: the generated text.
        token_ids: the generated token ids (EOS excluded).
        stats: :class:`GenerationStats`.
    """

    value: Any
    text: str
    token_ids: list[int]
    stats: GenerationStats = field(default_factory=GenerationStats)
    log_z: float | None = None  # SMC: log estimate of P(output satisfies the constraint)
    particles: list[tuple[str, float]] = field(default_factory=list)  # SMC: (text, weight)


# ---------------------------------------------------------------------------------------
# model, tokenizer, vocabulary
# ---------------------------------------------------------------------------------------
def resolve_model(model: Any, tokenizer: Any = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a model object (with ``tokenizer``) or a local folder.

    A folder (``str``/``Path``, or ``"gemma3-270m"`` for the default model) is loaded once
    per process and kept.
    """
    if isinstance(model, (str, os.PathLike)):
        key = str(model)
        if key not in _MODELS:
            from .models import load_model

            _MODELS[key] = load_model(model)
            while len(_MODELS) > 2:
                _MODELS.popitem(last=False)
        lm, tok = _MODELS[key]
        return lm, tokenizer if tokenizer is not None else tok
    if not callable(model) or not hasattr(model, "config"):
        raise TypeError(
            "model must be a transformers causal LM or the path of a local model folder, "
            f"not {type(model).__name__}"
        )
    if tokenizer is None:
        raise TypeError("pass tokenizer= together with a model object")
    return model, tokenizer


def model_vocab_size(model: Any) -> int:
    """The width of the model's logits: the rows of its output embedding, else
    ``model.config.vocab_size``."""
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if out is not None and getattr(out, "weight", None) is not None:
        return int(out.weight.shape[0])
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    if size is None:
        raise TypeError(
            f"cannot tell the width of the logits of {type(model).__name__}: it has no output "
            "embedding and no config.vocab_size"
        )
    from ..automata.bitmask import as_int

    return as_int(size, "model.config.vocab_size")


def token_id_set(*sources: Any) -> list[int]:
    """The sorted distinct ids of ``sources``, each ``None``, an id or a list of ids (as
    configs and tokenizers give ``eos_token_id``)."""
    ids: set[int] = set()
    for source in sources:
        if isinstance(source, int):
            ids.add(source)
        elif source:
            ids.update(int(i) for i in source)
    return sorted(ids)


def _declared_eos(model: Any) -> list[int]:
    """The EOS ids the model itself declares (generation config and config)."""
    return token_id_set(
        *(
            getattr(owner, "eos_token_id", None)
            for owner in (getattr(model, "generation_config", None), getattr(model, "config", None))
        )
    )


def check_model_fits(model: Any, vocab: Any) -> int:
    """Check that ``model`` can be the model of ``vocab``'s tokenizer; return its logits
    width.

    Raises :class:`~corral.errors.TokenizerError` when the logits are narrower than the
    vocabulary (``vocab.size``), or when an EOS id the model declares is not a token of
    the tokenizer (``>= vocab.tokenizer_size``): the tokenizer then belongs to another
    model, even though padded output layers make wider logits normal.
    """
    width = model_vocab_size(model)
    if width < vocab.size:
        raise TokenizerError(
            f"the model's logits are {width} wide, fewer than the {vocab.size} ids of the "
            "vocabulary the grammar was compiled for: the grammar was compiled for another "
            "model's tokenizer"
        )
    outside = [e for e in _declared_eos(model) if not 0 <= e < vocab.tokenizer_size]
    if outside:
        raise TokenizerError(
            f"the model declares EOS id(s) {outside}, which are not tokens of the tokenizer "
            f"({vocab.tokenizer_size} tokens): the tokenizer is not this model's"
        )
    return width


def eos_ids_of(model: Any, tokenizer: Any) -> list[int]:
    """EOS ids: the model's generation config's, plus the tokenizer's."""
    gen = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    return token_id_set(gen, getattr(tokenizer, "eos_token_id", None))


def vocabulary_for(model: Any, tokenizer: Any) -> Any:
    """The :class:`~corral.Vocabulary` of ``tokenizer`` sized for ``model``'s logits (cached).

    Raises :class:`~corral.errors.TokenizerError` when the tokenizer cannot be the model's
    (see :func:`check_model_fits`; normal tokens beyond the logits are refused too).
    """
    from ..automata import Vocabulary

    eos = tuple(eos_ids_of(model, tokenizer))
    key = (id(tokenizer), model_vocab_size(model), eos)
    hit = _VOCABS.get(key)
    if hit is None or hit[0] is not tokenizer:
        vocab = Vocabulary.from_hf(tokenizer, vocab_size=key[1], eos_token_ids=list(eos) or None)
        _VOCABS[key] = (tokenizer, vocab)
        while len(_VOCABS) > 4:
            _VOCABS.popitem(last=False)
    else:
        vocab = hit[1]
    check_model_fits(model, vocab)
    return vocab


def check_tokenizer(tokenizer: Any, vocab: Any) -> None:
    """Check that ``vocab`` is ``tokenizer``'s vocabulary: the :class:`~corral.Vocabulary`
    built from ``tokenizer`` (with ``vocab``'s size and EOS ids, under any
    ``added_tokens`` policy) has ``vocab``'s hash. Passing checks are remembered.

    Raises :class:`~corral.errors.TokenizerError` naming the first token that differs.
    """
    from ..automata import Vocabulary

    key = (id(tokenizer), len(tokenizer) if hasattr(tokenizer, "__len__") else -1, vocab.hash)
    if _MATCHED.get(key) is tokenizer:
        return
    if any(t is tokenizer and v.hash == vocab.hash for t, v in _VOCABS.values()):
        _remember_match(key, tokenizer)
        return
    first = None
    for policy in ("whitespace", "all", "none"):
        try:
            mine = Vocabulary.from_hf(
                tokenizer,
                vocab_size=vocab.size,
                eos_token_ids=list(vocab.eos_token_ids),
                added_tokens=policy,
                check=False,
            )
        except TokenizerError as e:
            raise TokenizerError(
                f"the tokenizer is not the one the grammar was compiled for: {e}"
            ) from None
        if mine.hash == vocab.hash:
            _remember_match(key, tokenizer)
            return
        first = first or mine
        if not _same_bytes(mine, vocab):  # the policies only tell added tokens' kinds
            break
    assert first is not None
    raise TokenizerError(
        "the tokenizer is not the one the grammar was compiled for: " + _difference(first, vocab)
    )


def _remember_match(key: tuple[int, int, str], tokenizer: Any) -> None:
    _MATCHED[key] = tokenizer
    while len(_MATCHED) > 8:
        _MATCHED.popitem(last=False)


def _same_bytes(a: Any, b: Any) -> bool:
    import numpy as np

    (da, oa), (db, ob) = a.byte_table(), b.byte_table()
    return bool(np.array_equal(oa, ob) and np.array_equal(da, db))


def _difference(mine: Any, theirs: Any) -> str:
    """The first difference between the tokenizer's vocabulary and the grammar's."""
    if mine.tokenizer_size != theirs.tokenizer_size:
        return (
            f"it has {mine.tokenizer_size} tokens, the grammar's vocabulary {theirs.tokenizer_size}"
        )
    for i in range(mine.size):
        a, b = mine.token_bytes(i), theirs.token_bytes(i)
        if a != b:
            return f"token {i} is {a!r} in this tokenizer but {b!r} in the grammar's vocabulary"
    for i in range(mine.size):
        if mine.kind(i) != theirs.kind(i):
            return (
                f"token {i} ({mine.token_bytes(i)!r}) is {mine.kind(i)} here but "
                f"{theirs.kind(i)} in the grammar's vocabulary"
            )
    return "their vocabularies differ"  # pragma: no cover - equal bytes and kinds hash equal


# ---------------------------------------------------------------------------------------
# constraint → compiled grammar and parser of the result
# ---------------------------------------------------------------------------------------
def _is_pydantic_model(x: Any) -> bool:
    return isinstance(x, type) and hasattr(x, "model_json_schema") and hasattr(x, "model_validate")


def compile_constraint(
    vocab: Any,
    *,
    schema: Any = None,
    grammar: Any = None,
    regex: str | None = None,
    **schema_options: Any,
) -> tuple[Any, Callable[[str], Any]]:
    """``(compiled, parse)`` for exactly one of ``schema``, ``grammar``, ``regex``.

    ``parse(text)`` turns a complete output into the returned value.
    """
    from ..automata import CompiledGrammar, compile
    from ..automata.compiler import default_cache
    from ..grammar import Grammar

    given = [
        n for n, v in (("schema", schema), ("grammar", grammar), ("regex", regex)) if v is not None
    ]
    if len(given) != 1:
        raise ValueError(
            "pass exactly one of schema=, grammar=, regex= "
            + (f"(got {', '.join(given)})" if given else "(got none)")
        )
    if schema_options and schema is None:
        raise ValueError(f"options {sorted(schema_options)} apply to schema= only")
    if regex is not None:
        if not isinstance(regex, str):
            raise TypeError(f"regex must be a string, not {type(regex).__name__}")
        return compile(default_cache.grammar_for_regex(regex), vocab), _identity
    if grammar is not None:
        if isinstance(grammar, CompiledGrammar):
            if grammar.vocab_size != vocab.size or grammar.vocab.hash != vocab.hash:
                raise ValueError("the compiled grammar was built for another vocabulary")
            return grammar, _identity
        if not isinstance(grammar, (str, Grammar)):
            raise TypeError(
                f"grammar must be Lark text, a corral.Grammar or a CompiledGrammar, not "
                f"{type(grammar).__name__}"
            )
        return compile(grammar, vocab), _identity
    if isinstance(schema, str) and not schema.lstrip().startswith("{"):
        raise ValueError("schema= text must be a JSON object (for Lark text use grammar=)")
    compiled = compile(schema, vocab, **schema_options)
    if _is_pydantic_model(schema):
        return compiled, _pydantic_parser(schema)
    return compiled, _json_parser(compiled)


def _identity(text: str) -> str:
    return text


def _json_parser(compiled: Any) -> Callable[[str], Any]:
    check = compiled.grammar.final_check

    def parse(text: str) -> Any:
        try:
            value = json.loads(text)
        except ValueError as e:
            raise ValidationFailedError(f"output is not JSON ({e})", text=text) from None
        if check is not None and not check(text.encode("utf-8")):
            raise ValidationFailedError("output does not validate against the schema", text=text)
        return value

    return parse


def _pydantic_parser(model_cls: Any) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return model_cls.model_validate_json(text)
        except ValueError as e:
            raise ValidationFailedError(f"output does not validate ({e})", text=text) from None

    return parse


# ---------------------------------------------------------------------------------------
# the decoding loop
# ---------------------------------------------------------------------------------------
def prompt_ids(tokenizer: Any, prompt: str | Sequence[int], *, chat: bool = False) -> list[int]:
    """Token ids of ``prompt`` (text, or ids as given); ``chat`` applies the chat template."""
    if not isinstance(prompt, str):
        from ..automata.bitmask import as_int_list

        ids = as_int_list(prompt, "prompt")
        if not ids:
            raise ValueError("the prompt is empty")
        return ids
    if chat:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("chat=True, but this tokenizer has no chat template")
        out = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
        )
        ids = list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)
    else:
        ids = list(tokenizer(prompt)["input_ids"])
    if not ids:
        raise ValueError("the prompt is empty (and the tokenizer adds no BOS token)")
    return ids


def resolve_fast_forward(fast_forward: bool | None, sampler: str) -> bool:
    """Whether to fast-forward with ``sampler``: ``None`` means on for ``"mask"`` and off
    for the samplers that promise a distribution (``"awrs"``, ``"smc"``, ``"asap"``).

    Fast-forwarded tokens are the tokenizer's cut of the forced bytes, appended with
    probability 1 whatever the model thinks of them: another token sequence (and, since
    the model then reads other tokens, in general another text) than sampling each token.
    So ``True`` with those samplers raises ``ValueError`` rather than silently breaking the
    distribution they promise.
    """
    if fast_forward is None:
        return sampler == "mask"
    if not isinstance(fast_forward, bool):
        raise TypeError(f"fast_forward must be True, False or None, not {fast_forward!r}")
    if fast_forward and sampler in EXACT_SAMPLERS:
        raise ValueError(
            f"fast_forward=True is not available with sampler={sampler!r}: forced tokens are "
            "appended without sampling (the tokenizer's cut, with probability 1), which "
            f"changes the distribution sampler={sampler!r} promises; leave fast_forward unset "
            "(off for this sampler) or use sampler='mask'"
        )
    return fast_forward


def decode_steps(
    model: Any,
    ids: list[int],
    matcher: Any,
    *,
    tokenizer: Any = None,
    eos_ids: Sequence[int] = (),
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    fast_forward: bool | None = None,
    sampler: str = "mask",
    stats: GenerationStats | None = None,
) -> Iterator[list[int]]:
    """Yield the new tokens of each step (several when fast-forwarded).

    ``matcher`` ``None`` decodes without a constraint (stopping at an EOS id). Stops at
    EOS (not yielded), when the grammar allows nothing but EOS, or after
    ``max_new_tokens``. ``sampler="awrs"`` draws each token by adaptive rejection
    (:mod:`corral.sampler.awrs`): the same distribution as masking, without computing the
    mask (``stats.checks`` counts the tokens checked). ``fast_forward``: see
    :func:`resolve_fast_forward` (default: on for ``"mask"``, off for ``"awrs"``).
    """
    import torch

    from ..automata import allocate_bitmask
    from ..automata.bitmask import as_int
    from ..sampler.awrs import awrs_step, greedy_step, matcher_check
    from ..sampler.masking import masked_logits, sample

    if sampler not in ("mask", "awrs"):
        raise ValueError(f"decode_steps samples with 'mask' or 'awrs', not {sampler!r}")
    fast_forward = resolve_fast_forward(fast_forward, sampler)
    awrs = sampler == "awrs" and matcher is not None
    if awrs and (top_k is not None or top_p is not None):
        raise ValueError("top_k/top_p are not available with sampler='awrs'")
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    st = stats if stats is not None else GenerationStats()
    gen = None
    if seed is not None:
        gen = torch.Generator().manual_seed(int(seed))
    eos = set(int(e) for e in eos_ids)
    if matcher is not None:
        eos |= set(matcher.compiled.eos_ids.tolist())
    bitmask = allocate_bitmask(1, matcher.vocab_size) if matcher is not None else None
    if awrs and bitmask is None:  # pragma: no cover - awrs implies a matcher
        raise CorralError("sampler='awrs' needs a constraint")
    device = next(model.parameters()).device

    def tokenize(data: bytes) -> list[int]:
        text = data.decode("utf-8", "ignore")
        return list(tokenizer.encode(text, add_special_tokens=False)) if tokenizer else []

    feed = list(ids)
    past = None
    produced = 0
    while produced < max_new_tokens:
        if matcher is not None:
            t0 = time.perf_counter()
            forced = matcher.forced_tokens(tokenize) if fast_forward else []
            forced = forced[: max_new_tokens - produced]
            if forced:
                matcher.consume_tokens(forced)
                st.mask_s += time.perf_counter() - t0
                st.forced_tokens += len(forced)
                st.new_tokens += len(forced)
                produced += len(forced)
                feed.extend(forced)
                yield forced
                continue
            if not awrs:
                matcher.fill_bitmask(bitmask)
                st.mask_s += time.perf_counter() - t0
                if matcher.is_accepting() and _only_eos(bitmask, eos):
                    return
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model(
                input_ids=torch.tensor([feed], device=device), past_key_values=past, use_cache=True
            )
        past = out.past_key_values
        logits = out.logits[0, -1].float()
        st.forward_s += time.perf_counter() - t0
        st.forward_passes += 1
        t0 = time.perf_counter()
        if awrs:
            check = matcher_check(matcher)
            if temperature == 0:  # greedy: the best allowed token, found by checking
                found, n_checks = greedy_step(logits, check)
            else:
                r = awrs_step(logits / temperature, check, generator=gen)
                found, n_checks = r.token, r.checks
            st.checks += n_checks
            if found is None:  # every allowed token has probability 0 in float64: mask
                matcher.fill_bitmask(bitmask)
                masked = masked_logits(logits, bitmask, matcher.vocab_size)
                found = int(sample(masked, temperature=temperature, generator=gen)[0])
            tok = found
        else:
            if matcher is not None:
                logits = masked_logits(logits, bitmask, matcher.vocab_size)
            tok = int(
                sample(logits, temperature=temperature, top_k=top_k, top_p=top_p, generator=gen)[0]
            )
        st.sample_s += time.perf_counter() - t0
        if tok in eos:
            return
        if matcher is not None:
            matcher.consume(tok)
        st.sampled_tokens += 1
        st.new_tokens += 1
        produced += 1
        feed = [tok]
        yield [tok]


def model_next_logits(model: Any, prompt: Sequence[int]) -> Callable[[Any], Any]:
    """``next_logits(prefixes) -> float [N, V]`` for a causal LM after ``prompt``: one batched
    forward pass over ``prompt + prefix`` per call (right padding; no KV cache)."""
    import torch

    device = next(model.parameters()).device
    base = [int(t) for t in prompt]

    def next_logits(prefixes: Any) -> Any:
        seqs = [base + [int(t) for t in p] for p in prefixes]
        lens = [len(x) for x in seqs]
        width = max(lens)
        ids = torch.tensor([x + [0] * (width - len(x)) for x in seqs], device=device)
        att = torch.tensor([[1] * n + [0] * (width - n) for n in lens], device=device)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=att).logits
        return logits[torch.arange(len(seqs)), torch.tensor(lens) - 1].float().cpu()

    return next_logits


def _only_eos(bitmask: Any, eos: set[int]) -> bool:
    import numpy as np

    words = bitmask.view(np.uint32)[0]
    allowed = np.flatnonzero(words)
    if allowed.shape[0] > max(1, len(eos)):
        return False
    ids = set()
    for w in allowed.tolist():
        v = int(words[w])
        for b in range(32):
            if v >> b & 1:
                ids.add(32 * w + b)
    return ids <= eos


# ---------------------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------------------
def stream(
    model: Any,
    prompt: str | Sequence[int],
    *,
    schema: Any = None,
    grammar: Any = None,
    regex: str | None = None,
    tokenizer: Any = None,
    max_new_tokens: int = 512,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    sampler: str = "mask",
    chat: bool = False,
    fast_forward: bool | None = None,
    n_particles: int = 16,
    asap_path: str | os.PathLike[str] | None = None,
    **schema_options: Any,
) -> Iterator[str]:
    """Like :func:`generate`, yielding text pieces as they are produced.

    The pieces concatenate to the output text (a piece never splits a UTF-8 character).
    After the last piece the output is validated; an incomplete output raises
    :class:`~corral.errors.IncompleteGenerationError` at the end.
    """
    session = _Session(
        model, prompt, schema=schema, grammar=grammar, regex=regex, tokenizer=tokenizer,
        max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
        seed=seed, sampler=sampler, chat=chat, fast_forward=fast_forward,
        n_particles=n_particles, asap_path=asap_path, **schema_options,
    )  # fmt: skip
    yield from session.pieces()
    session.finish()


def generate(
    model: Any,
    prompt: str | Sequence[int],
    *,
    schema: Any = None,
    grammar: Any = None,
    regex: str | None = None,
    tokenizer: Any = None,
    max_new_tokens: int = 512,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    sampler: str = "mask",
    chat: bool = False,
    fast_forward: bool | None = None,
    details: bool = False,
    n_particles: int = 16,
    asap_path: str | os.PathLike[str] | None = None,
    **schema_options: Any,
) -> Any:
    """Generate text that satisfies a constraint, and return it parsed and validated.

    Args:
        model: a ``transformers`` causal LM (with ``tokenizer=``), or a local model folder,
            or ``"gemma3-270m"`` (the default small model, see ``corral.integrations.models``).
        prompt: text (tokenized with the tokenizer's special tokens, e.g. BOS) or token ids.
        schema: a JSON Schema (dict, bool, JSON text) or a pydantic model class.
        grammar: Lark grammar text, a :class:`~corral.Grammar`, or a compiled grammar.
        regex: a regular expression (Python syntax) the whole output must match.
        tokenizer: the model's tokenizer (taken from the folder when ``model`` is a path).
        max_new_tokens: budget of generated tokens (forced ones included). An output the
            grammar accepts when the budget runs out is complete; for ``"smc"`` see
            docs/sampling.md (complete particles end at the budget, weighted by the
            model's probability of ending there).
        temperature: ``0`` (default) is greedy; otherwise sampling, with ``top_k`` and
            ``top_p`` applied after the mask (see :mod:`corral.sampler.masking`).
        seed: seed of the sampler's random generator (reproducible sampling).
        sampler: ``"mask"`` (default: mask the logits, then sample); ``"awrs"`` (the same
            distribution, drawn by adaptive rejection: only drawn tokens are checked);
            ``"smc"`` (``n_particles`` particles extended with AWRS and resampled; the
            output is drawn from the weighted complete particles, so it approaches the
            model's distribution conditioned on the constraint as ``n_particles`` grows);
            ``"asap"`` (grammar-aligned sampling: a trie of earlier samples for the same
            prompt and constraint, kept in the process and in ``asap_path`` if given,
            reweights each step; repeated calls converge to the conditioned
            distribution). ``smc`` and ``asap`` need ``temperature > 0`` and take no
            ``top_k``/``top_p``; they recompute the forward pass over the whole prefix
            for each particle (no KV cache), so they suit short outputs.
        n_particles: particles for ``sampler="smc"``.
        asap_path: a file keeping the ASAp trie between processes.
        chat: wrap the prompt in the tokenizer's chat template (instruction models).
        fast_forward: append tokens the grammar forces without sampling them (cut by the
            tokenizer). ``None`` (default): on for ``sampler="mask"``, off for the samplers
            that promise a distribution; ``True`` with those raises ``ValueError``. With
            ``"mask"`` it changes the sampled token sequences (see docs/generation.md);
            ``False`` gives plain per-token masked sampling.
        details: return a :class:`Generation` (value, text, tokens, statistics) instead of
            the value alone.
        schema_options: JSON Schema options (``whitespace``, ``property_order``, ...).

    Returns:
        The value: for a schema, the parsed JSON (validated against the schema); for a
        pydantic class, an instance; for a grammar or regex, the text.

    Raises:
        IncompleteGenerationError: ``max_new_tokens`` ran out before the output was
            complete (carries the partial text).
        ValueError / TypeError: incompatible arguments (e.g. ``schema`` and ``grammar``).
        SchemaError, GrammarError, UnsupportedFeatureError: a bad constraint, with its
            position.
    """
    session = _Session(
        model, prompt, schema=schema, grammar=grammar, regex=regex, tokenizer=tokenizer,
        max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
        seed=seed, sampler=sampler, chat=chat, fast_forward=fast_forward,
        n_particles=n_particles, asap_path=asap_path, **schema_options,
    )  # fmt: skip
    for _ in session.pieces():
        pass
    result = session.finish()
    return result if details else result.value


class _Session:
    """One generation: arguments checked, constraint compiled, loop run once."""

    def __init__(
        self,
        model: Any,
        prompt: str | Sequence[int],
        *,
        schema: Any,
        grammar: Any,
        regex: str | None,
        tokenizer: Any,
        max_new_tokens: int,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
        seed: int | None,
        sampler: str,
        chat: bool,
        fast_forward: bool | None,
        n_particles: int = 16,
        asap_path: str | os.PathLike[str] | None = None,
        **schema_options: Any,
    ) -> None:
        from ..automata.bitmask import as_int

        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, not {sampler!r}")
        fast_forward = resolve_fast_forward(fast_forward, sampler)
        max_new_tokens = as_int(max_new_tokens, "max_new_tokens")
        n_particles = as_int(n_particles, "n_particles")
        if top_k is not None:
            top_k = as_int(top_k, "top_k")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        self.model, self.tokenizer = resolve_model(model, tokenizer)
        self.vocab = vocabulary_for(self.model, self.tokenizer)
        self.compiled, self.parse = compile_constraint(
            self.vocab, schema=schema, grammar=grammar, regex=regex, **schema_options
        )
        self.ids = prompt_ids(self.tokenizer, prompt, chat=chat)
        self.matcher = self.compiled.matcher()
        self.stats = GenerationStats()
        self.tokens: list[int] = []
        self._kw = dict(
            max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
            seed=seed, fast_forward=fast_forward, sampler=sampler,
        )  # fmt: skip
        self.sampler = sampler
        self.n_particles = n_particles
        self.asap_path = asap_path
        self._result: Generation | None = None
        if sampler in ("smc", "asap"):
            if top_k is not None or top_p is not None:
                raise ValueError(f"top_k/top_p are not available with sampler={sampler!r}")
            if temperature == 0:
                raise ValueError(
                    f"sampler={sampler!r} samples a distribution: pass temperature > 0 "
                    "(1.0 is the model's own distribution)"
                )
        elif n_particles != 16 or asap_path is not None:
            raise ValueError("n_particles and asap_path apply to sampler='smc' / 'asap' only")

    def pieces(self) -> Iterator[str]:
        if self.sampler in ("smc", "asap"):
            self._run_global()
            assert self._result is not None
            yield self._result.text
            return
        dec = codecs.getincrementaldecoder("utf-8")("replace")
        for new in decode_steps(
            self.model, self.ids, self.matcher, tokenizer=self.tokenizer,
            eos_ids=self.vocab.eos_token_ids, stats=self.stats, **self._kw,  # type: ignore[arg-type]
        ):  # fmt: skip
            self.tokens.extend(new)
            piece = dec.decode(self.vocab.decode(new))
            if piece:
                yield piece
        tail = dec.decode(b"", final=True)
        if tail:
            yield tail

    def _run_global(self) -> None:
        """SMC or ASAp: samplers that look at whole sequences (no streaming)."""
        import torch

        from ..sampler.asap import ASAp
        from ..sampler.smc import smc

        next_logits = model_next_logits(self.model, self.ids)
        gen = torch.Generator()
        if self._kw["seed"] is not None:
            gen.manual_seed(int(self._kw["seed"]))
        temperature = float(self._kw["temperature"])  # type: ignore[arg-type]
        max_new = int(self._kw["max_new_tokens"])  # type: ignore[arg-type]
        t0 = time.perf_counter()
        if self.sampler == "smc":
            res = smc(next_logits, self.compiled, n_particles=self.n_particles,
                      max_tokens=max_new, temperature=temperature, generator=gen)  # fmt: skip
            dist = res.distribution()
            if not dist:
                raise IncompleteGenerationError(
                    f"no SMC particle completed within max_new_tokens={max_new}",
                    partial_text="", token_ids=[],
                )  # fmt: skip
            outs = list(dist)
            pick = int(torch.multinomial(torch.tensor([dist[o] for o in outs]), 1, generator=gen))
            tokens = list(outs[pick])
            self.stats.checks = res.checks
            particles = [
                (self.vocab.decode(o).decode("utf-8", "replace"), w) for o, w in dist.items()
            ]
            log_z: float | None = res.log_z
        else:
            key = (id(self.model), tuple(self.ids), self.compiled.cache_key, temperature)
            asap = _ASAP.get(key)
            if asap is None:
                asap = ASAp(next_logits, self.compiled, key=repr(self.ids), temperature=temperature)
                if self.asap_path is not None and Path(self.asap_path).exists():
                    asap.load(self.asap_path)
                _ASAP[key] = asap
                while len(_ASAP) > 8:
                    _ASAP.popitem(last=False)
            asap.next_logits = next_logits
            try:
                tokens = asap.sample(generator=gen, max_tokens=max_new)
            except CorralError as e:
                raise IncompleteGenerationError(str(e), partial_text="", token_ids=[]) from None
            if self.asap_path is not None:
                asap.save(self.asap_path)
            particles, log_z = [], None
        self.stats.forward_s = time.perf_counter() - t0
        self.stats.new_tokens = self.stats.sampled_tokens = len(tokens)
        self.matcher.consume_tokens(tokens)
        self.tokens = tokens
        text = self.vocab.decode(tokens).decode("utf-8", "replace")
        self._result = Generation(self.parse(text), text, tokens, self.stats, log_z, particles)

    def finish(self) -> Generation:
        if self._result is not None:
            return self._result
        text = self.vocab.decode(self.tokens).decode("utf-8", "replace")
        if not self.matcher.is_accepting():
            raise IncompleteGenerationError(
                f"max_new_tokens={self._kw['max_new_tokens']} ran out before the output was "
                "complete",
                partial_text=text,
                token_ids=list(self.tokens),
            )
        return Generation(self.parse(text), text, list(self.tokens), self.stats)
