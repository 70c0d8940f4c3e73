"""uvmsim.testing: test your own prefetch and eviction policies the way uvmsim tests its own.

    from uvmsim.testing import check_eviction_policy
    check_eviction_policy(MY_POLICY, model=MyOrder())   # raises PolicyMismatch on a bug

`check_eviction_policy` and `check_prefetch_policy` replay generated programs with the
policy and compare every choice it makes with a plain-Python model of it (the protocols
EvictionModel and PrefetchModel; models of every shipped policy in EVICT_MODELS and
PREFETCH_MODELS), check the rules every policy must keep, and run the stateful machine of
eviction on the compiled engine. `uvmsim.testing.strategies` has the hypothesis strategies
(programs, replay settings, translations) for tests of your own. docs/policies.md shows a
whole example. Needs hypothesis: `pip install uvmsim[testing]`.
"""
from __future__ import annotations

try:
    import hypothesis  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised in an environment without it
    raise ImportError("uvmsim.testing needs hypothesis, which is not installed: "
                      "pip install uvmsim[testing]") from e

from . import strategies
from .check import PROFILES, CheckReport, check_eviction_policy, check_prefetch_policy, \
    check_settings
from .evict_models import EVICT_MODELS
from .machine import eviction_machine
from .prefetch_models import PREFETCH_MODELS
from .program import Alloc, Free, Kernel, Program, Range, Sync
from .view import EvictionModel, MemoryView, PrefetchModel
from .watch import PolicyMismatch

__all__ = ["CheckReport", "EVICT_MODELS", "EvictionModel", "MemoryView", "PREFETCH_MODELS",
           "PROFILES", "PolicyMismatch", "PrefetchModel", "Program", "Alloc", "Kernel",
           "Range", "Free", "Sync", "check_eviction_policy", "check_prefetch_policy",
           "check_settings", "eviction_machine", "strategies"]
