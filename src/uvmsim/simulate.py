"""`simulate()`: replay one trace under a Scenario (policies, capacity, model)."""
from __future__ import annotations

import os
from typing import Any

from .errors import ConfigError
from .replay import block_service_rank, block_vbase, frontend_of, prepare
from .results import Result
from .scenario import Scenario, as_scenario
from .trace import Trace

# block_service_rank and block_vbase build engine state by hand (tests/test_multi_tenant.py);
# prepare and frontend_of are used by benchmarks/_measure.py and progress_throughput.py
__all__ = ["block_service_rank", "block_vbase", "frontend_of", "prepare", "simulate"]


def simulate(trace: Trace | str | os.PathLike, scenario: Scenario | None = None, *,
             keep_state: bool = False, **settings: Any) -> Result:
    """Replay `trace` under `scenario` and return its counts (docs/semantics.md) and
    simulated time.

    `scenario` (a uvmsim.Scenario; default: every field at its default: model "contract",
    factor 1, density + lru2m) defines the run. Keyword `settings` build one, or change
    the given one (`Scenario.replace`): the Scenario fields (model, oversub,
    capacity_bytes, capacity_chunks, prefetch, prefetch_params, evict, evict_params,
    translation, plan, seed) and the model settings (hardware, fault_batch_size, slices,
    host_access, thrashing, remote, advise, access_counter_threshold,
    access_counter_penalty, remote_access_ns, small_blocks, partial_blocks, shared_windows,
    block_progress, fault_latency_ns, store_ahead, sm_store_pool, fault_order,
    share_units), so

        simulate(t, oversub=1.5, prefetch="none", thrashing=True)
        simulate(t, Scenario(oversub=1.5, prefetch="none", options={"thrashing": True}))

    give the same Result. Docs: uvmsim.Scenario for each setting, docs/semantics.md and
    docs/policies.md for the mechanisms. `keep_state=True` attaches the final engine state
    (uvmsim.engine.state.EngineState) as `Result.state`. The tenant components (walkers,
    scheduler, memory) are for `simulate_multi`: one trace alone uses their defaults.

    `block_progress` replays each kernel that has a v1.2 per-thread-block stream as thread
    blocks in resident slots that stall on their own faults (docs/semantics.md, "Progress");
    a fault waits `fault_latency_ns` in the buffer before the driver may take it;
    `share_units` gives a stream row coarser than a page its block's share of the unit's
    pages (docs/semantics.md, rule 3a).
    `shared_windows` replays the view of the trace in which allocations sharing a 2 MiB
    window are one VA range covering their windows (uvmsim.trace.windows), as the CUDA
    driver's sub-allocation of small managed allocations makes them.

    `plan` (a uvmsim.plans.Plan or the path of a plan file) adds its entries as prefetch
    events before their kernels (docs/semantics.md, "Prefetch plans"); `plan=p` and
    `Scenario(plan=p)` give the same Result.
    """
    sc = as_scenario(scenario, settings)
    if not sc.default_components():
        raise ConfigError(f"{sc!r}: walkers, scheduler and memory are tenant components "
                          "of simulate_multi; one trace replays alone with their defaults")
    run = prepare(trace, sc)
    run.run_engine(clocked=run.translation is not None)
    return run.result(keep_state)
