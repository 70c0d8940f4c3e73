"""Memory components: how tenants share the GPU's chunks. Importing this package registers
the built-in ones. See uvmsim.components.memory.base for the hook signature and
docs/policies.md for each."""
from .base import (MEMORY, MemoryComponent, MemoryContext, get_memory,  # noqa: F401
                   register_memory)
from . import shared as _shared, partitioned as _partitioned, fair as _fair  # noqa: F401,E402

__all__ = ["MEMORY", "MemoryComponent", "MemoryContext", "get_memory", "register_memory"]
