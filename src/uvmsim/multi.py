"""Multi-tenant replay: several traces share one GPU's memory, driver/link and walkers.

Each trace is a tenant with its own clock. The tenant whose clock is earliest (ties: the
lower tenant index) runs its next event whole, so tenants interleave in simulated time at
event granularity; they share the chunk pool and the eviction order, the driver and its copy
engine (a batch or copy waits while another tenant's is serviced), and, with translation on,
the TLB (tags carry the tenant) and the page-table walkers. Compute is not shared: kernels
run at their traced durations. Each tenant's slowdown is its finish time when sharing over
its finish time alone on the same GPU (same capacity, hardware, translation; the default
components). How walkers are shared, when kernels may start and whose chunks a tenant's
new chunk may cost are components (uvmsim.components: `walkers=`, `scheduler=`,
`memory=`).

    mr = simulate_multi([trace_a, trace_b], capacity_chunks=64, translation=True,
                        walkers="dws", scheduler="mfit", memory="fair")
    mr.table          # one row per tenant: finish times, slowdown, latency, counts
    mr.system         # STP, ANTT and fairness over the tenants
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .errors import ConfigError
from .replay import as_trace, prepare
from .results import Result
from .scenario import Scenario, as_scenario
from .trace import Trace

__all__ = ["MultiResult", "simulate_multi", "system_metrics", "tenant_table", "tlb_lookups"]


@dataclass
class MultiResult:
    """What a multi-tenant replay produced.

    `tenants[i]`: tenant i's Result while sharing; `alone[i]`: its Result alone on the same
    GPU; `finish_ns`/`alone_ns`: its clock at its last event; `slowdown` their ratio;
    `table`: one row per tenant (see `tenant_table`, plus `sched_wait_ns`: time its kernels
    waited for the scheduler component); `system`: the mix's STP, ANTT and fairness (see
    `system_metrics`).
    """

    tenants: list[Result]
    alone: list[Result]
    finish_ns: list[float]
    alone_ns: list[float]
    slowdown: list[float]
    table: pd.DataFrame
    config: dict[str, Any] = field(default_factory=dict)
    system: dict[str, float] = field(default_factory=dict)


def tlb_lookups(trace: Trace, slices: bool) -> int:
    """TLB lookups a replay of `trace` makes: one per access row of a non-host page in each
    pass of its kernel (each time slice with the slices option, docs/semantics.md)."""
    T = trace.arrays
    rows = T.row_page.astype(np.int64)
    dev = ~T.a_host[T.b_alloc[T.page_block[rows]]].astype(bool)
    if not (slices and T.row_slices.size):
        return int(dev.sum())
    # a row is looked up once in each pass s < n_slices of its kernel whose bit it has
    k_of_row = np.repeat(np.arange(T.k_nslices.size), np.diff(T.k_row_start))
    width = T.k_nslices[k_of_row].astype(np.uint64)
    mask = np.where(width >= 64, ~np.uint64(0),
                    (np.uint64(1) << np.minimum(width, 63)) - np.uint64(1))
    bits = T.row_slices & mask
    n = np.zeros(bits.size, np.int64)
    for b in range(64):
        n += ((bits >> np.uint64(b)) & np.uint64(1)).astype(np.int64)
    return int(n[dev].sum())


def tenant_table(traces: Sequence[Trace], shared: Sequence[Result], finish: Sequence[float],
                 alone_ns: Sequence[float], *, translated: bool = False,
                 slices: bool = False) -> pd.DataFrame:
    """One row per tenant of a shared replay.

    `slowdown`: finish time shared over alone. `p99_kernel_ns`: 99th percentile (linear
    interpolation, numpy's default) of its kernels' latencies while sharing (compute plus
    stalls: `Result.kernels.sim_ns`). `faults_per_s`: its faults over its finish time.
    `tlb_lookups`/`tlb_miss_ratio`: translated accesses and the share that missed (NaN
    when translation is off: nothing is looked up). `walk_queue_ns_per_walk`: its walks'
    mean wait for a walker (NaN without walks). Then its counts as in `Result.to_row`.
    """
    slow = [f / a if a > 0 else float("nan") for f, a in zip(finish, alone_ns)]
    rows = [r.to_row() for r in shared]
    lat = [float(np.percentile(r.kernels["sim_ns"].to_numpy(), 99)) if len(r.kernels)
           else float("nan") for r in shared]
    look = [tlb_lookups(t, slices) if translated else 0 for t in traces]
    nan = float("nan")
    return pd.DataFrame({
        "tenant": range(len(shared)), "finish_ns": list(finish), "alone_ns": list(alone_ns),
        "slowdown": slow, "p99_kernel_ns": lat,
        "faults_per_s": [w["faults"] / (f * 1e-9) if f > 0 else nan
                         for w, f in zip(rows, finish)],
        "tlb_lookups": look,
        "tlb_miss_ratio": [w["tlb_misses"] / n if n else nan for w, n in zip(rows, look)],
        "walk_queue_ns_per_walk": [w["walk_queue_ns"] / w["page_walks"] if w["page_walks"]
                                   else nan for w in rows],
        **{k: [w[k] for w in rows] for k in (
            "faults", "htod_bytes", "evicted_chunks", "tlb_misses", "page_walks",
            "walk_queue_ns", "translation_ns", "driver_wait_ns")}})


def system_metrics(slowdown: Sequence[float]) -> dict[str, float]:
    """System throughput (STP: the sum of 1/slowdown, the number of tenants' worth of
    progress), average normalised turnaround time (ANTT: the mean slowdown) and fairness
    (the least slowdown over the greatest, 1 when every tenant is slowed alike)."""
    s = np.asarray(slowdown, float)
    if not s.size or not np.all(s > 0):
        nan = float("nan")
        return {"stp": nan, "antt": nan, "fairness": nan}
    return {"stp": float(np.sum(1.0 / s)), "antt": float(np.mean(s)),
            "fairness": float(s.min() / s.max())}


def simulate_multi(traces: Sequence[Trace | str | os.PathLike],
                   scenario: Scenario | None = None, *, engine: str = "fast",
                   **settings: Any) -> MultiResult:
    """Replay `traces` as tenants of one GPU under `scenario`, and each alone; per-tenant
    slowdown.

    `scenario` and keyword `settings` as in `uvmsim.simulate`, with `oversub` applied to the
    sum of the tenants' peak blocks; small_blocks is not modelled with tenants.
    `engine="reference"` computes the same with the SimPy reference model.

    The scenario's tenant components (uvmsim.components; names, 'module:object' paths or
    objects): `walkers` picks the page-table walker of each TLB miss (and may slice the TLB
    among tenants): "shared" (default), "partitioned" or "dws"; it matters only with
    translation on. `scheduler` decides when a tenant's kernel may start (and may reclaim
    chunks or hint remote mapping as it does): "interleave" (default), "mfit", "amfit" or
    "madvise". `memory` decides whose chunks a tenant's new chunk may cost: "shared"
    (default), "partitioned" or "fair". Each tenant's alone run uses the whole GPU (the
    same capacity in chunks) with the default components.
    """
    ts = [as_trace(t) for t in traces]
    if not ts:
        raise ConfigError("simulate_multi needs at least one trace")
    if engine not in ("fast", "reference"):
        raise ConfigError(f"engine must be 'fast' or 'reference', got {engine!r}")
    sc = as_scenario(scenario, settings)
    if sc.resolved_model().small_blocks:
        raise ConfigError("small_blocks is not yet modelled with several tenants")
    shared, finish, waited, run = _run(ts, sc, engine)
    cap = run.capacity
    alone_sc = sc.replace(capacity_chunks=cap, walkers="shared", scheduler="interleave",
                          memory="shared")
    alone, alone_ns = [], []
    for t in ts:
        r, c, _, _ = _run([t], alone_sc, engine)
        alone.append(r[0])
        alone_ns.append(c[0])
    tr, mdl = run.translation, run.model
    table = tenant_table(ts, shared, finish, alone_ns, translated=tr is not None,
                         slices=bool(mdl.slices))
    table["sched_wait_ns"] = waited
    slow = [float(x) for x in table["slowdown"]]
    wk, sch, mem = run.components
    config = {"prefetch": run.pf.name, "evict": run.ev.name, "hardware": mdl.hardware.name,
              "capacity_chunks": cap, "peak_blocks_sum": sum(t.peak_blocks for t in ts),
              "fault_batch_size": mdl.fault_batch_size,
              "translation": tr.to_dict() if tr is not None else None, "model": mdl.name,
              "engine": engine, "walkers": wk.name, "scheduler": sch.name, "memory": mem.name,
              "scenario": sc.to_dict()}
    return MultiResult(shared, alone, finish, alone_ns, slow, table, config,
                       system_metrics(slow))


def _run(traces: list[Trace], sc: Scenario, engine: str):
    """One replay of `traces` as tenants: their Results, clocks at their last event, time
    their kernels waited for the scheduler, and the prepared replay."""
    run = prepare(traces, sc)
    if engine == "fast":
        clock, waited = run.run_engine(clocked=True)
    else:
        from .reference import run_prepared
        clock, waited = run_prepared(run)
    results = run.tenant_results({"model": run.model.name, "engine": engine})
    return results, [float(c) for c in clock], [float(w) for w in waited], run
