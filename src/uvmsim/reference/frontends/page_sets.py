"""Front-end `page_sets` in the reference model: what the GPU touches is each kernel's
set of access rows, replayed in order (the engine's engine/parts/frontends/page_sets.py). A
kernel is a SimPy process: rows issue evenly over its compute time, shifted by its stalls;
each is translated, faults fill the FaultBuffer, a full buffer goes to the driver.

A front-end class defines run_kernel(k, t0) (a process returning when the kernel ends);
ReferenceModel takes it as its first base.
"""
from __future__ import annotations

from ...engine.state import (C_FAULTS, C_FAULTS_READ, C_FAULTS_WRITE, DUP, INB, RES, T_STALL,
                             T_XLATE)
from ...trace.format import FLAGS_WRITE


class PageSets:
    """Kernels replay their access rows: one pass, or one per time slice."""

    def passes(self, k: int, t0: float, dur: float):
        """Kernel k's rows in replay order with the time each issues (before stalls): one
        pass over all rows, or with the slices option one pass per time slice s over the
        rows touched in it, spread evenly over [s/n, (s+1)/n) of the compute time."""
        S, T = self.S, self.T
        r0, r1 = int(T.k_row_start[k]), int(T.k_row_start[k + 1])
        n = int(T.k_nslices[k]) if S.frontend[0].slices and T.row_slices.size else 1
        if n <= 1:
            gap = dur / (r1 - r0) if r1 > r0 else 0.0
            for r in range(r0, r1):
                yield r, t0 + (r - r0) * gap
            return
        width = dur / n
        for s in range(n):
            rows = [r for r in range(r0, r1) if (int(T.row_slices[r]) >> s) & 1]
            gap = dur / (n * len(rows)) if rows else 0.0
            base = t0 + s * width
            for j, r in enumerate(rows):
                yield r, base + j * gap

    def run_kernel(self, k: int, t0: float):
        """Replay one kernel's rows: rows issue evenly over its compute time (shifted by
        stalls), each is translated, faults fill the buffer, full buffers go to the driver.
        With thrashing on, a fault first passes the driver's thrashing mitigation."""
        S, T, env = self.S, self.T, self.env
        r1 = int(T.k_row_start[k + 1])
        dur = float(T.k_duration_ns[k])
        if not dur > 0.0:
            dur = 0.0
        if self.ft:
            S.driver[0].clock = t0
        stall = 0.0
        walks: list = []
        buf = self.faults
        for r, issue in self.passes(k, t0, dur):
            d = int(T.row_page[r])
            blk = int(T.page_block[d])
            if T.a_host[T.b_alloc[blk]]:
                continue
            t = issue + stall
            if self.ft:
                t += S.driver[0].pend_ns     # naps and remote reads so far delay the row
            if self.xl:
                if t > env.now:
                    yield env.timeout(t - env.now)
                self.translate(d, t, k, walks)
            ps = S.pstate[d]
            if ps & RES:
                if ps & DUP and T.row_flags[r] & FLAGS_WRITE:
                    self.collapse_duplicate(d)
                if self.EV_ON_HIT is not None:
                    self.EV_ON_HIT(self.est, S, T, S.b_chunk[blk], blk, T.page_pos[d], r)
                continue
            if ps & INB:
                continue
            if self.ft and self.gpu_miss(k, r, d, t):
                continue
            S.counts[k, C_FAULTS] += 1
            S.counts[k, C_FAULTS_WRITE if T.row_flags[r] & FLAGS_WRITE else C_FAULTS_READ] += 1
            if buf.add(d):
                if t > env.now:
                    yield env.timeout(t - env.now)
                stall += yield env.process(self.service_clocked(buf.n, k, r, t))
        if buf.n:
            t = t0 + dur + stall
            if self.ft:
                t += S.driver[0].pend_ns
            if t > env.now:
                yield env.timeout(t - env.now)
            stall += yield env.process(self.service_clocked(buf.n, k, r1, t))
        if self.ft:
            stall = self.mechanisms_end_kernel(t0, dur, stall)
        end = t0 + dur + stall
        S.times[k, T_STALL] += stall
        if end > env.now:
            yield env.timeout(end - env.now)
        if walks:
            yield env.all_of(walks)      # the kernel retires when its last walk is done
        if env.now > end:
            S.times[k, T_XLATE] += env.now - end
            S.times[k, T_STALL] += env.now - end
            end = env.now
        return end
