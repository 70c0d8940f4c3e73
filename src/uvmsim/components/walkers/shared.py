"""`shared`: one FIFO queue over every walker, all tenants alike (the default).

A walk takes the walker that frees first (ties: the lowest index); with identical walkers
this is a FIFO queue served by the pool.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from .base import WalkerScheduler, register_walkers

# the `shared` walkers need no state
NoWalkerState = namedtuple("NoWalkerState", "unused")


@njit(cache=True)
def pick(st, S, ten, t):
    wk = 0
    for i in range(1, S.walk_free.size):
        if S.walk_free[i] < S.walk_free[wk]:
            wk = i
    return wk


def init(ctx):
    return NoWalkerState(np.zeros(1, np.int64))


SHARED = register_walkers(WalkerScheduler(
    "shared", pick=pick, init=init,
    pools=lambda ctx: [list(range(ctx.walkers))], choose=lambda ctx, wf, ten, t: 0,
    doc="One FIFO queue over all walkers, shared by every tenant; one shared TLB.",
    source="gem5-gpu / UVMSmart shared page-walk pool"))
