"""`madvise`: no kernel waits; a kernel whose working set does not fit beside the chunks
of the other tenants with events left (MFit's test) runs with a hint for its whole tenant:
its GPU misses are served remotely over the link (as pages with preferred location CPU:
counted in remote_accesses, remote_access_ns each), so it migrates nothing and evicts no
other tenant's chunks. Pages it already has on the GPU still hit. The hint is set or
cleared each time one of the tenant's kernels starts.

After PILOT's MAdvise (cudaMemAdvise hints applied to migrations of the tenants that do not
fit); the rule above is this simulator's.
"""
from __future__ import annotations

from numba import njit

from .mfit import admit as fits, init
from .base import TenantScheduler, register_scheduler


@njit(cache=True)
def admit(st, S, T, ten, k, live):
    return True


@njit(cache=True)
def start(st, S, T, ten, k, live):
    S.t_remote[ten] = 0 if fits(st, S, T, ten, k, live) else 1
    return -1


MADVISE = register_scheduler(TenantScheduler(
    "madvise", admit=admit, init=init, admit_py=lambda st, S, T, ten, k, live: True,
    start=start, remote=True,
    doc="No waiting; a kernel that does not fit beside the others has its tenant's misses "
        "served remotely instead of migrated.",
    source="PILOT MAdvise (memory hints for tenants that do not fit), Ravi et al. HiPC 2021"))
