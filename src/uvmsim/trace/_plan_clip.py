"""Clipping plan entries to the allocations live at their kernels, compiled.

The rule is the loader's for range events (`walk_events`, src/uvmsim/trace/_resolve.py): a
range [lo, hi) in bytes gives one segment per live allocation it overlaps, in ascending
base order, each the pages of the overlap counted from the allocation's first page. The
loader keeps its live allocations in a sorted array, which costs O(live) per alloc or free;
a plan is clipped at every kernel, so here every allocation is sorted by base once and a
range scans only the allocations whose base is below its end and whose end (a running
maximum over the sorted order) is past its start, keeping the live ones. tests/test_plans.py
holds the result to the loader's arrays for the same prefetch events.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .format import OP_ALLOC, OP_FREE


class Allocs:
    """Allocations sorted by base, for `clip_*` (built once per trace)."""

    def __init__(self, base: np.ndarray, end: np.ndarray, first_page: np.ndarray) -> None:
        self.order = np.argsort(base, kind="stable").astype(np.int64)
        self.sbase = base[self.order]
        self.pmax = np.maximum.accumulate(end[self.order]) if end.size else end
        self.base, self.end, self.first_page = base, end, first_page


@njit(cache=True)
def _clip_range(lo, hi, live, order, sbase, pmax, base, end, first_page, out_a, out_f, out_l,
                n):
    """Append the segments of bytes [lo, hi) to out_* from position n; returns the new n
    (or -1 when out_* are full)."""
    i = np.searchsorted(pmax, lo, side="right")    # first with a running max end > lo
    stop = np.searchsorted(sbase, hi)              # first with base >= hi
    for j in range(i, stop):
        a = order[j]
        if live[a] and end[a] > lo:
            if n == out_a.size:
                return -1
            b = max(lo, base[a])
            t = min(hi, end[a])
            out_a[n] = a
            out_f[n] = (b >> 12) - first_page[a]
            out_l[n] = ((t - 1) >> 12) - first_page[a]
            n += 1
    return n


@njit(cache=True)
def clip_live(live, page, n_pages, order, sbase, pmax, base, end, first_page, out_a, out_f,
              out_l, start):
    """Segments of entries (first page, n_pages) where `live[a]` is 1 for live allocations:
    start[e]..start[e+1] are entry e's. Returns the segment count, or -1 if out_* are full
    (the caller grows them and calls again)."""
    n = 0
    for e in range(page.size):
        start[e] = n
        n = _clip_range(page[e] << 12, (page[e] + n_pages[e]) << 12, live, order, sbase,
                        pmax, base, end, first_page, out_a, out_f, out_l, n)
        if n < 0:
            return -1
    start[page.size] = n
    return n


@njit(cache=True)
def clip_plan(ev_op, ev_alloc, k_event, rank, page, n_pages, order, sbase, pmax, base, end,
              first_page, out_a, out_f, out_l, start):
    """Segments of entries sorted by kernel rank (`rank`), each clipped to the allocations
    live at its kernel's event: the trace's alloc and free events before it. Returns as
    clip_live."""
    live = np.zeros(base.size, np.uint8)
    e_next = 0
    n = 0
    for i in range(page.size):
        stop = k_event[rank[i]]
        for e in range(e_next, stop):
            if ev_op[e] == OP_ALLOC:
                live[ev_alloc[e]] = 1
            elif ev_op[e] == OP_FREE:
                live[ev_alloc[e]] = 0
        e_next = max(e_next, stop)
        start[i] = n
        n = _clip_range(page[i] << 12, (page[i] + n_pages[i]) << 12, live, order, sbase,
                        pmax, base, end, first_page, out_a, out_f, out_l, n)
        if n < 0:
            return -1
    start[page.size] = n
    return n


def run(fn, args: tuple, m: int, guess: int):
    """Call a clip function on `args` for m entries, with output arrays grown until they
    hold every segment: (start[m + 1], allocation, first page, last page), the pages
    counted from the allocation's first page."""
    cap = max(16, guess)
    while True:
        out = (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64))
        start = np.empty(m + 1, np.int64)
        n = fn(*args, *out, start)
        if n >= 0:
            return start, out[0][:n], out[1][:n], out[2][:n]
        cap *= 4
