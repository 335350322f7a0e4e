"""An independent ECMA-262 regex engine for the tests: Node.js's ``RegExp`` with the ``u``
flag (V8's Irregexp), run in one ``node`` process per batch.

``available()`` says whether ``node`` is on the PATH; tests that need the oracle skip,
saying so, where it is not.
"""

from __future__ import annotations

import json
import shutil
import subprocess

_SCRIPT = r"""
const [cases, annexB] = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = cases.map(([p, t]) => {
  let re;
  try { re = new RegExp(p, 'u'); } catch (e) {
    if (!annexB) return 'syntax';
    try { re = new RegExp(p); } catch (e2) { return 'syntax'; }
  }
  return re.test(t);
});
process.stdout.write(JSON.stringify(out));
"""


def available() -> bool:
    return shutil.which("node") is not None


def search_many(cases: list[tuple[str, str]], *, annex_b: bool = False) -> list[bool | str]:
    """``RegExp(pattern, 'u').test(text)`` for each case (``'syntax'`` when the pattern
    does not compile). ``annex_b``: a pattern the ``u`` flag refuses is read without it
    (ECMA-262 Annex B), as corral reads the Annex B leniencies its parser documents."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not installed")
    res = subprocess.run(
        [node, "-e", _SCRIPT],
        input=json.dumps([cases, annex_b]),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    out: list[bool | str] = json.loads(res.stdout)
    return out
