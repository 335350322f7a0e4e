"""The token bitmask format, and checks on bitmasks handed in by callers.

One format everywhere: ``int32 [batch, ceil(vocab_size / 32)]``, bit ``i % 32`` of word
``i // 32`` set ⇔ token ``i`` allowed (the layout XGrammar and llguidance use). Reference
semantics, for a row ``m``::

    allowed(i) = (m[i >> 5] >> (i & 31)) & 1

NumPy arrays and CPU torch tensors are accepted (torch shares memory via ``.numpy()``).

Token ids, rows and sizes handed to corral's public functions are integers: a Python
``int``, a NumPy integer, or a one-element integer torch tensor (:func:`as_int`); a float,
a string or a ``bool`` raises ``TypeError`` rather than being rounded or read as 0/1.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import TokenizerError

# dtype names (NumPy, or torch without "torch.") of integer arrays accepted as id lists
_INT_DTYPES = frozenset(("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"))


def as_int(value: Any, name: str) -> int:
    """``value`` as a Python ``int``, or ``TypeError`` naming ``name`` and what was given.

    Accepted: ``int``, NumPy integer scalars, integer torch tensors of one element
    (anything with ``__index__``). Refused: ``bool`` (not an id or a count), floats (even
    integral ones: ``90.0`` is not token 90), strings, and everything else.
    """
    if type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)) or str(getattr(value, "dtype", "")) == "torch.bool":
        raise TypeError(f"{name} must be an integer, not a bool ({value!r})")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an integer (int or a NumPy integer), not "
            f"{type(value).__name__} {value!r}"
        ) from None


def as_int_list(values: Iterable[Any], name: str) -> list[int]:
    """``values`` (a sequence of ids: list, tuple, 1-D NumPy or torch integer array) as a
    list of Python ``int``; ``TypeError`` naming ``name`` on anything else (a string, bytes,
    a float array, an element that :func:`as_int` refuses)."""
    if isinstance(values, (str, bytes, bytearray, memoryview)):
        raise TypeError(
            f"{name} must be a sequence of integer token ids, not {type(values).__name__}"
        )
    if isinstance(values, np.ndarray) or type(values).__module__.startswith("torch"):
        arr: Any = values
        dtype = str(arr.dtype)
        if dtype.replace("torch.", "") not in _INT_DTYPES or arr.ndim != 1:
            raise TypeError(
                f"{name} must be a one-dimensional array of integers, got a "
                f"{type(arr).__name__} of dtype {dtype} and shape {tuple(arr.shape)}"
            )
        out: list[int] = arr.tolist()
        return out
    try:
        items = list(values)
    except TypeError:
        raise TypeError(
            f"{name} must be a sequence of integer token ids, not {type(values).__name__}"
        ) from None
    return [v if type(v) is int else as_int(v, f"{name}[{i}]") for i, v in enumerate(items)]


def bitmask_words(vocab_size: int) -> int:
    """Number of ``int32`` words in one bitmask row for ``vocab_size`` tokens."""
    n = vocab_size if type(vocab_size) is int else as_int(vocab_size, "vocab_size")
    if n < 0:
        raise ValueError(f"vocab_size must be >= 0, got {n}")
    return (n + 31) // 32


def allocate_bitmask(batch: int, vocab_size: int, *, backend: str = "numpy") -> Any:
    """A bitmask ``int32 [batch, ceil(vocab_size/32)]`` with every bit set (all allowed).

    ``batch`` and ``vocab_size`` are positive integers (``TypeError`` for anything that
    is not an integer). ``backend``: ``"numpy"`` (default) or ``"torch"`` (a CPU tensor).
    """
    batch = as_int(batch, "batch")
    vocab_size = as_int(vocab_size, "vocab_size")
    if batch <= 0 or vocab_size <= 0:
        raise ValueError(f"batch and vocab_size must be positive, got {batch} and {vocab_size}")
    shape = (batch, bitmask_words(vocab_size))
    if backend == "numpy":
        return np.full(shape, -1, dtype=np.int32)
    if backend == "torch":
        import torch

        return torch.full(shape, -1, dtype=torch.int32)
    raise ValueError(f"backend must be 'numpy' or 'torch', not {backend!r}")


def as_numpy_bitmask(bitmask: Any, vocab_size: int) -> np.ndarray:
    """Check a caller's bitmask and return a NumPy view of it (shared memory).

    Raises ``ValueError`` saying what was expected on a wrong type, dtype, shape or layout.
    """
    words = bitmask_words(vocab_size)
    arr: np.ndarray
    if isinstance(bitmask, np.ndarray):
        arr = bitmask
    elif type(bitmask).__module__.startswith("torch"):
        if bitmask.device.type != "cpu":
            raise ValueError(
                f"bitmask must be on the CPU, got device {bitmask.device}: fill a CPU bitmask "
                "and copy it to the device (`mask.to(device, non_blocking=True)`)"
            )
        if str(bitmask.dtype) != "torch.int32":
            raise ValueError(
                f"expected a bitmask of dtype torch.int32, got {bitmask.dtype}: "
                "allocate it with corral.allocate_bitmask(batch, vocab_size, backend='torch')"
            )
        arr = bitmask.numpy()
    else:
        raise ValueError(
            f"expected a NumPy array or a CPU torch tensor as bitmask, got {type(bitmask).__name__}"
        )
    if arr.dtype != np.int32:
        raise ValueError(
            f"expected a bitmask of dtype int32, got {arr.dtype}: pass `mask.astype(np.int32)` "
            "or allocate it with corral.allocate_bitmask(batch, vocab_size)"
        )
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[1] != words:
        raise ValueError(
            f"expected a bitmask of shape [batch, {words}] "
            f"(ceil({vocab_size} / 32) words per row), got {list(bitmask.shape)}"
        )
    if not arr.flags.c_contiguous:
        raise ValueError("expected a C-contiguous bitmask: pass `np.ascontiguousarray(mask)`")
    if not arr.flags.writeable:
        raise ValueError("the bitmask is read-only")
    return arr


def bitmask_to_bool(bitmask: Any, vocab_size: int) -> np.ndarray:
    """Unpack a bitmask into ``bool [batch, vocab_size]`` (reference semantics, for tests)."""
    vocab_size = as_int(vocab_size, "vocab_size")
    if vocab_size < 0:
        raise ValueError(f"vocab_size must be >= 0, got {vocab_size}")
    arr = as_numpy_bitmask(bitmask, vocab_size) if not isinstance(bitmask, np.ndarray) else bitmask
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    bits = np.unpackbits(arr.view(np.uint8), axis=1, bitorder="little")
    return bits[:, :vocab_size].astype(bool)


def bitmask_to_bool_torch(bitmask: Any, width: int) -> Any:
    """Unpack ``int32 [batch, W]`` (NumPy or torch) into a torch ``bool [batch, width]``
    on the bitmask's device; ids at or beyond ``32 * W`` come out ``False``."""
    import torch

    width = as_int(width, "width")
    if width < 0:
        raise ValueError(f"width must be >= 0, got {width}")
    t = bitmask
    if isinstance(t, np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(t))
    if t.dim() == 1:
        t = t.unsqueeze(0)
    shifts = torch.arange(32, dtype=torch.int32, device=t.device)
    bits = ((t.to(torch.int32).unsqueeze(-1) >> shifts) & 1).bool().reshape(t.shape[0], -1)
    if bits.shape[1] >= width:
        return bits[:, :width]
    pad = torch.zeros(t.shape[0], width - bits.shape[1], dtype=torch.bool, device=t.device)
    return torch.cat([bits, pad], dim=1)


def apply_token_bitmask_inplace(
    logits: Any, bitmask: Any, vocab_size: int | None = None, *, rows: Sequence[int] | None = None
) -> None:
    """Set ``logits[b, i] = -inf`` wherever token ``i`` is not allowed in row ``b``.

    ``logits``: ``float [batch, V]`` (NumPy or torch, any device for torch); ``V`` may
    exceed the bitmask's vocabulary (extra ids are masked). ``bitmask``: ``int32 [batch, W]``.
    ``vocab_size``: when given, the vocabulary the bitmask was filled for: ``W`` must be
    ``ceil(vocab_size / 32)``, ``V`` at least ``vocab_size``, and ids at or beyond it are
    masked whatever their bits. ``rows``: the logits row of each bitmask row (default:
    bitmask row ``b`` masks logits row ``b``); other logits rows are untouched.

    CPU ``float32`` logits (C-contiguous) are masked in one pass by a Numba kernel; others
    by unpacking the bitmask with torch or NumPy.
    """
    if vocab_size is not None:
        vocab_size = as_int(vocab_size, "vocab_size")
        words = bitmask_words(vocab_size)
        if vocab_size <= 0 or bitmask.shape[-1] != words:
            raise ValueError(
                f"expected a bitmask of {words} words per row for vocab_size={vocab_size}, "
                f"got shape {list(bitmask.shape)}"
            )
        if logits.shape[-1] < vocab_size:
            raise TokenizerError(
                f"the logits have {logits.shape[-1]} columns, fewer than vocab_size={vocab_size}"
            )
    n = logits.shape[-1]
    limit = min(n, bitmask.shape[-1] * 32) if vocab_size is None else vocab_size
    batch = logits.shape[0] if logits.ndim == 2 else 1
    index = list(range(batch)) if rows is None else [as_int(r, "rows") for r in rows]
    if not index:
        return
    if any(not 0 <= r < batch for r in index):
        raise ValueError(f"rows must be in [0, {batch}), got {index}")
    if (bitmask.shape[0] if bitmask.ndim == 2 else 1) < len(index):
        raise ValueError(f"the bitmask has fewer rows than the {len(index)} rows to mask")
    is_torch = type(logits).__module__.startswith("torch")
    cpu_f32 = is_torch and logits.device.type == "cpu" and str(logits.dtype) == "torch.float32"
    target = logits.numpy() if cpu_f32 else logits
    if (
        isinstance(target, np.ndarray)
        and target.dtype == np.float32
        and target.ndim == 2
        and target.flags.c_contiguous
        and (isinstance(bitmask, np.ndarray) or bitmask.device.type == "cpu")
    ):
        from .kernels.apply_mask import mask_rows

        m = np.ascontiguousarray(np.asarray(bitmask, np.int32).reshape(-1, bitmask.shape[-1]))
        mask_rows(target, np.asarray(index, np.int64), m, limit)
        return
    if is_torch:
        import torch

        sel = torch.tensor(index, dtype=torch.long, device=logits.device)
        allowed = bitmask_to_bool_torch(bitmask, n).to(logits.device)[: len(index)]
        allowed[:, limit:] = False
        x = logits if logits.ndim == 2 else logits.unsqueeze(0)  # a view either way
        x[sel] = x[sel].masked_fill(~allowed, float("-inf"))
        return
    arr = np.asarray(logits)
    arr = arr if arr.ndim == 2 else arr[None, :]
    allowed_np = np.zeros((len(index), n), bool)
    allowed_np[:, :limit] = bitmask_to_bool(np.asarray(bitmask), limit)[: len(index)]
    sub = arr[index]
    sub[~allowed_np] = -np.inf
    arr[index] = sub
