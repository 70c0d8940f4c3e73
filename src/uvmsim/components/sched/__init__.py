"""Kernel-scheduling components among tenants. Importing this package registers the
built-in ones. See uvmsim.components.sched.base for the hook signature and
docs/policies.md for each."""
from .base import (SCHEDULERS, SchedContext, TenantScheduler, get_scheduler,  # noqa: F401
                   register_scheduler)
from . import (interleave as _interleave, mfit as _mfit, amfit as _amfit,  # noqa: F401,E402
               madvise as _madvise)

__all__ = ["SCHEDULERS", "SchedContext", "TenantScheduler", "get_scheduler",
           "register_scheduler"]
