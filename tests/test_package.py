"""Package hygiene: no heavy imports or side effects at `import corral`."""

from __future__ import annotations

import subprocess
import sys


def test_import_is_light() -> None:
    code = (
        "import sys, corral\n"
        "heavy = [m for m in ('numba', 'torch', 'transformers', 'lark') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "corral.CorralError, corral.Grammar\n"  # lazy attributes resolve
        "assert 'numba' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lazy_attributes() -> None:
    import corral

    for name in ("compile", "Vocabulary", "CompiledGrammar", "Matcher", "allocate_bitmask"):
        assert callable(getattr(corral, name))
    try:
        corral.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("unknown attribute did not raise")
