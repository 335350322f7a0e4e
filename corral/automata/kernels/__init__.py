"""Numba kernels: private, array-only functions on the hot path.

Every kernel is declared ``@kernel(nogil=True)`` (:func:`corral.jit.kernel`: ``njit`` with
corral's cache) and takes only NumPy arrays, integers and plain tuples of arrays, so its
machine code is compiled when the package is built (the prebuilt kernels) or once per
installation, and loaded from a cache in later processes. What each slot, column and tuple
field means is named in ``layout.py``; the kernels import nothing from the rest of the
package but :mod:`corral.jit`. Public wrappers in ``corral.automata`` check shapes and
dtypes.
"""
