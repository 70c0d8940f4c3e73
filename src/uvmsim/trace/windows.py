"""Shared 2 MiB windows: the VA ranges the CUDA driver really maps for small allocations.

The CUDA driver sub-allocates small managed allocations from 2 MiB ranges it maps from the
UVM driver: 1,000 `cudaMallocManaged` of 256 KiB lie in 125 ranges of exactly 2 MiB, eight
each (docs/model.md, "What the driver does", 5). The UVM driver's VA blocks are its ranges'
2 MiB windows, so those eight allocations are one block, backed by one root chunk and
evicted as one. A trace records each allocation's real address, so the allocations that
share a window are visible; `share_windows` gives the view of a trace in which they are one
allocation, a *range* covering their windows whole (the model's `shared_windows` option,
docs/semantics.md):

* Non-host allocations whose 2 MiB windows intersect while they are live belong to one
  range; a new allocation that shares a window with a live range joins it, joining ranges
  it bridges. A range with one member keeps that allocation as it is, and so do the
  members of a range one of whose windows ever holds a host allocation (a range covering
  the window would overlap it).
* A range of several members covers its members' windows whole (its pages in the gaps
  between members included). It is allocated at its first member's `alloc` and freed at
  the `free` of its last live member; the members' own alloc and free events are dropped
  (the CUDA driver keeps the range while any sub-allocation lives, and a freed slot's pages
  keep their data for the allocation that reuses the slot). A later allocation in a window
  of a freed range starts a new range.
* Access rows and range events are by address, so they resolve to the range; every other
  table is unchanged.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .io import retable
from .model import Trace

WINDOW_SHIFT = 21  # 2 MiB windows: the driver's VA block size


def _ranges(allocs: pd.DataFrame, events: pd.DataFrame) -> list[list[int]]:
    """Groups of allocation ids (event order) sharing windows while live; only groups of two
    or more are returned."""
    base = dict(zip(allocs["alloc_id"].astype(int), allocs["base"].astype(np.int64)))
    size = dict(zip(allocs["alloc_id"].astype(int), allocs["size"].astype(np.int64)))
    host = set(allocs.loc[allocs["kind"] == "host", "alloc_id"].astype(int))
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    windows: dict[int, range] = {}
    live_in: dict[int, set[int]] = {}  # window -> live allocations with pages in it
    members: dict[int, list[int]] = {}
    for op, aid in zip(events["op"], events["alloc_id"]):
        if op not in ("alloc", "free") or pd.isna(aid) or int(aid) in host:
            continue
        a = int(aid)
        if op == "free":
            for w in windows.get(a, ()):
                live_in[w].discard(a)
            continue
        parent[a] = a
        members[a] = [a]
        lo = int(base[a]) >> WINDOW_SHIFT
        hi = (int(base[a]) + max(int(size[a]), 1) - 1) >> WINDOW_SHIFT
        windows[a] = range(lo, hi + 1)
        for w in windows[a]:
            for o in live_in.setdefault(w, set()):
                ra, ro = find(a), find(o)
                if ra != ro:
                    parent[ro] = ra
                    members[ra].extend(members.pop(ro))
            live_in[w].add(a)
    host_windows = {w for a in host for w in range(
        int(base[a]) >> WINDOW_SHIFT, ((int(base[a]) + max(int(size[a]), 1) - 1)
                                       >> WINDOW_SHIFT) + 1)}
    return [sorted(m) for r, m in members.items()
            if find(r) == r and len(m) > 1
            and not any(w in host_windows for a in m for w in windows[a])]


def share_windows(trace: Trace) -> Trace:
    """The view of `trace` in which allocations sharing 2 MiB windows are one range (the
    module's docstring has the rules). A trace with no shared window is returned as is; a
    streamed trace's view streams its rows from the same file. The view is computed once per
    Trace object."""
    cached = trace._cache.get("shared_windows")
    if cached is not None:
        return cached
    groups = _ranges(trace.allocations, trace.events)
    if not groups:
        trace._cache["shared_windows"] = trace
        return trace
    view = _merged(trace, groups)
    view._cache["shared_windows"] = view
    trace._cache["shared_windows"] = view
    return view


def _merged(trace: Trace, groups: list[list[int]]) -> Trace:
    al = trace.allocations
    ev = trace.events
    by_id = al.set_index(al["alloc_id"].astype(int))
    next_id = int(al["alloc_id"].max()) + 1
    group_of: dict[int, int] = {}
    new_rows = []
    for g in groups:
        gid = next_id
        next_id += 1
        lo = min(int(by_id.loc[a, "base"]) >> WINDOW_SHIFT for a in g)
        hi = max((int(by_id.loc[a, "base"]) + max(int(by_id.loc[a, "size"]), 1) - 1)
                 >> WINDOW_SHIFT for a in g)
        kinds = [str(by_id.loc[a, "kind"]) for a in g]
        new_rows.append({"alloc_id": gid, "base": lo << WINDOW_SHIFT,
                         "size": (hi - lo + 1) << WINDOW_SHIFT,
                         "kind": "managed" if "managed" in kinds else kinds[0],
                         "name": f"range of {len(g)} allocations"})
        for a in g:
            group_of[a] = gid
    allocs = pd.concat([al[~al["alloc_id"].astype(int).isin(group_of)],
                        pd.DataFrame(new_rows)], ignore_index=True)
    # events: a range is allocated at its first member's alloc, freed at its last member's
    # free (members are live in one interval: a group is closed once it has none)
    keep, ids = [], []
    live: dict[int, int] = {}
    opened: set[int] = set()
    for i, (op, aid) in enumerate(zip(ev["op"], ev["alloc_id"])):
        a = None if pd.isna(aid) else int(aid)
        if a is None or a not in group_of or op not in ("alloc", "free"):
            keep.append(i)
            ids.append(aid)
            continue
        gid = group_of[a]
        if op == "alloc":
            live[gid] = live.get(gid, 0) + 1
            if gid not in opened:
                opened.add(gid)
                keep.append(i)
                ids.append(gid)
        else:
            live[gid] -= 1
            if live[gid] == 0:
                keep.append(i)
                ids.append(gid)
    events = ev.iloc[keep].copy()
    events["alloc_id"] = pd.array(ids, dtype="UInt32")
    events["seq"] = np.arange(len(events), dtype=np.uint64)
    return retable(trace, allocations=allocs, events=events,
                   source={**trace.manifest.get("source", {}), "view": "shared_windows"})


__all__ = ["share_windows", "WINDOW_SHIFT"]
