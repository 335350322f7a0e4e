"""Keyword bookkeeping: how each keyword occurrence of a schema is enforced.

A :class:`Findings` recorder collects one :class:`Finding` per (JSON pointer, keyword):
*exact* (the grammar expresses it), *final check* (the grammar derives a superset and
the complete document is validated), or *annotation* (no effect on validity). Without
a final check (``Options.final_check=False``), a keyword that needs one is refused with
:class:`~corral.errors.UnsupportedFeatureError` at its pointer instead of being noted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import Location, UnsupportedFeatureError
from .keywords import ANNOTATIONS, CHECKED, DEFERRED, HANDLED
from .load import pointer_join

__all__ = ["ANNOTATION", "EXACT", "FINAL_CHECK", "Finding", "Findings"]

EXACT = "exact"
FINAL_CHECK = "final check"
ANNOTATION = "annotation"


@dataclass(frozen=True)
class Finding:
    """How one keyword occurrence is enforced."""

    pointer: str
    keyword: str
    status: str  # EXACT, FINAL_CHECK or ANNOTATION
    detail: str = ""


class Findings:
    """The findings of one translation, keyed by (pointer, keyword).

    The first note of an occurrence stands, except that *final check* overrides *exact*
    (a keyword expressed exactly in one place and left to the check in another is the
    check's).
    """

    def __init__(self, *, final_check: bool) -> None:
        self.final_check = final_check
        self._by_key: dict[tuple[str, str], Finding] = {}

    def note(self, ptr: str, kw: str, status: str, detail: str = "") -> None:
        key = (ptr, kw)
        old = self._by_key.get(key)
        if old is None or (old.status == EXACT and status == FINAL_CHECK):
            self._by_key[key] = Finding(ptr, kw, status, detail)

    def exact(self, ptr: str, kw: str, detail: str = "") -> None:
        """Keyword ``kw`` at ``ptr`` is expressed exactly by the grammar."""
        self.note(ptr, kw, EXACT, detail)

    def needs_check(self, ptr: str, kw: str, detail: str = "") -> None:
        """Keyword ``kw`` at ``ptr`` is left to the final check (refused without one)."""
        if not self.final_check:
            raise UnsupportedFeatureError(
                kw,
                location=Location(pointer=ptr),
                detail="a grammar cannot express it; it needs the final check "
                "(Options.final_check=True)" + (f" ({detail})" if detail else ""),
            )
        self.note(ptr, kw, FINAL_CHECK, detail)

    def noted(self, ptr: str, kw: str) -> bool:
        """Whether keyword ``kw`` at ``ptr`` has a finding."""
        return (ptr, kw) in self._by_key

    def classify(self, schema: dict[str, Any], ptr: str) -> None:
        """Note the keywords of ``schema`` (at ``ptr``) that need no emitter: annotations,
        unknown keywords, and the final check's (except the :data:`DEFERRED` ones, which
        the array and object emitters note)."""
        for kw in schema:
            if kw in ANNOTATIONS:
                self.note(pointer_join(ptr, kw), kw, ANNOTATION)
            elif kw in DEFERRED:
                continue  # noted where arrays and objects are built
            elif kw in CHECKED:
                self.needs_check(pointer_join(ptr, kw), kw)
            elif kw not in HANDLED:
                self.note(pointer_join(ptr, kw), kw, ANNOTATION, "unknown keyword: no effect")

    def settle_deferred(self, schema: dict[str, Any], ptr: str, status: str, detail: str) -> None:
        """Note the :data:`DEFERRED` keywords of ``schema`` that ``emit_array`` and
        ``emit_object`` did not."""
        for kw in DEFERRED:
            if kw in schema and not self.noted(pointer_join(ptr, kw), kw):
                self.note(pointer_join(ptr, kw), kw, status, detail)

    def sorted(self) -> list[Finding]:
        """Every finding, by pointer then keyword."""
        return sorted(self._by_key.values(), key=lambda f: (f.pointer, f.keyword))
