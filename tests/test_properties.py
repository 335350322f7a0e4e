"""Property-based tests over random grammars, random regexes and small synthetic vocabularies.

A synthetic vocabulary has every single byte of a small alphabet (ASCII letters, digits,
punctuation, and the UTF-8 bytes of "é" and "中" one byte per token) plus random multi-byte
tokens over the same bytes, shuffled, and an EOS token with empty bytes as the last id. Token
boundaries then fall anywhere against lexeme boundaries, and multi-byte characters are split
across tokens. With a few dozen tokens, exact reference checks are cheap:

a. the mask equals, token by token over the whole vocabulary, the set of tokens that
   ``try_consume`` accepts; EOS is allowed exactly when ``is_accepting()``;
b. no dead ends: every mask allows something, and every allowed token leads to a state whose
   mask allows something;
c. soundness: every accepting prefix of a random walk is valid UTF-8 and accepted by Lark's
   Earley parser with its default dynamic lexer;
d. completeness: random words of the grammar that Lark accepts are accepted token by token
   (each token in the mask before it is consumed), cut greedily or at random into tokens;
e. regexes: ``is_accepting()`` agrees with ``re.fullmatch`` all along random walks, and random
   strings of the regex's language are accepted whatever their cut into tokens;
f. rollback and fork: rolling back k tokens gives back exactly the masks of k steps earlier,
   and a fork that goes on differently leaves the original untouched.

Random grammars use only terminals whose Python regex match is the longest match (string
literals, and concatenations of single characters and character classes with quantifiers,
never alternations such as ``a|ab`` where Python's regex picks the first alternative): then
Lark's dynamic lexer and corral's maximal-munch lexemes agree wherever corral accepts.
"""

from __future__ import annotations

import random
import re

import numpy as np
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from support.words import LarkUndecidedError, WordGenerator, lark_accepts, lark_parser

import corral
from corral import CorralError, Grammar, allocate_bitmask, bitmask_to_bool

# -- the synthetic vocabulary ------------------------------------------------------------------

CHARS = ["a", "b", "c", "0", "1", " ", "(", ")", ",", "é", "中"]
SINGLE_BYTES = sorted({bytes([b]) for c in CHARS for b in c.encode()})  # 14 single-byte tokens


@st.composite
def multibyte_tokens(draw: st.DrawFn) -> bytes:
    """A slice of at least two bytes of a short UTF-8 text over the alphabet (so it may start
    or end inside "é" or "中")."""
    text = draw(st.text(alphabet=CHARS, min_size=1, max_size=4)).encode()
    assume(len(text) >= 2)
    i = draw(st.integers(0, len(text) - 2))
    j = draw(st.integers(i + 2, len(text)))
    return text[i:j]


@st.composite
def token_lists(draw: st.DrawFn) -> list[bytes]:
    """The token bytes of a synthetic vocabulary: all single bytes of the alphabet and random
    multi-byte tokens (duplicates allowed), shuffled, then EOS (empty bytes) as the last id."""
    extra = draw(st.lists(multibyte_tokens(), max_size=16))
    tokens = draw(st.permutations(SINGLE_BYTES + extra))
    return [*tokens, b""]


def make_vocab(tokens: list[bytes]) -> corral.Vocabulary:
    return corral.Vocabulary(tokens, eos_token_ids=[len(tokens) - 1])


# -- random grammars ---------------------------------------------------------------------------


def _regex_char(c: str) -> str:
    return re.escape(c)


@st.composite
def _regex_atom(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["char", "class", "class", "negclass", "dot"]))
    if kind == "char":
        return _regex_char(draw(st.sampled_from(CHARS)))
    if kind == "dot":
        return "."
    chars = draw(st.lists(st.sampled_from(CHARS), min_size=1, max_size=4, unique=True))
    body = "".join(_regex_char(c) for c in sorted(chars))
    return f"[^{body}]" if kind == "negclass" else f"[{body}]"


_NONEMPTY_QUANTS = ["", "", "+", "{2}", "{1,3}"]
_QUANTS = [*_NONEMPTY_QUANTS, "?", "*", "{0,2}"]


@st.composite
def regex_terminals(draw: st.DrawFn) -> str:
    """``/.../``: one to three single characters or classes, each with a greedy quantifier,
    at least one of them not optional (no terminal matches the empty string)."""
    n = draw(st.integers(1, 3))
    atoms = [draw(_regex_atom()) for _ in range(n)]
    quants = [draw(st.sampled_from(_QUANTS)) for _ in range(n)]
    if all(q not in _NONEMPTY_QUANTS for q in quants):
        quants[draw(st.integers(0, n - 1))] = draw(st.sampled_from(_NONEMPTY_QUANTS))
    return "/" + "".join(a + q for a, q in zip(atoms, quants, strict=True)) + "/"


@st.composite
def string_terminals(draw: st.DrawFn) -> str:
    return '"' + draw(st.text(alphabet=CHARS, min_size=1, max_size=3)) + '"'


@st.composite
def lark_grammars(draw: st.DrawFn) -> str:
    """Lark grammar text: 2-5 rules of 1-3 alternatives of 0-4 symbols (rule references,
    string literals, regex terminals; sometimes with ``?``/``*``/``+``), recursion allowed,
    sometimes ``%ignore " "``. The first alternative of each rule uses only later rules, so
    every rule is productive."""
    n_rules = draw(st.integers(2, 5))
    names = ["start"] + [f"r{i}" for i in range(1, n_rules)]
    terminals = draw(
        st.lists(st.one_of(string_terminals(), regex_terminals()), min_size=1, max_size=5)
    )
    lines = []
    for i, name in enumerate(names):
        alts = []
        for k in range(draw(st.integers(1, 3))):
            refs = names[i + 1 :] if k == 0 else names
            syms = []
            for _ in range(draw(st.integers(0, 4))):
                if refs and draw(st.integers(0, 2)) == 0:
                    sym = draw(st.sampled_from(refs))
                else:
                    sym = draw(st.sampled_from(terminals))
                if k > 0:
                    sym += draw(st.sampled_from(["", "", "", "", "?", "*", "+"]))
                syms.append(sym)
            alts.append(" ".join(syms))
        lines.append(f"{name}: " + " | ".join(alts))
    if draw(st.booleans()):
        lines.append('%ignore " "')
    return "\n".join(lines) + "\n"


def load_grammar(text: str) -> Grammar:
    """The grammar, or reject the example if corral or Lark refuses it (corral only with one
    of its own errors)."""
    from lark.exceptions import LarkError

    try:
        lark_parser(text)
    except LarkError:
        event("rejected by Lark")
        assume(False)
    try:
        g = Grammar.from_lark(text)
    except Exception as e:
        assert isinstance(e, CorralError), f"corral raised a non-corral error: {e!r}"
        event(f"rejected by corral: {type(e).__name__}")
        assume(False)
    return g


# -- helpers -----------------------------------------------------------------------------------


def mask_of(m: corral.Matcher) -> np.ndarray:
    bm = allocate_bitmask(1, m.vocab_size)
    m.fill_bitmask(bm)
    return bitmask_to_bool(bm, m.vocab_size)[0]


def reference_mask(m: corral.Matcher, vocab_size: int) -> np.ndarray:
    """The tokens that ``try_consume`` accepts (each rolled back at once)."""
    n = m.num_tokens
    ref = np.zeros(vocab_size, bool)
    for t in range(vocab_size):
        if m.try_consume(t):
            ref[t] = True
            m.rollback(1)
        assert m.num_tokens == n
    return ref


def decode(vocab: corral.Vocabulary, ids: list[int]) -> str | None:
    try:
        return vocab.decode(ids).decode("utf-8")
    except UnicodeDecodeError:
        return None


def cut_into_tokens(
    tokens: list[bytes], data: bytes, rng: random.Random | None
) -> list[int] | None:
    """``data`` cut into vocabulary tokens: the longest token each time (``rng`` None), or a
    random token among those that are prefixes of the rest. None when some byte is outside
    the vocabulary."""
    out: list[int] = []
    i = 0
    while i < len(data):
        cands = [t for t, b in enumerate(tokens) if b and data.startswith(b, i)]
        if not cands:
            return None
        t = max(cands, key=lambda t: len(tokens[t])) if rng is None else rng.choice(cands)
        out.append(t)
        i += len(tokens[t])
    return out


def random_walk(
    m: corral.Matcher,
    rng: random.Random,
    eos: int,
    *,
    max_steps: int = 24,
    p_stop: float = 0.25,
    target: list[int] | None = None,
    check=None,  # type: ignore[no-untyped-def]
) -> list[int]:
    """Consume random allowed tokens (following ``target`` while it stays allowed, with
    random detours), calling ``check(mask, consumed)`` before each step and at the end;
    stop at random where EOS is allowed (without consuming it)."""
    consumed: list[int] = []
    on_target = target is not None
    for step in range(max_steps + 1):
        a = mask_of(m)
        if check is not None:
            check(a, consumed)
        if step == max_steps:
            break
        allowed = [int(t) for t in np.flatnonzero(a) if t != eos]
        if a[eos] and (not allowed or rng.random() < p_stop):
            break
        if not allowed:
            break
        if on_target and step < len(target) and a[target[step]] and rng.random() < 0.85:
            t = target[step]
        else:
            t = rng.choice(allowed)
            if on_target and not (step < len(target) and t == target[step]):
                on_target = False
        m.consume(t)
        consumed.append(t)
    return consumed


def accept_cut(c: corral.CompiledGrammar, ids: list[int], eos: int, what: str) -> None:
    m = c.matcher()
    for i, t in enumerate(ids):
        a = mask_of(m)
        assert a[t], f"{what}: token {i} ({c.vocab.token_bytes(t)!r}) missing from the mask"
        m.consume(t)
    assert m.is_accepting(), f"{what}: complete word not accepting"
    assert mask_of(m)[eos], f"{what}: EOS not allowed at the end"


def word_target(g: Grammar, tokens: list[bytes], seed: int) -> list[int] | None:
    try:
        word = WordGenerator(g, seed=seed, max_depth=5).word(tries=10)
    except RuntimeError:
        return None
    if len(word) > 120:
        return None
    return cut_into_tokens(tokens, word, random.Random(seed))


SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}

# -- a. mask == reference ----------------------------------------------------------------------


@settings(max_examples=120, **SETTINGS)
@given(lark_grammars(), token_lists(), st.randoms(use_true_random=False))
def test_mask_equals_try_consume_reference(text: str, tokens: list[bytes], rng) -> None:  # type: ignore[no-untyped-def]
    g = load_grammar(text)
    vocab = make_vocab(tokens)
    eos = vocab.size - 1
    c = corral.compile(g, vocab)
    m = c.matcher()

    def check(a: np.ndarray, consumed: list[int]) -> None:
        ref = reference_mask(m, vocab.size)
        diff = np.flatnonzero(a != ref).tolist()
        assert not diff, (
            f"after {consumed}: mask and try_consume disagree on "
            f"{[(t, tokens[t], bool(a[t])) for t in diff]}"
        )
        assert a[eos] == m.is_accepting(), f"after {consumed}: EOS vs is_accepting"

    target = word_target(g, tokens, rng.randrange(1 << 30))
    random_walk(m, rng, eos, target=target, check=check)


# -- b. no dead ends ---------------------------------------------------------------------------


@settings(max_examples=100, **SETTINGS)
@given(lark_grammars(), token_lists(), st.randoms(use_true_random=False))
def test_no_dead_ends(text: str, tokens: list[bytes], rng) -> None:  # type: ignore[no-untyped-def]
    g = load_grammar(text)
    vocab = make_vocab(tokens)
    eos = vocab.size - 1
    c = corral.compile(g, vocab)
    m = c.matcher()

    def check(a: np.ndarray, consumed: list[int]) -> None:
        assert a.any(), f"dead end after {consumed}: nothing allowed"
        for t in np.flatnonzero(a).tolist():
            if t == eos:
                continue
            m.consume(t)
            assert mask_of(m).any(), f"dead end after {[*consumed, t]}: nothing allowed"
            m.rollback(1)

    target = word_target(g, tokens, rng.randrange(1 << 30))
    random_walk(m, rng, eos, target=target, check=check)


# -- c. soundness against Lark -----------------------------------------------------------------


@settings(max_examples=150, **SETTINGS)
@given(lark_grammars(), token_lists(), st.randoms(use_true_random=False))
def test_accepted_outputs_are_accepted_by_lark(text: str, tokens: list[bytes], rng) -> None:  # type: ignore[no-untyped-def]
    g = load_grammar(text)
    vocab = make_vocab(tokens)
    eos = vocab.size - 1
    c = corral.compile(g, vocab)
    m = c.matcher()
    seen: set[str] = set()

    def check(a: np.ndarray, consumed: list[int]) -> None:
        if not m.is_accepting():
            return
        raw = vocab.decode(consumed)
        try:
            s = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise AssertionError(f"accepting after {consumed} but {raw!r} is not UTF-8") from None
        if s not in seen:
            seen.add(s)
            try:
                ok = lark_accepts(text, s)
            except LarkUndecidedError:
                event("Lark undecided")
                return
            assert ok, f"corral accepts {s!r} (tokens {consumed}), Lark does not"

    for _ in range(2):
        m = c.matcher()
        target = word_target(g, tokens, rng.randrange(1 << 30))
        random_walk(m, rng, eos, target=target, check=check, p_stop=0.15)
    event("accepting prefixes checked: " + ("0" if not seen else "1+" if len(seen) < 4 else "4+"))


# -- d. completeness ---------------------------------------------------------------------------


@settings(max_examples=150, **SETTINGS)
@given(lark_grammars(), token_lists(), st.integers(0, 1 << 30))
def test_random_words_are_accepted(text: str, tokens: list[bytes], seed: int) -> None:
    g = load_grammar(text)
    vocab = make_vocab(tokens)
    eos = vocab.size - 1
    c = corral.compile(g, vocab)
    gen = WordGenerator(g, seed=seed, max_depth=5)
    rng = random.Random(seed)
    checked = 0
    for _ in range(4):
        try:
            word = gen.word(tries=10)
        except RuntimeError:
            continue
        if len(word) > 150:
            continue
        s = word.decode("utf-8")
        try:
            if not lark_accepts(text, s):
                event("word rejected by Lark")
                continue
        except LarkUndecidedError:
            event("Lark undecided")
            continue
        cuts = [cut_into_tokens(tokens, word, None)]
        cuts += [cut_into_tokens(tokens, word, rng) for _ in range(3)]
        for i, ids in enumerate(cuts):
            if ids is None:  # a character outside the alphabet (from a negated class or '.')
                continue
            accept_cut(c, ids, eos, f"word {s!r}, cut {i} {ids}")
            checked += 1
    event(f"cuts checked: {min(checked, 8)}{'+' if checked >= 8 else ''}")


# -- e. regexes --------------------------------------------------------------------------------

# A regex is a small tree: ("char", c) | ("class", chars, negated) | ("dot",)
# | ("cat", [r...]) | ("alt", [r...]) | ("rep", r, lo, hi or None, lazy)


@st.composite
def regex_trees(draw: st.DrawFn, depth: int = 3):  # type: ignore[no-untyped-def]
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        kind = draw(st.sampled_from(["char", "char", "class", "negclass", "dot"]))
        if kind == "char":
            return ("char", draw(st.sampled_from(CHARS)))
        if kind == "dot":
            return ("dot",)
        chars = draw(st.lists(st.sampled_from(CHARS), min_size=1, max_size=4, unique=True))
        return ("class", tuple(sorted(chars)), kind == "negclass")
    kind = draw(st.sampled_from(["cat", "cat", "alt", "rep", "rep"]))
    if kind == "cat":
        return ("cat", draw(st.lists(regex_trees(depth - 1), min_size=2, max_size=3)))
    if kind == "alt":
        if draw(st.booleans()):  # alternation of single characters or classes
            return ("alt", draw(st.lists(regex_trees(0), min_size=2, max_size=3)))
        return ("alt", draw(st.lists(regex_trees(depth - 1), min_size=2, max_size=3)))
    lo, hi = draw(
        st.sampled_from([(0, 1), (0, None), (1, None), (2, 2), (0, 2), (1, 3), (2, None)])
    )
    return ("rep", draw(regex_trees(depth - 1)), lo, hi, draw(st.integers(0, 4)) == 0)


def regex_text(r) -> str:  # type: ignore[no-untyped-def]
    kind = r[0]
    if kind == "char":
        return re.escape(r[1])
    if kind == "dot":
        return "."
    if kind == "class":
        return "[" + ("^" if r[2] else "") + "".join(re.escape(c) for c in r[1]) + "]"
    if kind == "cat":
        return "".join(f"(?:{regex_text(x)})" if x[0] == "alt" else regex_text(x) for x in r[1])
    if kind == "alt":
        return "(" + "|".join(regex_text(x) for x in r[1]) + ")"
    _, sub, lo, hi, lazy = r
    inner = regex_text(sub)
    if sub[0] in ("cat", "rep"):
        inner = f"(?:{inner})"
    q = {(0, 1): "?", (0, None): "*", (1, None): "+"}.get((lo, hi))
    if q is None:
        q = f"{{{lo},}}" if hi is None else f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"
    return inner + q + ("?" if lazy else "")


def regex_sample(r, rng: random.Random) -> str | None:  # type: ignore[no-untyped-def]
    """A random string of the regex's language over the alphabet (None if none there)."""
    kind = r[0]
    if kind == "char":
        return r[1]
    if kind == "dot":
        return rng.choice(CHARS)
    if kind == "class":
        pool = [c for c in CHARS if (c in r[1]) != r[2]]
        return rng.choice(pool) if pool else None
    if kind == "cat":
        parts = [regex_sample(x, rng) for x in r[1]]
        return None if any(p is None for p in parts) else "".join(parts)  # type: ignore[arg-type]
    if kind == "alt":
        order = list(r[1])
        rng.shuffle(order)
        for x in order:
            s = regex_sample(x, rng)
            if s is not None:
                return s
        return None
    _, sub, lo, hi, _lazy = r
    n = rng.randint(lo, lo + 3 if hi is None else hi)
    parts = [regex_sample(sub, rng) for _ in range(n)]
    return None if any(p is None for p in parts) else "".join(parts)  # type: ignore[arg-type]


@settings(max_examples=200, **SETTINGS)
@given(regex_trees(), token_lists(), st.randoms(use_true_random=False))
def test_regex_walks_and_samples_agree_with_re(tree, tokens: list[bytes], rng) -> None:  # type: ignore[no-untyped-def]
    pattern = regex_text(tree)
    rx = re.compile(pattern)
    try:
        g = Grammar.from_regex(pattern)
    except Exception as e:
        assert isinstance(e, CorralError), f"corral raised a non-corral error: {e!r}"
        event(f"regex rejected by corral: {type(e).__name__}")
        assume(False)
    vocab = make_vocab(tokens)
    eos = vocab.size - 1
    c = corral.compile(g, vocab)

    # random strings of the language, cut at random, are accepted
    for _ in range(3):
        s = regex_sample(tree, rng)
        if s is None or len(s) > 60:
            continue
        assert rx.fullmatch(s), (pattern, s)  # the sampler itself
        for cut_rng in (None, rng, rng):
            ids = cut_into_tokens(tokens, s.encode(), cut_rng)
            assert ids is not None
            accept_cut(c, ids, eos, f"regex {pattern!r}, string {s!r}, tokens {ids}")

    # along random walks, accepting == re.fullmatch, and the mask is the reference mask
    m = c.matcher()

    def check(a: np.ndarray, consumed: list[int]) -> None:
        s = decode(vocab, consumed)
        expected = s is not None and rx.fullmatch(s) is not None
        assert m.is_accepting() == expected, (pattern, vocab.decode(consumed), consumed)
        assert a[eos] == expected
        ref = reference_mask(m, vocab.size)
        diff = np.flatnonzero(a != ref).tolist()
        assert not diff, (pattern, consumed, [(t, tokens[t], bool(a[t])) for t in diff])

    random_walk(m, rng, eos, check=check, max_steps=16)


# -- f. rollback and fork ----------------------------------------------------------------------


@settings(max_examples=100, **SETTINGS)
@given(lark_grammars(), token_lists(), st.randoms(use_true_random=False))
def test_rollback_and_fork(text: str, tokens: list[bytes], rng) -> None:  # type: ignore[no-untyped-def]
    g = load_grammar(text)
    vocab = make_vocab(tokens)
    eos = vocab.size - 1
    c = corral.compile(g, vocab)
    m = c.matcher()
    masks: list[np.ndarray] = []
    accepting: list[bool] = []

    def record(a: np.ndarray, consumed: list[int]) -> None:
        masks.append(a.copy())
        accepting.append(m.is_accepting())

    target = word_target(g, tokens, rng.randrange(1 << 30))
    ids = random_walk(m, rng, eos, target=target, check=record, max_steps=16)
    n = len(ids)
    assert len(masks) == n + 1

    # EOS, then only EOS; rolling it back restores the state
    if accepting[n]:
        m.consume(eos)
        after = mask_of(m)
        assert after[eos] and after.sum() == 1
        m.rollback(1)
        assert np.array_equal(mask_of(m), masks[n])

    # roll back k tokens: the mask of step n-k
    k = rng.randint(0, n)
    m.rollback(k)
    p = n - k
    assert m.num_tokens == p
    assert np.array_equal(mask_of(m), masks[p]), f"rollback {k} of {ids}"
    assert m.is_accepting() == accepting[p]

    # a fork sees the same state, goes on differently, and rolls back further
    f = m.fork()
    assert np.array_equal(mask_of(f), masks[p])
    allowed = [t for t in np.flatnonzero(masks[p]).tolist() if p >= n or t != ids[p]]
    if allowed:
        f.consume(rng.choice(allowed))
        random_walk(f, rng, eos, max_steps=6)
    if f.num_tokens and f.try_consume(eos):
        assert f.is_finished()
    j = rng.randint(0, p)
    f.rollback(f.num_tokens - (p - j))
    assert np.array_equal(mask_of(f), masks[p - j]), "fork rolled back before the fork point"

    # the original is untouched: same mask, and replaying the walk gives the same masks
    assert np.array_equal(mask_of(m), masks[p]), "a fork changed the original"
    for i in range(p, n):
        m.consume(ids[i])
        assert np.array_equal(mask_of(m), masks[i + 1]), f"replay step {i + 1} of {ids}"
        assert m.is_accepting() == accepting[i + 1]
