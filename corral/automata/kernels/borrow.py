"""Kernels: arrays borrowed for a kernel's call, without reference counting.

Numba counts references to every array a kernel holds: each array carries a pointer to
its *meminfo* (the block that owns the data), and the compiled code increments and
decrements the count there with atomic operations wherever a variable takes or drops an
array. A function inlined into a kernel (``inline="always"``) takes its arrays as fresh
variables, so each call of it costs two atomic operations per array argument, and Numba
cannot remove them around the callee's loops. The Earley chart's helpers
(``_add_p``, ``_add_l``, ``get64``, ...) are called per chart item: in the masks of
SynCode's Java grammar these counts were 63% of the samples under ``perf``.

:func:`borrow` returns the same arrays with no meminfo. Numba's reference counting skips
an array without one (a null check instead of an atomic operation), as it does for arrays
made by ``numba.carray`` from a raw pointer. This is safe for the arrays a kernel takes as
arguments: the caller (the Python wrapper that unboxed them, or the kernel that passed
them on) holds them for the whole call. It is not safe for an array the kernel allocates
(Numba frees that once its last counted variable dies, while a borrowed view may still be
read), and a borrowed array must not outlive the call (returned, or stored in a
container that is). Kernels borrow their array arguments on entry and pass the borrowed
arrays to the kernels they call.

Under ``NUMBA_DISABLE_JIT`` (kernels run as Python, for debugging) :func:`borrow` is the
identity.
"""

from __future__ import annotations

from typing import Any


def _borrow_py(arrays: Any) -> Any:
    """The arrays unchanged: what :func:`borrow` means when kernels run as Python."""
    return arrays


def _make_borrow() -> Any:
    import os

    if os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return _borrow_py
    from numba.core import types
    from numba.extending import intrinsic

    def borrowable(ty: Any) -> bool:
        if isinstance(ty, (types.Array, types.Number, types.Boolean)):
            return True
        if not isinstance(ty, types.BaseTuple):
            return False
        parts: Any = ty  # a tuple type iterates over its element types
        return all(borrowable(t) for t in parts)

    def borrowed(context: Any, builder: Any, ty: Any, value: Any) -> Any:
        # imported when a kernel compiles, not when one loads: loading processes do not
        # import Numba's NumPy support (``jit_load.py``)
        from numba.core import cgutils
        from numba.np.arrayobj import make_array

        if not isinstance(ty, (types.Array, types.BaseTuple)):
            return value  # a number, unchanged
        if isinstance(ty, types.Array):
            a = make_array(ty)(context, builder, value=value)
            a.meminfo = cgutils.get_null_value(a.meminfo.type)
            return a._getvalue()
        members: Any = ty
        parts = [
            borrowed(context, builder, t, builder.extract_value(value, i))
            for i, t in enumerate(members)
        ]
        return context.make_tuple(builder, ty, parts)

    @intrinsic  # type: ignore[misc]
    def borrow(typingctx: Any, arrays: Any) -> Any:
        """``borrow(x)``: ``x`` (an array, or a tuple of arrays, numbers and such tuples)
        with each array's meminfo dropped (same data, shape, strides and parent)."""
        if not borrowable(arrays):
            return None

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            return borrowed(context, builder, sig.args[0], args[0])

        return arrays(arrays), codegen

    return borrow


borrow = _make_borrow()
"""``borrow(x) -> x``: a kernel's array arguments (an array, or a tuple of arrays, numbers
and such tuples) without reference counting, for the length of its call (see the module)."""
