"""Code point ranges → UTF-8 byte-range sequences.

A range of code points ``[lo, hi]`` is split into pieces whose UTF-8 encodings are exactly
the products of per-byte ranges, e.g. ``U+0080..U+07FF`` → ``[C2-DF][80-BF]``. The pieces of
disjoint ranges are disjoint, and UTF-8 is prefix-free, so a byte automaton built from them
stays deterministic (the same algorithm as RE2 and Rust's ``regex-syntax``).
"""

from __future__ import annotations

ByteRange = tuple[int, int]
Sequence = tuple[ByteRange, ...]

_MAX_BY_LEN = (0x7F, 0x7FF, 0xFFFF, 0x10FFFF)


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass")


def utf8_sequences(lo: int, hi: int) -> list[Sequence]:
    """Byte-range sequences covering exactly the UTF-8 encodings of code points lo..hi.

    Surrogates (U+D800..U+DFFF) must not be in the range (they have no UTF-8 encoding).
    """
    out: list[Sequence] = []
    stack = [(lo, hi)]
    while stack:
        a, b = stack.pop()
        if a > b:
            continue
        # Split at encoded-length boundaries.
        split = False
        for m in _MAX_BY_LEN[:-1]:
            if a <= m < b:
                stack.append((m + 1, b))
                stack.append((a, m))
                split = True
                break
        if split:
            continue
        if b <= 0x7F:
            out.append(((a, b),))
            continue
        # Split so that every continuation byte varies over its full range except a prefix.
        n = len(_encode(a))
        for i in range(1, n):
            mask = (1 << (6 * i)) - 1
            if (a & ~mask) != (b & ~mask):
                if a & mask:
                    stack.append(((a | mask) + 1, b))
                    stack.append((a, a | mask))
                    split = True
                    break
                if (b & mask) != mask:
                    stack.append((b & ~mask, b))
                    stack.append((a, (b & ~mask) - 1))
                    split = True
                    break
        if split:
            continue
        ea, eb = _encode(a), _encode(b)
        out.append(tuple((ea[k], eb[k]) for k in range(n)))
    out.sort()
    return out
