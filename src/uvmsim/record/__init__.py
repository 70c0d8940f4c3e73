"""`uvmsim record`: run a CUDA program under the native collector and write a uvmtrace v1.2.

    uvmsim record -o OUT.uvmtrace [--pass pages|timing|both] -- CMD ARGS...

The collector (native_trace/, libuvmtrace.so) is injected with CUDA_INJECTION64_PATH and runs
in one of two passes, because CUPTI and the Compute Sanitizer API cannot share a process:

* pages  - Compute Sanitizer patches every global memory access; per kernel, the 4 KiB pages it
           read / wrote / touched atomically, with counts, first-touch order and the time
           slices of the kernel's run in which each was touched; plus allocations, frees,
           copies, memsets, prefetches, advice, synchronizations and the ranges of managed
           memory the CPU touched between GPU operations (host accesses).
* timing - CUPTI activity records: every kernel's uninstrumented duration.

The package runs the passes and reads their raw files (``<pass>.<pid>.jsonl`` lines and, for
the page pass, ``pages.<pid>.bin`` records of ``REC_DTYPE``), joins them by launch order (a
launch sequence that differs between the passes raises `LaunchMismatchError`; it is never
joined silently) and writes the trace with `uvmsim.trace.write_trace`. See docs/collector.md.

* raw.py       - reading the raw files of one pass;
* join.py      - matching the page pass's kernels to the timing pass's records;
* tables.py    - the uvmtrace tables, one handler per kind of raw line;
* collector.py - building and injecting the collector, running the program (shared with
                 `uvmsim run`, uvmsim.groundtruth);
* command.py   - `record` and its command line.
"""
from __future__ import annotations

from .collector import (DEFAULT_BUILD_DIR, LIB_NAME, NATIVE_DIR, build_library, find_library,
                        gpu_info)
from .command import COLLECTOR_VERSION, configure_parser, main, record, run_from_args
from .errors import LaunchMismatchError, RecordError
from .join import join_launches, timing_order
from .raw import REC_DTYPE, RawPass, pick_process, read_raw_pass
from .tables import build_tables

__all__ = ["COLLECTOR_VERSION", "DEFAULT_BUILD_DIR", "LIB_NAME", "NATIVE_DIR", "REC_DTYPE",
           "LaunchMismatchError", "RawPass", "RecordError", "build_library", "build_tables",
           "configure_parser", "find_library", "gpu_info", "join_launches", "main",
           "pick_process", "read_raw_pass", "record", "run_from_args", "timing_order"]
