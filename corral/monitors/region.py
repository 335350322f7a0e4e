"""Grammars of the text a monitor constrains: what its callback allowed, then free text.

Where a trigger fires, the text goes on as one *segment* grammar until the next trigger
fires: ``start: C OUT?``, with ``C`` what the callback returned and ``OUT`` the text
outside regions (``trigger.py``: valid UTF-8, ending at the latest where a trigger
fires). Before the first trigger the segment is ``start: OUT?``. corral's lexer reads a
terminal as far as it can, so a region of names ends where the name cannot be read on;
with ``end="identifier"`` the text after it may not begin with an identifier byte
(``[A-Za-z0-9_]`` or any non-ASCII byte) either, so ``app`` of ``{"app", "append"}`` is
not followed by ``x``. A token may cross the end of a region (``append(``), never a
trigger.

Names become one terminal (an entity set's automaton: its cost follows the vocabulary,
not the number of names); a grammar or a JSON Schema brings its own rules and terminals,
renamed apart from ``OUT``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import ArgumentTypeError, InvalidArgumentError, UnsupportedFeatureError
from ..grammar.entities import EntitySet
from ..grammar.ir import Grammar, Rule, Terminal
from ..grammar.regex import ByteDFA
from ..grammar.regex.dawg import encoded, trie_of
from .trigger import TriggerAutomaton

__all__ = [
    "OUT",
    "EmptyRegionError",
    "Names",
    "out_labels",
    "outside_grammar",
    "region_constraint",
    "region_grammar",
]

OUT = "MONITOR_TEXT"
"""The name of the terminal of text outside regions in every segment grammar."""
_NAMES = "MONITOR_NAME"
_START = "monitor_region"

# bytes that continue an identifier: ASCII letters, digits, `_`, and every non-ASCII byte
_IDENT = np.zeros(256, bool)
_IDENT[[*range(48, 58), *range(65, 91), 95, *range(97, 123), *range(128, 256)]] = True


class Names:
    """Names a callback returned, as their trie: a DFA of the same language as an
    :class:`EntitySet`'s minimal one, built by one Numba kernel that sorts the names and
    lays out the trie's rows (no merging of equal suffixes), which is what a region pays
    at every trigger (``benchmarks/monitor_names.py``). The trie is the same whatever the
    names' order, so a set returned again compiles to the same grammar (and is found in
    the compile cache).

    Raises:
        ArgumentTypeError: a name is not a ``str``.
        InvalidArgumentError: a name is not valid Unicode (a lone surrogate).
    """

    def __init__(self, names: list[str]) -> None:
        try:
            buf, offs, sep = encoded(names)
        except TypeError:
            bad = next(x for x in names if not isinstance(x, str))
            raise ArgumentTypeError(f"returned names that include a {type(bad).__name__}") from None
        except UnicodeEncodeError as e:
            raise InvalidArgumentError(
                f"returned a name that is not valid Unicode text ({e.reason})"
            ) from None
        self.dfa = trie_of(buf, offs, sep)
        self.count = int(np.count_nonzero(self.dfa.accept))


class EmptyRegionError(Exception):
    """The callback allowed no names at all (its monitor's ``on_empty`` decides)."""


def region_constraint(result: Any, schema_options: dict[str, Any] | None = None) -> Any:
    """What a callback's ``result`` constrains: ``None``, names (an :class:`EntitySet`, or
    :class:`Names` for any other iterable of strings) or a :class:`Grammar`.

    Raises:
        EmptyRegionError: no names.
        ArgumentTypeError: a ``str`` (ambiguous: one name, or grammar text?), ``bytes``, or
            anything else that is not a constraint.
        SchemaError, GrammarError, UnsupportedFeatureError: from a JSON Schema.
    """
    if result is None or isinstance(result, (EntitySet, Grammar)):
        if isinstance(result, EntitySet) and len(result) == 0:
            raise EmptyRegionError
        return result
    if isinstance(result, (str, bytes)):
        raise ArgumentTypeError(
            f"returned a {type(result).__name__}: return [name] for one name, or "
            "corral.Grammar.from_lark(text) for a grammar"
        )
    if isinstance(result, (dict, bool)) or _is_model(result):
        return Grammar.from_json_schema(result, **(schema_options or {}))
    if isinstance(result, Iterable):
        names = list(result)
        if not names:
            raise EmptyRegionError
        return Names(names)
    raise ArgumentTypeError(
        f"returned a {type(result).__name__}: not names, a Grammar, a JSON Schema or None"
    )


def _is_model(x: Any) -> bool:
    return isinstance(x, type) and hasattr(x, "model_json_schema")


@functools.lru_cache(maxsize=64)
def _out(automaton: TriggerAutomaton, identifier_end: bool) -> Terminal:
    """``OUT``: the automaton as a terminal, from a fresh start state (state 0, which does
    not accept: a terminal never matches the empty string; the automaton's state ``s`` is
    the terminal's ``s + 1``, see :func:`out_labels`); with ``identifier_end``, that
    start reads no identifier byte. Built once per automaton: every region of a
    generation ends with it."""
    trans = automaton.dfa.trans
    shifted = np.where(trans >= 0, trans + 1, -1)
    first = np.where(_IDENT, -1, shifted[0]) if identifier_end else shifted[0]
    trans = np.vstack([first, shifted]).astype(np.int32)
    accept = np.ones(trans.shape[0], bool)
    accept[0] = False
    dfa = ByteDFA(trans, accept).compacted()
    return Terminal(OUT, dfa, source="text outside monitored regions")


def out_labels(automaton: TriggerAutomaton) -> np.ndarray:
    """``int32 [n + 1]``: for each state of the ``OUT`` terminal, the monitor whose trigger
    fires there, or ``-1``."""
    return np.concatenate([[-1], automaton.fired]).astype(np.int32)


def outside_grammar(automaton: TriggerAutomaton) -> Grammar:
    """The segment before any trigger fires: ``start: OUT?``."""
    out = _out(automaton, identifier_end=False)
    return Grammar(
        {OUT: out},
        [Rule(_START, (OUT,)), Rule(_START, ())],
        _START,
        description="text before a monitor's trigger",
    )


def region_grammar(constraint: Any, automaton: TriggerAutomaton, end: str) -> Grammar:
    """The segment after a trigger: ``start: C OUT?`` for ``constraint`` (an
    :class:`EntitySet` or a :class:`Grammar`, from :func:`region_constraint`)."""
    out = _out(automaton, identifier_end=end == "identifier")
    if isinstance(constraint, (EntitySet, Names)):
        dfa, count = (
            (constraint.dfa("raw"), len(constraint))
            if isinstance(constraint, EntitySet)
            else (constraint.dfa, constraint.count)
        )
        name = Terminal(_NAMES, dfa, source=f"{count} names")
        terminals = {_NAMES: name, OUT: out}
        rules = [Rule(_START, (_NAMES, OUT)), Rule(_START, (_NAMES,))]
        return Grammar(terminals, rules, _START, description="a monitor's names")
    g: Grammar = constraint
    if g.final_check is not None:
        raise UnsupportedFeatureError(
            "final check",
            detail=f"{g.description or 'this grammar'} accepts a word only after a check "
            "on the whole word (e.g. uniqueItems), which a monitor's region, followed by "
            "more text, does not have",
        )
    rename = _renamer(set(g.terminals) | {r.lhs for r in g.rules})
    terminals = {rename(k): _renamed_terminal(t, rename(k)) for k, t in g.terminals.items()}
    terminals[OUT] = out
    rules = [Rule(rename(r.lhs), tuple(rename(s) for s in r.rhs)) for r in g.rules]
    rules += [Rule(_START, (rename(g.start), OUT)), Rule(_START, (rename(g.start),))]
    return Grammar(
        terminals,
        rules,
        _START,
        tuple(rename(i) for i in g.ignore),
        description=f"a monitor's grammar ({g.description})" if g.description else "",
    )


def _renamer(names: set[str]) -> Any:
    """Keep the constraint's names unless one collides with the segment's own; then
    prefix them all, with as many ``c_`` as keep them apart from every name."""
    ours = {OUT, _NAMES, _START}
    if not names & ours:
        return lambda s: s
    prefix = "c_"
    while any(prefix + n in ours or prefix + n in names for n in names):
        prefix += "c_"
    return lambda s: prefix + s if s in names else s


def _renamed_terminal(t: Terminal, name: str) -> Terminal:
    if t.name == name:
        return t
    return Terminal(name, t.dfa, t.source, t.literal, t.special, t.end_blocked)
