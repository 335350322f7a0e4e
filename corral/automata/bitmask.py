"""The token bitmask format, and checks on bitmasks handed in by callers.

One format everywhere: ``int32 [batch, ceil(vocab_size / 32)]``, bit ``i % 32`` of word
``i // 32`` set ⇔ token ``i`` allowed (the layout XGrammar and llguidance use). Reference
semantics, for a row ``m``::

    allowed(i) = (m[i >> 5] >> (i & 31)) & 1

NumPy arrays and CPU torch tensors are accepted (torch shares memory via ``.numpy()``).

Token ids, rows and sizes handed to corral's public functions are integers: a Python
``int``, a NumPy integer, or a one-element integer torch tensor (:func:`as_int`); a float,
a string or a ``bool`` raises :class:`~corral.errors.ArgumentTypeError` (a ``TypeError``)
rather than being rounded or read as 0/1. A bitmask of another dtype, width or layout
raises :class:`~corral.errors.ShapeError` (a ``ValueError``) from :func:`check_bitmask`,
saying what was expected and what was given.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    ShapeError,
    VocabularyMismatchError,
)

# dtype names (NumPy, or torch without "torch.") of integer arrays accepted as id lists
_INT_DTYPES = frozenset(("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"))


def as_int(value: Any, name: str, *, minimum: int | None = None) -> int:
    """``value`` as a Python ``int``, or :class:`~corral.errors.ArgumentTypeError` (a
    ``TypeError``) naming ``name`` and what was given; below ``minimum`` (when given),
    :class:`~corral.errors.InvalidArgumentError` (a ``ValueError``).

    Accepted: ``int``, NumPy integer scalars, integer torch tensors of one element
    (anything with ``__index__``). Refused: ``bool`` (not an id or a count), floats (even
    integral ones: ``90.0`` is not token 90), strings, and everything else.
    """
    if type(value) is int:
        n = value
    elif isinstance(value, (bool, np.bool_)) or str(getattr(value, "dtype", "")) == "torch.bool":
        raise ArgumentTypeError(f"{name} must be an integer, not a bool ({value!r})")
    else:
        try:
            n = operator.index(value)
        except TypeError:
            raise ArgumentTypeError(
                f"{name} must be an integer (int or a NumPy integer), not "
                f"{type(value).__name__} {value!r}"
            ) from None
    if minimum is not None and n < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {n}")
    return n


def as_int_list(values: Iterable[Any], name: str) -> list[int]:
    """``values`` (a sequence of ids: list, tuple, 1-D NumPy or torch integer array) as a
    list of Python ``int``; :class:`~corral.errors.ArgumentTypeError` naming ``name`` on
    anything else (a string, bytes, a float array, an element that :func:`as_int` refuses)."""
    if isinstance(values, (str, bytes, bytearray, memoryview)):
        raise ArgumentTypeError(
            f"{name} must be a sequence of integers, not {type(values).__name__}"
        )
    if isinstance(values, np.ndarray) or type(values).__module__.startswith("torch"):
        arr: Any = values
        dtype = str(arr.dtype)
        if dtype.replace("torch.", "") not in _INT_DTYPES or arr.ndim != 1:
            raise ArgumentTypeError(
                f"{name} must be a one-dimensional array of integers, got a "
                f"{type(arr).__name__} of dtype {dtype} and shape {tuple(arr.shape)}"
            )
        out: list[int] = arr.tolist()
        return out
    try:
        items = list(values)
    except TypeError:
        raise ArgumentTypeError(
            f"{name} must be a sequence of integers, not {type(values).__name__}"
        ) from None
    return [v if type(v) is int else as_int(v, f"{name}[{i}]") for i, v in enumerate(items)]


def bitmask_words(vocab_size: int) -> int:
    """Number of ``int32`` words in one bitmask row for ``vocab_size`` tokens."""
    n = vocab_size if type(vocab_size) is int else as_int(vocab_size, "vocab_size")
    if n < 0:
        raise InvalidArgumentError(f"vocab_size must be >= 0, got {n}")
    return (n + 31) // 32


def allocate_bitmask(batch: int, vocab_size: int, *, backend: str = "numpy") -> Any:
    """A bitmask ``int32 [batch, ceil(vocab_size/32)]`` with every bit set (all allowed).

    ``batch`` and ``vocab_size`` are integers ``>= 1`` (``ArgumentTypeError`` for anything
    that is not an integer, ``InvalidArgumentError`` below 1). ``backend``: ``"numpy"``
    (default) or ``"torch"`` (a CPU tensor).
    """
    batch = as_int(batch, "batch", minimum=1)
    vocab_size = as_int(vocab_size, "vocab_size", minimum=1)
    shape = (batch, bitmask_words(vocab_size))
    if backend == "numpy":
        return np.full(shape, -1, dtype=np.int32)
    if backend == "torch":
        import torch

        return torch.full(shape, -1, dtype=torch.int32)
    raise InvalidArgumentError(f"backend must be 'numpy' or 'torch', got {backend!r}")


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def describe(x: Any) -> str:
    """The dtype and shape of an array or tensor as messages show them: ``int64 [2, 4009]``
    (``torch.int64 [2, 4009]`` for a tensor)."""
    return f"{x.dtype} {list(x.shape)}"


def check_bitmask(
    bitmask: Any, vocab_size: int | None = None, *, rows: int | None = None, rows_for: str = ""
) -> int:
    """Refuse anything but an ``int32 [batch, ceil(vocab_size/32)]`` bitmask (a NumPy array
    or a torch tensor on any device; a 1-D one is one row) with at least ``rows`` rows, and
    return its number of rows. ``vocab_size`` ``None``: any width. ``rows_for``: why that
    many rows, for the message when there are fewer (e.g. ``" (a row per matcher: 3)"``).

    Raises:
        ArgumentTypeError: not an array or a tensor.
        ShapeError: another dtype, number of dimensions, width, or fewer rows; the message
            gives the expected and the actual dtype and shape.
    """
    is_torch = _is_torch(bitmask)
    if not is_torch and not isinstance(bitmask, np.ndarray):
        raise ArgumentTypeError(
            "bitmask must be a NumPy array or a torch tensor, int32 [batch, "
            f"ceil(vocab_size/32)], got {type(bitmask).__name__}"
        )
    shape = bitmask.shape
    n = shape[0] if len(shape) == 2 else 1
    dtype = "torch.int32" if is_torch else "int32"
    words = None if vocab_size is None else bitmask_words(vocab_size)
    if (
        (bitmask.dtype == np.int32 if not is_torch else str(bitmask.dtype) == dtype)
        and 1 <= len(shape) <= 2
        and (words is None or shape[-1] == words)
        and (rows is None or n >= rows)
    ):
        return n
    few = rows is not None and n < rows
    batch = f">= {rows}" if few else n if len(shape) == 2 else "batch"
    if words is None:
        expected = f"[batch, W] = [{batch}, {shape[-1] if shape else 'W'}]"
    else:
        expected = f"[batch, ceil(vocab_size/32)] = [{batch}, {words}]"
    why = rows_for if few else ""
    raise ShapeError(f"bitmask must be {dtype} {expected}{why}, got {describe(bitmask)}")


def as_numpy_bitmask(
    bitmask: Any, vocab_size: int | None, *, rows: int | None = None, rows_for: str = ""
) -> np.ndarray:
    """Check a caller's bitmask to fill (:func:`check_bitmask`: dtype, width, ``rows``) and
    return a 2-D NumPy view of it (shared memory).

    Raises:
        ArgumentTypeError, ShapeError: as :func:`check_bitmask`; also ``ShapeError`` for a
            tensor that is not on the CPU or an array that is not C-contiguous.
        InvalidArgumentError: a read-only array.
    """
    # the common case first, with no message built (this runs before every mask)
    arr: np.ndarray | None = bitmask if type(bitmask) is np.ndarray else None
    if (
        arr is None
        and _is_torch(bitmask)
        and bitmask.device.type == "cpu"
        and str(bitmask.dtype) == "torch.int32"
    ):
        arr = bitmask.numpy()
    if (
        arr is not None
        and arr.dtype == np.int32
        and arr.ndim == 2
        and (vocab_size is None or arr.shape[1] == (vocab_size + 31) >> 5)
        and (rows is None or arr.shape[0] >= rows)
        and arr.flags.c_contiguous
        and arr.flags.writeable
    ):
        return arr
    check_bitmask(bitmask, vocab_size, rows=rows, rows_for=rows_for)
    if isinstance(bitmask, np.ndarray):
        arr = bitmask
    else:
        if bitmask.device.type != "cpu":
            raise ShapeError(
                f"bitmask must be on the CPU, got device {bitmask.device}: fill a CPU bitmask "
                "and copy it to the device (`mask.to(device, non_blocking=True)`)"
            )
        arr = bitmask.numpy()
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if not arr.flags.c_contiguous:
        raise ShapeError(
            f"bitmask must be C-contiguous, strides ({4 * arr.shape[1]}, 4), got strides "
            f"{arr.strides}: pass `np.ascontiguousarray(mask)`"
        )
    if not arr.flags.writeable:
        raise InvalidArgumentError("bitmask must be writeable, got a read-only array")
    return arr


def bitmask_row(bitmask: Any, vocab_size: int, row: Any) -> np.ndarray:
    """Row ``row`` of a caller's bitmask to fill (:func:`as_numpy_bitmask`), as a ``uint32``
    view; ``InvalidArgumentError`` for a row outside the bitmask's batch."""
    if type(row) is not int:
        row = as_int(row, "row")
    arr = as_numpy_bitmask(bitmask, vocab_size)
    if not 0 <= row < arr.shape[0]:
        raise InvalidArgumentError(
            f"row {row} is outside the bitmask's batch: rows are in [0, {arr.shape[0]})"
        )
    return arr[row].view(np.uint32)


def _host(bitmask: Any) -> np.ndarray:
    """A checked bitmask as a 2-D NumPy array (a tensor is copied to the CPU if need be)."""
    arr = bitmask if isinstance(bitmask, np.ndarray) else bitmask.detach().cpu().numpy()
    return np.ascontiguousarray(arr).reshape(-1, arr.shape[-1])


def _unpack(arr: np.ndarray, width: int) -> np.ndarray:
    """``bool [batch, min(width, 32 W)]`` of a 2-D C-contiguous ``int32 [batch, W]``."""
    bits = np.unpackbits(arr.view(np.uint8), axis=1, bitorder="little")
    return bits[:, :width].astype(bool)


def bitmask_to_bool(bitmask: Any, vocab_size: int) -> np.ndarray:
    """Unpack a bitmask ``int32 [batch, ceil(vocab_size/32)]`` (NumPy or torch) into
    ``bool [batch, vocab_size]`` (reference semantics, for tests)."""
    vocab_size = as_int(vocab_size, "vocab_size", minimum=0)
    check_bitmask(bitmask, vocab_size)
    return _unpack(_host(bitmask), vocab_size)


def to_device(t: Any, device: Any) -> Any:
    """The torch tensor ``t`` on ``device``; from host memory to a CUDA device through
    pinned memory without waiting for the device (the copy is queued on the current
    stream, ahead of the kernels that read it)."""
    if t.device == device:
        return t
    if getattr(device, "type", None) == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def bitmask_to_bool_torch(bitmask: Any, width: int, device: Any = None) -> Any:
    """Unpack ``int32 [batch, W]`` (NumPy or torch) into a torch ``bool [batch, width]``
    on ``device`` (default: the bitmask's); ids at or beyond ``32 * W`` come out
    ``False``. The packed rows are moved (:func:`to_device`, 32x smaller than unpacked),
    then unpacked there."""
    import torch

    width = as_int(width, "width", minimum=0)
    t = bitmask
    if isinstance(t, np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(t))
    if t.dim() == 1:
        t = t.unsqueeze(0)
    if device is not None:
        t = to_device(t, device)
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

    Raises:
        ArgumentTypeError: ``logits`` or ``bitmask`` is not an array or a tensor, or
            ``vocab_size`` or a row is not an integer.
        ShapeError: logits that are not floating point ``[batch, V]`` or ``[V]``; a bitmask
            of another dtype or width (:func:`check_bitmask`), or with fewer rows than
            there are rows to mask.
        InvalidArgumentError: ``vocab_size < 1``, a row outside the logits, read-only logits.
        VocabularyMismatchError: ``V < vocab_size`` (the logits of another vocabulary).
    """
    is_torch = _is_torch(logits)
    if not is_torch and not isinstance(logits, np.ndarray):
        raise ArgumentTypeError(
            "logits must be a NumPy array or a torch tensor, float [batch, V] or [V], got "
            f"{type(logits).__name__}"
        )
    floating = logits.is_floating_point() if is_torch else np.issubdtype(logits.dtype, np.floating)
    if not floating or not 1 <= logits.ndim <= 2:
        raise ShapeError(f"logits must be float [batch, V] or [V], got {describe(logits)}")
    if not is_torch and not logits.flags.writeable:
        raise InvalidArgumentError("logits must be writeable, got a read-only array")
    if vocab_size is not None:
        vocab_size = as_int(vocab_size, "vocab_size", minimum=1)
    n = logits.shape[-1]
    batch = logits.shape[0] if logits.ndim == 2 else 1
    index = list(range(batch)) if rows is None else as_int_list(rows, "rows")
    if any(not 0 <= r < batch for r in index):
        raise InvalidArgumentError(
            f"rows must be row indices of the logits, in [0, {batch}), got {index}"
        )
    need = f" (a row per logits row to mask: {len(index)})"
    check_bitmask(bitmask, vocab_size, rows=len(index), rows_for=need)
    if vocab_size is not None and n < vocab_size:
        raise VocabularyMismatchError(
            f"logits must have at least vocab_size = {vocab_size} columns, got {n} "
            f"({describe(logits)}): these are the logits of another vocabulary"
        )
    if not index:
        return
    limit = min(n, bitmask.shape[-1] * 32) if vocab_size is None else vocab_size
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

        mask_rows(target, np.asarray(index, np.int64), _host(bitmask), limit)
        return
    if is_torch:
        import torch

        rows_used = bitmask[: len(index)] if bitmask.ndim == 2 else bitmask
        allowed = bitmask_to_bool_torch(rows_used, n, logits.device)
        sel = to_device(torch.tensor(index, dtype=torch.long), logits.device)
        allowed[:, limit:] = False
        x = logits if logits.ndim == 2 else logits.unsqueeze(0)  # a view either way
        x[sel] = x[sel].masked_fill(~allowed, float("-inf"))
        return
    arr = np.asarray(logits)
    arr = arr if arr.ndim == 2 else arr[None, :]
    allowed_np = np.zeros((len(index), n), bool)
    allowed_np[:, :limit] = _unpack(_host(bitmask), limit)[: len(index)]
    sub = arr[index]
    sub[~allowed_np] = -np.inf
    arr[index] = sub
