"""`interleave`: every kernel starts as soon as its tenant's clock is the earliest (the
default; tenants interleave at event granularity, sharing memory freely)."""
from __future__ import annotations

from ...engine.hooks import admit_all, empty_state
from .base import TenantScheduler, register_scheduler

# the engine's default admit (its replays that name no scheduler use it too)
INTERLEAVE = register_scheduler(TenantScheduler(
    "interleave", admit=admit_all, init=empty_state,
    admit_py=lambda st, S, T, ten, k, live: True,
    doc="Kernels start when their tenant's clock is earliest; no admission control.",
    source="uvmsim's event-interleaved tenants (docs/model.md)"))
