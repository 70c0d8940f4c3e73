"""Engine state and constants shared by the compiled replay, the policies and the reference.

State is one Numba StructRef, so the compiled replay, the policy hooks and the reference
model all read it by name (S.pstate, T.row_page). A StructRef is passed as one pointer:
passing the same arrays as a 40-field tuple cost about 0.3 s of compile time per call site.
Policies may read any field; only the engine writes them.

Its fields are grouped by the part of the engine that owns them (docs/architecture.md):
memory, driver, link, translation and front-end. Hot state is flat arrays (one entry per page,
block or chunk). A part's scalars (settings, counters, clocks) are one record of named
fields: a one-element NumPy structured array, read and written as S.pool[0].n_free in
compiled code and in Python alike (each a load or store at a fixed offset, as an index into
a vector was).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import types
from numba.experimental import structref

from ..errors import ConfigError
from .hooks import empty_state
from .link import transfer_table

# pstate bits, one byte per dense page
POP = np.uint8(1)   # populated: the page has data somewhere
RES = np.uint8(2)   # resident on the GPU
INB = np.uint8(4)   # in the current fault batch
DUP = np.uint8(8)   # the GPU copy is a read duplicate (read-mostly): dropped, not copied, on
                    # eviction

# causes of making pages resident
CAUSE_DEMAND, CAUSE_PREFETCH, CAUSE_MEMCPY, CAUSE_MEMSET, CAUSE_API = range(5)

# per-kernel count columns, in the order of docs/semantics.md's list (htod_bytes is derived)
COUNT_NAMES = ("faults", "faults_read", "faults_write", "fault_batches", "htod_bytes_demand",
               "htod_bytes_prefetch", "htod_bytes_memcpy", "htod_bytes_api_prefetch",
               "zero_fill_pages", "evicted_chunks", "dtoh_bytes_evict",
               "dtoh_bytes_api_prefetch")
# address translation (opt-in): appended so earlier indices never move
COUNT_NAMES = COUNT_NAMES + ("tlb_misses", "page_walks")
C_TLB_MISSES = COUNT_NAMES.index("tlb_misses")
C_PAGE_WALKS = COUNT_NAMES.index("page_walks")
# thrashing, remote mapping and memory hints (opt-in): appended likewise
COUNT_NAMES = COUNT_NAMES + ("remote_accesses", "throttled_faults", "thrashing_pins",
                             "counter_migrations")
C_REMOTE = COUNT_NAMES.index("remote_accesses")
C_THROTTLED = COUNT_NAMES.index("throttled_faults")
C_PINS = COUNT_NAMES.index("thrashing_pins")
C_COUNTER_MIG = COUNT_NAMES.index("counter_migrations")
# host accesses (v1.1 host_access events, opt-in): appended likewise
COUNT_NAMES = COUNT_NAMES + ("dtoh_bytes_host", "host_populated_pages")
C_DTOH_HOST = COUNT_NAMES.index("dtoh_bytes_host")
C_HOST_POP = COUNT_NAMES.index("host_populated_pages")
(C_FAULTS, C_FAULTS_READ, C_FAULTS_WRITE, C_BATCHES, C_HTOD_DEMAND, C_HTOD_PREFETCH,
 C_HTOD_MEMCPY, C_HTOD_API, C_ZERO_FILL, C_EVICTED, C_DTOH_EVICT, C_DTOH_API) = range(12)
N_COUNTS = len(COUNT_NAMES)
HTOD_COLS = (C_HTOD_DEMAND, C_HTOD_PREFETCH, C_HTOD_MEMCPY, C_HTOD_API)
# the htod count column of each cause
CAUSE_HTOD_COL = np.array([C_HTOD_DEMAND, C_HTOD_PREFETCH, C_HTOD_MEMCPY, -1, C_HTOD_API],
                          np.int64)

# time columns per kernel row. T_XLATE: time the kernel waits past its compute for page
# walks still in flight; T_WALKQ: time walks spent queued for a walker; T_DRV_WAIT: time
# its batches and copies queued for a driver busy with another tenant
T_STALL, T_TRANSFER, T_XLATE, T_WALKQ, T_DRV_WAIT = range(5)
N_TIMES = 5


def _record(fields) -> np.dtype:
    """The dtype of a part's record; a field name that a NumPy record already has as an
    attribute (size, base, ...) would read as that attribute in Python: refused."""
    dt = np.dtype(fields, align=True)
    clash = [n for n in dt.names if hasattr(np.record, n)]
    if clash:
        raise ValueError(f"record fields {clash} shadow attributes of numpy.record")
    return dt


def record(dtype: np.dtype, **values) -> np.ndarray:
    """A part's record: one element of `dtype`, fields 0 unless given by name."""
    r = np.zeros(1, dtype)
    for name, v in values.items():
        if name not in dtype.names:
            raise KeyError(f"no field {name!r} in {dtype.names}")
        r[0][name] = v
    return r


# ---- hardware: the time constants of one GPU and its link (read-only), named as the fields
# of uvmsim.config.Hardware. evict_ns: fixed cost per evicted chunk; dtoh_bw_gbps: peak of the
# device-to-host bandwidth curve (0: the host-to-device curve); host_fault_ns: CPU fault cost
# per page a host access moves or populates; migrate_page_ns: the driver's work per page a
# fault (demand or prefetch) migrates from the host, on top of its copy; zero_batch_ns: the
# fixed cost of a batch that migrates no page from the host (batch_ns unless set)
HARDWARE = _record([(n, np.float64) for n in (
    "batch_ns", "fault_ns", "transfer_latency_ns", "bw_peak_gbps", "bw_b", "zero_fill_ns",
    "evict_ns", "dtoh_bw_gbps", "host_fault_ns", "migrate_page_ns", "zero_batch_ns")])

# ---- memory: the chunk pool (S.pool[0])
POOL = _record([
    ("n_free", np.int64),         # free chunks: free_stack[:n_free]
    # the GPU's capacity in chunks; the pool (free_stack) may hold fewer: no more chunks
    # than blocks that can take one, as more could never all be in use
    ("capacity", np.int64),
    # the tenant whose chunks the eviction policy's next victim must come from (-1: any
    # chunk); set when a memory component (uvmsim.components.memory) restricts an eviction,
    # read by victim hooks through uvmsim.engine.hooks.may_evict
    ("victim_tenant", np.int64),
    # small_blocks option (docs/semantics.md): a VA block smaller than 2 MiB takes only its
    # own pages of GPU memory (the driver backs it with 64 KiB and 4 KiB chunks), and the
    # capacity is counted in pages: free_pages is what is still free
    ("small_blocks", np.uint8),
    ("free_pages", np.int64),
    # partial_blocks option (docs/semantics.md, "Partial blocks"): a VA block smaller than
    # 2 MiB takes units (64 KiB, or 4 KiB at its unaligned ends) of shared root chunks;
    # cur_root is the shared root chunk that took the last unit (-1: none)
    ("partial_blocks", np.uint8),
    ("cur_root", np.int64),
])

# ---- driver: fault batches, their service, range events, and the driver's mechanisms
# (thrashing, remote mapping with access counters, memory hints, host accesses), each off
# unless its option is on. Times on the mechanisms' clock: a kernel's compute spread evenly
# over its rows plus the stalls so far; it advances by copies and host accesses between
# kernels.
DRIVER = _record([
    ("n_batch", np.int64),        # faults of the batch being serviced (S.batch_key[:n]), 0
                                  # outside a service
    ("step_ns", np.float64),      # time the current driver step (a batch, a range event, an
                                  # eviction) keeps the driver and its copy engine busy
    ("free_at", np.float64),      # clocked replay: when the (shared) driver is free again
    # mechanisms: `mechanisms` is 1 when any of thrashing, remote or advise is on (a GPU miss
    # then goes through gpu_miss and kernels keep the clock)
    ("mechanisms", np.uint8),
    ("thrashing", np.uint8),
    ("thrash_lapse_ns", np.float64),    # a migration this soon after the last is thrashing
    ("thrash_threshold", np.float64),   # events until a page is thrashing
    ("thrash_pin_threshold", np.float64),  # throttles until it is pinned instead
    ("thrash_nap_ns", np.float64),      # a throttled fault's nap
    ("thrash_pin_ns", np.float64),      # how long a pinned page stays mapped remotely
    ("thrash_epoch_ns", np.float64),    # idle this long, a page forgets its history
    ("remote", np.int64),               # 0 (off), REMOTE_DRIVER or REMOTE_UVMSMART
    ("ac_threshold", np.float64),       # access counter threshold
    ("ac_penalty", np.float64),         # UVMSmart's penalty once memory was full
    ("oversubscribed", np.uint8),       # UVMSmart's sticky "memory has been full"
    ("remote_access_ns", np.float64),   # cost of one remote access
    ("advise", np.uint8),               # apply cudaMemAdvise events
    ("host_access", np.uint8),          # v1.1 option: apply host_access events
    ("device_copies", np.uint8),        # option: memcpy_dtod makes its destination
                                        # resident (the copy engine's faults)
    ("clock", np.float64),              # the time at the current kernel's start (between
                                        # kernels: the simulated time)
    ("pend_ns", np.float64),            # stall the mechanisms added in the current kernel
])
REMOTE_DRIVER, REMOTE_UVMSMART = 1, 2
# pg_adv bits
ADV_PREF_GPU, ADV_PREF_CPU, ADV_ACCESSED_BY, ADV_READ_MOSTLY = 1, 2, 4, 8

# ---- translation (opt-in): the GPU's TLB and page-table walkers (S.translation[0])
TRANSLATION = _record([
    ("on", np.uint8),
    ("sets", np.int64),
    ("ways", np.int64),
    ("shift", np.int64),          # log2(page size / 4 KiB)
    ("walkers", np.int64),
    ("tick", np.int64),           # LRU clock of the TLB's ways
    # tenants the TLB's sets are sliced among (0: one TLB shared by all); set by walker
    # components with tlb_slices (uvmsim.components.walkers)
    ("tlb_slices", np.int64),
    ("walk_ns", np.float64),      # latency of one walk
])
# A TLB entry's tag is the tenant's virtual page of translation size times the number of
# tenants plus the tenant: two tenants' pages never share a tag. Pages are below 2^50
# (docs/trace-format.md), so with at most MAX_TENANTS tenants a tag stays below 2^63.
MAX_TENANTS = 1 << 13
VPAGE_LIMIT = 1 << 50
# The set of a tag is that of the virtual page offset by tenant << TLB_TENANT_SPREAD pages
# (modulo the sets), which spreads tenants' equal addresses over different sets of a TLB
# whose set count is not a power of two (the placement tags had when they carried the
# tenant in those bits, kept so translated multi-tenant replays count as before)
TLB_TENANT_SPREAD = 44

# ---- front-end: what the GPU touches (S.frontend[0])
FRONTEND = _record([
    ("slices", np.uint8),         # v1.1 option: replay kernels in their time-slice passes
    # v1.2 option: kernels with per-thread-block streams replay in the progress front-end
    # (engine/parts/frontends/progress.py); the engine joins that front-end when it is on
    ("block_progress", np.uint8),
    ("fault_latency_ns", np.float64),  # progress: a fault waits this long before the
                                       # driver may take it
    # progress: a block may pass rows whose missing pages it only stores to, with up to this
    # many such faults outstanding (0: every fault stalls its block; docs/semantics.md)
    ("store_ahead", np.int64),
    # progress: the order in which a batch takes queued faults (uvmsim.config.FAULT_ORDERS:
    # 0 arrival, 1 age: blocks dispatched earlier on their SM first; docs/semantics.md)
    ("fault_order", np.int64),
    # progress with store_ahead: faulting stores one SM holds for all its blocks; while they
    # fill it, no block on the SM passes a row (0: no limit; docs/semantics.md rule 4b)
    ("sm_store_pool", np.int64),
])

# partial_blocks: b_chunk of a partial block that holds units, and chunk_block of a shared
# root chunk (both are otherwise a chunk or block id, or -1 for none)
SHARED = -2
# units of a partial block: 32 of 64 KiB (its aligned groups of 16 positions wholly inside
# it), then 16 of 4 KiB for the positions of its first group and 16 for its last
UNITS = 64

# the progress front-end's fe_pend states of a page: no fault pending, a fault in the
# queue, a fault in the batch being serviced
PEND_NONE, PEND_QUEUED, PEND_FLIGHT = 0, 1, 2
# a block whose row queued faults this many times without passing it cannot make progress
# (its row needs more memory than the GPU holds): the replay stops with an error, not a hang
MAX_ROW_FAULTS = 1 << 16

# the parts' records that hold settings, by their field in the state (new_state's `options`
# names their fields)
RECORDS = {"pool": POOL, "driver": DRIVER, "translation": TRANSLATION, "frontend": FRONTEND}

_STATE_FIELDS = [
    # ---- memory: residency and the chunk pool
    "pstate",       # uint8[n_pages] POP/RES/INB/DUP bits
    "b_chunk",      # int32[n_blocks] chunk held by each block, -1 if none
    "b_nres",       # int32[n_blocks] GPU-resident pages of each block
    "bres",         # uint64[n_blocks*8] resident positions of each block, a bit each
                    # (uvmsim.engine.bits); mirrors the RES bits of pstate
    "chunk_block",  # int32[n_chunks] block holding each chunk, -1 if free, SHARED if a
                    # shared root chunk (partial_blocks)
    "free_stack",   # int32[n_chunks] free chunks; top at pool[0].n_free - 1
    "pool",         # POOL record
    "victim",       # int64[3] victim hook output: chunk, first position, last position
    "wbits",        # uint64[8] scratch: positions being made resident
    "b_tenant",     # int64[n_blocks] tenant whose trace the block belongs to (0..n_tenants-1)
    "t_chunks",     # int64[n_tenants] chunks each tenant's blocks hold
    # partial_blocks (size-1 dummies while off): a partial block's units by its slot,
    # UNITS per slot (unit_of in engine/parts/memory.py); each shared root chunk's units
    # are a doubly linked list of unit ids (slot * UNITS + unit)
    "b_slot",       # int32[n_blocks] slot of a partial block, -1 for a whole one
    "slot_block",   # int32[n_slots] the block of each slot
    "u_root",       # int32[n_slots*UNITS] root chunk holding each unit, -1 if none
    "u_next",       # int32[n_slots*UNITS] next unit of the same root chunk, -1 at the end
    "u_prev",       # int32[n_slots*UNITS] previous one, -1 at the head
    "r_head",       # int32[n_chunks] first unit of a shared root chunk, -1 if none
    "r_room",       # int32[n_chunks] 4 KiB pages still free in a shared root chunk
    "mem",          # the memory component's state (a namedtuple of arrays its init built;
                    # uvmsim.components.memory); hooks.EmptyState for the default
    # ---- driver: the fault batch, its service, the mechanisms
    "b_rank",       # int64[n_blocks] service order: by first page, then allocation base
    "rank_block",   # int64[n_blocks] inverse of b_rank
    "batch_page",   # int64[batch_size] dense pages of the open fault batch
    "batch_key",    # int64[batch_size] scratch: block rank * 512 + window position
    "fbits",        # uint64[8] faulted positions of the block being serviced
    "rbits",        # uint64[8] resident positions of that block (input to prefetch)
    "pbits",        # uint64[8] prefetch positions chosen by the policy
    "driver",       # DRIVER record
    "pg_last",      # float64[n_pages] time of the page's last migration to the GPU
    "pg_pin",       # float64[n_pages] time until which the page is pinned (mapped remotely)
    "pg_thr",       # uint8[n_pages] consecutive thrashing events (each within the lapse)
    "pg_throt",     # uint8[n_pages] times the page was throttled
    "pg_adv",       # uint8[n_pages] cudaMemAdvise bits (ADV_*)
    "ac_count",     # int64[n_blocks*32] access counters (per block or 64 KiB leaf)
    "ac_trips",     # int32[n_blocks*32] round trips (evictions) per 64 KiB leaf
    "t_remote",     # uint8[n_tenants] 1 while a scheduler component has the tenant's GPU
                    # misses served remotely instead of migrating (uvmsim.components.sched)
    # ---- link
    "xfer",         # float64[2, 513] time of a copy of k pages (k <= 512, one block) host
                    # to device [0, k] and device to host [1, k]: uvmsim.engine.link's
                    # curves, computed once, so a copy costs a load instead of an atan
    "hw",           # HARDWARE record
    # ---- translation (size-1 dummies when off)
    "b_vbase",      # int64[n_blocks] virtual page of window position 0 (< 2^50)
    "tlb_tag",      # int64[sets*ways] translation tag held by each TLB entry, -1 if none
    "tlb_ready",    # float64[sets*ways] time its walk completes (a later miss merges)
    "tlb_used",     # int64[sets*ways] LRU stamp within the set
    "walk_free",    # float64[walkers] time each page-table walker becomes free
    "translation",  # TRANSLATION record
    # ---- front-end and results
    "frontend",     # FRONTEND record
    # the progress front-end (size-1 dummies while off; uvmsim.engine.blocks builds them
    # from the trace's v1.2 streams): by kernel, block and stream row, then its run's state
    "fe_slots",     # int64[n_kernels] resident thread-block slots; 0: no stream (page sets)
    "fe_sms",       # int64[n_kernels] the SMs the blocks are dispatched over (>= 1)
    "fe_bstart",    # int64[n_kernels+1] the kernel's blocks (CSR), in dispatch (id) order
    "fe_bdur",      # int64[n_blk] a block's run in the instrumented clock, ns (>= 1)
    "fe_rstart",    # int64[n_blk+1] the block's stream rows (CSR), in touch order
    "fe_rt",        # int64[n_rows] a row's time from its block's start, ns
    "fe_rlo",       # int64[n_rows] the row's pages: fe_acc[fe_rlo:fe_rhi], the kernel's
    "fe_rhi",       #   access rows inside the row's unit (one at unit 4 KiB)
    "fe_acc",       # int64[n_acc] access rows (indices of T.row_*) by kernel, by page
    "fe_cur",       # int64[max blocks] a block's next row (fe_rstart[b+1]: its tail)
    "fe_stalled",   # int64[max blocks] blocks stalled on faults, waiting for a service end
    "fe_refault",   # int64[max blocks] times the block's current row queued faults
    "fe_slot",      # int64[max blocks] the slot (tournament leaf) a block holds
    "fe_tree_t",    # float64[2 * max slots] tournament of the slots' next events: time
    "fe_tree_b",    # int64[2 * max slots]      and block (ties: lower id); node 1 least
    "fe_pend",      # uint8[n_pages] PEND_QUEUED / PEND_FLIGHT while a fault on it is pending
    "fe_q_row",     # int64[n_pages] the fault queue (a ring): access row of each fault
    "fe_q_t",       # float64[n_pages]                          and its arrival
    "fe_q_key",     # int64[n_pages]      and its order key (fault_order age: the block's
                    #                     dispatch index // fe_sms; arrival: 0)
    "fe_flight",    # int64[batch_size] access rows of the batch in service
    "fe_sbuf",      # int64[max blocks * store_ahead] pages of a block's outstanding stores
    "fe_scnt",      # int64[max blocks] how many of its fe_sbuf slots are held
    "fe_bsm",       # int64[max blocks] the SM a block runs on (first wave: j % fe_sms)
    "fe_smout",     # int64[max SMs] outstanding stores of the SM's blocks (sm_store_pool)
    "t_live",       # uint8[n_tenants] 1 while the tenant has events left
    "counts",       # int64[n_kernels+n_out_rows, N_COUNTS]; last rows: outside kernels
    "times",        # float64[n_kernels+n_out_rows, N_TIMES]
]
_RECORD_FIELDS = {"pool", "driver", "hw", "translation", "frontend"}


@structref.register
class EngineStateType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((n, types.unliteral(t)) for n, t in fields)


class _Proxy(structref.StructRefProxy):
    """Python side: fields read as the very NumPy arrays the compiled code writes into (a
    part's record as a numpy.recarray view, so S.pool[0].n_free reads and writes it)."""

    _fields: list[str] = []

    def __new__(cls, *arrays):
        # compiled code takes a record as a plain array (a recarray view would be its own type)
        arrays = [np.asarray(a) if f in _RECORD_FIELDS else a
                  for f, a in zip(cls._fields, arrays)]
        self = super().__new__(cls, *arrays)
        self._arrays = {f: (a.view(np.recarray) if f in _RECORD_FIELDS else a)
                        for f, a in zip(cls._fields, arrays)}
        return self

    def __getattr__(self, name):
        try:
            return self.__dict__["_arrays"][name]
        except KeyError:
            raise AttributeError(name) from None


class EngineState(_Proxy):
    """Mutable replay state (fields listed in _STATE_FIELDS)."""

    _fields = _STATE_FIELDS


structref.define_proxy(EngineState, EngineStateType, _STATE_FIELDS)


@structref.register
class EngineTraceType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((n, types.unliteral(t)) for n, t in fields)


class EngineTrace(_Proxy):
    """The trace's dense arrays (uvmsim.trace.TraceArrays) as the engine reads them."""


def engine_trace(arrays) -> EngineTrace:
    """Wrap a TraceArrays namedtuple for the compiled engine (no copy)."""
    return EngineTrace(*arrays)


def _define_trace_proxy() -> None:
    from ..trace.model import TraceArrays
    EngineTrace._fields = list(TraceArrays._fields)
    structref.define_proxy(EngineTrace, EngineTraceType, list(TraceArrays._fields))


_define_trace_proxy()


class StateSizes(NamedTuple):
    """The sizes an engine state's arrays are made for."""

    n_pages: int            # dense pages of the trace(s)
    n_blocks: int           # dense VA blocks
    n_chunks: int           # chunks in the pool (uvmsim.replay.chunk_pool)
    n_kernels: int          # kernels: the first rows of counts and times
    batch_size: int         # the fault batch's capacity
    n_tenants: int = 1
    n_out_rows: int = 1     # rows after the kernels' for what happens outside kernels (one
                            # per tenant in a multi-tenant replay)
    capacity: int | None = None  # the GPU's in chunks when the pool holds fewer (n_chunks;
                                 # see POOL.capacity); None: n_chunks


def new_state(sizes: StateSizes, b_rank: np.ndarray, hw: np.ndarray, *, translation=None,
              b_vbase: np.ndarray | None = None, b_tenant: np.ndarray | None = None,
              options: dict | None = None, mem: tuple | None = None,
              progress: dict | None = None, b_slot: np.ndarray | None = None) -> EngineState:
    """All-empty state for arrays of `sizes`: nothing populated or resident, every chunk
    free, TLB empty.

    `b_rank` is each block's service order (uvmsim.replay.block_service_rank); `hw` the
    HARDWARE record (uvmsim.config.Hardware.record). `translation` (uvmsim.config.Translation
    or None) sizes the TLB and walkers; `b_vbase` is each block's translation base (the
    virtual page of its window position 0) and `b_tenant` its tenant (default: all 0); both
    are checked here, as compiled code indexes tenant arrays with b_tenant and builds TLB
    tags from both; `options` sets fields of the parts' records by name (the model's
    options: uvmsim.replay.model_options; none: all off); `mem` the memory component's state
    (None: the default's, hooks.EmptyState); `progress` the progress front-end's arrays by
    field (uvmsim.engine.blocks.progress_arrays; None: off); `b_slot` each block's
    partial-block slot (uvmsim.replay.partial_slots; None: the partial_blocks option off).
    """
    n_pages, n_blocks, n_chunks, n_kernels, batch_size, n_tenants, n_out_rows, capacity = sizes
    if not 1 <= n_tenants <= MAX_TENANTS:
        raise ConfigError(f"{n_tenants} tenants: between 1 and {MAX_TENANTS} may share a GPU")
    b_vbase = (np.zeros(n_blocks, np.int64) if b_vbase is None
               else np.ascontiguousarray(b_vbase, np.int64))
    b_tenant = (np.zeros(n_blocks, np.int64) if b_tenant is None
                else np.ascontiguousarray(b_tenant, np.int64))
    for name, x, hi in (("b_vbase", b_vbase, VPAGE_LIMIT), ("b_tenant", b_tenant, n_tenants)):
        if x.size != n_blocks or (x.size and (int(x.min()) < 0 or int(x.max()) >= hi)):
            raise ConfigError(f"engine state: {name} must hold {n_blocks} values in 0..{hi - 1}")
    recs = {name: record(dt) for name, dt in RECORDS.items()}
    for name, v in (options or {}).items():
        owner = [r for r, dt in RECORDS.items() if name in dt.names]
        if not owner:
            raise KeyError(f"no engine option {name!r}")
        recs[owner[0]][0][name] = v
    pool, drv, xl = recs["pool"][0], recs["driver"][0], recs["translation"][0]
    pool["n_free"] = n_chunks
    pool["victim_tenant"] = -1
    pool["capacity"] = n_chunks if capacity is None else capacity
    pool["free_pages"] = pool["capacity"] * 512
    pool["cur_root"] = -1
    if pool["partial_blocks"] and b_slot is None:
        raise ConfigError("engine state: partial_blocks needs each block's slot (b_slot)")
    if b_slot is None:
        b_slot = np.full(1, -1, np.int32)
        slot_block = np.zeros(1, np.int32)
    else:
        b_slot = np.ascontiguousarray(b_slot, np.int32)
        n_slots = int(b_slot.max(initial=-1)) + 1
        if b_slot.size != n_blocks or not np.array_equal(np.sort(b_slot[b_slot >= 0]),
                                                          np.arange(n_slots)):
            raise ConfigError("engine state: b_slot must number the partial blocks 0, 1, ...")
        slot_block = np.zeros(max(1, n_slots), np.int32)
        slot_block[b_slot[b_slot >= 0]] = np.flatnonzero(b_slot >= 0)
    n_units = slot_block.size * UNITS if pool["partial_blocks"] else 1
    n_roots = n_chunks if pool["partial_blocks"] else 1
    rank_block = np.empty_like(b_rank)
    rank_block[b_rank] = np.arange(b_rank.size, dtype=np.int64)
    hw = np.asarray(hw)
    if hw.dtype != HARDWARE or hw.shape != (1,):
        raise ConfigError("engine state: hw must be one HARDWARE record "
                          f"(uvmsim.config.Hardware.record()), got {hw.dtype} {hw.shape}")
    hw = np.ascontiguousarray(hw)
    n_entries = 1
    walkers = 1
    if translation is not None:
        ways = int(translation.ways)
        n_entries = int(translation.tlb_entries)
        walkers = int(translation.walkers)
        xl["on"] = 1
        xl["sets"] = n_entries // ways
        xl["ways"] = ways
        xl["shift"] = int(translation.page_size // 4096).bit_length() - 1
        xl["walkers"] = walkers
        xl["walk_ns"] = float(translation.walk_ns)
    # the mechanisms' per-page and per-leaf arrays exist only when they are on
    npg = n_pages if drv["mechanisms"] else 1
    nac = n_blocks * 32 if drv["remote"] else 1
    fields = dict(
        pstate=np.zeros(n_pages, np.uint8),
        b_chunk=np.full(n_blocks, -1, np.int32),
        b_nres=np.zeros(n_blocks, np.int32),
        bres=np.zeros(n_blocks * 8, np.uint64),
        chunk_block=np.full(n_chunks, -1, np.int32),
        free_stack=np.arange(n_chunks - 1, -1, -1, dtype=np.int32),
        pool=recs["pool"], victim=np.zeros(3, np.int64), wbits=np.zeros(8, np.uint64),
        b_tenant=b_tenant, t_chunks=np.zeros(n_tenants, np.int64),
        b_slot=b_slot, slot_block=slot_block, u_root=np.full(n_units, -1, np.int32),
        u_next=np.full(n_units, -1, np.int32), u_prev=np.full(n_units, -1, np.int32),
        r_head=np.full(n_roots, -1, np.int32), r_room=np.zeros(n_roots, np.int32),
        mem=empty_state() if mem is None else mem,
        b_rank=b_rank, rank_block=rank_block,
        batch_page=np.zeros(batch_size, np.int64), batch_key=np.zeros(batch_size, np.int64),
        fbits=np.zeros(8, np.uint64), rbits=np.zeros(8, np.uint64),
        pbits=np.zeros(8, np.uint64), driver=recs["driver"],
        pg_last=np.full(npg, -1.0), pg_pin=np.zeros(npg), pg_thr=np.zeros(npg, np.uint8),
        pg_throt=np.zeros(npg, np.uint8), pg_adv=np.zeros(npg, np.uint8),
        ac_count=np.zeros(nac, np.int64), ac_trips=np.zeros(nac, np.int32),
        t_remote=np.zeros(n_tenants, np.uint8),
        xfer=transfer_table(hw), hw=hw,
        b_vbase=b_vbase,
        tlb_tag=np.full(n_entries, -1, np.int64), tlb_ready=np.zeros(n_entries, np.float64),
        tlb_used=np.zeros(n_entries, np.int64), walk_free=np.zeros(walkers, np.float64),
        translation=recs["translation"], frontend=recs["frontend"],
        **_progress_fields(progress, n_kernels, n_pages, batch_size,
                           int((options or {}).get("store_ahead", 0))),
        t_live=np.ones(n_tenants, np.uint8),
        counts=np.zeros((n_kernels + n_out_rows, N_COUNTS), np.int64),
        times=np.zeros((n_kernels + n_out_rows, N_TIMES), np.float64))
    return EngineState(*(fields[f] for f in _STATE_FIELDS))


_PROGRESS_INPUTS = {"fe_slots": np.int64, "fe_sms": np.int64, "fe_bstart": np.int64,
                    "fe_bdur": np.int64,
                    "fe_rstart": np.int64, "fe_rt": np.int64, "fe_rlo": np.int64,
                    "fe_rhi": np.int64, "fe_acc": np.int64}


def _progress_fields(progress: dict | None, n_kernels: int, n_pages: int,
                     batch_size: int, store_ahead: int) -> dict:
    """The progress front-end's fields: its inputs (checked by uvmsim.engine.blocks) and
    its run's state sized by them (and `store_ahead` slots of outstanding stores a block);
    size-1 dummies (no kernel has a stream) while off."""
    if progress is None:
        one = {f: np.zeros(n_kernels if f in ("fe_slots", "fe_sms") else 1, t)
               for f, t in _PROGRESS_INPUTS.items()}
        one["fe_sms"][:] = 1
        one["fe_bstart"] = np.zeros(n_kernels + 1, np.int64)
        n_b, n_s, n_pg, n_f, n_sm = 1, 1, 1, 1, 1
    else:
        one = {f: np.ascontiguousarray(progress[f], t) for f, t in _PROGRESS_INPUTS.items()}
        n_b = max(1, int(np.diff(one["fe_bstart"]).max(initial=0)))
        n_s = max(1, int(one["fe_slots"].max(initial=0)))
        n_pg, n_f = max(1, n_pages), batch_size
        # a block's SM is j % fe_sms for the first wave (j < slots), then a freed one's
        n_sm = max(1, int(np.minimum(one["fe_sms"], one["fe_slots"]).max(initial=1)))
    return dict(one, fe_cur=np.zeros(n_b, np.int64), fe_stalled=np.zeros(n_b, np.int64),
                fe_refault=np.zeros(n_b, np.int64),
                fe_slot=np.zeros(n_b, np.int64),
                fe_tree_t=np.zeros(2 * n_s), fe_tree_b=np.zeros(2 * n_s, np.int64),
                fe_pend=np.zeros(n_pg, np.uint8), fe_q_row=np.zeros(n_pg, np.int64),
                fe_q_t=np.zeros(n_pg), fe_q_key=np.zeros(n_pg, np.int64),
                fe_flight=np.zeros(n_f, np.int64),
                fe_sbuf=np.zeros(max(1, n_b * store_ahead) if progress else 1, np.int64),
                fe_scnt=np.zeros(n_b, np.int64), fe_bsm=np.zeros(n_b, np.int64),
                fe_smout=np.zeros(n_sm, np.int64))
