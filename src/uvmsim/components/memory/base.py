"""Memory components: the descriptor, the registry and helpers shared by the built-ins.

A memory component decides, each time a tenant's block needs a chunk, whether one of some
tenant's chunks must be evicted first. Its hook, called by the engine's `ensure_chunk`
(and by the reference model's, the same compiled function):

    reserve(st, S, T, ten) -> int
        Tenant `ten` is about to take a chunk. Return -1 to take a free one (the eviction
        policy choosing among all chunks when none is free), or a tenant j holding at least
        one chunk: the policy's next victim is then restricted to j's chunks (S.pool[0].victim_tenant,
        read through uvmsim.policies.base.may_evict) and `reserve` is asked again.

`st` is the namedtuple of arrays `init(ctx)` built (it lives in S.mem). The hook may read
S.t_chunks (chunks each tenant holds), S.t_live (1 while a tenant has events left) and
S.pool[0].n_free (free chunks). A tenant's alone run always uses `shared`.
"""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from ...errors import ConfigError
from ...policies.base import lookup, register

# the state of the quota components: chunks guaranteed to each tenant
QuotaState = namedtuple("QuotaState", "quota")


@dataclass(frozen=True)
class MemoryContext:
    """What `init` may use: the mix and the GPU's capacity in chunks."""

    n_tenants: int
    capacity_chunks: int
    params: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryComponent:
    HOOKS: ClassVar[tuple[str, ...]] = ("reserve",)  # compiled into the engine
    name: str
    reserve: Any
    init: Callable[[MemoryContext], tuple]
    doc: str = ""
    source: str = ""


MEMORY: dict[str, MemoryComponent] = {}


def register_memory(comp: MemoryComponent, *, replace: bool = False) -> MemoryComponent:
    """Make a memory component available by name to simulate_multi() and the CLI."""
    return register(comp, MEMORY, "memory component", replace=replace)


def get_memory(spec: Any) -> MemoryComponent:
    """A registered name, a 'module:object' path, or a MemoryComponent."""
    return lookup(spec, MEMORY, MemoryComponent, "memory component")


def equal_quotas(ctx: MemoryContext) -> QuotaState:
    """Each tenant's equal share of the capacity (the first tenants take one more chunk when
    it does not divide evenly); needs a chunk per tenant."""
    n, cap = ctx.n_tenants, ctx.capacity_chunks
    if cap < n:
        raise ConfigError(f"{n} tenants need at least {n} chunks of capacity to own a share, "
                          f"the GPU has {cap}")
    edges = np.array([i * cap // n for i in range(n + 1)], np.int64)
    return QuotaState(np.ascontiguousarray(np.diff(edges)[::-1]))
