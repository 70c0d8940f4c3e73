"""Walker components: the descriptor, the registry and helpers shared by the built-ins.

A walker component decides which of the GPU's page-table walkers (S.walk_free: the time
each becomes free) serves a TLB miss. Its hook, called by the engine's `translate`:

    pick(st, S, ten, t) -> int
        Tenant `ten` missed in the TLB at time t: return the walker that takes the walk.
        The walk starts when that walker is free (max(t, S.walk_free[w])) and holds it for
        the walk latency; the engine updates S.walk_free. `st` is the tuple `init` built.

`init(ctx)` runs in Python once per replay. `tlb_slices=True` also slices the TLB among the
tenants: each tenant's translations live only in its own equal share of the TLB's sets
(sets // tenants of them), so one tenant's misses cannot evict another's entries.

The SimPy reference model (uvmsim.reference) does not call `pick`: a component gives it
`pools(ctx)`, the walkers grouped into FIFO pools (one simpy.Resource each), and
`choose(ctx, walk_free, ten, t)`, the pool a tenant's walk queues in.
"""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from ...errors import ConfigError
from ...policies.base import lookup, register


@dataclass(frozen=True)
class WalkerContext:
    """What `init`, `pools` and `choose` may use: the mix and the walker count."""

    n_tenants: int
    walkers: int
    tlb_sets: int
    params: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class WalkerScheduler:
    HOOKS: ClassVar[tuple[str, ...]] = ("pick",)  # compiled into the engine
    name: str
    pick: Any
    init: Callable[[WalkerContext], tuple]
    pools: Callable[[WalkerContext], list]
    choose: Callable[[WalkerContext, np.ndarray, int, float], int]
    tlb_slices: bool = False
    doc: str = ""
    source: str = ""

    def check(self, ctx: WalkerContext) -> None:
        """Reject a mix the component cannot serve (before compiled code indexes with it)."""
        if self.tlb_slices and ctx.tlb_sets < ctx.n_tenants:
            raise ConfigError(f"walkers={self.name!r} slices the TLB per tenant: it needs at "
                              f"least {ctx.n_tenants} TLB sets, the TLB has {ctx.tlb_sets}")


WALKERS: dict[str, WalkerScheduler] = {}

# walkers lo[i]..hi[i]-1 are tenant i's
Shares = namedtuple("Shares", "lo hi")


def register_walkers(comp: WalkerScheduler, *, replace: bool = False) -> WalkerScheduler:
    """Make a walker component available by name to simulate_multi() and the CLI."""
    return register(comp, WALKERS, "walker component", replace=replace)


def get_walkers(spec: Any) -> WalkerScheduler:
    """A registered name, a 'module:object' path, or a WalkerScheduler."""
    return lookup(spec, WALKERS, WalkerScheduler, "walker component")


def tenant_shares(ctx: WalkerContext) -> Shares:
    """Walkers lo[i]..hi[i]-1 belong to tenant i: equal shares, the first tenants taking
    one more when the walkers do not divide evenly. Needs a walker per tenant."""
    n, w = ctx.n_tenants, ctx.walkers
    if w < n:
        raise ConfigError(f"{n} tenants need at least {n} walkers to own a share, the "
                          f"translation has {w}")
    edges = np.array([i * w // n for i in range(n + 1)], np.int64)
    return Shares(edges[:-1].copy(), edges[1:].copy())


def share_pools(ctx: WalkerContext) -> list:
    lo, hi = tenant_shares(ctx)
    return [list(range(a, b)) for a, b in zip(lo, hi)]
