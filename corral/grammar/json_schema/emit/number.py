"""Numbers: ``type`` ``integer``/``number`` with ``minimum``/``maximum`` (exclusive or
not, in the draft's spelling) and ``multipleOf``, as one digit-level terminal."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ....errors import CompileBudgetError
from ...regex import ByteDFA
from ...regex.dfa import intersect
from ..load import pointer_join

if TYPE_CHECKING:
    from ..translate import Translator

__all__ = ["bounds", "emit_number"]


def emit_number(b: Translator, s: dict[str, Any], ptr: str, *, integer: bool) -> str | None:
    """The terminal of the numbers (``integer``: the integers) schema ``s`` (at ``ptr``)
    allows, or ``None`` when there is none."""
    from .. import numbers as nb

    lo, lo_x, hi, hi_x = bounds(s, b.loaded.draft)
    for kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if kw in s:
            b.findings.exact(pointer_join(ptr, kw), kw)
    mult = s.get("multipleOf")
    key = f"num:{integer}:{lo}:{lo_x}:{hi}:{hi_x}:{mult}"
    where = f"number at {ptr or '/'}"

    def make() -> ByteDFA:
        if integer:
            ilo = None if lo is None else _int_lo(lo, lo_x)
            ihi = None if hi is None else _int_hi(hi, hi_x)
            d = nb.integer_dfa(ilo, ihi)
        else:
            d = nb.number_dfa(
                lo, hi, exclusive_minimum=lo_x, exclusive_maximum=hi_x,
                max_states=b.opt.max_states,
            )  # fmt: skip
        if mult is not None:
            m = nb.multiple_of_dfa(Decimal(str(mult)), integer=integer, max_states=b.opt.max_states)
            d = intersect(d, m, max_states=b.opt.max_states, where=where)
        return d

    hint = "INT" if integer else "NUM"
    if mult is not None:
        m_ptr = pointer_join(ptr, "multipleOf")
        try:
            name = b.term(key, make, where, hint)
        except CompileBudgetError:
            b.findings.needs_check(m_ptr, "multipleOf", "its automaton exceeds max_states")
            mult = None
            key = f"num:{integer}:{lo}:{lo_x}:{hi}:{hi_x}:None"
            name = b.term(key, make, where, hint)
        else:
            b.findings.exact(m_ptr, "multipleOf")
    else:
        name = b.term(key, make, where, hint)
    if name is None:
        kind = "integer" if integer else "number"
        lower = "" if lo is None else f"{'>' if lo_x else '>='} {lo}"
        upper = "" if hi is None else f"{'<' if hi_x else '<='} {hi}"
        rng = " and ".join(x for x in (lower, upper) if x)
        also = f", a multiple of {mult}" if mult is not None else ""
        b.empty(ptr, f"no {kind} is {rng}{also}")
    return name


def bounds(s: dict[str, Any], draft: str) -> tuple[Decimal | None, bool, Decimal | None, bool]:
    """``(low, low exclusive, high, high exclusive)`` of schema ``s`` in ``draft`` (draft
    4 spells exclusivity as booleans; later drafts as bounds, the tighter one wins)."""

    def dec(v: Any) -> Decimal:
        return Decimal(str(v)) if not isinstance(v, int) or isinstance(v, bool) else Decimal(v)

    lo = dec(s["minimum"]) if "minimum" in s else None
    hi = dec(s["maximum"]) if "maximum" in s else None
    lo_x = hi_x = False
    if draft == "4":
        lo_x = bool(s.get("exclusiveMinimum", False)) and lo is not None
        hi_x = bool(s.get("exclusiveMaximum", False)) and hi is not None
    else:
        if "exclusiveMinimum" in s:
            x = dec(s["exclusiveMinimum"])
            if lo is None or x >= lo:
                lo, lo_x = x, True
        if "exclusiveMaximum" in s:
            x = dec(s["exclusiveMaximum"])
            if hi is None or x <= hi:
                hi, hi_x = x, True
    return lo, lo_x, hi, hi_x


def _int_lo(lo: Decimal, exclusive: bool) -> int:
    c = math.ceil(lo)
    return c + 1 if exclusive and c == lo else c


def _int_hi(hi: Decimal, exclusive: bool) -> int:
    f = math.floor(hi)
    return f - 1 if exclusive and f == hi else f
