"""uvmsim.reference: the SimPy reference model of the same system as the fast engine.

`simulate` takes the arguments of `uvmsim.simulate` and returns the same `Result`; the
differential tests hold the two to identical counts and times equal to rounding.
See docs/model.md.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..config import Hardware
from ..engine.state import engine_trace
from ..errors import ConfigError
from ..results import Result
from ..simulate import feature_vector, prepare
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
    run = prepare(trace, oversub=oversub, capacity_bytes=capacity_bytes,
                  capacity_chunks=capacity_chunks, prefetch=prefetch, evict=evict,
                  hardware=hardware, fault_batch_size=fault_batch_size,
                  prefetch_params=prefetch_params, evict_params=evict_params, seed=seed,
                  translation=translation)
    T = run.trace.arrays
    model = ReferenceModel(run.state, engine_trace(T), run.pf, run.ev, run.pst, run.est,
                           run.fault_batch_size)
    model.replay(np.array([0, T.ev_op.size], np.int64), np.array([run.trace.n_kernels]),
                 np.zeros(1))
    run.config["model"] = "reference"
    return run.result(keep_state)
