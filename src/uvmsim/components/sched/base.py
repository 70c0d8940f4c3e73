"""Scheduler components: when may a tenant's next kernel start?

The clocked front end (replay_clocked) picks the tenant whose clock is earliest; before that
tenant starts a kernel it asks the component's hook:

    admit(st, S, T, ten, k, live) -> bool
        May tenant `ten` start kernel k now? `live[j]` is 1 while tenant j has events left.
        False: the kernel waits. The tenant re-asks when another tenant's event ends, its
        clock moved to that end (the wait is counted in its `sched_wait_ns`). When every
        tenant with events left is waiting, the earliest starts anyway, so a mix always
        finishes.

    start(st, S, T, ten, k, live) -> int
        Kernel k of tenant `ten` starts now (admitted, or run anyway). Return -1, or a
        tenant j holding at least one chunk: one eviction of j's chunks (the eviction
        policy's choice among them, uvmsim.policies.base.may_evict) is done by the driver
        before the kernel runs, and `start` is asked again (proactive reclamation). It may
        also set S.t_remote[ten] (1: the tenant's GPU misses are served remotely, no
        migration; the component must say `remote=True`). Default: `no_start`.

`init(ctx)` runs in Python once per replay and returns the hooks' state (a tuple or a
namedtuple of NumPy arrays). The SimPy reference model runs `admit_py(st, S, T, ten, k,
live)`, a pure-Python mirror of `admit`, in the same front end, and calls `start` itself,
as it calls policy hooks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from ...engine.hooks import no_start
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
    HOOKS: ClassVar[tuple[str, ...]] = ("admit", "start")  # compiled into the engine
    name: str
    admit: Any
    init: Callable[[SchedContext], tuple]
    admit_py: Callable[..., bool]
    start: Any = no_start
    remote: bool = False        # start may set S.t_remote: the replay needs remote mapping
    doc: str = ""
    source: str = ""


SCHEDULERS: dict[str, TenantScheduler] = {}


def register_scheduler(comp: TenantScheduler, *, replace: bool = False) -> TenantScheduler:
    """Make a scheduler component available by name to simulate_multi() and the CLI."""
    return register(comp, SCHEDULERS, "scheduler", replace=replace)


def get_scheduler(spec: Any) -> TenantScheduler:
    """A registered name, a 'module:object' path, or a TenantScheduler."""
    return lookup(spec, SCHEDULERS, TenantScheduler, "scheduler")


def kernel_blocks(T) -> tuple[np.ndarray, np.ndarray]:
    """The distinct 2 MiB blocks of non-host allocations each kernel's rows touch: kernel
    k's are blocks[start[k]:start[k+1]], ascending."""
    n_k = T.k_row_start.size - 1
    nb = int(T.b_alloc.size) + 1
    blk = T.page_block[T.row_page.astype(np.int64)].astype(np.int64)
    k_of_row = np.repeat(np.arange(n_k, dtype=np.int64), np.diff(T.k_row_start))
    dev = ~T.a_host[T.b_alloc[blk]].astype(bool)
    pairs = np.unique(k_of_row[dev] * nb + blk[dev])
    counts = np.bincount(pairs // nb, minlength=n_k).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return start, (pairs % nb).astype(np.int64)


def kernel_working_sets(T) -> np.ndarray:
    """Distinct 2 MiB blocks of non-host allocations each kernel's rows touch."""
    return np.diff(kernel_blocks(T)[0])
