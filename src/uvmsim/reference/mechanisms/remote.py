"""Driver mechanism in the reference model: remote mapping with access counters (option
`remote`; the engine's engine/parts/mechanisms/remote.py).
"""
from __future__ import annotations

from ...engine.state import C_COUNTER_MIG, C_REMOTE, POP


class Remote:
    """Remote mapping and the access counters that end it."""

    def remote_access(self, k: int, r: int, d: int) -> None:
        """Row r reads page d over the link from host memory: no fault."""
        S, T = self.S, self.T
        n = int(T.row_count[r])
        S.counts[k, C_REMOTE] += n
        S.driver[0].pend_ns += n * S.driver[0].remote_access_ns
        S.pstate[d] |= POP

    def counter_driver(self, k: int, r: int, d: int) -> bool:
        """The driver's access counter of page d's 2 MiB block; True when it notifies."""
        S, T = self.S, self.T
        blk = int(T.page_block[d])
        S.ac_count[blk] += T.row_count[r]
        if S.ac_count[blk] >= S.driver[0].ac_threshold:
            S.ac_count[blk] = 0
            S.counts[k, C_COUNTER_MIG] += 1
            return True
        return False

    def counter_uvmsmart(self, k: int, r: int, d: int) -> bool:
        """UVMSmart's adaptive delayed migration of page d's 64 KiB leaf; True: migrate."""
        S, T = self.S, self.T
        g = int(T.page_block[d]) * 32 + (int(T.page_pos[d]) >> 4)
        S.ac_count[g] += T.row_count[r]
        used = S.free_stack.size - int(S.pool[0].n_free)
        cap = int(S.pool[0].capacity)
        if used >= cap:
            S.driver[0].oversubscribed = 1.0
        if S.driver[0].oversubscribed:
            thr = S.driver[0].ac_threshold * S.driver[0].ac_penalty * (S.ac_trips[g] + 1)
        else:
            thr = 1.0 + S.driver[0].ac_threshold * used / cap
        if S.ac_count[g] >= thr:
            S.counts[k, C_COUNTER_MIG] += 1
            return True
        return False

    def counter_round_trip(self, blk: int, first: int, last: int) -> None:
        """Leaves first..last of a block were evicted: one more round trip each, and their
        counters restart."""
        S = self.S
        for leaf in range(first >> 4, (last >> 4) + 1):
            S.ac_trips[blk * 32 + leaf] += 1
            S.ac_count[blk * 32 + leaf] = 0
