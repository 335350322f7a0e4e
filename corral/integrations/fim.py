"""Fill-in-the-middle (FIM) prompts for causal code models.

Code models trained for infilling read the text around a hole in a fixed layout of three
marker tokens and then write the middle, ending it with an end-of-text token. corral
uses the prefix-suffix-middle layout, the one every family below supports:

    <prefix marker> prefix <suffix marker> suffix <middle marker> middle...

The markers of each family (as their tokens decode; CodeLlama's carry a leading space):

* StarCoder, StarCoder2, SantaCoder: ``<fim_prefix>``, ``<fim_suffix>``, ``<fim_middle>``;
* Qwen2.5-Coder: ``<|fim_prefix|>``, ``<|fim_suffix|>``, ``<|fim_middle|>``;
* DeepSeek-Coder: ``<｜fim▁begin｜>``, ``<｜fim▁hole｜>``, ``<｜fim▁end｜>``;
* CodeLlama: ``<PRE>``, ``<SUF>``, ``<MID>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError

FORMATS: dict[str, tuple[str, str, str]] = {
    "starcoder": ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
    "qwen": ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    "deepseek": ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),
    "codellama": ("<PRE>", "<SUF>", "<MID>"),
}


@dataclass(frozen=True)
class FimFormat:
    """Token ids of the three markers of a prefix-suffix-middle prompt."""

    name: str
    prefix_id: int
    suffix_id: int
    middle_id: int

    def prompt(self, prefix: list[int], suffix: list[int]) -> list[int]:
        """``<prefix marker> prefix <suffix marker> suffix <middle marker>``: the ids the
        model reads before the first token of the middle."""
        return [self.prefix_id, *prefix, self.suffix_id, *suffix, self.middle_id]


def _marker_ids(tokenizer: Any, wanted: set[str]) -> dict[str, int]:
    """The token id of each marker in ``wanted`` that is one token of ``tokenizer`` (as
    the token decodes, stripped of surrounding spaces)."""
    found: dict[str, int] = {}
    vocab = tokenizer.get_vocab()
    for raw, tid in vocab.items():
        # only tokens that may spell a marker are decoded (byte-level BPE keeps "fim",
        # "PRE", ... readable in the raw form)
        if "fim" not in raw.lower() and not any(x in raw for x in ("PRE", "SUF", "MID")):
            continue
        text = tokenizer.convert_tokens_to_string([raw]).strip()
        if text in wanted and (text not in found or tid < found[text]):
            found[text] = int(tid)
    return found


def fim_format(tokenizer: Any, spec: str | tuple[str, str, str] | None) -> FimFormat | None:
    """The FIM layout to prompt with.

    Args:
        spec: ``"auto"``: the first family of ``FORMATS`` whose three markers are tokens
            of ``tokenizer`` (``None`` if none is); a family name; a tuple of the three
            marker strings; or ``None`` (no FIM prompt).

    Raises:
        InvalidArgumentError: an unknown family name, or markers that are not single tokens.
    """
    if spec is None:
        return None
    if spec == "auto":
        found = _marker_ids(tokenizer, {m for f in FORMATS.values() for m in f})
        for name, markers in FORMATS.items():
            if all(m in found for m in markers):
                return FimFormat(name, *(found[m] for m in markers))
        return None
    if isinstance(spec, str):
        if spec not in FORMATS:
            raise InvalidArgumentError(
                f"unknown FIM format {spec!r}: expected 'auto', one of {sorted(FORMATS)}, "
                "or a tuple of the three marker strings"
            )
        name, markers = spec, FORMATS[spec]
    else:
        if len(spec) != 3:
            raise InvalidArgumentError(
                "a FIM format is three marker strings (prefix, suffix, middle), got "
                f"{len(spec)}: {spec!r}"
            )
        name, markers = "custom", (spec[0], spec[1], spec[2])
    found = _marker_ids(tokenizer, set(markers))
    for m in markers:
        if m not in found:
            ids = tokenizer.encode(m, add_special_tokens=False)
            if len(ids) != 1:
                raise InvalidArgumentError(
                    f"FIM marker {m!r} is not one token of this tokenizer: expected one "
                    f"token, got {len(ids)} ({ids})"
                )
            found[m] = int(ids[0])
    return FimFormat(name, *(found[m] for m in markers))


__all__ = ["FORMATS", "FimFormat", "fim_format"]
