"""uvmsim: replay GPU memory traces under CUDA Unified Memory oversubscription.

    import uvmsim
    r = uvmsim.simulate("traces/x.uvmtrace", oversub=1.5, prefetch="density")
    r.summary, r.kernels

    s = uvmsim.Scenario(model="h200", oversub=1.5, prefetch="density")  # all but the trace
    uvmsim.simulate("traces/x.uvmtrace", s)
"""
from .config import (MODELS, PRESETS as HARDWARE, Hardware, Model, Translation, get_hardware,
                     get_model)
from .errors import ConfigError, TraceFormatError
from .policies import (EvictPolicy, PrefetchPolicy, register_evict, register_prefetch)
from .results import Result
from .scenario import Scenario
from .multi import simulate_multi
from .simulate import simulate
from .trace import Trace, load_trace, trace_from_tables, write_trace

__version__ = "0.1.0"

__all__ = ["ConfigError", "EvictPolicy", "HARDWARE", "Hardware", "MODELS", "Model",
           "PrefetchPolicy", "Result", "Scenario", "Trace", "TraceFormatError", "Translation",
           "get_hardware", "get_model", "load_trace",
           "register_evict", "register_prefetch", "simulate", "simulate_multi",
           "trace_from_tables", "write_trace", "__version__"]
