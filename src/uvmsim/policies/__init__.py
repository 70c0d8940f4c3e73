"""Policy registry. Importing this package registers the built-in policies.

See uvmsim.policies.base for the hook signatures and docs/policies.md for each policy.
"""
from .base import (EVICT, PREFETCH, EvictPolicy, PolicyContext, PrefetchPolicy, get_evict,
                   get_prefetch, no_hit, register_evict, register_prefetch)
from .prefetch import density as _density, simple as _simple  # noqa: F401  (registers)
from .prefetch import seq64k as _seq64k, tbn as _tbn_pf  # noqa: F401
from .evict import lru2m as _lru2m  # noqa: F401
from .evict import (belady2m as _belady2m, fifo2m as _fifo2m, lfu2m as _lfu2m,  # noqa: F401
                    lru2m_access as _lru2m_access, lru4k as _lru4k, lru64k as _lru64k,
                    random2m as _random2m, tbn as _tbn_ev)

__all__ = ["EVICT", "PREFETCH", "EvictPolicy", "PolicyContext", "PrefetchPolicy", "get_evict",
           "get_prefetch", "no_hit", "register_evict", "register_prefetch"]
