"""The grammar intermediate representation: a context-free grammar over byte-level terminals.

A :class:`Grammar` is what every front end (Lark text, regex, JSON Schema) produces and what
:func:`corral.compile` consumes. Its meaning:

* every terminal denotes a regular language of byte strings (its :class:`ByteDFA`);
* the language of the grammar is the set of byte strings ``w = x0 t1 x1 t2 ... tn xn`` where
  ``t1..tn`` are lexemes of terminals forming a sentence of the rules (a derivation from
  ``start``), and each ``xi`` is a possibly empty sequence of lexemes of ``ignore``
  terminals;
* lexemes are maximal: a lexeme of terminal ``T`` ends only where ``T``'s automaton cannot
  read the next byte (or the text ends). With the automata the Lark front end builds
  (accepting where Python's ``re.match`` may return a match, see ``lark_frontend.py``),
  this is the match of Lark's default Earley lexer (``lexer="dynamic"``): ``"ab"`` is one
  ``NAME``, never two. Terminals are not ordered against each other: where several may
  start, each is tried (``"intx"`` is ``"int"`` followed by ``NAME`` as well as one
  ``NAME``). Unlike a regex engine, the lexer does not backtrack inside a lexeme: if
  ``T``'s automaton reads on past an accepting point and then dies without accepting
  again, that path fails;
* a terminal may also forbid its lexeme to end before some bytes (``Terminal.end_blocked``,
  from a lookahead at the end of a Lark terminal such as ``/[?](?![a-z])/``): there the
  lexeme neither reads the byte nor ends, so that path fails too.

Grammars are immutable and normalised on construction (see ``normalize.py``): no terminal
accepts the empty string, every symbol is productive and reachable, and the language is
not empty (else :class:`~corral.errors.EmptyLanguageError`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..errors import InvalidArgumentError
from .regex import ByteDFA
from .regex.sparse import SparseDFA


@dataclass(frozen=True)
class Terminal:
    """A terminal symbol.

    Attributes:
        name: unique name (Lark's name, e.g. ``ESCAPED_STRING`` or ``LBRACE``).
        dfa: its language over bytes; never accepts the empty string after normalisation.
            A :class:`SparseDFA` (sparse rows) for automata too large for 256 columns a
            state: a span automaton (``spans.py``), an entity set or a large enum
            (``entities.py``, ``regex/dawg.py``); it has no ``end_blocked``.
        source: how it was written (for messages), e.g. ``'/[0-9]+/'`` or ``'"{"'``.
        literal: the text when the terminal is one fixed string, else ``None``.
        special: when set, the terminal stands for the special (control) token with this
            text (e.g. ``"<|im_end|>"``) and matches only that token, never its spelling.
        end_blocked: ``None`` (a lexeme may end in an accepting state before every byte
            that state cannot read), or ``bool [dfa.n_states, 256]``: where ``True``, a
            lexeme in that accepting state may not end before that byte although it
            cannot read it (a lookahead at the end of the terminal). ``dfa.accept`` says
            where a lexeme may end at the end of the text.
    """

    name: str
    dfa: ByteDFA | SparseDFA = field(repr=False, compare=False)
    source: str = ""
    literal: str | None = None
    special: str | None = None
    end_blocked: np.ndarray | None = field(default=None, repr=False, compare=False)


FinalCheck = Callable[[bytes], bool]


class Rule(NamedTuple):
    """``lhs → rhs``; ``rhs`` names terminals or nonterminals (empty tuple: the empty string).

    A named tuple: a large JSON Schema's grammar makes, hashes and compares tens of
    thousands of rules while it is normalised, and a tuple does that in C."""

    lhs: str
    rhs: tuple[str, ...]


class Grammar:
    """An immutable context-free grammar over byte-level terminals (see the module docs).

    Build one with a front end (``frontends.py``): :meth:`from_lark`, :meth:`from_regex`,
    :meth:`from_json_schema`, or ``corral.compile`` on the spec directly.
    """

    __slots__ = (
        "_fingerprint",
        "description",
        "final_check",
        "final_check_id",
        "ignore",
        "rules",
        "start",
        "terminals",
        "token_budgets",
    )

    def __init__(
        self,
        terminals: Mapping[str, Terminal],
        rules: Sequence[Rule],
        start: str,
        ignore: Sequence[str] = (),
        *,
        description: str = "",
        final_check: FinalCheck | None = None,
        final_check_id: str = "",
        token_budgets: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        """See the class docs. ``final_check`` (with ``final_check_id``, a string that
        identifies what it checks, part of the fingerprint) is a predicate on a complete
        word, for constraints the rules over-approximate (e.g. JSON Schema ``uniqueItems``):
        a word is accepted only if the rules derive it *and* ``final_check(word)`` holds.

        ``token_budgets``: terminal name → ``(max_tokens, tail)``: a lexeme of that
        terminal holds at most ``max_tokens`` tokens; once they are spent it may only be
        finished, by at most ``tail`` more bytes that reach the first accepting state (see
        ``automata/token_budgets.py``; free text of a structural tag with ``max_tokens``).
        Counted by matchers, on tokens only; text given as bytes does not count.
        """
        from .normalize import normalize

        if final_check is not None and not final_check_id:
            raise InvalidArgumentError(
                "a final_check needs a final_check_id (used in the fingerprint)"
            )
        self.final_check = final_check
        self.final_check_id = final_check_id

        terms, rls, ign = normalize(dict(terminals), list(rules), start, list(ignore))
        for name, t in terms.items():  # kept for the grammar's life: the compact form
            if isinstance(t.dfa, ByteDFA) and (small := t.dfa.compacted()) is not t.dfa:
                terms[name] = dataclasses.replace(t, dfa=small)
        self.terminals: Mapping[str, Terminal] = terms
        self.rules: tuple[Rule, ...] = tuple(rls)
        self.start = start
        self.ignore: tuple[str, ...] = tuple(ign)
        self.token_budgets: dict[str, tuple[int, int]] = {
            k: (int(v[0]), int(v[1])) for k, v in (token_budgets or {}).items() if k in terms
        }
        self.description = description
        self._fingerprint: str | None = None

    # -- front ends (see ``frontends.py``; kept here as the documented entry points) ------
    @classmethod
    def from_lark(
        cls,
        text: str,
        start: str = "start",
        *,
        import_paths: Sequence[str] = (),
        strict_lexemes: bool = False,
        postlex: Any = None,
        max_indent_width: int | None = None,
    ) -> Grammar:
        """Read a grammar in Lark's grammar language: see
        :func:`corral.grammar.frontends.from_lark` (what is accepted, lexeme semantics,
        special tokens, indentation post-lexers, errors)."""
        from .frontends import from_lark

        return from_lark(
            text,
            start,
            import_paths=import_paths,
            strict_lexemes=strict_lexemes,
            postlex=postlex,
            max_indent_width=max_indent_width,
        )

    @classmethod
    def from_gbnf(cls, text: str, root: str = "root") -> Grammar:
        """Read a grammar in GBNF, llama.cpp's grammar format: see
        :func:`corral.grammar.frontends.from_gbnf`."""
        from .frontends import from_gbnf

        return from_gbnf(text, root)

    @classmethod
    def from_ebnf(cls, text: str, root: str = "root") -> Grammar:
        """Read a grammar in XGrammar's EBNF: see
        :func:`corral.grammar.frontends.from_ebnf`."""
        from .frontends import from_ebnf

        return from_ebnf(text, root)

    @classmethod
    def from_regex(cls, pattern: str, flags: int = 0) -> Grammar:
        """A grammar whose language is ``{s : re.fullmatch(pattern, s, flags)}``: see
        :func:`corral.grammar.frontends.from_regex`."""
        from .frontends import from_regex

        return from_regex(pattern, flags)

    @classmethod
    def from_json_schema(cls, schema: Any, **options: Any) -> Grammar:
        """The grammar of the JSON texts valid for a JSON Schema (a dict or bool, JSON text,
        or a pydantic v2 model class): see :func:`corral.grammar.frontends.from_json_schema`."""
        from .frontends import from_json_schema

        return from_json_schema(schema, **options)

    # -- identity -----------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """A SHA-256 hex digest of the grammar's content (rules, terminal automata, start)."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            h.update(f"start={self.start}\nignore={sorted(self.ignore)}\n".encode())
            h.update(f"final_check={self.final_check_id}\n".encode())
            if self.token_budgets:
                h.update(f"token_budgets={sorted(self.token_budgets.items())}\n".encode())
            for r in sorted(self.rules, key=lambda r: (r.lhs, r.rhs)):
                h.update(f"{r.lhs}->{' '.join(r.rhs)}\n".encode())
            for name in sorted(self.terminals):
                t = self.terminals[name]
                h.update(f"T {name} {t.dfa.n_states} {t.special!r}\n".encode())
                if isinstance(t.dfa, SparseDFA) and t.dfa.preorder_trie:
                    # a trie in preorder is its states' child counts (at most 256 each),
                    # their bytes and the accepting states: the targets follow
                    h.update(b"trie")
                    h.update(np.diff(t.dfa.row_start).astype(np.uint16).data)
                    h.update(np.ascontiguousarray(t.dfa.labels).data)
                elif isinstance(t.dfa, SparseDFA):
                    row_start = t.dfa.row_start
                    if row_start[-1] < 2**31:  # hashed as int32: half the bytes to hash
                        h.update(b"sparse32")
                        row_start = row_start.astype(np.int32)
                    else:
                        h.update(b"sparse")
                    for part in (row_start, t.dfa.labels, t.dfa.targets):
                        h.update(np.ascontiguousarray(part).data)  # no copy
                else:  # the canonical compact form: equal automata, equal arrays
                    for part in t.dfa.stored_columns():
                        h.update(np.ascontiguousarray(part).data)
                h.update(t.dfa.accept.tobytes())
                if t.end_blocked is not None:
                    h.update(b"end_blocked")
                    h.update(np.packbits(t.end_blocked).tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Grammar) and self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return (
            f"Grammar(start={self.start!r}, rules={len(self.rules)}, "
            f"terminals={len(self.terminals)}, ignore={list(self.ignore)})"
        )

    def nonterminals(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.rules:
            seen.setdefault(r.lhs)
        return list(seen)

    def summary(self) -> dict[str, Any]:
        """Sizes of the grammar (rules, terminals, terminal automaton states)."""
        return {
            "rules": len(self.rules),
            "nonterminals": len(self.nonterminals()),
            "terminals": len(self.terminals),
            "terminal_states": sum(t.dfa.n_states for t in self.terminals.values()),
        }
