"""Driver mechanism in the reference model: cudaMemAdvise hints (option `advise`; the
engine's engine/parts/mechanisms/advise.py).
"""
from __future__ import annotations

import numpy as np

from ...engine.state import (ADV_ACCESSED_BY, ADV_PREF_CPU, ADV_PREF_GPU, ADV_READ_MOSTLY,
                             DUP, POP, RES)
from ...trace.format import (ARG_SET_ACCESSED_BY, ARG_SET_PREF_CPU, ARG_SET_PREF_GPU,
                             ARG_SET_READ_MOSTLY, ARG_UNSET_ACCESSED_BY, ARG_UNSET_PREF_CPU,
                             ARG_UNSET_PREF_GPU, ARG_UNSET_READ_MOSTLY)


class Advise:
    """Preferred location, accessed-by and read-mostly hints."""

    def advise_event(self, e: int) -> None:
        """cudaMemAdvise on the event's range (clipped to live non-host allocations)."""
        S, T = self.S, self.T
        arg = int(T.ev_arg[e])
        for seg in range(int(T.ev_seg_start[e]), int(T.ev_seg_start[e + 1])):
            if T.a_host[T.seg_alloc[seg]]:
                continue
            for d in range(int(T.seg_first[seg]), int(T.seg_last[seg]) + 1):
                a = int(S.pg_adv[d])
                if arg == ARG_SET_PREF_GPU:
                    a = (a | ADV_PREF_GPU) & ~ADV_PREF_CPU
                elif arg == ARG_SET_PREF_CPU:
                    a = (a | ADV_PREF_CPU) & ~ADV_PREF_GPU
                elif arg == ARG_SET_ACCESSED_BY:
                    a |= ADV_ACCESSED_BY
                elif arg == ARG_SET_READ_MOSTLY:
                    a |= ADV_READ_MOSTLY
                elif arg in (ARG_UNSET_PREF_GPU, ARG_UNSET_PREF_CPU):
                    a &= ~(ADV_PREF_GPU | ADV_PREF_CPU)
                elif arg == ARG_UNSET_ACCESSED_BY:
                    a &= ~ADV_ACCESSED_BY
                elif arg == ARG_UNSET_READ_MOSTLY:
                    a &= ~ADV_READ_MOSTLY
                    S.pstate[d] &= ~DUP
                S.pg_adv[d] = a

    def advise_prefetch(self, p0: int, lo: int, hi: int) -> None:
        """The driver's hint rules on the prefetch set: a fault on a page preferring the GPU,
        in a block resident nowhere, takes the whole block; pages preferring the CPU are
        not prefetched."""
        S = self.S
        adv = S.pg_adv[p0 + lo:p0 + hi + 1]
        pref = bool(np.any(self.fmask[lo:hi + 1].astype(bool) & (adv & ADV_PREF_GPU != 0)))
        nowhere = not np.any(S.pstate[p0 + lo:p0 + hi + 1] & (POP | RES))
        if pref and nowhere:
            self.pmask[lo:hi + 1] = 1
        self.pmask[lo:hi + 1][adv & ADV_PREF_CPU != 0] = 0

    def collapse_duplicate(self, d: int) -> None:
        """A write hit a read duplicate: the driver collapses the copies (a revocation
        fault, charged to the kernel)."""
        S = self.S
        S.pstate[d] &= ~DUP
        S.driver[0].pend_ns += S.hw[0].batch_ns + S.hw[0].fault_ns
