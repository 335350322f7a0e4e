"""Imported first by the benchmark scripts: one thread everywhere.

Sets the thread-count variables before numba, torch or the Rust engines load (they read
them once, at import), so every engine is measured on a single thread.
"""

import os

for _var in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "NUMBA_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
