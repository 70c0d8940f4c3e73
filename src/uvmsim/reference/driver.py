"""The driver in the reference model: fault batches and their service, range events,
proactive reclamation, and the path of a GPU miss through the driver's mechanisms (the
engine's engine/parts/driver.py). The driver and its copy engine are one simpy.Resource: a
batch or a copy waits while another is serviced.
"""
from __future__ import annotations

import numpy as np

from ..engine.bits import from_positions, to_positions
from ..engine.state import (ADV_ACCESSED_BY, ADV_PREF_CPU, ADV_PREF_GPU, ADV_READ_MOSTLY,
                            CAUSE_API, CAUSE_DEMAND, CAUSE_MEMCPY, CAUSE_MEMSET,
                            CAUSE_PREFETCH, C_BATCHES, C_HTOD_DEMAND, C_HTOD_PREFETCH, DUP,
                            INB, POP, REMOTE_DRIVER, REMOTE_UVMSMART, T_DRV_WAIT, T_STALL,
                            T_TRANSFER)
from ..trace.format import (ARG_GPU, FLAGS_WRITE, OP_DTOD, OP_HOST_ACCESS, OP_HTOD,
                            OP_MEMSET, OP_PREFETCH)


class FaultBuffer:
    """The GPU's replayable fault buffer: faulted pages wait here for the driver."""

    def __init__(self, S, size: int) -> None:
        self.S = S
        self.size = size
        self.n = 0

    def add(self, d: int) -> bool:
        """Record a fault on dense page d; True when the buffer holds a full batch."""
        self.S.pstate[d] |= INB
        self.S.batch_page[self.n] = d
        self.n += 1
        return self.n == self.size


class Driver:
    """Fault batches, their service, range events, reclamation and the miss path."""

    def service_clocked(self, nb: int, k: int, tick: int, t: float):
        """Hand the fault buffer to the driver; returns the stall it added to the kernel."""
        S, env = self.S, self.env
        with self.driver.request() as req:
            yield req
            start = env.now
            S.driver[0].step_ns = 0.0
            host0 = self.host_bytes_in(k)
            self.service_batch(nb, k, tick)
            cost = self.batch_cost(k, nb, host0)
            S.times[k, T_TRANSFER] += S.driver[0].step_ns
            S.times[k, T_DRV_WAIT] += start - t
            S.driver[0].free_at = start + cost
            yield env.timeout(cost)
        return (start - t) + cost

    def host_bytes_in(self, k: int) -> int:
        """Bytes row k's faults have migrated from the host so far (demand and prefetch)."""
        return int(self.S.counts[k, C_HTOD_DEMAND] + self.S.counts[k, C_HTOD_PREFETCH])

    def batch_cost(self, k: int, nb: int, host0: int) -> float:
        """A serviced batch's cost: zero_batch_ns if it migrated no page from the host,
        else batch_ns; plus fault_ns per fault and its transfers."""
        hw = self.S.hw[0]
        fixed = hw.zero_batch_ns if self.host_bytes_in(k) == host0 else hw.batch_ns
        return fixed + hw.fault_ns * nb + self.S.driver[0].step_ns

    def service_batch(self, nb: int, out_row: int, tick: int) -> None:
        """The driver services the fault buffer: blocks in order, prefetch, make resident."""
        S, T = self.S, self.T
        pages = S.batch_page[:nb]
        for d in pages:
            S.pstate[d] &= ~INB
        blocks: dict[int, list[int]] = {}
        for d in pages:
            blocks.setdefault(int(T.page_block[d]), []).append(int(T.page_pos[d]))
        # policies may read the batch being serviced: its keys (block rank * 512 + position)
        # sorted in S.batch_key[:nb], their number in S.driver[0].n_batch
        S.batch_key[:nb] = np.sort(S.b_rank[T.page_block[pages]] * 512 + T.page_pos[pages])
        S.driver[0].n_batch = nb
        self.faults.n = 0
        for blk in sorted(blocks, key=lambda b: S.b_rank[b]):
            lo, hi = int(T.b_lo[blk]), int(T.b_hi[blk])
            for pos in blocks[blk]:
                self.fmask[pos] = 1
            p0 = int(T.b_page0[blk]) - lo
            # the policy sees the block's faulted and resident positions as bits
            S.fbits[:] = from_positions(np.flatnonzero(self.fmask))
            S.rbits[:] = S.bres[blk * 8:(blk + 1) * 8]
            S.pbits[:] = 0
            self.PF_PREFETCH(self.pst, S, T, blk, lo, hi)
            self.pmask[:] = 0
            self.pmask[to_positions(S.pbits)] = 1
            if self.ft:
                self.mechanisms_prefetch(p0, lo, hi)
            self.make_resident(blk, lo, hi, True, CAUSE_DEMAND, CAUSE_PREFETCH, out_row, tick)
            self.fmask[lo:hi + 1] = 0
        S.counts[out_row, C_BATCHES] += 1
        S.driver[0].n_batch = 0

    def mechanisms_prefetch(self, p0: int, lo: int, hi: int) -> None:
        """The driver's rules on a block's prefetch set (self.pmask) after the policy's
        choice: the hints' (advise_prefetch), then thrashing's (thrash_prefetch)."""
        if self.S.driver[0].advise:
            self.advise_prefetch(p0, lo, hi)
        if self.thrashing:
            self.thrash_prefetch(p0, lo, hi)

    def on_evicted(self, blk: int, first: int, last: int) -> None:
        """Memory evicted positions first..last of a block: the mechanisms that count round
        trips hear of it."""
        if self.S.driver[0].remote == REMOTE_UVMSMART:
            self.counter_round_trip(blk, first, last)

    def mechanisms_end_kernel(self, t0: float, dur: float, stall: float) -> float:
        """A kernel started at t0 with compute time dur ends with `stall` so far: add the
        mechanisms' stall and move their clock to the kernel's end."""
        S = self.S
        stall += S.driver[0].pend_ns
        S.driver[0].pend_ns = 0.0
        S.driver[0].clock = t0 + dur + stall
        return stall

    def gpu_miss(self, k: int, r: int, d: int, now: float) -> bool:
        """Where a GPU miss on page d goes, in the driver's order: read duplication
        (read-mostly), preferred location CPU, the scheduler's remote hint for the tenant, a
        thrashing pin, an accessed-by mapping (remote until an access counter notifies),
        UVMSmart's delayed migration of reads, thrashing detection. True: served remotely."""
        S, T = self.S, self.T
        write = T.row_flags[r] & FLAGS_WRITE
        adv = 0
        if S.driver[0].advise:
            adv = int(S.pg_adv[d])
            if adv & ADV_READ_MOSTLY:
                if not write:
                    S.pstate[d] |= DUP
                return False
            if adv & ADV_PREF_CPU:
                self.remote_access(k, r, d)
                return True
        if S.t_remote[int(S.b_tenant[T.page_block[d]])]:
            self.remote_access(k, r, d)
            return True
        if self.thrashing and S.pg_pin[d] > now:
            self.remote_access(k, r, d)
            return True
        if adv & ADV_ACCESSED_BY and not adv & ADV_PREF_GPU and S.pstate[d] & POP:
            if not (S.driver[0].remote == REMOTE_DRIVER and self.counter_driver(k, r, d)):
                self.remote_access(k, r, d)
                return True
        elif S.driver[0].remote == REMOTE_UVMSMART and not write:
            if not self.counter_uvmsmart(k, r, d):
                self.remote_access(k, r, d)
                return True
        return self.thrashing and self.thrash_fault(k, r, d, now)

    def range_event_clocked(self, e: int, out_row: int, tick: int, t: float):
        """memcpy_htod, memset, prefetch and (option) host_access: the driver (and its copy
        engine) works through the range clipped to live non-host allocations."""
        S, T, env = self.S, self.T, self.env
        with self.driver.request() as req:
            yield req
            start = env.now
            if int(T.ev_op[e]) == OP_HOST_ACCESS:
                S.driver[0].clock = start        # thrashing sees the migrations at this time
                self.host_access_event(e, out_row)
            else:
                self.range_event(e, out_row, tick)
            S.times[out_row, T_STALL] += start - t
            S.times[out_row, T_DRV_WAIT] += start - t
            S.driver[0].free_at = start + S.driver[0].step_ns
            yield env.timeout(S.driver[0].step_ns)
        return env.now

    def range_event(self, e: int, out_row: int, tick: int) -> None:
        """memcpy_htod, memset, prefetch and (option) memcpy_dtod, block by block; leaves
        their time in driver.step_ns."""
        S, T = self.S, self.T
        op = int(T.ev_op[e])
        S.driver[0].step_ns = 0.0
        for seg in range(int(T.ev_seg_start[e]), int(T.ev_seg_start[e + 1])):
            if T.a_host[T.seg_alloc[seg]]:
                continue
            b_first, b_last = self.for_each_block(seg)
            for blk in range(b_first, b_last + 1):
                lo = int(T.page_pos[T.seg_first[seg]]) if blk == b_first else int(T.b_lo[blk])
                hi = int(T.page_pos[T.seg_last[seg]]) if blk == b_last else int(T.b_hi[blk])
                if op == OP_PREFETCH and T.ev_arg[e] != ARG_GPU:
                    self.prefetch_to_cpu(blk, lo, hi, out_row)
                    continue
                cause = {OP_HTOD: CAUSE_MEMCPY, OP_MEMSET: CAUSE_MEMSET,
                         OP_DTOD: CAUSE_DEMAND}.get(op, CAUSE_API)
                self.make_resident(blk, lo, hi, False, cause, cause, out_row, tick)
        S.times[out_row, T_TRANSFER] += S.driver[0].step_ns
        S.times[out_row, T_STALL] += S.driver[0].step_ns

    def for_each_block(self, seg: int) -> tuple[int, int]:
        """First/last block of a segment (helper for range events)."""
        T = self.T
        return int(T.page_block[T.seg_first[seg]]), int(T.page_block[T.seg_last[seg]])

    def reclaim(self, ten: int, k: int, tick: int, t: float) -> None:
        """Kernel k of tenant ten starts at t: the evictions the scheduler's `start` names
        (proactive reclamation), done by the driver from when it is free; the kernel does
        not wait for them, its batches queue behind them."""
        S = self.S
        j = int(self.SC_START(self.sched_state, S, self.T, ten, k, S.t_live))
        if j < 0:
            return
        start = max(t, float(S.driver[0].free_at))
        S.driver[0].step_ns = 0.0
        while j >= 0:
            self.evict_from(j, k, tick)
            j = int(self.SC_START(self.sched_state, S, self.T, ten, k, S.t_live))
        S.times[k, T_TRANSFER] += S.driver[0].step_ns
        S.driver[0].free_at = start + S.driver[0].step_ns
