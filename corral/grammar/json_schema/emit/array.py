"""Arrays: ``prefixItems``/``items``/``additionalItems``, ``minItems``/``maxItems``,
``contains`` (with ``minContains``/``maxContains``) and ``uniqueItems``.

Items are a chain of nonterminals counting positions up to where they are alike, then a
counted repetition of the items alike (``repeat.py``: rules logarithmic in the bounds); the
grammar counts ``contains`` hits when it can, and writes arrays of distinct items from a
small finite set of values exactly (states are the sets written so far). What it cannot
count is left to the final check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....errors import CompileBudgetError
from ..findings import ANNOTATION, EXACT
from ..keywords import ANNOTATIONS
from ..load import pointer_join
from ..repeat import CHAIN_MAX, HitCounts, repeat
from ..value_sets import distinct_choice_possible, finite_values, surely_empty
from .enum import emit_const
from .object import MAX_COUNT_STATES

if TYPE_CHECKING:
    from ..translate import Translator

__all__ = ["MAX_REQUIRED_ITEMS", "UNIQUE_MAX_VALUES", "emit_array"]

# Arrays of distinct items from at most this many values are compiled exactly (2^n states).
UNIQUE_MAX_VALUES = 8

# More items alike than an array must hold is refused: no generated document holds them
# (each item takes at least two bytes), though the grammar counts them in a few rules.
MAX_REQUIRED_ITEMS = 1 << 31


def emit_array(b: Translator, s: dict[str, Any], ptr: str, resolver: Any) -> str | None:
    """The nonterminal of the arrays schema ``s`` (at ``ptr``; references resolve from
    ``resolver``) allows, or ``None`` when there is none (too few possible items,
    ``contains`` or ``uniqueItems`` that no array satisfies)."""
    draft = b.loaded.draft
    prefix: list[Any] = []
    rest: Any = True
    prefix_kw = "prefixItems"
    if draft in ("2020-12",):
        prefix = list(s.get("prefixItems", []))
        rest = s.get("items", True)
    else:
        items = s.get("items", True)
        if isinstance(items, list):
            prefix, prefix_kw = items, "items"
            rest = s.get("additionalItems", True)
        else:
            rest = items
    for kw in ("prefixItems", "items", "additionalItems", "minItems", "maxItems"):
        if kw in s:
            b.findings.exact(pointer_join(ptr, kw), kw)
    lo = int(s.get("minItems", 0))
    hi = s.get("maxItems")
    hi = None if hi is None else int(hi)
    contains = _contains(b, s, ptr, resolver)
    if contains is None:
        return None
    least, c_sub, c_resolver = contains
    lo = max(lo, least)  # implied by contains: the grammar can say it
    n = len(prefix)
    rest_ptr = pointer_join(ptr, "items" if prefix_kw == "prefixItems" else "additionalItems")
    if s.get("uniqueItems") is True:
        values = _unique_values(b, prefix, rest, lo, ptr, resolver)
        if values is None:
            return None
        if values:
            if n == 0 and len(values) <= UNIQUE_MAX_VALUES:
                b.findings.exact(pointer_join(ptr, "uniqueItems"), "uniqueItems")
                if c_sub is not None:
                    _contains_checked(b, s, ptr, "with uniqueItems")
                return _unique_array(b, values, lo, hi)
            # distinct items from a finite set: the set's size bounds the length
            hi = n + len(values) if hi is None else min(hi, n + len(values))
        b.findings.needs_check(pointer_join(ptr, "uniqueItems"), "uniqueItems")
    elif "uniqueItems" in s:
        b.findings.exact(pointer_join(ptr, "uniqueItems"), "uniqueItems", "false: no effect")
    prefix_syms = [
        b.value(x, pointer_join(ptr, prefix_kw, i), resolver) for i, x in enumerate(prefix)
    ]
    rest_sym = b.value(rest, rest_ptr, resolver)
    # longest possible array
    cap = hi
    for i, sym in enumerate(prefix_syms):
        if sym is None:
            cap = i if cap is None else min(cap, i)
            break
    if rest_sym is None:
        cap = n if cap is None else min(cap, n)
    if cap is not None and cap < lo:
        return None
    if c_sub is not None:
        hit = _contains_hit(b, s, ptr, c_resolver, rest, c_sub, n, lo, cap, least)
        if hit is False:
            return None
        if isinstance(hit, str):
            return _contains_array(b, rest_sym, hit, lo, cap, least)
    if lo - n > MAX_REQUIRED_ITEMS:
        kw = "minItems" if int(s.get("minItems", 0)) >= lo else "minContains"
        raise CompileBudgetError(
            f"{pointer_join(ptr, kw)}: {lo} required items: more than any document "
            f"generated can hold (at most {MAX_REQUIRED_ITEMS})"
        )
    comma = b.punct(",")
    # the prefix items, one rule each; then the items alike, counted (repeat.py)
    names = [b.fresh("a") for _ in range(n + 1)]
    for i in range(n):
        if cap is not None and i >= cap:
            b.add(names[i])  # cap >= lo: the array may end here
            break
        if i >= lo:
            b.add(names[i])
        sym = prefix_syms[i]
        if sym is not None:
            b.add(names[i], *([comma] if i else []), sym, names[i + 1])
    tail = names[n]
    more = None if cap is None else cap - n  # the most items alike after the prefix
    if more is not None and more < 0:
        pass  # the array ends within the prefix: nothing reaches the tail
    elif rest_sym is None or more == 0:
        b.add(tail)
    else:
        need = max(lo - n, 0)
        unit = (comma, rest_sym)
        if n == 0:  # the first item has no comma before it
            if need == 0:
                b.add(tail)
            later = None if more is None else more - 1
            b.add(tail, rest_sym, repeat(b, unit, max(need - 1, 0), later))
        else:
            b.add(tail, repeat(b, unit, need, more))
    return b.seq("arr", b.punct("["), names[0], b.punct("]"))


def _contains(
    b: Translator, s: dict[str, Any], ptr: str, resolver: Any
) -> tuple[int, Any, Any] | None:
    """``(least, sub, resolver)``: the fewest items ``contains`` implies and its
    (dereferenced) subschema with its resolver (``(0, None, None)``: no effect), or
    ``None`` when no array satisfies it."""
    modern = b.loaded.draft in ("2019-09", "2020-12")
    if not modern:
        for kw in ("minContains", "maxContains"):
            if kw in s:
                b.findings.note(
                    pointer_join(ptr, kw), kw, ANNOTATION, "not a keyword of this draft"
                )
    if "contains" not in s or b.loaded.draft == "4":
        for kw in ("contains", "minContains", "maxContains"):
            if kw in s and modern:
                b.findings.note(pointer_join(ptr, kw), kw, ANNOTATION, "no effect without contains")
        return 0, None, None
    least = int(s.get("minContains", 1)) if modern else 1
    most = s.get("maxContains") if modern else None
    c_ptr = pointer_join(ptr, "contains")
    sub, sub_resolver, _ = b.deref(s["contains"], c_ptr, resolver)
    if (most is not None and least > int(most)) or (least and surely_empty(sub, ANNOTATIONS)):
        b.findings.exact(c_ptr, "contains", "no array satisfies it")
        return None
    if least == 0 and most is None:
        for kw in ("contains", "minContains"):
            b.findings.exact(pointer_join(ptr, kw), kw, "minContains 0: no effect")
        return 0, None, None
    return least, sub, sub_resolver


def _contains_hit(
    b: Translator,
    s: dict[str, Any],
    ptr: str,
    resolver: Any,
    rest: Any,
    c_sub: Any,
    n: int,
    lo: int,
    cap: int | None,
    least: int,
) -> str | bool | None:
    """The symbol of an item that satisfies both ``items`` and ``contains``
    (``resolver``: the scope of ``c_sub``), when the
    grammar can count such items exactly (no prefix items, no ``maxContains``, few
    enough states); ``False`` when no item can; ``None`` (after noting the final
    check) otherwise."""
    c_ptr = pointer_join(ptr, "contains")
    top = cap if cap is not None else max(lo, 1)
    if top > CHAIN_MAX:  # _contains_counted: blocks of 2^j items split by their hits
        states = (least + 1) ** 2 * (top.bit_length() + 2 * CHAIN_MAX)
    else:  # _contains_array's chain
        states = (top + 1) * (least + 1)
    if (
        n
        or "maxContains" in s
        or states > MAX_COUNT_STATES
        or s.get("uniqueItems") is True
        or (isinstance(rest, dict) and "$ref" in rest)  # merged only in its own scope
    ):
        _contains_checked(b, s, ptr, "")
        return None
    both = b.merge(rest if rest is not True else {}, c_sub, c_ptr, resolver)
    if both is None:
        _contains_checked(b, s, ptr, "not merged with items")
        return None
    sym = None if both is False else b.value(both, c_ptr, resolver)
    for kw in ("contains", "minContains"):
        if kw in s:
            b.findings.exact(pointer_join(ptr, kw), kw)
    return False if sym is None else sym


def _contains_checked(b: Translator, s: dict[str, Any], ptr: str, detail: str) -> None:
    for kw in ("contains", "minContains", "maxContains"):
        if kw in s:
            b.findings.needs_check(pointer_join(ptr, kw), kw, detail)


def _contains_array(
    b: Translator, item: str | None, hit: str, lo: int, cap: int | None, least: int
) -> str:
    """Arrays of ``lo`` to ``cap`` items, each an ``item`` or a ``hit``, at least
    ``least`` of them hits: nonterminals count the items (up to ``max(lo, 1)`` when there
    is no cap) and the hits (up to ``least``); beyond ``CHAIN_MAX`` items, blocks of items
    split by their hits (:func:`_contains_counted`).

    ``L[i][c]`` is the first ``i`` items, ``c`` of them hits, read left to right
    (``L[i+1][c'] -> L[i][c] , unit``), so that every item of the array keeps the origin
    where the array starts. Read right to left (the rest of the array after ``i``
    items), a hit value that may be the one counted started its own rest of the array:
    with every item a hit, one more Earley item per item so far (670 µs a mask, 934 µs a
    consume after 300 such items), where now each item costs the same."""
    top = cap if cap is not None else max(lo, 1)
    if top > CHAIN_MAX:
        return _contains_counted(b, item, hit, lo, cap, least)
    comma = b.punct(",")
    L = [[b.fresh("ct") for _ in range(least + 1)] for _ in range(top + 1)]
    b.add(L[0][0])
    for i in range(top + 1):
        if i == top and cap is not None:
            break
        nxt = min(i + 1, top)  # without a cap, L[top] is "top items or more"
        sep = [comma] if i else []
        for c in range(min(i, least) + 1):
            if item is not None:
                b.add(L[nxt][c], L[i][c], *sep, item)
            b.add(L[nxt][min(c + 1, least)], L[i][c], *sep, hit)
    arr = b.fresh("arr")
    lb, rb = b.punct("["), b.punct("]")
    for i in range(max(lo, least), top + 1):
        b.add(arr, lb, L[i][least], rb)
    return arr


def _contains_counted(
    b: Translator, item: str | None, hit: str, lo: int, cap: int | None, least: int
) -> str:
    """:func:`_contains_array` for counts beyond ``CHAIN_MAX``: the items after the first
    in rules logarithmic in the bounds (``repeat.py``). The chain of one nonterminal per
    count was right-recursive: item ``i`` completed ``i`` rules (577 µs a consume at item
    900 of 1,000)."""
    comma, lb, rb = b.punct(","), b.punct("["), b.punct("]")
    arr = b.fresh("arr")
    later = None if cap is None else cap - 1  # cap >= lo >= least >= 1
    if item is None:  # every item is a hit
        b.add(arr, lb, hit, repeat(b, (comma, hit), max(lo, least) - 1, later), rb)
        return arr
    counts = HitCounts(b, (comma, item), (comma, hit), least)
    b.add(arr, lb, item, counts.of(max(lo - 1, 0), later), rb)
    b.add(arr, lb, hit, counts.of(max(lo - 1, 0), later, need=least - 1), rb)
    return arr


def _unique_values(
    b: Translator, prefix: list[Any], rest: Any, lo: int, ptr: str, resolver: Any
) -> list[Any] | None:
    """For ``uniqueItems``: the finite set of values the items after the prefix may take
    (``[]``: not finite), or ``None`` when no array of at least ``lo`` distinct items
    exists (each position choosing from its finite set, when it has one)."""
    rest_s, _, _ = b.deref(rest, ptr, resolver)
    values = finite_values(rest_s, ANNOTATIONS)
    choices: list[list[Any]] = []
    for item in prefix[:lo]:
        c = finite_values(b.deref(item, ptr, resolver)[0], ANNOTATIONS)
        if c is not None:
            choices.append(c)
    after = lo - len(prefix)  # required items beyond the prefix
    if values is not None and after > 0:
        # more required items than distinct values: no matching can place them
        choices += [values] * after if after <= len(values) else [[]]
    if not distinct_choice_possible(choices):
        b.findings.note(
            pointer_join(ptr, "uniqueItems"),
            "uniqueItems",
            EXACT,
            "no array has distinct items",
        )
        return None
    return values or []


def _unique_array(b: Translator, values: list[Any], lo: int, hi: int | None) -> str:
    """Arrays of distinct items from ``values`` (at most :data:`UNIQUE_MAX_VALUES`),
    ``lo`` to ``hi`` of them: states are the sets of values written so far."""
    syms = [emit_const(b, v) for v in values]
    comma = b.punct(",")
    k = len(values)
    names = [b.fresh("uq") for _ in range(1 << k)]
    for mask in range(1 << k):
        count = mask.bit_count()
        if count >= lo and (hi is None or count <= hi):
            b.add(names[mask])
        if hi is not None and count >= hi:
            continue
        for j in range(k):
            if not mask >> j & 1:
                sep = [comma] if mask else []
                b.add(names[mask], *sep, syms[j], names[mask | 1 << j])
    return b.seq("arr", b.punct("["), names[0], b.punct("]"))
