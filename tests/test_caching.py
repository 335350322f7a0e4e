"""corral.caching.BoundedCache: LRU order, both bounds, get_or_build."""

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.caching import BoundedCache


def test_lru_order_and_entry_bound():
    c: BoundedCache[str, int] = BoundedCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1  # "a" is now the most recently used
    c.put("c", 3)  # drops "b"
    assert "b" not in c and c.get("a") == 1 and c.get("c") == 3
    assert (c.hits, c.misses) == (3, 0)
    assert c.get("b") is None and c.misses == 1


def test_byte_bound_and_oversized_value():
    c: BoundedCache[str, bytes] = BoundedCache(10, max_bytes=10, size_of=len)
    c.put("a", b"12345")
    c.put("b", b"12345")
    assert c.nbytes == 10
    c.put("c", b"1")  # 11 bytes: drops "a"
    assert "a" not in c and c.nbytes == 6
    c.put("big", b"x" * 11)  # larger than the bound alone: not kept, nothing dropped
    assert "big" not in c and len(c) == 2
    c.put("b", b"1")  # replacing an entry updates the byte count
    assert c.nbytes == 2


def test_zero_entries_keeps_nothing_and_bad_bounds_refused():
    c: BoundedCache[str, int] = BoundedCache(0)
    assert c.get_or_build("a", lambda: 7) == 7 and len(c) == 0
    with pytest.raises(ValueError):
        BoundedCache(-1)
    with pytest.raises(ValueError):
        BoundedCache(1, max_bytes=5)  # no size_of


def test_get_or_build_builds_once_per_key_and_clear():
    calls = []
    c: BoundedCache[int, int] = BoundedCache(4)

    def build(k):
        calls.append(k)
        return k * k

    assert [c.get_or_build(k, lambda k=k: build(k)) for k in (1, 2, 1, 2)] == [1, 4, 1, 4]
    assert calls == [1, 2]
    c.clear()
    assert len(c) == 0 and c.nbytes == 0
    assert c.get_or_build(1, lambda: build(1)) == 1 and calls == [1, 2, 1]


@given(
    st.lists(st.tuples(st.integers(0, 20), st.integers(1, 50)), max_size=200),
    st.integers(0, 8),
    st.integers(0, 200),
)
def test_bounds_always_hold(ops, max_entries, max_bytes):
    c: BoundedCache[int, int] = BoundedCache(max_entries, max_bytes=max_bytes, size_of=int)
    for k, v in ops:
        c.put(k, v)
        assert len(c) <= max_entries and c.nbytes <= max_bytes
        assert c.nbytes == sum(c.values())
        if max_entries and v <= max_bytes:
            assert c.get(k) == v  # the value just stored is always kept


def test_threads_keep_the_bounds():
    c: BoundedCache[int, int] = BoundedCache(16, max_bytes=64, size_of=lambda v: 4)

    def worker(seed):
        for i in range(2000):
            c.get_or_build((seed * 7919 + i) % 97, lambda i=i: i)

    ts = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(c) <= 16 and c.nbytes == 4 * len(c) <= 64
