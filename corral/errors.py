"""The exception hierarchy of corral.

Every error corral raises on purpose derives from :class:`CorralError`. Errors caused by
bad input (a malformed grammar, an unsupported feature, a wrong tensor shape) also derive
from :class:`ValueError`, so callers that already catch ``ValueError`` keep working.

"Invalid" and "unsupported" are different classes: a :class:`GrammarError` means the input
is not a well-formed grammar or regex; an :class:`UnsupportedFeatureError` means it is
well-formed but uses a construct corral cannot enforce exactly (corral refuses rather than
silently widening the language).

This module imports nothing from the rest of the package.
"""

from __future__ import annotations

__all__ = [
    "CacheWarning",
    "CompileBudgetError",
    "CorralError",
    "EmptyLanguageError",
    "GrammarError",
    "MatcherStateError",
    "TokenRejectedError",
    "TokenizerError",
    "UnsupportedFeatureError",
    "caret_snippet",
]


def caret_snippet(text: str, line: int, column: int, *, span: int = 1) -> str:
    """Return the source line ``line`` (1-based) of ``text`` with a caret under ``column``.

    ``column`` is 1-based. Long lines are cut around the column so the snippet stays short.
    """
    lines = text.splitlines() or [""]
    if not 1 <= line <= len(lines):
        return ""
    src = lines[line - 1].expandtabs(1)
    col = max(1, column)
    start = 0
    if len(src) > 100:
        start = max(0, col - 50)
        src = src[start : start + 100]
    return f"{src}\n{' ' * (col - 1 - start)}{'^' * max(1, span)}"


class CorralError(Exception):
    """Root of every error corral raises on purpose."""


class GrammarError(CorralError, ValueError):
    """A grammar or regular expression is malformed or inconsistent.

    Attributes:
        line, column: 1-based position in the grammar text, or ``None`` when unknown.
        snippet: the offending source line with a caret under the position (may be empty).
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        snippet: str = "",
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.snippet = snippet
        where = f" (line {line}, column {column})" if line is not None else ""
        text = f"{message}{where}"
        if snippet:
            text = f"{text}\n{snippet}"
        super().__init__(text)


class EmptyLanguageError(GrammarError):
    """The grammar (or regex) accepts no string at all, so nothing could ever be generated."""


class UnsupportedFeatureError(CorralError, ValueError):
    """Well-formed input that uses a construct corral cannot enforce exactly.

    Attributes:
        feature: the construct, e.g. ``"lookbehind assertion (?<!...)"`` or ``"uniqueItems"``.
        location: where it occurs: a JSON pointer, or ``"line L, column C"``, or a terminal name.
    """

    def __init__(self, feature: str, *, location: str = "", detail: str = "") -> None:
        self.feature = feature
        self.location = location
        self.detail = detail
        text = f"unsupported: {feature}"
        if location:
            text += f" at {location}"
        if detail:
            text += f": {detail}"
        super().__init__(text)


class CompileBudgetError(CorralError):
    """Compilation would exceed a configured budget (automaton states, time, memory)."""


class TokenizerError(CorralError, ValueError):
    """A tokenizer cannot be turned into an exact byte-level vocabulary, or does not match."""


class TokenRejectedError(CorralError, ValueError):
    """A token was offered to a matcher that the grammar does not allow at this point.

    The matcher's state is left exactly as it was before the call.
    """

    def __init__(self, token_id: int, message: str = "") -> None:
        self.token_id = token_id
        super().__init__(message or f"token {token_id} is not allowed by the grammar here")


class MatcherStateError(CorralError, ValueError):
    """An operation is invalid in the matcher's current state (e.g. rolling back too far)."""


class IncompleteGenerationError(CorralError):
    """Generation stopped (token budget spent) before the output was complete.

    The partial output is never returned as if it were valid; it is kept here.

    Attributes:
        partial_text: the text generated so far (a prefix of some valid output).
        token_ids: the generated token ids.
    """

    def __init__(self, message: str, *, partial_text: str, token_ids: list[int]) -> None:
        self.partial_text = partial_text
        self.token_ids = token_ids
        super().__init__(f"{message}; partial output: {partial_text[:200]!r}")


class ValidationFailedError(CorralError):
    """A complete output failed the final validation (a bug if it ever happens: the
    grammar and final check enforce the schema). Carries the text."""

    def __init__(self, message: str, *, text: str) -> None:
        self.text = text
        super().__init__(f"{message}: {text[:200]!r}")


class CacheWarning(RuntimeWarning):
    """A token cache file on disk was rejected (damaged, edited, or written for another
    grammar, vocabulary, format or corral version) or could not be written.

    The file is never trusted: its caches are built again, so what is allowed does not
    change. Not an error: compilation goes on.

    Attributes:
        path: the file.
        reason: why it was rejected or not written.
    """

    def __init__(self, message: str, *, path: str = "", reason: str = "") -> None:
        self.path = path
        self.reason = reason
        super().__init__(message)
