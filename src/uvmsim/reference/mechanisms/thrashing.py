"""Driver mechanism in the reference model: thrashing mitigation (option `thrashing`; the
engine's engine/parts/mechanisms/thrashing.py).
"""
from __future__ import annotations

from ...engine.state import C_PINS, C_THROTTLED


class Thrashing:
    """The driver's thrashing detection, throttling and pinning."""

    def thrash_record(self, d: int, t: float) -> None:
        """A migration of page d at time t: idle past the epoch, its history is forgotten;
        within the lapse of the previous migration it is one more thrashing event, later
        the count restarts."""
        S = self.S
        last = float(S.pg_last[d])
        if last >= 0.0 and t - last > S.driver[0].thrash_epoch_ns:
            S.pg_thr[d] = 0
            S.pg_throt[d] = 0
        self.thrash_count(d, last, t)

    def thrash_count(self, d: int, last: float, t: float) -> None:
        """Record a migration of page d at t: a thrashing event if within the lapse of
        `last`."""
        S = self.S
        if last >= 0.0:
            if t - last <= S.driver[0].thrash_lapse_ns:
                S.pg_thr[d] = min(255, int(S.pg_thr[d]) + 1)
            else:
                S.pg_thr[d] = 0
        S.pg_last[d] = t

    def thrash_fault(self, k: int, r: int, d: int, now: float) -> bool:
        """The driver's thrashing mitigation on a GPU fault of page d at `now` (a pinned
        page never gets here: gpu_miss maps it remotely). A page with thrash_threshold
        thrashing events faulting again within the lapse is throttled (the kernel naps) or,
        after thrash_pin_threshold throttles, pinned in host memory for thrash_pin_ns. True
        when the access is served remotely."""
        S = self.S
        last = float(S.pg_last[d])
        if last >= 0.0 and now - last > S.driver[0].thrash_epoch_ns:
            S.pg_thr[d] = 0
            S.pg_throt[d] = 0
        t = now
        if last >= 0.0 and S.pg_thr[d] >= S.driver[0].thrash_threshold and t - last <= S.driver[0].thrash_lapse_ns:
            if S.pg_throt[d] >= S.driver[0].thrash_pin_threshold:
                S.pg_pin[d] = t + S.driver[0].thrash_pin_ns
                S.pg_thr[d] = 0
                S.pg_throt[d] = 0
                S.counts[k, C_PINS] += 1
                self.remote_access(k, r, d)
                return True
            S.pg_throt[d] = min(255, int(S.pg_throt[d]) + 1)
            S.counts[k, C_THROTTLED] += 1
            S.driver[0].pend_ns += S.driver[0].thrash_nap_ns          # the kernel naps, then faults
            t += S.driver[0].thrash_nap_ns
        self.thrash_count(d, last, t)
        return False

    def thrash_prefetch(self, p0: int, lo: int, hi: int) -> None:
        """Pinned pages are never prefetched."""
        S = self.S
        for pos in range(lo, hi + 1):
            if S.pg_pin[p0 + pos] > S.driver[0].clock:
                self.pmask[pos] = 0
