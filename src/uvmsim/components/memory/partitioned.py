"""`partitioned`: each tenant owns a fixed equal quota of the chunks (MIG-like).

A tenant holding its quota evicts one of its own chunks (the eviction policy's choice among
them) before it takes another, even when chunks are free; it never evicts another tenant's.
Quotas of tenants that have finished or are idle stay unused.
"""
from __future__ import annotations

from numba import njit

from .base import MemoryComponent, equal_quotas, register_memory


@njit(cache=True)
def reserve(st, S, T, ten):
    if S.t_chunks[ten] >= st.quota[ten]:
        return ten
    return -1


PARTITIONED = register_memory(MemoryComponent(
    "partitioned", reserve=reserve, init=equal_quotas,
    doc="A fixed equal chunk quota per tenant; a tenant at its quota evicts its own.",
    source="NVIDIA MIG static memory partitioning"))
