"""Engine state and constants shared by the compiled replay and the policies.

State is a set of flat NumPy arrays held by a Numba StructRef, so the compiled replay, the
policy hooks and the reference model all read it by name (S.pstate, T.row_page). A StructRef
is passed as one pointer: passing the same arrays as a 40-field tuple cost about 0.3 s of
compile time per call site. Policies may read any field; only the engine writes them.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import types
from numba.experimental import structref

from ..errors import ConfigError

# pstate bits, one byte per dense page
POP = np.uint8(1)   # populated: the page has data somewhere
RES = np.uint8(2)   # resident on the GPU
INB = np.uint8(4)   # in the current fault batch

# causes of making pages resident
CAUSE_DEMAND, CAUSE_PREFETCH, CAUSE_MEMCPY, CAUSE_MEMSET, CAUSE_API = range(5)

# per-kernel count columns, in the order of the spec's list (htod_bytes is derived)
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
TIME_NAMES = ("stall_ns", "transfer_ns", "translation_ns", "walk_queue_ns", "driver_wait_ns")

# hardware parameter vector (see uvmsim.config.Hardware.vector). HW_EVICT_NS: fixed cost per
# evicted chunk; HW_DTOH_BW: peak of the device-to-host bandwidth curve (0: the host-to-device
# curve); HW_HOST_FAULT_NS: CPU fault cost per page a host access moves or populates
HW_BATCH_NS, HW_FAULT_NS, HW_XFER_LAT_NS, HW_BW_A, HW_BW_B, HW_ZERO_NS = range(6)
HW_EVICT_NS, HW_DTOH_BW, HW_HOST_FAULT_NS = range(6, 9)
N_HW = 9

# scalar slots
S_NFREE, S_TACC_NS = range(2)
# faults in the batch being serviced (S.batch_key[:n], sorted), 0 outside a service
S_NBATCH = 2
# the GPU's capacity in chunks; the pool (free_stack) may hold fewer: no more chunks than
# blocks that can take one, as more could never all be in use
S_CAP = 3
# the tenant whose chunks the eviction policy's next victim must come from (-1: any chunk);
# set by the engine when a memory component (uvmsim.components.memory) restricts an
# eviction, read by victim hooks through uvmsim.policies.base.may_evict
S_VTEN = 4
# small_blocks option: GPU memory still free, in 4 KiB pages (the capacity is counted in
# pages, a block taking its own pages: docs/semantics.md)
S_FREEPG = 5
N_SCAL = 6

_STATE_FIELDS = [
    "pstate",       # uint8[n_pages] POP/RES/INB bits
    "b_chunk",      # int32[n_blocks] chunk held by each block, -1 if none
    "b_nres",       # int32[n_blocks] GPU-resident pages of each block
    "b_rank",       # int64[n_blocks] service order: by first page, then allocation base
    "rank_block",   # int64[n_blocks] inverse of b_rank
    "chunk_block",  # int32[n_chunks] block holding each chunk, -1 if free
    "free_stack",   # int32[n_chunks] free chunks; top at scal[S_NFREE]-1
    "scal",         # int64[N_SCAL] scalars (S_NFREE, S_NBATCH, S_CAP, S_VTEN, S_FREEPG)
    "tacc",         # float64[1] transfer time accumulated by the current step
    "xfer",         # float64[2, 513] time of a copy of k pages (k <= 512, one block) host
                    # to device [0, k] and device to host [1, k]: uvmsim.engine.timing's
                    # curves, computed once, so a copy costs a load instead of an atan
    "batch_page",   # int64[batch_size] dense pages of the open fault batch
    "batch_key",    # int64[batch_size] scratch: block rank * 512 + window position
    "bres",         # uint64[n_blocks*8] resident positions of each block, a bit each
                    # (uvmsim.engine.bits); mirrors the RES bits of pstate
    "fbits",        # uint64[8] faulted positions of the block being serviced
    "rbits",        # uint64[8] resident positions of that block (input to prefetch)
    "pbits",        # uint64[8] prefetch positions chosen by the policy
    "wbits",        # uint64[8] engine scratch: positions being made resident
    "victim",       # int64[3] victim hook output: chunk, first position, last position
    "counts",       # int64[n_kernels+1, N_COUNTS]; last row: outside kernels
    "times",        # float64[n_kernels+1, N_TIMES]
    "hw",           # float64[N_HW]
    # address translation and the simulated clock (size-1 dummies when off)
    "b_vbase",      # int64[n_blocks] virtual page of window position 0 (< 2^50)
    "tlb_tag",      # int64[sets*ways] translation tag held by each TLB entry, -1 if none
    "tlb_ready",    # float64[sets*ways] time its walk completes (a later miss merges)
    "tlb_used",     # int64[sets*ways] LRU stamp within the set
    "walk_free",    # float64[walkers] time each page-table walker becomes free
    "xli",          # int64[N_XLI] translation parameters and counters (XL_*)
    "xlf",          # float64[N_XLF] walk latency, driver-free time (XF_*)
    # thrashing, remote mapping, memory hints (size-1 dummies when off)
    "fcfg",         # float64[N_FCFG] feature switches, parameters and clock (F_*)
    "pg_last",      # float64[n_pages] time of the page's last migration to the GPU
    "pg_pin",       # float64[n_pages] time until which the page is pinned (mapped remotely)
    "pg_thr",       # uint8[n_pages] consecutive thrashing events (each within the lapse)
    "pg_throt",     # uint8[n_pages] times the page was throttled
    "pg_adv",       # uint8[n_pages] cudaMemAdvise bits (ADV_*)
    "ac_count",     # int64[n_blocks*32] access counters (per block or 64 KiB leaf)
    "ac_trips",     # int32[n_blocks*32] round trips (evictions) per 64 KiB leaf
    # tenants (one for simulate)
    "b_tenant",     # int64[n_blocks] tenant whose trace the block belongs to (0..n_tenants-1)
    "t_chunks",     # int64[n_tenants] chunks each tenant's blocks hold
    "t_live",       # uint8[n_tenants] 1 while the tenant has events left (the front end)
    "t_remote",     # uint8[n_tenants] 1 while a scheduler component has the tenant's GPU
                    # misses served remotely instead of migrating (uvmsim.components.sched)
    "mem",          # the memory component's state (a namedtuple of arrays its init built;
                    # uvmsim.components.memory); NoMemState for the default `shared`
]

# the state of the default memory component (`shared`), which needs none
NoMemState = namedtuple("NoMemState", "unused")

# xli slots: on/off, TLB sets, ways, log2(page size / 4 KiB), walkers, LRU clock
XL_ON, XL_SETS, XL_WAYS, XL_SHIFT, XL_WALKERS, XL_TICK = range(6)
N_XLI = 8
# xli slot: tenants the TLB's sets are sliced among (0: one TLB shared by all); set by
# multi-tenant walker components with tlb_slices (uvmsim.components.walkers)
XL_TLB_SLICES = 6
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
# xlf slots: walk latency, time the (shared) driver and its copy engine become free
XF_WALK_NS, XF_DRIVER_FREE = range(2)
N_XLF = 4

# fcfg slots: F_ON any of the three on; F_THRASH/F_ADVISE 0/1; F_REMOTE 0 (off),
# REMOTE_DRIVER or REMOTE_UVMSMART; then parameters; F_CLOCK time at the current kernel's
# start (between kernels: the simulated time); F_PEND_NS stall the mechanisms added in the
# current kernel; F_OVERSUB UVMSmart's sticky "memory has been full" flag
(F_ON, F_THRASH, F_REMOTE, F_ADVISE, F_LAPSE_NS, F_THRESH, F_PIN_THRESH, F_NAP_NS, F_PIN_NS,
 F_EPOCH_NS, F_AC_THRESH, F_AC_PENALTY, F_REMOTE_NS, F_CLOCK, F_PEND_NS, F_OVERSUB) = range(16)
# v1.1 options (docs/semantics.md), 0/1, independent of F_ON: F_SLICES replays kernels in
# time-slice passes; F_HOST_ACCESS applies host_access events
F_SLICES, F_HOST_ACCESS = 16, 17
# small_blocks option (docs/semantics.md), 0/1: a VA block smaller than 2 MiB takes only its
# own pages of GPU memory (the driver backs it with 64 KiB and 4 KiB chunks)
F_SMALL = 18
N_FCFG = 20
REMOTE_DRIVER, REMOTE_UVMSMART = 1, 2
# pg_adv bits
ADV_PREF_GPU, ADV_PREF_CPU, ADV_ACCESSED_BY, ADV_READ_MOSTLY = 1, 2, 4, 8
# pstate bit: the GPU copy is a read duplicate (read-mostly); dropped, not copied, on eviction
DUP = np.uint8(8)
OP_ADVISE = 8  # uvmsim.trace.format.OP_ADVISE
OP_HOST_ACCESS = 10  # uvmsim.trace.format.OP_HOST_ACCESS
# advise event args (uvmsim.trace.format.ARG_CODE)
(ARG_SET_PREF_GPU, ARG_SET_PREF_CPU, ARG_SET_ACCESSED_BY, ARG_SET_READ_MOSTLY,
 ARG_UNSET_PREF_GPU, ARG_UNSET_PREF_CPU, ARG_UNSET_ACCESSED_BY, ARG_UNSET_READ_MOSTLY) = range(3, 11)


@structref.register
class EngineStateType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((n, types.unliteral(t)) for n, t in fields)


class _Proxy(structref.StructRefProxy):
    """Python side: fields read as the very NumPy arrays the compiled code writes into."""

    _fields: list[str] = []

    def __new__(cls, *arrays):
        self = super().__new__(cls, *arrays)
        self._arrays = dict(zip(cls._fields, arrays))
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


def new_state(n_pages: int, n_blocks: int, n_chunks: int, n_kernels: int, batch_size: int,
              b_rank: np.ndarray, hw: np.ndarray, *, translation=None,
              b_vbase: np.ndarray | None = None, b_tenant: np.ndarray | None = None,
              n_out_rows: int = 1,
              features: np.ndarray | None = None, capacity: int | None = None,
              n_tenants: int = 1, mem: tuple | None = None) -> EngineState:
    """All-empty state: nothing populated or resident, every chunk free, TLB empty.

    `translation` (uvmsim.config.Translation or None) sizes the TLB and walkers; `b_vbase`
    is each block's translation base (the virtual page of its window position 0) and
    `b_tenant` its tenant (default: all 0); both are checked here, as compiled code indexes
    tenant arrays with b_tenant and builds TLB tags from both;
    `n_out_rows` rows after the kernels' collect what happens outside kernels (one per
    tenant in a multi-tenant replay); `capacity` is the GPU's in chunks when the pool
    holds fewer (n_chunks; see S_CAP); `mem` the memory component's state (None: the
    default component's, NoMemState).
    """
    if not 1 <= n_tenants <= MAX_TENANTS:
        raise ConfigError(f"{n_tenants} tenants: between 1 and {MAX_TENANTS} may share a GPU")
    b_vbase = (np.zeros(n_blocks, np.int64) if b_vbase is None
               else np.ascontiguousarray(b_vbase, np.int64))
    b_tenant = (np.zeros(n_blocks, np.int64) if b_tenant is None
                else np.ascontiguousarray(b_tenant, np.int64))
    for name, x, hi in (("b_vbase", b_vbase, VPAGE_LIMIT), ("b_tenant", b_tenant, n_tenants)):
        if x.size != n_blocks or (x.size and (int(x.min()) < 0 or int(x.max()) >= hi)):
            raise ConfigError(f"engine state: {name} must hold {n_blocks} values in 0..{hi - 1}")
    rank_block = np.empty_like(b_rank)
    rank_block[b_rank] = np.arange(b_rank.size, dtype=np.int64)
    scal = np.zeros(N_SCAL, np.int64)
    scal[S_NFREE] = n_chunks
    scal[S_VTEN] = -1
    scal[S_CAP] = n_chunks if capacity is None else capacity
    scal[S_FREEPG] = scal[S_CAP] * 512
    from .timing import transfer_table
    fields = dict(
        pstate=np.zeros(n_pages, np.uint8),
        b_chunk=np.full(n_blocks, -1, np.int32),
        b_nres=np.zeros(n_blocks, np.int32),
        b_rank=b_rank, rank_block=rank_block,
        chunk_block=np.full(n_chunks, -1, np.int32),
        free_stack=np.arange(n_chunks - 1, -1, -1, dtype=np.int32),
        scal=scal, tacc=np.zeros(1, np.float64), xfer=transfer_table(hw.astype(np.float64)),
        batch_page=np.zeros(batch_size, np.int64), batch_key=np.zeros(batch_size, np.int64),
        bres=np.zeros(n_blocks * 8, np.uint64), fbits=np.zeros(8, np.uint64),
        rbits=np.zeros(8, np.uint64), pbits=np.zeros(8, np.uint64),
        wbits=np.zeros(8, np.uint64), victim=np.zeros(3, np.int64),
        counts=np.zeros((n_kernels + n_out_rows, N_COUNTS), np.int64),
        times=np.zeros((n_kernels + n_out_rows, N_TIMES), np.float64),
        hw=hw.astype(np.float64))
    xli = np.zeros(N_XLI, np.int64)
    xlf = np.zeros(N_XLF, np.float64)
    n_entries = 1
    walkers = 1
    if translation is not None:
        ways = int(translation.ways)
        n_entries = int(translation.tlb_entries)
        walkers = int(translation.walkers)
        xli[XL_ON] = 1
        xli[XL_SETS] = n_entries // ways
        xli[XL_WAYS] = ways
        xli[XL_SHIFT] = int(translation.page_size // 4096).bit_length() - 1
        xli[XL_WALKERS] = walkers
        xlf[XF_WALK_NS] = float(translation.walk_ns)
    fields.update(
        b_vbase=b_vbase,
        tlb_tag=np.full(n_entries, -1, np.int64), tlb_ready=np.zeros(n_entries, np.float64),
        tlb_used=np.zeros(n_entries, np.int64), walk_free=np.zeros(walkers, np.float64),
        xli=xli, xlf=xlf)
    # `features`: an fcfg vector (uvmsim.simulate builds it); None: all off
    fcfg = np.zeros(N_FCFG, np.float64) if features is None else features.astype(np.float64)
    npg = n_pages if fcfg[F_ON] else 1
    nac = n_blocks * 32 if fcfg[F_REMOTE] else 1
    fields.update(
        fcfg=fcfg, pg_last=np.full(npg, -1.0), pg_pin=np.zeros(npg), pg_thr=np.zeros(npg, np.uint8),
        pg_throt=np.zeros(npg, np.uint8), pg_adv=np.zeros(npg, np.uint8),
        ac_count=np.zeros(nac, np.int64), ac_trips=np.zeros(nac, np.int32))
    fields.update(
        b_tenant=b_tenant, t_chunks=np.zeros(n_tenants, np.int64), t_live=np.ones(n_tenants, np.uint8),
        t_remote=np.zeros(n_tenants, np.uint8),
        mem=NoMemState(np.zeros(1, np.int64)) if mem is None else mem)
    return EngineState(*(fields[f] for f in _STATE_FIELDS))
