"""Engine state and constants shared by the compiled replay and the policies.

State is a set of flat NumPy arrays held by a Numba StructRef, so the compiled replay, the
policy hooks and the reference model all read it by name (S.pstate, T.row_page). A StructRef
is passed as one pointer: passing the same arrays as a 40-field tuple cost about 0.3 s of
compile time per call site. Policies may read any field; only the engine writes them.
"""
from __future__ import annotations

import numpy as np
from numba import types
from numba.experimental import structref

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
(C_FAULTS, C_FAULTS_READ, C_FAULTS_WRITE, C_BATCHES, C_HTOD_DEMAND, C_HTOD_PREFETCH,
 C_HTOD_MEMCPY, C_HTOD_API, C_ZERO_FILL, C_EVICTED, C_DTOH_EVICT, C_DTOH_API) = range(12)
N_COUNTS = len(COUNT_NAMES)
HTOD_COLS = (C_HTOD_DEMAND, C_HTOD_PREFETCH, C_HTOD_MEMCPY, C_HTOD_API)
# the htod count column of each cause
CAUSE_HTOD_COL = np.array([C_HTOD_DEMAND, C_HTOD_PREFETCH, C_HTOD_MEMCPY, -1, C_HTOD_API],
                          np.int64)

# time columns per kernel row
T_STALL, T_TRANSFER = range(2)
N_TIMES = 2

# hardware parameter vector (see uvmsim.config.Hardware.vector)
HW_BATCH_NS, HW_FAULT_NS, HW_XFER_LAT_NS, HW_BW_A, HW_BW_B, HW_ZERO_NS = range(6)
N_HW = 6

# scalar slots
S_NFREE, S_TACC_NS = range(2)

_STATE_FIELDS = [
    "pstate",       # uint8[n_pages] POP/RES/INB bits
    "b_chunk",      # int32[n_blocks] chunk held by each block, -1 if none
    "b_nres",       # int32[n_blocks] GPU-resident pages of each block
    "b_rank",       # int64[n_blocks] service order: by first page, then allocation base
    "rank_block",   # int64[n_blocks] inverse of b_rank
    "chunk_block",  # int32[n_chunks] block holding each chunk, -1 if free
    "free_stack",   # int32[n_chunks] free chunks; top at scal[S_NFREE]-1
    "scal",         # int64[4] scalars (S_NFREE)
    "tacc",         # float64[1] transfer time accumulated by the current step
    "batch_page",   # int64[batch_size] dense pages of the open fault batch
    "batch_key",    # int64[batch_size] scratch: block rank * 512 + window position
    "fmask",        # uint8[512] faulted positions of the block being serviced
    "rmask",        # uint8[512] resident positions of that block (input to prefetch)
    "pmask",        # uint8[512] prefetch positions chosen by the policy
    "victim",       # int64[3] victim hook output: chunk, first position, last position
    "counts",       # int64[n_kernels+1, N_COUNTS]; last row: outside kernels
    "times",        # float64[n_kernels+1, N_TIMES]
    "hw",           # float64[N_HW]
]


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
              b_rank: np.ndarray, hw: np.ndarray) -> EngineState:
    """All-empty state: nothing populated or resident, every chunk free."""
    rank_block = np.empty_like(b_rank)
    rank_block[b_rank] = np.arange(b_rank.size, dtype=np.int64)
    scal = np.zeros(4, np.int64)
    scal[S_NFREE] = n_chunks
    fields = dict(
        pstate=np.zeros(n_pages, np.uint8),
        b_chunk=np.full(n_blocks, -1, np.int32),
        b_nres=np.zeros(n_blocks, np.int32),
        b_rank=b_rank, rank_block=rank_block,
        chunk_block=np.full(n_chunks, -1, np.int32),
        free_stack=np.arange(n_chunks - 1, -1, -1, dtype=np.int32),
        scal=scal, tacc=np.zeros(1, np.float64),
        batch_page=np.zeros(batch_size, np.int64), batch_key=np.zeros(batch_size, np.int64),
        fmask=np.zeros(512, np.uint8), rmask=np.zeros(512, np.uint8),
        pmask=np.zeros(512, np.uint8), victim=np.zeros(3, np.int64),
        counts=np.zeros((n_kernels + 1, N_COUNTS), np.int64),
        times=np.zeros((n_kernels + 1, N_TIMES), np.float64),
        hw=hw.astype(np.float64))
    return EngineState(*(fields[f] for f in _STATE_FIELDS))
