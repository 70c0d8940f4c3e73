"""uvmsim.reference: the SimPy reference model of the same system as the fast engine.

`simulate` takes the arguments of `uvmsim.simulate` and returns the same `Result`; the
differential tests hold the two to identical counts and times equal to rounding.
See docs/model.md.
"""
from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from ..replay import prepare
from ..results import Result
from ..scenario import Scenario, as_scenario
from ..trace import Trace
from .model import FaultBuffer, ReferenceModel

__all__ = ["FaultBuffer", "ReferenceModel", "simulate"]


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
    run.run_reference()
    run.config["engine"] = "reference"
    return run.result(keep_state)
