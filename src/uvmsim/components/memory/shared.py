"""`shared`: every tenant takes free chunks and the eviction policy chooses among all
chunks, whoever holds them (the default; one pool, as one process's allocations share it).
"""
from __future__ import annotations

from ...engine.hooks import empty_state, take_free_chunk
from .base import MemoryComponent, register_memory

# the engine's default reserve (its replays that name no memory component use it too)
SHARED = register_memory(MemoryComponent(
    "shared", reserve=take_free_chunk, init=empty_state,
    doc="One pool of chunks; the eviction policy chooses among every tenant's chunks.",
    source="the UVM driver's single chunk pool per GPU (uvm_pmm_gpu.c)"))
