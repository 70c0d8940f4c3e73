"""`fair`: each tenant is guaranteed an equal quota of the chunks, and lends what it does
not use.

Free chunks go to whoever asks, so a busy tenant may borrow beyond its quota while others
leave theirs idle. When no chunk is free, a tenant below its quota reclaims: it evicts a
chunk of the tenant holding the most beyond its own guarantee (ties: the lowest index). A
tenant at or over its quota evicts one of its own, except that chunks of tenants that have
finished (their guarantee is 0) are taken first by anyone.
"""
from __future__ import annotations

from numba import njit

from .base import MemoryComponent, equal_quotas, register_memory


@njit(cache=True)
def reserve(st, S, T, ten):
    if S.pool[0].n_free > 0:
        return -1
    own = S.t_chunks[ten]
    below = own < st.quota[ten]
    best = -1
    most = 0
    for j in range(st.quota.size):
        if j == ten:
            continue
        guarantee = st.quota[j] if S.t_live[j] else 0
        over = S.t_chunks[j] - guarantee
        if over > most and (below or not S.t_live[j]):
            most = over
            best = j
    if best >= 0:
        return best
    return ten if own > 0 else -1


FAIR = register_memory(MemoryComponent(
    "fair", reserve=reserve, init=equal_quotas,
    doc="Guaranteed equal quotas; idle quota is lent out and reclaimed on demand.",
    source="fair-share memory with lending (cgroup memory.min style guarantees)"))
