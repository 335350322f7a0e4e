"""Random regular expressions (Python syntax) for property tests."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def regexes(
    draw: st.DrawFn,
    atoms: st.SearchStrategy[str],
    depth: int = 3,
    guards: st.SearchStrategy[str] | None = None,
) -> str:
    """A regex of at most ``depth`` nested operators over ``atoms``, each atom preceded by
    one of ``guards`` (zero-width assertions, ``""`` for none) when given."""
    if depth == 0 or draw(st.booleans()):
        return (draw(guards) if guards is not None else "") + draw(atoms)
    kind = draw(st.sampled_from(["cat", "alt", "star", "plus", "opt", "rep", "lazy"]))
    a = draw(regexes(atoms, depth - 1, guards))
    if kind == "cat":
        return a + draw(regexes(atoms, depth - 1, guards))
    if kind == "alt":
        return f"(?:{a}|{draw(regexes(atoms, depth - 1, guards))})"
    if kind == "star":
        return f"(?:{a})*"
    if kind == "plus":
        return f"(?:{a})+"
    if kind == "opt":
        return f"(?:{a})?"
    if kind == "lazy":
        return f"(?:{a})*?"
    lo = draw(st.integers(0, 2))
    return f"(?:{a}){{{lo},{lo + draw(st.integers(0, 2))}}}"
