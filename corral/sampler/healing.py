"""Token healing: back the prompt up by its last token, and let the first generated tokens
spell those bytes again (exactly, under the constraint).

A prompt that ends inside what the tokenizer would make one token (a trailing space, half a
word, ``{"name": "``) leaves the model at a token boundary it never saw in training: text
tokenized as a whole would have merged the last token with what follows. Healing removes
the prompt's last token ``t`` (its bytes ``R``) and constrains the output to start with
``R``; the model then chooses the tokenization across the boundary itself.

**What backs up** (:func:`heal_prompt`): the last token, when it is a normal token (never a
special token, BOS or EOS), the prompt keeps at least one token, and some longer normal
token starts with its bytes (else no token could cross the boundary: nothing to heal). One
token is enough: the token before ``t`` could only merge with what follows through ``t``,
which is then re-spelled; backing up further would re-open boundaries the prompt's text
does fix (and cost more re-spelled tokens for little gain).

**The exact mask** (:class:`HealingView`): while ``P`` (the part of ``R`` not re-spelled
yet) is not empty, a token ``u`` is allowed iff it is a normal token and either

* ``bytes(u)`` is a non-empty prefix of ``P`` (``== P`` included) and the rest of ``P``
  can in turn be spelled this way (checked; always so when every byte is a token), or
* ``bytes(u) = P + x`` with ``x`` non-empty and viable for the constraint: the matcher can
  read ``x`` from its state (the same test the matcher applies to a token's bytes).

EOS and special tokens are never allowed while ``P`` is not empty. After ``R`` is spelled,
the matcher reads the ``x`` of the last healing token (if any) and decoding goes on as
without healing. So every output is one the unhealed prompt allows (the bytes after ``R``
are a valid output), and nothing dead-ends.

The extension tokens of ``P`` (``u = P + x``) are the tokens below ``P``'s node of the
vocabulary trie. One depth-first walk of that subtree (a Numba kernel) reads each node's
byte with the matcher's Earley kernel from its parent's chart sets, built above the
matcher's current sets (the matcher's own state is not changed), and skips the subtree of
every byte the grammar refuses: each byte is read once, however many tokens share it.
With the 128k-token Llama-3 vocabulary this takes well under a millisecond for a JSON
schema (the grammar refuses most first bytes), and about 80 ms at worst: a grammar that
allows any text, after a prompt ending in a space (58k extension tokens, all allowed). It
runs once per generation (and once more for each healing token that spells a proper
prefix of ``R``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..automata.kernels import earley
from ..automata.kernels.borrow import borrow
from ..automata.vocabulary import NORMAL
from ..errors import ArgumentTypeError, InvalidArgumentError, MatcherStateError, TokenRejectedError
from ..jit import kernel
from .registry import sampler_entry

__all__ = ["HealingView", "heal_prompt", "resolve_heal"]


def resolve_heal(heal: bool | None, sampler: str, *, text_prompt: bool, chat: bool) -> bool:
    """Whether to heal: ``None`` means on for a per-token sampler (``"mask"``, ``"awrs"``)
    with a text prompt and no chat template, off otherwise.

    Id prompts are the caller's own tokenization (kept as given unless ``heal=True``); a
    chat template ends with a boundary the model was trained on (``heal=True`` heals it
    anyway). ``True`` with a sequence sampler (``"smc"``, ``"asap"``) raises
    :class:`~corral.errors.InvalidArgumentError` (a ``ValueError``): they draw whole
    outputs from the prompt's ids and have no healing step.
    """
    entry = sampler_entry(sampler)
    if heal is None:
        return entry.per_token and text_prompt and not chat
    if not isinstance(heal, bool):
        raise ArgumentTypeError(f"heal must be True, False or None, not {heal!r}")
    if heal and not entry.per_token:
        raise InvalidArgumentError(
            f"heal=True is not available with sampler={sampler!r}: token healing runs in the "
            "token-by-token loop (sampler='mask' or 'awrs'); leave heal unset (off for this "
            "sampler)"
        )
    return heal


def heal_prompt(vocab: Any, ids: Sequence[int]) -> tuple[list[int], bytes]:
    """``(ids, healed)``: the prompt backed up by its last token when that token can be
    healed, with that token's bytes; else the ids unchanged and ``b""``.

    The last token is backed up when it is a normal token of ``vocab`` (not special, EOS,
    padding or empty), is not the only token, and some longer normal token starts with its
    bytes.
    """
    out = [int(i) for i in ids]
    if len(out) < 2:
        return out, b""
    t = out[-1]
    if not 0 <= t < vocab.size or int(vocab.kinds[t]) != NORMAL:
        return out, b""
    data = vocab.token_bytes(t)
    if not vocab.trie.extended(data):
        return out, b""
    return out[:-1], data


@kernel(nogil=True)
def _walk_below(
    gt,
    lex,
    P,
    L,
    S,
    stamp,
    sorig,
    ctx,
    top,
    node_byte,
    depth,
    subtree_end,
    root,
    sets,
    alive,
    resume,
):  # type: ignore[no-untyped-def]
    """Read the bytes below trie node ``root``, depth first, from the chart's first
    ``top`` sets: ``alive[j - root] = 1`` for each node ``j`` whose path from ``root``
    the chart can read. A dead node's subtree is skipped. Each node reads one byte from
    its parent's sets (``sets[d]``: the set count after the path down to depth ``d``
    below ``root``); the sets built above ``top`` are scratch, the chart's own are not
    changed. Returns 0, or a capacity error after saving in ``resume[0]`` the node to go
    on from once the chart has grown (``Chart.run`` grows it and calls again)."""
    gt, lex, P, L, S, stamp, sorig, ctx = borrow((gt, lex, P, L, S, stamp, sorig, ctx))
    node_byte, depth, subtree_end, sets, alive, resume = borrow(
        (node_byte, depth, subtree_end, sets, alive, resume)
    )
    d0 = depth[root]
    sets[0] = top
    end = subtree_end[root]
    j = resume[0]
    while j < end:
        d = depth[j] - d0
        st = earley.consume_bytes(
            gt, lex, P, L, S, stamp, sorig, ctx, sets[d - 1], node_byte, j, j + 1
        )
        if st < 0:
            resume[0] = j
            return st
        if st == 0:
            j = subtree_end[j]
        else:
            alive[j - root] = 1
            sets[d] = st
            j += 1
    return 0


class HealingView:
    """The matcher as the sampler sees it while the healed bytes are re-spelled.

    Has the matcher methods the token samplers use (``fill_bitmask``, ``is_accepting``,
    ``try_consume``/``rollback`` for AWRS checks, ``vocab_size``, ``compiled``), answering
    with the healing mask (see the module). :meth:`consume` takes a token for good; once
    the healed bytes are spelled (:attr:`done`), :meth:`commit` hands the bytes past them
    to the matcher, and decoding goes on with the matcher itself.

    ``matcher`` is not changed before :meth:`commit`.
    """

    def __init__(self, matcher: Any, healed: bytes) -> None:
        if not healed:
            raise InvalidArgumentError(f"healed must be non-empty bytes, got {healed!r}")
        if matcher.is_finished():
            raise MatcherStateError("cannot heal after EOS: the output is finished")
        self.matcher = matcher
        self.compiled = matcher.compiled
        self.vocab_size = matcher.vocab_size
        self.healed = bytes(healed)
        self._vocab = self.compiled.vocab
        self._pos = 0  # bytes of ``healed`` spelled so far
        self._rest = b""  # bytes past ``healed`` of the token that ended healing
        self._history: list[tuple[int, bytes]] = []  # (pos, rest) before each token
        self._committed = False
        self._ids: dict[int, np.ndarray] = {}  # pos -> allowed ids (sorted)
        self._rows: dict[int, np.ndarray] = {}  # pos -> the same as a uint32 bitmask row
        self._spellable: dict[int, bool] = {}  # pos -> healed[pos:] can be spelled

    # -- state ----------------------------------------------------------------------------
    @property
    def pending(self) -> bytes:
        """The healed bytes not spelled yet."""
        return self.healed[self._pos :]

    @property
    def done(self) -> bool:
        """Whether the healed bytes are all spelled."""
        return self._pos == len(self.healed)

    @property
    def rest(self) -> bytes:
        """The bytes past the healed ones of the token that ended healing (``b""`` before
        that, or when it ended exactly there)."""
        return self._rest

    @property
    def num_tokens(self) -> int:
        """Tokens consumed by the view."""
        return len(self._history)

    def _live(self) -> None:
        if self.done:
            raise MatcherStateError(
                "the healed bytes are spelled: commit, then use the matcher itself"
            )

    # -- masks ----------------------------------------------------------------------------
    def allowed_token_ids(self) -> np.ndarray:
        """The allowed next token ids (sorted) while healing."""
        self._live()
        return self._allowed(self._pos)

    def fill_row(self, dst: np.ndarray) -> None:
        """Write the allowed next tokens into ``dst`` (``uint32 [ceil(V/32)]``)."""
        self._live()
        row = self._rows.get(self._pos)
        if row is None:
            ids = self._allowed(self._pos)
            row = np.zeros(self.compiled.words, np.uint32)
            bits = np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32))
            np.bitwise_or.at(row, ids >> 5, bits)
            self._rows[self._pos] = row
        dst[:] = row

    def fill_bitmask(self, out: Any, row: int = 0) -> None:
        """Like :meth:`Matcher.fill_bitmask <corral.automata.matcher.Matcher.fill_bitmask>`,
        with the healing mask."""
        from ..automata.bitmask import bitmask_row

        self.fill_row(bitmask_row(out, self.vocab_size, row))

    def is_accepting(self) -> bool:
        """Never while healing: the output must first spell the healed bytes."""
        return False

    def is_finished(self) -> bool:
        return False

    def forced_tokens(self, tokenize: Any = None) -> list[int]:
        """None while healing: the model chooses how to spell the healed bytes."""
        return []

    def _allowed(self, pos: int) -> np.ndarray:
        ids = self._ids.get(pos)
        if ids is not None:
            return ids
        trie = self._vocab.trie
        pending = self.healed[pos:]
        found: list[np.ndarray] = []
        node = 0
        for k, b in enumerate(pending):  # tokens spelling a prefix of ``pending``
            node = trie.child(node, b)
            if node < 0:
                break
            n = int(trie.tok_count[node])
            if n and self._can_spell(pos + k + 1):
                s = int(trie.tok_start[node])
                found.append(np.asarray(trie.token_ids[s : s + n]))
        if node >= 0:  # tokens longer than ``pending`` that start with it
            found.append(self._extensions(node))
        ids = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int32)
        ids = ids.astype(np.int64)
        self._ids[pos] = ids
        return ids

    def _can_spell(self, pos: int) -> bool:
        """Whether ``healed[pos:]`` can be spelled by allowed tokens (no dead end)."""
        if pos == len(self.healed):
            return True
        hit = self._spellable.get(pos)
        if hit is None:
            hit = self._spellable[pos] = self._spells(pos)
        return hit

    def _spells(self, pos: int) -> bool:
        trie = self._vocab.trie
        node = 0
        for k, b in enumerate(self.healed[pos:]):  # cheap first: a token spelling a prefix
            node = trie.child(node, b)
            if node < 0:
                return False  # and no token starts with the whole rest
            if int(trie.tok_count[node]) and self._can_spell(pos + k + 1):
                return True
        return self._allowed(pos).shape[0] > 0  # a token spelling it and more

    def _extensions(self, node: int) -> np.ndarray:
        """The tokens below ``node`` (longer than its bytes, which they start with) whose
        bytes past ``node``'s the matcher can read from its state."""
        trie = self._vocab.trie
        end = int(trie.subtree_end[node])
        if end == node + 1:
            return np.zeros(0, np.int64)
        alive = np.zeros(end - node, np.uint8)
        sets = np.zeros(trie.max_depth + 2, np.int64)
        resume = np.array([node + 1], np.int64)
        chart = self.matcher.chart
        chart.run(_walk_below, chart.n_sets, trie.node_byte, trie.depth, trie.subtree_end,
                  node, sets, alive, resume)  # fmt: skip
        counts = np.asarray(trie.tok_count[node + 1 : end])
        owner = np.repeat(np.arange(1, end - node), counts)  # each token's node, - node
        lo = int(trie.rank_at[node + 1])
        ids = np.asarray(trie.token_ids[lo : lo + owner.shape[0]], np.int64)
        return ids[alive[owner] != 0]

    # -- consuming ------------------------------------------------------------------------
    def _allows(self, tid: int) -> bool:
        ids = self._allowed(self._pos)
        i = int(np.searchsorted(ids, tid))
        return i < ids.shape[0] and int(ids[i]) == tid

    def try_consume(self, token_id: int) -> bool:
        """Consume ``token_id`` if the healing mask allows it; ``False`` (no change) if not."""
        tid = int(token_id)
        if self.done or not self._allows(tid):
            return False
        self._history.append((self._pos, self._rest))
        data = self._vocab.token_bytes(tid)
        pending = self.pending
        if len(data) < len(pending):
            self._pos += len(data)
        else:
            self._pos = len(self.healed)
            self._rest = data[len(pending) :]
        return True

    def consume(self, token_id: int) -> None:
        """Consume ``token_id``; :class:`TokenRejectedError` (no change) if not allowed."""
        if not self.try_consume(token_id):
            raise TokenRejectedError(
                int(token_id),
                f"token {int(token_id)} does not spell the healed prompt bytes "
                f"{self.pending!r} (or goes on with bytes the grammar does not allow)",
            )

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` tokens consumed by the view (before :meth:`commit`)."""
        if self._committed or not 0 <= num_tokens <= len(self._history):
            raise MatcherStateError(
                f"cannot roll back {num_tokens} healing tokens: {len(self._history)} consumed"
                + (", and committed" if self._committed else "")
            )
        if num_tokens:
            self._pos, self._rest = self._history[-num_tokens]
            del self._history[-num_tokens:]

    def commit(self) -> None:
        """Hand the bytes past the healed ones (of the token that ended healing) to the
        matcher; from here on, decode with the matcher itself."""
        if not self.done:
            raise MatcherStateError(f"the healed bytes {self.pending!r} are not spelled yet")
        if self._committed:
            return
        if self._rest and not self.matcher.consume_bytes(self._rest):  # pragma: no cover
            raise MatcherStateError(f"the grammar does not allow {self._rest!r}")  # checked
        self._committed = True
