"""Numba kernels: private, array-only functions on the hot path.

Every kernel is ``@njit(cache=True, nogil=True)`` and takes only NumPy arrays, integers
and plain tuples of arrays, so its machine code is compiled once per installation and
loaded from numba's cache in later processes. What each slot, column and tuple field
means is named in ``layout.py``; the kernels import nothing from the rest of the package.
Public wrappers in ``corral.automata`` check shapes and dtypes.
"""
