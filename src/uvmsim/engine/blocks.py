"""The progress front-end's inputs: a trace's v1.2 streams as the arrays it replays.

The progress front-end (engine/parts/frontends/progress.py, docs/semantics.md "Progress")
runs each kernel that has a stream as thread blocks in resident slots. Before compiled code
indexes with them, this builds and checks, from `uvmsim.trace.streams.Streams` and the
launch columns (`launch_arrays`), the fields `uvmsim.engine.state.new_state(progress=...)`
takes:

* `fe_slots[k]`: the resident slots of kernel rank k, `min(blocks, sm_count x
  max_blocks_per_sm)`; where either is unknown (or max_blocks_per_sm is 0) the most blocks
  the instrumented run had running at once (overlapping [t_start, t_end]); 0 where the
  kernel has no stream (it replays its page set);
* `fe_sms[k]`: the SMs kernel rank k's blocks are dispatched over, `sm_count` (1 where
  unknown): a block's age rank on its SM is its index in the kernel // fe_sms[k], the key
  of fault_order `age`;
* `fe_bstart`, `fe_rstart`: the blocks of each kernel and the rows of each block (CSR);
* `fe_bdur`: a block's run (t_end - t_start, at least 1 ns, so a kernel's fault-free
  makespan is never 0); `fe_rt`: each row's time from its block's start;
* `fe_acc`, `fe_rlo`, `fe_rhi`: the pages a row stands for, as access rows of its kernel
  (indices into TraceArrays.row_*, so a fault is a read or write by the kernel's flags for
  the page): each kernel's access rows sorted by virtual page, and per stream row the span
  of those inside the row's unit (one row at unit 4 KiB; at a coarser unit the kernel's
  access pages in that window, docs/trace-format.md "For a consumer"; with `share_units`
  the row's share of them, `share_unit_rows`).

The engine imports nothing above it, so the streams come in as an argument.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..trace.format import PAGE_SHIFT


def instrumented_concurrency(t_start: np.ndarray, t_end: np.ndarray) -> int:
    """The most blocks running at once in the instrumented run: the largest number of
    [t_start, t_end] intervals that share a point (at least 1 for a kernel with blocks)."""
    if t_start.size == 0:
        return 0
    st = np.sort(t_start)
    en = np.sort(t_end)
    active = np.searchsorted(st, st, "right") - np.searchsorted(en, st, "left")
    return max(1, int(active.max()))


#: the coarsest stream unit a kernel replays its thread blocks at (log2 bytes: a 2 MiB VA
#: block). A coarser unit (the collector's table filled: docs/trace-format.md) does not say
#: which pages a block needs: each row would be every access page of the kernel in up to
#: 1 GiB, so a block could pass it only with all of them resident. Such a kernel replays
#: its page set (docs/semantics.md, "block_progress", rule 0).
MAX_PROGRESS_UNIT = 21


def kernel_slots(streams, launch) -> np.ndarray:
    """Resident thread-block slots of each kernel rank (0: its page set replays: no stream,
    or one coarser than MAX_PROGRESS_UNIT)."""
    kbs = streams.k_block_start
    n_blk = np.diff(kbs)
    per_gpu = launch.sm_count * launch.max_blocks_per_sm
    known = (launch.sm_count > 0) & (launch.max_blocks_per_sm > 0)
    slots = np.zeros(n_blk.size, np.int64)
    usable = (streams.k_unit != 0) & (streams.k_unit <= MAX_PROGRESS_UNIT)
    for k in np.flatnonzero(usable & (n_blk > 0)):
        b0, b1 = int(kbs[k]), int(kbs[k + 1])
        if known[k]:
            slots[k] = min(int(n_blk[k]), int(per_gpu[k]))
        else:
            slots[k] = instrumented_concurrency(streams.blk_t_start[b0:b1],
                                                streams.blk_t_end[b0:b1])
    return slots


def _vpage(T, dense: np.ndarray) -> np.ndarray:
    blk = T.page_block[dense]
    return (T.b_first_vpage[blk].astype(np.int64) + T.page_pos[dense].astype(np.int64)
            - T.b_lo[blk].astype(np.int64))


def share_unit_rows(own: np.ndarray, lo: np.ndarray, hi: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Rule 3 with `share_units` (docs/semantics.md, "block_progress"): the rows of one
    kernel whose unit holds the same access pages (the same span lo..hi) split them by the
    page each row names, its block's first touch in the unit (the collector keeps it:
    docs/trace-format.md, v1.2): a row spans from its own page up to the next higher page
    another row of the unit names (the lowest from the unit's first page, the highest to
    its last). So blocks that start on the same page share it, and a block keeps the pages
    up to where the next block starts. `own`: per row, the index of its page among the
    kernel's access pages sorted by address (lo <= own < hi); returns the new (lo, hi)."""
    o = np.lexsort((own, lo))
    lo_o, own_o, hi_o = lo[o], own[o], hi[o]
    n = lo_o.size
    unit_start = np.ones(n, bool)
    unit_start[1:] = lo_o[1:] != lo_o[:-1]
    seg_start = unit_start.copy()
    seg_start[1:] |= own_o[1:] != own_o[:-1]
    starts = np.flatnonzero(seg_start)
    ends = np.append(starts[1:], n)  # a segment: the rows of one unit naming one page
    seg = np.cumsum(seg_start) - 1
    nxt = ends[seg]  # the first row of the next segment
    last = (nxt == n) | unit_start[np.minimum(nxt, n - 1)]
    new_hi = np.where(last, hi_o, own_o[np.minimum(nxt, n - 1)])
    first = unit_start[starts[seg]]
    new_lo = np.where(first, lo_o, own_o)
    out_lo = np.empty_like(lo)
    out_hi = np.empty_like(hi)
    out_lo[o] = new_lo
    out_hi[o] = new_hi
    return out_lo, out_hi


def progress_arrays(T, streams, launch, share_units: bool = False) -> dict[str, np.ndarray]:
    """The fields of the progress front-end for trace arrays `T` (uvmsim.trace.TraceArrays),
    their `streams` (uvmsim.trace.streams.Streams) and `launch` (LaunchArrays); with
    `share_units` a row coarser than a page spans its block's share of its unit's pages
    (share_unit_rows)."""
    n_k = T.k_row_start.size - 1
    if streams.k_unit.size != n_k or streams.k_block_start.size != n_k + 1:
        raise ConfigError(f"progress: the streams hold {streams.k_unit.size} kernels, the "
                          f"trace {n_k}")
    slots = kernel_slots(streams, launch)
    n_rows = streams.row_page.size
    rlo = np.zeros(n_rows, np.int64)
    rhi = np.zeros(n_rows, np.int64)
    acc = []
    off = 0
    kbs, brs = streams.k_block_start, streams.blk_row_start
    for k in np.flatnonzero(slots):
        r0, r1 = int(T.k_row_start[k]), int(T.k_row_start[k + 1])
        rows = np.arange(r0, r1, dtype=np.int64)
        vp = _vpage(T, T.row_page[r0:r1].astype(np.int64))
        o = np.argsort(vp, kind="stable")
        vp = vp[o]
        acc.append(rows[o])
        s0, s1 = int(brs[kbs[k]]), int(brs[kbs[k + 1]])
        shift = int(streams.k_unit[k]) - PAGE_SHIFT
        rvp = _vpage(T, streams.row_page[s0:s1].astype(np.int64))
        w0 = (rvp >> shift) << shift
        lo = np.searchsorted(vp, w0, "left")
        hi = np.searchsorted(vp, w0 + (1 << shift), "left")
        if (hi <= lo).any():
            raise ConfigError(f"progress: a stream row of kernel rank {k} covers none of "
                              "its kernel's access pages")
        if share_units and shift > 0:
            # a row's page is one its block touched, so an access page of the unit; clipped
            # all the same, so that the spans stay inside the unit's
            own = np.clip(np.searchsorted(vp, rvp, "left"), lo, hi - 1)
            lo, hi = share_unit_rows(own, lo, hi)
        rlo[s0:s1] = off + lo
        rhi[s0:s1] = off + hi
        off += r1 - r0
    sms = np.maximum(np.asarray(launch.sm_count, np.int64), 1)
    if sms.size != n_k:
        raise ConfigError(f"progress: the launch columns hold {sms.size} kernels, the "
                          f"trace {n_k}")
    return {"fe_slots": slots, "fe_sms": sms, "fe_bstart": kbs.astype(np.int64),
            "fe_bdur": np.maximum(streams.blk_t_end - streams.blk_t_start, 1).astype(np.int64),
            "fe_rstart": brs.astype(np.int64), "fe_rt": streams.row_t.astype(np.int64),
            "fe_rlo": rlo, "fe_rhi": rhi,
            "fe_acc": np.concatenate(acc) if acc else np.zeros(1, np.int64)}
