"""uvmtrace v1.2: launch attributes and per-thread-block access streams.

A v1.2 trace may say, per kernel launch, how many thread blocks it had, how large they were,
what they needed (registers, shared memory) and how many of them the hardware could keep
resident per SM (kernels.parquet), and, per thread block, in which order and when it first
touched each unit of memory (blocks.parquet, block_accesses.parquet). docs/trace-format.md
("v1.2") is the contract; this module checks it and turns the tables into flat arrays:

* `launch_arrays(trace)` - the launch columns as int64 arrays by kernel rank (-1: unknown);
* `trace.streams` / `load_streams(trace)` - the streams as CSR arrays (`Streams`), read and
  checked on first use, so a replay that does not use them pays neither memory nor time;
* `stream_tables(...)` - the collector's rule for a kernel's stream (unit, tick, rows) from
  its page-level first touches, shared by the synthetic generators and the builder.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import TraceFormatError
from . import _streams as C
from .format import (BLOCK_ACCESSES, BLOCKS, KERNELS, MAX_STREAM_UNIT, MIN_STREAM_UNIT,
                     OPTIONAL_MINOR, PAGE_SHIFT, SCHEMAS, STREAM_FILES)

#: collector defaults (native_trace/src/streams_host.h implements the same rule)
ROWS_FACTOR = 8        # a kernel's stream holds at most 8 x its access rows + its blocks
TICK_BITS = 18         # a kernel's run spans at most 2**18 ticks
MAX_TICK_NS = 1 << 31  # so that t * tick stays below 2**63
LAUNCH_COLUMNS = ("n_blocks", "threads_per_block", "regs_per_thread", "smem_static_bytes",
                  "smem_dynamic_bytes", "cluster_blocks", "sm_count", "max_blocks_per_sm")
STREAM_COLUMNS = ("stream_unit", "stream_tick_ns")
# Parquet layout of the stream tables: sorted integer columns delta-encode to a few bits a
# row (docs/trace-format.md, "Size"); flags are a dictionary of at most 7 values
_ENCODING = {"kernel_id": "DELTA_BINARY_PACKED", "block": "DELTA_BINARY_PACKED",
             "page": "DELTA_BINARY_PACKED", "t": "DELTA_BINARY_PACKED",
             "t_start": "DELTA_BINARY_PACKED", "t_end": "DELTA_BINARY_PACKED"}


class LaunchArrays(NamedTuple):
    """The v1.2 launch columns of kernels.parquet by kernel rank (event order); -1 where a
    value is unknown (column absent or null)."""

    n_blocks: np.ndarray
    threads_per_block: np.ndarray
    regs_per_thread: np.ndarray
    smem_static_bytes: np.ndarray
    smem_dynamic_bytes: np.ndarray
    cluster_blocks: np.ndarray
    sm_count: np.ndarray
    max_blocks_per_sm: np.ndarray


class Streams(NamedTuple):
    """The per-thread-block access streams of a trace, as flat arrays.

    Kernels are indexed by rank (event order, as in TraceArrays); a kernel's blocks are
    [k_block_start[k], k_block_start[k+1]) in ascending block id; a block's rows are
    [blk_row_start[b], blk_row_start[b+1]) in the order the block first touched them. Pages
    use TraceArrays' dense numbering. Times are ns of the instrumented run.
    """

    k_unit: np.ndarray         # int8[n_kernels] log2 bytes of a row's unit; 0: no stream
    k_tick_ns: np.ndarray      # int64[n_kernels] resolution of the times (0: no stream)
    k_block_start: np.ndarray  # int64[n_kernels + 1]
    blk_id: np.ndarray         # int64[n_blk] linear block id (x fastest)
    blk_t_start: np.ndarray    # int64[n_blk] ns from the kernel's first recorded access
    blk_t_end: np.ndarray      # int64[n_blk] ns, the block's last recorded access
    blk_row_start: np.ndarray  # int64[n_blk + 1]
    row_page: np.ndarray       # int32[n_rows] dense page (the first the block touched in the unit)
    row_t: np.ndarray          # int64[n_rows] ns from the block's start
    row_flags: np.ndarray      # uint8[n_rows] the block's accesses to the unit

    @property
    def n_rows(self) -> int:
        return int(self.row_page.size)

    def has_stream(self, k: int) -> bool:
        """Whether kernel rank k has a stream (else the replay uses its page set)."""
        return bool(self.k_unit[k] != 0)


# --------------------------------------------------------------------------- kernels
def _int_or_minus1(kernels: pd.DataFrame, col: str) -> np.ndarray:
    """A nullable integer column as int64, nulls as -1 and values clipped at 2**62 (the
    checks only compare against bounds far below)."""
    if col not in kernels:
        return np.full(len(kernels), -1, np.int64)
    c = kernels[col]
    if c.dtype.kind in "ui":  # no nulls (pandas gives floats or objects otherwise)
        return np.minimum(c.to_numpy(), np.uint64(1 << 62) if c.dtype.kind == "u"
                          else np.int64(1 << 62)).astype(np.int64)
    v = pd.to_numeric(c, errors="coerce").to_numpy(np.float64, na_value=np.nan)
    return np.where(np.isnan(v), -1.0, np.minimum(v, 2.0**62)).astype(np.int64)


def launch_arrays(trace_or_kernels: Any) -> LaunchArrays:
    """The launch columns of a Trace (or of a kernels DataFrame in event order)."""
    k = getattr(trace_or_kernels, "kernels", trace_or_kernels)
    return LaunchArrays(*(_int_or_minus1(k, c) for c in LAUNCH_COLUMNS))


def check_kernel_columns(kernels: pd.DataFrame, fk: str) -> None:
    """The value rules of the v1.2 kernel columns (their types were checked already)."""
    for col in ("n_blocks", "threads_per_block", "cluster_blocks", "sm_count"):
        if col in kernels:
            v = _int_or_minus1(kernels, col)
            bad = v == 0
            if bad.any():
                raise TraceFormatError(f"{col} must be >= 1", file=fk, column=col,
                                       row=int(np.flatnonzero(bad)[0]))
    if "stream_unit" not in kernels:
        return
    unit = _int_or_minus1(kernels, "stream_unit")
    has = unit >= 0
    bad = has & ((unit < MIN_STREAM_UNIT) | (unit > MAX_STREAM_UNIT))
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(f"stream_unit {unit[r]} out of range ({MIN_STREAM_UNIT}.."
                               f"{MAX_STREAM_UNIT})", file=fk, column="stream_unit", row=r)
    tick = _int_or_minus1(kernels, "stream_tick_ns")
    bad = has & ((tick < 1) | (tick > MAX_TICK_NS))
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        what = "missing" if tick[r] < 0 else f"{tick[r]} out of range (1..2**31)"
        raise TraceFormatError(f"stream_tick_ns {what} for a kernel with a stream", file=fk,
                               column="stream_tick_ns", row=r)
    nb = _int_or_minus1(kernels, "n_blocks")
    bad = has & ((nb < 1) | (nb > 1 << 32))
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        what = "missing" if nb[r] < 0 else f"{nb[r]} above 2**32 (block ids are 32-bit)"
        raise TraceFormatError(f"n_blocks {what} for a kernel with a stream", file=fk,
                               column="n_blocks", row=r)


def uses_v12(kernel_columns: list[str]) -> bool:
    return any(OPTIONAL_MINOR.get(c, 0) >= 2 for c in kernel_columns)


def _stream_units(kernels: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unit, tick, n_blocks) by kernel rank; unit 0 where the kernel has no stream."""
    unit = np.maximum(_int_or_minus1(kernels, "stream_unit"), 0)
    tick = np.where(unit > 0, _int_or_minus1(kernels, "stream_tick_ns"), 0)
    return unit, tick, _int_or_minus1(kernels, "n_blocks")


def check_presence(kernels: pd.DataFrame, present: tuple[bool, bool], fk: str,
                   names: dict[str, str]) -> bool:
    """The stream files come together, and a kernel with a stream_unit needs them. Returns
    whether the trace has streams."""
    have_b, have_a = present
    if have_b != have_a:
        missing = BLOCK_ACCESSES if have_b else BLOCKS
        raise TraceFormatError("missing file (the two stream files come together)",
                               file=names[missing])
    if not have_b and "stream_unit" in kernels and kernels["stream_unit"].notna().any():
        r = int(np.flatnonzero(kernels["stream_unit"].notna().to_numpy())[0])
        raise TraceFormatError(f"a kernel has a stream_unit but the trace has no {BLOCKS}",
                               file=fk, column="stream_unit", row=r)
    return have_b


# --------------------------------------------------------------------------- loading
@dataclass
class _Source:
    """Where a trace's stream tables come from: files (checked framing) or Arrow tables."""

    names: dict[str, str]
    tables: dict[str, pa.Table] | None = None
    path: Path | None = None


def open_files(d: Path, names: dict[str, str]) -> None:
    """Check the stream files' Parquet framing and columns (cheap: no data is decoded)."""
    from ._parquet import open_checked
    from .io import _check_columns
    for f in STREAM_FILES:
        pf = open_checked(d / f, names[f])
        _check_columns(pf.schema_arrow.names, f, names[f])


def _read(src: _Source) -> dict[str, pa.Table]:
    from ._parquet import PARQUET_ERRORS, _one_line, open_checked
    from .io import _check_columns, _coerce_table
    out = {}
    for f in STREAM_FILES:
        shown = src.names[f]
        if src.tables is not None:
            out[f] = src.tables[f]
            continue
        pf = open_checked(src.path / f, shown)
        _check_columns(pf.schema_arrow.names, f, shown)
        try:
            t = pf.read(columns=[n for n, _, _ in SCHEMAS[f]], use_threads=True)
        except PARQUET_ERRORS as e:
            raise TraceFormatError(f"unreadable Parquet data ({_one_line(e)})",
                                   file=shown) from None
        out[f] = _coerce_table(t, f, shown)
    return out


def _access_pages(trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each kernel's access rows sorted by virtual page: (CSR by rank, vpage, flags, dense
    page). A streamed trace's rows are read once more from its file for this."""
    A = trace.arrays
    start = A.k_row_start
    if trace.rows is not None:
        n = trace.rows.n_rows
        page, flags = np.empty(n, np.int32), np.empty(n, np.uint8)
        count = np.empty(n, np.uint32)
        sl = np.empty(n if trace.rows.has_slices else 0, np.uint64)
        for _ in trace.rows.fill(page, flags, count, sl):
            pass
        del count, sl
    else:
        page, flags = A.row_page, A.row_flags
    dense = page.astype(np.int64)
    blk = A.page_block[dense]
    vpage = A.b_first_vpage[blk] + A.page_pos[dense].astype(np.int64) - \
        A.b_lo[blk].astype(np.int64)
    rank = np.repeat(np.arange(start.size - 1, dtype=np.int64), np.diff(start))
    order = np.lexsort((vpage, rank))
    return start, vpage[order], flags[order], page[order]


def _col(t: pa.Table, name: str, dtype) -> np.ndarray:
    return t.column(name).combine_chunks().to_numpy(zero_copy_only=False).astype(dtype,
                                                                                 copy=False)


def load_streams(trace, *, source: _Source | None = None) -> Streams | None:
    """Read, check and return the trace's streams (None when it has none); cached on the
    Trace. Raises TraceFormatError naming the file, column and row of the first problem."""
    if "streams" in trace._cache:
        return trace._cache["streams"]
    if source is None:
        source = trace._cache.get("streams_source")
    if source is None:
        return None
    tabs = _read(source)
    fb, fa = source.names[BLOCKS], source.names[BLOCK_ACCESSES]
    kernels = trace.kernels  # event order
    unit, tick, nblocks = _stream_units(kernels)
    n_k = unit.size
    kid = kernels["kernel_id"].to_numpy(np.int64)
    o = np.argsort(kid, kind="stable")
    kid_sorted, kid_rank = kid[o], np.arange(n_k, dtype=np.int64)[o]

    bt = tabs[BLOCKS]
    b_kid, b_block = _col(bt, "kernel_id", np.uint32), _col(bt, "block", np.uint32)
    b_t0, b_t1 = _col(bt, "t_start", np.uint32), _col(bt, "t_end", np.uint32)
    k_block_start = np.zeros(n_k + 1, np.int64)
    err, row, detail = C.check_blocks(kid_sorted, kid_rank, unit, nblocks, b_kid, b_block,
                                      b_t0, b_t1, k_block_start)
    if err != C.OK:
        _raise_blocks(err, int(row), int(detail), fb, fa)

    at = tabs[BLOCK_ACCESSES]
    r_kid, r_block = _col(at, "kernel_id", np.uint32), _col(at, "block", np.uint32)
    r_page = _col(at, "page", np.uint64)
    r_t, r_flags = _col(at, "t", np.uint32), _col(at, "flags", np.uint8)
    big = r_page >= np.uint64(1 << 50)  # beyond every allocation (addresses >= 2**62)
    if big.any():
        r = int(np.flatnonzero(big)[0])
        raise TraceFormatError(f"page {int(r_page[r]):#x} lies outside every access of its "
                               "kernel", file=fa, column="page", row=r)
    r_page = r_page.view(np.int64)
    acc_start, acc_vpage, acc_flags, acc_dense = _access_pages(trace)
    blk_row_start = np.zeros(b_kid.size + 1, np.int64)
    out_dense = np.empty(r_kid.size, np.int32)
    err, row, detail = C.check_rows(kid_sorted, kid_rank, unit, k_block_start, b_block, b_t0,
                                    b_t1, acc_start, acc_vpage, acc_flags, acc_dense, r_kid,
                                    r_block, r_page, r_t, r_flags, blk_row_start, out_dense)
    if err != C.OK:
        if err == C.B_NO_ROWS:
            _raise_blocks(err, int(row), int(detail), fb, fa)
        _raise_rows(err, int(row), int(detail), r_kid, r_block, fa)
    err, r, page = C.check_coverage(unit, acc_start, acc_vpage, k_block_start, blk_row_start,
                                    r_page)
    if err != C.OK:
        k = kernels.iloc[int(r)]
        raise TraceFormatError(
            f"kernel_id {int(k['kernel_id'])} ({k['name']}) touches page {int(page):#x}, which "
            f"no row of its stream covers (unit 2**{int(unit[r])} bytes)", file=fa,
            column="page")
    del acc_vpage, acc_flags, acc_dense
    b_rank = np.repeat(np.arange(n_k, dtype=np.int64), np.diff(k_block_start))
    b_tick = tick[b_rank]
    r_tick = np.repeat(b_tick, np.diff(blk_row_start))
    s = Streams(
        k_unit=unit.astype(np.int8), k_tick_ns=tick.astype(np.int64),
        k_block_start=k_block_start, blk_id=b_block.astype(np.int64),
        blk_t_start=b_t0.astype(np.int64) * b_tick, blk_t_end=b_t1.astype(np.int64) * b_tick,
        blk_row_start=blk_row_start, row_page=out_dense,
        row_t=r_t.astype(np.int64) * r_tick, row_flags=r_flags.copy())
    trace._cache["streams"] = s
    return s


def _raise_blocks(err: int, row: int, detail: int, fb: str, fa: str):
    if err == C.B_UNKNOWN_KERNEL:
        raise TraceFormatError(f"kernel_id {detail} has no row in {KERNELS}", file=fb,
                               column="kernel_id", row=row)
    if err == C.B_NO_STREAM:
        raise TraceFormatError(f"kernel_id {detail} has no stream_unit in {KERNELS}", file=fb,
                               column="kernel_id", row=row)
    if err == C.B_KERNEL_ORDER:
        raise TraceFormatError(f"rows of kernel_id {detail} are out of kernel event order or "
                               "not contiguous", file=fb, column="kernel_id", row=row)
    if err == C.B_BLOCK_ORDER:
        raise TraceFormatError(f"block {detail} is not above the previous block of its kernel "
                               "(blocks ascend, each once)", file=fb, column="block", row=row)
    if err == C.B_BLOCK_RANGE:
        raise TraceFormatError(f"block at or beyond the kernel's n_blocks = {detail}", file=fb,
                               column="block", row=row)
    if err == C.B_TIME:
        raise TraceFormatError("t_start is after t_end", file=fb, column="t_start", row=row)
    if err == C.B_NO_ROWS:
        raise TraceFormatError(f"block has no row in {BLOCK_ACCESSES}", file=fb,
                               column="block", row=row)
    raise TraceFormatError(f"internal validation error {err}", file=fb, row=row)


def _raise_rows(err: int, row: int, detail: int, r_kid, r_block, fa: str):
    where = f"kernel_id {int(r_kid[row])} block {int(r_block[row])}"
    if err == C.R_UNKNOWN_KERNEL:
        raise TraceFormatError(f"kernel_id {detail} has no row in {KERNELS}", file=fa,
                               column="kernel_id", row=row)
    if err == C.R_NO_STREAM:
        raise TraceFormatError(f"kernel_id {detail} has no stream_unit in {KERNELS}", file=fa,
                               column="kernel_id", row=row)
    if err == C.R_KERNEL_ORDER:
        raise TraceFormatError(f"rows of kernel_id {detail} are out of kernel event order or "
                               "not contiguous", file=fa, column="kernel_id", row=row)
    if err == C.R_NO_BLOCK:
        raise TraceFormatError(f"{where}: rows are not grouped by the blocks of {BLOCKS} in "
                               "their order (a block there without rows, a block missing "
                               "there, or a block's rows split or out of order)", file=fa,
                               column="block", row=row)
    if err == C.R_ORDER:
        raise TraceFormatError(f"{where}: rows not sorted by (t, page)", file=fa, column="t",
                               row=row)
    if err == C.R_FLAGS:
        raise TraceFormatError(f"flags {detail} invalid (1..7: read, write, atomic bits; never "
                               "0)", file=fa, column="flags", row=row)
    if err == C.R_T_RANGE:
        raise TraceFormatError(f"{where}: t is beyond the block's run (t_end - t_start = "
                               f"{detail})", file=fa, column="t", row=row)
    if err == C.R_NOT_ACCESSED:
        raise TraceFormatError(f"{where}: page {detail % (1 << 64):#x} is not among its "
                               "kernel's access rows", file=fa, column="page", row=row)
    if err == C.R_FLAGS_SUBSET:
        raise TraceFormatError(f"{where}: flags not within its kernel's flags {detail} for the "
                               "page", file=fa, column="flags", row=row)
    if err == C.R_DUP_UNIT:
        raise TraceFormatError(f"{where}: two rows in one unit of the kernel's stream_unit",
                               file=fa, column="page", row=row)
    raise TraceFormatError(f"internal validation error {err}", file=fa, row=row)


def get(trace) -> Streams | None:
    """`Trace.streams`: the streams, read and checked on first use; None without."""
    return load_streams(trace)


# --------------------------------------------------------------------------- building
def choose_unit(block: np.ndarray, page: np.ndarray, n_access_rows: int, *,
                min_unit: int = MIN_STREAM_UNIT, factor: int = ROWS_FACTOR) -> int:
    """The collector's unit rule: the smallest unit in min_unit..30 (log2 bytes) at which
    the kernel's stream has at most factor x its access rows + its blocks rows (one per
    distinct (block, unit)); 0 when none has."""
    if page.size == 0:
        return min_unit
    bound = factor * n_access_rows + np.unique(block).size
    o = np.lexsort((page, block))
    b, p = block[o].astype(np.int64), page[o].astype(np.int64)
    for u in range(min_unit, MAX_STREAM_UNIT + 1):
        q = p >> (u - PAGE_SHIFT)
        n = 1 + int(np.count_nonzero((b[1:] != b[:-1]) | (q[1:] != q[:-1])))
        if n <= bound:
            return u
    return 0


def tick_for(span_ns: int, bits: int = TICK_BITS) -> int:
    """The collector's tick: the smallest power of two at which the kernel's run (span_ns)
    is below 2**bits ticks."""
    return 1 << max(0, int(span_ns).bit_length() - bits)


def stream_tables(kernel_id: int, block: np.ndarray, page: np.ndarray, t_ns: np.ndarray,
                  flags: np.ndarray, n_access_rows: int, *, block_end_ns: dict | None = None,
                  unit: int | None = None, tick_ns: int | None = None,
                  min_unit: int = MIN_STREAM_UNIT, factor: int = ROWS_FACTOR,
                  tick_bits: int = TICK_BITS) -> tuple[int, int, pd.DataFrame, pd.DataFrame]:
    """One kernel's stream from its page-level first touches, as the collector makes it.

    `block`, `page`, `t_ns`, `flags`: one entry per (block, page) first touch (t_ns in any
    origin; the kernel's earliest touch becomes 0). `block_end_ns` maps a block to the time
    of its last access (default: its last first touch). `unit` and `tick_ns` override the
    collector's choice; `min_unit`, `factor` and `tick_bits` are the collector's knobs (the
    smallest unit its device tables kept, UVMTRACE_STREAM_ROWS_FACTOR,
    UVMTRACE_STREAM_TICK_BITS). Returns (unit, tick_ns, blocks rows, block_accesses rows);
    unit 0 means the stream exceeds every bound (the collector then writes none).
    """
    block = np.asarray(block, np.int64)
    page = np.asarray(page, np.int64)
    t_ns = np.asarray(t_ns, np.int64)
    flags = np.asarray(flags, np.uint8)
    if unit is None:
        unit = choose_unit(block, page, n_access_rows, min_unit=min_unit, factor=factor)
    if unit == 0 or block.size == 0:
        return unit, tick_ns or 1, _empty(BLOCKS), _empty(BLOCK_ACCESSES)
    # a block runs from its first touch to its last access (its last first touch at least)
    ub = np.unique(block)
    t1 = pd.Series(t_ns).groupby(block).max().reindex(ub).to_numpy()
    if block_end_ns:
        t1 = np.maximum(t1, np.array([block_end_ns.get(int(x), -1) for x in ub], np.int64))
    # merge to the unit: earliest touch (ties: lowest page), OR of the flags
    q = page >> (unit - PAGE_SHIFT)
    o = np.lexsort((page, t_ns, q, block))
    b, p, t, f, q = block[o], page[o], t_ns[o], flags[o], q[o]
    first = np.ones(b.size, bool)
    first[1:] = (b[1:] != b[:-1]) | (q[1:] != q[:-1])
    starts = np.flatnonzero(first)
    f = np.bitwise_or.reduceat(f, starts)
    b, p, t = b[starts], p[starts], t[starts]
    t0 = pd.Series(t).groupby(b).min().reindex(ub).to_numpy()
    ref = int(t0.min())
    if tick_ns is None:
        tick_ns = tick_for(int(t1.max()) - ref, tick_bits)
    s_tick = (t0 - ref) // tick_ns
    e_tick = (t1 - ref) // tick_ns
    pos = np.searchsorted(ub, b)
    rt = (t - ref) // tick_ns - s_tick[pos]
    o = np.lexsort((p, rt, b))
    blocks = pd.DataFrame({"kernel_id": np.full(ub.size, kernel_id, np.uint32),
                           "block": ub.astype(np.uint32), "t_start": s_tick.astype(np.uint32),
                           "t_end": e_tick.astype(np.uint32)})
    rows = pd.DataFrame({"kernel_id": np.full(b.size, kernel_id, np.uint32),
                         "block": b[o].astype(np.uint32), "page": p[o].astype(np.uint64),
                         "t": rt[o].astype(np.uint32), "flags": f[o]})
    return unit, tick_ns, blocks, rows


def _empty(f: str) -> pd.DataFrame:
    return pd.DataFrame({n: pd.Series(dtype=t.to_pandas_dtype()) for n, t, _ in SCHEMAS[f]})


def empty_tables() -> dict[str, pd.DataFrame]:
    """Empty blocks and block_accesses tables, typed per the spec."""
    return {"blocks": _empty(BLOCKS), "block_accesses": _empty(BLOCK_ACCESSES)}


# --------------------------------------------------------------------------- writing
def write_files(d: Path, tables: dict[str, pa.Table]) -> None:
    """Write the stream tables into trace directory d (delta-encoded, zstd)."""
    for f in STREAM_FILES:
        t = tables[f]
        enc = {c: e for c, e in _ENCODING.items() if c in t.column_names}
        pq.write_table(t, d / f, compression="zstd", use_dictionary=["flags"],
                       column_encoding=enc)


# --------------------------------------------------------------------------- one kernel
_CODE_NAMES = {v: k for k, v in vars(C).items() if k[:2] in ("B_", "R_") and isinstance(v, int)}


def check_kernel_stream(unit: int, n_blocks: int, blocks: Mapping[str, Any],
                        rows: Mapping[str, Any], acc_page: np.ndarray,
                        acc_flags: np.ndarray) -> str | None:
    """The reader's rules for one kernel's stream against its access rows (page, flags):
    None when they hold, else the name of the first rule broken (for a collector that
    writes no stream rather than a trace the reader refuses). `blocks` and `rows` are frames
    or mappings of column arrays."""
    o = np.argsort(acc_page, kind="stable")
    av = np.asarray(acc_page, np.int64)[o]
    af = np.asarray(acc_flags, np.uint8)[o]
    one = np.zeros(1, np.int64)
    k_unit = np.array([unit], np.int64)
    kbs = np.zeros(2, np.int64)
    b_block = np.asarray(blocks["block"], np.uint32)
    b_t0, b_t1 = np.asarray(blocks["t_start"], np.uint32), np.asarray(blocks["t_end"], np.uint32)
    err, _, _ = C.check_blocks(one, one, k_unit, np.array([n_blocks], np.int64),
                               np.zeros(b_block.size, np.uint32), b_block, b_t0, b_t1, kbs)
    if err != C.OK:
        return _CODE_NAMES.get(err, str(err))
    r_page = np.asarray(rows["page"], np.uint64)
    if (r_page >= np.uint64(1 << 50)).any():
        return "R_NOT_ACCESSED"
    r_page = r_page.view(np.int64)
    brs = np.zeros(b_block.size + 1, np.int64)
    dense = np.empty(r_page.size, np.int32)
    err, _, _ = C.check_rows(one, one, k_unit, kbs, b_block, b_t0, b_t1,
                             np.array([0, av.size], np.int64), av, af,
                             np.arange(av.size, dtype=np.int32),
                             np.zeros(r_page.size, np.uint32), np.asarray(rows["block"], np.uint32),
                             r_page, np.asarray(rows["t"], np.uint32),
                             np.asarray(rows["flags"], np.uint8), brs, dense)
    if err == C.OK:
        err, _, _ = C.check_coverage(k_unit, np.array([0, av.size], np.int64), av, kbs, brs,
                                     r_page)
    return None if err == C.OK else _CODE_NAMES.get(err, str(err))
