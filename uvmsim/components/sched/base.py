"""Scheduler components: when may a tenant's next kernel start?

The clocked front end (replay_clocked) picks the tenant whose clock is earliest; before that
tenant starts a kernel it asks the component's hook:

    admit(st, S, T, ten, k, live) -> bool
        May tenant `ten` start kernel k now? `live[j]` is 1 while tenant j has events left.
        False: the kernel waits. The tenant re-asks when another tenant's event ends, its
        clock moved to that end (the wait is counted in its `sched_wait_ns`). When every
        tenant with events left is waiting, the earliest starts anyway, so a mix always
        finishes.

`init(ctx)` runs in Python once per replay and returns the hook's state (a tuple of NumPy
arrays). The SimPy reference model runs `admit_py(st, S, T, ten, k, live)`, a pure-Python
mirror of the hook, in the same front end.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ...policies.base import lookup, register


@dataclass(frozen=True)
class SchedContext:
    """What `init` may use: the mix, the GPU's capacity and the merged trace arrays."""

    n_tenants: int
    capacity_chunks: int
    trace: Any                  # uvmsim.trace.TraceArrays of the merged tenants
    params: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TenantScheduler:
    name: str
    admit: Any
    init: Callable[[SchedContext], tuple]
    admit_py: Callable[..., bool]
    doc: str = ""
    source: str = ""


SCHEDULERS: dict[str, TenantScheduler] = {}


def register_scheduler(comp: TenantScheduler, *, replace: bool = False) -> TenantScheduler:
    """Make a scheduler component available by name to simulate_multi() and the CLI."""
    return register(comp, SCHEDULERS, "scheduler", replace=replace)


def get_scheduler(spec: Any) -> TenantScheduler:
    """A registered name, a 'module:object' path, or a TenantScheduler."""
    return lookup(spec, SCHEDULERS, TenantScheduler, "scheduler")


def kernel_working_sets(T) -> np.ndarray:
    """Distinct 2 MiB blocks of non-host allocations each kernel's rows touch."""
    n_k = T.k_row_start.size - 1
    blk = T.page_block[T.row_page.astype(np.int64)].astype(np.int64)
    k_of_row = np.repeat(np.arange(n_k, dtype=np.int64), np.diff(T.k_row_start))
    dev = ~T.a_host[T.b_alloc[blk]].astype(bool)
    pairs = np.unique(k_of_row[dev] * (int(T.b_alloc.size) + 1) + blk[dev])
    return np.bincount(pairs // (int(T.b_alloc.size) + 1), minlength=n_k).astype(np.int64)
