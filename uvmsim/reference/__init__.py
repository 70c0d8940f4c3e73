"""uvmsim.reference: the SimPy reference model of the same system as the fast engine.

`simulate` takes the arguments of `uvmsim.simulate` and returns the same `Result`; the
differential tests hold the two to identical counts and times equal to rounding.
See docs/model.md.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..config import Hardware, capacity_chunks as _capacity, get_hardware, get_translation
from ..engine.state import engine_trace, new_state
from ..errors import ConfigError
from ..policies import get_evict, get_prefetch
from ..policies.base import PolicyContext, empty_state, resolve_params
from ..results import Result, make_result
from ..simulate import _as_trace, block_service_rank, block_vbase, feature_vector
from ..trace import Trace
from .model import FaultBuffer, ReferenceModel

__all__ = ["FaultBuffer", "ReferenceModel", "simulate"]


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
    """`uvmsim.simulate`, computed by the SimPy reference model (slow; for checking).

    The optional thrashing / remote-mapping / advise mechanisms are not modelled here yet:
    asking for one is a ConfigError rather than a silently different answer.
    """
    fv = feature_vector(thrashing=thrashing, remote=remote, advise=advise,
                        access_counter_threshold=access_counter_threshold,
                        access_counter_penalty=access_counter_penalty,
                        remote_access_ns=remote_access_ns)
    if fv[0]:
        raise ConfigError("the reference model does not model thrashing/remote/advise yet")
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
    S = new_state(n_pages, n_blocks, cap, trace.n_kernels, fault_batch_size,
                  block_service_rank(trace), hw.vector(), translation=tr,
                  b_vbase=block_vbase(T))
    model = ReferenceModel(S, engine_trace(T), pf, ev, pst, est, fault_batch_size)
    model.replay(np.array([0, T.ev_op.size], np.int64), np.array([trace.n_kernels]),
                 np.zeros(1))
    config = {"prefetch": pf.name, "evict": ev.name, "prefetch_params": pf_params,
              "evict_params": ev_params, "hardware": hw.name, "fault_batch_size":
              fault_batch_size, "oversub": oversub, "capacity_chunks": cap, "seed": seed,
              "trace": str(trace.path) if trace.path else None,
              "translation": tr.to_dict() if tr is not None else None,
              "model": "reference"}
    result = make_result(trace, S.counts, S.times, cap, config)
    if keep_state:
        result.state = S
    return result
