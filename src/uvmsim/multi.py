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

from .config import Hardware, Model, capacity_chunks as _capacity, get_model, get_translation
from .engine.build import engine_for
from .components.memory import MEMORY, MemoryComponent, MemoryContext, get_memory
from .components.sched import SCHEDULERS, SchedContext, TenantScheduler, get_scheduler
from .components.walkers import WALKERS, WalkerContext, WalkerScheduler, get_walkers
from .engine.arrays import engine_arrays
from .engine.state import engine_trace, new_state
from .errors import ConfigError
from .policies import get_evict, get_prefetch
from .policies.base import PolicyContext, empty_state, resolve_params
from .results import Result, make_result
from .simulate import (_as_trace, block_service_rank, block_vbase, check_model_trace,
                       model_options)
from .trace import Trace, TraceArrays
from .trace.windows import share_windows

_PAGE_FIELDS = ("page_block", "row_page")  # hold dense pages or blocks: offset


@dataclass
class Merged:
    """Tenants' dense arrays concatenated into one TraceArrays, with offsets."""

    arrays: TraceArrays
    ten_ev: np.ndarray      # int64[n_t+1] event range of each tenant
    k_off: np.ndarray       # int64[n_t+1] kernel range of each tenant
    b_rank: np.ndarray      # service order of blocks (within each tenant: its own order)
    b_vbase: np.ndarray     # translation base of each block (uvmsim.simulate.block_vbase)
    b_tenant: np.ndarray    # tenant of each block


def merge_traces(traces: Sequence[Trace]) -> Merged:
    """Concatenate tenants' engine arrays (uvmsim.engine.arrays), shifting allocation, page, block, kernel, row and
    segment indices so the engine replays them as one address space of disjoint tenants."""
    parts: dict[str, list[np.ndarray]] = {f: [] for f in TraceArrays._fields}
    off = dict(a=0, p=0, b=0, k=0, r=0, s=0, e=0)
    ten_ev, k_off, ranks, vbases, tens = [0], [0], [], [], []
    for i, tr in enumerate(traces):
        if tr.rows is not None:
            raise ConfigError(f"tenant {i}: a streamed trace replays alone (load it in "
                              "memory to share a GPU)")
        T = engine_arrays(tr)
        sh = {"a_page_off": off["p"], "a_block_off": off["b"], "page_block": off["b"],
              "b_alloc": off["a"], "b_page0": off["p"], "seg_alloc": off["a"],
              "seg_first": off["p"], "seg_last": off["p"], "row_page": off["p"]}
        for f in TraceArrays._fields:
            x = getattr(T, f)
            if f in sh:
                x = (x.astype(np.int64) + sh[f]).astype(x.dtype)
            elif f in ("ev_alloc", "ev_kernel"):
                o = off["a"] if f == "ev_alloc" else off["k"]
                x = np.where(x >= 0, x + o, x).astype(x.dtype)
            elif f == "ev_seg_start":
                x = (x[:-1] + off["s"]).astype(x.dtype)
            elif f == "k_row_start":
                x = (x[:-1] + off["r"]).astype(x.dtype)
            parts[f].append(x)
        ranks.append(block_service_rank(tr, T) + off["b"])
        vbases.append(block_vbase(T))
        tens.append(np.full(T.b_alloc.size, i, np.int64))
        off["a"] += T.a_host.size
        off["p"] += T.page_block.size
        off["b"] += T.b_alloc.size
        off["k"] += T.k_row_start.size - 1
        off["r"] += T.row_page.size
        off["s"] += T.seg_alloc.size
        off["e"] += T.ev_op.size
        ten_ev.append(off["e"])
        k_off.append(off["k"])
    if any(p.size for p in parts["row_slices"]):
        # some tenants have slices: a tenant without them has every row in slice 0
        parts["row_slices"] = [p if p.size else np.ones(tr.n_accesses, np.uint64)
                               for p, tr in zip(parts["row_slices"], traces)]
    parts["ev_seg_start"].append(np.array([off["s"]], traces[0].arrays.ev_seg_start.dtype))
    parts["k_row_start"].append(np.array([off["r"]], traces[0].arrays.k_row_start.dtype))
    arrays = TraceArrays(*(np.ascontiguousarray(np.concatenate(parts[f]))
                           for f in TraceArrays._fields))
    return Merged(arrays, np.array(ten_ev, np.int64), np.array(k_off, np.int64),
                  np.concatenate(ranks).astype(np.int64), np.concatenate(vbases),
                  np.concatenate(tens))


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


def contiguous(st: tuple) -> tuple:
    """A component's state (a tuple or namedtuple of arrays) with contiguous arrays, of the
    same type (compiled hooks read a namedtuple's fields by name)."""
    arrays = [np.ascontiguousarray(a) for a in st]
    return type(st)(*arrays) if hasattr(st, "_fields") else tuple(arrays)


def walker_state(wk: WalkerScheduler, S, n_t: int) -> tuple[WalkerContext, tuple]:
    """The walker component's context and state for n_t tenants on engine state S (its TLB
    sliced among them if the component asks). Checked before compiled code indexes."""
    ctx = WalkerContext(n_t, int(S.walk_free.size), max(int(S.translation[0].sets), 1))
    if not S.translation[0].on:
        return ctx, WALKERS["shared"].init(ctx)   # nothing is translated: no walks
    wk.check(ctx)
    st = contiguous(wk.init(ctx))
    if wk.tlb_slices:
        S.translation[0].tlb_slices = n_t
    return ctx, st


def _run(traces: list[Trace], cap: int, pf, ev, mdl: Model, pf_params, ev_params,
         seed: int, tr, engine: str, wk: WalkerScheduler, sc: TenantScheduler,
         mem: MemoryComponent) -> tuple[list[Result], list[float], list[float]]:
    m = merge_traces(traces)
    T = m.arrays
    check_model_trace(mdl, T)
    batch = mdl.fault_batch_size
    n_t = len(traces)
    n_pages, n_blocks = int(T.page_block.size), int(T.b_alloc.size)
    n_k = int(m.k_off[-1])
    pst = (pf.init or empty_state)(PolicyContext(cap, n_blocks, n_pages, T, pf_params, seed))
    est = (ev.init or empty_state)(PolicyContext(cap, n_blocks, n_pages, T, ev_params, seed))
    opts = model_options(mdl)
    if sc.remote:
        opts["mechanisms"] = True   # the scheduler's hints map tenants remotely (gpu_miss)
    mst = mem.init(MemoryContext(n_t, cap))
    S = new_state(n_pages, n_blocks, cap, n_k, batch, m.b_rank, mdl.hardware.record(),
                  translation=tr, b_vbase=m.b_vbase, b_tenant=m.b_tenant, n_out_rows=n_t,
                  options=opts, n_tenants=n_t, mem=contiguous(mst))
    ten_out = n_k + np.arange(n_t, dtype=np.int64)
    clock = np.zeros(n_t)
    wctx, wst = walker_state(wk, S, n_t)
    sst = contiguous(sc.init(SchedContext(n_t, cap, T)))
    waited = np.zeros(n_t)
    if engine == "fast":
        engine_for(pf, ev, wk, sc, mem).replay_clocked(pst, est, wst, sst, S, engine_trace(T),
                                                  batch, m.ten_ev, ten_out, clock, waited)
    else:
        from .reference.model import ReferenceModel
        ReferenceModel(S, engine_trace(T), pf, ev, pst, est, batch, walkers=wk,
                       walker_ctx=wctx, scheduler=sc, sched_state=sst, memory=mem).replay_clocked(
                           m.ten_ev, ten_out, clock, waited)
    out = []
    for i, t in enumerate(traces):
        rows = np.r_[m.k_off[i]:m.k_off[i + 1], n_k + i]
        out.append(make_result(t, S.counts[rows], S.times[rows], cap,
                               {"tenant": i, "model": mdl.name, "engine": engine}))
    return out, [float(c) for c in clock], [float(w) for w in waited]


def simulate_multi(traces: Sequence[Trace | str | os.PathLike], *,
                   model: str | Model | None = None,
                   oversub: float | None = None, capacity_bytes: int | None = None,
                   capacity_chunks: int | None = None, prefetch: Any = "density",
                   evict: Any = "lru2m", hardware: str | Hardware | None = None,
                   fault_batch_size: int | None = None,
                   prefetch_params: dict[str, float] | None = None,
                   evict_params: dict[str, float] | None = None, seed: int = 0,
                   translation: Any = None, engine: str = "fast",
                   walkers: Any = "shared", scheduler: Any = "interleave",
                   memory: Any = "shared", **overrides: Any) -> MultiResult:
    """Replay `traces` as tenants of one GPU and each alone; per-tenant slowdown.

    Capacity as in `uvmsim.simulate`, with `oversub` applied to the sum of the tenants'
    peak blocks. `model` and its overrides (hardware, fault_batch_size, slices, host_access,
    thrashing, remote, advise, access_counter_threshold, access_counter_penalty,
    remote_access_ns) as in `uvmsim.simulate`; small_blocks is not modelled with tenants.
    `engine="reference"` computes the same with the SimPy reference model.

    Tenant-level components (uvmsim.components; names, 'module:object' paths or objects):
    `walkers` picks the page-table walker of each TLB miss (and may slice the TLB among
    tenants): "shared" (default), "partitioned" or "dws"; it matters only with translation
    on. `scheduler` decides when a tenant's kernel may start (and may reclaim chunks or
    hint remote mapping as it does): "interleave" (default), "mfit", "amfit" or "madvise".
    `memory` decides whose chunks a tenant's new chunk may cost: "shared" (default),
    "partitioned" or "fair". Each tenant's alone run uses the whole GPU: the defaults, one
    tenant.
    """
    ts = [_as_trace(t) for t in traces]
    if not ts:
        raise ConfigError("simulate_multi needs at least one trace")
    if engine not in ("fast", "reference"):
        raise ConfigError(f"engine must be 'fast' or 'reference', got {engine!r}")
    mdl = get_model(model, hardware=hardware, fault_batch_size=fault_batch_size, **overrides)
    if mdl.small_blocks:
        raise ConfigError("small_blocks is not yet modelled with several tenants")
    if mdl.block_progress:
        raise ConfigError("block_progress is not yet modelled with several tenants (merged "
                          "traces carry no v1.2 streams)")
    if mdl.shared_windows:
        # each tenant's own allocations share windows (tenants never share an address)
        ts = [share_windows(t) for t in ts]
    pf, ev, hw = get_prefetch(prefetch), get_evict(evict), mdl.hardware
    batch = mdl.fault_batch_size
    peak = sum(t.peak_blocks for t in ts)
    cap = _capacity(peak, oversub=oversub, capacity_bytes=capacity_bytes,
                    capacity_chunks=capacity_chunks)
    pf_params = resolve_params(pf.params, prefetch_params, pf.name)
    ev_params = resolve_params(ev.params, evict_params, ev.name)
    tr = get_translation(translation)
    wk, sc, mem = get_walkers(walkers), get_scheduler(scheduler), get_memory(memory)
    args = (cap, pf, ev, mdl, pf_params, ev_params, seed, tr, engine)
    shared, finish, waited = _run(ts, *args, wk, sc, mem)
    alone, alone_ns = [], []
    for t in ts:
        r, c, _ = _run([t], *args, WALKERS["shared"], SCHEDULERS["interleave"],
                       MEMORY["shared"])
        alone.append(r[0])
        alone_ns.append(c[0])
    table = tenant_table(ts, shared, finish, alone_ns, translated=tr is not None,
                         slices=bool(mdl.slices))
    table["sched_wait_ns"] = waited
    slow = [float(x) for x in table["slowdown"]]
    config = {"prefetch": pf.name, "evict": ev.name, "hardware": hw.name,
              "capacity_chunks": cap, "peak_blocks_sum": peak, "fault_batch_size": batch,
              "translation": tr.to_dict() if tr is not None else None, "model": mdl.name,
              "engine": engine, "walkers": wk.name, "scheduler": sc.name, "memory": mem.name}
    return MultiResult(shared, alone, finish, alone_ns, slow, table, config,
                       system_metrics(slow))
