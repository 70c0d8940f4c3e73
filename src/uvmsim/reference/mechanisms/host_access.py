"""Driver mechanism in the reference model: host accesses (v1.1 host_access events,
option `host_access`; the engine's engine/parts/mechanisms/host_access.py).
"""
from __future__ import annotations

from ...engine.state import C_DTOH_HOST, C_HOST_POP, POP, RES, T_STALL, T_TRANSFER


class HostAccess:
    """The CPU touching a range: migrations back and first touches in host memory."""

    def host_access_event(self, e: int, out_row: int) -> None:
        """The CPU touched the event's range: its GPU-resident pages migrate back to the
        host (CPU faults), its never-populated pages are populated in host memory. Leaves
        the time (copies, plus the CPU fault cost per page) in driver.step_ns."""
        S, T = self.S, self.T
        S.driver[0].step_ns = 0.0
        moved = 0
        for seg in range(int(T.ev_seg_start[e]), int(T.ev_seg_start[e + 1])):
            if T.a_host[T.seg_alloc[seg]]:
                continue
            b_first, b_last = self.for_each_block(seg)
            for blk in range(b_first, b_last + 1):
                lo = int(T.page_pos[T.seg_first[seg]]) if blk == b_first else int(T.b_lo[blk])
                hi = int(T.page_pos[T.seg_last[seg]]) if blk == b_last else int(T.b_hi[blk])
                p0 = int(T.b_page0[blk]) - int(T.b_lo[blk])
                for d in range(p0 + lo, p0 + hi + 1):
                    if S.pstate[d] & RES:
                        if self.thrashing:
                            self.thrash_record(d, float(S.driver[0].clock))
                    elif not S.pstate[d] & POP:
                        S.pstate[d] |= POP
                        S.counts[out_row, C_HOST_POP] += 1
                        moved += 1
                moved += self.prefetch_to_cpu(blk, lo, hi, out_row, C_DTOH_HOST)
        S.times[out_row, T_TRANSFER] += S.driver[0].step_ns
        S.driver[0].step_ns += moved * S.hw[0].host_fault_ns
        S.times[out_row, T_STALL] += S.driver[0].step_ns
