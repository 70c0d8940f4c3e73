"""Page-table walker components. Importing this package registers the built-in ones.

See uvmsim.components.walkers.base for the hook signature and docs/policies.md for each.
"""
from .base import (WALKERS, WalkerContext, WalkerScheduler, get_walkers,  # noqa: F401
                   register_walkers)
from . import shared as _shared, partitioned as _partitioned, dws as _dws  # noqa: F401,E402

__all__ = ["WALKERS", "WalkerContext", "WalkerScheduler", "get_walkers", "register_walkers"]
