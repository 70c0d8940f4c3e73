"""`simulate()`: replay a trace under a policy pair, capacity and hardware."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import Hardware, capacity_chunks as _capacity, get_hardware, get_translation
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


def block_vbase(T, tenant: int = 0) -> np.ndarray:
    """Translation base of each VA block: tenant << 44 | virtual page of window position 0."""
    return (np.int64(tenant) << np.int64(44)) + (T.b_first_vpage.astype(np.int64)
                                                 - T.b_lo.astype(np.int64))


THRASHING_DEFAULTS = {
    # uvm_perf_thrashing.c defaults: threshold 3, pin after 10 throttles, lapse 500 us,
    # nap 1 lapse, pin 300 lapses (150 ms), epoch 2000 lapses (1 s)
    "threshold": 3.0, "pin_threshold": 10.0, "lapse_us": 500.0, "nap_us": 500.0,
    "pin_us": 150_000.0, "epoch_us": 1_000_000.0,
}
REMOTE_MODES = {"driver": 1, "uvmsmart": 2}
# access-counter threshold per mode: the driver's uvm_perf_access_counter_threshold (256,
# per 2 MiB); UVMSmart's migrate_threshold option default (10, per 64 KiB)
AC_THRESHOLD_DEFAULTS = {"driver": 256.0, "uvmsmart": 10.0}


def feature_vector(*, thrashing: bool | dict[str, float] = False, remote: str | None = None,
                   advise: bool = False, access_counter_threshold: float | None = None,
                   access_counter_penalty: float = 2.0,
                   remote_access_ns: float = 200.0) -> np.ndarray:
    """The engine's fcfg vector for the optional mechanisms (see simulate())."""
    from .engine import state as st
    f = np.zeros(st.N_FCFG, np.float64)
    if thrashing:
        p = dict(THRASHING_DEFAULTS)
        if isinstance(thrashing, dict):
            p.update(resolve_params(THRASHING_DEFAULTS, thrashing, "thrashing"))
        f[st.F_THRASH] = 1.0
        f[st.F_THRESH] = p["threshold"]
        f[st.F_PIN_THRESH] = p["pin_threshold"]
        f[st.F_LAPSE_NS] = p["lapse_us"] * 1e3
        f[st.F_NAP_NS] = p["nap_us"] * 1e3
        f[st.F_PIN_NS] = p["pin_us"] * 1e3
        f[st.F_EPOCH_NS] = p["epoch_us"] * 1e3
    if remote is not None:
        if remote not in REMOTE_MODES:
            raise ConfigError(f"remote must be None or one of {sorted(REMOTE_MODES)}, "
                              f"got {remote!r}")
        f[st.F_REMOTE] = REMOTE_MODES[remote]
        f[st.F_AC_THRESH] = (AC_THRESHOLD_DEFAULTS[remote] if access_counter_threshold is None
                             else float(access_counter_threshold))
        f[st.F_AC_PENALTY] = float(access_counter_penalty)
    if advise:
        f[st.F_ADVISE] = 1.0
    if not float(remote_access_ns) >= 0.0:
        raise ConfigError(f"remote_access_ns must be >= 0, got {remote_access_ns}")
    f[st.F_REMOTE_NS] = float(remote_access_ns)
    f[st.F_ON] = float(bool(thrashing) or remote is not None or bool(advise))
    return f


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
             evict_params: dict[str, float] | None = None, seed: int = 0,
             keep_state: bool = False, translation: Any = None,
             thrashing: bool | dict[str, float] = False, remote: str | None = None,
             advise: bool = False, access_counter_threshold: float | None = None,
             access_counter_penalty: float = 2.0, remote_access_ns: float = 200.0) -> Result:
    """Replay `trace` and return its counts (driver-model.md) and simulated time.

    Capacity is one of `oversub` (factor f: floor(peak_blocks / f) chunks, at least 1),
    `capacity_bytes` or `capacity_chunks`; none means factor 1. Policies are registered
    names, 'module:object' paths or policy objects. `keep_state=True` attaches the final
    engine state (uvmsim.engine.state.EngineState) as `Result.state`. `translation`
    (a uvmsim.config.Translation, a dict of its fields, or True for its defaults) turns on
    the TLB and page-walk model; off (None), counts and times are exactly driver-model.md.

    Optional mechanisms (docs/policies.md), all off by default: `thrashing` (True, or a dict
    overriding THRASHING_DEFAULTS) detects thrashing pages and throttles or pins them as the
    driver does; `remote` ("driver": access counters on remotely mapped pages; "uvmsmart":
    UVMSmart's adaptive delayed migration of reads) with `access_counter_threshold` and
    `access_counter_penalty`; `advise=True` applies the trace's cudaMemAdvise events. A
    remote access costs `remote_access_ns` per access (the row's `count`).
    """
    run = prepare(trace, oversub=oversub, capacity_bytes=capacity_bytes,
                  capacity_chunks=capacity_chunks, prefetch=prefetch, evict=evict,
                  hardware=hardware, fault_batch_size=fault_batch_size,
                  prefetch_params=prefetch_params, evict_params=evict_params, seed=seed,
                  translation=translation, features=feature_vector(
                      thrashing=thrashing, remote=remote, advise=advise,
                      access_counter_threshold=access_counter_threshold,
                      access_counter_penalty=access_counter_penalty,
                      remote_access_ns=remote_access_ns))
    if run.features[0] and run.translation is not None:  # features[F_ON]
        raise ConfigError("thrashing/remote/advise are not yet modelled with translation on")
    trace, T, S = run.trace, run.trace.arrays, run.state
    eng = engine_for(run.pf, run.ev)
    if run.translation is None:
        eng.replay(run.pst, run.est, S, engine_trace(T), run.fault_batch_size)
    else:
        # the clocked replay with one tenant: rows spread over kernels, walks queue
        eng.replay_clocked(run.pst, run.est, S, engine_trace(T), run.fault_batch_size,
                           np.array([0, T.ev_op.size], np.int64),
                           np.array([trace.n_kernels], np.int64), np.zeros(1))
    run.config.update(thrashing=thrashing, remote=remote, advise=advise)
    return run.result(keep_state)


@dataclass
class Prepared:
    """A replay ready to run: resolved policies and their state, capacity, engine state.

    Shared by the fast engine and the reference model so both start from the same place.
    """

    trace: Trace
    pf: Any
    ev: Any
    pst: tuple
    est: tuple
    capacity: int
    fault_batch_size: int
    translation: Any
    features: np.ndarray
    state: Any
    config: dict[str, Any]

    def result(self, keep_state: bool = False) -> Result:
        """The Result of the replay once the state holds its counts."""
        S = self.state
        r = make_result(self.trace, S.counts, S.times, self.capacity, self.config)
        if keep_state:
            r.state = S
        return r


def prepare(trace: Trace | str | os.PathLike, *, oversub: float | None = None,
            capacity_bytes: int | None = None, capacity_chunks: int | None = None,
            prefetch: Any = "density", evict: Any = "lru2m",
            hardware: str | Hardware | None = None, fault_batch_size: int = 256,
            prefetch_params: dict[str, float] | None = None,
            evict_params: dict[str, float] | None = None, seed: int = 0,
            translation: Any = None, features: np.ndarray | None = None) -> Prepared:
    """Check the arguments of `simulate` and build everything a replay starts from."""
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
    tr = get_translation(translation)
    fv = feature_vector() if features is None else features
    S = new_state(n_pages, n_blocks, cap, trace.n_kernels, fault_batch_size,
                  block_service_rank(trace), hw.vector(), translation=tr,
                  b_vbase=block_vbase(T), features=fv)
    config = {"prefetch": pf.name, "evict": ev.name, "prefetch_params": pf_params,
              "evict_params": ev_params, "hardware": hw.name, "fault_batch_size":
              fault_batch_size, "oversub": oversub, "capacity_chunks": cap, "seed": seed,
              "trace": str(trace.path) if trace.path else None,
              "translation": tr.to_dict() if tr is not None else None}
    return Prepared(trace, pf, ev, pst, est, cap, fault_batch_size, tr, fv, S, config)
