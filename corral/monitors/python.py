"""A monitor of Python member access, backed by ``jedi``'s static analysis.

After ``expr.`` in generated code, the names ``jedi`` infers for ``expr`` in the context
of the whole file (the prompt and the code generated so far) and its imports are the only
ones that may follow, so a model cannot call a method that does not exist. Where ``jedi``
infers nothing (a float literal's dot, a dot in a comment or string, an object it cannot
resolve), the region is skipped and the text stays free.

What ``jedi`` infers is a lower bound on an object's members: Python objects also get
attributes it does not see (``__slots__``, ``setattr``, attributes assigned outside the
class, class attributes reached through ``cls``). So by default the names the file already
uses after the same name and a dot are allowed too (``file_attributes=True``: after
``cls.``, every ``cls.X`` of the file); without them, the monitor forbids correct code
wherever ``jedi``'s list is incomplete.

``pip install jedi`` (or ``corral[monitors]``).
"""

from __future__ import annotations

import io
import os
import tokenize
from collections.abc import Callable

from ..errors import InvalidArgumentError
from .monitor import Monitor, MonitorContext

__all__ = ["MEMBER_TRIGGER", "at_member_dot", "attribute_names", "python_members"]

MEMBER_TRIGGER = r"(?:[A-Za-z_][A-Za-z0-9_]*|[)\]])\."
"""A dot after a name or a closing bracket (not after a digit: ``1.5``)."""

# completions that name members (jedi's types); "path" (inside strings) and "keyword" are not
_MEMBER_TYPES = frozenset(
    {"module", "class", "instance", "function", "param", "property", "statement"}
)


def python_members(
    *,
    path: str | os.PathLike[str] | None = None,
    project: str | os.PathLike[str] | None = None,
    source: Callable[[MonitorContext], str] | None = None,
    timeout_s: float | None = 30.0,
    file_attributes: bool = True,
) -> Monitor:
    """A :class:`Monitor` that allows, after ``expr.``, the members ``jedi`` infers.

    Args:
        path: the file the code is written in (``jedi`` resolves relative imports and the
            project's modules from it).
        project: the project's root folder (default: found from ``path``).
        source: ``source(context) -> code``: the whole file up to the trigger (default:
            the prompt followed by the generated text).
        timeout_s: the monitor's timeout (``jedi``'s first call in a process loads its
            caches: seconds).
        file_attributes: also allow every name the code before the dot uses after the
            same name and a dot (``cls.X`` after ``cls.``; after a bracket, ``f().``,
            every name used after a dot), see the module; ``False``: only what ``jedi``
            infers.

    Raises:
        InvalidArgumentError: ``jedi`` is not installed.
    """
    try:
        import jedi
    except ImportError as e:
        raise InvalidArgumentError(
            "python_members() needs jedi: pip install jedi (or corral[monitors])"
        ) from e
    proj = jedi.Project(os.fspath(project)) if project is not None else None
    code_of = source or (lambda ctx: ctx.prompt + ctx.text)

    def allowed(ctx: MonitorContext) -> list[str] | None:
        code = code_of(ctx)
        toks, ok = _tokens(code)  # the whole file, tokenized once per call
        if not _ends_at_dot(toks, ok):
            return None  # a dot in a comment, a string or a number: not constrained
        lines = code.split("\n")
        script = jedi.Script(code, path=None if path is None else os.fspath(path), project=proj)
        found = script.complete(len(lines), len(lines[-1]))
        inferred = {c.name for c in found if c.type in _MEMBER_TYPES}
        if not inferred:
            return None  # nothing inferred: this dot is not constrained
        if file_attributes:
            inferred |= _names_after_dots(toks, _receiver(toks))
        return sorted(inferred)

    return Monitor(
        MEMBER_TRIGGER, allowed, name="python members", end="identifier", timeout_s=timeout_s
    )


def _tokens(code: str) -> tuple[list[tokenize.TokenInfo], bool]:
    """Python's tokens of ``code`` as far as it tokenizes, and whether it ended inside a
    string or failed (``False``: not code to constrain)."""
    toks: list[tokenize.TokenInfo] = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(code).readline):
            toks.append(t)
    except tokenize.TokenError as e:  # EOF inside a bracket (fine) or a string (not code)
        if "string" in str(e):
            return toks, False
    except SyntaxError:
        return toks, False
    return toks, True


def attribute_names(code: str, owner: str | None = None) -> set[str]:
    """Every name ``code`` uses right after a member-access dot (``x.name``), by Python's
    tokenizer (dots in strings, comments and numbers are not member accesses); with
    ``owner``, only after that name and a dot (``owner.name``)."""
    return _names_after_dots(_tokens(code)[0], owner)


def at_member_dot(code: str) -> bool:
    """Whether ``code`` ends with a member-access dot in Python code, by Python's own
    tokenizer: not in a comment, a string (closed or not) or a number (``1.``)."""
    return _ends_at_dot(*_tokens(code))


def _names_after_dots(toks: list[tokenize.TokenInfo], owner: str | None = None) -> set[str]:
    return {
        c.string
        for a, b, c in _triples(toks)
        if b.type == tokenize.OP
        and b.string == "."
        and c.type == tokenize.NAME
        and (owner is None or (a.type == tokenize.NAME and a.string == owner))
    }


def _triples(toks: list[tokenize.TokenInfo]) -> zip[tuple[tokenize.TokenInfo, ...]]:
    """Consecutive tokens in threes, line breaks inside brackets and comments left out."""
    code = [t for t in toks if t.type not in (tokenize.NL, tokenize.COMMENT)]
    return zip(code, code[1:], code[2:], strict=False)


def _receiver(toks: list[tokenize.TokenInfo]) -> str | None:
    """The name right before the final dot (``self`` in ``x = self.``), or ``None`` when a
    bracket is there (``f().``, ``a[0].``)."""
    skip = (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.DEDENT, tokenize.INDENT)
    real = [t for t in toks if t.type not in skip]
    return real[-2].string if len(real) >= 2 and real[-2].type == tokenize.NAME else None


def _ends_at_dot(toks: list[tokenize.TokenInfo], ok: bool) -> bool:
    if not ok:
        return False
    if any(t.type == tokenize.ERRORTOKEN and t.string in ("'", '"') for t in toks):
        return False  # an unterminated one-line string
    skip = (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.DEDENT, tokenize.INDENT)
    real = [t for t in toks if t.type not in skip]
    return bool(real) and real[-1].type == tokenize.OP and real[-1].string == "."
