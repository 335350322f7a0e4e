"""ε-NFA over code points → minimal byte-level DFA.

Steps:

1. **Alphabet partition.** The code points used by the NFA are split into blocks that no
   edge or guard can tell apart; the subset construction then works per block.
2. **Subset construction with guards.** A DFA state is the set of NFA states reached by the
   last character, plus what the guards need to know about that character. An ε-edge with
   a guard is followed only when the guard holds for (previous character, next character),
   so width-1 lookaround, ``\\b`` and anchors are resolved exactly. A Numba kernel
   (``subset.py``) over the NFA laid out as arrays.
3. **Shortest-match reduction** (optional): outgoing edges of accepting states are removed,
   so the language keeps only strings with no proper prefix in it. Lark terminals that use
   lazy quantifiers (``".*?"``) mean exactly this: the lexeme ends at its first match.
4. **UTF-8.** Every character edge becomes byte edges; intermediate states are shared by
   hash-consing (a Numba kernel, ``utf8_dfa.py``).
5. **Trim and minimise** (partition refinement, ``partition.py``), numbered in breadth-first
   order from the start state.

The result, :class:`ByteDFA`, is what lexers and token tries walk.

Modes: ``"text"`` treats the pattern as the whole text (``^``/``$``/``\\b`` see the text
boundaries); ``"terminal"`` treats it as one lexeme inside a longer text, where an assertion
that would need a character outside the lexeme is refused.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import functools
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

import numpy as np

from ...errors import CompileBudgetError
from . import ast
from .charset import NEWLINE, CharSet
from .nfa import NFA
from .utf8 import utf8_sequences

DEFAULT_MAX_DFA_STATES = 50_000

# Budgets on automaton construction. A *work budget* counts steps (closure states visited,
# states and rows built, refinement work), so a construction is refused, or a pattern left
# to the final check, the same way on a loaded machine and an idle one. A wall-clock
# *deadline* is opt-in (a server bounding a request) and only ever refuses.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("_DEADLINE", default=None)


class WorkBudget:
    """A number of construction steps, spent by :func:`spend` while the budget is active
    (:func:`work_budget`).

    Attributes:
        units: the steps allowed; left: the steps not yet spent; what: what the budget is
            for, in messages.
    """

    def __init__(self, units: int, what: str) -> None:
        self.units = units
        self.left = units
        self.what = what


_BUDGETS: contextvars.ContextVar[tuple[WorkBudget, ...]] = contextvars.ContextVar(
    "_BUDGETS", default=()
)


class WorkBudgetError(CompileBudgetError):
    """A :class:`WorkBudget` ran out (``budget`` says which)."""

    def __init__(self, message: str, budget: WorkBudget) -> None:
        super().__init__(message)
        self.budget = budget


@contextlib.contextmanager
def work_budget(units: int | None, what: str) -> Iterator[WorkBudget | None]:
    """Within the block, automaton construction spends its steps from a budget of
    ``units`` (``None``: no budget) as well as from the budgets around it, and raises
    :class:`WorkBudgetError` naming the first one that runs out."""
    if units is None:
        yield None
        return
    budget = WorkBudget(units, what)
    token = _BUDGETS.set((*_BUDGETS.get(), budget))
    try:
        yield budget
    finally:
        _BUDGETS.reset(token)


def spend(units: int, where: str) -> None:
    """Spend ``units`` construction steps from every active budget, and check the
    deadline (see :func:`work_budget` and :func:`deadline`)."""
    for budget in _BUDGETS.get():
        budget.left -= units
        if budget.left < 0:
            raise WorkBudgetError(
                f"{where}: {budget.what} needs more than {budget.units:,} construction steps",
                budget,
            )
    end = _DEADLINE.get()
    if end is not None and time.monotonic() > end:
        raise DeadlineError(f"{where}: building the automaton ran out of time")


class DeadlineError(CompileBudgetError):
    """The wall-clock limit of :func:`deadline` passed."""


_T = TypeVar("_T")
_UNMETERED = 2**62  # a meter's limit when no budget is active


def metered(build: Callable[[], _T], where: str) -> tuple[_T, int]:
    """Run ``build`` outside the active budgets, counting its steps, and return its
    result with that count; it still stops where the tightest active budget would, and
    then that budget's error is raised. A cache of built automata stores the count and
    charges it again on every hit (:func:`spend`), so a budget runs out at the same
    place whether the automaton was built now or found built."""
    active = _BUDGETS.get()
    limit = min((b.left for b in active), default=_UNMETERED)
    meter = WorkBudget(max(limit, 0) + 1, where)
    token = _BUDGETS.set((meter,))
    try:
        out = build()
    except WorkBudgetError as e:
        if e.budget is not meter:
            raise
        out = None
    finally:
        _BUDGETS.reset(token)
    cost = meter.units - meter.left
    if out is None:
        spend(cost, where)  # more than the tightest budget has left: its own error
    return cast(_T, out), cost


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Within the block, automaton construction raises :class:`CompileBudgetError` once
    ``seconds`` have passed (``None``: no limit; nested limits keep the earliest). Unlike
    a work budget, what it refuses depends on the machine's speed and load."""
    if seconds is None:
        yield
        return
    end = time.monotonic() + seconds
    outer = _DEADLINE.get()
    token = _DEADLINE.set(end if outer is None else min(outer, end))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


SMALL_NFA_STATES = 128
"""NFAs of at most this many states are determinised and encoded by the Python
constructions (``_subset_construction_reference``, ``utf8_automaton_reference``), larger
ones by the kernels (``subset.py``, ``utf8_dfa.py``), which give the same automata. The
Python constructions are slower than the loaded kernels (0.55-4.3 ms against 0.30-0.50 ms
on four patterns of 28-92 states), but loading the kernels costs a process 20-50 ms once,
and below this size a process need not load them at all (JSON's string character, built
in every process, has 62 states)."""


def warm_kernels() -> None:
    """Run the determinisation kernels (``subset.py``, ``utf8_dfa.py``) once, on a pattern
    small enough to take the Python constructions in real use, so that ``corral warmup``
    (and the prebuilt kernels built with it) holds them whichever patterns it meets."""
    from .nfa import build_nfa
    from .python_syntax import parse_python_regex

    nfa = build_nfa(parse_python_regex(r"[a-z\u00e9]+(\.[0-9]+)?", 0, where="warm-up"))
    ca = _determinise(nfa, _Alphabet(nfa), "warm-up", DEFAULT_MAX_DFA_STATES)
    _encode(ca, [cs.ranges for cs in ca.blocks], 4 * DEFAULT_MAX_DFA_STATES, "warm-up")


SMALL_CHAR_STATES = 16
SMALL_CHAR_RANGES = 32
"""Character automata of at most so many states and code point ranges are encoded as
UTF-8 in Python (see :func:`utf8_automaton`)."""

UTF8_ROW_STEPS = 8
"""Steps a byte state of a UTF-8 automaton costs (a row of 256 transitions is built)."""
PRODUCT_ROW_STEPS = 8
"""Steps a state of a product automaton costs (a row of 256 transitions, vectorised)."""

_BOS = -1  # no character (start or end of the text)


INT16_STATES = (1 << 15) - 1  # most states of a table stored as `int16` (states and -1)


class ByteDFA:
    """A trimmed, minimal DFA over bytes (immutable).

    Attributes:
        trans: ``int32 [n_states, 256]``; ``trans[s, b]`` is the next state or ``-1`` (dead).
            Every state can reach an accepting state.
        accept: ``bool [n_states]``.
        Start state is ``0``. ``n_states == 0`` means the language is empty.

    Two forms of the same automaton: *full* (``trans`` as built) and *compact* (the
    distinct columns of ``trans``, ``int32 [n_states, k]``, and each byte's column, ``uint8
    [256]``), which an automaton that is kept takes (:meth:`compacted`: a grammar's
    terminals, the process's shared automata). A terminal's automaton reads a few classes
    of bytes, so the compact form is about a tenth of the full one; it is stored as
    ``int16`` when the states fit (at most 32,767: nearly always), half that again, and
    given out as ``int32``. ``trans`` of a compact automaton is built on each access
    (read-only): take it once, not per byte.
    """

    __slots__ = ("_classes", "_table", "_trans", "accept", "n_states")

    def __init__(self, trans: np.ndarray, accept: np.ndarray) -> None:
        self._trans: np.ndarray | None = trans
        self._table: np.ndarray | None = None
        self._classes: np.ndarray | None = None
        self.accept = accept
        self.n_states: int = int(trans.shape[0])  # 0: the empty language

    @classmethod
    def from_columns(cls, table: np.ndarray, classes: np.ndarray, accept: np.ndarray) -> ByteDFA:
        """The compact form: ``trans == table[:, classes]`` (``table`` ``int32 [n, k]``,
        ``classes`` ``uint8 [256]``)."""
        dfa = cls.__new__(cls)
        dfa._trans = None
        narrow = table.shape[0] <= INT16_STATES
        dfa._table = np.ascontiguousarray(table, np.int16 if narrow else np.int32)
        dfa._classes = np.ascontiguousarray(classes, np.uint8)
        dfa.accept = accept
        dfa.n_states = int(table.shape[0])
        return dfa

    @property
    def trans(self) -> np.ndarray:
        if self._trans is not None:
            return self._trans
        assert self._table is not None and self._classes is not None
        out = self._table[:, self._classes].astype(np.int32, copy=False)
        out.setflags(write=False)
        return out

    def row(self, state: int) -> np.ndarray:
        """``int32 [256]``: the next states of ``state`` (``-1``: dead)."""
        if self._trans is not None:
            return self._trans[state]
        assert self._table is not None and self._classes is not None
        return self._table[state, self._classes].astype(np.int32, copy=False)

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """The compact form's arrays ``(table int32 [n, k], classes uint8 [256])``, with
        ``trans == table[:, classes]``: the distinct columns in order of their first byte.
        The form is canonical (every construction of the compact form keeps that order
        and no two equal columns), so equal automata give equal arrays."""
        table, classes = self.stored_columns()
        return table.astype(np.int32, copy=False), classes

    def stored_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`columns` as stored, without a copy: the table is ``int16`` when the
        automaton has at most 32,767 states, else ``int32`` (read-only by convention).
        Canonical as :meth:`columns` is, the dtype too (it follows from the number of
        states): for hashing."""
        d = self.compacted()
        assert d._table is not None and d._classes is not None
        return d._table, d._classes

    def compacted(self) -> ByteDFA:
        """This automaton in the compact form (itself if it is already)."""
        if self._trans is None:
            return self
        table, classes = column_classes(self._trans)
        return ByteDFA.from_columns(table, classes, self.accept)

    @property
    def nbytes(self) -> int:
        """The bytes its arrays hold."""
        arrays = (self._trans, self._table, self._classes, self.accept)
        return sum(int(a.nbytes) for a in arrays if a is not None)

    def __repr__(self) -> str:
        return f"ByteDFA(n_states={self.n_states})"

    def is_empty(self) -> bool:
        return self.n_states == 0

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` is in the language (reference implementation, for tests)."""
        if self.n_states == 0:
            return False
        trans = self.trans
        s = 0
        for b in data:
            s = int(trans[s, b])
            if s < 0:
                return False
        return bool(self.accept[s])

    def accepts_empty(self) -> bool:
        return self.n_states > 0 and bool(self.accept[0])

    @classmethod
    def empty(cls) -> ByteDFA:
        """The DFA of the empty language (no states)."""
        return cls(np.zeros((0, 256), np.int32), np.zeros(0, bool))


# ---------------------------------------------------------------------------------------
# 1. alphabet partition


class _Alphabet:
    """Blocks of code points that no edge or guard distinguishes."""

    def __init__(self, nfa: NFA) -> None:
        guards = nfa.guards()
        edge_sets: list[CharSet] = list({cs for edges in nfa.chars for cs, _ in edges})
        guard_sets: list[CharSet] = []
        for g in guards:
            if g.chars is not None:
                guard_sets.append(g.chars)
            if g.kind in (ast.LINE_START, ast.LINE_END):
                guard_sets.append(NEWLINE)
        all_sets = edge_sets + guard_sets
        points: set[int] = set()
        for cs in all_sets:
            for lo, hi in cs.ranges:
                points.add(lo)
                points.add(hi + 1)
        bounds = sorted(points)
        n_int = max(0, len(bounds) - 1)
        sig = [0] * n_int
        for idx, cs in enumerate(all_sets):
            bit = 1 << idx
            for lo, hi in cs.ranges:
                i = bisect.bisect_left(bounds, lo)
                j = bisect.bisect_left(bounds, hi + 1)
                for k in range(i, j):
                    sig[k] |= bit
        edge_mask = (1 << len(edge_sets)) - 1
        by_sig: dict[int, int] = {}
        block_ranges: list[list[tuple[int, int]]] = []
        block_sig: list[int] = []
        for k in range(n_int):
            if not sig[k] & edge_mask:
                continue  # no edge consumes these characters: they can only lead to death
            b = by_sig.get(sig[k])
            if b is None:
                b = by_sig[sig[k]] = len(block_ranges)
                block_ranges.append([])
                block_sig.append(sig[k])
            block_ranges[b].append((bounds[k], bounds[k + 1] - 1))
        self.n_blocks = len(block_ranges)
        self.block_chars = [CharSet(r) for r in block_ranges]
        self._set_index = {cs: i for i, cs in enumerate(all_sets)}
        self._block_sig = block_sig
        # Block membership of every charset, as an int bitmask over blocks.
        self._members: dict[CharSet, int] = {}
        for cs, i in self._set_index.items():
            m = 0
            for b, s in enumerate(block_sig):
                if s >> i & 1:
                    m |= 1 << b
            self._members[cs] = m

    def blocks_of(self, cs: CharSet) -> int:
        return self._members[cs]

    def members(self) -> dict[CharSet, int]:
        """Every character set of the NFA's edges and guards, with its blocks (a bitmask)."""
        return self._members

    def block_in(self, block: int, cs: CharSet) -> bool:
        return bool(self._members[cs] >> block & 1)


# ---------------------------------------------------------------------------------------
# 2. subset construction


class _GuardEval:
    def __init__(self, alphabet: _Alphabet, where: str) -> None:
        self.alpha = alphabet
        self.where = where
        # id(guard) -> (guard, its kind, the blocks of its characters, negated)
        self._tests: dict[int, tuple[ast.Assert, str, int, bool]] = {}

    def _test(self, g: ast.Assert) -> tuple[ast.Assert, str, int, bool]:
        t = self._tests.get(id(g))
        if t is None:
            if g.kind in (ast.LINE_START, ast.LINE_END):
                mask = self.alpha.blocks_of(NEWLINE)
            elif g.chars is not None:
                mask = self.alpha.blocks_of(g.chars)
            else:
                mask = 0
            t = self._tests[id(g)] = (g, g.kind, mask, g.negate)
        return t

    def holds(self, g: ast.Assert, prev: int, nxt: int) -> bool:
        """Whether guard ``g`` holds between the blocks ``prev`` and ``nxt`` (``_BOS``: the
        start or the end of the text)."""
        _g, k, mask, negate = self._test(g)
        p = prev != _BOS and bool(mask >> prev & 1)  # the previous character is in `mask`
        n = nxt != _BOS and bool(mask >> nxt & 1)
        if k == ast.BEHIND:
            r = p
        elif k == ast.AHEAD:
            r = n
        elif k == ast.BOUNDARY:
            r = p != n
        elif k == ast.TEXT_START:
            r = prev == _BOS
        elif k == ast.TEXT_END:
            r = nxt == _BOS
        elif k == ast.LINE_START:
            r = prev == _BOS or p
        elif k == ast.LINE_END:
            r = nxt == _BOS or n
        else:  # pragma: no cover
            raise AssertionError(k)
        return r != negate


def _unguarded_back(nfa: NFA) -> list[list[int]]:
    """``back[t]``: the states with an ε-edge without a guard into ``t``."""
    back: list[list[int]] = [[] for _ in range(nfa.n_states)]
    for s, eps in enumerate(nfa.eps):
        for t, guard in eps:
            if guard is None:
                back[t].append(s)
    return back


def _reaching(nfa: NFA, seeds: list[int], back: list[list[int]] | None = None) -> list[bool]:
    """The states with a path of ε-edges without a guard to one of ``seeds``."""
    if back is None:
        back = _unguarded_back(nfa)
    seen = [False] * nfa.n_states
    work = list(seeds)
    for q in work:
        seen[q] = True
    while work:
        for q in back[work.pop()]:
            if not seen[q]:
                seen[q] = True
                work.append(q)
    return seen


_UNIVERSAL_ROUNDS = 4
r"""Rounds of :func:`universal_targets`'s fixpoint before it gives up (each is linear in
the NFA; a trailing ``[\s\S]*`` settles in one, a bounded repeat of a class that is
the whole alphabet would drop one reader a round)."""


def universal_targets(nfa: NFA, alpha: _Alphabet) -> tuple[np.ndarray, int] | None:
    """The NFA states from which every text is accepted, found where the subset
    construction can see it cheaply: ``(good bool [n_states], representative)``, or
    ``None`` when there are none of this kind. Where the NFA names such a state itself
    (``nfa.whole``, :func:`.nfa.build_search_nfa`), the states with an unguarded ε-path
    to it, and it.

    A state ``t`` is *good* when, through ε-edges without a guard (which every closure
    follows, whatever the characters around), it reaches the final state and a state
    that reads every block of the alphabet with edges into good states (the greatest such
    set: a trailing ``[\\s\\S]*``, or a search pattern's ``any*`` after its match). A set
    of NFA states that holds a good state accepts every text (over the characters any
    edge reads; no set reads the others), whatever guards follow, so the subset
    construction replaces it by ``{representative}`` (the lowest good state) with no
    previous character: one DFA state where the construction would otherwise carry on
    tracking the partial matches that no longer matter (an unanchored URI pattern:
    11,050 character states before, the minimal DFA 17).
    """
    full = (1 << alpha.n_blocks) - 1
    if full == 0:
        return None
    if nfa.whole is not None:
        return np.array(_reaching(nfa, [nfa.whole]), np.bool_), nfa.whole
    # a state of a Thompson NFA has at most one character edge: it reads every block
    # when that edge's set does, which few sets do
    whole_sets = {cs for cs, m in alpha.members().items() if m == full}
    if not whole_sets and max(map(len, nfa.chars), default=0) <= 1:
        return None
    readers = []
    for s, edges in enumerate(nfa.chars):
        if len(edges) == 1:
            if edges[0][0] in whole_sets:
                readers.append(s)
            continue
        m = 0
        for cs, _ in edges:
            m |= alpha.blocks_of(cs)
        if edges and m == full:
            readers.append(s)
    if not readers:
        return None
    back = _unguarded_back(nfa)

    def reaching(seeds: list[int]) -> list[bool]:
        return _reaching(nfa, seeds, back)

    accepting = reaching([nfa.final])
    for _ in range(_UNIVERSAL_ROUNDS):
        near = reaching(readers)
        good = [a and r for a, r in zip(accepting, near, strict=True)]
        kept = []
        for s in readers:
            m = 0
            for cs, t in nfa.chars[s]:
                if good[t]:
                    m |= alpha.blocks_of(cs)
            if m == full:
                kept.append(s)
        if len(kept) == len(readers):
            break
        readers = kept
        if not readers:
            return None
    else:
        return None  # not settled: readers that only lead on to fewer (``[a-z]{0,n}``)
    out = np.array(good, np.bool_)
    found = np.flatnonzero(out)
    if found.shape[0] == 0:
        return None
    return out, int(found[0])


def _closure(
    nfa: NFA, states: frozenset[int], prev: int, nxt: int, ev: _GuardEval, guard_free: bool
) -> frozenset[int]:
    """ε-closure of ``states`` given the neighbouring characters (the guards on ε-edges
    hold or not there)."""
    seen = set(states)
    stack = list(states)
    eps = nfa.eps
    while stack:
        s = stack.pop()
        for t, g in eps[s]:
            if t in seen:
                continue
            if g is not None and not guard_free and not ev.holds(g, prev, nxt):
                continue
            seen.add(t)
            stack.append(t)
    return frozenset(seen)


@dataclass
class _CharDFA:
    trans: list[dict[int, int]]  # block -> target
    accept: list[bool]
    blocks: list[CharSet]


@dataclass
class _CharAutomaton:
    """A character DFA as arrays (what :mod:`.subset` builds and :mod:`.utf8_dfa` reads):
    transitions CSR by state (``edge_ptr`` ``int64 [n + 1]``; ``edge_block``,
    ``edge_target`` ``int64 [E]``), ``accept`` and ``live`` (``bool [n]``), and the code
    points of each block."""

    edge_ptr: np.ndarray
    edge_block: np.ndarray
    edge_target: np.ndarray
    accept: np.ndarray
    live: np.ndarray
    blocks: list[CharSet]


_GUARD_KINDS = {
    ast.BEHIND: 0,
    ast.AHEAD: 1,
    ast.BOUNDARY: 2,
    ast.TEXT_START: 3,
    ast.TEXT_END: 4,
    ast.LINE_START: 5,
    ast.LINE_END: 6,
}
_MAX_KERNEL_GUARDS = 63  # a closure's guard outcomes are the bits of one int64


def _block_list(mask: int, n_blocks: int) -> np.ndarray:
    """The set bits of ``mask`` (a Python int over ``n_blocks`` blocks), ascending."""
    raw = np.frombuffer(mask.to_bytes((n_blocks + 7) // 8 or 1, "little"), np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little")[:n_blocks]).astype(np.int64)


def _determinise(nfa: NFA, alpha: _Alphabet, where: str, max_states: int) -> _CharAutomaton:
    """The subset construction (the kernel :func:`.subset.subset_construction`; the NFA
    and its guards laid out as arrays here). Spends the steps the construction took; past
    ``max_states`` states, :class:`CompileBudgetError`."""
    from .subset import OK, TOO_MANY_STATES, subset_construction

    guards = nfa.guards()
    distinct = list({(g.kind, g.chars, g.negate): g for g in guards}.values())
    if len(distinct) > _MAX_KERNEL_GUARDS:
        return _char_automaton(_subset_construction_reference(nfa, alpha, where, max_states))
    n_blocks = alpha.n_blocks
    guard_of = {(g.kind, g.chars, g.negate): i for i, g in enumerate(distinct)}
    g_kind = np.array([_GUARD_KINDS[g.kind] for g in distinct], np.int64)
    g_negate = np.array([g.negate for g in distinct], np.bool_)
    g_member = np.zeros((len(distinct), max(n_blocks, 1)), np.bool_)
    for i, g in enumerate(distinct):
        cs = NEWLINE if g.kind in (ast.LINE_START, ast.LINE_END) else g.chars
        if cs is not None:
            g_member[i, _block_list(alpha.blocks_of(cs), n_blocks)] = True
    prev_key = np.zeros(max(n_blocks, 1), np.int64)
    prev_guards = [g for g in guards if g.kind in ast.NEEDS_PREV]
    if prev_guards:
        tests = [g.chars for g in prev_guards if g.chars is not None]
        tests += [NEWLINE for g in prev_guards if g.kind == ast.LINE_START]
        bits = np.zeros((len(tests), max(n_blocks, 1)), np.bool_)
        for i, cs in enumerate(tests):
            bits[i, _block_list(alpha.blocks_of(cs), n_blocks)] = True
        _, ids = np.unique(bits.T, axis=0, return_inverse=True)
        prev_key[:] = ids.reshape(-1)

    eps_ptr = np.zeros(nfa.n_states + 1, np.int64)
    eps_ptr[1:] = np.cumsum([len(e) for e in nfa.eps])
    eps_to = np.array([t for edges in nfa.eps for t, _ in edges], np.int64)
    eps_guard = np.array(
        [
            -1 if g is None else guard_of[(g.kind, g.chars, g.negate)]
            for edges in nfa.eps
            for _, g in edges
        ],
        np.int64,
    )
    chr_ptr = np.zeros(nfa.n_states + 1, np.int64)
    chr_ptr[1:] = np.cumsum([len(e) for e in nfa.chars])
    chr_target = np.array([t for edges in nfa.chars for _, t in edges], np.int64)
    block_lists: dict[CharSet, np.ndarray] = {}
    lists = []
    for edges in nfa.chars:
        for cs, _ in edges:
            bl = block_lists.get(cs)
            if bl is None:
                bl = block_lists[cs] = _block_list(alpha.blocks_of(cs), n_blocks)
            lists.append(bl)
    cb_ptr = np.zeros(len(lists) + 1, np.int64)
    cb_ptr[1:] = np.cumsum([x.shape[0] for x in lists])
    cb_block = np.concatenate(lists) if lists else np.zeros(0, np.int64)

    if nfa.whole is not None:  # the kernel finds the states that reach it
        universal, whole = np.zeros(0, np.bool_), nfa.whole
    else:
        found = universal_targets(nfa, alpha)
        universal, whole = found if found is not None else (np.zeros(0, np.bool_), -1)
    status, steps, _, edge_ptr, edge_block, edge_target, accept, live = subset_construction(
        nfa.start,
        nfa.final,
        eps_ptr,
        eps_to,
        eps_guard,
        chr_ptr,
        chr_target,
        cb_ptr,
        cb_block,
        n_blocks,
        g_kind,
        g_negate,
        g_member,
        prev_key,
        universal,
        np.int64(whole),
        max_states,
        max(budget_left(), 0),
    )
    spend(int(steps), where)  # past a budget: its error
    if status == TOO_MANY_STATES:
        raise CompileBudgetError(
            f"{where}: the automaton needs more than {max_states} states; "
            "raise the budget or simplify the pattern"
        )
    assert status == OK
    return _CharAutomaton(edge_ptr, edge_block, edge_target, accept, live, alpha.block_chars)


def _char_automaton(cdfa: _CharDFA) -> _CharAutomaton:
    """A character DFA of the reference construction, as arrays."""
    edge_ptr = np.zeros(len(cdfa.trans) + 1, np.int64)
    edge_ptr[1:] = np.cumsum([len(out) for out in cdfa.trans])
    edge_block = np.array([b for out in cdfa.trans for b in out], np.int64)
    edge_target = np.array([t for out in cdfa.trans for t in out.values()], np.int64)
    live = np.array(live_states(cdfa.trans, cdfa.accept), np.bool_)
    accept = np.array(cdfa.accept, np.bool_)
    return _CharAutomaton(edge_ptr, edge_block, edge_target, accept, live, cdfa.blocks)


def _subset_construction_reference(
    nfa: NFA, alpha: _Alphabet, where: str, max_states: int, *, collapse: bool = True
) -> _CharDFA:
    """The subset construction in Python (the kernel's reference in the tests, and the
    construction for NFAs with more distinct guards than the kernel takes).

    ``collapse``: sets that accept every text become one state (:func:`universal_targets`);
    ``False`` only in tests, which check that this keeps the language."""
    ev = _GuardEval(alpha, where)
    guards = nfa.guards()
    guard_free = not guards
    # one guard of each meaning: equal guards (the copies of a repeated lookaround) hold
    # together, so the closure depends on the outcomes of these only
    distinct = list({(g.kind, g.chars, g.negate): g for g in guards}.values())
    prev_guards = [g for g in guards if g.kind in ast.NEEDS_PREV]

    # What the guards need to remember about the previous character.
    def prev_key(block: int) -> tuple[bool, ...]:
        out = []
        for g in prev_guards:
            if g.chars is not None:
                out.append(alpha.block_in(block, g.chars))
            if g.kind == ast.LINE_START:
                out.append(alpha.block_in(block, NEWLINE))
        return tuple(out)

    prev_keys = [prev_key(b) for b in range(alpha.n_blocks)]
    edge_blocks = [[(alpha.blocks_of(cs), t) for cs, t in edges] for edges in nfa.chars]
    start_prev = _BOS
    universal = universal_targets(nfa, alpha) if collapse else None
    good = universal[0] if universal is not None else None
    whole = frozenset([universal[1]]) if universal is not None else frozenset()

    key0 = (frozenset([nfa.start]), start_prev if start_prev < 0 else 0)
    index: dict[tuple[frozenset[int], object], int] = {key0: 0}
    reps: list[tuple[frozenset[int], int]] = [(frozenset([nfa.start]), start_prev)]
    trans: list[dict[int, int]] = []
    accept: list[bool] = []
    closure_cache: dict[tuple[object, ...], frozenset[int]] = {}

    # The closure depends on the neighbouring characters only through the guards'
    # outcomes, so blocks with equal outcomes share one closure.
    sig_cache: dict[tuple[int, int], tuple[bool | None, ...]] = {}

    def sig_of(prev: int, nxt: int) -> tuple[bool | None, ...]:
        sig = sig_cache.get((prev, nxt))
        if sig is None:
            sig = sig_cache[(prev, nxt)] = tuple(ev.holds(g, prev, nxt) for g in distinct)
        return sig

    def closure(states: frozenset[int], prev: int, nxt: int) -> frozenset[int]:
        k: tuple[object, ...] = (states,) if guard_free else (states, sig_of(prev, nxt))
        r = closure_cache.get(k)
        if r is None:
            r = closure_cache[k] = _closure(nfa, states, prev, nxt, ev, guard_free)
            spend(len(r), where)
        return r

    # The next characters grouped by the guards' outcomes after ``prev``: the same for
    # every state whose previous character is ``prev``.
    groups_cache: dict[int, tuple[int, ...]] = {}

    def groups_after(prev: int) -> tuple[int, ...]:
        out = groups_cache.get(prev)
        if out is None:
            groups: dict[tuple[bool | None, ...], int] = {}  # guard outcomes -> blocks
            for b in range(alpha.n_blocks):
                sig = sig_of(prev, b)
                groups[sig] = groups.get(sig, 0) | (1 << b)
            out = groups_cache[prev] = tuple(groups.values())
        return out

    i = 0
    while i < len(reps):
        states, prev = reps[i]
        i += 1
        # acceptance: final reachable with no next character (or one outside the lexeme)
        accept.append(nfa.final in closure(states, prev, _BOS))
        out: dict[int, int] = {}
        targets_by_block: dict[int, set[int]] = {}
        if guard_free:
            for s in closure(states, 0, 0):
                for mask, t in edge_blocks[s]:
                    m = mask
                    while m:
                        low = m & -m
                        b = low.bit_length() - 1
                        targets_by_block.setdefault(b, set()).add(t)
                        m ^= low
        else:
            for gmask in groups_after(prev):
                b0 = (gmask & -gmask).bit_length() - 1
                for s in closure(states, prev, b0):
                    for mask, t in edge_blocks[s]:
                        m = mask & gmask
                        while m:
                            low = m & -m
                            targets_by_block.setdefault(low.bit_length() - 1, set()).add(t)
                            m ^= low
        for b, tgt in targets_by_block.items():
            prev_b = b
            if good is not None and any(good[t] for t in tgt):
                fs = whole  # accepts every text: one state, whatever came before
                prev_b = _BOS
                pk: object = _BOS
            else:
                fs = frozenset(tgt)
                pk = prev_keys[b] if not guard_free else 0
            key = (fs, pk)
            j = index.get(key)
            if j is None:
                spend(1 + len(fs), where)
                if len(reps) >= max_states:
                    raise CompileBudgetError(
                        f"{where}: the automaton needs more than {max_states} states; "
                        "raise the budget or simplify the pattern"
                    )
                j = index[key] = len(reps)
                reps.append((fs, prev_b))
            out[b] = j
        trans.append(out)
    return _CharDFA(trans, accept, alpha.block_chars)


_Builder = TypeVar("_Builder", bound=Callable[..., ByteDFA])


def shared_automata(maxsize: int) -> Callable[[_Builder], _Builder]:
    """Memoise a pure :class:`ByteDFA` builder for the whole process (an LRU of
    ``maxsize`` argument tuples): schemas keep asking for the same strings, numbers and
    punctuation. Results are kept compact, with read-only arrays, since every grammar
    built later shares them.
    Each call charges the steps the build took (:func:`metered`), built now or not."""

    def wrap(build: _Builder) -> _Builder:
        @functools.lru_cache(maxsize)
        def cached(*args: object, **kwargs: object) -> tuple[ByteDFA, int]:
            dfa, cost = metered(lambda: build(*args, **kwargs), build.__name__)
            dfa = dfa.compacted()
            dfa.accept.setflags(write=False)
            return dfa, cost

        @functools.wraps(build)
        def charged(*args: object, **kwargs: object) -> ByteDFA:
            dfa, cost = cached(*args, **kwargs)
            spend(cost, build.__name__)  # the same steps whether built now or before
            return dfa

        charged.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        return cast(_Builder, charged)

    return wrap


# ---------------------------------------------------------------------------------------
# 3-5. UTF-8, trim, minimise


def live_states(trans: list[dict[int, int]], accept: list[bool]) -> list[bool]:
    """Which states can reach an accepting state (``trans[s]``: byte or block -> target)."""
    rev: list[list[int]] = [[] for _ in trans]
    for s, out in enumerate(trans):
        for t in out.values():
            rev[t].append(s)
    live = list(accept)
    stack = [s for s, a in enumerate(accept) if a]
    while stack:
        t = stack.pop()
        for s in rev[t]:
            if not live[s]:
                live[s] = True
                stack.append(s)
    return live


def _to_bytes(ca: _CharAutomaton, max_states: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    if not ca.live.shape[0] or not ca.live[0]:
        return np.zeros((0, 256), np.int32), np.zeros(0, bool)
    rows, accept, _ = _encode(ca, [cs.ranges for cs in ca.blocks], max_states, where)
    return rows, accept


def budget_left() -> int:
    """The steps the tightest active budget has left (a large number when none is
    active): how far a kernel may go before :func:`spend` would refuse its work."""
    return min((b.left for b in _BUDGETS.get()), default=_UNMETERED)


def utf8_automaton(
    trans: list[dict[int, int]],
    accept: list[bool],
    live: list[bool],
    block_ranges: Sequence[Sequence[tuple[int, int]]],
    max_states: int,
    where: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A DFA over character blocks (``trans[q]``: block -> state; ``block_ranges[b]``: the
    code points of block ``b`` as inclusive ranges) → the same automaton over UTF-8 bytes,
    keeping the states that are ``live``. Multi-byte characters get intermediate states,
    shared by hash-consing (the kernel :func:`.utf8_dfa.encode_utf8`). Returns ``int32 [n,
    256]`` transitions, ``bool [n]`` accepting flags and ``int32 [n]``: per byte state, the
    character state it stands for (-1: an intermediate state). Spends
    :data:`UTF8_ROW_STEPS` per byte state; more than ``max_states`` of them is a
    :class:`CompileBudgetError`. A small automaton (at most :data:`SMALL_CHAR_STATES`
    states and :data:`SMALL_CHAR_RANGES` ranges) is encoded in Python
    (:func:`utf8_automaton_reference`): as fast, and no kernel to load."""
    if len(trans) <= SMALL_CHAR_STATES and sum(map(len, block_ranges)) <= SMALL_CHAR_RANGES:
        rows, acc, of_char = utf8_automaton_reference(
            trans, accept, live, block_ranges, max_states, where
        )
        return rows, acc, np.array(of_char, np.int32)
    edge_ptr = np.zeros(len(trans) + 1, np.int64)
    edge_ptr[1:] = np.cumsum([len(out) for out in trans])
    edge_block = np.fromiter((b for out in trans for b in out), np.int64, int(edge_ptr[-1]))
    edge_target = np.fromiter(
        (t for out in trans for t in out.values()), np.int64, int(edge_ptr[-1])
    )
    ca = _CharAutomaton(
        edge_ptr,
        edge_block,
        edge_target,
        np.asarray(accept, np.bool_),
        np.asarray(live, np.bool_),
        [],
    )
    return _encode(ca, block_ranges, max_states, where)


def _encode(
    ca: _CharAutomaton,
    block_ranges: Sequence[Sequence[tuple[int, int]]],
    max_states: int,
    where: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`utf8_automaton` of a character automaton in arrays."""
    from .utf8_dfa import OK, TOO_MANY_STATES, encode_utf8

    range_ptr = np.zeros(len(block_ranges) + 1, np.int64)
    range_ptr[1:] = np.cumsum([len(r) for r in block_ranges])
    flat = [x for r in block_ranges for pair in r for x in pair]
    bounds = np.array(flat, np.int64).reshape(-1, 2)
    status, n, rows, acc, of_char = encode_utf8(
        ca.edge_ptr,
        ca.edge_block,
        ca.edge_target,
        ca.accept,
        ca.live,
        range_ptr,
        np.ascontiguousarray(bounds[:, 0]),
        np.ascontiguousarray(bounds[:, 1]),
        max_states,
        max(budget_left(), 0),
        UTF8_ROW_STEPS,
    )
    spend((n + (status != OK)) * UTF8_ROW_STEPS, where)  # past a budget: its error
    if status == TOO_MANY_STATES:
        raise CompileBudgetError(
            f"{where}: the byte automaton needs more than {max_states} states; "
            "raise the budget or simplify the pattern"
        )
    return rows[:n].copy(), acc[:n].copy(), of_char[:n].copy()


def utf8_automaton_reference(
    trans: list[dict[int, int]],
    accept: list[bool],
    live: list[bool],
    block_ranges: Sequence[Sequence[tuple[int, int]]],
    max_states: int,
    where: str,
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """:func:`utf8_automaton` in Python, intermediate states keyed by their byte-range
    sequences (the construction the kernel replaced; tests compare the two after
    minimisation)."""
    node_index: dict[object, int] = {}
    rows: list[np.ndarray] = []
    acc: list[bool] = []
    of_char: list[int] = []
    pending: deque[tuple[int, frozenset[tuple[tuple[tuple[int, int], ...], int]]]] = deque()

    def chars_of(mask: int) -> CharSet:
        out: list[tuple[int, int]] = []
        b = 0
        while mask:
            if mask & 1:
                out.extend(block_ranges[b])
            mask >>= 1
            b += 1
        return CharSet(out)

    def new_node(key: object, accepting: bool, q: int) -> int:
        spend(UTF8_ROW_STEPS, where)
        if len(rows) >= max_states:
            raise CompileBudgetError(
                f"{where}: the byte automaton needs more than {max_states} states; "
                "raise the budget or simplify the pattern"
            )
        j = node_index[key] = len(rows)
        rows.append(np.full(256, -1, np.int32))
        acc.append(accepting)
        of_char.append(q)
        return j

    def char_node(q: int) -> int:
        j = node_index.get(("q", q))
        if j is None:
            j = new_node(("q", q), accept[q], q)
            by_target: dict[int, int] = {}
            for b, t in trans[q].items():
                if live[t]:
                    by_target[t] = by_target.get(t, 0) | (1 << b)
            seqs = [(seq, t) for t, m in by_target.items() for seq in sequences_of(m)]
            pending.append((j, frozenset(seqs)))
        return j

    # The same sets of blocks recur from state to state: encode each set once.
    by_mask: dict[int, list[tuple[tuple[int, int], ...]]] = {}

    def sequences_of(mask: int) -> list[tuple[tuple[int, int], ...]]:
        out = by_mask.get(mask)
        if out is None:
            out = by_mask[mask] = [
                seq for lo, hi in chars_of(mask).ranges for seq in utf8_sequences(lo, hi)
            ]
        return out

    def inner_node(seqs: frozenset[tuple[tuple[tuple[int, int], ...], int]]) -> int:
        j = node_index.get(("n", seqs))
        if j is None:
            j = new_node(("n", seqs), False, -1)
            pending.append((j, seqs))
        return j

    char_node(0)
    while pending:
        j, seqs = pending.popleft()
        cuts = {0, 256}
        for seq, _t in seqs:
            cuts.update((seq[0][0], seq[0][1] + 1))
        cl = sorted(cuts)
        for lo, nx in itertools.pairwise(cl):
            hi = nx - 1
            rest = []
            final = -1
            for seq, t in seqs:
                if seq[0][0] <= lo and hi <= seq[0][1]:
                    if len(seq) == 1:
                        final = t
                    else:
                        rest.append((seq[1:], t))
            if final >= 0:
                rows[j][lo : hi + 1] = char_node(final)
            elif rest:
                rows[j][lo : hi + 1] = inner_node(frozenset(rest))
    return np.stack(rows).astype(np.int32), np.array(acc, bool), of_char


def column_classes(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group the equal columns of ``trans`` (``[n, m]``, usually ``m = 256`` bytes):
    returns ``(small, col_class)`` with ``small`` the distinct columns (``int32 [n, k]``,
    in order of first appearance, so column 0 is in class 0) and ``col_class`` (``int32
    [m]``) such that ``small[:, col_class] == trans``. A Numba kernel
    (:func:`.partition.column_classes_of`): each column hashed, then compared with the
    first column of its hash."""
    from .partition import column_classes_of

    small, col_class = column_classes_of(_writable(trans, np.int32))
    return small, col_class


def _minimal_columns(
    trans: np.ndarray, accept: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`minimize` before its columns are spread back over the 256 bytes: ``(table
    int32 [m, k], byte_class int32 [256], accept bool [m])``."""
    from .partition import minimal_table

    n = trans.shape[0]
    small, byte_class = column_classes(trans)  # [n, k], [256]
    m = int(np.count_nonzero(small >= 0))
    spend(m * max(1, int(n).bit_length()), "minimising an automaton")
    table, acc = minimal_table(_writable(small, np.int32), _writable(accept, np.bool_))
    return table, byte_class, acc


def minimize(trans: np.ndarray, accept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimisation of a trimmed partial DFA (``trans``: ``int32 [n, 256]``, ``-1`` dead;
    ``accept``: ``bool [n]``); states renumbered breadth-first from state 0, bytes in
    order. Partition refinement in a Numba kernel (:mod:`.partition`) over the distinct
    columns; charged ``m * log2(n)`` work units for ``m`` transitions."""
    if trans.shape[0] == 0:
        return trans, accept
    table, byte_class, acc = _minimal_columns(trans, accept)
    return np.ascontiguousarray(table[:, byte_class], np.int32), acc


def minimal_dfa(
    trans: np.ndarray, accept: np.ndarray, classes: np.ndarray | None = None
) -> ByteDFA:
    """:func:`minimize` as a :class:`ByteDFA` in the compact form (its columns are not
    spread over the 256 bytes). ``classes`` (``int [256]``): ``trans`` has a column per
    class of bytes, byte ``b`` reading column ``classes[b]``; ``None``: a column per byte."""
    if trans.shape[0] == 0:
        return ByteDFA(trans, accept)
    table, byte_class, acc = _minimal_columns(trans, accept)
    if classes is not None:
        byte_class = byte_class[classes]
    distinct, merged = column_classes(table)
    if distinct.shape[1] < table.shape[1]:  # merged states made columns equal
        table, byte_class = distinct, merged[byte_class]
    return ByteDFA.from_columns(table, byte_class, acc)


def minimize_reference(trans: np.ndarray, accept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hopcroft minimisation in Python (the reference the tests compare :func:`minimize`
    with); states renumbered BFS from state 0."""
    n = trans.shape[0]
    if n == 0:
        return trans, accept
    # Byte classes: bytes whose columns are identical behave the same everywhere.
    small, byte_class = column_classes(trans)  # [n, k], [m]
    k = small.shape[1]
    sink = n
    full = np.where(small < 0, sink, small)
    full = np.vstack([full, np.full((1, k), sink, dtype=full.dtype)])
    acc = np.concatenate([accept, [False]])
    total = n + 1
    # inverse transitions: inv[c][t] -> list of sources
    inv: list[list[list[int]]] = [[[] for _ in range(total)] for _ in range(k)]
    full_rows = full.tolist()  # plain ints: indexing numpy scalars one by one is slow
    for c, column in enumerate(full.T.tolist()):
        inv_c = inv[c]
        for s, t in enumerate(column):
            inv_c[t].append(s)
    block_of = [0] * total
    blocks: list[set[int]] = []
    a_set = {s for s in range(total) if acc[s]}
    na_set = set(range(total)) - a_set
    for initial in (a_set, na_set):
        if initial:
            for s in initial:
                block_of[s] = len(blocks)
            blocks.append(initial)
    work = set(range(len(blocks)))
    while work:
        a = work.pop()
        a_states = list(blocks[a])
        spend(k * len(a_states), "minimising an automaton")
        for c in range(k):
            x: set[int] = set()
            inv_c = inv[c]
            for t in a_states:
                x.update(inv_c[t])
            if not x:
                continue
            touched: dict[int, set[int]] = {}
            for s in x:
                touched.setdefault(block_of[s], set()).add(s)
            for b, inter in touched.items():
                y = blocks[b]
                if len(inter) == len(y):
                    continue
                rest = y - inter
                nb = len(blocks)
                if len(inter) <= len(rest):
                    blocks[b] = rest
                    blocks.append(inter)
                    moved = inter
                else:
                    blocks[b] = inter
                    blocks.append(rest)
                    moved = rest
                for s in moved:
                    block_of[s] = nb
                if b in work:
                    work.add(nb)
                else:
                    work.add(nb if len(moved) <= len(blocks[b]) else b)
    sink_block = block_of[sink]
    # Renumber blocks BFS from the start state's block, dropping the sink.
    order: dict[int, int] = {}
    q = deque([block_of[0]])
    order[block_of[0]] = 0
    rep = {b: next(iter(blocks[b])) for b in range(len(blocks))}
    while q:
        b = q.popleft()
        for nxt in full_rows[rep[b]]:
            t = block_of[nxt]
            if t != sink_block and t not in order:
                order[t] = len(order)
                q.append(t)
    m = len(order)
    new_rows = [[-1] * k for _ in range(m)]
    new_acc = np.zeros(m, bool)
    for b, i in order.items():
        s = rep[b]
        new_acc[i] = bool(acc[s])
        row = new_rows[i]
        for c, nxt in enumerate(full_rows[s]):
            t = block_of[nxt]
            if t != sink_block:
                row[c] = order[t]
    new_small = np.array(new_rows, np.int32).reshape(m, k)
    return new_small[:, byte_class].astype(np.int32), new_acc


def minimize_with_blocked(
    trans: np.ndarray, accept: np.ndarray, end_blocked: np.ndarray | None
) -> tuple[ByteDFA, np.ndarray | None]:
    """Minimise a trimmed DFA whose states also carry ``end_blocked`` rows (``bool [n,
    256]``, or ``None``): states merge only when they also block the same ends.

    The blocked ends become transitions on 256 extra columns to one extra accepting
    state, so plain Hopcroft minimisation keeps them apart; they are read back after.
    Returns the DFA and its rows (``None`` when nothing is blocked).
    """
    if end_blocked is None or not (end_blocked[accept] & (trans[accept] < 0)).any():
        return minimal_dfa(trans, accept), None
    marks = np.hstack([accept[:, None], end_blocked & accept[:, None] & (trans < 0)])
    real, marked = minimize_marked(trans, marks)
    blocked = marked[:, 1:]
    return ByteDFA(real, marked[:, 0]), blocked if blocked.any() else None


def minimize_marked(trans: np.ndarray, marks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimise ``trans`` (``int32 [n, 256]``) keeping apart states whose ``marks``
    (``bool [n, c]``) differ; every state must carry a mark or reach one that does.

    Each mark is a column to one extra accepting state, so plain Hopcroft minimisation
    keeps the marks apart; they are read back after. Returns the minimal transitions
    (start state 0) and their marks (``bool [m, c]``)."""
    n = trans.shape[0]
    mark = n
    aug = np.full((n + 1, 256 + marks.shape[1]), -1, np.int32)
    aug[:n, :256] = trans
    aug[:n, 256:] = np.where(marks, mark, -1)
    acc = np.zeros(n + 1, bool)
    acc[mark] = True
    t, a = minimize(aug, acc)
    m = int(np.flatnonzero(a)[0])
    keep = np.flatnonzero(np.arange(t.shape[0]) != m)
    new_id = np.full(t.shape[0], -1, np.int32)
    new_id[keep] = np.arange(keep.shape[0], dtype=np.int32)
    real = t[keep, :256]
    real = np.where(real >= 0, new_id[np.where(real >= 0, real, 0)], -1).astype(np.int32)
    return real, t[keep, 256:] == m


def nfa_to_byte_dfa(
    nfa: NFA, *, where: str = "regex", max_states: int = DEFAULT_MAX_DFA_STATES
) -> ByteDFA:
    """Determinise (the whole text matched: assertions see the text's start and end),
    encode as UTF-8, and minimise."""
    alpha = _Alphabet(nfa)
    if nfa.n_states <= SMALL_NFA_STATES:
        # small: the Python constructions, faster here than preparing the kernels' arrays,
        # and no kernel to load in a process that has met no large pattern yet
        cdfa = _subset_construction_reference(nfa, alpha, where, max_states)
        live = live_states(cdfa.trans, cdfa.accept)
        if not live[0]:
            return ByteDFA.empty()
        ranges = [cs.ranges for cs in cdfa.blocks]
        rows, acc, _ = utf8_automaton_reference(
            cdfa.trans, cdfa.accept, live, ranges, max_states * 4, where
        )
        return minimal_dfa(rows, np.asarray(acc, bool))
    ca = _determinise(nfa, alpha, where, max_states)
    trans, accept = _to_bytes(ca, max_states * 4, where)
    return minimal_dfa(trans, accept)


# ---------------------------------------------------------------------------------------
# 5. operations on byte DFAs


def _writable(a: np.ndarray, dtype: type) -> np.ndarray:
    """``a`` as a writable C-contiguous array of ``dtype`` (copied only where it is not):
    Numba compiles a kernel again for read-only arrays, so kernels get writable ones."""
    if a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable:
        return a
    return np.array(a, dtype, order="C")


def trim(trans: np.ndarray, accept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep the states reachable from 0 that can reach acceptance; renumber, 0 stays start.

    ``trans``: ``int32 [n, m]`` with ``-1`` for dead (a column per byte, or per byte class).
    Returns empty arrays (``[0, 256]``) when the language is empty. The search and the
    renumbering are Numba kernels (:func:`.product.live_states_of`,
    :func:`.product.keep_states`).
    """
    from .product import keep_states, live_states_of

    n = trans.shape[0]
    if n == 0:
        return trans, accept
    trans, accept = _writable(trans, np.int32), _writable(accept, np.bool_)
    live = live_states_of(trans, accept)
    if not live[0]:
        return np.zeros((0, 256), np.int32), np.zeros(0, bool)
    if live.all():
        return trans, accept
    return keep_states(trans, accept, live)


def _joint_columns(a: ByteDFA, b: ByteDFA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``a`` and ``b`` over their joint byte classes (bytes both put in one class):
    ``(ta int32 [na, m], tb int32 [nb, m], classes int [256])``, the ``m`` joint classes
    numbered in order of their first byte."""
    ta, ca = a.columns()
    tb, cb = b.columns()
    key = ca.astype(np.int32) * 256 + cb
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    rep = first[order]  # a byte of each joint class
    return (
        np.ascontiguousarray(ta[:, ca[rep]]),
        np.ascontiguousarray(tb[:, cb[rep]]),
        rank[inverse.reshape(-1)],
    )


def intersect(a: ByteDFA, b: ByteDFA, *, max_states: int = DEFAULT_MAX_DFA_STATES,
              where: str = "intersection", minimal: bool = True) -> ByteDFA:  # fmt: skip
    """The minimal DFA of the strings both ``a`` and ``b`` accept (product construction,
    over the byte classes both automata respect: :mod:`.product`).

    Raises :class:`~corral.errors.CompileBudgetError` beyond ``max_states`` product states.
    """
    from .product import product_table

    if a.n_states == 0 or b.n_states == 0:
        return ByteDFA.empty()
    ta, tb, classes = _joint_columns(a, b)
    table, accept, n = product_table(
        ta, tb, np.array(a.accept, np.bool_), np.array(b.accept, np.bool_), max_states
    )
    if n < 0:
        raise CompileBudgetError(f"{where}: more than {max_states} automaton states")
    spend(PRODUCT_ROW_STEPS * n, where)
    table, accept = trim(table, accept)
    if table.shape[0] == 0:
        return ByteDFA.empty()
    if not minimal:
        small, col_class = column_classes(table)
        return ByteDFA.from_columns(small, col_class[classes], accept)
    return minimal_dfa(table, accept, classes)


def complement(a: ByteDFA) -> ByteDFA:
    """The complete (untrimmed) DFA of all byte strings ``a`` rejects, in the compact form
    of ``a``'s byte classes (its sink, state ``n``, reads every byte back to itself).

    Meant as an operand of :func:`intersect` (see :func:`difference`): it is not trimmed."""
    n = a.n_states
    sink = n
    table, classes = a.columns() if n else (np.zeros((0, 1), np.int32), np.zeros(256, np.uint8))
    out = np.full((n + 1, table.shape[1]), sink, np.int32)
    out[:n] = np.where(table >= 0, table, sink)
    accept = np.ones(n + 1, bool)
    accept[:n] = ~a.accept
    return ByteDFA.from_columns(out, classes, accept)


def difference(a: ByteDFA, b: ByteDFA, *, max_states: int = DEFAULT_MAX_DFA_STATES,
               where: str = "difference", minimal: bool = True) -> ByteDFA:  # fmt: skip
    """The DFA (minimal unless ``minimal=False``) of the strings ``a`` accepts and ``b``
    does not."""
    return intersect(a, complement(b), max_states=max_states, where=where, minimal=minimal)


def difference_of_literals(
    a: ByteDFA,
    words: list[bytes],
    *,
    max_states: int = DEFAULT_MAX_DFA_STATES,
    where: str = "difference",
    minimal: bool = True,
) -> ByteDFA:
    """The DFA (minimal unless ``minimal=False``; compact form) of the strings ``a``
    accepts other than ``words``: :func:`difference` with :func:`union_of_literals`, built
    directly.

    A string read by ``a`` has one state of ``a``, so the product with the words' trie has
    one state per trie node (a prefix of a word that ``a`` can read) and, off the trie,
    the states of ``a`` itself. A trie node's row is its ``a``-state's row, with the bytes
    that extend a word sent to the child node; it accepts when its ``a``-state does and it
    is not a whole word. ``O(trie nodes x columns)``, with no product search; the columns
    are ``a``'s byte classes, and one for each byte that labels a trie edge (a property
    name's letters: tens of columns where the bytes are 256). The trie, the rows, the trim
    and the compact form are one kernel call (:func:`.product.trie_difference`).

    Raises :class:`~corral.errors.CompileBudgetError` beyond ``max_states`` states.
    """
    from .product import trie_difference

    if a.n_states == 0:
        return ByteDFA.empty()
    table, classes = a.columns()  # int32 [n, m], uint8 [256]
    args = (
        _writable(table, np.int32),
        _writable(classes, np.uint8),
        _writable(a.accept, np.bool_),
        np.frombuffer(b"".join(words), np.uint8).copy(),  # writable (see _writable)
        np.array([0, *itertools.accumulate(map(len, words))], np.int64),
    )
    small, cls, acc, k = trie_difference(*args)  # the product, trimmed, compact
    if k + a.n_states > max_states:
        raise CompileBudgetError(f"{where}: more than {max_states} automaton states")
    spend(PRODUCT_ROW_STEPS * k, where)
    return _of_compact_form(small, cls, acc, minimal=minimal)


def union_of_literals(words: list[bytes]) -> ByteDFA:
    """The minimal DFA accepting exactly the byte strings in ``words``.

    Built as a trie, then minimised bottom-up: two states are merged when they agree on
    acceptance and lead to the same merged states on the same bytes, which for an acyclic
    automaton gives the minimal one in time linear in the total length."""
    if not words:
        return ByteDFA.empty()
    children: list[dict[int, int]] = [{}]
    accept = [False]
    for w in words:
        s = 0
        for byte in w:
            t = children[s].get(byte)
            if t is None:
                t = len(children)
                children.append({})
                accept.append(False)
                children[s][byte] = t
            s = t
        accept[s] = True
    # children have larger ids than their parent: reverse id order visits them first
    merged = [0] * len(children)
    register: dict[tuple[bool, tuple[tuple[int, int], ...]], int] = {}
    for s in range(len(children) - 1, -1, -1):
        sig = (accept[s], tuple(sorted((b, merged[t]) for b, t in children[s].items())))
        merged[s] = register.setdefault(sig, len(register))
    # number the merged states breadth first from the start state
    rep: dict[int, int] = {}  # merged state -> a trie state it stands for
    for s in range(len(children)):
        rep.setdefault(merged[s], s)
    order = {merged[0]: 0}
    todo = [merged[0]]
    i = 0
    while i < len(todo):
        for _, t in sorted(children[rep[todo[i]]].items()):
            if merged[t] not in order:
                order[merged[t]] = len(order)
                todo.append(merged[t])
        i += 1
    trans = np.full((len(order), 256), -1, np.int32)
    acc = np.zeros(len(order), bool)
    for m, new in order.items():
        s = rep[m]
        acc[new] = accept[s]
        for b, t in children[s].items():
            trans[new, b] = order[merged[t]]
    return ByteDFA(trans, acc)


def quoted(body: ByteDFA, quote: int = 0x22, *, minimal: bool = True) -> ByteDFA:
    """``quote body quote``: the DFA of the body's strings between two quote bytes.

    Where the body may end it must not read the quote byte (JSON string bodies read it
    only after a backslash), so the closing quote is unambiguous. Built over the body's
    byte classes (its compact columns), the quote byte in a class of its own.
    """
    n = body.n_states
    if n == 0:
        return body
    table, classes = body.columns()  # int32 [n, m], uint8 [256], m in first-byte order
    q = int(classes[quote])
    if np.any(table[body.accept, q] >= 0):
        raise ValueError("the body reads the quote byte where it may end")
    m = table.shape[1]
    alone = int(np.count_nonzero(classes == q)) == 1
    cols = m if alone else m + 1
    trans = np.full((n + 2, cols), -1, np.int32)
    trans[1 : n + 1, :m] = np.where(table >= 0, table + 1, -1)
    byte_col = classes.astype(np.intp)
    if not alone:  # the quote byte leaves its class: a column of its own, the same reads
        trans[1 : n + 1, m] = trans[1 : n + 1, q]
        byte_col = byte_col.copy()
        byte_col[quote] = q = m
    final = n + 1
    trans[0, q] = 1
    trans[np.flatnonzero(body.accept) + 1, q] = final
    accept = np.zeros(n + 2, bool)
    accept[final] = True
    # No trim: the body is trimmed, so every state is reachable from the opening quote and
    # reaches the closing one.
    return dfa_of_columns(trans, byte_col, accept, minimal=minimal)


def dfa_of_columns(
    trans: np.ndarray, byte_col: np.ndarray, accept: np.ndarray, *, minimal: bool
) -> ByteDFA:
    """The DFA given over columns (``trans`` ``int32 [n, k]``, state 0 the start; byte
    ``b`` reads column ``byte_col[b]``, ``int [256]``) in the canonical compact form: the
    columns no byte reads dropped, then the states trimmed (a path through a dropped
    column does not keep a state alive), the columns numbered by their first byte and
    equal ones merged (one kernel, :func:`.product.compact_form`); then minimised when
    ``minimal``."""
    from .product import compact_form

    table, classes, acc = compact_form(
        _writable(trans, np.int32), _writable(byte_col, np.int64), _writable(accept, np.bool_)
    )
    return _of_compact_form(table, classes, acc, minimal=minimal)


def _of_compact_form(
    table: np.ndarray, classes: np.ndarray, accept: np.ndarray, *, minimal: bool
) -> ByteDFA:
    """The :class:`ByteDFA` of a canonical compact form (``table int32 [n, k]``, ``classes
    uint8 [256]``, ``accept bool [n]``, trimmed; ``n = 0``: the empty language), minimised
    when ``minimal``."""
    if not accept.shape[0]:
        return ByteDFA.empty()
    if minimal:
        return minimal_dfa(table, accept, classes)
    return ByteDFA.from_columns(table, classes, accept)
