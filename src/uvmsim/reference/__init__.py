"""uvmsim.reference: the SimPy reference model of the same system as the fast engine.

`simulate` takes the arguments of `uvmsim.simulate` and returns the same `Result`; the
differential tests hold the two to identical counts and times equal to rounding.
See docs/model.md.
"""
from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
import numpy as np

from ..engine.state import engine_trace
from ..replay import Prepared, prepare
from ..results import Result
from ..scenario import Scenario, as_scenario
from ..trace import Trace
from .frontends.progress import Progress
from .model import FaultBuffer, ReferenceModel, Tenants

__all__ = ["FaultBuffer", "ProgressModel", "ReferenceModel", "Tenants", "run_prepared",
           "simulate"]


class ProgressModel(Progress, ReferenceModel):
    """The reference model with the progress front-end (the model's `block_progress` option), as
    the engine joins frontends/progress.py instead of page_sets.py."""


def simulate(trace: Trace | str | os.PathLike, scenario: Scenario | None = None, *,
             keep_state: bool = False, **settings: Any) -> Result:
    """`uvmsim.simulate(trace, scenario, **settings)`, computed by the SimPy reference model
    (slow; for checking). Every option of the model is modelled here too.
    """
    sc = as_scenario(scenario, settings)
    if not sc.default_components():
        raise ConfigError(f"{sc!r}: walkers, scheduler and memory are tenant components "
                          "of simulate_multi; one trace replays alone with their defaults")
    run = prepare(trace, sc)
    run_prepared(run)
    run.config["engine"] = "reference"
    return run.result(keep_state)


def run_prepared(run: Prepared) -> tuple[np.ndarray, np.ndarray]:
    """Replay a prepared run (uvmsim.replay.prepare) on the reference model; as
    `Prepared.run_engine`: each tenant's clock at its last event and the time its kernels
    waited for the scheduler."""
    if run.lazy is not None:
        raise ConfigError("the reference model replays traces in memory (load without "
                          "stream=True)")
    wk, sc, mem = run.components
    ten_out, clock, waited = run.clock_args()
    tenants = Tenants(wk, run.walker_ctx, sc, run.sst, mem)
    cls = ProgressModel if run.model.block_progress else ReferenceModel
    cls(run.state, engine_trace(run.arrays), run.pf, run.ev, run.pst, run.est,
        run.fault_batch_size, tenants).replay_clocked(run.mix.ten_ev, ten_out, clock, waited)
    return clock, waited
