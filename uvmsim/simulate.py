"""`simulate()`: replay a trace under a policy pair, capacity and hardware."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from .config import Hardware, capacity_chunks as _capacity, get_hardware
from .engine.build import engine_for
from .engine.state import engine_trace, new_state
from .errors import ConfigError
from .policies import get_evict, get_prefetch
from .policies.base import PolicyContext, empty_state, resolve_params
from .results import Result, make_result
from .trace import Trace, load_trace


def block_service_rank(trace: Trace) -> np.ndarray:
    """Service order of VA blocks: by first page, ties by lower allocation base."""
    T = trace.arrays
    base = trace.allocations["base"].to_numpy(np.uint64)[T.b_alloc]
    order = np.lexsort((base, T.b_first_vpage))
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size, dtype=np.int64)
    return rank


def _as_trace(trace: Trace | str | os.PathLike) -> Trace:
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, (str, os.PathLike)):
        return load_trace(Path(trace))
    raise ConfigError(f"trace must be a Trace or a path, got {type(trace).__name__}")


def simulate(trace: Trace | str | os.PathLike, *, oversub: float | None = None,
             capacity_bytes: int | None = None, capacity_chunks: int | None = None,
             prefetch: Any = "density", evict: Any = "lru2m",
             hardware: str | Hardware | None = None, fault_batch_size: int = 256,
             prefetch_params: dict[str, float] | None = None,
             evict_params: dict[str, float] | None = None, seed: int = 0) -> Result:
    """Replay `trace` and return its counts (driver-model.md) and simulated time.

    Capacity is one of `oversub` (factor f: floor(peak_blocks / f) chunks, at least 1),
    `capacity_bytes` or `capacity_chunks`; none means factor 1. Policies are registered
    names, 'module:object' paths or policy objects.
    """
    trace = _as_trace(trace)
    pf = get_prefetch(prefetch)
    ev = get_evict(evict)
    hw = get_hardware(hardware)
    if int(fault_batch_size) < 1:
        raise ConfigError(f"fault_batch_size must be >= 1, got {fault_batch_size}")
    fault_batch_size = int(fault_batch_size)
    cap = _capacity(trace.peak_blocks, oversub=oversub, capacity_bytes=capacity_bytes,
                    capacity_chunks=capacity_chunks)
    T = trace.arrays
    pf_params = resolve_params(pf.params, prefetch_params, pf.name)
    ev_params = resolve_params(ev.params, evict_params, ev.name)
    n_pages = int(T.page_block.size)
    n_blocks = int(T.b_alloc.size)
    pst = (pf.init or empty_state)(PolicyContext(cap, n_blocks, n_pages, T, pf_params, seed))
    est = (ev.init or empty_state)(PolicyContext(cap, n_blocks, n_pages, T, ev_params, seed))
    S = new_state(n_pages, n_blocks, cap, trace.n_kernels, fault_batch_size,
                  block_service_rank(trace), hw.vector())
    eng = engine_for(pf, ev)
    eng.replay(pst, est, S, engine_trace(T), fault_batch_size)
    config = {"prefetch": pf.name, "evict": ev.name, "prefetch_params": pf_params,
              "evict_params": ev_params, "hardware": hw.name, "fault_batch_size":
              fault_batch_size, "oversub": oversub, "capacity_chunks": cap, "seed": seed,
              "trace": str(trace.path) if trace.path else None}
    return make_result(trace, S.counts, S.times, cap, config)
