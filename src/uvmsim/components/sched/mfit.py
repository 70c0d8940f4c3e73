"""`mfit`: memory-fit admission. A kernel whose working set (the distinct 2 MiB blocks it
touches) does not fit beside the chunks the other running tenants hold waits until it does:
working set + chunks of other tenants with events left <= capacity.

After PILOT's MFit (kernels beyond the working-set limit wait instead of thrashing each
other's memory). Chunks of finished tenants do not count: nothing will use them again.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from .base import TenantScheduler, kernel_working_sets, register_scheduler

# ws[k]: kernel k's working set in chunks; cap[0]: the GPU's capacity in chunks
MfitState = namedtuple("MfitState", "ws cap")


@njit(cache=True)
def admit(st, S, T, ten, k, live):
    ws, cap = st.ws, st.cap[0]
    held = 0
    for c in range(S.chunk_block.size):
        b = S.chunk_block[c]
        if b >= 0:
            j = S.b_tenant[b]
            if j != ten and live[j]:
                held += 1
    return ws[k] + held <= cap


def init(ctx):
    return MfitState(kernel_working_sets(ctx.trace), np.array([ctx.capacity_chunks], np.int64))


def admit_py(st, S, T, ten, k, live):
    """Mirror of `admit` for the reference model."""
    used = S.chunk_block[S.chunk_block >= 0]
    owner = S.b_tenant[used]
    held = int(np.sum((owner != ten) & (np.asarray(live)[owner] != 0)))
    return int(st.ws[k]) + held <= int(st.cap[0])


MFIT = register_scheduler(TenantScheduler(
    "mfit", admit=admit, init=init, admit_py=admit_py,
    doc="A kernel waits while its working set does not fit beside other running tenants' "
        "chunks.",
    source="PILOT MFit (working-set admission)"))
