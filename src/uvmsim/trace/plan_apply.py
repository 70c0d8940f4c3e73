"""Turning a plan into the arrays a replay runs on: each entry becomes one `prefetch` event
placed just before its kernel's event, clipped to the allocations live there by the loader's
rule for range events (`walk_events`, src/uvmsim/trace/_resolve.py), all in one compiled
pass (_plan_resolve.py). The fast engine and the reference model then replay a plan as they
replay any trace: nothing in the compiled hot loop knows about plans (docs/semantics.md,
"Prefetch plans"). It lives in the trace layer, below `simulate` (which applies a plan in
`prepare`) and below `uvmsim.plans` (which builds plans and replays them), so imports run
one way.

A plan may reach 2 MiB blocks that no access row or range event of the trace reaches, which
have no engine state; those blocks are numbered in, in the loader's order (`_dense_maps`,
src/uvmsim/trace/io.py), so the arrays are the ones the loader builds for the trace with the
plan's events written into it.
"""
from __future__ import annotations

import dataclasses
import functools
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..errors import ConfigError
from .format import OP_ALLOC, OP_FREE
from .io import _dense_maps
from .model import Trace
from . import _plan_clip as _clip
from . import _plan_resolve as _merge
from .plan import TO_CODE, Plan, PlanError

TO_GPU = TO_CODE["gpu"]


class Layout:
    """What clipping and numbering a plan's ranges needs from one trace (built once per
    Trace object, kept in its cache). What only `plans.build` uses (`allocs`, `whole`) is
    built on first use: a trace loaded to replay one plan pays only for what `with_plan`
    needs."""

    def __init__(self, trace: Trace) -> None:
        T = trace.arrays
        al = trace.allocations
        base = al["base"].to_numpy(np.uint64).astype(np.int64)
        end = base + al["size"].to_numpy(np.uint64).astype(np.int64)
        self.base, self.end = base, end
        self.first_page = base >> 12
        self.last_page = (end - 1) >> 12
        # reserved windows and block keys as the loader numbers them (trace/io.py, _build)
        self.nblocks = (self.last_page >> 9) - (self.first_page >> 9) + 1
        block_off = np.zeros(base.size, np.int64)
        np.cumsum(self.nblocks[:-1], out=block_off[1:])
        self.block_off = block_off
        self.block0 = block_off - (self.first_page >> 9)
        self._b_alloc = T.b_alloc
        # key of each dense block, ascending (the dense order)
        self.keys = (self.block0[T.b_alloc] + (T.b_first_vpage >> 9)).astype(np.int64)
        self.k_event = np.flatnonzero(T.ev_kernel >= 0).astype(np.int64)
        self.kernel_ids = trace.kernels["kernel_id"].to_numpy(np.int64)
        if self.kernel_ids.size != self.k_event.size:
            raise ConfigError(f"the trace has {self.kernel_ids.size} kernels and "
                              f"{self.k_event.size} kernel events")
        # kernel ids ascending and the rank of each (launch order is usually id order)
        if self.kernel_ids.size < 2 or bool((self.kernel_ids[1:] > self.kernel_ids[:-1]).all()):
            self._by_id = np.arange(self.kernel_ids.size, dtype=np.int64)
        else:
            self._by_id = np.argsort(self.kernel_ids, kind="stable").astype(np.int64)
        self._ids = self.kernel_ids[self._by_id]

    @functools.cached_property
    def allocs(self) -> _clip.Allocs:
        return _clip.Allocs(self.base, self.end, self.first_page)

    @functools.cached_property
    def whole(self) -> np.ndarray:
        """Allocations whose every reserved block has state: segments in them need no
        check."""
        return np.bincount(self._b_alloc, minlength=self.base.size) == self.nblocks

    def ranks(self, kernel_id: np.ndarray, source: str, order: np.ndarray | None = None):
        """Kernel rank of each kernel_id; an unknown one is an error naming its row. With
        `order`: (ranks, whether the rows are already in (rank, order) order)."""
        rank = np.empty(kernel_id.size, np.int64)
        bad, in_order = _merge.kernel_ranks(self._ids, self._by_id, kernel_id,
                                            kernel_id if order is None else order, rank)
        if bad >= 0:
            raise PlanError(f"kernel_id {int(kernel_id[bad])} is not a kernel of the trace",
                            file=source, column="kernel_id", row=int(bad))
        return rank if order is None else (rank, in_order)

    def clip_live(self, live: np.ndarray, page: np.ndarray, n_pages: np.ndarray):
        """Segments of entries at a launch where live[a] is 1 for the live allocations:
        (CSR start per entry, allocation, first and last virtual page)."""
        A = self.allocs
        start, a, f, l = _clip.run(_clip.clip_live, (live, page, n_pages, A.order, A.sbase,
                                                     A.pmax, A.base, A.end, A.first_page),
                                   page.size, 4 * page.size + 64)
        return start, a, self.first_page[a] + f, self.first_page[a] + l

    def locate(self, s_alloc: np.ndarray, vfirst: np.ndarray, vlast: np.ndarray):
        """For each segment: the dense blocks of its first and last page, and whether
        every block it reaches has engine state (where not, the blocks are meaningless)."""
        kf = self.block0[s_alloc] + (vfirst >> 9)
        kl = self.block0[s_alloc] + (vlast >> 9)
        bf = np.searchsorted(self.keys, kf)
        bl = np.searchsorted(self.keys, kl)
        if self.whole[s_alloc].all():
            return np.ones(s_alloc.size, np.bool_), bf, bl
        if self.keys.size == 0:       # no block of the trace has state: none is reached
            return np.zeros(s_alloc.size, np.bool_), bf, bl
        cap = self.keys.size - 1
        ok = (bl < self.keys.size) & (self.keys[np.minimum(bf, cap)] == kf) & \
            (self.keys[np.minimum(bl, cap)] == kl) & (bl - bf == kl - kf)
        return ok, bf, bl

    def present(self, s_alloc: np.ndarray, vfirst: np.ndarray,
                vlast: np.ndarray) -> np.ndarray:
        """For each segment: True when every block it reaches has engine state."""
        return self.locate(s_alloc, vfirst, vlast)[0]

    @staticmethod
    def dense(T, b: np.ndarray, vpage: np.ndarray) -> np.ndarray:
        """Dense pages of virtual pages in dense blocks b."""
        return (T.b_page0[b] - T.b_lo[b].astype(np.int64) + (vpage & 511)).astype(np.int64)


def layout(trace: Trace) -> Layout:
    cache = trace._cache
    if cache.get("plan_layout_of") is not trace.arrays:
        cache["plan_layout"] = Layout(trace)
        cache["plan_layout_of"] = trace.arrays
    return cache["plan_layout"]


def as_plan(plan: Any) -> Plan | None:
    """`plan=` of simulate: None, a Plan, or the path of a plan file."""
    if plan is None or isinstance(plan, Plan):
        return plan
    import os
    if isinstance(plan, (str, os.PathLike)):
        from .plan import load
        return load(plan)
    raise ConfigError(f"plan must be a uvmsim.plans.Plan or the path of a plan file, got "
                      f"{type(plan).__name__}")


def with_plan(trace: Trace, plan: Any) -> Trace:
    """`trace` with the plan's entries as prefetch events before their kernels (module doc).

    Returns a new Trace sharing the unchanged arrays (its `events` table stays the
    trace's own); the result is cached on `trace` for the last plan applied, so a sweep
    replaying one plan many times resolves it once.
    """
    plan = as_plan(plan)
    if plan is None:
        return trace
    cache = trace._cache
    hit = cache.get("with_plan")
    if hit is not None and hit[0] is plan and hit[1] is trace.arrays:
        return hit[2]
    out = _apply(trace, plan)
    cache["with_plan"] = (plan, trace.arrays, out)
    return out


def _apply(trace: Trace, plan: Plan) -> Trace:
    L = layout(trace)
    m = len(plan)
    if m == 0:
        return trace
    rank, in_order = L.ranks(plan.kernel_id, plan.source, plan.order)
    page, n_pages, to = plan.page, plan.n_pages, plan.to
    if not in_order:          # by kernel, then order, then row (lexsort is stable)
        o = np.lexsort((plan.order, rank))
        rank, page, n_pages, to = rank[o], page[o], n_pages[o], to[o]
    T = trace.arrays
    arrays = _merged(T, L, rank, page, n_pages, to)
    if arrays is None:
        # the plan reaches blocks without state: number them in, then merge again
        if trace.rows is not None:
            raise ConfigError("the plan prefetches 2 MiB blocks the streamed trace never "
                              "touches, which it has no state for; load the trace in memory")
        _, s_alloc, vfirst, vlast = clip_all(T, L, rank, page, n_pages)
        T = _number_in(trace, L, s_alloc, vfirst, vlast)
        L = Layout(dataclasses.replace(trace, arrays=T, _cache={}))
        arrays = _merged(T, L, rank, page, n_pages, to)
        if arrays is None:
            raise AssertionError("a block numbered in for the plan has no state")
    return dataclasses.replace(trace, arrays=arrays, _cache={})


def _merged(T, L: Layout, rank: np.ndarray, page: np.ndarray, n_pages: np.ndarray,
            to: np.ndarray):
    """T's event and segment arrays with the entries (sorted by rank) merged in as
    prefetch events before their kernels (`_plan_resolve.merge`); None when an entry
    reaches a block without state."""
    n_ev, m, n_seg = T.ev_op.size, page.size, T.seg_alloc.size
    # the sizes merge relies on; the values it indexes with it checks itself
    if not (T.ev_alloc.size == T.ev_kernel.size == T.ev_arg.size == n_ev and
            T.ev_seg_start.size == n_ev + 1 and T.seg_first.size == T.seg_last.size == n_seg
            and T.b_page0.size == T.b_lo.size == L.keys.size
            and L.base.size == L.end.size == L.block0.size == L.allocs.order.size
            == T.a_block_off.size == T.a_nblocks.size
            and rank.size == n_pages.size == to.size == m):
        raise ConfigError("trace arrays: the event, segment or block arrays differ in length")
    ev = (T.ev_op, T.ev_alloc, T.ev_kernel, T.ev_arg, T.ev_seg_start, L.k_event)
    cap = n_seg + 4 * m + 64    # an entry clips to a few allocations (grown if not)
    while True:
        out = (np.empty(n_ev + m, np.int8), np.empty(n_ev + m, np.int64),
               np.empty(n_ev + m, np.int64), np.empty(n_ev + m, np.int8),
               np.empty(n_ev + m + 1, np.int64), np.empty(cap, np.int64),
               np.empty(cap, np.int64), np.empty(cap, np.int64))
        code, s, e = _merge.merge(ev, (T.seg_alloc, T.seg_first, T.seg_last),
                                  (L.keys, T.b_page0, T.b_lo),
                                  (L.base, L.end, L.block0, L.allocs.order, T.a_block_off,
                                   T.a_nblocks),
                                  (rank, page, n_pages, to), out)
        if code != _merge.E_FULL:
            break
        cap *= 4
    if code == _merge.E_MISSING:
        return None
    if code == _merge.E_BAD_ALLOC:
        raise ConfigError(f"trace arrays: event {e} allocates or frees no allocation, or out "
                          "of order")
    if code == _merge.E_BAD_SEGMENTS:
        raise ConfigError(f"trace arrays: ev_seg_start at event {e} is not rising starts into "
                          "the segments")
    if code == _merge.E_BAD_BLOCKS:
        raise ConfigError("trace arrays: an allocation's blocks lie outside the block arrays")
    if code == _merge.E_UNPLACED:
        raise ConfigError("trace arrays: a kernel rank of the plan has no kernel event")
    return T._replace(ev_op=out[0], ev_alloc=out[1], ev_kernel=out[2], ev_arg=out[3],
                      ev_seg_start=out[4], seg_alloc=out[5][:s], seg_first=out[6][:s],
                      seg_last=out[7][:s])


def clip_all(T, L: Layout, rank: np.ndarray, page: np.ndarray, n_pages: np.ndarray):
    """Segments of every entry (sorted by kernel rank), clipped to the allocations live at
    its kernel's event: (CSR start per entry, allocation, first and last virtual page)."""
    af = T.ev_alloc[(T.ev_op == OP_ALLOC) | (T.ev_op == OP_FREE)]
    if af.size and (int(af.min()) < 0 or int(af.max()) >= L.base.size):
        raise ConfigError("trace arrays: an alloc or free event names no allocation")
    if rank.size and (int(rank.min()) < 0 or int(rank.max()) >= L.k_event.size):
        raise ConfigError("a kernel rank of the plan has no kernel event")
    A = L.allocs
    start, a, f, l = _clip.run(
        _clip.clip_plan, (T.ev_op, T.ev_alloc, L.k_event, rank, page, n_pages, A.order,
                          A.sbase, A.pmax, A.base, A.end, A.first_page),
        page.size, 4 * page.size + 64)
    return start, a, L.first_page[a] + f, L.first_page[a] + l


def _number_in(trace: Trace, L: Layout, s_alloc: np.ndarray, vfirst: np.ndarray,
               vlast: np.ndarray):
    """The trace's arrays with the blocks these segments reach numbered in: the loader's
    numbering of the trace's blocks and these (`_dense_maps`), and every dense page the
    arrays hold (rows, segments) moved to its new number."""
    T = trace.arrays
    rs = SimpleNamespace(slot_key=L.keys, n_slots=int(L.keys.size))
    maps = _dense_maps(rs, L.block_off, L.first_page, L.last_page, L.block0[s_alloc],
                       vfirst, vlast, int(L.base.size), "plan")
    # slot s of rs is old block s: maps.slot_page0[s] is its window position 0, renumbered
    move = maps.slot_page0 - (T.b_page0 - T.b_lo.astype(np.int64))
    row_page = T.row_page
    if row_page.size:
        row_page = (row_page + move[T.page_block[row_page]]).astype(np.int32)
    seg_first = T.seg_first + move[T.page_block[T.seg_first]] if T.seg_first.size else \
        T.seg_first
    seg_last = T.seg_last + move[T.page_block[T.seg_last]] if T.seg_last.size else T.seg_last
    return T._replace(a_npages=maps.a_npages, a_page_off=maps.a_page_off,
                      a_block_off=maps.a_block_off, a_nblocks=maps.a_nblocks,
                      page_block=maps.page_block, page_pos=maps.page_pos,
                      b_alloc=maps.b_alloc, b_lo=maps.b_lo, b_hi=maps.b_hi,
                      b_page0=maps.b_page0, b_first_vpage=maps.b_first_vpage,
                      row_page=row_page, seg_first=seg_first.astype(np.int64),
                      seg_last=seg_last.astype(np.int64))


def drop_untouched(L: Layout, keep: tuple, p_start: np.ndarray, s_alloc: np.ndarray,
                   vfirst: np.ndarray, vlast: np.ndarray) -> tuple | None:
    """Entries less their pages in blocks without state (`plans.build`'s rule): each entry
    (`keep`: parallel arrays, the first two its first page and n_pages) is cut around the
    parts of its own segments in such blocks, its pieces keeping its place; None when no
    segment reaches such a block. A page shared by two allocations goes when either
    allocation's block lacks state, so clipping the pieces again reaches only blocks with
    state."""
    ok = L.present(s_alloc, vfirst, vlast)
    if ok.all():
        return None
    entry = np.repeat(np.arange(p_start.size - 1), np.diff(p_start))
    bad: dict[int, list[tuple[int, int]]] = {}
    for j in np.flatnonzero(~ok):
        a = int(s_alloc[j])
        for w in range(int(vfirst[j]) >> 9, (int(vlast[j]) >> 9) + 1):
            key = L.block0[a] + w
            i = int(np.searchsorted(L.keys, key))
            if i == L.keys.size or L.keys[i] != key:
                bad.setdefault(int(entry[j]), []).append(
                    (max(int(vfirst[j]), w << 9), min(int(vlast[j]), (w << 9) + 511)))
    out: list[list] = [[] for _ in keep]
    for e in range(p_start.size - 1):
        lo = int(keep[0][e])
        hi = lo + int(keep[1][e]) - 1
        pieces = []
        for b0, b1 in sorted(bad.get(e, ())):
            if b1 < lo or b0 > hi:
                continue
            if b0 > lo:
                pieces.append((lo, b0 - lo))
            lo = max(lo, b1 + 1)
        if lo <= hi:
            pieces.append((lo, hi - lo + 1))
        for p, c in pieces:
            out[0].append(p)
            out[1].append(c)
            for col, arr in zip(out[2:], keep[2:]):
                col.append(arr[e])
    return tuple(np.array(col, dtype=arr.dtype) for col, arr in zip(out, keep))


def tables_with_plan(path, plan: Any) -> dict:
    """The four tables of the trace directory `path` with the plan's entries written in as
    prefetch events before their kernels (a kernel's entries in (order, row) order): the
    trace `with_plan` is equivalent to, for other tools or for comparison
    (`uvmsim.write_trace(out, **tables_with_plan(path, plan))`)."""
    import pandas as pd
    import pyarrow.parquet as pq
    from pathlib import Path

    from .format import ACCESSES, ALLOCATIONS, EVENTS, KERNELS
    plan = as_plan(plan)
    d = Path(path)
    t = {f: pq.read_table(d / f).to_pandas() for f in (ALLOCATIONS, EVENTS, KERNELS, ACCESSES)}
    ev = t[EVENTS]
    m = len(plan)
    o = np.lexsort((np.arange(m), plan.order, plan.kernel_id))
    kid = plan.kernel_id[o]
    is_k = (ev["op"] == "kernel").to_numpy()
    k_pos = pd.Index(ev.loc[is_k, "kernel_id"].astype("int64")).get_indexer(kid)
    bad = np.flatnonzero(k_pos < 0)
    if bad.size:
        raise PlanError(f"kernel_id {int(kid[bad[0]])} is not a kernel of the trace",
                        file=plan.source, column="kernel_id", row=int(o[bad[0]]))
    # place each entry just before its kernel's event: sort by (event, 0 for entries)
    at = np.flatnonzero(is_k)[k_pos]
    pf = pd.DataFrame({"op": "prefetch", "addr": plan.page[o] * 4096,
                       "size": plan.n_pages[o] * 4096,
                       "arg": np.where(plan.to[o] == TO_GPU, "gpu", "cpu")})
    key = np.concatenate([np.arange(len(ev)) * 2 + 1, at * 2])
    out = pd.concat([ev.drop(columns="seq"), pf], ignore_index=True)
    out = out.iloc[np.argsort(key, kind="stable")].reset_index(drop=True)
    out.insert(0, "seq", np.arange(len(out), dtype=np.uint64))
    t[EVENTS] = out.astype(ev.dtypes.to_dict())
    return {"allocations": t[ALLOCATIONS], "events": t[EVENTS], "kernels": t[KERNELS],
            "accesses": t[ACCESSES]}
