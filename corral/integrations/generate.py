"""``corral.generate`` and ``corral.stream``: constrained generation with a causal LM.

The entry points check their arguments once into a
:class:`~corral.sampler.config.GenerationConfig`, resolve the model and tokenizer
(:mod:`.models`, :mod:`.vocabularies`), compile the constraint (:mod:`.constraint`) and
run the sampler the config names (:mod:`corral.sampler.registry`) over the model wrapped
as a :class:`~corral.sampler.lm.CausalLM` (:mod:`.hf_lm`):

* a per-token sampler (``"mask"``, ``"awrs"``) runs in the KV-cache loop of
  :func:`corral.sampler.decode.token_steps` (fast-forward, stopping without a forward
  pass when only EOS may follow, mask → temperature → top-k → top-p → sample), and
  streams;
* a sequence sampler (``"smc"``, ``"asap"``) draws the whole output at once.

Token healing (``heal``, :mod:`corral.sampler.healing`; on by default for a per-token
sampler and a text prompt without chat template): the prompt's last token is backed up
when a longer token starts with its bytes, and the output first spells those bytes again
under an exact mask. The text returned (and streamed) is what follows the prompt: the
re-spelled bytes are not in it; ``token_ids`` are every token generated, the ones that
re-spell them included (``stats.healed_bytes`` says how many bytes).

When ``max_new_tokens`` is spent before the output is complete,
:class:`~corral.errors.IncompleteGenerationError` is raised with the partial text; an
output the grammar accepts at that point is complete and returned.
"""

from __future__ import annotations

import codecs
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import IncompleteGenerationError, InvalidArgumentError
from ..sampler.config import GenerationConfig
from ..sampler.decode import GenerationStats
from .constraint import compile_constraint
from .models import check_prompt_length, context_length, resolve_model
from .vocabularies import vocabulary_for

__all__ = ["Generation", "decode_steps", "generate", "prompt_ids", "stream"]


@dataclass
class Generation:
    """What :func:`generate` produced (``details=True``).

    Attributes:
        value: the parsed value (dict/list/... for a JSON Schema, a model instance for a
            pydantic class, the text for a grammar or regex).
        text: the generated text: what follows the prompt (with token healing, the bytes
            of the prompt's backed-up last token, which the output spells again first, are
            not in it).
        token_ids: the generated token ids (EOS excluded), the ones that re-spell healed
            prompt bytes included: their bytes are those ``stats.healed_bytes`` bytes,
            then ``text``. The prompt's ids less the backed-up token, then these, are the
            tokens the model read.
        stats: :class:`GenerationStats`.
    """

    value: Any
    text: str
    token_ids: list[int]
    stats: GenerationStats = field(default_factory=GenerationStats)
    log_z: float | None = None  # SMC: log estimate of P(output satisfies the constraint)
    particles: list[tuple[str, float]] = field(default_factory=list)  # SMC: (text, weight)


# ---------------------------------------------------------------------------------------
# the token-by-token decode (its loop: corral.sampler.decode.token_steps)
# ---------------------------------------------------------------------------------------
def prompt_ids(tokenizer: Any, prompt: str | Sequence[int], *, chat: bool = False) -> list[int]:
    """Token ids of ``prompt`` (text, or ids as given); ``chat`` applies the chat template."""
    if not isinstance(prompt, str):
        from ..automata.bitmask import as_int_list

        ids = as_int_list(prompt, "prompt")
        if not ids:
            raise InvalidArgumentError("the prompt must have at least one token id, got none")
        return ids
    if chat:
        if not getattr(tokenizer, "chat_template", None):
            raise InvalidArgumentError(
                "chat=True needs a tokenizer with a chat template, got one without "
                f"({type(tokenizer).__name__})"
            )
        out = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
        )
        ids = list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)
    else:
        ids = list(tokenizer(prompt)["input_ids"])
    if not ids:
        raise InvalidArgumentError(
            "the prompt must give at least one token, got none (an empty prompt, and the "
            "tokenizer adds no BOS token)"
        )
    return ids


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
    heal: bool | None = None,
) -> Iterator[list[int]]:
    """Yield the new tokens of each step (several when fast-forwarded).

    ``model`` is a ``transformers`` causal LM, read with its KV cache. ``matcher`` ``None``
    decodes without a constraint (stopping at an EOS id). Stops at EOS (not yielded), when
    the grammar allows nothing but EOS, or after ``max_new_tokens``. ``sampler="awrs"``
    draws each token by adaptive rejection (:mod:`corral.sampler.awrs`): the same
    distribution as masking, without computing the mask (``stats.checks`` counts the
    tokens checked). ``fast_forward``: see
    :func:`~corral.sampler.config.resolve_fast_forward` (default: on for
    ``"mask"``, off for ``"awrs"``). ``heal=True``: token healing (see :func:`generate`;
    the yielded tokens start with those that spell the backed-up token's bytes again,
    ``stats.healed_bytes`` of them); ``None`` (default) and ``False``: off, the ids are
    taken as given. The loop itself is :func:`corral.sampler.decode.token_steps`.
    """
    from ..sampler.decode import token_steps
    from ..sampler.registry import PER_TOKEN_SAMPLERS
    from .hf_lm import HFCausalLM

    if sampler not in PER_TOKEN_SAMPLERS:
        names = " or ".join(repr(n) for n in PER_TOKEN_SAMPLERS)
        raise InvalidArgumentError(f"decode_steps samples with {names}, got {sampler!r}")
    config = GenerationConfig(
        sampler=sampler, max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k,
        top_p=top_p, seed=seed, fast_forward=fast_forward,
    )  # fmt: skip
    do_heal = _resolve_heal(heal, sampler, text_prompt=False, chat=False)
    if do_heal and matcher is None:
        raise InvalidArgumentError(
            "heal=True needs a matcher, got matcher=None: token healing spells the prompt's "
            "last token again under the constraint"
        )
    yield from token_steps(HFCausalLM(model), ids, matcher, config,
                           tokenize=_tokenize(tokenizer), eos_ids=eos_ids, stats=stats,
                           heal=do_heal)  # fmt: skip


def _resolve_heal(heal: bool | None, sampler: str, *, text_prompt: bool, chat: bool) -> bool:
    from ..sampler.healing import resolve_heal

    return resolve_heal(heal, sampler, text_prompt=text_prompt, chat=chat)


def _tokenize(tokenizer: Any) -> Callable[[bytes], list[int]]:
    """Cuts forced bytes into ``tokenizer``'s tokens (none without a tokenizer)."""

    def tokenize(data: bytes) -> list[int]:
        text = data.decode("utf-8", "ignore")
        return list(tokenizer.encode(text, add_special_tokens=False)) if tokenizer else []

    return tokenize


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
    heal: bool | None = None,
    n_particles: int = 16,
    asap_path: str | os.PathLike[str] | None = None,
    monitors: Any = None,
    monitor_state: Any = None,
    **schema_options: Any,
) -> Iterator[str]:
    """Like :func:`generate`, yielding text pieces as they are produced.

    The pieces concatenate to the output text (a piece never splits a UTF-8 character;
    with token healing, the re-spelled prompt bytes are not streamed).
    After the last piece the output is validated; an incomplete output raises
    :class:`~corral.errors.IncompleteGenerationError` at the end.
    """
    config = GenerationConfig(
        sampler=sampler, max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k,
        top_p=top_p, seed=seed, fast_forward=fast_forward, n_particles=n_particles,
        asap_path=asap_path,
    )  # fmt: skip
    session = _Session(model, prompt, config, schema=schema, grammar=grammar, regex=regex,
                       tokenizer=tokenizer, chat=chat, heal=heal, monitors=monitors,
                       monitor_state=monitor_state, **schema_options)  # fmt: skip
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
    heal: bool | None = None,
    details: bool = False,
    n_particles: int = 16,
    asap_path: str | os.PathLike[str] | None = None,
    monitors: Any = None,
    monitor_state: Any = None,
    **schema_options: Any,
) -> Any:
    """Generate text that satisfies a constraint, and return it parsed and validated.

    Args:
        model: a ``transformers`` causal LM (with ``tokenizer=``), or a local model folder,
            or ``"gemma3-270m"`` (the default small model, see ``corral.integrations.models``).
        prompt: text (tokenized with the tokenizer's special tokens, e.g. BOS) or token ids.
        schema: a JSON Schema (dict, bool, JSON text) or a pydantic model class.
        grammar: Lark grammar text, a :class:`~corral.Grammar`, a compiled grammar, or a
            structural tag (:mod:`corral.grammar.structural`: tool calls, reasoning and
            free text; its output is returned as text).
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
            that promise a distribution; ``True`` with those raises
            :class:`~corral.errors.InvalidArgumentError` (a ``ValueError``). With
            ``"mask"`` it changes the sampled token sequences (see docs/generation.md);
            ``False`` gives plain per-token masked sampling.
        heal: token healing. A prompt that ends inside what would be one token (a
            trailing space, half a word, an open quote) puts the model at a token boundary
            it never saw in training. With healing, the prompt's last token is backed up
            when some longer token starts with its bytes (never a special token, nor the
            only token), and the first generated tokens must spell those bytes again,
            exactly, under the constraint (see :mod:`corral.sampler.healing`); the model
            chooses how the tokens cross the boundary. The returned text and value are what
            follows the prompt (the re-spelled bytes are not repeated);
            ``stats.healed_bytes`` counts them, and the tokens that spell them are in
            ``token_ids`` and count in ``max_new_tokens``. ``None`` (default): on for
            ``"mask"`` and ``"awrs"`` with a text prompt and ``chat=False``; off for token
            id prompts (the caller's own tokenization) and chat prompts (the template's
            end is a boundary the model was trained on); ``True`` heals those too.
            ``"smc"``/``"asap"`` do not heal (``True`` raises ``InvalidArgumentError``).
        details: return a :class:`Generation` (value, text, tokens, statistics) instead of
            the value alone.
        monitors: :class:`~corral.Monitor` objects (or one): constraints computed while
            generating. Where a monitor's trigger fires, its callback says what may
            follow (see :mod:`corral.monitors`); with ``schema``/``grammar``/``regex``
            both constrain, without them the rest of the text is free. Needs
            ``sampler="mask"`` or ``"awrs"``; token healing is off.
        monitor_state: any object, passed to every callback as ``context.state``.
        schema_options: JSON Schema options (``whitespace``, ``property_order``, ...).

    Returns:
        The value: for a schema, the parsed JSON (validated against the schema); for a
        pydantic class, an instance; for a grammar or regex, the text.

    Raises:
        IncompleteGenerationError: ``max_new_tokens`` ran out before the output was
            complete (carries the partial text).
        PromptTooLongError: the prompt fills the model's context (no room for output).
        InvalidArgumentError, ArgumentTypeError: incompatible arguments (e.g. ``schema``
            and ``grammar``), a setting out of range, an argument of the wrong type (a
            ``ValueError`` and a ``TypeError``; the message gives the expected and the
            actual value).
        VocabularyMismatchError: a ``CompiledGrammar`` compiled for another vocabulary.
        SchemaError, GrammarError, UnsupportedFeatureError: a bad constraint, with its
            position.
    """
    config = GenerationConfig(
        sampler=sampler, max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k,
        top_p=top_p, seed=seed, fast_forward=fast_forward, n_particles=n_particles,
        asap_path=asap_path,
    )  # fmt: skip
    session = _Session(model, prompt, config, schema=schema, grammar=grammar, regex=regex,
                       tokenizer=tokenizer, chat=chat, heal=heal, monitors=monitors,
                       monitor_state=monitor_state, **schema_options)  # fmt: skip
    for _ in session.pieces():
        pass
    result = session.finish()
    return result if details else result.value


class _Session:
    """One generation: the constraint compiled for the model, the config's sampler run
    once."""

    def __init__(
        self,
        model: Any,
        prompt: str | Sequence[int],
        config: GenerationConfig,
        *,
        schema: Any,
        grammar: Any,
        regex: str | None,
        tokenizer: Any,
        chat: bool,
        heal: bool | None = None,
        monitors: Any = None,
        monitor_state: Any = None,
        **schema_options: Any,
    ) -> None:
        self.config = config
        if monitors is not None:  # constraints computed while generating: corral/monitors
            from ..monitors.decoding import check_monitored, monitored_constraint

            monitors = check_monitored(monitors, sampler=config.sampler, heal=heal)
            heal = False
        self.heal = _resolve_heal(heal, config.sampler, text_prompt=isinstance(prompt, str),
                                  chat=chat)  # fmt: skip
        self.model, self.tokenizer = resolve_model(model, tokenizer)
        self.vocab = vocabulary_for(self.model, self.tokenizer)
        if monitors is not None and schema is None and grammar is None and regex is None:
            # free text under the monitors alone
            self.compiled: Any = None
            self.parse: Callable[[str], Any] = str
        else:
            self.compiled, self.parse = compile_constraint(
                self.vocab, schema=schema, grammar=grammar, regex=regex, **schema_options
            )
        self.ids = prompt_ids(self.tokenizer, prompt, chat=chat)
        check_prompt_length(len(self.ids), context_length(getattr(self.model, "config", None)))
        # what matchers start from: the compiled grammar, or it under the monitors
        self.constraint: Any = self.compiled
        if monitors is not None:
            self.constraint = monitored_constraint(
                self.vocab, monitors, self.compiled, prompt=prompt, state=monitor_state
            )
        self.matcher = self.constraint.matcher()
        self.stats = GenerationStats()
        self.tokens: list[int] = []
        self._result: Generation | None = None

    def pieces(self) -> Iterator[str]:
        from ..sampler.decode import token_steps
        from .hf_lm import HFCausalLM

        if not self.config.per_token:
            self._run_sequence()
            assert self._result is not None
            yield self._result.text
            return
        dec = codecs.getincrementaldecoder("utf-8")("replace")
        seen = 0  # bytes of the tokens so far, the re-spelled healed bytes included
        for new in token_steps(
            HFCausalLM(self.model), self.ids, self.matcher, self.config,
            tokenize=_tokenize(self.tokenizer), eos_ids=self.vocab.eos_token_ids,
            stats=self.stats, heal=self.heal,
        ):  # fmt: skip
            self.tokens.extend(new)
            data = self.vocab.decode(new)
            skip = max(0, min(len(data), self.stats.healed_bytes - seen))
            seen += len(data)
            piece = dec.decode(data[skip:])
            if piece:
                yield piece
        tail = dec.decode(b"", final=True)
        if tail:
            yield tail

    def _run_sequence(self) -> None:
        """A sequence sampler (SMC, ASAp): the whole output at once (no streaming)."""
        from .hf_lm import HFCausalLM

        t0 = time.perf_counter()
        draw = self.config.make_sampler().sample(
            HFCausalLM(self.model, self.ids), self.constraint,
            generator=self.config.generator(fresh=True),
            context=(id(self.model), tuple(self.ids)), prompt_key=repr(self.ids),
        )  # fmt: skip
        self.stats.forward_s = time.perf_counter() - t0
        tokens = draw.tokens
        self.stats.checks = draw.checks
        self.stats.new_tokens = self.stats.sampled_tokens = len(tokens)
        self.matcher.consume_tokens(tokens)
        self.tokens = tokens
        particles = [
            (self.vocab.decode(o).decode("utf-8", "replace"), w) for o, w in draw.particles
        ]
        text = self.vocab.decode(tokens).decode("utf-8", "replace")
        self._result = Generation(self.parse(text), text, tokens, self.stats, draw.log_z, particles)

    def finish(self) -> Generation:
        if self._result is not None:
            return self._result
        data = self.vocab.decode(self.tokens)
        healed = self.stats.healed_bytes  # spelled again first: not part of the output
        text = data[healed:].decode("utf-8", "replace")
        if len(data) < healed or not self.matcher.is_accepting():
            raise IncompleteGenerationError(
                f"max_new_tokens={self.config.max_new_tokens} ran out before the output was "
                "complete"
                + (" (while spelling the healed prompt bytes)" if len(data) < healed else ""),
                partial_text=text,
                token_ids=list(self.tokens),
            )
        return Generation(self.parse(text), text, list(self.tokens), self.stats)
