"""`compare`: predictors against the driver's prefetching and the oracle, over traces and
oversubscription factors, as one table (the notebook examples/prefetch_plans.ipynb and
benchmarks/plans.py print it)."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from ..simulate import _as_trace, simulate
from .build import build
from ..trace.plan import TO_CODE


def compare(traces: Mapping[str, Any], predictors: Mapping[str, Callable[[], Any]], *,
            oracle: Callable[[], Any] | None = None, oversub=(1.25, 1.5, 2.0, 3.0),
            prefetch: str = "density", progress: bool = False,
            **settings: Any) -> pd.DataFrame:
    """One row per trace, factor and run: `none` and `density` (the driver's prefetch
    policies, no plan), each of `predictors` (a name -> factory making a fresh predictor),
    its plan replayed over the `prefetch` policy, and `oracle` (a factory of a predictor
    that sees the future: built with allow_future=True, the only one that is).

    Columns: trace, oversub, run, faults, htod_bytes, dtoh_bytes (evictions and pushes to
    the host), moved_bytes (both ways), evicted_chunks, sim_time_ns, plan_pages (pages the
    plan moves to the GPU), precision (the share of them the kernel they precede touches,
    `precision`), build_s, and `oracle_share` / `oracle_share_faults`: the part
    of the oracle's gain over `density` in time / faults the run gets (1: all of it,
    0: none, < 0: worse than density; NaN where the oracle gains nothing)."""
    rows = []
    runs = [(n, f, False) for n, f in predictors.items()]
    if oracle is not None:
        runs.append(("oracle", oracle, True))
    for tname, tr in traces.items():
        tr = _as_trace(tr)
        for f in oversub:
            for pf in ("none", "density"):
                r = simulate(tr, oversub=f, prefetch=pf, **settings)
                rows.append(_row(tname, f, pf, r, None, 0.0))
            for name, factory, future in runs:
                plan = build(tr, factory(), allow_future=future, oversub=f, prefetch=prefetch,
                             progress=progress, **settings)
                rows.append(_row(tname, f, name, plan.result, plan, plan.build_s,
                                 precision(tr, plan)))
    df = pd.DataFrame(rows)
    return add_oracle_share(df)


def precision(trace, plan) -> float:
    """The share of a plan's pages to the GPU that the kernel they precede touches (NaN
    for a plan with none): how often the predictor was right, whatever it cost."""
    from ..trace.plan_apply import layout
    from .history import _Source
    src = _Source(trace, layout(trace), 1)
    rank = layout(trace).ranks(plan.kernel_id, plan.source)
    gpu = np.flatnonzero(plan.to == TO_CODE["gpu"])
    hit = total = 0
    for k in np.unique(rank[gpu]):
        e = gpu[rank[gpu] == k]
        pages = np.concatenate([np.arange(p, p + n) for p, n in
                                zip(plan.page[e].tolist(), plan.n_pages[e].tolist())])
        hit += int(np.isin(pages, src.pages(int(k))).sum())
        total += pages.size
    return hit / total if total else float("nan")


def _row(trace: str, f: float, run: str, r, plan, build_s: float,
         prec: float = float("nan")) -> dict[str, Any]:
    s = r.summary
    dtoh = s["dtoh_bytes_evict"] + s["dtoh_bytes_api_prefetch"]
    return {"trace": trace, "oversub": float(f), "run": run, "faults": s["faults"],
            "htod_bytes": s["htod_bytes"], "dtoh_bytes": dtoh,
            "moved_bytes": s["htod_bytes"] + dtoh, "evicted_chunks": s["evicted_chunks"],
            "sim_time_ns": s["sim_time_ns"],
            "plan_pages": plan.pages("gpu") if plan is not None else 0,
            "precision": prec, "build_s": build_s}


def add_oracle_share(df: pd.DataFrame) -> pd.DataFrame:
    """Add oracle_share (time) and oracle_share_faults (see `compare`)."""
    df = df.copy()
    key = ["trace", "oversub"]
    idx = pd.MultiIndex.from_frame(df[key])
    for col, out in (("sim_time_ns", "oracle_share"), ("faults", "oracle_share_faults")):
        d = df[df["run"] == "density"].set_index(key)[col].reindex(idx).to_numpy(float)
        o = df[df["run"] == "oracle"].set_index(key)[col].reindex(idx).to_numpy(float)
        gain = d - o
        ok = gain > 0
        df[out] = np.where(ok, (d - df[col].to_numpy(float)) / np.where(ok, gain, 1.0),
                           np.nan)
    return df
