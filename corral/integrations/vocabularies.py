"""The :class:`~corral.Vocabulary` of a Hugging Face tokenizer sized for a model, and the
checks that a tokenizer or a model fits the vocabulary a grammar was compiled for.

Vocabularies built here and tokenizer checks that passed are kept in bounded caches
(:class:`~corral.caching.BoundedCache`), so repeated generations with the same model and
tokenizer build them once.
"""

from __future__ import annotations

from typing import Any

from ..caching import BoundedCache
from ..errors import ArgumentTypeError, TokenizerError, VocabularyMismatchError

__all__ = [
    "check_model_fits",
    "check_tokenizer",
    "eos_ids_of",
    "model_vocab_size",
    "token_id_set",
    "vocabulary_for",
]

# (id(tokenizer), logits width, EOS ids) -> (tokenizer, vocabulary)
VOCABULARIES: BoundedCache[tuple[int, int, tuple[int, ...]], tuple[Any, Any]] = BoundedCache(4)
# (id(tokenizer), its length, vocabulary hash) -> the tokenizer that passed the check
MATCHED_TOKENIZERS: BoundedCache[tuple[int, int, str], Any] = BoundedCache(8)


def model_vocab_size(model: Any) -> int:
    """The width of the model's logits: the rows of its output embedding, else
    ``model.config.vocab_size``."""
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if out is not None and getattr(out, "weight", None) is not None:
        return int(out.weight.shape[0])
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    if size is None:
        raise ArgumentTypeError(
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
    vocabulary (``vocab.size``; a :class:`~corral.errors.VocabularyMismatchError`), or
    when an EOS id the model declares is not a token of the tokenizer (``>=
    vocab.tokenizer_size``): the tokenizer then belongs to another model, even though
    padded output layers make wider logits normal.
    """
    width = model_vocab_size(model)
    if width < vocab.size:
        raise VocabularyMismatchError(
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
    hit = VOCABULARIES.get(key)
    if hit is None or hit[0] is not tokenizer:
        vocab = Vocabulary.from_hf(tokenizer, vocab_size=key[1], eos_token_ids=list(eos) or None)
        VOCABULARIES.put(key, (tokenizer, vocab))
    else:
        vocab = hit[1]
    check_model_fits(model, vocab)
    return vocab


def check_tokenizer(tokenizer: Any, vocab: Any) -> None:
    """Check that ``vocab`` is ``tokenizer``'s vocabulary: the :class:`~corral.Vocabulary`
    built from ``tokenizer`` (with ``vocab``'s size and EOS ids, under any
    ``added_tokens`` policy) has ``vocab``'s hash. Passing checks are remembered.

    Raises :class:`~corral.errors.VocabularyMismatchError` (a
    :class:`~corral.errors.TokenizerError`) naming the first token that differs.
    """
    from ..automata import Vocabulary

    key = (id(tokenizer), len(tokenizer) if hasattr(tokenizer, "__len__") else -1, vocab.hash)
    if MATCHED_TOKENIZERS.get(key) is tokenizer:
        return
    if any(t is tokenizer and v.hash == vocab.hash for t, v in VOCABULARIES.values()):
        MATCHED_TOKENIZERS.put(key, tokenizer)
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
            raise VocabularyMismatchError(
                f"the tokenizer is not the one the grammar was compiled for: {e}"
            ) from None
        if mine.hash == vocab.hash:
            MATCHED_TOKENIZERS.put(key, tokenizer)
            return
        first = first or mine
        if not _same_bytes(mine, vocab):  # the policies only tell added tokens' kinds
            break
    assert first is not None
    raise VocabularyMismatchError(
        "the tokenizer is not the one the grammar was compiled for: " + _difference(first, vocab)
    )


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
