"""uvmtrace v1 / v1.1 / v1.2 schema constants (see docs/trace-format.md).

Pure data: which files a trace holds, each table's columns, types and nullability, and the
closed vocabularies of `op`, `kind` and `arg`.
"""
from __future__ import annotations

import pyarrow as pa

FORMAT = "uvmtrace"
VERSION = 1
# v1.1 adds optional columns and the host_access event; a trace that uses them says
# "minor": 1 in its manifest (absent means 0). v1.2 adds per-launch columns and the
# per-thread-block access streams (two optional files): "minor": 2. Readers accept minors up
# to this one.
MINOR = 2
PAGE_SIZE = 4096
PAGE_SHIFT = 12
BLOCK_SHIFT = 9  # 512 pages of 4 KiB = one 2 MiB VA-block window

MANIFEST = "manifest.json"
ALLOCATIONS = "allocations.parquet"
EVENTS = "events.parquet"
KERNELS = "kernels.parquet"
ACCESSES = "accesses.parquet"
REQUIRED_FILES = (MANIFEST, ALLOCATIONS, EVENTS, KERNELS, ACCESSES)
# v1.2: per-thread-block access streams; both present or both absent
BLOCKS = "blocks.parquet"
BLOCK_ACCESSES = "block_accesses.parquet"
STREAM_FILES = (BLOCKS, BLOCK_ACCESSES)

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
    # v1.2 stream tables (optional files). Times are in ticks of the kernel's stream_tick_ns.
    BLOCKS: [
        ("kernel_id", pa.uint32(), False),
        ("block", pa.uint32(), False),    # linear block id, x fastest
        ("t_start", pa.uint32(), False),  # from the kernel's first recorded access
        ("t_end", pa.uint32(), False),    # the block's last recorded access
    ],
    BLOCK_ACCESSES: [
        ("kernel_id", pa.uint32(), False),
        ("block", pa.uint32(), False),
        ("page", pa.uint64(), False),     # first page the block touched in the unit
        ("t", pa.uint32(), False),        # first touch of the unit, from the block's start
        ("flags", pa.uint8(), False),     # accesses of the block to the unit
    ],
}


# v1.1 optional columns: (column, arrow type, nullable). Read and written when present.
OPTIONAL: dict[str, list[tuple[str, pa.DataType, bool]]] = {
    ALLOCATIONS: [],
    EVENTS: [],
    KERNELS: [
        ("n_slices", pa.uint8(), True),   # equal time slices the kernel's run was cut into
        ("slice_ns", pa.int64(), True),   # their width in the capture's clock (provenance)
        # v1.2: the launch
        ("n_blocks", pa.uint64(), True),           # thread blocks in the grid
        ("threads_per_block", pa.uint32(), True),
        ("regs_per_thread", pa.uint32(), True),
        ("smem_static_bytes", pa.uint32(), True),
        ("smem_dynamic_bytes", pa.uint32(), True),
        ("cluster_blocks", pa.uint32(), True),     # thread blocks per cluster (1: none)
        ("sm_count", pa.uint32(), True),           # SMs of the device it ran on
        ("max_blocks_per_sm", pa.uint32(), True),  # occupancy the hardware allows
        # v1.2: the kernel's access stream (null: none; the replay uses its page set)
        ("stream_unit", pa.uint8(), True),         # log2 bytes of a stream row's unit
        ("stream_tick_ns", pa.int64(), True),      # ns per tick of the stream's times
    ],
    ACCESSES: [
        ("slices", pa.uint64(), False),   # bit i: the page was touched in slice i
    ],
    BLOCKS: [],
    BLOCK_ACCESSES: [],
}
# The minor version that introduced each optional column (a trace using one says at least
# this minor in its manifest).
OPTIONAL_MINOR: dict[str, int] = {
    "n_slices": 1, "slice_ns": 1, "slices": 1,
    "n_blocks": 2, "threads_per_block": 2, "regs_per_thread": 2, "smem_static_bytes": 2,
    "smem_dynamic_bytes": 2, "cluster_blocks": 2, "sm_count": 2, "max_blocks_per_sm": 2,
    "stream_unit": 2, "stream_tick_ns": 2,
}
MAX_SLICES = 64
# stream units: 4 KiB (one row per page) up to 1 GiB
MIN_STREAM_UNIT = PAGE_SHIFT
MAX_STREAM_UNIT = 30


def arrow_schema(file: str, optional: tuple[str, ...] = ()) -> pa.Schema:
    """The Arrow schema of one of the tables, as writers must produce it, with the named
    optional columns appended."""
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
# an access whose warp waits for its data: a read, or an atomic (it may return the old
# value); a plain write does not wait (the progress front-end's store_ahead)
FLAGS_LOAD = FLAG_READ | FLAG_ATOMIC
