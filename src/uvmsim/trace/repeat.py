"""A captured program run several times back to back in one process: a what-if for
predictors that learn from repeated launches (a training loop's steps), made from a trace
that holds one run.

`repeat(path, times)` writes every event of the trace `times` times, kernels renumbered.
Allocations live at the end of the run stay allocated: their `alloc` events are kept in the
first run only, so later runs touch the same pages (the assumption: the allocator hands the
program the same addresses, as PyTorch's caching allocator does in a steady state). An
allocation freed during the run is allocated and freed again in each run, as a new row of
allocations with the same base and size. If a later run's allocation would overlap one that
is still live, the trace is refused by the loader (TraceFormatError), not repaired.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from .format import ACCESSES, ALLOCATIONS, EVENTS, KERNELS
from .io import trace_from_tables
from .model import Trace


def repeat(path: str | os.PathLike, times: int) -> Trace:
    """The trace at `path` (a .uvmtrace directory) run `times` times (module doc)."""
    if not isinstance(times, int) or isinstance(times, bool) or times < 1:
        raise ValueError(f"times must be an int >= 1, got {times!r}")
    d = Path(path)
    t = {f: pq.read_table(d / f).to_pandas() for f in (ALLOCATIONS, EVENTS, KERNELS, ACCESSES)}
    al, ev, ke, ac = t[ALLOCATIONS], t[EVENTS], t[KERNELS], t[ACCESSES]
    freed = set(ev.loc[ev["op"] == "free", "alloc_id"].astype("int64"))
    kid_span = int(ke["kernel_id"].max()) + 1 if len(ke) else 0
    aid_span = int(al["alloc_id"].max()) + 1 if len(al) else 0
    evs, kes, acs, als = [], [], [], [al]
    for i in range(times):
        e = ev.copy()
        if i:
            af = e["op"].isin(["alloc", "free"])
            again = af & e["alloc_id"].astype("Int64").isin(list(freed)).fillna(False)
            e = e[~af | again].copy()
            e["alloc_id"] = e["alloc_id"].astype("Int64") + \
                np.where(again[~af | again], i * aid_span, 0)
            a = al[al["alloc_id"].isin(list(freed))].copy()
            a["alloc_id"] = a["alloc_id"] + i * aid_span
            als.append(a)
        e["kernel_id"] = e["kernel_id"].astype("Int64") + i * kid_span
        evs.append(e)
        k = ke.copy()
        k["kernel_id"] = k["kernel_id"] + i * kid_span
        kes.append(k)
        x = ac.copy()
        x["kernel_id"] = x["kernel_id"] + i * kid_span
        acs.append(x)
    events = pd.concat(evs, ignore_index=True)
    events["seq"] = np.arange(len(events), dtype=np.uint64)
    src = dict(_source(d), repeated=times)
    return trace_from_tables(allocations=pd.concat(als, ignore_index=True), events=events,
                             kernels=pd.concat(kes, ignore_index=True),
                             accesses=pd.concat(acs, ignore_index=True), source=src)


def _source(d: Path) -> dict:
    import json
    try:
        return dict(json.loads((d / "manifest.json").read_text()).get("source", {}))
    except (OSError, ValueError):
        return {}
