"""The hook interface: the functions the engine calls that policies and tenant components
supply, and the engine's own defaults.

The engine names no policy and no component. uvmsim.engine.build binds, for one engine, a
function to each name of HOOKS, taken from the attribute of the object that supplies it:

    PF_PREFETCH(pst, S, T, blk, lo, hi)                     prefetch policy: writes S.pbits
    EV_ON_FILL(est, S, T, chunk, blk, first, last, n_new, tick)
    EV_ON_HIT(est, S, T, chunk, blk, pos, tick)             (absent: no_hit)
    EV_ON_RELEASE(est, S, T, chunk, blk)
    EV_VICTIM(est, S, T, tick)                              eviction policy: writes S.victim
    WK_PICK(wst, S, ten, t)            walker component: the page-table walker of a TLB miss
    SC_ADMIT(sst, S, T, ten, k, live)  scheduler: may tenant ten start kernel k now
    SC_START(sst, S, T, ten, k, live)  scheduler: kernel k starts; a tenant to reclaim a
                                       chunk from, or -1
    MEM_RESERVE(S.mem, S, T, ten)      memory component: before tenant ten takes a chunk,
                                       -1, or a tenant one of whose chunks must be evicted

Any object with those attributes supplies them: uvmsim.policies defines the policy
descriptors and uvmsim.components the tenant components (their docstrings give each hook's
contract). A replay that names no tenant component gets DEFAULTS, which the built-in `shared`
walkers, `interleave` scheduler and `shared` memory components register as theirs, so a
single-tenant replay and a multi-tenant one with those components run the same engine.
"""
from __future__ import annotations

from collections import namedtuple
from types import SimpleNamespace

import numpy as np
from numba import njit

# template global name -> (attribute of the supplier, supplier: "pf" prefetch policy, "ev"
# eviction policy, "wk" walker component, "sc" scheduler component, "mem" memory component)
HOOKS = (("PF_PREFETCH", "prefetch", "pf"), ("EV_ON_FILL", "on_fill", "ev"),
         ("EV_ON_HIT", "on_hit", "ev"), ("EV_ON_RELEASE", "on_release", "ev"),
         ("EV_VICTIM", "victim", "ev"), ("WK_PICK", "pick", "wk"),
         ("SC_ADMIT", "admit", "sc"), ("SC_START", "start", "sc"),
         ("MEM_RESERVE", "reserve", "mem"))

# the state of a policy or component that needs none
EmptyState = namedtuple("EmptyState", "unused")


def empty_state(ctx=None) -> EmptyState:
    """The state `init` returns for a policy or component that needs none."""
    return EmptyState(np.zeros(1, np.int64))


@njit(cache=True)
def no_hit(st, S, T, chunk, blk, pos, tick):
    """on_hit for policies that, like the driver, do not see hits."""
    return


@njit(cache=True)
def may_evict(S, c):
    """Whether chunk c (in use) may be the victim of this eviction: always, unless a memory
    component restricted it to one tenant's chunks (S.pool[0].victim_tenant >= 0; a block's
    tenant is S.b_tenant). Victim hooks skip the chunks it rejects, keeping their own
    order."""
    ten = S.pool[0].victim_tenant
    return ten < 0 or S.b_tenant[S.chunk_block[c]] == ten


@njit(cache=True)
def earliest_free_walker(st, S, ten, t):
    """pick: the walker that frees first (ties: the lowest index), whatever the tenant; with
    identical walkers a FIFO queue served by the pool."""
    wk = 0
    for i in range(1, S.walk_free.size):
        if S.walk_free[i] < S.walk_free[wk]:
            wk = i
    return wk


@njit(cache=True)
def admit_all(st, S, T, ten, k, live):
    """admit: every kernel starts as soon as its tenant's clock is the earliest."""
    return True


@njit(cache=True)
def no_start(st, S, T, ten, k, live):
    """start for schedulers that neither reclaim nor hint."""
    return -1


@njit(cache=True)
def take_free_chunk(st, S, T, ten):
    """reserve: take a free chunk; with none free the eviction policy chooses among every
    tenant's chunks."""
    return -1


# the tenant components' hooks of a replay that names none
DEFAULTS = SimpleNamespace(pick=earliest_free_walker, admit=admit_all, start=no_start,
                           reserve=take_free_chunk)
