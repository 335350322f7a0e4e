"""Running a script in a fresh Python process and reading the JSON it prints last."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def run_json(script: str, *args: str, env: dict[str, str], timeout: float = 1800) -> Any:
    """Run ``python -c script args...`` with ``env``; fail the test with the end of its
    standard error unless it exits 0, else return the JSON of its last line of output."""
    run = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
