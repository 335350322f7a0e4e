"""Strings: ``minLength``/``maxLength``, ``pattern`` (ECMA-262) and ``format``, as one
terminal over the encoded bytes (see ``strings.py`` for the construction)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....errors import CompileBudgetError, Location, UnsupportedFeatureError
from ...regex import ByteDFA, ast
from ...regex.dfa import DeadlineError, WorkBudgetError, work_budget
from ..algebra import canonical
from ..findings import ANNOTATION
from ..load import pointer_join
from ..strings import MAX_EXACT_LENGTH, FormatLanguage, Language, constrained_string

if TYPE_CHECKING:
    from ..translate import Translator

__all__ = [
    "CHECKED_FORMATS",
    "REFUSED_FORMATS",
    "assertion_nodes",
    "emit_string",
    "pattern_node",
]

# Standard formats no regular language captures: checked on the complete document.
CHECKED_FORMATS = frozenset({"regex"})
REFUSED_FORMATS = {
    "idn-hostname": "IDNA 2008 rules (contextual and bidirectional) are not regular",
    "idn-email": "its domain is an idn-hostname (IDNA 2008 rules are not regular)",
}


def pattern_node(b: Translator, pattern: str, ptr: str, kw: str) -> ast.Node | None:
    """The search language of an ECMA-262 ``pattern`` (at ``ptr``), or ``None`` when it
    is not regular (or too large to expand): keyword ``kw`` is then left to the final
    check, which evaluates the pattern with ECMA-262 semantics.

    Raises:
        GrammarError: a malformed pattern.
        UnsupportedFeatureError: a construct corral neither compiles nor evaluates.
    """
    from ..ecma import EcmaPattern

    compiled = EcmaPattern(pattern, where=ptr)
    if compiled.irregular is None:
        return compiled.search_node()
    err = compiled.irregular
    reason = (
        f"{err.feature} is not regular"
        if isinstance(err, UnsupportedFeatureError)
        else "too many counted repetitions to expand"
    )
    b.findings.needs_check(ptr, kw, reason)
    return None


def assertion_nodes(
    b: Translator, s: dict[str, Any], ptr: str, *, beside: str | None = None
) -> list[tuple[Language, str]]:
    """The decoded-string languages of the ``pattern`` and ``format`` of ``s`` (at
    ``ptr``), each with its pointer, their findings noted as exact.

    A pattern that is not regular and the ``format`` values a grammar cannot express are
    left to the final check; ``beside`` (a keyword such as ``x-corral-span``, whose
    automaton the languages will restrict) refuses them instead, since a string the
    grammar allowed could then fail the check with no way out.

    Raises:
        UnsupportedFeatureError: a refused format, or (with ``beside``) one of the above.
    """
    nodes: list[tuple[Language, str]] = []

    def refuse(kw: str, where: str, why: str) -> None:
        raise UnsupportedFeatureError(
            f"{kw} beside {beside}",
            location=Location(pointer=where),
            detail=f"{why}: the grammar could not keep a value from failing it",
        )

    if "pattern" in s:
        p_ptr = pointer_join(ptr, "pattern")
        node = pattern_node(b, s["pattern"], p_ptr, "pattern")
        if node is None and beside is not None:
            refuse("pattern", p_ptr, "the pattern is not a regular language")
        if node is not None:
            nodes.append((node, p_ptr))
            b.findings.exact(p_ptr, "pattern")
    fmt = s.get("format")
    if fmt is not None:
        from ..formats import format_regex

        f_ptr = pointer_join(ptr, "format")
        rx = format_regex(fmt)
        if fmt in REFUSED_FORMATS:
            raise UnsupportedFeatureError(
                f"format {fmt!r}", location=Location(pointer=f_ptr), detail=REFUSED_FORMATS[fmt]
            )
        if fmt in CHECKED_FORMATS:
            if beside is not None:
                refuse("format", f_ptr, f"format {fmt!r} is not a regular language")
            b.findings.needs_check(f_ptr, "format", f"format {fmt!r}")
        elif rx is None:
            b.findings.note(f_ptr, "format", ANNOTATION, f"unknown format {fmt!r}: not asserted")
        else:
            nodes.append((FormatLanguage(rx), f_ptr))
            b.findings.exact(f_ptr, "format")
    return nodes


def emit_string(b: Translator, s: dict[str, Any], ptr: str) -> str | None:
    """The terminal of the strings schema ``s`` (at ``ptr``) allows, or ``None`` when
    there is none. Patterns and formats whose automaton is too large (states or
    ``Options.pattern_budget`` steps) are left to the final check, remembered in
    ``b.too_large`` so that later uses do not try again."""
    lo = int(s.get("minLength", 0))
    hi = s.get("maxLength")
    hi = None if hi is None else int(hi)
    for kw in ("minLength", "maxLength"):
        if kw in s:
            b.findings.exact(pointer_join(ptr, kw), kw)
    if hi is not None and lo > hi:
        b.empty(pointer_join(ptr, "minLength"), f"minLength {lo} > maxLength {hi}")
        return None
    if lo > MAX_EXACT_LENGTH or (hi is not None and hi > MAX_EXACT_LENGTH):
        b.findings.needs_check(ptr, "maxLength" if hi is not None else "minLength",
                               f"length bounds above {MAX_EXACT_LENGTH} characters")  # fmt: skip
        lo = min(lo, MAX_EXACT_LENGTH)
        hi = None if hi is None or hi > MAX_EXACT_LENGTH else hi
    nodes = assertion_nodes(b, s, ptr)
    fmt = s.get("format")
    body_key = canonical([s.get("pattern"), fmt])
    key = f"str:{lo}:{hi}:{body_key}"
    lengths: list[bool] = []

    def make() -> ByteDFA:
        dfa, enforced = constrained_string(lo=lo, hi=hi, nodes=nodes, max_states=b.opt.max_states)
        lengths.append(enforced)
        return dfa

    try:
        if nodes and body_key in b.too_large:
            raise CompileBudgetError("known to be too large")
        with work_budget(b.opt.pattern_budget, "the string's automaton") as own:
            name = b.term(key, make, f"string at {ptr or '/'}", "STR")
    except CompileBudgetError as e:
        # too large for this string (its states or its own budget): the final check
        # enforces the pattern; the grammar's budget or deadline refuses the schema
        if (
            not nodes
            or isinstance(e, DeadlineError)
            or (isinstance(e, WorkBudgetError) and e.budget is not own)
        ):
            raise
        b.too_large.add(body_key)
        # the pattern/format automaton is too large: the final check enforces it
        for node_ptr in [w for _, w in nodes]:
            b.findings.needs_check(node_ptr, node_ptr.rsplit("/", 1)[-1], "automaton too large")
        nodes = []
        b.forget_term(key)
        lengths.clear()
        name = b.term(key + ":plain", make, f"string at {ptr or '/'}", "STR")
    if lengths and not lengths[0]:
        for kw in ("minLength", "maxLength"):
            if kw in s:
                b.findings.needs_check(pointer_join(ptr, kw), kw, "combined with pattern/format")
    return name
