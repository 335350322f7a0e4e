"""A structural tag → one :class:`~corral.grammar.ir.Grammar`.

The grammar is built by *continuations*: every position of the spec is compiled together
with what follows it up to the end of the output (a tuple of items), and the
nonterminal of a continuation is built once (memoised by the items' pointers). Most
formats just put their parts in front of the continuation. Free text (``any_text``, the
text around triggered tags and dispatch patterns) needs to know what follows it: it ends
at the first occurrence of a string that can begin the continuation (:meth:`_leads`), so
each such string ``e`` gets a terminal ``x e`` (``text.py``) followed by the continuation
*after* ``e``. A special token that can follow ends the text without being part of it;
so does the end of the output. Free text followed by something that does not begin with a
string or a token (a JSON value, a regex, more free text) is refused: where it would end
is not decided.

Sub-specs (JSON Schemas, Lark grammars, regexes) are built by their own front ends and
embedded with their symbols renamed; a grammar's ``%ignore`` becomes explicit (an
ignored-lexeme run after each of its lexemes and at its start), since ignoring holds
inside that region only. A JSON Schema is compiled without a final check
(``final_check=False``): a keyword the grammar cannot enforce exactly is refused by its
pointer, as nothing checks the region's text on its own at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence as Seq
from typing import Any

import numpy as np

from ...errors import (
    CompileBudgetError,
    CorralError,
    EmptyLanguageError,
    GrammarError,
    Location,
    UnsupportedFeatureError,
)
from ..ir import Grammar, Rule, Terminal
from ..regex import literal_automaton
from . import nodes as n
from .read import StructuralTagError
from .text import free_text_dfa, overlap

__all__ = ["MAX_RULES", "build_grammar"]

MAX_RULES = 400_000
"""The most rules a structural tag's grammar may have (repeats are unrolled); beyond it,
:class:`~corral.errors.CompileBudgetError`."""

# A continuation item: (kind, pointer, payload...). Kinds:
#   "f": a format node          ("f", ptr, node)
#   "lit": a fixed string       ("lit", ptr, text)
#   "ends": one of end strings  ("ends", ptr, (texts))
#   "tok": a special token      ("tok", ptr, tokenref)
#   "star": node any times      ("star", ptr, node)
#   "rep": node lo..hi times    ("rep", ptr, node, lo, hi)          hi = -1: unbounded
#   "sep": (separator tag)*     ("sep", ptr, TagsWithSeparator)
#   "loop": free text with triggers, tags, free text... ("loop", ptr, node)
#   "once": free text with at most one tag              ("once", ptr, node)
Item = tuple[Any, ...]
Cont = tuple[Item, ...]


def _key(item: Item) -> tuple[Any, ...]:
    kind = item[0]
    if kind in ("f", "star", "sep", "loop", "once"):
        return (kind, item[1])
    if kind == "rep":
        return (kind, item[1], item[3], item[4])
    return item


def build_grammar(
    spec: n.Format, root: str = "", json_options: Mapping[str, Any] | None = None
) -> Grammar:
    """The grammar of ``spec`` (``root``: the JSON pointer of ``spec``, for messages).

    Raises:
        StructuralTagError: a spec that cannot be enforced as written (an ambiguous trigger,
            free text with no end), naming the JSON pointers.
        UnsupportedFeatureError, SchemaError, EmptyLanguageError, CompileBudgetError: from a
            sub-spec, with its pointer below the structural tag's.
    """
    b = _Builder(dict(json_options or {}))
    start = b.compile((("f", root, spec),))
    return Grammar(
        b.terminals, b.rules, start, description="structural tag", token_budgets=b.budgets
    )


_FREE = (n.AnyText, n.AnyTokens, n.TriggeredTags, n.TokenTriggeredTags, n.Dispatch, n.TokenDispatch)
"""The formats that begin with free text."""


def _check_tags(node: n.TriggeredTags | n.TokenTriggeredTags, ptr: str) -> None:
    if isinstance(node, n.TokenTriggeredTags):
        _text_tokens(node.exclude_tokens, f"{ptr}/exclude_tokens")
    if not node.tags:
        raise StructuralTagError("triggered tags need at least one tag", f"{ptr}/tags")


def _tag_triggers(node: n.TriggeredTags | n.TokenTriggeredTags, ptr: str) -> list[Any]:
    """The trigger (or trigger token) each of ``node``'s tags begins with, in tag order.

    Refused, by pointer: a tag whose begin starts with no trigger or with two (ambiguous,
    naming both), a string begin among token triggers or a token begin among string ones,
    and a trigger that begins no tag."""
    out: list[Any] = []
    if isinstance(node, n.TokenTriggeredTags):
        for i, tag in enumerate(node.tags):
            if not isinstance(tag.begin, n.Token) or tag.begin.token not in node.trigger_tokens:
                raise StructuralTagError(
                    "a token-triggered tag begins with one of the trigger tokens "
                    f"{list(node.trigger_tokens)}",
                    f"{ptr}/tags/{i}/begin",
                )
            out.append(tag.begin.token)
        for i, tt in enumerate(node.trigger_tokens):
            if tt not in out:
                raise StructuralTagError(
                    f"the trigger token {tt!r} begins no tag", f"{ptr}/trigger_tokens/{i}"
                )
        return out
    for i, tag in enumerate(node.tags):
        tp = f"{ptr}/tags/{i}"
        if not isinstance(tag.begin, str):
            raise StructuralTagError(
                "a triggered tag's begin is a string (use token_triggered_tags for tokens)",
                f"{tp}/begin",
            )
        mine = [t for t in node.triggers if tag.begin.startswith(t)]
        if not mine:
            raise StructuralTagError(
                f"the tag's begin {tag.begin!r} starts with no trigger of {list(node.triggers)}",
                f"{tp}/begin",
            )
        if len(mine) > 1:
            a, b = sorted(mine, key=len)[:2]
            raise StructuralTagError(
                f"ambiguous triggers: the tag's begin {tag.begin!r} starts with both "
                f"{a!r} (/triggers/{node.triggers.index(a)}) and {b!r} "
                f"(/triggers/{node.triggers.index(b)})",
                f"{tp}/begin",
            )
        out.append(mine[0])
    for i, t in enumerate(node.triggers):
        if t not in out:
            raise StructuralTagError(f"the trigger {t!r} begins no tag", f"{ptr}/triggers/{i}")
    return out


def _describe(item: Item) -> str:
    kind = item[0]
    if kind == "f":
        return f"a {item[2].to_json()['type']!r}"
    if kind in ("loop", "once"):
        return "free text"
    return f"a {kind}"


class _Builder:
    def __init__(self, json_options: dict[str, Any]) -> None:
        self.json_options = {**json_options, "final_check": False}
        self.terminals: dict[str, Terminal] = {}
        self.rules: list[Rule] = []
        self.memo: dict[tuple[Any, ...], str] = {}
        self.literals: dict[str, str] = {}
        self.tokens: dict[str, str] = {}
        self.texts: dict[tuple[tuple[bytes, ...], int | None, int | None], str] = {}
        self.budgets: dict[str, tuple[int, int]] = {}  # terminal -> (max_tokens, tail)
        self.embedded: dict[tuple[Any, ...], str] = {}
        self.regex_dfas: dict[str, Any] = {}  # pattern -> its automaton
        self.count = 0

    # -- symbols --------------------------------------------------------------------------
    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def _rule(self, lhs: str, rhs: tuple[str, ...]) -> None:
        if len(self.rules) >= MAX_RULES:
            raise CompileBudgetError(
                f"the structural tag needs more than {MAX_RULES} grammar rules (large repeats?)"
            )
        self.rules.append(Rule(lhs, rhs))

    def literal(self, text: str) -> str:
        name = self.literals.get(text)
        if name is None:
            name = self.literals[text] = self._name("LIT")
            self.terminals[name] = Terminal(
                name, literal_automaton(text), source=repr(text), literal=text
            )
        return name

    def token(self, ref: n.TokenRef) -> str:
        text = ref if isinstance(ref, str) else f"<[{ref}]>"
        name = self.tokens.get(text)
        if name is None:
            name = self.tokens[text] = self._name("TOK")
            from ..regex import literal_dfa

            self.terminals[name] = Terminal(name, literal_dfa(text), source=text, special=text)
        return name

    def text(self, patterns: tuple[bytes, ...], stop: int | None, budget: int | None) -> str:
        """The terminal of free text up to ``patterns[stop]`` (``None``: to its end), of
        at most ``budget`` tokens (``None``: no budget)."""
        name = self.texts.get((patterns, stop, budget))
        if name is None:
            name = self.texts[(patterns, stop, budget)] = self._name("TEXT")
            what = "free text" if stop is None else f"free text up to {patterns[stop]!r}"
            self.terminals[name] = Terminal(name, free_text_dfa(patterns, stop), source=what)
            if budget is not None:
                # once spent: finish the stop string (at most its length), or end here
                # (at most the rest of a UTF-8 character)
                tail = 3 if stop is None else len(patterns[stop])
                self.budgets[name] = (budget, tail)
        return name

    # -- continuations --------------------------------------------------------------------
    def compile(self, cont: Cont) -> str:
        """The nonterminal deriving the language of ``cont``."""
        key = tuple(_key(i) for i in cont)
        name = self.memo.get(key)
        if name is not None:
            return name
        name = self.memo[key] = self._name("n")
        if not cont:
            self._rule(name, ())
            return name
        for rhs in self._expand(cont):
            self._rule(name, rhs)
        return name

    def _then(self, symbols: tuple[str, ...], rest: Cont) -> tuple[str, ...]:
        return (*symbols, self.compile(rest)) if rest else symbols

    def _expand(self, cont: Cont) -> list[tuple[str, ...]]:
        """The alternatives (right-hand sides) of ``cont``'s nonterminal."""
        head, rest = cont[0], cont[1:]
        alts = self._unfold(head, rest)
        if alts is not None:
            return [(self.compile(c),) for c in alts]
        kind, ptr = head[0], head[1]
        if kind == "lit":
            return [self._then((self.literal(head[2]),), rest)]
        if kind == "ends":
            return [self._then((self.literal(e),), rest) for e in head[2]]
        if kind == "tok":
            return [self._then((self.token(head[2]),), rest)]
        if kind in ("loop", "once"):
            return self._region(head, rest)
        node = head[2]
        if isinstance(node, (n.JSONSchema, n.Lark, n.Regex)):
            name = self._embed(node, ptr)
            if isinstance(node, n.Regex):
                self._regex_ends(node, ptr, rest)
            return [self._then((name,), rest)]
        if isinstance(node, _FREE):
            return self._free(head, rest)
        if isinstance(node, n.ExcludeToken):
            raise UnsupportedFeatureError(
                "exclude_token (exactly one token)",
                location=Location(pointer=ptr or "/"),
                detail="corral constrains the text, not how many tokens spell it; use any_text",
            )
        raise StructuralTagError(f"not a structural-tag format: {type(node).__name__}", ptr)

    def _unfold(self, head: Item, rest: Cont) -> list[Cont] | None:
        """``head rest`` as the continuations it reads as, one per alternative, where
        ``head`` only arranges other items (a sequence, an or, a repeat, a tag, an empty
        string...); ``None`` where ``head`` stands for symbols of its own (a string, a
        token, a sub-spec, free text). Both the grammar (:meth:`_expand`) and what a
        continuation begins with (:meth:`_leads`) read composites through this."""
        kind, ptr = head[0], head[1]
        if kind == "lit":
            return None if head[2] else [rest]
        if kind == "star":
            return [rest, (("f", ptr, head[2]), head, *rest)]
        if kind == "rep":
            node, lo, hi = head[2], head[3], head[4]
            if lo > 0:
                return [
                    (("f", ptr, node), ("rep", ptr, node, lo - 1, hi if hi < 0 else hi - 1), *rest)
                ]
            if hi < 0:
                return [(("star", ptr, node), *rest)]
            if hi == 0:
                return [rest]
            return [rest, (("f", ptr, node), ("rep", ptr, node, 0, hi - 1), *rest)]
        if kind == "sep":
            sep = ("lit", f"{ptr}/separator", head[2].separator)
            tags = enumerate(head[2].tags)
            return [rest, *((sep, ("f", f"{ptr}/tags/{i}", t), head, *rest) for i, t in tags)]
        if kind != "f":
            return None
        node = head[2]
        if isinstance(node, n.Const):
            return [(("lit", ptr, node.value), *rest)]
        if isinstance(node, n.Token):
            return [(("tok", ptr, node.token), *rest)]
        if isinstance(node, n.Sequence):
            return [
                (*(("f", f"{ptr}/elements/{i}", e) for i, e in enumerate(node.elements)), *rest)
            ]
        if isinstance(node, n.Or):
            return [(("f", f"{ptr}/elements/{i}", e), *rest) for i, e in enumerate(node.elements)]
        if isinstance(node, n.Optional):
            return [rest, (("f", f"{ptr}/content", node.content), *rest)]
        if isinstance(node, n.Star):
            return [(("star", f"{ptr}/content", node.content), *rest)]
        if isinstance(node, n.Plus):
            item = ("f", f"{ptr}/content", node.content)
            return [(item, ("star", f"{ptr}/content", node.content), *rest)]
        if isinstance(node, n.Repeat):
            return [(("rep", f"{ptr}/content", node.content, node.min, node.max), *rest)]
        if isinstance(node, n.Tag):
            return [(*_tag_items(node, ptr), *rest)]
        if isinstance(node, n.TagsWithSeparator):
            if not node.tags and node.at_least_one:
                raise StructuralTagError(
                    "tags_with_separator with at_least_one needs a tag", f"{ptr}/tags"
                )
            after: Cont = () if node.stop_after_first else (("sep", ptr, node),)
            tagged = [(("f", f"{ptr}/tags/{i}", t), *after, *rest) for i, t in enumerate(node.tags)]
            return tagged if node.at_least_one else [rest, *tagged]
        if isinstance(node, (n.TriggeredTags, n.TokenTriggeredTags)) and node.at_least_one:
            _check_tags(node, ptr)  # no free text before the first tag
            _tag_triggers(node, ptr)  # (checked here too: stop_after_first has no region)
            after_tag: Cont = () if node.stop_after_first else (("loop", ptr, node),)
            return [
                (("f", f"{ptr}/tags/{i}", t), *after_tag, *rest) for i, t in enumerate(node.tags)
            ]
        return None

    # -- free text ------------------------------------------------------------------------
    def _free(self, head: Item, rest: Cont) -> list[tuple[str, ...]]:
        """A format that starts with free text."""
        ptr, node = head[1], head[2]
        if isinstance(node, (n.AnyText, n.AnyTokens)) and node.max_tokens == 0:
            return [(self.compile(rest),)]  # no token may hold text: the text is empty
        if isinstance(node, n.AnyText):
            self._no_budget(node, ptr)
            return self._region(("loop", ptr, node), rest)
        if isinstance(node, n.AnyTokens):
            _text_tokens(node.exclude_tokens, f"{ptr}/exclude_tokens")
            return self._region(("loop", ptr, node), rest)
        if isinstance(node, (n.TriggeredTags, n.TokenTriggeredTags)):
            _check_tags(node, ptr)  # (with at_least_one, _unfold reads the first tag)
            kind = "once" if node.stop_after_first else "loop"
            return self._region((kind, ptr, node), rest)
        if isinstance(node, n.TokenDispatch):
            _text_tokens(node.exclude_tokens, f"{ptr}/exclude_tokens")
        assert isinstance(node, (n.Dispatch, n.TokenDispatch))
        return self._region(("loop" if node.loop else "once", ptr, node), rest)

    @staticmethod
    def _no_budget(node: n.AnyText | n.AnyTokens, ptr: str) -> None:
        if isinstance(node, n.AnyText) and node.max_chars is not None:
            raise UnsupportedFeatureError(
                "max_chars",
                location=Location(pointer=f"{ptr}/max_chars"),
                detail="a character budget inside a structural tag is not enforced yet",
            )

    def _region(self, head: Item, rest: Cont) -> list[tuple[str, ...]]:
        """Free text, then a trigger and its tag (looping back to ``head`` for "loop"), or
        the end of the text and ``rest``."""
        kind, ptr, node = head
        loop = (head,) if kind == "loop" and not isinstance(node, (n.AnyText, n.AnyTokens)) else ()
        excludes: list[tuple[str, str]] = []  # (text, pointer)
        triggers: list[tuple[str, str, list[Cont]]] = []  # (text, pointer, continuations)
        tok_triggers: list[tuple[n.TokenRef, list[Cont]]] = []
        if isinstance(node, n.AnyText):
            excludes = [(x, f"{ptr}/excludes/{i}") for i, x in enumerate(node.excludes)]
        elif isinstance(node, n.AnyTokens):
            excludes = [
                (x, f"{ptr}/exclude_tokens/{i}")
                for i, x in enumerate(node.exclude_tokens)
                if isinstance(x, str)
            ]
        elif isinstance(node, n.TriggeredTags):
            excludes = [(x, f"{ptr}/excludes/{i}") for i, x in enumerate(node.excludes)]
            conts: dict[str, list[Cont]] = {t: [] for t in node.triggers}
            for i, (tag, t) in enumerate(zip(node.tags, _tag_triggers(node, ptr), strict=True)):
                items = _tag_items(tag, f"{ptr}/tags/{i}", skip=len(t))
                conts[t].append((*items, *loop, *rest))
            triggers = [(t, f"{ptr}/triggers/{i}", conts[t]) for i, t in enumerate(node.triggers)]
        elif isinstance(node, n.Dispatch):
            excludes = [(x, f"{ptr}/excludes/{i}") for i, x in enumerate(node.excludes)]
            by_pattern: dict[str, tuple[str, list[Cont]]] = {}
            for i, (pat, fmt) in enumerate(node.rules):
                entry = by_pattern.setdefault(pat, (f"{ptr}/rules/{i}/0", []))
                entry[1].append((("f", f"{ptr}/rules/{i}/1", fmt), *loop, *rest))
            triggers = [(p, pp, cs) for p, (pp, cs) in by_pattern.items()]
        elif isinstance(node, n.TokenTriggeredTags):
            excludes = [
                (x, f"{ptr}/exclude_tokens/{i}")
                for i, x in enumerate(node.exclude_tokens)
                if isinstance(x, str)
            ]
            by_token: dict[n.TokenRef, list[Cont]] = {t: [] for t in node.trigger_tokens}
            for i, (tag, tt) in enumerate(zip(node.tags, _tag_triggers(node, ptr), strict=True)):
                by_token[tt].append((*_tag_items(tag, f"{ptr}/tags/{i}"), *loop, *rest))
            tok_triggers = [(t, [c[1:] for c in cs]) for t, cs in by_token.items()]
        elif isinstance(node, n.TokenDispatch):
            excludes = [
                (x, f"{ptr}/exclude_tokens/{i}")
                for i, x in enumerate(node.exclude_tokens)
                if isinstance(x, str)
            ]
            by_tok: dict[n.TokenRef, list[Cont]] = {}
            for i, (tok, fmt) in enumerate(node.rules):
                by_tok.setdefault(tok, []).append((("f", f"{ptr}/rules/{i}/1", fmt), *loop, *rest))
            tok_triggers = list(by_tok.items())

        leads = self._leads(rest, ptr)
        stops = [(text, p) for k, text, _, p in leads if k == "str"]
        patterns, index = _patterns(triggers, excludes, stops, ptr)
        budget = node.max_tokens if isinstance(node, (n.AnyText, n.AnyTokens)) else None
        alts: list[tuple[str, ...]] = []
        for t, _, cs in triggers:
            term = self.text(patterns, index[t], budget)
            alts.extend((term, *rhs) for rhs in self._after_trigger(cs))
        open_text: str | None = None

        def opened() -> str:
            nonlocal open_text
            if open_text is None:
                open_text = self.text(patterns, None, budget)
            return open_text

        for tk, cs in tok_triggers:
            alts.extend((opened(), self.token(tk), self.compile(c)) for c in cs)
        for k, value, after, _ in leads:
            if k == "str":
                alts.append(self._then((self.text(patterns, index[value], budget),), after))
            elif k == "tok":
                alts.append(self._then((opened(), self.token(value)), after))
            else:
                alts.append((opened(),))
        return alts

    def _after_trigger(self, conts: list[Cont]) -> list[tuple[str, ...]]:
        """What may follow a trigger: one continuation per tag. The rests of the tags'
        begins share their common prefix, read as one literal: where many tags share a
        trigger (a tool call's ``{"name": "``), only the point where their names part
        holds one lexer state per tag, not every byte of the shared text."""
        heads = [c[0][2] for c in conts if c and c[0][0] == "lit"]
        if len(conts) < 2 or len(heads) < len(conts):
            return [(self.compile(c),) for c in conts]
        common = _common_prefix(heads)
        if not common:
            return [(self.compile(c),) for c in conts]
        rests = [(("lit", c[0][1], c[0][2][len(common) :]), *c[1:]) for c in conts]
        name = self._name("n")
        for r in rests:
            self._rule(name, (self.compile(r),))
        return [(self.literal(common), name)]

    def _leads(self, cont: Cont, region: str) -> list[tuple[str, Any, Cont, str]]:
        """What ``cont`` can begin with: ``("str", text, after, pointer)``, ``("tok",
        token, after, pointer)`` or ``("end", None, (), "")``; refuses a continuation that
        can begin otherwise (free text at ``region`` would have no end)."""
        out: list[tuple[str, Any, Cont, str]] = []
        seen: set[tuple[Any, ...]] = set()
        todo = [cont]
        while todo:
            c = todo.pop()
            key = tuple(_key(i) for i in c)
            if key in seen:
                continue
            seen.add(key)
            if not c:
                out.append(("end", None, (), ""))
                continue
            head, rest = c[0], c[1:]
            alts = self._unfold(head, rest)
            if alts is not None:
                todo.extend(alts)
            elif head[0] == "lit":
                out.append(("str", head[2], rest, head[1]))
            elif head[0] == "ends":
                out.extend(("str", e, rest, head[1]) for e in head[2])
            elif head[0] == "tok":
                out.append(("tok", head[2], rest, head[1]))
            else:
                self._no_end(region, head)
        return out

    def _regex_ends(self, node: n.Regex, ptr: str, rest: Cont) -> None:
        """Refuse a regex that could read on into the string after it: its lexeme is read
        greedily, so where it may end but can also read that string's first byte it does
        not end there (``.+`` then ``</a>`` would read the end string and never stop)."""
        try:
            leads = self._leads(rest, ptr)
        except StructuralTagError:
            return  # followed by something else than strings: nothing to compare with
        dfa = self.regex_dfas[node.pattern]
        accept = np.flatnonzero(dfa.accept)
        for kind, text, _, where in leads:
            if kind != "str":
                continue
            first = text.encode("utf-8")[0]
            if (np.asarray(dfa.trans)[accept, first] >= 0).any():
                raise StructuralTagError(
                    f"the regex {node.pattern!r} can read on into {text!r} that follows it "
                    f"({where}): corral reads a regex's match greedily, so it would not end "
                    f"there; write it so that it cannot read {chr(first)!r} where it may end, "
                    "or use any_text (free text ends at the first string that follows it)",
                    ptr,
                )

    @staticmethod
    def _no_end(region: str, item: Item) -> None:
        raise StructuralTagError(
            f"free text at {region or '/'} has no end: it is followed by {_describe(item)} "
            f"at {item[1] or '/'}, which does not begin with a string or a token (put the "
            "free text in a tag, or follow it with a const_string)",
            region,
        )

    # -- sub-specs ------------------------------------------------------------------------
    def _embed(self, node: n.JSONSchema | n.Lark | n.Regex, ptr: str) -> str:
        from .. import frontends

        if isinstance(node, n.JSONSchema):
            if node.any_order and node.style == "qwen_xml":
                raise UnsupportedFeatureError(
                    "any_order",
                    location=Location(pointer=f"{ptr}/any_order"),
                    detail="Qwen XML parameters keep the schema's order",
                )
            key: tuple[Any, ...] = ("json", repr(node.to_json()))
            inner = f"{ptr}/json_schema"
        elif isinstance(node, n.Lark):
            key, inner = ("lark", node.grammar, node.start), f"{ptr}/grammar"
        else:
            key, inner = ("regex", node.pattern), f"{ptr}/pattern"
        name = self.embedded.get(key)
        if name is not None:
            return name
        try:
            if isinstance(node, n.JSONSchema):
                if node.style == "qwen_xml":
                    from .xml_params import qwen_xml_grammar

                    g = qwen_xml_grammar(node.schema_json(), self.json_options)
                else:
                    opts = dict(self.json_options)
                    if node.any_order:  # exact: each property at most once, required present
                        opts["property_order"] = "any"
                    g = frontends.from_json_schema(node.schema_json(), **opts)
            elif isinstance(node, n.Lark):
                g = frontends.from_lark(node.grammar, node.start)
            else:
                g = frontends.from_regex(node.pattern)
                self.regex_dfas[node.pattern] = g.terminals["REGEX"].dfa
        except CorralError as e:
            raise _below(e, inner) from e
        name = self.embedded[key] = self._add_grammar(g)
        return name

    def _add_grammar(self, g: Grammar) -> str:
        prefix = self._name("g") + "_"

        def ren(s: str) -> str:
            return prefix + s

        for tname, t in g.terminals.items():
            self.terminals[ren(tname)] = Terminal(
                ren(tname),
                t.dfa,
                source=t.source,
                literal=t.literal,
                special=t.special,
                end_blocked=t.end_blocked,
            )
        if not g.ignore:
            for r in g.rules:
                self._rule(ren(r.lhs), tuple(ren(s) for s in r.rhs))
            return ren(g.start)
        ign = prefix + "_ign"
        self._rule(ign, ())
        for ig in g.ignore:
            self._rule(ign, (ign, ren(ig)))
        after: dict[str, str] = {}
        for tname in g.terminals:
            if tname not in g.ignore:
                after[tname] = prefix + "_w_" + tname
                self._rule(after[tname], (ren(tname), ign))
        for r in g.rules:
            self._rule(ren(r.lhs), tuple(after.get(s, ren(s)) for s in r.rhs))
        start = prefix + "_start"
        self._rule(start, (ign, ren(g.start)))
        return start


def _common_prefix(texts: list[str]) -> str:
    """The longest string every one of ``texts`` starts with."""
    lo, hi = min(texts), max(texts)  # the prefix of these two is everyone's
    n = 0
    while n < min(len(lo), len(hi)) and lo[n] == hi[n]:
        n += 1
    return lo[:n]


def _tag_items(tag: n.Tag, ptr: str, skip: int = 0) -> tuple[Item, ...]:
    """``begin content end`` of a tag as items (``skip``: leave out the begin's first
    characters, already read as a trigger)."""
    if isinstance(tag.begin, n.Token):
        begin: Item = ("tok", f"{ptr}/begin", tag.begin.token)
    else:
        begin = ("lit", f"{ptr}/begin", tag.begin[skip:])
    if isinstance(tag.end, n.Token):
        end: Item = ("tok", f"{ptr}/end", tag.end.token)
    else:
        end = ("ends", f"{ptr}/end", tag.ends)
    return (begin, ("f", f"{ptr}/content", tag.content), end)


def _text_tokens(tokens: Seq[n.TokenRef], ptr: str) -> None:
    for i, t in enumerate(tokens):
        if isinstance(t, int):
            raise UnsupportedFeatureError(
                "a token excluded by id",
                location=Location(pointer=f"{ptr}/{i}"),
                detail="free text never holds a special token; exclude an ordinary token by "
                "its text",
            )


def _patterns(
    triggers: list[tuple[str, str, list[Cont]]],
    excludes: list[tuple[str, str]],
    stops: list[tuple[str, str]],
    region: str,
) -> tuple[tuple[bytes, ...], dict[str, int]]:
    """The patterns of a free-text region, checked, and the index of each trigger and stop."""
    roles: dict[str, tuple[str, str]] = {}  # text -> (role, pointer)
    for text, ptr in [*((t, p) for t, p, _ in triggers), *stops]:
        role = "trigger" if any(t == text for t, _, _ in triggers) else "end"
        if not text:
            raise StructuralTagError(f"an empty {role} cannot start or end free text", ptr)
        prev = roles.get(text)
        if prev is not None and prev[0] != role:
            raise StructuralTagError(
                f"{text!r} is both a trigger ({prev[1] if prev[0] == 'trigger' else ptr}) and "
                f"a string that ends the free text at {region or '/'} "
                f"({ptr if prev[0] == 'trigger' else prev[1]})",
                ptr,
            )
        roles.setdefault(text, (role, ptr))
    for text, ptr in excludes:
        if not text:
            raise StructuralTagError("an excluded string is not empty", ptr)
        prev = roles.get(text)
        if prev is not None:
            if prev[0] == "trigger":
                raise StructuralTagError(f"{text!r} is excluded and a trigger ({prev[1]})", ptr)
            continue  # excluding the string that ends the text: it ends the text
        roles[text] = ("excluded string", ptr)
    texts = list(roles)
    enc = [t.encode("utf-8") for t in texts]
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if overlap(enc[i], enc[j]):
                a, b = (i, j) if len(enc[i]) <= len(enc[j]) else (j, i)
                (ra, pa), (rb, pb) = roles[texts[a]], roles[texts[b]]
                raise StructuralTagError(
                    f"ambiguous free text at {region or '/'}: the {ra} {texts[a]!r} ({pa}) "
                    f"occurs inside the {rb} {texts[b]!r} ({pb}), so one of them could never "
                    "be told apart where the text reaches it",
                    pb,
                )
    index = {t: i for i, t in enumerate(texts) if roles[t][0] != "excluded string"}
    return tuple(enc), index


def _below(e: CorralError, ptr: str) -> CorralError:
    """``e``, raised by a sub-spec's front end, as the same kind of error at ``ptr`` (the
    sub-spec's pointer inside the structural tag) and below."""
    if isinstance(e, UnsupportedFeatureError):
        inner = e.location.pointer if e.location is not None else None
        loc = (
            Location(pointer=ptr + inner)
            if inner
            else Location(f"{ptr} ({e.location})" if e.location else ptr, pointer=ptr)
        )
        return UnsupportedFeatureError(e.feature, location=loc, detail=e.detail)
    inner = getattr(e, "pointer", None) or (e.location.pointer if e.location is not None else None)
    where = ptr + inner if inner and inner != "/" else ptr
    msg = getattr(e, "message", None) or str(e)
    if isinstance(e, EmptyLanguageError):
        return EmptyLanguageError(f"{msg} (at {where})", location=Location(pointer=where))
    if isinstance(e, GrammarError):
        return StructuralTagError(f"{msg}", where)
    if isinstance(e, CompileBudgetError):
        return CompileBudgetError(f"{e} (at {where})")
    return e
