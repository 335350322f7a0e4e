"""The actor that extracts records on a Ray worker.

One :class:`ExtractWorker` per actor: it loads the model, builds the vocabulary and
compiles the schema once (corral's :class:`~corral.integrations.extract.Extractor`), then
extracts each batch of numbered lines it is handed, in one ``model.generate``. It returns
each line's output row already written as ``corral extract`` writes it (JSON text): the
driver only appends them to the output file.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

__all__ = ["ExtractWorker"]


class ExtractWorker:
    """``ExtractWorker(model, schema, ...)(batch)`` -> ``{"line": [...], "row": [...],
    "failed": [...]}`` (whether each row is an error row).

    Args:
        model: a local model folder (on every node), or ``gemma3-270m``.
        schema: the JSON Schema as text.
        field, prompt, max_new_tokens: as for ``corral extract``.
        threads: torch threads in this actor (``None``: torch's default).
        pickled: also return each line's :class:`~corral.integrations.extract.Extraction`,
            pickled (``"item"``; its index is the line's number less one), for
            ``corral.extract(..., engine="ray")``.
    """

    def __init__(
        self,
        model: str,
        schema: str,
        *,
        field: str = "text",
        prompt: str | None = None,
        max_new_tokens: int = 512,
        threads: int | None = None,
        pickled: bool = False,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        from ..extract import DEFAULT_PROMPT, Extractor

        self.field = field
        self.pickled = pickled
        self.extractor = Extractor(
            model, schema, prompt=prompt or DEFAULT_PROMPT, max_new_tokens=max_new_tokens
        )

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        from ...errors import CorralError
        from ..cli import input_line, output_row, row_bytes
        from ..extract import Extraction

        parsed = [
            input_line(int(n), str(raw), self.field)
            for n, raw in zip(batch["line"], batch["raw"], strict=True)
        ]
        docs = [(n, doc) for n, _ident, doc, err in parsed if err is None and doc is not None]
        results = iter(self.extractor.run(docs)) if docs else iter(())
        rows, failed, items = [], [], []
        for n, ident, _doc, err in parsed:
            item = None if err is not None else next(results)
            row = output_row(n, ident, err, item)
            rows.append(row_bytes(row).decode("utf-8"))
            failed.append("error" in row)
            if self.pickled:
                if item is None:
                    item = Extraction(n - 1, None, "", CorralError(str(err)))
                item.index = n - 1
                items.append(pickle.dumps(item))
        out: dict[str, list[Any]] = {"line": [n for n, *_ in parsed], "row": rows, "failed": failed}
        if self.pickled:
            out["item"] = items
        return out
