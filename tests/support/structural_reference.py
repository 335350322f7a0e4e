"""An independent reference for structural tags: the spec as one Lark grammar, decided by
Lark's Earley parser (``lexer="dynamic_complete"``: every terminal may end at every
length) on decoded text.

Free text is a regex terminal with a lookahead at every character, ``(?:(?!P1|P2|..)[^S])+``
where ``P`` are the triggers, excluded strings and the strings that can follow the text
(computed here by FIRST/FOLLOW sets over the spec tree, not by corral's continuations),
followed by what follows. Special tokens are written into the decoded text as
``\\ue000<id>\\ue001`` and free text never holds ``\\ue000``.

JSON Schemas are the compact subset corral writes with ``whitespace="compact"``: objects
with properties in order (optional ones may be left out), strings, integers, booleans,
``enum`` of strings; others raise ``NotImplementedError``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lark import Lark

from corral.grammar.structural import nodes as n

SPECIAL_OPEN, SPECIAL_CLOSE = "\ue000", "\ue001"

# FIRST sets: a set of strings (literal starts) and tokens; "text" marks free text or a
# sub-spec that starts otherwise (then nothing may precede it without an end).


def _lit(s: str) -> str:
    return json.dumps(s)


class Reference:
    """``Reference(spec, token_ids).accepts(text)``; ``token_ids`` maps a special token's
    text to its id (for :class:`~corral.grammar.structural.nodes.Token` given by text)."""

    def __init__(self, spec: n.Format, token_ids: dict[str, int] | None = None) -> None:
        self.token_ids = token_ids or {}
        self.rules: list[str] = []
        self.count = 0
        start = self._node(spec, frozenset({"$end"}))
        text = "start: " + start + "\n" + "\n".join(self.rules) + '\nSP: " "\n'
        self.grammar_text = text
        self.parser = Lark(text, parser="earley", lexer="dynamic_complete", start="start")

    def accepts(self, text: str) -> bool:
        try:
            self.parser.parse(text)
        except Exception:
            return False
        return True

    # -- helpers -----------------------------------------------------------------------
    def _new(self, alts: list[str]) -> str:
        self.count += 1
        name = f"r{self.count}"
        self.rules.append(f"{name}: " + " | ".join(alts))  # an empty alternative: ""
        return name

    def _tok(self, ref: n.TokenRef) -> str:
        tid = ref if isinstance(ref, int) else self.token_ids[ref]
        return _lit(f"{SPECIAL_OPEN}{tid}{SPECIAL_CLOSE}")

    def _text(self, patterns: set[str]) -> str:
        self.count += 1
        name = f"TEXT{self.count}"
        pats = "|".join(re.escape(p) for p in sorted(patterns, key=len, reverse=True))
        pats = pats.replace("/", "\\/")
        body = f"(?:(?!{pats})[^\\ue000])+" if pats else "[^\\ue000]+"
        self.rules.append(f"{name}: /{body}/s")
        return name

    # -- FIRST sets --------------------------------------------------------------------
    def first(self, node: n.Format) -> tuple[set[Any], bool]:
        """(strings and ("tok", ref) items that can begin ``node``, whether it can be empty);
        ``"*"`` in the set: it can begin with free text or a sub-spec."""
        if isinstance(node, n.Const):
            return ({node.value}, False) if node.value else (set(), True)
        if isinstance(node, n.Token):
            return {("tok", node.token)}, False
        if isinstance(node, n.Tag):
            if isinstance(node.begin, n.Token):
                return {("tok", node.begin.token)}, False
            if node.begin:
                return {node.begin}, False
            return self.first(n.Sequence([node.content, *_end_formats(node)]))
        if isinstance(node, n.Sequence):
            out: set[Any] = set()
            for e in node.elements:
                f, nullable = self.first(e)
                out |= f
                if not nullable:
                    return out, False
            return out, True
        if isinstance(node, n.Or):
            out, nul = set(), False
            for e in node.elements:
                f, x = self.first(e)
                out |= f
                nul = nul or x
            return out, nul
        if isinstance(node, (n.Optional, n.Star)):
            return self.first(node.content)[0], True
        if isinstance(node, n.Plus):
            return self.first(node.content)
        if isinstance(node, n.Repeat):
            f, x = self.first(node.content)
            return f, x or node.min == 0
        if isinstance(node, (n.TriggeredTags, n.TokenTriggeredTags)) and node.at_least_one:
            out = set()
            for t in node.tags:
                out |= self.first(t)[0]
            return out, False
        if isinstance(node, n.TagsWithSeparator):
            out = set()
            for t in node.tags:
                out |= self.first(t)[0]
            return out, not node.at_least_one
        return {"*"}, True

    def _stops(self, follow: frozenset[Any]) -> set[str]:
        if "*" in follow:
            raise ValueError("free text followed by free text")
        return {s for s in follow if isinstance(s, str) and s != "$end"}

    # -- nodes (``follow``: what can come right after the node) -------------------------
    def _node(self, node: n.Format, follow: frozenset[Any]) -> str:
        if isinstance(node, n.Const):
            return _lit(node.value) if node.value else self._new([""])
        if isinstance(node, n.Token):
            return self._tok(node.token)
        if isinstance(node, n.Sequence):
            return self._new([" ".join(self._seq(list(node.elements), follow)) or ""])
        if isinstance(node, n.Or):
            return self._new([self._node(e, follow) for e in node.elements])
        if isinstance(node, n.Optional):
            return self._new(["", self._node(node.content, follow)])
        if isinstance(node, (n.Star, n.Plus)):
            inner_follow = follow | self.first(node.content)[0]
            x = self._node(node.content, frozenset(inner_follow))
            self.count += 1
            name = f"r{self.count}"
            lo = 0 if isinstance(node, n.Star) else 1
            self.rules.append(f"{name}: {x}*" if lo == 0 else f"{name}: {x}+")
            return name
        if isinstance(node, n.Repeat):
            inner_follow = follow | self.first(node.content)[0]
            x = self._node(node.content, frozenset(inner_follow))
            parts = [x] * node.min
            if node.max < 0:
                parts.append(f"{x}*")
            else:
                parts.extend([f"{x}?"] * (node.max - node.min))
            return self._new([" ".join(parts)])
        if isinstance(node, n.Tag):
            return self._new([" ".join(self._tag(node, follow))])
        if isinstance(node, n.AnyText):
            t = self._text(set(node.excludes) | self._stops(follow))
            return self._new(["", t])
        if isinstance(node, n.TriggeredTags):
            return self._triggered(node, follow)
        if isinstance(node, n.TagsWithSeparator):
            tag_follow = follow | {node.separator}
            tags = self._new([self._node(t, frozenset(tag_follow)) for t in node.tags])
            if node.stop_after_first:
                body = tags
            else:
                body = self._new(
                    [f"{tags} ({_lit(node.separator)} {tags})*" if node.separator else f"{tags}+"]
                )
            return self._new([body] if node.at_least_one else ["", body])
        if isinstance(node, n.TokenTriggeredTags):
            excl = tuple(x for x in node.exclude_tokens if isinstance(x, str))
            return self._triggered(
                n.TriggeredTags([], node.tags, node.at_least_one, node.stop_after_first, excl),
                follow,
            )
        if isinstance(node, n.Dispatch):
            tags = [n.Tag(p, f, "") for p, f in node.rules]
            return self._triggered(
                n.TriggeredTags(
                    [p for p, _ in node.rules], tags, False, not node.loop, node.excludes
                ),
                follow,
            )
        if isinstance(node, n.JSONSchema):
            return self._json(node.schema_json())
        if isinstance(node, n.Regex):
            self.count += 1
            name = f"RE{self.count}"
            self.rules.append(f"{name}: /{node.pattern.replace('/', chr(92) + '/')}/")
            return name
        raise NotImplementedError(type(node).__name__)

    def _seq(self, elements: list[n.Format], follow: frozenset[Any]) -> list[str]:
        out = []
        for i, e in enumerate(elements):
            f: set[Any] = set()
            nullable = True
            for later in elements[i + 1 :]:
                fl, nl = self.first(later)
                f |= fl
                if not nl:
                    nullable = False
                    break
            if nullable:
                f |= follow
            out.append(self._node(e, frozenset(f)))
        return out

    def _tag(self, tag: n.Tag, follow: frozenset[Any]) -> list[str]:
        begin = (
            self._tok(tag.begin.token)
            if isinstance(tag.begin, n.Token)
            else (_lit(tag.begin) if tag.begin else "")
        )
        if isinstance(tag.end, n.Token):
            end_first: set[Any] = {("tok", tag.end.token)}
            end = self._tok(tag.end.token)
        else:
            ends = [e for e in tag.ends]
            end_first = {e for e in ends if e}
            end = "(" + " | ".join(_lit(e) for e in ends if e) + ")" if any(ends) else ""
            if not any(ends):
                end_first = set(follow)
        content = self._node(tag.content, frozenset(end_first))
        return [x for x in (begin, content, end) if x]

    def _triggered(self, node: n.TriggeredTags, follow: frozenset[Any]) -> str:
        stops = self._stops(follow)
        text = self._text(set(node.triggers) | set(node.excludes) | stops)
        after_tag = follow if node.stop_after_first else frozenset({"*"})
        tags = []
        for t in node.tags:
            # free text follows a tag in the loop: its content is bounded by the tag's end
            tags.append(self._new([" ".join(self._tag(t, after_tag))]))
        tag = self._new(tags)
        if node.at_least_one and node.stop_after_first:
            return tag
        if node.at_least_one:
            return self._new([f"{tag} ({text}? {tag})* {text}?"])
        if node.stop_after_first:
            return self._new([f"{text}? ({tag})?"])
        return self._new([f"{text}? ({tag} {text}?)*"])

    # -- compact JSON subset ------------------------------------------------------------
    def _json(self, schema: Any) -> str:
        if schema.get("enum") is not None:
            return self._new([_lit(json.dumps(v)) for v in schema["enum"]])
        t = schema.get("type")
        if t == "string":
            self.count += 1
            name = f"STR{self.count}"
            self.rules.append(name + r': /"(?:[^"\\\x00-\x1f]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/')
            return name
        if t == "integer":
            self.count += 1
            name = f"INT{self.count}"
            self.rules.append(f"{name}: /-?(?:0|[1-9][0-9]*)/")
            return name
        if t == "boolean":
            return self._new([_lit("true"), _lit("false")])
        if t == "object":
            props = schema.get("properties", {})
            req = set(schema.get("required", []))
            if schema.get("additionalProperties", True) is not False:
                raise NotImplementedError("additional properties")
            # properties in order, optional ones may be left out: build right to left
            # "first" (no comma yet) and "rest" (comma before) chains
            first_alt = ['"}"']
            rest_alt = ['"}"']
            for name in reversed(list(props)):
                key = _lit(json.dumps(name) + ":")
                v = self._json(props[name])
                r_next = rest_alt[-1]
                this_first = self._new([f"{key} SP? {v} {r_next}"])
                this_rest = self._new([f'"," SP? {key} SP? {v} {r_next}'])
                if name in req:
                    first_alt.append(this_first)
                    rest_alt.append(this_rest)
                else:
                    first_alt.append(self._new([this_first, first_alt[-1]]))
                    rest_alt.append(self._new([this_rest, rest_alt[-1]]))
            return self._new([f'"{{" {first_alt[-1]}'])
        raise NotImplementedError(f"schema {schema!r}")


def _end_formats(tag: n.Tag) -> list[n.Format]:
    if isinstance(tag.end, n.Token):
        return [tag.end]
    return [n.Or([n.Const(e) for e in tag.ends])]


def decode(vocab: Any, ids: list[int]) -> str | None:
    """The text of ``ids`` with special tokens as markers; ``None`` if not valid UTF-8."""
    parts: list[bytes] = []
    for i in ids:
        if vocab.kind(i) == "special":
            parts.append(f"{SPECIAL_OPEN}{i}{SPECIAL_CLOSE}".encode())
        else:
            parts.append(vocab.token_bytes(i))
    try:
        return b"".join(parts).decode("utf-8")
    except UnicodeDecodeError:
        return None
