"""The exception hierarchy of corral.

Every error corral raises on purpose derives from :class:`CorralError`. Misuse of the API
is refused with a subclass that also derives from the builtin a Python programmer expects,
and its message gives the expected and the actual value: :class:`InvalidArgumentError`
(a ``ValueError``: a wrong size, index, count or option) and its :class:`ShapeError` (a
tensor of the wrong shape, dtype, device, layout, rows or width),
:class:`ArgumentTypeError` (a ``TypeError``), and :class:`VocabularyMismatchError` (a
:class:`TokenizerError`: a grammar, matcher or bitmask used with another vocabulary).
Errors caused by bad input (a malformed grammar, an unsupported feature) also derive from
:class:`ValueError`, so ``except ValueError`` and ``except TypeError`` keep working.

"Invalid" and "unsupported" are different classes: a :class:`GrammarError` means the input
is not a well-formed grammar or regex; an :class:`UnsupportedFeatureError` means it is
well-formed but uses a construct corral cannot enforce exactly (corral refuses rather than
silently widening the language).

Errors with a position in the input carry it as ``.location``, a :class:`Location` (line,
column and snippet in a grammar or regex text; JSON pointer in a schema).

This module imports nothing from the rest of the package.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = [
    "ArgumentTypeError",
    "CacheWarning",
    "CompileBudgetError",
    "CorralError",
    "EmptyLanguageError",
    "GrammarError",
    "InvalidArgumentError",
    "Location",
    "MatcherStateError",
    "MonitorError",
    "ShapeError",
    "TokenRejectedError",
    "TokenizerError",
    "UnsupportedFeatureError",
    "VocabularyMismatchError",
    "caret_snippet",
    "refusing_raw_errors",
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


class Location(str):
    """Where in the input an error is: a line and column of a grammar or regex text, a
    JSON pointer into a schema, and the source line with a caret under the position;
    each part optional, the object immutable.

    A ``Location`` is also the text an error message shows for it (``"line 3, column
    5"``, ``"/properties/a/format"``, ``"terminal NAME (line 2, column 1)"``), so it
    compares, formats and searches like that string; equality is the text's (the parts
    are not compared).

    Attributes:
        line, column: 1-based position in the text, or ``None``.
        pointer: the JSON pointer of the schema keyword (below a reference into another
            resource, the reference), or ``None``.
        snippet: the offending source line with a caret under the position (may be empty).
    """

    line: int | None
    column: int | None
    pointer: str | None
    snippet: str

    def __new__(
        cls,
        text: str | None = None,
        *,
        line: int | None = None,
        column: int | None = None,
        pointer: str | None = None,
        snippet: str = "",
    ) -> Location:
        """``text``: how messages name the place; by default the pointer, or ``"line L,
        column C"`` (``"column C"`` without a line)."""
        if text is None:
            if pointer is not None:
                text = pointer
            elif line is not None:
                text = f"line {line}, column {column}"
            elif column is not None:
                text = f"column {column}"
            else:
                text = ""
        self = super().__new__(cls, text)
        for name, value in (
            ("line", line),
            ("column", column),
            ("pointer", pointer),
            ("snippet", snippet),
        ):
            object.__setattr__(self, name, value)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a Location is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("a Location is immutable")

    def __repr__(self) -> str:
        parts = [repr(str(self))]
        for name in ("line", "column", "pointer"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value!r}")
        if self.snippet:
            parts.append(f"snippet={self.snippet!r}")
        return f"Location({', '.join(parts)})"


class CorralError(Exception):
    """Root of every error corral raises on purpose.

    Attributes:
        location: where in the input the error is (:class:`Location`), or ``None`` for
            errors that have no position.
    """

    location: Location | None = None

    def __reduce__(self) -> tuple[object, ...]:
        # Exception pickles as cls(*args), which subclasses that build their message in
        # __init__ would wrap again; rebuild from the message and the attributes instead,
        # so errors cross process boundaries (worker pools) unchanged.
        return (_rebuild_error, (type(self), self.args, self.__dict__))


def _rebuild_error(
    cls: type[CorralError], args: tuple[object, ...], state: dict[str, object]
) -> CorralError:
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class GrammarError(CorralError, ValueError):
    """A grammar or regular expression is malformed or inconsistent.

    Attributes:
        location: where (:class:`Location`: line/column and snippet in the grammar or
            regex text, or a schema's JSON pointer), or ``None`` when unknown.
        line, column: 1-based position in the grammar text, or ``None`` when unknown
            (read from ``location``).
        snippet: the offending source line with a caret under the position (may be empty).
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        snippet: str = "",
        location: Location | None = None,
    ) -> None:
        """Give the position either as ``location`` or as ``line``/``column``/``snippet``
        (not both)."""
        if location is None and (line is not None or column is not None or snippet):
            location = Location(line=line, column=column, snippet=snippet)
        elif location is not None and (line is not None or column is not None or snippet):
            raise ArgumentTypeError(
                "give either location or line/column/snippet, not both: got location="
                f"{location!r} and line={line!r}, column={column!r}, snippet={snippet!r}"
            )
        self.message = message
        self.location = location
        where = f" (line {self.line}, column {self.column})" if self.line is not None else ""
        text = f"{message}{where}"
        if self.snippet:
            text = f"{text}\n{self.snippet}"
        super().__init__(text)

    @property
    def line(self) -> int | None:
        return None if self.location is None else self.location.line

    @property
    def column(self) -> int | None:
        return None if self.location is None else self.location.column

    @property
    def snippet(self) -> str:
        return "" if self.location is None else self.location.snippet


class EmptyLanguageError(GrammarError):
    """The grammar (or regex) accepts no string at all, so nothing could ever be generated."""


class UnsupportedFeatureError(CorralError, ValueError):
    """Well-formed input that uses a construct corral cannot enforce exactly.

    Attributes:
        feature: the construct, e.g. ``"lookbehind assertion (?<!...)"`` or ``"uniqueItems"``.
        location: where it occurs (:class:`Location`, also the text the message shows: a
            JSON pointer, ``"line L, column C"``, a terminal name...); empty when unknown.
    """

    location: Location

    def __init__(self, feature: str, *, location: str | Location = "", detail: str = "") -> None:
        self.feature = feature
        self.location = location if isinstance(location, Location) else Location(location)
        self.detail = detail
        text = f"unsupported: {feature}"
        if self.location:
            text += f" at {self.location}"
        if detail:
            text += f": {detail}"
        super().__init__(text)


class CompileBudgetError(CorralError):
    """Compilation would exceed a configured budget (automaton states, time, memory)."""


class InvalidArgumentError(CorralError, ValueError):
    """An argument has a wrong value: a size, an index, a negative count, an option out of
    range. The message gives the expected and the actual value."""


class ShapeError(InvalidArgumentError):
    """A tensor or array has the wrong shape, dtype, device, memory layout, row count or
    width (bitmasks, logits, token-id batches). The message gives the expected and the
    actual one, e.g. ``bitmask must be int32 [batch, ceil(vocab_size/32)] = [2, 4009], got
    int64 [2, 4009]``."""


class ArgumentTypeError(CorralError, TypeError):
    """An argument of the wrong type: a list where a tensor is needed, a ``str`` where an
    ``int`` is needed, a ``bool`` passed as an ``int``. The message names the expected type
    and the value given."""


class TokenizerError(CorralError, ValueError):
    """A tokenizer cannot be turned into an exact byte-level vocabulary, or does not match."""


class VocabularyMismatchError(TokenizerError):
    """A compiled grammar, matcher or bitmask is used with another vocabulary (another
    tokenizer, or logits narrower than the vocabulary the grammar was compiled for)."""


class TokenRejectedError(CorralError, ValueError):
    """A token was offered to a matcher that the grammar does not allow at this point.

    The matcher's state is left exactly as it was before the call.
    """

    def __init__(self, token_id: int, message: str = "") -> None:
        self.token_id = token_id
        super().__init__(message or f"token {token_id} is not allowed by the grammar here")


class MatcherStateError(CorralError, ValueError):
    """An operation is invalid in the matcher's current state (e.g. rolling back too far)."""


class PromptTooLongError(CorralError, ValueError):
    """A prompt leaves the model no room for output: it has at least as many tokens as the
    model's context (``max_position_embeddings`` of its config)."""


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


class MonitorError(CorralError):
    """A monitor could not say what may come where its trigger fired: its callback raised
    (the original error is the ``__cause__``), ran past its timeout, returned something
    that is not a constraint, or returned no names with ``on_empty="refuse"``; or what it
    allowed cannot follow the text under the generation's own constraint. The generation
    fails: it never goes on unconstrained where a monitor should have constrained it.
    Carries the monitor's name and the text where it fired."""

    def __init__(self, message: str, *, monitor: str, text: str) -> None:
        self.monitor = monitor
        self.text = text
        super().__init__(f"monitor {monitor!r}: {message} (after {text[-80:]!r})")


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


@contextlib.contextmanager
def refusing_raw_errors(what: str) -> Iterator[None]:
    """Let only corral's errors (and ``TypeError``, an argument of the wrong type) out of
    building ``what`` (e.g. ``"the JSON Schema"``).

    The front ends check what they know to check, with positions; this is the net under
    them, so that a caller never has to catch Python's own exceptions: exhausting the
    recursion limit or memory becomes a :class:`CompileBudgetError`; a ``ValueError``,
    ``ArithmeticError``, ``UnicodeError`` or ``OSError`` (a file an ``%import`` names,
    say) becomes a :class:`GrammarError` with the original message.
    """
    try:
        yield
    except CorralError:
        raise
    except RecursionError:
        raise CompileBudgetError(
            f"{what} nests too deeply to compile (beyond Python's recursion limit)"
        ) from None
    except MemoryError:
        raise CompileBudgetError(f"{what} needs more memory than there is to compile") from None
    except (ValueError, ArithmeticError, UnicodeError, OSError) as e:
        raise GrammarError(f"{what}: {type(e).__name__}: {e}") from e
