"""`simulate()`: replay a trace under a policy pair, capacity and hardware."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import stream
from .config import (AC_THRESHOLD_DEFAULTS, THRASHING_DEFAULTS, Hardware, Model,  # noqa: F401
                     capacity_chunks as _capacity, get_model, get_translation)
from .engine.build import engine_for
from .engine.arrays import engine_arrays
from .engine.state import engine_trace, new_state
from .errors import ConfigError
from .policies import get_evict, get_prefetch
from .policies.base import PolicyContext, empty_state, resolve_params
from .results import Result, make_result
from .trace import Trace, load_trace
from .trace.windows import share_windows


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
    from .engine.state import REMOTE_DRIVER, REMOTE_UVMSMART
    o = {"slices": model.slices, "host_access": model.host_access,
         "small_blocks": model.small_blocks, "advise": model.advise,
         "remote_access_ns": float(model.remote_access_ns),
         "mechanisms": bool(model.thrashing or model.remote is not None or model.advise),
         "block_progress": model.block_progress, "fault_latency_ns": float(model.fault_latency_ns)}
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


def _as_trace(trace: Trace | str | os.PathLike) -> Trace:
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, (str, os.PathLike)):
        return load_trace(Path(trace))
    raise ConfigError(f"trace must be a Trace or a path, got {type(trace).__name__}")


def simulate(trace: Trace | str | os.PathLike, *, model: str | Model | None = None,
             oversub: float | None = None, capacity_bytes: int | None = None,
             capacity_chunks: int | None = None, prefetch: Any = "density",
             evict: Any = "lru2m", hardware: str | Hardware | None = None,
             fault_batch_size: int | None = None,
             prefetch_params: dict[str, float] | None = None,
             evict_params: dict[str, float] | None = None, seed: int = 0,
             keep_state: bool = False, translation: Any = None,
             slices: bool | None = None, host_access: bool | None = None,
             thrashing: bool | dict[str, float] | None = None, remote: str | None = None,
             advise: bool | None = None, access_counter_threshold: float | None = None,
             access_counter_penalty: float | None = None,
             remote_access_ns: float | None = None,
             small_blocks: bool | None = None, block_progress: bool | None = None,
             fault_latency_ns: float | None = None, shared_windows: bool | None = None,
             plan: Any = None) -> Result:
    """Replay `trace` and return its counts (docs/semantics.md) and simulated time.

    `model` (a name in uvmsim.config.MODELS or a uvmsim.config.Model; default "contract",
    every option off) bundles the mechanisms, `fault_batch_size` and the hardware preset;
    `model="h200"` is the H200 model (v1.1 time slices and host accesses on). Every other
    argument left at None takes the model's value; one given overrides it.

    Capacity is one of `oversub` (factor f: floor(peak_blocks / f) chunks, at least 1),
    `capacity_bytes` or `capacity_chunks`; none means factor 1. Policies are registered
    names, 'module:object' paths or policy objects. `keep_state=True` attaches the final
    engine state (uvmsim.engine.state.EngineState) as `Result.state`. `translation`
    (a uvmsim.config.Translation, a dict of its fields, or True for its defaults) turns on
    the TLB and page-walk model; off (None), counts and times are exactly docs/semantics.md's.

    Optional mechanisms (docs/semantics.md, docs/policies.md), all off in "contract":
    `slices` replays each kernel in its v1.1 time-slice passes; `host_access` applies v1.1
    host_access events (counts `dtoh_bytes_host`, `host_populated_pages` in Result.extra);
    `thrashing` (True, or a dict overriding THRASHING_DEFAULTS) detects thrashing pages and
    throttles or pins them as the driver does; `remote` ("driver": access counters on
    remotely mapped pages; "uvmsmart": UVMSmart's adaptive delayed migration of reads) with
    `access_counter_threshold` and `access_counter_penalty`; `advise=True` applies the
    trace's cudaMemAdvise events. A remote access costs `remote_access_ns` per access.
    `small_blocks` counts GPU memory in pages and charges a VA block smaller than 2 MiB (a
    small allocation, or an allocation's part of a 2 MiB window) only its own pages.
    `block_progress` replays each kernel that has a v1.2 per-thread-block stream as thread blocks
    in resident slots that stall on their own faults (docs/semantics.md, "Progress"); a
    fault waits `fault_latency_ns` in the buffer before the driver may take it.
    `shared_windows` replays the view of the trace in which allocations sharing a 2 MiB
    window are one VA range covering their windows (uvmsim.trace.windows), as the CUDA
    driver's sub-allocation of small managed allocations makes them.

    `plan` (a uvmsim.plans.Plan or the path of a plan file) adds its entries as prefetch
    events before their kernels (docs/semantics.md, "Prefetch plans").
    """
    run = prepare(trace, model=model, oversub=oversub, capacity_bytes=capacity_bytes,
                  capacity_chunks=capacity_chunks, prefetch=prefetch, evict=evict,
                  hardware=hardware, fault_batch_size=fault_batch_size,
                  prefetch_params=prefetch_params, evict_params=evict_params, seed=seed,
                  translation=translation, slices=slices, host_access=host_access,
                  thrashing=thrashing, remote=remote, advise=advise,
                  access_counter_threshold=access_counter_threshold,
                  access_counter_penalty=access_counter_penalty,
                  remote_access_ns=remote_access_ns, small_blocks=small_blocks,
                  block_progress=block_progress, fault_latency_ns=fault_latency_ns,
                  shared_windows=shared_windows, plan=plan)
    trace, T, S = run.trace, run.arrays, run.state
    eng = engine_for(run.pf, run.ev, frontend=frontend_of(run.model))
    if run.lazy is not None:
        if run.translation is not None:
            raise ConfigError("a streamed trace replays without translation (load it in "
                              "memory)")
        stream.replay(eng, run, run.lazy, engine_trace)
    elif run.translation is None:
        eng.replay(run.pst, run.est, S, engine_trace(T), run.fault_batch_size)
    else:
        # the clocked replay with one tenant: rows spread over kernels, walks queue (the
        # shared walkers; the interleave scheduler, whose state is empty)
        eng.replay_clocked(run.pst, run.est, shared_walkers(S), interleave_state(), S,
                           engine_trace(T), run.fault_batch_size,
                           np.array([0, T.ev_op.size], np.int64),
                           np.array([trace.n_kernels], np.int64), np.zeros(1), np.zeros(1))
    return run.result(keep_state)


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
    return progress_arrays(T, st, launch_arrays(trace))


def interleave_state() -> tuple:
    """State of the default `interleave` scheduler component (it needs none)."""
    from .components.sched import SCHEDULERS
    return SCHEDULERS["interleave"].init(None)


def shared_walkers(S) -> tuple:
    """State of the default `shared` walker component for one tenant on state S."""
    from .components.walkers import WALKERS, WalkerContext
    return WALKERS["shared"].init(WalkerContext(1, int(S.walk_free.size),
                                                int(max(S.translation[0].sets, 1))))


@dataclass
class Prepared:
    """A replay ready to run: resolved policies and their state, capacity, engine state.

    Shared by the fast engine and the reference model so both start from the same place.
    """

    trace: Trace
    arrays: Any           # the arrays the replay runs on (uvmsim.engine.arrays)
    pf: Any
    ev: Any
    pst: tuple
    est: tuple
    capacity: int
    fault_batch_size: int
    translation: Any
    model: Model
    options: dict
    state: Any
    config: dict[str, Any]
    lazy: Any = None      # the row arrays of a streamed trace (uvmsim.stream.LazyRows)

    def result(self, keep_state: bool = False) -> Result:
        """The Result of the replay once the state holds its counts."""
        S = self.state
        r = make_result(self.trace, S.counts, S.times, self.capacity, self.config)
        if keep_state:
            r.state = S
        return r


def chunk_pool(T, capacity: int, small_blocks: bool = False) -> int:
    """Chunks the engine allocates: the capacity, but no more than the blocks of non-host
    allocations, as more could never be in use at once (a capacity sized by a huge reserved
    range then costs nothing); at least 1. With small_blocks the capacity is counted in pages
    (S_FREEPG) and blocks smaller than 2 MiB take less than a chunk, so every such block may
    hold one at once."""
    managed = int(np.count_nonzero(~T.a_host[T.b_alloc])) if T.b_alloc.size else 0
    if small_blocks:
        return max(1, managed)
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


def prepare(trace: Trace | str | os.PathLike, *, model: str | Model | None = None,
            oversub: float | None = None, capacity_bytes: int | None = None,
            capacity_chunks: int | None = None, prefetch: Any = "density",
            evict: Any = "lru2m", prefetch_params: dict[str, float] | None = None,
            evict_params: dict[str, float] | None = None, seed: int = 0,
            translation: Any = None, plan: Any = None, **overrides: Any) -> Prepared:
    """Check the arguments of `simulate` and build everything a replay starts from.

    `overrides` are simulate's model settings (hardware, fault_batch_size, slices,
    host_access, thrashing, remote, advise, access_counter_threshold, access_counter_penalty,
    remote_access_ns, small_blocks, block_progress, fault_latency_ns, shared_windows): None
    keeps the model's value. `plan` is resolved into the trace's event arrays here, the one
    place a plan enters a replay (uvmsim.plans).
    """
    trace = _as_trace(trace)
    if plan is not None:
        from .trace.plan_apply import as_plan, with_plan
        plan = as_plan(plan)
        trace = with_plan(trace, plan)
    m = get_model(model, **overrides)
    if m.shared_windows:
        trace = share_windows(trace)
    pf = get_prefetch(prefetch)
    ev = get_evict(evict)
    hw = m.hardware
    fault_batch_size = m.fault_batch_size
    cap = _capacity(trace.peak_blocks, oversub=oversub, capacity_bytes=capacity_bytes,
                    capacity_chunks=capacity_chunks)
    # only the blocks the trace touches get engine state (uvmsim.engine.arrays)
    T = engine_arrays(trace)
    streamed = trace.rows is not None
    lazy = None
    if streamed:  # row arrays the replay fills as it reads the file (src/uvmsim/stream.py)
        T, lazy = stream.stream_arrays(trace, T)
    check_model_trace(m, T)
    pf_params = resolve_params(pf.params, prefetch_params, pf.name)
    ev_params = resolve_params(ev.params, evict_params, ev.name)
    n_pages = int(T.page_block.size)
    n_blocks = int(T.b_alloc.size)
    pool = chunk_pool(T, cap, m.small_blocks)
    pst = _init(pf, PolicyContext(pool, n_blocks, n_pages, T, pf_params, seed), streamed)
    est = _init(ev, PolicyContext(pool, n_blocks, n_pages, T, ev_params, seed), streamed)
    tr = get_translation(translation)
    opts = model_options(m)
    S = new_state(n_pages, n_blocks, pool, trace.n_kernels, fault_batch_size,
                  block_service_rank(trace, T), hw.record(), translation=tr,
                  b_vbase=block_vbase(T), options=opts, capacity=cap,
                  progress=progress_inputs(trace, T, m, streamed, tr))
    config = {"model": m.name, "prefetch": pf.name, "evict": ev.name,
              "prefetch_params": pf_params, "evict_params": ev_params, "hardware": hw.name,
              "fault_batch_size": fault_batch_size, "oversub": oversub,
              "capacity_chunks": cap, "seed": seed,
              "trace": str(trace.path) if trace.path else None,
              "translation": tr.to_dict() if tr is not None else None,
              "slices": m.slices, "host_access": m.host_access,
              "small_blocks": m.small_blocks, "shared_windows": m.shared_windows,
              "thrashing": m.thrashing_settings() if m.thrashing else False,
              "remote": m.remote, "advise": m.advise, "block_progress": m.block_progress,
              "engine": "fast"}
    if m.block_progress:
        config["fault_latency_ns"] = m.fault_latency_ns
    if streamed:
        config["stream"] = True
    if plan is not None:
        config["plan"] = plan.summary()
    return Prepared(trace, T, pf, ev, pst, est, cap, fault_batch_size, tr, m, opts, S, config,
                    lazy)


def _init(policy, ctx: PolicyContext, streamed: bool) -> tuple:
    if policy.init is None:
        return empty_state(ctx)
    return stream.policy_init(policy, ctx, streamed)
