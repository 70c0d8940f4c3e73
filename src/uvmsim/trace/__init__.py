"""Trace I/O: the uvmtrace v1 format, validation, dense arrays and synthetic generators."""
from .io import load_trace, trace_from_tables, write_trace
from .model import Trace, TraceArrays

__all__ = ["Trace", "TraceArrays", "load_trace", "trace_from_tables", "write_trace"]
