"""The minimisation kernel (``regex/partition.py``) against the Python Hopcroft
reference: the same minimal DFA, state for state (both number states breadth-first from
the start, bytes in order), on random partial DFAs and on the unminimised DFAs of real
regular expressions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.grammar.regex import dfa
from corral.grammar.regex.nfa import build_nfa
from corral.grammar.regex.partition import compared_reps, hashed_reps
from corral.grammar.regex.python_syntax import parse_python_regex


def _same(trans: np.ndarray, accept: np.ndarray) -> None:
    trans, accept = dfa.trim(trans, accept)
    if trans.shape[0] == 0:
        return
    got_t, got_a = dfa.minimize(trans, accept)
    want_t, want_a = dfa.minimize_reference(trans, accept)
    assert got_t.shape == want_t.shape
    assert np.array_equal(got_t, want_t)
    assert np.array_equal(got_a, want_a)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.integers(-1, n - 1), min_size=n * 4, max_size=n * 4),
            st.lists(st.booleans(), min_size=n, max_size=n),
            st.lists(st.integers(0, 3), min_size=256, max_size=256),
        )
    )
)
def test_random_partial_dfas(case) -> None:  # type: ignore[no-untyped-def]
    n, targets, accepts, byte_letter = case
    small = np.array(targets, np.int32).reshape(n, 4)
    trans = np.ascontiguousarray(small[:, byte_letter], np.int32)
    _same(trans, np.array(accepts, bool))


PATTERNS = [
    r"[a-z]+@[a-z]+\.(com|org|net)",
    r"(a|b)*abb(a|b){0,6}",
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
    r"\"([^\"\\]|\\.){0,40}\"",
    r"(\d{1,3}\.){3}\d{1,3}",
    r"[\u0400-\u04ff\u4e00-\u9fff]{2,5}x",
    r"(?i)select|insert|update|delete",
    r"((ab|cd)*|ef)+g{2,9}",
]


def _unminimised(pattern: str) -> tuple[np.ndarray, np.ndarray]:
    """The byte DFA of ``pattern`` before minimisation."""
    nfa = build_nfa(parse_python_regex(pattern, 0, where="t"))
    alpha = dfa._Alphabet(nfa)
    ca = dfa._determinise(nfa, alpha, "t", dfa.DEFAULT_MAX_DFA_STATES)
    return dfa._to_bytes(ca, dfa.DEFAULT_MAX_DFA_STATES * 4, "t")


@pytest.mark.parametrize("pattern", PATTERNS)
def test_real_regexes(pattern: str) -> None:
    _same(*_unminimised(pattern))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.integers(-1, 3), min_size=n * 6, max_size=n * 6),
            st.lists(st.integers(0, 5), min_size=40, max_size=40),
        )
    )
)
def test_column_classes(case) -> None:  # type: ignore[no-untyped-def]
    """Distinct columns in order of first appearance, and a map back to every column."""
    n, values, pick = case
    base = np.array(values, np.int32).reshape(n, 6)
    trans = np.ascontiguousarray(base[:, pick])
    small, col_class = dfa.column_classes(trans)
    assert np.array_equal(small[:, col_class], trans)
    firsts: list[int] = []
    for b in range(trans.shape[1]):
        if not any(np.array_equal(trans[:, b], trans[:, f]) for f in firsts):
            firsts.append(b)
    assert np.array_equal(small, trans[:, firsts])
    # the exact comparison (used only after a hash collision) finds the same classes
    rep, exact = hashed_reps(trans)
    assert exact
    assert np.array_equal(compared_reps(trans), rep)


def test_read_only_arrays_take_the_compiled_kernel() -> None:
    """Cached DFAs are frozen (read-only arrays), and Numba compiles a kernel again for a
    read-only argument: :func:`dfa.minimize` hands the kernel writable copies, so a
    frozen DFA's minimisation adds no signature (no compile on a fresh install)."""
    from corral.grammar.regex import partition

    kernels = [partition.column_classes_of, partition.minimal_table]
    kernels += [partition.hashed_reps, partition.compared_reps, partition.equivalence_blocks]
    trans, accept = dfa.trim(*_unminimised(r"(ab|cd)+e?"))
    want = dfa.minimize(trans, accept)
    n_signatures = [len(k.signatures) for k in kernels]
    frozen_t, frozen_a = trans.copy(), accept.copy()
    frozen_t.setflags(write=False)
    frozen_a.setflags(write=False)
    got = dfa.minimize(frozen_t, frozen_a)
    assert [len(k.signatures) for k in kernels] == n_signatures
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
