"""Exact digit-level automata for the numeric keywords of JSON Schema.

``minimum``/``maximum`` (inclusive or exclusive) and ``multipleOf`` become byte DFAs over JSON
number literals. Nothing here uses floating point: bounds are :class:`int` or
:class:`~decimal.Decimal` and are only ever split into their decimal digits, compared digit by
digit, or turned into integers.

How the automata are built
--------------------------

Every automaton is explored from its start state by a small "state machine" whose states are
plain tuples; the reachable part becomes a transition table, which is trimmed and minimised
(:func:`~corral.grammar.regex.dfa.minimize`), so the results are the minimal DFAs.

*Ranges.* A literal is an optional ``-`` and an unsigned part ``0|[1-9][0-9]*`` with an
optional ``.[0-9]+``. Each sign is a branch with its own bounds on the unsigned value ``x``:
``lo <= v <= hi`` with ``v = x`` or ``v = -x`` (the negative branch swaps and negates the
bounds). A bound ``c >= 0`` is compared with ``x`` while the digits arrive:

* integer part: since neither has leading zeros, a longer integer part is larger; with equal
  lengths the first differing digit decides. The comparator remembers how many digits were
  read (up to the length of ``c``'s integer part) and the first difference seen;
* fraction part (only if the integer parts are equal): the first differing digit decides,
  with ``c``'s fraction padded by zeros (so ``0.500`` equals ``0.5``).

A comparator whose outcome can no longer change is dropped when it is satisfied and kills the
state when it is violated, so the automaton has ``O(len(lo) + len(hi))`` states.

*multipleOf.* ``m = a / 10**s`` (``s`` as small as possible). A literal ``v`` is a multiple of
``m`` iff ``W = v * 10**s`` is an integer divisible by ``a``. ``W``'s digits are those of ``v``
with the decimal point moved ``s`` places (fraction digits past the ``s``-th must be ``0``,
missing ones count as ``0``). ``a`` is split as ``c * 2**x * 5**y`` with ``c`` prime to 10:

* divisibility by ``c`` needs the remainder ``W mod c``;
* divisibility by ``2**x * 5**y = 10**z * q`` (``q`` a power of 2 or of 5) needs only the
  trailing zeros of ``W`` (counted up to a cap) and the remainder modulo ``q`` of ``W``
  without them, so e.g. ``multipleOf: 1000000`` costs a handful of states, not a million.

Both parts are built and minimised on their own and then intersected.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np

from ...errors import CompileBudgetError
from ..regex.dfa import ByteDFA, intersect, live_states, minimal_dfa, shared_automata

__all__ = ["integer_dfa", "multiple_of_dfa", "number_dfa"]

DEFAULT_MAX_STATES = 50_000

_MINUS = ord("-")
_DOT = ord(".")
_ZERO = ord("0")
_DIGITS = bytes(range(_ZERO, _ZERO + 10))

# Unsigned-literal phases.
_BEGIN = "B"  # nothing of the unsigned part read yet
_INT_ZERO = "Z"  # the integer part is "0"
_INT = "N"  # integer part [1-9][0-9]*
_POINT = "P"  # "." read, a fraction digit must follow
_FRAC = "F"  # at least one fraction digit read
_ENDS = frozenset((_INT_ZERO, _INT, _FRAC))

_START = ("S",)

# Automaton states are tuples of plain values (ints, strings, nested tuples, None).
_State = tuple[Any, ...]


def _empty() -> ByteDFA:
    return ByteDFA.empty()


# ---------------------------------------------------------------------------------------
# exploration → minimal DFA


def _explore(
    start: _State,
    step: Callable[[_State, int], _State | None],
    accepting: Callable[[_State], bool],
    alphabet: bytes,
    max_states: int | None,
    where: str,
) -> ByteDFA:
    """The minimal DFA of the states reachable from ``start`` (``step`` returns ``None`` for
    a dead transition)."""
    index: dict[_State, int] = {start: 0}
    states: list[_State] = [start]
    edges: list[list[tuple[int, int]]] = []
    i = 0
    while i < len(states):
        state = states[i]
        i += 1
        out: list[tuple[int, int]] = []
        for b in alphabet:
            nxt = step(state, b)
            if nxt is None:
                continue
            j = index.get(nxt)
            if j is None:
                if max_states is not None and len(states) >= max_states:
                    raise CompileBudgetError(
                        f"{where}: the automaton needs more than {max_states} states; "
                        "raise max_states or loosen the constraint"
                    )
                j = index[nxt] = len(states)
                states.append(nxt)
            out.append((b, j))
        edges.append(out)
    n = len(states)
    accept = [accepting(state) for state in states]
    # Every state is reachable by construction; keep those that can reach acceptance.
    live = live_states([dict(out) for out in edges], accept)
    if not live[0]:
        return _empty()
    new_id = [-1] * n
    k = 0
    for u in range(n):
        if live[u]:
            new_id[u] = k
            k += 1
    trans = np.full((k, 256), -1, np.int32)
    acc = np.zeros(k, bool)
    for u in range(n):
        if not live[u]:
            continue
        row = trans[new_id[u]]
        acc[new_id[u]] = accept[u]
        for b, v in edges[u]:
            if live[v]:
                row[b] = new_id[v]
    return minimal_dfa(trans, acc)


# ---------------------------------------------------------------------------------------
# bounds


def _as_decimal(x: object, name: str) -> Decimal:
    if isinstance(x, bool) or not isinstance(x, (int, Decimal)):
        raise ValueError(
            f"{name} must be an int or a decimal.Decimal, not {type(x).__name__} "
            "(parse JSON with parse_float=Decimal to keep bounds exact)"
        )
    d = Decimal(x) if isinstance(x, int) else x
    if not d.is_finite():
        raise ValueError(f"{name} must be finite, not {d}")
    return d


def _split(c: Decimal, max_digits: int | None, where: str) -> tuple[str, str]:
    """Integer digits (no leading zeros, ``"0"`` for zero) and fraction digits (no trailing
    zeros) of ``|c|``."""
    _sign, digits, exp = c.as_tuple()
    assert isinstance(exp, int)
    n = len(digits)
    size = n + exp if exp >= 0 else max(n, -exp) + 1
    if max_digits is not None and size > max_digits:
        raise CompileBudgetError(
            f"{where}: the bound {c} has about {size} digits; the automaton would need more "
            f"than {max_digits} states"
        )
    ds = "".join(map(str, digits))
    if exp >= 0:
        ip, fp = ds + "0" * exp, ""
    else:
        k = n + exp
        ip, fp = (ds[:k], ds[k:]) if k > 0 else ("", "0" * (-k) + ds)
    return ip.lstrip("0") or "0", fp.rstrip("0")


# Comparator states (for one bound ``c`` against the unsigned value ``x`` being read):
#   ("I", k, rel)  integer part, k digits read (k <= len(ci)), rel = sign of the first
#                  difference between them and ci[:k] (0 if none yet);
#   ("F", j)       integer parts equal, the j fraction digits read equal cf[:j]
#                  (j == len(cf): all of cf matched, only zeros may follow to stay equal);
#   ("D", sgn)     decided: sign(x - c) is sgn whatever follows.
# A decided comparator is replaced by ``None`` (satisfied) or ``_DEAD`` (violated).
_DEAD = ("X",)
_INIT = ("I", 0, 0)

_Cmp = _State | None


def _sgn(a: int, b: int) -> int:
    return (a > b) - (a < b)


class _Bound:
    """One side of the range for the unsigned part of a literal."""

    __slots__ = ("cf", "ci", "exclusive", "lower")

    def __init__(
        self, c: Decimal, exclusive: bool, lower: bool, max_digits: int | None, where: str
    ) -> None:
        self.ci, self.cf = _split(c, max_digits, where)
        self.exclusive = exclusive
        self.lower = lower

    def _settle(self, st: _State) -> _Cmp:
        if st[0] != "D":
            return st
        sgn = st[1]
        return None if (sgn > 0 if self.lower else sgn < 0) else _DEAD

    def int_digit(self, st: _State, b: int) -> _Cmp:
        _tag, k, rel = st
        if k >= len(self.ci):
            return self._settle(("D", 1))  # x has the longer integer part
        if rel == 0:
            rel = _sgn(b, ord(self.ci[k]))
        return ("I", k + 1, rel)

    def _resolve(self, st: _State) -> _State:
        """The state once the integer part of x is complete."""
        if st[0] != "I":
            return st
        _tag, k, rel = st
        if k < len(self.ci):
            return ("D", -1)
        return ("F", 0) if rel == 0 else ("D", rel)

    def point(self, st: _State, _b: int = 0) -> _Cmp:
        return self._settle(self._resolve(st))

    def frac_digit(self, st: _State, b: int) -> _Cmp:
        _tag, j = st
        if j < len(self.cf):
            r = _sgn(b, ord(self.cf[j]))
            return ("F", j + 1) if r == 0 else self._settle(("D", r))
        return st if b == _ZERO else self._settle(("D", 1))

    def holds_at_end(self, st: _State) -> bool:
        st = self._resolve(st)
        if st[0] == "F":
            j = st[1]
            r = 0 if j == len(self.cf) else -1  # cf has no trailing zeros: x < c if unmatched
        else:
            r = st[1]
        if r == 0:
            return not self.exclusive
        return r > 0 if self.lower else r < 0


class _Branch:
    """The bounds on the unsigned part ``x`` for one sign (``None``: unbounded)."""

    __slots__ = ("hi", "lo", "no_zero")

    def __init__(self, lo: _Bound | None, hi: _Bound | None, no_zero: bool) -> None:
        self.lo = lo
        self.hi = hi
        self.no_zero = no_zero  # "-0" is refused (integer syntax)


def _cmp_step(
    bound: _Bound | None, st: _Cmp, op: Callable[[_Bound, _State, int], _Cmp], b: int
) -> _Cmp:
    """Advance one comparator (``None``: no constraint left on that side)."""
    if bound is None or st is None:
        return None
    return op(bound, st, b)


def _cmp_holds(bound: _Bound | None, st: _Cmp) -> bool:
    return bound is None or st is None or bound.holds_at_end(st)


def _branches(
    lo: Decimal | None,
    hi: Decimal | None,
    excl_lo: bool,
    excl_hi: bool,
    integer: bool,
    max_digits: int | None,
    where: str,
) -> tuple[_Branch | None, _Branch | None]:
    """The positive (``x = v``) and negative (``x = -v``) branches; ``None`` when empty."""

    def side(
        low: Decimal | None, low_excl: bool, high: Decimal | None, high_excl: bool, neg: bool
    ) -> _Branch | None:
        # Bounds on x >= 0: low <= x <= high.
        if high is not None and (high < 0 or (high == 0 and high_excl)):
            return None
        lb = None
        if low is not None and (low > 0 or (low == 0 and low_excl)):
            lb = _Bound(low, low_excl, True, max_digits, where)
        hb = None if high is None else _Bound(high, high_excl, False, max_digits, where)
        return _Branch(lb, hb, integer and neg)

    pos = side(lo, excl_lo, hi, excl_hi, False)
    neg = side(
        None if hi is None else hi.copy_negate(),
        excl_hi,
        None if lo is None else lo.copy_negate(),
        excl_lo,
        True,
    )
    return pos, neg


@shared_automata(maxsize=256)
def _range_dfa(
    lo: Decimal | None,
    hi: Decimal | None,
    excl_lo: bool,
    excl_hi: bool,
    integer: bool,
    max_states: int | None,
    where: str,
) -> ByteDFA:
    if lo is not None and hi is not None and (lo > hi or (lo == hi and (excl_lo or excl_hi))):
        return _empty()
    branches = _branches(lo, hi, excl_lo, excl_hi, integer, max_states, where)
    if branches == (None, None):
        return _empty()

    def begin(k: int) -> _State | None:
        br = branches[k]
        if br is None:
            return None
        return (k, _BEGIN, None if br.lo is None else _INIT, None if br.hi is None else _INIT)

    def step(state: _State, b: int) -> _State | None:
        if state == _START:
            if b == _MINUS:
                return begin(1)
            first = begin(0)
            if first is None:
                return None
            state = first
        k, phase, lc, hc = state
        br = branches[k]
        assert br is not None
        if _ZERO <= b <= _ZERO + 9:
            if phase == _BEGIN:
                if b == _ZERO and br.no_zero:
                    return None
                phase = _INT_ZERO if b == _ZERO else _INT
            elif phase == _INT_ZERO:
                return None
            if phase in (_INT_ZERO, _INT):
                lc = _cmp_step(br.lo, lc, _Bound.int_digit, b)
                hc = _cmp_step(br.hi, hc, _Bound.int_digit, b)
            else:
                phase = _FRAC
                lc = _cmp_step(br.lo, lc, _Bound.frac_digit, b)
                hc = _cmp_step(br.hi, hc, _Bound.frac_digit, b)
        elif b == _DOT and not integer and phase in (_INT_ZERO, _INT):
            phase = _POINT
            lc = _cmp_step(br.lo, lc, _Bound.point, b)
            hc = _cmp_step(br.hi, hc, _Bound.point, b)
        else:
            return None
        if lc is _DEAD or hc is _DEAD:
            return None
        return (k, phase, lc, hc)

    def accepting(state: _State) -> bool:
        if state == _START:
            return False
        k, phase, lc, hc = state
        if phase not in _ENDS:
            return False
        br = branches[k]
        assert br is not None
        return _cmp_holds(br.lo, lc) and _cmp_holds(br.hi, hc)

    alphabet = bytes([_MINUS, *_DIGITS] + ([] if integer else [_DOT]))
    return _explore(_START, step, accepting, alphabet, max_states, where)


def integer_dfa(minimum: int | None = None, maximum: int | None = None) -> ByteDFA:
    """JSON integer literals ``-?(0|[1-9][0-9]*)`` whose value ``v`` satisfies
    ``minimum <= v <= maximum`` (``None``: unbounded on that side).

    ``"-0"`` is not produced. An empty range gives the empty DFA (``n_states == 0``).
    Raises :class:`ValueError` for bounds that are not ``int``.
    """
    for name, x in (("minimum", minimum), ("maximum", maximum)):
        if x is not None and (isinstance(x, bool) or not isinstance(x, int)):
            raise ValueError(f"{name} must be an int or None, not {type(x).__name__}")
    lo = None if minimum is None else Decimal(minimum)
    hi = None if maximum is None else Decimal(maximum)
    return _range_dfa(lo, hi, False, False, True, None, "integer range")


def number_dfa(
    minimum: Decimal | int | None = None,
    maximum: Decimal | int | None = None,
    *,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
    max_states: int = DEFAULT_MAX_STATES,
) -> ByteDFA:
    """JSON number literals whose exact decimal value lies in the range.

    Unbounded on both sides: the full JSON number grammar
    ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``.
    With any bound: literals without an exponent, ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?``, exact at
    every digit (minimum ``0.5`` exclusive rejects ``"0.5"`` and ``"0.500"`` and accepts
    ``"0.50001"``); ``"-0"``, ``"-0.0"``, … are accepted only where 0 is in the range.

    Bounds are ``int`` or finite :class:`~decimal.Decimal` (a ``float`` is refused with
    :class:`ValueError`: it is not the decimal the schema wrote). An exclusive flag without its
    bound is a :class:`ValueError`. An empty range gives the empty DFA. Raises
    :class:`~corral.errors.CompileBudgetError` if the automaton needs more than ``max_states``
    states (only for bounds with a great many digits).
    """
    lo = None if minimum is None else _as_decimal(minimum, "minimum")
    hi = None if maximum is None else _as_decimal(maximum, "maximum")
    if exclusive_minimum and lo is None:
        raise ValueError("exclusive_minimum needs a minimum")
    if exclusive_maximum and hi is None:
        raise ValueError("exclusive_maximum needs a maximum")
    if lo is None and hi is None:
        return _json_number_dfa()
    return _range_dfa(
        lo, hi, exclusive_minimum, exclusive_maximum, False, max_states, "number range"
    )


@shared_automata(maxsize=1)
def _json_number_dfa() -> ByteDFA:
    """``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``."""
    # phases: S start, M after "-", Z "0", N integer, P ".", F fraction, E "e",
    # G exponent sign, X exponent digits
    digit = {"M": "N", "P": "F", "F": "F", "E": "X", "G": "X", "X": "X", "N": "N", "S": "N"}

    def step(state: _State, b: int) -> _State | None:
        (p,) = state
        if b == _ZERO and p in ("S", "M"):
            return ("Z",)
        if _ZERO <= b <= _ZERO + 9:
            nxt = digit.get(p)
            return None if nxt is None else (nxt,)
        if b == _MINUS:
            return ("M",) if p == "S" else ("G",) if p == "E" else None
        if b == ord("+"):
            return ("G",) if p == "E" else None
        if b == _DOT:
            return ("P",) if p in ("Z", "N") else None
        if b in (ord("e"), ord("E")):
            return ("E",) if p in ("Z", "N", "F") else None
        return None

    return _explore(
        ("S",),
        step,
        lambda s: s in (("Z",), ("N",), ("F",), ("X",)),
        b"-+.eE" + _DIGITS,
        None,
        "JSON number",
    )


# ---------------------------------------------------------------------------------------
# multipleOf


def _valuation(n: int, p: int) -> tuple[int, int]:
    """``(k, n / p**k)`` with ``p**k`` the largest power of ``p`` dividing ``n > 0``."""
    k = 0
    while n % p == 0:
        n //= p
        k += 1
    return k, n


def _ratio(m: object) -> tuple[int, int]:
    """``m = n * 10**e`` with ``n > 0`` not divisible by 10: returns ``(n, e)``."""
    if isinstance(m, bool) or not isinstance(m, (int, Decimal)):
        raise ValueError(
            f"multipleOf must be an int or a decimal.Decimal, not {type(m).__name__} "
            "(parse JSON with parse_float=Decimal to keep it exact)"
        )
    if isinstance(m, int):
        if m <= 0:
            raise ValueError(f"multipleOf must be > 0, not {m}")
        z, n = _valuation(m, 10)
        return n, z
    if not m.is_finite() or m <= 0:
        raise ValueError(f"multipleOf must be a finite number > 0, not {m}")
    _sign, digits, exp = m.as_tuple()
    assert isinstance(exp, int)
    z, n = _valuation(int("".join(map(str, digits))), 10)
    return n, exp + z


class _Tracker:
    """Divisibility of the integer ``W`` whose decimal digits are fed one by one."""

    def start(self) -> Any:
        raise NotImplementedError

    def feed(self, t: Any, d: int) -> Any:
        raise NotImplementedError

    def feed_zeros(self, t: Any, k: int) -> Any:
        raise NotImplementedError

    def divides(self, t: Any) -> bool:
        raise NotImplementedError


class _Coprime(_Tracker):
    """``c | W`` for ``c`` prime to 10: the remainder ``W mod c``."""

    def __init__(self, c: int) -> None:
        self.c = c

    def start(self) -> Any:
        return 0

    def feed(self, t: Any, d: int) -> Any:
        return (t * 10 + d) % self.c

    def feed_zeros(self, t: Any, k: int) -> Any:
        return t * pow(10, k, self.c) % self.c

    def divides(self, t: Any) -> bool:
        return t == 0


class _TenPower(_Tracker):
    """``10**z * q | W`` for ``q = p**t`` (``p`` = 2 or 5, or ``q = 1``).

    State ``(r, zeros)``: ``r`` is ``P mod q`` where ``W = P * 10**zeros`` and ``P`` ends in a
    non-zero digit (``r = None`` while ``W == 0``); ``zeros`` is capped at ``z + t``, beyond
    which ``P * 10**(zeros - z)`` is a multiple of ``q`` anyway.
    """

    def __init__(self, z: int, q: int, t: int) -> None:
        self.z = z
        self.q = q
        self.cap = z + t

    def start(self) -> Any:
        return (None, 0)

    def feed(self, t: Any, d: int) -> Any:
        r, zeros = t
        if d == 0:
            return t if r is None else (r, min(zeros + 1, self.cap))
        if r is None:
            return (d % self.q, 0)
        return ((r * pow(10, zeros + 1, self.q) + d) % self.q, 0)

    def feed_zeros(self, t: Any, k: int) -> Any:
        r, zeros = t
        return t if r is None else (r, min(zeros + k, self.cap))

    def divides(self, t: Any) -> bool:
        r, zeros = t
        if r is None:
            return True
        return zeros >= self.z and r * pow(10, zeros - self.z, self.q) % self.q == 0


def _multiple_dfa(tr: _Tracker, s: int, integer: bool, max_states: int, where: str) -> ByteDFA:
    """Literals ``v`` with ``W = v * 10**s`` an integer that ``tr`` accepts."""
    # States: ("S",) start, ("M",) after "-", (phase, j, t) with j fraction digits
    # consumed into W (j <= s) and t the tracker state.
    t0 = tr.start()

    def step(state: _State, b: int) -> _State | None:
        if state == _START:
            if b == _MINUS:
                return ("M",)
            phase, j, t = _BEGIN, 0, t0
        elif state == ("M",):
            if b == _ZERO and integer:
                return None  # "-0"
            phase, j, t = _BEGIN, 0, t0
        else:
            phase, j, t = state
        if _ZERO <= b <= _ZERO + 9:
            if phase == _BEGIN:
                return (_INT_ZERO if b == _ZERO else _INT, 0, tr.feed(t, b - _ZERO))
            if phase == _INT:
                return (_INT, 0, tr.feed(t, b - _ZERO))
            if phase in (_POINT, _FRAC):
                if j < s:
                    return (_FRAC, j + 1, tr.feed(t, b - _ZERO))
                return (_FRAC, j, t) if b == _ZERO else None
            return None
        if b == _DOT and not integer and phase in (_INT_ZERO, _INT):
            return (_POINT, 0, t)
        return None

    def accepting(state: _State) -> bool:
        if state in (_START, ("M",)):
            return False
        phase, j, t = state
        return phase in _ENDS and tr.divides(tr.feed_zeros(t, s - j))

    alphabet = bytes([_MINUS, *_DIGITS] + ([] if integer else [_DOT]))
    return _explore(_START, step, accepting, alphabet, max_states, where)


def multiple_of_dfa(
    m: Decimal | int, *, integer: bool = False, max_states: int = DEFAULT_MAX_STATES
) -> ByteDFA:
    """Literals whose value is an exact multiple of ``m > 0``.

    ``integer``: integer syntax ``0|-?[1-9][0-9]*`` (as :func:`integer_dfa`, no ``"-0"``);
    otherwise number syntax without exponent, ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?`` (``"-0"`` and
    ``"-0.0"`` are multiples: they equal 0). ``m`` is an ``int`` or a finite
    :class:`~decimal.Decimal` such as ``0.01`` or ``2.5``: ``v`` is a multiple of ``a / 10**s``
    iff ``v * 10**s`` is an integer divisible by ``a``.

    Raises :class:`ValueError` for ``m <= 0`` or a non-exact type (``float``), and
    :class:`~corral.errors.CompileBudgetError` if an automaton built on the way (one per
    prime-to-10 and 2-and-5 part of ``a``, then their product) needs more than ``max_states``
    states.
    """
    n, e = _ratio(m)  # m = n * 10**e, 10 does not divide n
    where = f"multipleOf {m}"
    v2, rest = _valuation(n, 2)
    v5, c = _valuation(rest, 5)
    if e >= 0:
        s, x, y = 0, v2 + e, v5 + e
    elif integer:
        # v integer: v * 10**-e divisible by n  <=>  v divisible by n / gcd(n, 10**-e).
        s, x, y = 0, v2 - min(v2, -e), v5 - min(v5, -e)
    else:
        s, x, y = -e, v2, v5
    z = min(x, y)
    p, t = (2, x - z) if x > y else (5, y - z)
    parts: list[_Tracker] = []
    if c > 1:
        parts.append(_Coprime(c))
    if z > 0 or t > 0 or not parts:
        parts.append(_TenPower(z, p**t, t))
    dfas = [_multiple_dfa(tr, s, integer, max_states, where) for tr in parts]
    out = dfas[0]
    for d in dfas[1:]:
        out = intersect(out, d, max_states=max_states, where=where)
    return out
