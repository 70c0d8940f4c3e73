"""Bit operations on a 2 MiB block's 512 window positions, held as 8 x uint64 words.

Position p is bit p & 63 of word p >> 6. The engine keeps every block's resident positions
this way (S.bres) and hands a prefetch policy the block's faulted (S.fbits) and resident
(S.rbits) positions and takes its answer (S.pbits) the same way, so servicing a block costs
the pages it moves plus a few word operations, never a walk over 512 positions. Policies
use these helpers; all are Numba functions that inline into the engine.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core.extending import intrinsic

_ONE = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@intrinsic
def popcount(typingctx, x):
    """Number of set bits of a uint64 (one instruction)."""
    if x != types.uint64:
        return None

    def codegen(context, builder, sig, args):
        return builder.ctpop(args[0])
    return types.uint64(types.uint64), codegen


@intrinsic
def ctz(typingctx, x):
    """Index of the lowest set bit of a nonzero uint64 (one instruction)."""
    if x != types.uint64:
        return None

    def codegen(context, builder, sig, args):
        return builder.cttz(args[0], context.get_constant(types.boolean, True))
    return types.uint64(types.uint64), codegen


@njit(cache=True, inline="always")
def word_mask(w, lo, hi):
    """Bits of word w that are positions lo..hi (inclusive); 0 if none."""
    a = max(lo - (w << 6), 0)
    b = min(hi - (w << 6), 63)
    if a > b:
        return np.uint64(0)
    m = _ALL >> np.uint64(63 - b + a)
    return m << np.uint64(a)


@njit(cache=True, inline="always")
def test(bits, off, p):
    """Position p set in the block whose words start at bits[off]."""
    return (bits[off + (p >> 6)] >> np.uint64(p & 63)) & _ONE != 0


@njit(cache=True, inline="always")
def set_bit(bits, off, p):
    bits[off + (p >> 6)] |= _ONE << np.uint64(p & 63)


@njit(cache=True, inline="always")
def clear_bit(bits, off, p):
    bits[off + (p >> 6)] &= ~(_ONE << np.uint64(p & 63))


@njit(cache=True)
def set_range(bits, off, lo, hi):
    """Set positions lo..hi."""
    for w in range(lo >> 6, (hi >> 6) + 1):
        bits[off + w] |= word_mask(w, lo, hi)


@njit(cache=True)
def clear_range(bits, off, lo, hi):
    """Clear positions lo..hi."""
    for w in range(lo >> 6, (hi >> 6) + 1):
        bits[off + w] &= ~word_mask(w, lo, hi)


@njit(cache=True)
def count_range(bits, off, lo, hi):
    """Set positions among lo..hi."""
    n = 0
    for w in range(lo >> 6, (hi >> 6) + 1):
        n += np.int64(popcount(bits[off + w] & word_mask(w, lo, hi)))
    return n


@njit(cache=True)
def first_set(bits, off, lo, hi):
    """Lowest set position in lo..hi, -1 if none."""
    for w in range(lo >> 6, (hi >> 6) + 1):
        m = bits[off + w] & word_mask(w, lo, hi)
        if m:
            return (w << 6) + np.int64(ctz(m))
    return -1


@njit(cache=True)
def last_set(bits, off, lo, hi):
    """Highest set position in lo..hi, -1 if none."""
    for w in range(hi >> 6, (lo >> 6) - 1, -1):
        m = bits[off + w] & word_mask(w, lo, hi)
        if m:
            return (w << 6) + 63 - np.int64(_clz(m))
    return -1


@intrinsic
def _clz(typingctx, x):
    if x != types.uint64:
        return None

    def codegen(context, builder, sig, args):
        return builder.ctlz(args[0], context.get_constant(types.boolean, True))
    return types.uint64(types.uint64), codegen


def to_positions(words: np.ndarray) -> np.ndarray:
    """Set positions of one block's words, ascending (Python side: tests, reference)."""
    b = np.unpackbits(np.ascontiguousarray(words, np.uint64).view(np.uint8), bitorder="little")
    return np.flatnonzero(b)


def from_positions(positions) -> np.ndarray:
    """One block's words with the given positions set (Python side)."""
    b = np.zeros(512, np.uint8)
    b[np.asarray(positions, np.int64)] = 1
    return np.packbits(b, bitorder="little").view(np.uint64).copy()


@njit(cache=True, inline="always")
def fill16(x):
    """Each 16-bit lane (a 64 KiB big page) of x holding a set bit, all set."""
    r = np.uint64(0)
    for k in range(4):
        lane = np.uint64(0xFFFF) << np.uint64(16 * k)
        if x & lane:
            r |= lane
    return r


@njit(cache=True, inline="always")
def lanes16(x):
    """4-bit mask of the 16-bit lanes of x holding a set bit (lane k is bit k)."""
    r = np.uint64(0)
    for k in range(4):
        if x & (np.uint64(0xFFFF) << np.uint64(16 * k)):
            r |= np.uint64(1) << np.uint64(k)
    return r
