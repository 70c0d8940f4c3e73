"""Policy registry. Importing this package registers the built-in policies.

See uvmsim.policies.base for the hook signatures and docs/policies.md for each policy.
"""
from .base import (EVICT, PREFETCH, EvictPolicy, PolicyContext, PrefetchPolicy, get_evict,
                   get_prefetch, no_hit, register_evict, register_prefetch)
from .prefetch import density as _density, simple as _simple  # noqa: F401  (registers)
from .evict import lru2m as _lru2m  # noqa: F401

__all__ = ["EVICT", "PREFETCH", "EvictPolicy", "PolicyContext", "PrefetchPolicy", "get_evict",
           "get_prefetch", "no_hit", "register_evict", "register_prefetch"]
