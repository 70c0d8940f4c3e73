"""Prefetch plans: prefetchers written in plain Python (learned, history-based, oracle),
replayed at engine speed.

A plan says, before each kernel launch, which page ranges to prefetch to the GPU and which to
push back to the host, in which order. `build(trace, predictor)` calls a predictor once per
kernel with only the history so far and returns a Plan; `simulate(trace, plan=plan)`, the
reference model, sweeps and `uvmsim replay --plan FILE` replay it; a plan changes counts
exactly as the equivalent prefetch events in the trace would (docs/semantics.md, "Prefetch
plans"; docs/policies.md, "Plans").

    from uvmsim import plans
    plan = plans.build(trace, plans.predictors.correlation(), oversub=2.0)
    plan.save("corr.parquet")
    uvmsim.simulate(trace, oversub=2.0, plan=plan)
"""
from . import predictors
from ..trace.plan_apply import tables_with_plan, with_plan
from .build import Prefetch, build
from .compare import compare
from .history import FutureAccessError, History, NoFeedbackError
from ..trace.plan import Plan, PlanError, empty, from_table, load

__all__ = ["FutureAccessError", "History", "NoFeedbackError", "Plan", "PlanError", "Prefetch",
           "build", "compare", "empty", "from_table", "load", "predictors", "tables_with_plan", "with_plan"]
