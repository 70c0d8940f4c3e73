"""`shared`: every tenant takes free chunks and the eviction policy chooses among all
chunks, whoever holds them (the default; one pool, as one process's allocations share it).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...engine.state import NoMemState
from .base import MemoryComponent, register_memory


@njit(cache=True)
def reserve(st, S, T, ten):
    return -1


SHARED = register_memory(MemoryComponent(
    "shared", reserve=reserve, init=lambda ctx: NoMemState(np.zeros(1, np.int64)),
    doc="One pool of chunks; the eviction policy chooses among every tenant's chunks.",
    source="the UVM driver's single chunk pool per GPU (uvm_pmm_gpu.c)"))
