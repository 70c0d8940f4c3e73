"""uvmtrace v1 / v1.1 schema constants (see docs/trace-format.md).

Pure data: which files a trace holds, each table's columns, types and nullability, and the
closed vocabularies of `op`, `kind` and `arg`.
"""
from __future__ import annotations

import pyarrow as pa

FORMAT = "uvmtrace"
VERSION = 1
# v1.1 adds optional columns and the host_access event; a trace that uses them says
# "minor": 1 in its manifest (absent means 0). Readers accept minors up to this one.
MINOR = 1
PAGE_SIZE = 4096
PAGE_SHIFT = 12
BLOCK_SHIFT = 9  # 512 pages of 4 KiB = one 2 MiB VA-block window
PAGES_PER_BLOCK = 1 << BLOCK_SHIFT
BIG_PAGE_PAGES = 16  # 64 KiB

MANIFEST = "manifest.json"
ALLOCATIONS = "allocations.parquet"
EVENTS = "events.parquet"
KERNELS = "kernels.parquet"
ACCESSES = "accesses.parquet"
REQUIRED_FILES = (MANIFEST, ALLOCATIONS, EVENTS, KERNELS, ACCESSES)

# (column, arrow type, nullable)
SCHEMAS: dict[str, list[tuple[str, pa.DataType, bool]]] = {
    ALLOCATIONS: [
        ("alloc_id", pa.uint32(), False),
        ("base", pa.uint64(), False),
        ("size", pa.uint64(), False),
        ("kind", pa.string(), False),
        ("name", pa.string(), True),
    ],
    EVENTS: [
        ("seq", pa.uint64(), False),
        ("op", pa.string(), False),
        ("alloc_id", pa.uint32(), True),
        ("kernel_id", pa.uint32(), True),
        ("addr", pa.uint64(), True),
        ("size", pa.uint64(), True),
        ("arg", pa.string(), True),
        ("stream", pa.int64(), True),
        ("t_start_ns", pa.int64(), True),
        ("t_end_ns", pa.int64(), True),
    ],
    KERNELS: [
        ("kernel_id", pa.uint32(), False),
        ("name", pa.string(), False),
        ("duration_ns", pa.int64(), True),
        ("grid", pa.string(), True),
        ("block", pa.string(), True),
    ],
    ACCESSES: [
        ("kernel_id", pa.uint32(), False),
        ("page", pa.uint64(), False),
        ("flags", pa.uint8(), False),
        ("count", pa.uint32(), False),
        ("order", pa.uint32(), False),
    ],
}


# v1.1 optional columns: (column, arrow type, nullable). Read and written when present.
OPTIONAL: dict[str, list[tuple[str, pa.DataType, bool]]] = {
    ALLOCATIONS: [],
    EVENTS: [],
    KERNELS: [
        ("n_slices", pa.uint8(), True),   # equal time slices the kernel's run was cut into
        ("slice_ns", pa.int64(), True),   # their width in the capture's clock (provenance)
    ],
    ACCESSES: [
        ("slices", pa.uint64(), False),   # bit i: the page was touched in slice i
    ],
}
MAX_SLICES = 64


def arrow_schema(file: str, optional: tuple[str, ...] = ()) -> pa.Schema:
    """The Arrow schema of one of the four tables, as writers must produce it, with the
    named v1.1 optional columns appended."""
    cols = SCHEMAS[file] + [c for c in OPTIONAL[file] if c[0] in optional]
    return pa.schema([pa.field(n, t, nullable=nl) for n, t, nl in cols])


# Event op codes; the engine and reference model switch on these small integers.
# (host_access is v1.1; appended so every v1 code keeps its value)
OPS = ("alloc", "free", "kernel", "memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memset",
       "prefetch", "advise", "sync", "host_access")
OP_CODE = {name: i for i, name in enumerate(OPS)}
OP_ALLOC, OP_FREE, OP_KERNEL, OP_HTOD, OP_DTOH, OP_DTOD, OP_MEMSET, OP_PREFETCH, OP_ADVISE, \
    OP_SYNC, OP_HOST_ACCESS = range(len(OPS))
RANGE_OPS = frozenset({"memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memset", "prefetch",
                       "advise", "host_access"})
V11_OPS = frozenset({"host_access"})

KINDS = ("managed", "device", "host", "pool")
KIND_CODE = {name: i for i, name in enumerate(KINDS)}
KIND_HOST = KIND_CODE["host"]

PREFETCH_ARGS = ("gpu", "cpu")
ADVISE_ARGS = ("set_preferred_location_gpu", "set_preferred_location_cpu",
               "set_accessed_by_gpu", "set_read_mostly",
               "unset_preferred_location_gpu", "unset_preferred_location_cpu",
               "unset_accessed_by_gpu", "unset_read_mostly")
HOST_ACCESS_ARGS = ("read", "write")
# One code space for all vocabularies: 0 = none/unknown.
ARG_CODE = {name: i + 1 for i, name in enumerate(PREFETCH_ARGS + ADVISE_ARGS + HOST_ACCESS_ARGS)}
ARG_GPU = ARG_CODE["gpu"]
ARG_CPU = ARG_CODE["cpu"]
(ARG_SET_PREF_GPU, ARG_SET_PREF_CPU, ARG_SET_ACCESSED_BY, ARG_SET_READ_MOSTLY,
 ARG_UNSET_PREF_GPU, ARG_UNSET_PREF_CPU, ARG_UNSET_ACCESSED_BY,
 ARG_UNSET_READ_MOSTLY) = (ARG_CODE[a] for a in ADVISE_ARGS)

FLAG_READ, FLAG_WRITE, FLAG_ATOMIC = 1, 2, 4
# an access that writes (a write or an atomic): its fault is a write fault
FLAGS_WRITE = FLAG_WRITE | FLAG_ATOMIC
