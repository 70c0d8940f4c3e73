"""From a Scenario and trace(s) to a replay ready to run, and running it.

`prepare` is the one path every replay takes, alone (`uvmsim.simulate`), as tenants of one
GPU (`uvmsim.simulate_multi`) or in the reference model (`uvmsim.reference`): it resolves
the scenario (model, policies, components, translation, capacity), applies a prefetch plan
to the trace's events (the one place a plan enters a replay: uvmsim.trace.plan_apply), lays the traces' engine
arrays side by side (one trace: its own arrays; several: `merge_traces`), sizes the chunk
pool (`chunk_pool`) and builds the policies', components' and engine's state. `Prepared`
then runs on the compiled engine (`run_engine`) or the SimPy reference
(`uvmsim.reference.run_prepared`, which imports this module, not the other way).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from . import stream
from .components.memory import MemoryContext
from .components.sched import SchedContext
from .components.walkers import WALKERS, WalkerContext
from .config import AC_THRESHOLD_DEFAULTS, FAULT_ORDERS, Model
from .engine.arrays import engine_arrays
from .engine.build import engine_for
from .engine.state import (REMOTE_DRIVER, REMOTE_UVMSMART, UNITS, StateSizes, engine_trace,
                           new_state)
from .errors import ConfigError
from .policies.base import PolicyContext, empty_state
from .results import Result, make_result
from .scenario import Scenario, as_scenario
from .trace import Trace, TraceArrays, load_trace
from .trace.plan_apply import as_plan, with_plan
from .trace.windows import share_windows

__all__ = ["Merged", "Prepared", "as_trace", "block_service_rank", "block_vbase",
           "check_model_trace", "chunk_pool", "frontend_of", "merge_traces", "model_options",
           "prepare", "progress_inputs"]

def as_trace(trace: Trace | str | os.PathLike) -> Trace:
    """A Trace, or the trace at a path."""
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, (str, os.PathLike)):
        return load_trace(Path(trace))
    raise ConfigError(f"trace must be a Trace or a path, got {type(trace).__name__}")


def block_service_rank(trace: Trace, T=None) -> np.ndarray:
    """Service order of VA blocks (of `T`, default the engine's arrays of `trace`): by first
    page, ties by lower allocation base."""
    if T is None:
        T = engine_arrays(trace)
    base = trace.allocations["base"].to_numpy(np.uint64)[T.b_alloc]
    order = np.lexsort((base, T.b_first_vpage))
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size, dtype=np.int64)
    return rank


def block_vbase(T) -> np.ndarray:
    """Translation base of each VA block: the virtual page of its window position 0."""
    return T.b_first_vpage.astype(np.int64) - T.b_lo.astype(np.int64)


def model_options(model: Model) -> dict[str, float]:
    """The engine's settings for a model's optional mechanisms, by the name of their field
    in the parts' records (uvmsim.engine.state; docs/policies.md, docs/semantics.md)."""
    o = {"slices": model.slices, "host_access": model.host_access,
         "device_copies": model.device_copies,
         "small_blocks": model.small_blocks, "partial_blocks": model.partial_blocks,
         "advise": model.advise,
         "remote_access_ns": float(model.remote_access_ns),
         "mechanisms": bool(model.thrashing or model.remote is not None or model.advise),
         "block_progress": model.block_progress,
         "fault_latency_ns": float(model.fault_latency_ns),
         "store_ahead": int(model.store_ahead),
         "fault_order": FAULT_ORDERS.index(model.fault_order),
         "sm_store_pool": int(model.sm_store_pool)}
    if model.thrashing:
        p = model.thrashing_settings()
        o.update(thrashing=True, thrash_threshold=p["threshold"],
                 thrash_pin_threshold=p["pin_threshold"], thrash_lapse_ns=p["lapse_us"] * 1e3,
                 thrash_nap_ns=p["nap_us"] * 1e3, thrash_pin_ns=p["pin_us"] * 1e3,
                 thrash_epoch_ns=p["epoch_us"] * 1e3)
    if model.remote is not None:
        o["remote"] = {"driver": REMOTE_DRIVER, "uvmsmart": REMOTE_UVMSMART}[model.remote]
        o["ac_threshold"] = (AC_THRESHOLD_DEFAULTS[model.remote]
                             if model.access_counter_threshold is None
                             else float(model.access_counter_threshold))
        o["ac_penalty"] = float(model.access_counter_penalty)
    return o


def frontend_of(model: Model) -> str:
    """The engine front-end a model replays kernels with (uvmsim.engine.build)."""
    return "progress" if model.block_progress else "page_sets"


def progress_inputs(trace: Trace, T, model: Model, streamed: bool,
                    translation) -> dict | None:
    """The progress front-end's arrays (uvmsim.engine.blocks) when the model has it on."""
    if not model.block_progress:
        return None
    if streamed:
        raise ConfigError("block_progress: a streamed trace (stream=True) cannot replay thread "
                          "blocks yet; load it in memory")
    if translation is not None:
        raise ConfigError("block_progress cannot be combined with translation yet")
    from .engine.blocks import progress_arrays
    from .trace.streams import launch_arrays
    st = trace.streams
    if st is None:
        return None  # no kernel has a stream: every kernel replays its page set
    return progress_arrays(T, st, launch_arrays(trace), share_units=model.share_units)


def partial_slots(T) -> np.ndarray:
    """Each block's partial_blocks slot: 0, 1, ... for the blocks of managed allocations that
    cover less than their 2 MiB window, in block order; -1 for the others (docs/semantics.md,
    "Partial blocks")."""
    part = ((T.b_hi.astype(np.int64) - T.b_lo.astype(np.int64)) < 511) & ~T.a_host[T.b_alloc]
    slot = np.full(T.b_alloc.size, -1, np.int32)
    slot[part] = np.arange(int(part.sum()), dtype=np.int32)
    return slot


def chunk_pool(T, capacity: int, small_blocks: bool = False,
               partial_blocks: bool = False) -> int:
    """Chunks the engine allocates: the capacity, but no more than the blocks of non-host
    allocations, as more could never be in use at once (a capacity sized by a huge reserved
    range then costs nothing); at least 1. With small_blocks the capacity is counted in pages
    (POOL.free_pages) and blocks smaller than 2 MiB take less than a chunk, so every such block may
    hold one at once.

    The engine and the components still see the capacity itself (POOL.capacity, MemoryContext,
    SchedContext); what reads the free count (POOL.n_free) asks only whether a block without a
    chunk can get one, and with the pool holding a chunk for every block it always can."""
    managed = int(np.count_nonzero(~T.a_host[T.b_alloc])) if T.b_alloc.size else 0
    if small_blocks:
        return max(1, managed)
    if partial_blocks:
        # a partial block's units (at most UNITS) may each sit in a root chunk of its own
        n_part = int(np.count_nonzero(partial_slots(T) >= 0))
        return max(1, min(int(capacity), managed - n_part + UNITS * n_part))
    return max(1, min(int(capacity), managed))


def check_model_trace(model: Model, T) -> None:
    """Validate the v1.1 arrays a model's options index before compiled code reads them."""
    if model.slices and T.row_slices.size:
        if T.row_slices.size != T.row_page.size:
            raise ConfigError(f"trace arrays: row_slices has {T.row_slices.size} entries for "
                              f"{T.row_page.size} access rows")
        ns = T.k_nslices
        if ns.size != T.k_row_start.size - 1 or (ns.size and (ns.min() < 1 or ns.max() > 64)):
            raise ConfigError("trace arrays: k_nslices must hold 1..64 for every kernel")


# ---------------------------------------------------------------------- tenants side by side
@dataclass
class Merged:
    """Tenants' dense arrays concatenated into one TraceArrays, with offsets."""

    arrays: TraceArrays
    ten_ev: np.ndarray      # int64[n_t+1] event range of each tenant
    k_off: np.ndarray       # int64[n_t+1] kernel range of each tenant
    b_rank: np.ndarray      # service order of blocks (within each tenant: its own order)
    b_vbase: np.ndarray     # translation base of each block (block_vbase)
    b_tenant: np.ndarray    # tenant of each block


def _alone(trace: Trace, T: TraceArrays) -> Merged:
    """One trace as a mix of one: its own arrays, not copied."""
    return Merged(T, np.array([0, T.ev_op.size], np.int64),
                  np.array([0, trace.n_kernels], np.int64), block_service_rank(trace, T),
                  block_vbase(T), np.zeros(T.b_alloc.size, np.int64))


def merge_traces(traces: Sequence[Trace]) -> Merged:
    """Concatenate tenants' engine arrays (uvmsim.engine.arrays), shifting allocation, page,
    block, kernel, row and segment indices so the engine replays them as one address space
    of disjoint tenants."""
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


def contiguous(st: tuple) -> tuple:
    """A component's state (a tuple or namedtuple of arrays) with contiguous arrays, of the
    same type (compiled hooks read a namedtuple's fields by name)."""
    arrays = [np.ascontiguousarray(a) for a in st]
    return type(st)(*arrays) if hasattr(st, "_fields") else tuple(arrays)


def walker_state(wk, S, n_t: int) -> tuple[WalkerContext, tuple]:
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


# ---------------------------------------------------------------------- the prepared replay
@dataclass
class Prepared:
    """A replay ready to run: resolved scenario, arrays, and every part's state.

    Shared by the fast engine and the reference model so both start from the same place.
    `mix` holds the tenants' event and kernel ranges (one tenant when replayed alone).
    """

    traces: list[Trace]
    scenario: Scenario
    model: Model
    mix: Merged
    pf: Any
    ev: Any
    pst: tuple
    est: tuple
    components: tuple        # walkers, scheduler, memory
    walker_ctx: WalkerContext
    wst: tuple               # the walker component's state
    sst: tuple               # the scheduler component's state
    capacity: int
    translation: Any
    options: dict            # the model's engine options (model_options)
    state: Any
    config: dict[str, Any]
    lazy: Any = None         # the row arrays of a streamed trace (uvmsim.stream.LazyRows)

    @property
    def trace(self) -> Trace:
        """The trace of a replay alone (the first tenant's)."""
        return self.traces[0]

    @property
    def arrays(self) -> TraceArrays:
        """The arrays the replay runs on (uvmsim.engine.arrays; merged for tenants)."""
        return self.mix.arrays

    @property
    def fault_batch_size(self) -> int:
        return self.model.fault_batch_size

    def clock_args(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n_t = len(self.traces)
        ten_out = int(self.mix.k_off[-1]) + np.arange(n_t, dtype=np.int64)
        return ten_out, np.zeros(n_t), np.zeros(n_t)

    def run_engine(self, clocked: bool) -> tuple[np.ndarray, np.ndarray]:
        """Replay on the compiled engine; returns each tenant's clock at its last event and
        the time its kernels waited for the scheduler (zeros unless `clocked`).

        Unclocked is the fast path of one trace alone without translation; a streamed trace
        replays span by span (uvmsim.stream); tenants and translation need the clock."""
        eng = engine_for(self.pf, self.ev, *self.components,
                         frontend=frontend_of(self.model))
        T, S = self.arrays, self.state
        ten_out, clock, waited = self.clock_args()
        if self.lazy is not None:
            if clocked:
                raise ConfigError("a streamed trace replays without translation (load it "
                                  "in memory)")
            stream.replay(eng, self, self.lazy, engine_trace)
        elif not clocked:
            eng.replay(self.pst, self.est, S, engine_trace(T), self.fault_batch_size)
        else:
            eng.replay_clocked(self.pst, self.est, self.wst, self.sst, S, engine_trace(T),
                               self.fault_batch_size, self.mix.ten_ev, ten_out, clock,
                               waited)
        return clock, waited

    def result(self, keep_state: bool = False) -> Result:
        """The Result of a replay alone once the state holds its counts."""
        S = self.state
        r = make_result(self.trace, S.counts, S.times, self.capacity, self.config)
        if keep_state:
            r.state = S
        return r

    def tenant_results(self, config: dict[str, Any]) -> list[Result]:
        """Each tenant's Result once the state holds the counts: its kernels' rows and its
        row of what happened outside kernels."""
        S, k_off, n_k = self.state, self.mix.k_off, int(self.mix.k_off[-1])
        out = []
        for i, t in enumerate(self.traces):
            rows = np.r_[k_off[i]:k_off[i + 1], n_k + i]
            out.append(make_result(t, S.counts[rows], S.times[rows], self.capacity,
                                   {"tenant": i, **config}))
        return out


def prepare(traces: Trace | str | os.PathLike | Sequence[Trace | str | os.PathLike],
            scenario: Scenario | None = None, **settings: Any) -> Prepared:
    """Check `scenario` (with keyword `settings` applied, `Scenario.replace`) against the
    trace(s) and build everything a replay starts from.

    One trace replays alone; a list replays its traces as tenants of one GPU (a list of one:
    a mix of one tenant), their capacity taken over the sum of their peak blocks. A plan
    (`Scenario.plan`) is for one trace alone.
    """
    sc = as_scenario(scenario, settings)
    many = isinstance(traces, (list, tuple))
    ts = [as_trace(t) for t in (traces if many else [traces])]
    if not ts:
        raise ConfigError("no trace to replay")
    plan = as_plan(sc.plan)
    if plan is not None:
        if many:
            raise ConfigError("Scenario.plan: a prefetch plan is for one trace alone, not "
                              "tenants (its kernel ids are one trace's)")
        ts[0] = with_plan(ts[0], plan)
    m = sc.resolved_model()
    if many and m.block_progress:
        raise ConfigError("block_progress is not yet modelled with several tenants (merged "
                          "traces carry no v1.2 streams)")
    if m.shared_windows:
        # each tenant's own allocations share windows (tenants never share an address)
        ts = [share_windows(t) for t in ts]
    pf, ev, pf_params, ev_params = sc.policies()
    wk, sch, mem = sc.components()
    cap = sc.capacity(sum(t.peak_blocks for t in ts))
    lazy = None
    streamed = not many and ts[0].rows is not None
    if not many:
        T = engine_arrays(ts[0])
        if streamed:  # row arrays the replay fills as it reads the file (src/uvmsim/stream.py)
            T, lazy = stream.stream_arrays(ts[0], T)
        mix = _alone(ts[0], T)
    else:
        for k in ("small_blocks", "partial_blocks"):
            if getattr(m, k):
                raise ConfigError(f"{k} is not yet modelled with several tenants")
        mix = merge_traces(ts)
    T, n_t = mix.arrays, len(ts)
    check_model_trace(m, T)
    n_pages, n_blocks = int(T.page_block.size), int(T.b_alloc.size)
    if m.partial_blocks and not ev.shared_roots:
        raise ConfigError(f"partial_blocks: eviction policy {ev.name!r} does not handle shared "
                          "root chunks (EvictPolicy.shared_roots; docs/policies.md)")
    pool = chunk_pool(T, cap, m.small_blocks, m.partial_blocks)
    pst = _init(pf, PolicyContext(pool, n_blocks, n_pages, T, pf_params, sc.seed), streamed)
    est = _init(ev, PolicyContext(pool, n_blocks, n_pages, T, ev_params, sc.seed), streamed)
    tr = sc.translation
    opts = model_options(m)
    if sch.remote:
        opts["mechanisms"] = True   # the scheduler's hints map tenants remotely (gpu_miss)
    sizes = StateSizes(n_pages, n_blocks, pool, int(mix.k_off[-1]), m.fault_batch_size,
                       n_tenants=n_t, n_out_rows=n_t, capacity=cap)
    S = new_state(sizes, mix.b_rank, m.hardware.record(), translation=tr, b_vbase=mix.b_vbase,
                  b_tenant=mix.b_tenant, options=opts,
                  mem=contiguous(mem.init(MemoryContext(n_t, cap))),
                  progress=None if many else progress_inputs(ts[0], T, m, streamed, tr),
                  b_slot=partial_slots(T) if m.partial_blocks else None)
    wctx, wst = walker_state(wk, S, n_t)
    sst = contiguous(sch.init(SchedContext(n_t, cap, T)))
    config = {"model": m.name, "prefetch": pf.name, "evict": ev.name,
              "prefetch_params": pf_params, "evict_params": ev_params,
              "hardware": m.hardware.name, "fault_batch_size": m.fault_batch_size,
              "oversub": sc.oversub, "capacity_chunks": cap, "seed": sc.seed,
              "trace": str(ts[0].path) if n_t == 1 and ts[0].path else None,
              "translation": tr.to_dict() if tr is not None else None,
              "slices": m.slices, "host_access": m.host_access,
              "device_copies": m.device_copies,
              "small_blocks": m.small_blocks, "partial_blocks": m.partial_blocks,
              "shared_windows": m.shared_windows,
              "thrashing": m.thrashing_settings() if m.thrashing else False,
              "remote": m.remote, "advise": m.advise, "block_progress": m.block_progress,
              "engine": "fast", "scenario": sc.to_dict()}
    if m.block_progress:
        config["fault_latency_ns"] = m.fault_latency_ns
        config["store_ahead"] = m.store_ahead
        config["fault_order"] = m.fault_order
        config["sm_store_pool"] = m.sm_store_pool
        config["share_units"] = m.share_units
    if streamed:
        config["stream"] = True
    if plan is not None:
        config["plan"] = plan.summary()
    return Prepared(ts, sc, m, mix, pf, ev, pst, est, (wk, sch, mem), wctx, wst, sst, cap, tr,
                    opts, S, config, lazy)


def _init(policy, ctx: PolicyContext, streamed: bool) -> tuple:
    if policy.init is None:
        return empty_state(ctx)
    return stream.policy_init(policy, ctx, streamed)
