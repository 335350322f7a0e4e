"""Numba kernels: private, array-only functions on the hot path.

Every kernel is ``@njit(cache=True, nogil=True)`` and takes only NumPy arrays and integers,
so its machine code is compiled once per installation and loaded from numba's cache in
later processes. Public wrappers in ``corral.automata`` check shapes and dtypes.
"""
