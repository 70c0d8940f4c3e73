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

from ...engine.bits import first_set, set_range
from ..base import PrefetchPolicy, register_prefetch


@njit(cache=True)
def prefetch(st, S, T, blk, lo, hi):
    # window position p is page rel + p of its allocation
    rel = T.b_first_vpage[blk] - lo - T.a_first_page[T.b_alloc[blk]]
    p = first_set(S.fbits, 0, lo, hi)
    while p >= 0:
        g_start = max(lo, ((rel + p) & ~15) - rel)  # p's basic block
        g_end = min(hi, ((rel + p) | 15) - rel)
        set_range(S.pbits, 0, g_start, g_end)
        p = first_set(S.fbits, 0, g_end + 1, hi) if g_end < hi else -1


SEQ64K = register_prefetch(PrefetchPolicy(
    "seq64k", prefetch,
    doc="UVMSmart's sequential-local: the 64 KiB basic block (from the allocation base) "
        "of each fault.",
    source="DebashisGanguly/gpgpu-sim_UVMSmart src/gpgpu-sim/gpu-sim.cc (SEQUENTIAL_LOCAL)"))
