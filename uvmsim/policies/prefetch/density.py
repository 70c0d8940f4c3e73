"""The driver's density prefetcher (uvm_perf_prefetch.c), exactly as driver-model.md states.

Faulted pages grow to their 64 KiB big page; then each faulted page takes the largest aligned
power-of-two region whose resident-or-faulted density exceeds `threshold` percent.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..base import PolicyContext, PrefetchPolicy, register_prefetch


def init(ctx: PolicyContext) -> tuple:
    # st[0][0] = threshold; st[1] = prefix-count scratch over the window
    return (np.array([ctx.params["threshold"]], np.float64), np.zeros(513, np.int64))


@njit(cache=True)
def prefetch(st, S, T, blk, lo, hi):
    t = st[0][0]
    pre = st[1]
    # B = resident | faulted, then whole big pages of faults
    # build B in pmask temporarily, then overwrite with the answer
    for p in range(lo, hi + 1):
        S.pmask[p] = 1 if (S.rmask[p] or S.fmask[p]) else 0
    for g in range(lo & ~15, hi + 1, 16):
        a = max(g, lo)
        b = min(g + 16, hi + 1)
        hit = False
        for p in range(a, b):
            if S.fmask[p]:
                hit = True
                break
        if hit:
            for p in range(a, b):
                S.pmask[p] = 1
    pre[0] = 0
    for p in range(512):
        inside = lo <= p and p <= hi
        pre[p + 1] = pre[p] + (1 if inside and S.pmask[p] else 0)
    for p in range(lo, hi + 1):
        S.pmask[p] = 0
    for p in range(lo, hi + 1):
        if not S.fmask[p]:
            continue
        r_lo = -1
        r_hi = -1
        s = 1
        while s <= 512:
            w0 = (p // s) * s
            a = max(w0, lo)
            b = min(w0 + s - 1, hi)
            size = b - a + 1
            if size > 0 and (pre[b + 1] - pre[a]) * 100 > size * t:
                r_lo = a
                r_hi = b
            s *= 2
        for q in range(r_lo, r_hi + 1):
            S.pmask[q] = 1
        if r_hi == hi:
            break
    # P = P \ F (the engine ignores F anyway; kept for policies that inspect pmask)
    for p in range(lo, hi + 1):
        if S.fmask[p]:
            S.pmask[p] = 0


DENSITY = register_prefetch(PrefetchPolicy(
    "density", prefetch, init=init, params={"threshold": 51.0},
    doc="The driver's default: big page, then densest power-of-two region > threshold %.",
    source="open-gpu-kernel-modules kernel-open/nvidia-uvm/uvm_perf_prefetch.c; "
           "driver-model.md"))
