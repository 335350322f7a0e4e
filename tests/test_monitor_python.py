"""The Python member-access monitor on code no one here wrote: the standard library's own
sources (shipped with Python), cut just before a member access."""

from __future__ import annotations

import inspect
import json.decoder
import shutil
import tarfile

import pytest
from support.tokenizers import load_tokenizer, load_vocab

from corral.monitors.matcher import MonitoredMatcher
from corral.monitors.monitor import MonitorContext
from corral.monitors.python import at_member_dot, attribute_names, python_members

jedi = pytest.importorskip("jedi")


def _cut(module, marker: str) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """The module's source up to the dot of ``marker`` (included), and the member after."""
    src = inspect.getsource(module)
    i = src.index(marker)
    dot = marker.index(".") + 1
    return src[: i + dot], marker[dot:].split("(")[0]


@pytest.mark.parametrize(
    ("module", "marker"),
    [(json.decoder, "self.scan_once(s, idx)"), (shutil, "path.join(dst")],
)
def test_the_next_member_of_real_code_is_allowed(module, marker: str) -> None:  # type: ignore[no-untyped-def]
    code, member = _cut(module, marker)
    names = python_members(path=module.__file__).allowed(MonitorContext(text=code))
    assert names and member in names and len(names) < 500


@pytest.mark.parametrize(
    ("code", "member"),
    [
        ("x = 1.", False),
        ("# see os.", False),
        ("s = 'a.", False),
        ('s = """a.', False),
        ("import os\nos.", True),
        ("f(x).", True),
        ("x = (a.", True),
        ("def f(self):\n    self.", True),
    ],
)
def test_only_member_dots_are_constrained(code: str, member: bool) -> None:
    assert at_member_dot(code) == member
    if not member:
        assert python_members().allowed(MonitorContext(text=code)) is None


def test_the_matcher_allows_the_inferred_members_only() -> None:
    code, _ = _cut(json.decoder, "self.scan_once(s, idx)")
    prompt, generated = code[: code.rindex("self")], "self."
    tok, v = load_tokenizer("llama3"), load_vocab("llama3")
    mon = python_members(path=json.decoder.__file__, file_attributes=False)
    m = MonitoredMatcher(v, [mon], prompt=prompt)
    m.consume_tokens(tok.encode(generated, add_special_tokens=False))
    allowed = {v.token_bytes(t) for t in m.allowed_token_ids().tolist()}
    assert b"scan" in allowed and b"parse" in allowed  # scan_once, parse_float, ...
    assert b"foo" not in allowed and b"append" not in allowed
    m.consume_tokens(tok.encode("scan_once(s, idx)", add_special_tokens=False))
    assert m.is_accepting()


def test_a_prompt_that_ends_at_a_member_dot_is_constrained_from_the_first_token() -> None:
    code, _ = _cut(json.decoder, "self.scan_once(s, idx)")
    tok, v = load_tokenizer("llama3"), load_vocab("llama3")
    m = MonitoredMatcher(v, [python_members(path=json.decoder.__file__)], prompt=code)
    allowed = {v.token_bytes(t) for t in m.allowed_token_ids().tolist()}
    assert b"scan" in allowed and b"foo" not in allowed
    m.consume_tokens(tok.encode("scan_once(s, idx)", add_special_tokens=False))
    assert m.is_accepting()


def test_names_the_file_uses_after_a_dot_widen_what_jedi_infers() -> None:
    """``TarFile.open`` reads the class attribute ``OPEN_METH`` through ``cls``; the
    default monitor allows the names the file already uses after ``cls.`` besides what
    ``jedi`` infers, so such members are not forbidden; names the file uses after other
    names and dots are not added."""
    src = inspect.getsource(tarfile)
    marker = "cls.OPEN_METH"
    if marker not in src:
        pytest.skip(f"this Python's tarfile has no {marker!r}")
    code = src[: src.rindex(marker) + len("cls.")]
    ctx = MonitorContext(text=code)
    strict = python_members(path=tarfile.__file__, file_attributes=False).allowed(ctx)
    wide = python_members(path=tarfile.__file__).allowed(ctx)
    assert strict and wide
    assert "OPEN_METH" in wide and "open" in wide
    assert set(strict) <= set(wide) == set(strict) | attribute_names(code, "cls")
    assert "foo" not in wide
    elsewhere = attribute_names(code) - attribute_names(code, "cls") - set(strict)
    assert elsewhere and not elsewhere & set(wide)


def test_attribute_names_are_read_by_pythons_tokenizer() -> None:
    code = "import os\nx = os.path.join(a.b, '.c') + 1.5  # d.e\ny = (f\n  .g)\nz."
    assert attribute_names(code) == {"path", "join", "b", "g"}
    assert attribute_names(code, "os") == {"path"}
    assert attribute_names(code, "a") == {"b"}
    assert attribute_names(code, "f") == {"g"}
