"""The automaton of text outside monitored regions, which says where a trigger fires.

A monitor's trigger is a Python regular expression over the text outside monitored
regions: the text generated so far, or since the last region ended (a region's own text
is not searched, and a trigger does not look back into it). It *fires* at the first
position where some suffix of that text matches it in full: ``\\.``
fires after each ``.`` (the text then ends with a match), ``(?<![\\w.])[A-Za-z_]\\w*\\.``
after a name and a dot that no other name or dot precedes, and ``^import `` only at the
start of the text (``^`` without ``(?m)`` is the text's start; a trailing ``$`` or ``\\Z``
is the text's end, which a fired trigger is at anyway).

Outside regions the text is valid UTF-8, read byte by byte through the product of the
triggers' search automata (each one the language ``.*T``, the search for ``T`` at every
position). A state where some trigger fires has no transitions: text cannot run past a
trigger without the monitor seeing it, so a token can end where a trigger fires but not
cross it (``obj.`` then ``append``, never ``.append`` in one token). Every state accepts:
the text may end anywhere outside a region.

When several triggers fire at the same byte, the first monitor in the list wins; the
others' matches are not remembered (they fire again only on later text).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError
from ..grammar.regex import ByteDFA, python_regex_dfa
from ..grammar.regex.dfa import minimize_marked

__all__ = ["TriggerAutomaton", "search_dfa", "trigger_automaton"]

# global inline flags at the start of a pattern, e.g. ``(?i)``: they must stay first
_GLOBAL_FLAGS = re.compile(r"\(\?[aiLmsux]+\)")
MAX_TRIGGER_STATES = 4096
"""Budget of the product automaton of a monitor set's triggers (states)."""


@dataclass(frozen=True, eq=False)  # compared and hashed by identity
class TriggerAutomaton:
    """Text outside monitored regions, and where each trigger fires.

    Attributes:
        dfa: ``trans int32 [n, 256]`` (``-1``: the byte cannot come here), every state
            accepting, start state ``0``.
        fired: ``int32 [n]``: the index of the monitor whose trigger fires on reaching the
            state, or ``-1``. A state with ``fired >= 0`` has no transitions.
    """

    dfa: ByteDFA
    fired: np.ndarray

    def run(self, state: int, data: bytes) -> int:
        """The state after ``data`` from ``state``; ``-1`` if the text cannot come here
        (invalid UTF-8, or bytes after a fired trigger)."""
        trans = self.dfa.trans
        for b in data:
            if state < 0:
                return -1
            state = int(trans[state, b])
        return state


@functools.lru_cache(maxsize=256)
def search_dfa(pattern: str) -> ByteDFA:
    """The DFA of valid UTF-8 texts that end with a match of ``pattern``: ``.*T``.

    Raises:
        InvalidArgumentError: an empty pattern, one that matches the empty string (it would
            fire before any text), or one corral's regex reader refuses (named, with why).
    """
    if not isinstance(pattern, str) or not pattern:
        raise InvalidArgumentError(f"a trigger must be a non-empty regex, got {pattern!r}")
    flags = _GLOBAL_FLAGS.match(pattern)
    head, body = (flags.group(0), pattern[flags.end() :]) if flags else ("", pattern)
    try:
        if python_regex_dfa(head + body).matches(b""):
            raise InvalidArgumentError(
                f"trigger {pattern!r} matches the empty string: it would fire before any text"
            )
        return python_regex_dfa(f"{head}(?s:.*)(?:{body})", where=f"trigger {pattern!r}")
    except InvalidArgumentError:
        raise
    except Exception as e:  # GrammarError, UnsupportedFeatureError, budgets: say which
        raise InvalidArgumentError(f"trigger {pattern!r}: {e}") from e


def trigger_automaton(patterns: Sequence[str]) -> TriggerAutomaton:
    """The :class:`TriggerAutomaton` of monitors whose triggers are ``patterns`` (in the
    monitors' order: the first one wins a tie).

    Raises:
        InvalidArgumentError: no pattern, a pattern :func:`search_dfa` refuses, or a
            product of more than :data:`MAX_TRIGGER_STATES` states.
    """
    if not patterns:
        raise InvalidArgumentError("a trigger automaton needs at least one trigger")
    # component 0 reads UTF-8 (it decides which bytes may come); the others are the
    # triggers' searches, where -1 means "can no longer fire" (``^import `` after ``x``)
    parts = [_utf8(), *(search_dfa(p) for p in patterns)]
    dead = np.full(256, -1, np.int32)
    index: dict[tuple[int, ...], int] = {tuple(0 for _ in parts): 0}
    order = [tuple(0 for _ in parts)]
    rows: list[np.ndarray] = []
    fired: list[int] = []
    i = 0
    while i < len(order):
        states = order[i]
        i += 1
        hit = next(
            (
                m
                for m, (d, s) in enumerate(zip(parts[1:], states[1:], strict=True))
                if s >= 0 and d.accept[s]
            ),
            -1,
        )
        fired.append(hit)
        row = np.full(256, -1, np.int32)
        rows.append(row)
        if hit >= 0:
            continue  # a trigger fires here: the monitor takes over
        nxt = np.stack([d.row(s) if s >= 0 else dead for d, s in zip(parts, states, strict=True)])
        for b in np.flatnonzero(nxt[0] >= 0).tolist():
            key = tuple(int(x) for x in nxt[:, b])
            j = index.get(key)
            if j is None:
                if len(order) >= MAX_TRIGGER_STATES:
                    raise InvalidArgumentError(
                        f"the triggers {list(patterns)!r} need more than "
                        f"{MAX_TRIGGER_STATES} states together"
                    )
                j = index[key] = len(order)
                order.append(key)
            row[b] = j
    trans = np.stack(rows)
    labels = np.asarray(fired, np.int32)
    return _minimal(trans, labels, len(patterns))


@functools.lru_cache(maxsize=1)
def _utf8() -> ByteDFA:
    return python_regex_dfa(r"[\s\S]*")


def _minimal(trans: np.ndarray, fired: np.ndarray, k: int) -> TriggerAutomaton:
    """Minimise ``trans`` (every state accepting) keeping states of different ``fired``
    labels apart (label ``k`` stands for "none", so every state carries a mark)."""
    marks = np.zeros((trans.shape[0], k + 1), bool)
    marks[np.arange(trans.shape[0]), np.where(fired >= 0, fired, k)] = True
    real, marked = minimize_marked(trans, marks)
    labels = np.where(marked[:, :k].any(axis=1), marked[:, :k].argmax(axis=1), -1)
    return TriggerAutomaton(ByteDFA(real, np.ones(real.shape[0], bool)), labels.astype(np.int32))
