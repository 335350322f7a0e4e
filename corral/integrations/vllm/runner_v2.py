"""Constraints under vLLM's Model Runner V2 (the GPU default), with speculative decoding.

V2 differs from V1 in what a logits processor is told (``vllm/v1/worker/gpu/sample/
logits_processor/interface.py``):

* state is per request *slot* (``add_request(slot, params)``; slots are recycled with no
  callback: a slot's row is replaced when the slot is given to another request);
* a request's committed tokens are ``req_states.all_token_ids[slot, :total_len]``, on
  the device; the host knows only ``prompt_len`` and ``prefill_len``;
* logits rows are not requests: ``ctx.idx_mapping_np`` maps batch positions to slots,
  and under speculative decoding a request owns ``1 + d`` consecutive rows (its draft
  tokens in ``ctx.input_ids``), whose layout is on the device only.

:class:`SlotConstraints` reads the new committed tokens once per step without an extra
device synchronisation: :meth:`~SlotConstraints.apply_staged_writes` (called every step
before the forward pass, after the previous step's tokens were written) queues copies of
``total_len`` and the next ``1 + num_speculative_tokens`` tokens of every constrained
slot into host memory, and :meth:`~SlotConstraints.apply` waits for those copies only
(not for the forward pass). Draft rows need the row layout: one copy, which waits for
the forward pass, made only when the batch has draft rows.

Draft rows. The row at draft offset ``j`` of a request is masked by the request's
matcher advanced through its drafts ``1..j`` (a fork; the request's own matcher only
ever reads committed tokens, so a rejected draft needs no rollback). A draft outside the
grammar (or not yet known, ``-1``) is excluded by the mask of the row before it, so with
vLLM's rejection sampling it is never accepted and the rows after it are never used;
they are masked to the request's end tokens only, so that whatever a sampler does with
them, nothing but an end can follow. A committed token outside the grammar (a sampler
that ignored the mask) fails the request's row, which then allows only its end tokens
(fail closed), as under V1.

Rows of a prefill chunk that is not the last (no token is sampled from them) are left
alone. Requests without a constraint are never touched.

Importing this module (vLLM does, in every worker, before it initialises the worker)
must not import Numba: vLLM's CPU platform scans every loaded module's namespace for
Triton kernels to override, and llvmlite's function wrappers break that scan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from .rows import Row, RowTable

__all__ = ["SlotConstraints"]


@dataclass
class _Snapshot:
    """Host copies, queued at :meth:`SlotConstraints.apply_staged_writes`."""

    slots: list[int]
    rows: list[Row]  # the row of each slot when the copies were queued
    total: Any  # int64 [len(slots)]: total_len of each slot
    tokens: Any  # int64 [len(slots), window]: tokens from the first one the host lacks
    start: list[int]  # the position of tokens[i, 0] in slot i's sequence
    event: Any = None  # a CUDA event recorded after the copies


class SlotConstraints:
    """The constrained requests of a V2 batch, by slot, and the masking of their rows.

    Args:
        req_states: vLLM's ``LogitsProcRequestState`` (read only).
        window: the most tokens one step commits for one request (``1 +
            num_speculative_tokens``).
        table: gives the :class:`RowTable` whose :meth:`~RowTable.mask` masks rows and
            whose :meth:`~RowTable.report` logs failed ones (called when first needed: it
            waits for the vocabulary); its ``rows`` are V1's, unused here.
        new_row: ``(slot, sampling_params, output) -> Row | None`` (``None``: the request
            has no constraint); never raises (a bad constraint gives a failed row).
    """

    def __init__(
        self,
        req_states: Any,
        window: int,
        table: Callable[[], RowTable],
        new_row: Callable[[int, Any, list[int]], Row | None],
    ) -> None:
        self.req_states = req_states
        self.window = max(1, int(window))
        self.table = table
        self.new_row = new_row
        self.rows: dict[int, Row] = {}  # each row's output: the list given to new_row
        self._ended: set[int] = set()  # slots whose request has written an end token
        self._snapshot: _Snapshot | None = None

    # -- requests -------------------------------------------------------------------------
    def add_request(self, slot: int, params: Any) -> bool:
        """A request takes ``slot``; whether it is constrained (its row replaces any
        earlier occupant's)."""
        self.rows.pop(slot, None)
        self._ended.discard(slot)
        row = self.new_row(slot, params, [])  # (a resumed request's output: read at apply)
        if row is None:
            return False
        self.rows[slot] = row
        return True

    # -- committed tokens -----------------------------------------------------------------
    def apply_staged_writes(self) -> None:
        """Queue host copies of each live constrained slot's new committed tokens."""
        import torch

        live = [s for s, r in self.rows.items() if r.error is None and s not in self._ended]
        if not live:
            self._snapshot = None
            return
        rs = self.req_states
        prompt = rs.prompt_len.np
        tokens_dev = rs.all_token_ids.gpu
        device = tokens_dev.device
        max_len = int(tokens_dev.shape[1])
        start = [int(prompt[s]) + len(self.rows[s].output) for s in live]
        host = torch.tensor(np.stack([live, start], axis=1), dtype=torch.int64)
        cuda = device.type == "cuda"
        from ...automata.bitmask import to_device  # no Numba at import

        on_device = to_device(host, device)
        slots, first = on_device[:, 0], on_device[:, 1]
        offsets = torch.arange(self.window, device=device)
        cols = (first[:, None] + offsets).clamp_(max=max_len - 1)
        total = rs.total_len.gpu[slots].to(torch.int64)
        tokens = tokens_dev[slots[:, None], cols].to(torch.int64)
        rows = [self.rows[s] for s in live]
        snap = _Snapshot(live, rows, _to_host(total, cuda), _to_host(tokens, cuda), start)
        if cuda:
            snap.event = torch.cuda.Event()
            snap.event.record()
        self._snapshot = snap

    def _catch_up(self) -> None:
        """Append the snapshot's new tokens to the rows' outputs (once per snapshot)."""
        snap, self._snapshot = self._snapshot, None
        if snap is None:
            return
        if snap.event is not None:
            snap.event.synchronize()  # the copies only, not this step's forward pass
        total = snap.total.tolist()
        tokens = snap.tokens.tolist()
        prompt = self.req_states.prompt_len.np
        for i, slot in enumerate(snap.slots):
            row = self.rows.get(slot)
            if row is not snap.rows[i] or slot in self._ended:
                continue  # (the slot has another request since)
            have = int(prompt[slot]) + len(row.output)
            new = int(total[i]) - have
            if new <= 0:
                continue
            offset = have - snap.start[i]
            if offset >= 0 and offset + new <= self.window:
                self._extend(slot, tokens[i][offset : offset + new])
            else:  # more than a step commits: a request resumed with output; read exactly
                exact = self.req_states.all_token_ids.gpu[slot, have : int(total[i])]
                self._extend(slot, exact.cpu().tolist())

    def _extend(self, slot: int, tokens: list[int]) -> None:
        """Append committed ``tokens`` to the slot's output, up to its first end token (a
        request that wrote one is over: an asynchronous step may still come for it); the
        row's matcher reads them when the row is next masked."""
        row = self.rows[slot]
        output = cast(list[int], row.output)  # the list new_row was given
        for t in tokens:
            if t in row.end_ids:
                self._ended.add(slot)
                break
            output.append(int(t))

    # -- masking --------------------------------------------------------------------------
    def apply(self, logits: Any, ctx: Any) -> Any:
        """Mask the rows of constrained requests in ``logits`` (``float [rows, V]``) in
        place and return it."""
        batch_slots = [int(s) for s in ctx.idx_mapping_np]
        if not any(s in self.rows for s in batch_slots):
            return logits
        self._catch_up()
        rows = int(logits.shape[0])
        if rows == len(batch_slots):  # one row per request, in batch order
            layout = [(s, 0, -1) for s in batch_slots]
        else:  # draft rows: the layout is on the device
            import torch

            host = torch.stack(
                [
                    ctx.expanded_idx_mapping.to(torch.int64),
                    ctx.expanded_local_pos.to(torch.int64),
                    ctx.input_ids.to(torch.int64),
                ]
            ).cpu()
            layout = list(zip(*host.tolist(), strict=True))
        sampled = self._sampled(ctx, batch_slots)
        targets: list[tuple[int, Any, frozenset[int]]] = []
        matcher: Any = None
        for r, (slot, local, token) in enumerate(layout):
            row = self.rows.get(slot)
            if row is None or slot not in sampled:
                continue
            if local == 0:
                row.catch_up()  # feeds the new tokens (a new row resolves its grammar)
                self.table().report(row)
                live = row.error is None and slot not in self._ended
                matcher = row.matcher if live else None
            elif matcher is not None:  # after draft `token`: a fork of the row before's
                matcher = matcher.fork()  # (each row's matcher stays as its mask needs it)
                if token < 0 or not matcher.try_consume(token):
                    matcher = None  # never reached: end tokens only
            targets.append((r, matcher, row.end_ids))
        self.table().mask(logits, targets)
        return logits

    def _sampled(self, ctx: Any, batch_slots: list[int]) -> set[int]:
        """The slots whose rows are sampled this step (not a prefill chunk before the
        last one)."""
        prefill = self.req_states.prefill_len.np
        bound = ctx.seq_lens_upper_bound_np
        return {s for i, s in enumerate(batch_slots) if int(bound[i]) >= int(prefill[s])}


def _to_host(t: Any, cuda: bool) -> Any:
    """``t`` copied to host memory (pinned, asynchronously, on CUDA)."""
    import torch

    if not cuda:
        return t.clone()
    out = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    out.copy_(t, non_blocking=True)
    return out
