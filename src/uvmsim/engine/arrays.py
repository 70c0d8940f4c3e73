"""The trace arrays a replay runs on, checked once before compiled code indexes with them.

The loader numbers only the 2 MiB blocks a trace touches (src/uvmsim/trace/io.py,
`_dense_maps`), so engine state sized by the trace's pages and blocks grows with the memory
a program uses, not with what it reserves. The arrays are checked here anyway: `Trace` is
public and a bad index in compiled code is a segfault, not an error.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..trace.model import TraceArrays


def _check(T: TraceArrays, n_rows: int) -> None:
    """Every index the compiled replay takes from T is in range. `n_rows`: the trace's
    access rows (a streamed trace's row arrays are empty until the replay reads them)."""
    n_pages = T.page_block.size
    n_blocks = T.b_alloc.size
    for name in ("row_page", "seg_first", "seg_last"):
        x = getattr(T, name)
        if x.size and (int(x.min()) < 0 or int(x.max()) >= n_pages):
            raise ConfigError(f"trace arrays: {name} holds a page outside 0..{n_pages - 1}")
    if T.page_pos.size != n_pages:
        raise ConfigError("trace arrays: page_pos and page_block differ in length")
    if n_pages and (int(T.page_block.min()) < 0 or int(T.page_block.max()) >= n_blocks):
        raise ConfigError(f"trace arrays: page_block holds a block outside 0..{n_blocks - 1}")
    for name in ("b_lo", "b_hi", "b_page0", "b_first_vpage"):
        if getattr(T, name).size != n_blocks:
            raise ConfigError(f"trace arrays: {name} has {getattr(T, name).size} entries for "
                              f"{n_blocks} blocks")
    if n_blocks:
        lo = T.b_lo.astype(np.int64)
        hi = T.b_hi.astype(np.int64)
        if int(lo.min()) < 0 or int(hi.max()) > 511 or bool((hi < lo).any()):
            raise ConfigError("trace arrays: block windows must satisfy 0 <= b_lo <= b_hi <= 511")
        p0 = T.b_page0.astype(np.int64)
        if int(p0.min()) < 0 or int((p0 + hi - lo).max()) >= n_pages:
            raise ConfigError("trace arrays: a block's pages fall outside the page arrays")
    # the small index arrays (per allocation, block, event, segment, kernel): each index the
    # compiled replay takes from them in range, each span inside what it spans
    n_alloc, n_ev, n_seg = T.a_host.size, T.ev_op.size, T.seg_alloc.size
    n_k = T.k_row_start.size - 1
    _within("b_alloc", T.b_alloc, 0, n_alloc)
    _within("seg_alloc", T.seg_alloc, 0, n_alloc)
    _within("ev_alloc", T.ev_alloc, -1, n_alloc)
    _within("ev_kernel", T.ev_kernel, -1, max(n_k, 0))
    _spans("a_page_off", T.a_page_off, T.a_npages, n_pages, n_alloc)
    _spans("a_block_off", T.a_block_off, T.a_nblocks, n_blocks, n_alloc)
    _starts("ev_seg_start", T.ev_seg_start, n_ev, n_seg)
    _starts("k_row_start", T.k_row_start, n_k, n_rows)
    for name in ("k_duration_ns", "k_nslices"):
        if getattr(T, name).size != max(n_k, 0):
            raise ConfigError(f"trace arrays: {name} must hold one value per kernel")
    if n_k > 0 and (int(T.k_nslices.min()) < 1 or int(T.k_nslices.max()) > 64):
        raise ConfigError("trace arrays: k_nslices must be 1..64")
    held = T.row_page.size
    if held not in (0, n_rows):
        raise ConfigError(f"trace arrays: {held} rows for a trace of {n_rows}")
    for name in ("row_flags", "row_count"):
        if getattr(T, name).size != held:
            raise ConfigError(f"trace arrays: {name} must hold one value per row")
    if T.row_slices.size not in (0, held):
        raise ConfigError("trace arrays: row_slices must be empty or one value per row")
    if n_seg and bool((T.seg_first > T.seg_last).any()):
        raise ConfigError("trace arrays: a segment ends before it starts")


def _within(name: str, x: np.ndarray, lo: int, hi: int) -> None:
    if x.size and (int(x.min()) < lo or int(x.max()) >= hi):
        raise ConfigError(f"trace arrays: {name} holds an index outside {lo}..{hi - 1}")


def _spans(name: str, off: np.ndarray, n: np.ndarray, total: int, count: int) -> None:
    """Each allocation's run off[a]..off[a]+n[a]-1 lies in 0..total-1."""
    if off.size != count or n.size != count:
        raise ConfigError(f"trace arrays: {name} must hold one value per allocation")
    if count and (int(off.min()) < 0 or int(n.min()) < 0 or
                  int((off.astype(np.int64) + n).max()) > total):
        raise ConfigError(f"trace arrays: {name} spans outside 0..{total - 1}")


def _starts(name: str, start: np.ndarray, n: int, total: int) -> None:
    """CSR starts: n + 1 values from 0, never decreasing, ending at most at total."""
    if start.size != n + 1 or (start.size and (int(start[0]) < 0 or int(start[-1]) > total
                                               or bool((np.diff(start) < 0).any()))):
        raise ConfigError(f"trace arrays: {name} must be {n + 1} rising starts in 0..{total}")


def engine_arrays(trace) -> TraceArrays:
    """The arrays a replay of `trace` (a uvmsim.trace.Trace) runs on, checked once per
    Trace object."""
    cache = trace._cache
    T = trace.arrays
    if cache.get("engine_arrays_of") is not T:
        _check(T, trace.n_accesses)
        cache["engine_arrays_of"] = T
    return T
