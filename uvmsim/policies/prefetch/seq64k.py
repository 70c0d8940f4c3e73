"""UVMSmart's sequential-local prefetcher: the whole 64 KiB basic block of each fault.

UVMSmart's basic blocks are 64 KiB steps from the start of the allocation (its large-page tree
is rooted at the allocation's base), not from virtual address 0 as the driver's big pages
(`64k`). The two agree whenever the allocation base is 64 KiB aligned, as cudaMallocManaged's
always is; they differ for sub-allocations (framework pools, `base=` in the builder).

Source: DebashisGanguly/gpgpu-sim_UVMSmart src/gpgpu-sim/gpu-sim.cc (`do_hardware_prefetch`,
SEQUENTIAL_LOCAL), ISCA'19.
"""
from __future__ import annotations

from numba import njit

from ..base import PrefetchPolicy, register_prefetch


@njit(cache=True)
def prefetch(st, S, T, blk, lo, hi):
    # dense page of window position p is p0 + p; its offset in the allocation is p0 + p - a0
    rel = T.b_page0[blk] - lo - T.a_page_off[T.b_alloc[blk]]
    p = lo
    while p <= hi:
        g_end = min(hi, ((rel + p) | 15) - rel)  # last position of p's basic block
        hit = False
        for q in range(p, g_end + 1):
            if S.fmask[q]:
                hit = True
                break
        if hit:
            for q in range(p, g_end + 1):
                if not S.fmask[q]:
                    S.pmask[q] = 1
        p = g_end + 1


SEQ64K = register_prefetch(PrefetchPolicy(
    "seq64k", prefetch,
    doc="UVMSmart's sequential-local: the 64 KiB basic block (from the allocation base) "
        "of each fault.",
    source="DebashisGanguly/gpgpu-sim_UVMSmart src/gpgpu-sim/gpu-sim.cc (SEQUENTIAL_LOCAL)"))
