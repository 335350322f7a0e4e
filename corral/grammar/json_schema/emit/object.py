"""Objects: ``properties``, ``required``, ``additionalProperties``,
``patternProperties``, ``propertyNames``, ``minProperties``/``maxProperties`` and
``dependentRequired`` (``dependencies`` with name lists).

Named properties come in schema order (or any order, ``Options.property_order``), each
a pair ``"name": value``; other names are keys automata (all names minus the listed
ones, split by pattern). States count the pairs written and, for ``dependentRequired``,
which of the names involved were written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...regex import ByteDFA, ast
from ...regex.charset import CharSet
from ...regex.dfa import (
    difference,
    difference_of_literals,
    intersect,
    shared_automata,
    union_of_literals,
)
from ..algebra import canonical
from ..findings import EXACT
from ..keywords import ANNOTATIONS
from ..load import pointer_join
from ..repeat import Repeat
from ..strings import FormatLanguage, Language, body_of_node, constrained_string
from .string import pattern_node

if TYPE_CHECKING:
    from ..translate import Translator

__all__ = ["MAX_COUNT_STATES", "MAX_DEPENDENT_NAMES", "emit_object", "key_dfa"]

# dependentRequired is compiled exactly when it involves at most this many declared names
# (the grammar tracks which of them were written).
MAX_DEPENDENT_NAMES = 8
# Objects whose property counts (minProperties/maxProperties) would need more grammar states
# than this are counted by the final check instead (so are arrays' contains hits).
MAX_COUNT_STATES = 20_000


def emit_object(b: Translator, s: dict[str, Any], ptr: str, resolver: Any) -> str | None:
    """The nonterminal of the objects schema ``s`` (at ``ptr``; references resolve from
    ``resolver``) allows, or ``None`` when there is none (a required property with no
    value, impossible property counts)."""
    props: dict[str, Any] = dict(s.get("properties", {}))
    required = list(dict.fromkeys(s.get("required", [])))
    pats: dict[str, Any] = dict(s.get("patternProperties", {}))
    if "additionalProperties" in s:
        addl = s["additionalProperties"]
    elif b.opt.additional_properties is False:
        addl = False
    else:
        addl = True
    for kw in ("properties", "required", "additionalProperties", "patternProperties"):
        if kw in s:
            b.findings.exact(pointer_join(ptr, kw), kw)
    if len(pats) > 1:
        b.findings.needs_check(pointer_join(ptr, "patternProperties"), "patternProperties",
                          "names matching several patterns")  # fmt: skip
    names_filter: ByteDFA | None = None
    if "propertyNames" in s:
        names_filter = key_filter(
            b, s["propertyNames"], pointer_join(ptr, "propertyNames"), resolver
        )

    pat_dfas: list[tuple[str, ByteDFA, Any]] = []
    for p, sub in pats.items():
        p_ptr = pointer_join(ptr, "patternProperties", p)
        node = pattern_node(b, p, p_ptr, "patternProperties")
        if node is None:
            # Which names it matches is unknown: other names take any value, and the
            # final check enforces the pattern's schema.
            addl = True
            continue
        pat_dfas.append((p, key_dfa(node, b.opt.max_states, p_ptr), sub))

    # the properties the grammar names, in order: listed ones, then required extras
    entries: list[tuple[str, Any, str, Any]] = []
    for k, sub in props.items():
        entries.append((k, sub, pointer_join(ptr, "properties", k), resolver))
    for k in required:
        if k not in props:
            matching = [sub for p, d, sub in pat_dfas if d.matches(canonical(k).encode())]
            sub = matching[0] if matching else addl
            entries.append((k, sub, pointer_join(ptr, "required"), resolver))
    # property schemas also get the patternProperties they match
    parts: list[tuple[str, str | None, bool]] = []  # (name, value symbol, required)
    for k, sub, k_ptr, res in entries:
        enc = canonical(k).encode()
        if names_filter is not None and not names_filter.matches(enc):
            sym = None
        else:
            for _p, d, psub in pat_dfas:
                if d.matches(enc) and k in props:
                    m = b.merge(sub, psub, k_ptr, res)
                    sub = m if m is not None else sub
            sym = b.value(sub, k_ptr, res)
        if sym is None and k in required:
            return None
        parts.append((k, sym, k in required))

    # additional properties: names not listed, by pattern or by additionalProperties
    listed = [canonical(k).encode() for k, _, _, _ in entries]
    extra: list[tuple[str, str]] = []  # (key terminal, value symbol)
    if addl is False and not pat_dfas:
        base_keys = ByteDFA.empty()  # no other names allowed
    else:
        base_keys = other_keys(b, listed, names_filter)
    others = base_keys
    for p, d, psub in pat_dfas:
        p_ptr = pointer_join(ptr, "patternProperties", p)
        kd = intersect(base_keys, d, max_states=b.opt.max_states)
        others = difference(others, d, max_states=b.opt.max_states)
        sym = b.value(psub, p_ptr, resolver)
        if sym is not None and kd.n_states:
            kname = b.term(b.fresh("key"), constant(kd), f"keys /{p}/", "KEY")
            if kname is not None:
                extra.append((kname, sym))
    if addl is not False:
        a_ptr = pointer_join(ptr, "additionalProperties")
        sym = b.value(addl, a_ptr, resolver)
        if sym is not None and others.n_states:
            kname = b.term(b.fresh("key"), constant(others), "other keys", "KEY")
            if kname is not None:
                extra.append((kname, sym))

    colon = b.punct(":")
    pair_syms: list[tuple[str | None, bool]] = []
    for k, sym, req in parts:
        if sym is None:
            pair_syms.append((None, False))
        else:
            pair_syms.append((b.seq("pair", b.lit(canonical(k)), colon, sym), req))
    extra_pair: str | None = None
    if extra:
        extra_pair = b.fresh("xpair")
        for kname, sym in extra:
            b.add(extra_pair, kname, colon, sym)
    named = [(p, r) for p, r in pair_syms if p is not None]
    any_order = b.opt.property_order == "any"
    if any_order and len(named) > b.opt.any_order_max_properties:
        any_order = False
        b.findings.note(pointer_join(ptr, "properties"), "properties", EXACT,
                  f"written in schema order: more than "
                  f"{b.opt.any_order_max_properties} properties")  # fmt: skip
    counts = _property_counts(b, s, ptr, named, extra_pair, len(pair_syms), any_order)
    if counts is None:
        return None
    room = MAX_COUNT_STATES // _count_states(len(pair_syms), counts[2], any_order)
    deps = _dependencies(b, s, ptr, [k for k, _, _ in parts], room)
    if any_order:
        return _any_order(b, pair_syms, extra_pair, counts, deps)
    return _schema_order(b, pair_syms, extra_pair, counts, deps)


def _count_states(n_props: int, top: int, any_order: bool) -> int:
    """How many counts of pairs the object's states keep, times its properties plus
    two: in schema order the additional pairs come last and are counted in blocks
    (``repeat.py``), so the states count only the named pairs; in any order they
    interleave, and every count up to ``top`` is a state."""
    return (n_props + 2) * ((top if any_order else min(top, n_props)) + 1)


def _schema_order(
    b: Translator,
    pair_syms: list[tuple[str | None, bool]],
    extra_pair: str | None,
    counts: tuple[int, int | None, int],
    deps: list[tuple[int, list[int]]],
) -> str:
    """An object whose named pairs come in schema order (``None``: that property cannot
    occur), then additional pairs. States ``(i, c, present)``: the named properties
    ``i..`` are still to come, ``c`` pairs were written (see :func:`_property_counts`),
    ``present`` is the set of properties written among those ``deps`` mention (each
    ``(trigger, dependents)``: if the trigger is present, so are its dependents). The
    additional pairs get no states: each state after the last named property takes the
    count the bounds leave as one counted repetition (``repeat.Repeat``, its blocks
    shared), so an object's rules grow with the logarithm of its bounds."""
    least, most, top = counts
    comma = b.punct(",")
    n = len(pair_syms)
    bit: dict[int, int] = {}  # property index -> bit in `present`
    for t, ds in deps:
        for i in (t, *ds):
            bit.setdefault(i, len(bit))
    need = [(1 << bit[t], sum(1 << bit[d] for d in ds)) for t, ds in deps]

    def complete(present: int) -> bool:
        return all(not present & t or present & d == d for t, d in need)

    names: dict[tuple[int, int, int], str] = {}

    def state(key: tuple[int, int, int]) -> str:
        if key not in names:
            names[key] = b.fresh("o")
            todo.append(key)
        return names[key]

    todo: list[tuple[int, int, int]] = []
    extras: Repeat | None = None  # the additional pairs' blocks, shared by every state
    start = state((0, 0, 0))
    while todo:
        i, c, present = key = todo.pop()
        lhs = names[key]
        sep = [comma] if c else []
        room = most is None or c < most
        if i < n:
            pair, req = pair_syms[i]
            if pair is not None and room:
                now = present | (1 << bit[i] if i in bit else 0)
                b.add(lhs, *sep, pair, state((i + 1, min(c + 1, top), now)))
            if not req:
                b.add(lhs, state((i + 1, c, present)))
            continue
        if not complete(present):
            continue  # additional pairs leave `present` as it is: no way to end
        # additional pairs, counted (repeat.py): their count is independent of what
        # came before, apart from the bounds left and the first comma
        lo = max(least - c, 0)  # c == top (saturated) only when most is None: top >= least
        hi = None if most is None else most - c
        if extra_pair is None or hi == 0:
            if lo == 0:
                b.add(lhs)
            continue
        if c and lo == 0 and hi is None:  # any number: a loop (read left to right)
            b.add(lhs)
            b.add(lhs, comma, extra_pair, lhs)
            continue
        if extras is None:
            extras = Repeat(b, (comma, extra_pair))
        if c:
            b.add(lhs, extras.of(lo, hi))
            continue
        if lo == 0:
            b.add(lhs)
        b.add(lhs, extra_pair, extras.of(max(lo - 1, 0), None if hi is None else hi - 1))
    return b.seq("obj", b.punct("{"), start, b.punct("}"))


def _dependencies(
    b: Translator, s: dict[str, Any], ptr: str, names: list[str], room: int
) -> list[tuple[int, list[int]]]:
    """``dependentRequired`` (and the array form of ``dependencies``) as
    ``(trigger, dependents)`` pairs of indices into ``names`` (the properties the
    grammar writes by name), when every name involved is one of them and there are
    at most :data:`MAX_DEPENDENT_NAMES`, and tracking which were written multiplies
    the object's states by at most ``room``; otherwise the keyword is the final
    check's and nothing is returned for it."""
    out: list[tuple[int, list[int]]] = []
    for kw in ("dependentRequired", "dependencies"):
        if kw not in s or not isinstance(s[kw], dict):
            continue
        kw_ptr = pointer_join(ptr, kw)
        pairs = [(t, v) for t, v in s[kw].items() if isinstance(v, list)]
        if len(pairs) != len(s[kw]):  # schema-valued dependencies
            b.findings.needs_check(kw_ptr, kw, "schema dependencies")
            continue
        involved = {t for t, _ in pairs} | {d for _, v in pairs for d in v}
        if (
            not involved <= set(names)
            or len(involved) > MAX_DEPENDENT_NAMES
            or 1 << len(involved) > room
        ):
            b.findings.needs_check(kw_ptr, kw, "names not declared, or too many")
            continue
        b.findings.exact(kw_ptr, kw)
        out += [(names.index(t), [names.index(d) for d in v]) for t, v in pairs]
    return out


def _property_counts(
    b: Translator,
    s: dict[str, Any],
    ptr: str,
    named: list[tuple[str, bool]],
    extra_pair: str | None,
    n_props: int,
    any_order: bool,
) -> tuple[int, int | None, int] | None:
    """``(least, most, top)``: the grammar counts the pairs it writes, from 0 to ``top``
    (counts above ``top`` are one state when ``most`` is ``None``; ``top >= 1`` unless
    nothing may be written, so a count above 0 also tells a comma is due), and ends an
    object only with ``least`` to ``most`` pairs. ``None``: no object satisfies
    ``minProperties``/``maxProperties`` with these properties.

    The grammar counts pairs, not distinct names: with additional properties a name
    could repeat, which the final check refuses, so ``minProperties`` stays noted as
    the final check's there; ``maxProperties`` is exact (fewer names than pairs).
    """
    least = int(s.get("minProperties", 0))
    most = None if s.get("maxProperties") is None else int(s["maxProperties"])
    required = sum(1 for _, req in named if req)
    possible = None if extra_pair is not None else len(named)
    min_ptr, max_ptr = pointer_join(ptr, "minProperties"), pointer_join(ptr, "maxProperties")
    if (most is not None and (required > most or least > most)) or (
        possible is not None and least > possible
    ):
        for kw, kw_ptr in (("minProperties", min_ptr), ("maxProperties", max_ptr)):
            if kw in s:
                b.findings.exact(kw_ptr, kw, "no object satisfies it")
        return None
    top = most if most is not None else max(least, 1)
    if _count_states(n_props, top, any_order) > MAX_COUNT_STATES:
        for kw, kw_ptr in (("minProperties", min_ptr), ("maxProperties", max_ptr)):
            if kw in s:
                b.findings.needs_check(kw_ptr, kw, "too many property counts to track")
        return 0, None, 1
    if "maxProperties" in s:
        b.findings.exact(max_ptr, "maxProperties")
    if "minProperties" in s:
        if extra_pair is None or least <= required:
            b.findings.exact(min_ptr, "minProperties")
        else:
            b.findings.needs_check(
                min_ptr, "minProperties", "pairs are counted; a repeated name fails at the end"
            )
    return least, most, top


def _any_order(
    b: Translator,
    pair_syms: list[tuple[str | None, bool]],
    extra_pair: str | None,
    counts: tuple[int, int | None, int],
    deps: list[tuple[int, list[int]]],
) -> str:
    """An object whose named properties (``None``: one that cannot occur) come in any
    order, each at most once, the required ones all present, additional pairs
    anywhere, ``least`` to ``most`` pairs in all, and the dependents of each trigger in
    ``deps`` present with it: states are the sets of properties written so far (hence
    the size limit) and the count of pairs (as in :func:`_property_counts`)."""
    least, most, top = counts
    comma = b.punct(",")
    required = 0
    for i, (_, req) in enumerate(pair_syms):
        if req:
            required |= 1 << i
    names: dict[tuple[int, int], str] = {}
    todo = [(0, 0)]
    names[(0, 0)] = b.fresh("u")
    while todo:
        mask, c = todo.pop()
        lhs = names[(mask, c)]
        sep = [comma] if c else []
        if (
            mask & required == required
            and c >= least
            and all(not mask >> t & 1 or all(mask >> d & 1 for d in ds) for t, ds in deps)
        ):
            b.add(lhs)
        if most is not None and c >= most:
            continue
        moves: list[tuple[str, int]] = [
            (pair, mask | 1 << i)
            for i, (pair, _) in enumerate(pair_syms)
            if pair is not None and not mask >> i & 1
        ]
        if extra_pair is not None:
            moves.append((extra_pair, mask))
        for pair, nxt in moves:
            key = (nxt, min(c + 1, top))
            if key not in names:
                names[key] = b.fresh("u")
                todo.append(key)
            b.add(lhs, *sep, pair, names[key])
    return b.seq("obj", b.punct("{"), names[(0, 0)], b.punct("}"))


def other_keys(b: Translator, listed: list[bytes], names_filter: ByteDFA | None) -> ByteDFA:
    """Encoded keys other than the ``listed`` ones (and allowed by ``names_filter``);
    shared by every object with the same listed names."""
    if b.universe_keys is None:
        b.universe_keys = universe_keys(b.opt.max_states)
    cache_key = tuple(sorted(listed))  # only unfiltered key sets are shared
    if names_filter is None and cache_key in b.other_keys_cache:
        return b.other_keys_cache[cache_key]
    keys = b.universe_keys
    if names_filter is not None:
        keys = intersect(keys, names_filter, max_states=b.opt.max_states)
    if listed:
        keys = difference_of_literals(keys, listed, max_states=b.opt.max_states, minimal=False)
    if names_filter is None:
        b.other_keys_cache[cache_key] = keys
    return keys


def key_filter(b: Translator, schema: Any, ptr: str, resolver: Any) -> ByteDFA | None:
    """The encoded keys ``propertyNames`` allows, or ``None`` (final check) if the
    schema is more than a string schema."""
    schema, _, _ = b.deref(schema, ptr, resolver)
    if schema is True:
        return None
    if schema is False:
        return ByteDFA.empty()
    allowed = {"type", "pattern", "minLength", "maxLength", "format", "enum", "const"}
    if not isinstance(schema, dict) or any(
        k not in allowed and k not in ANNOTATIONS for k in schema
    ):
        b.findings.needs_check(ptr, "propertyNames", "only string keywords are compiled")
        return None
    if "enum" in schema or "const" in schema:
        vals = list(schema.get("enum", [])) + ([schema["const"]] if "const" in schema else [])
        b.findings.exact(ptr, "propertyNames")
        return union_of_literals([canonical(v).encode() for v in vals if isinstance(v, str)])
    sym_schema = dict(schema)
    sym_schema.pop("type", None)
    lo = int(sym_schema.get("minLength", 0))
    hi = sym_schema.get("maxLength")
    nodes: list[tuple[Language, str]] = []
    if "pattern" in sym_schema:
        node = pattern_node(b, sym_schema["pattern"], ptr, "propertyNames")
        if node is None:
            return None
        nodes.append((node, ptr))
    if "format" in sym_schema:
        from ..formats import format_regex

        rx = format_regex(sym_schema["format"])
        if rx is not None:
            nodes.append((FormatLanguage(rx), ptr))
    if not nodes:
        nodes = [(ast.Repeat(ast.Chars(CharSet.universe()), 0, None), ptr)]
    dfa, enforced = constrained_string(
        lo=lo, hi=None if hi is None else int(hi), nodes=nodes, max_states=b.opt.max_states
    )
    if enforced:
        b.findings.exact(ptr, "propertyNames")
    else:
        b.findings.needs_check(ptr, "propertyNames", "length bounds combined with pattern/format")
    return dfa


@shared_automata(maxsize=4)
def universe_keys(max_states: int) -> ByteDFA:
    """Every encoded object key (quotes included), once a process."""
    return key_dfa(ast.Repeat(ast.Chars(CharSet.universe()), 0, None), max_states, "")


def key_dfa(node: ast.Node, max_states: int, where: str) -> ByteDFA:
    """Encoded object keys (quotes included) whose decoded text matches ``node``; only the
    escapes JSON requires are offered, so every name has few spellings (the string-body
    construction of ``strings.py``, cached per tree)."""
    from ...regex.dfa import quoted

    return quoted(body_of_node(node, where=where, max_states=max_states), minimal=False)


def constant(dfa: ByteDFA) -> Callable[[], ByteDFA]:
    """A maker (for :meth:`GrammarBuilder.term`) of an automaton already built."""
    return lambda: dfa
