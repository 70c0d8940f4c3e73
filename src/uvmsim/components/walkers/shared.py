"""`shared`: one FIFO queue over every walker, all tenants alike (the default).

A walk takes the walker that frees first (ties: the lowest index); with identical walkers
this is a FIFO queue served by the pool.
"""
from __future__ import annotations

from ...engine.hooks import earliest_free_walker, empty_state
from .base import WalkerScheduler, register_walkers

# the engine's default pick (its replays that name no walker component use it too)
SHARED = register_walkers(WalkerScheduler(
    "shared", pick=earliest_free_walker, init=empty_state,
    pools=lambda ctx: [list(range(ctx.walkers))], choose=lambda ctx, wf, ten, t: 0,
    doc="One FIFO queue over all walkers, shared by every tenant; one shared TLB.",
    source="gem5-gpu / UVMSmart shared page-walk pool"))
