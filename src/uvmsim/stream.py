"""Replaying a streamed trace (load_trace(stream=True)): its access rows are read from the
file again, batch by batch, and the engine replays each span of events whose kernels' rows
have all arrived, its state carrying over from span to span (`replay_span` in
src/uvmsim/engine/parts/program.py).

The engine and the policies index rows by their row number over the whole trace (a policy's
`tick`), so the rows go into arrays as long as the trace's rows, but backed by an anonymous
mapping that the kernel only backs with memory where rows are written: once a span's kernels
have run, their rows are handed back (madvise DONTNEED). Memory then holds the rows of about
one batch plus the kernel in progress, whatever the trace's length, and the counts are those
of the in-memory replay.

A policy whose `init` reads every row up front (Belady's MIN reads the future) cannot be
given them: it gets a view of the trace whose row arrays raise an error naming it.
"""
from __future__ import annotations

import mmap
import sys

import numpy as np

from .errors import ConfigError

# not exported by Python's mmap module before 3.13; the value is Linux's on every
# architecture: the mapping reserves no swap, so a length beyond RAM is not refused
_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)


class LazyRows:
    """Row arrays of n rows whose memory exists only between a write and `release`."""

    def __init__(self, n: int, has_slices: bool):
        self._maps: list[tuple[mmap.mmap, int, int]] = []
        self._released = 0
        self.page = self._array(n, np.int32)
        self.flags = self._array(n, np.uint8)
        self.count = self._array(n, np.uint32)
        self.slices = self._array(n if has_slices else 0, np.uint64)

    def _array(self, n: int, dtype) -> np.ndarray:
        item = np.dtype(dtype).itemsize
        m = mmap.mmap(-1, max(n * item, 1), flags=mmap.MAP_PRIVATE | _NORESERVE,
                      prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self._maps.append((m, item, n))
        return np.frombuffer(m, dtype=dtype, count=n)

    def release(self, row: int) -> None:
        """Give back the memory of rows before `row` (whole pages only)."""
        if row <= self._released:
            return
        for m, item, n in self._maps:
            lo = -(-min(self._released, n) * item // mmap.PAGESIZE) * mmap.PAGESIZE
            hi = min(row, n) * item // mmap.PAGESIZE * mmap.PAGESIZE
            if hi > lo:
                m.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        self._released = row


class RowsHidden:
    """A trace's arrays, but reading a row array raises: what a policy's `init` sees of a
    streamed trace."""

    def __init__(self, T):
        self._T = T

    def __getattr__(self, name):
        if name.startswith("row_"):
            raise RowsNeeded(name)
        return getattr(self._T, name)


class RowsNeeded(Exception):
    """A policy's init read the access rows of a streamed trace."""


def stream_arrays(trace, T):
    """T with row arrays for the streamed rows of `trace` (filled by `replay`)."""
    rows = LazyRows(trace.rows.n_rows, trace.rows.has_slices)
    return T._replace(row_page=rows.page, row_flags=rows.flags, row_count=rows.count,
                      row_slices=rows.slices), rows


def policy_init(policy, ctx, streamed: bool):
    """Run a policy's init; for a streamed trace, with the rows hidden (see module doc)."""
    if not streamed:
        return policy.init(ctx)
    from dataclasses import replace
    try:
        return policy.init(replace(ctx, trace=RowsHidden(ctx.trace)))
    except RowsNeeded:
        raise ConfigError(f"policy {policy.name!r} reads every access row before the replay; "
                          "a streamed trace cannot give it them (load it in memory)") from None


def replay(eng, run, lazy: LazyRows, engine_trace) -> None:
    """Replay a streamed trace: read its rows into `lazy` (the row arrays of run.arrays)
    and run every span of events whose kernels' rows are in."""
    T, S = run.arrays, run.state
    ks = T.k_row_start
    n_k = ks.size - 1
    n_ev = T.ev_op.size
    k_event = np.flatnonzero(T.ev_kernel >= 0)  # event of each kernel, in rank order
    et = engine_trace(T)
    e_next = 0

    def run_to(e_stop: int) -> None:
        nonlocal e_next
        if e_stop > e_next:
            # rows of the kernels before e_next: the engine's tick where the span starts
            tick = int(ks[np.searchsorted(k_event, e_next)])
            eng.replay_span(run.pst, run.est, S, et, run.fault_batch_size, e_next, e_stop,
                            tick)
            e_next = e_stop

    for written in run.trace.rows.fill(lazy.page, lazy.flags, lazy.count, lazy.slices):
        k_done = int(np.searchsorted(ks[1:], written, side="right"))  # kernels all in
        run_to(int(k_event[k_done]) if k_done < n_k else n_ev)
        lazy.release(int(ks[k_done]))
    run_to(n_ev)
