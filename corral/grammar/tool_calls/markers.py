"""How a request writes a model family's *markers*: the control strings of its format
(``<tool_call>``, ``<|python_tag|>``, ``<｜tool▁sep｜>``...).

A marker is written one of three ways:

* ``"token"``: as the special token (:class:`~corral.grammar.structural.Token`), never
  spelled out in ordinary tokens: what a model writes when its tokenizer has the marker as
  one added token. corral's ``Vocabulary.from_hf`` treats every added token that is not
  whitespace as special by default (``added_tokens="whitespace"``), the ones a tokenizer
  leaves unmarked (Qwen's ``<tool_call>``, DeepSeek's ``<think>``) included;
* ``"text"``: as its text, in whatever tokens spell it (a vocabulary built with
  ``added_tokens="all"``, or a tokenizer without that token);
* ``"eos"``: a marker that is an end-of-sequence token of the vocabulary (gpt-oss's
  ``<|return|>``); the output ends there, so the grammar leaves it out and lets the output
  end where it would be (only where a format allows it: the end of a harmony message).

Each family declares its markers' ways as its model's tokenizer has them; given a
``vocab``, :class:`Kit` reads them from the vocabulary instead (a special token: token; an
EOS token: eos; otherwise text), so the format fits the vocabulary the spec is compiled
for.

Free text never holds a special token; so that :func:`~.parse.parse_tool_calls` can read
an output back unambiguously, free text also excludes the spelling of every marker
(except the text triggers of its own region, which start a call).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...errors import InvalidArgumentError
from ..structural import (
    AnyText,
    Const,
    Format,
    Or,
    Sequence,
    Tag,
    Token,
    TokenTriggeredTags,
    TriggeredTags,
)

__all__ = ["KINDS", "Kit", "one_of", "seq"]

KINDS = ("token", "text", "eos")


def seq(*parts: Format | str | None) -> Format:
    """The parts in order (``None`` and ``""`` left out); one part as itself."""
    kept = [p for p in parts if p is not None and p != ""]
    if not kept:
        return Const("")
    if len(kept) == 1:
        return Const(kept[0]) if isinstance(kept[0], str) else kept[0]
    return Sequence(kept)


def one_of(options: Iterable[Format | str]) -> Format:
    """One of ``options`` (one option as itself)."""
    opts = list(options)
    if len(opts) == 1:
        return Const(opts[0]) if isinstance(opts[0], str) else opts[0]
    return Or(opts)


class Kit:
    """A family's markers as one request writes them.

    Args:
        family: the family's name (for messages).
        markers: marker text → its way (``"token"``, ``"text"`` or ``"eos"``) in the
            family's tokenizer.
        vocab: a :class:`corral.Vocabulary` to read the ways from instead, or ``None``.
    """

    def __init__(self, family: str, markers: Mapping[str, str], vocab: Any = None) -> None:
        self.family = family
        if vocab is None:
            self.kinds = dict(markers)
        else:
            specials = vocab.special_tokens()
            eos = {vocab.token_bytes(i).decode("utf-8", "replace") for i in vocab.eos_token_ids}
            self.kinds = {
                t: "eos" if t in eos else "token" if t in specials else "text" for t in markers
            }

    def kind(self, text: str) -> str:
        """The way ``text`` is written (``"text"`` for a string that is no marker)."""
        return self.kinds.get(text, "text")

    def m(self, text: str) -> Token | str:
        """``text`` as written: a :class:`Token` for a token marker, else the string."""
        kind = self.kind(text)
        if kind == "eos":
            raise InvalidArgumentError(
                f"the {self.family} format needs the marker {text!r} inside the output, but "
                "the vocabulary has it as an end-of-sequence token"
            )
        return Token(text) if kind == "token" else text

    def closers(self, texts: Iterable[str]) -> tuple[Format | None, bool]:
        """``(format, may_end)``: one of the ``texts`` that close something, as written
        (``None`` if all of them are EOS tokens), and whether an EOS token among them lets
        the output end instead."""
        written = [self.m(t) for t in texts if self.kind(t) != "eos"]
        may_end = any(self.kind(t) == "eos" for t in texts)
        return (one_of(written) if written else None), may_end

    def spelled(self, *extra: str, but: Iterable[str] = ()) -> tuple[str, ...]:
        """The strings free text excludes: every marker's spelling and ``extra``, less
        the text triggers ``but`` of its own region."""
        skip = {t for t in but if self.kind(t) == "text"}
        out = [t for t in (*self.kinds, *extra) if t not in skip]
        return tuple(dict.fromkeys(out))

    def tag(self, begin: str, middle: Iterable[Format | str], end: str) -> Tag:
        """``begin middle... end`` as a :class:`Tag` (markers as written)."""
        return Tag(self.m(begin), seq(*middle), self.m(end))

    def region(
        self,
        trigger: str,
        tags: Iterable[Tag],
        *,
        at_least_one: bool = False,
        stop_after_first: bool = False,
    ) -> Format:
        """Free text in which ``trigger`` starts one of ``tags`` (each begins with it):
        :class:`TokenTriggeredTags` for a token trigger, :class:`TriggeredTags` for text."""
        tags = list(tags)
        excludes = self.spelled(but=[trigger])
        if self.kind(trigger) == "token":
            return TokenTriggeredTags(
                trigger_tokens=[trigger],
                tags=tags,
                exclude_tokens=excludes,
                at_least_one=at_least_one,
                stop_after_first=stop_after_first,
            )
        return TriggeredTags(
            triggers=[trigger],
            tags=tags,
            excludes=excludes,
            at_least_one=at_least_one,
            stop_after_first=stop_after_first,
        )

    def text(self, *extra: str, max_tokens: int | None = None) -> AnyText:
        """Free text holding no marker (nor ``extra``)."""
        return AnyText(excludes=self.spelled(*extra), max_tokens=max_tokens)
