"""uvmsim.reference: the SimPy reference model of the same system as the fast engine.

`simulate` takes the arguments of `uvmsim.simulate` and returns the same `Result`; the
differential tests hold the two to identical counts and times equal to rounding.
See docs/model.md.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..engine.state import engine_trace
from ..errors import ConfigError
from ..results import Result
from ..simulate import prepare
from ..trace import Trace
from .model import FaultBuffer, ReferenceModel

__all__ = ["FaultBuffer", "ReferenceModel", "simulate"]


def simulate(trace: Trace | str | os.PathLike, *, keep_state: bool = False,
             **kwargs: Any) -> Result:
    """`uvmsim.simulate(trace, **kwargs)`, computed by the SimPy reference model (slow; for
    checking). Every option of the model is modelled here too.
    """
    run = prepare(trace, **kwargs)
    if run.lazy is not None:
        raise ConfigError("the reference model replays traces in memory (load without "
                          "stream=True)")
    T = run.arrays
    model = ReferenceModel(run.state, engine_trace(T), run.pf, run.ev, run.pst, run.est,
                           run.fault_batch_size)
    model.replay_clocked(np.array([0, T.ev_op.size], np.int64), np.array([run.trace.n_kernels]),
                 np.zeros(1))
    run.config["engine"] = "reference"
    return run.result(keep_state)
