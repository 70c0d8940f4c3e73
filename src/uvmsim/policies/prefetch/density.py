"""The driver's density prefetcher (uvm_perf_prefetch.c), exactly as docs/semantics.md
states.

Faulted pages grow to their 64 KiB big page; then each faulted page takes the largest aligned
power-of-two region whose resident-or-faulted density exceeds `threshold` percent.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from ...engine.bits import ctz, fill16, popcount, set_range, word_mask
from ..base import PolicyContext, PrefetchPolicy, register_prefetch


# threshold[0]: the density threshold; big: scratch bits (resident | faulted, then the big
# pages chosen), 8 words
DensityState = namedtuple("DensityState", "threshold big")


def init(ctx: PolicyContext) -> DensityState:
    return DensityState(np.array([ctx.params["threshold"]], np.float64),
                        np.zeros(8, np.uint64))


@njit(cache=True)
def region_count(B, a, b):
    """Set bits of B among positions a..b of an aligned power-of-two region."""
    if (b >> 6) == (a >> 6):
        return np.int64(popcount(B[a >> 6] & word_mask(a >> 6, a, b)))
    n = 0
    for w in range(a >> 6, (b >> 6) + 1):
        n += np.int64(popcount(B[w] & word_mask(w, a, b)))
    return n


@njit(cache=True)
def prefetch(st, S, T, blk, lo, hi):
    t = st.threshold[0]
    B = st.big
    # B = resident | faulted, then whole big pages of faults (within lo..hi)
    for w in range(8):
        B[w] = (S.rbits[w] | S.fbits[w] | fill16(S.fbits[w])) & word_mask(w, lo, hi)
    # each faulted page takes the largest aligned power-of-two region around it (clipped to
    # lo..hi) whose density of B exceeds t %. A faulted page inside a region already taken
    # would take a region inside it (the larger ones are the same regions, which failed),
    # so only faulted pages not yet covered are looked at.
    for w in range(8):
        m = S.fbits[w] & ~S.pbits[w]
        while m:
            p = (w << 6) + np.int64(ctz(m))
            m &= m - np.uint64(1)
            if (S.pbits[p >> 6] >> np.uint64(p & 63)) & np.uint64(1):
                continue
            s = 512
            while s >= 1:
                a = max(p & ~(s - 1), lo)
                b = min((p & ~(s - 1)) + s - 1, hi)
                if region_count(B, a, b) * 100 > (b - a + 1) * t:
                    set_range(S.pbits, 0, a, b)
                    break
                s >>= 1
            # later faulted pages of this word may now be covered
            m &= ~S.pbits[w]
    # P = P \ F (the engine ignores F anyway; kept for policies that inspect pbits)
    for w in range(8):
        S.pbits[w] &= ~S.fbits[w]


DENSITY = register_prefetch(PrefetchPolicy(
    "density", prefetch, init=init, params={"threshold": 51.0},
    doc="The driver's default: big page, then densest power-of-two region > threshold %.",
    source="open-gpu-kernel-modules kernel-open/nvidia-uvm/uvm_perf_prefetch.c; "
           "docs/semantics.md"))
