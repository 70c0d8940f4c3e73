"""`interleave`: every kernel starts as soon as its tenant's clock is the earliest (the
default; tenants interleave at event granularity, sharing memory freely)."""
from __future__ import annotations

import numpy as np
from numba import njit

from .base import NoState, TenantScheduler, register_scheduler


@njit(cache=True)
def admit(st, S, T, ten, k, live):
    return True


INTERLEAVE = register_scheduler(TenantScheduler(
    "interleave", admit=admit, init=lambda ctx: NoState(np.zeros(1, np.int64)),
    admit_py=lambda st, S, T, ten, k, live: True,
    doc="Kernels start when their tenant's clock is earliest; no admission control.",
    source="uvmsim's event-interleaved tenants (docs/model.md)"))
