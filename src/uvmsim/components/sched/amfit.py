"""`amfit`: adaptive MFit. Only what other tenants are using counts against a kernel's
working set, and what they hold but are not using is reclaimed before the kernel runs.

LRU tracking: a tenant's active chunks are those of the blocks its most recently started
kernel touches (none before its first kernel); its other chunks are cold. A kernel waits
while its working set + the active chunks of the other tenants with events left exceeds the
capacity. When it starts, it needs a chunk for each of its blocks without one; while fewer
chunks are free, chunks are reclaimed: from a tenant that has finished (the one holding
most; ties: the lowest index), else from the tenant with the most cold chunks. Each
reclamation is one eviction among that tenant's chunks in the eviction policy's order (its
least recently used first, under an LRU policy), done by the driver before the kernel's
faults.

After PILOT's AMFit (adaptive working-set admission with LRU tracking and proactive
reclamation); the rules above are this simulator's.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from .base import TenantScheduler, kernel_blocks, register_scheduler

AmfitState = namedtuple("AmfitState", "blk_start blocks cap last target")


@njit(cache=True)
def held_of(st, S, k):
    """Chunks held by kernel k's blocks."""
    n = 0
    for i in range(st.blk_start[k], st.blk_start[k + 1]):
        if S.b_chunk[st.blocks[i]] >= 0:
            n += 1
    return n


@njit(cache=True)
def active(st, S, j):
    """Tenant j's active chunks: those of its most recent kernel's blocks."""
    return held_of(st, S, st.last[j]) if st.last[j] >= 0 else 0


@njit(cache=True)
def admit(st, S, T, ten, k, live):
    used = 0
    for j in range(live.size):
        if j != ten and live[j]:
            used += active(st, S, j)
    return st.blk_start[k + 1] - st.blk_start[k] + used <= st.cap[0]


@njit(cache=True)
def start(st, S, T, ten, k, live):
    if st.target[0] < 0:
        # the kernel's first call: its blocks without a chunk need free ones
        st.last[ten] = k
        st.target[0] = st.blk_start[k + 1] - st.blk_start[k] - held_of(st, S, k)
    if S.pool[0].n_free < st.target[0]:
        best = -1
        most = 0
        for j in range(live.size):
            if j != ten and not live[j] and S.t_chunks[j] > most:
                most = S.t_chunks[j]
                best = j
        if best < 0:
            for j in range(live.size):
                if j != ten and live[j]:
                    cold = S.t_chunks[j] - active(st, S, j)
                    if cold > most:
                        most = cold
                        best = j
        if best >= 0:
            return best
    st.target[0] = -1
    return -1


def init(ctx):
    start_, blocks = kernel_blocks(ctx.trace)
    return AmfitState(start_, blocks, np.array([ctx.capacity_chunks], np.int64),
                      np.full(ctx.n_tenants, -1, np.int64), np.full(1, -1, np.int64))


def admit_py(st, S, T, ten, k, live):
    """Mirror of `admit` for the reference model."""
    def act(j):
        k_j = int(st.last[j])
        if k_j < 0:
            return 0
        blk = st.blocks[st.blk_start[k_j]:st.blk_start[k_j + 1]]
        return int(np.count_nonzero(S.b_chunk[blk] >= 0))
    used = sum(act(j) for j in range(len(live)) if j != ten and live[j])
    return int(st.blk_start[k + 1] - st.blk_start[k]) + used <= int(st.cap[0])


AMFIT = register_scheduler(TenantScheduler(
    "amfit", admit=admit, init=init, admit_py=admit_py, start=start,
    doc="A kernel waits while its working set does not fit beside other tenants' active "
        "chunks; cold and finished tenants' chunks are reclaimed before it runs.",
    source="PILOT AMFit (adaptive admission, LRU tracking, proactive reclamation), "
           "Ravi et al. HiPC 2021"))
