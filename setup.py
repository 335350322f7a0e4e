"""Building corral also compiles its Numba kernels once, for a generic CPU, into the package
(``corral/_prebuilt/``), so that a fresh install's first mask loads machine code instead of
compiling it. See ``corral/jit.py``. ``CORRAL_NO_PREBUILD=1`` builds without them; a
prebuild that fails is reported and skipped (the kernels then compile on first use).

An editable install also writes the package's bytecode (``__pycache__/*.pyc``), as pip does
for the files of a wheel it installs: where ``PYTHONDONTWRITEBYTECODE`` is set, Python never
writes it at import, and every process would compile corral's sources again (0.1-0.2 s of
each process's first compile and mask, measured on a two-core machine).

Everything else about the package is in ``pyproject.toml``.
"""

from __future__ import annotations

import compileall
import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithKernels(build_py):
    """``build_py``, then the prebuilt kernels beside the built (or, for an editable
    install, the source) package."""

    def run(self) -> None:
        super().run()
        editable = getattr(self, "editable_mode", False)
        if editable:
            compileall.compile_dir(str(Path(__file__).resolve().parent / "corral"), quiet=1)
        if os.environ.get("CORRAL_NO_PREBUILD", "0") not in ("", "0"):
            return
        root = Path(__file__).resolve().parent if editable else Path(self.build_lib).resolve()
        target = root / "corral" / "_prebuilt"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        code = (
            "import sys\n"
            "from pathlib import Path\n"
            "from corral.jit import prebuild\n"
            "prebuild(Path(sys.argv[1]))\n"
        )
        print(f"corral: prebuilding the kernels into {target} (a few minutes)", file=sys.stderr)
        done = subprocess.run([sys.executable, "-c", code, str(target)], env=env, check=False)
        if done.returncode != 0:
            print(
                "corral: prebuilding the kernels failed; they will compile on first use",
                file=sys.stderr,
            )


setup(cmdclass={"build_py": BuildPyWithKernels})
