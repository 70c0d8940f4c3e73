"""Read, validate and write uvmtrace v1 / v1.1 / v1.2 directories (docs/trace-format.md).

Nothing here knows about simulation: it checks the contract and turns a trace into the
dense arrays of `TraceArrays` once, streaming the access rows so a large trace never sits in
memory twice.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numba import njit

from ..errors import TraceFormatError
from . import _resolve as R
from ._parquet import PARQUET_ERRORS, CheckedFile, _one_line, open_checked
from .columns import TableLike, check_columns, coerce_column, coerce_table, optional_present
from .format import (ACCESSES, ADVISE_ARGS, ALLOCATIONS, ARG_CODE, BLOCK_ACCESSES, BLOCKS,
                     EVENTS, FORMAT, HOST_ACCESS_ARGS, KERNELS, KIND_HOST, KINDS, MANIFEST,
                     MAX_SLICES, MINOR, OP_CODE, OPS, OPTIONAL, OPTIONAL_MINOR, PAGE_SIZE,
                     PREFETCH_ARGS, RANGE_OPS, REQUIRED_FILES, SCHEMAS, STREAM_FILES, V11_OPS,
                     VERSION)
from .model import Trace, TraceArrays

_BATCH_ROWS = 1 << 20
_ADDR_LIMIT = 1 << 62  # addresses are handled as int64 internally


# --------------------------------------------------------------------------- manifest
# A manifest is a few hundred bytes of provenance; the limits keep a hostile one from
# costing time or memory, and keep json's recursive parser far from the interpreter's
# recursion limit.
MANIFEST_MAX_BYTES = 1 << 20
MANIFEST_MAX_DEPTH = 32


def _read_manifest(d: Path) -> dict[str, Any]:
    p = d / MANIFEST
    with open(p, "rb") as f:
        raw = f.read(MANIFEST_MAX_BYTES + 1)
    return parse_manifest(raw, str(p))


def parse_manifest(raw: bytes, file: str = MANIFEST) -> dict[str, Any]:
    """Decode and check manifest.json's bytes (UTF-8 JSON object, size and depth limits,
    exact types: a JSON true is not the integer 1)."""
    if len(raw) > MANIFEST_MAX_BYTES:
        raise TraceFormatError(f"larger than {MANIFEST_MAX_BYTES} bytes", file=file)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceFormatError(f"not UTF-8 (byte {e.start}: {raw[e.start:e.start + 1]!r})",
                               file=file) from None
    if text.startswith("\ufeff"):
        raise TraceFormatError("starts with a byte-order mark (JSON is plain UTF-8)", file=file)
    try:
        m = json.loads(text, object_pairs_hook=_no_duplicate_keys,
                       parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise TraceFormatError(f"not valid JSON ({e.msg} at line {e.lineno})",
                               file=file) from None
    except RecursionError:
        m = None
        depth = MANIFEST_MAX_DEPTH + 1
    except ValueError as e:  # from the hooks
        raise TraceFormatError(str(e), file=file) from None
    else:
        depth = _depth(m)
    if depth > MANIFEST_MAX_DEPTH:
        raise TraceFormatError(f"nested deeper than {MANIFEST_MAX_DEPTH} levels", file=file)
    bad = _not_unicode(m)
    if bad is not None:
        # JSON's \ud800 escapes can spell a lone surrogate, which no UTF-8 text (and so no
        # output of the trace's provenance) can hold
        raise TraceFormatError(f"a string holds a lone surrogate ({bad!r}); the manifest "
                               "must be Unicode text", file=file)
    return _check_manifest(m, file)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} appears twice in one object")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth(obj: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest = 0
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, dict):
            stack.extend((v, d + 1) for v in o.values())
        elif isinstance(o, list):
            stack.extend((v, d + 1) for v in o)
        else:
            continue
        deepest = max(deepest, d)
    return deepest


def _not_unicode(obj: Any) -> str | None:
    """The first string (key or value) of parsed JSON that UTF-8 cannot encode, else None."""
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
        elif isinstance(o, str):
            try:
                o.encode("utf-8")
            except UnicodeEncodeError:
                return o
    return None


def _is_int(v: Any) -> bool:
    return type(v) is int  # bool is a subclass of int; a JSON true must not pass as 1


def _check_manifest(m: Any, file: str) -> dict[str, Any]:
    if not isinstance(m, dict):
        raise TraceFormatError("manifest must be a JSON object", file=file)
    if m.get("format") != FORMAT:
        raise TraceFormatError(f"format is {m.get('format')!r}, expected 'uvmtrace'", file=file)
    v = m.get("version")
    if not _is_int(v) or v != VERSION:
        raise TraceFormatError(f"unknown version {v!r} (this reader knows 1)", file=file)
    minor = m.get("minor", 0)
    if not _is_int(minor) or not 0 <= minor <= MINOR:
        raise TraceFormatError(f"unknown minor version {minor!r} (this reader knows 0..{MINOR})",
                               file=file)
    ps = m.get("page_size", PAGE_SIZE)
    if not _is_int(ps) or ps != PAGE_SIZE:
        raise TraceFormatError(f"page_size {ps!r} unsupported (v1 is 4096)", file=file)
    src = m.get("source", {})
    if not isinstance(src, dict):
        raise TraceFormatError("'source' must be a JSON object", file=file)
    return m


# --------------------------------------------------------------------------- small tables
def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _codes(values: pd.Series, vocab: Mapping[str, int], file: str, column: str,
           allowed_rows: np.ndarray | None = None) -> np.ndarray:
    codes = values.map(vocab)
    bad = codes.isna().to_numpy()
    if allowed_rows is not None:
        bad &= allowed_rows
    if bad.any():
        r = _first(bad)
        raise TraceFormatError(f"unknown value {values.iloc[r]!r}", file=file, column=column,
                               row=r)
    return codes.fillna(0).to_numpy(np.int64)


class _Rows(NamedTuple):
    """The access rows `_build` resolves: their batches, their count (from the file's
    metadata: the output arrays are sized by it), whether they carry v1.1 slices, and for
    a streamed trace a function that returns the batches again from the start."""

    batches: Iterator[pa.RecordBatch]
    n_rows: int
    has_slices: bool = False
    reread: Any = None


class _Allocs(NamedTuple):
    """The allocations table, checked, as arrays (one entry per row)."""

    aid: np.ndarray          # alloc_id
    base: np.ndarray         # int64 base address
    end: np.ndarray          # int64 base + size
    first_page: np.ndarray
    last_page: np.ndarray
    nblocks: np.ndarray      # 2 MiB windows the allocation spans
    block_off: np.ndarray    # key of its first window among all allocations' windows
    host: np.ndarray         # kind is host


class _Events(NamedTuple):
    """The events table, checked, with its references resolved to row positions."""

    op: np.ndarray           # int8 op codes
    ev_alloc: np.ndarray     # allocation row of alloc/free events, -1 otherwise
    ev_kernel: np.ndarray    # kernel order of kernel events, -1 otherwise
    k_event: np.ndarray      # the event row of each kernel, in launch order
    k_pos: np.ndarray        # the kernels-table row of each kernel, in launch order
    addr: np.ndarray         # uint64 addr (0 where null)
    size: np.ndarray         # uint64 size (0 where null)
    arg: np.ndarray          # int8 argument codes


def _build(small: dict[str, pa.Table], rows: _Rows, names: dict[str, str],
           manifest: dict[str, Any], drop_out_of_range: bool, path: Path | None) -> Trace:
    """Check the small tables and resolve the access rows into a Trace. With
    `rows.reread` the rows are checked but not kept: the Trace streams them from the file
    at replay (RowSource)."""
    fa, fe, fk = names[ALLOCATIONS], names[EVENTS], names[KERNELS]
    alloc = small[ALLOCATIONS].to_pandas()
    events = small[EVENTS].to_pandas()
    kernels = small[KERNELS].to_pandas()
    al = _check_allocations(alloc, fa)
    kid, k_nslices = _check_kernels(kernels, fk)
    ev = _check_events(events, small[EVENTS], al.aid, kid, fe, fk)
    seg_start, seg_alloc, seg_first, seg_last, peak = _walk(ev, al, fe)
    return _resolve_trace(
        _Tables(manifest, alloc, events, kernels, names, path), al, ev, kid, k_nslices,
        (seg_start, seg_alloc, seg_first, seg_last, int(peak)), rows, drop_out_of_range)


def _check_allocations(alloc: pd.DataFrame, fa: str) -> _Allocs:
    """alloc_id unique, sizes > 0, addresses below 2**62, kinds known; the windows."""
    aid = alloc["alloc_id"].to_numpy(np.int64)
    dup = pd.Series(aid).duplicated().to_numpy()
    if dup.any():
        raise TraceFormatError(f"alloc_id {aid[_first(dup)]} is not unique", file=fa,
                               column="alloc_id", row=_first(dup))
    size = alloc["size"].to_numpy(np.uint64)
    base = alloc["base"].to_numpy(np.uint64)
    if (size == 0).any():
        raise TraceFormatError("size must be > 0", file=fa, column="size", row=_first(size == 0))
    too_big = (base >= _ADDR_LIMIT) | (size >= _ADDR_LIMIT) | (base + size >= _ADDR_LIMIT)
    if too_big.any():
        raise TraceFormatError("base + size beyond 2**62 is not supported", file=fa,
                               column="base", row=_first(too_big))
    kind = _codes(alloc["kind"], {k: i for i, k in enumerate(KINDS)}, fa, "kind")
    base = base.astype(np.int64)
    end = base + size.astype(np.int64)
    first_page = base >> 12
    last_page = (end - 1) >> 12
    nblocks = (last_page >> 9) - (first_page >> 9) + 1
    # Blocks are keyed by their place in the allocations' reserved windows (allocation
    # order, then address), but only the blocks the trace touches get a dense index and
    # state (_dense_maps): a reservation costs nothing until it is used. Each allocation
    # spans < 2**41 windows, so only an absurd number of huge rows could overflow the keys.
    if float(nblocks.sum(dtype=np.float64)) >= 2.0**62:
        raise TraceFormatError("allocations reserve 2**62 or more 2 MiB blocks in all; not "
                               "supported", file=fa, column="size")
    block_off = np.concatenate([[0], np.cumsum(nblocks)[:-1]]).astype(np.int64)
    host = kind == KIND_HOST
    return _Allocs(aid, base, end, first_page, last_page, nblocks, block_off, host)


def _check_kernels(kernels: pd.DataFrame, fk: str) -> tuple[np.ndarray, np.ndarray]:
    """kernel_id unique, durations >= 0, n_slices in range, the v1.2 launch columns;
    returns the kernel ids and n_slices (0 where not given)."""
    kid = kernels["kernel_id"].to_numpy(np.int64)
    dup = pd.Series(kid).duplicated().to_numpy()
    if dup.any():
        raise TraceFormatError(f"kernel_id {kid[_first(dup)]} is not unique", file=fk,
                               column="kernel_id", row=_first(dup))
    dur = kernels["duration_ns"]
    neg = (dur.fillna(0) < 0).to_numpy()
    if neg.any():
        raise TraceFormatError("duration_ns must be >= 0", file=fk, column="duration_ns",
                               row=_first(neg))
    # v1.1: n_slices is 1..64 where given; 0 stands for "not given" until the rows say
    # whether the kernel needs it
    k_nslices = np.zeros(len(kernels), np.int64)
    if "n_slices" in kernels:
        ns = kernels["n_slices"]
        k_nslices = ns.fillna(0).to_numpy(np.int64)
        bad = ns.notna().to_numpy() & ((k_nslices < 1) | (k_nslices > MAX_SLICES))
        if bad.any():
            raise TraceFormatError(f"n_slices {k_nslices[_first(bad)]} out of range "
                                   f"(1..{MAX_SLICES})", file=fk, column="n_slices",
                                   row=_first(bad))
    from . import streams as _streams  # v1.2 launch and stream columns
    _streams.check_kernel_columns(kernels, fk)
    return kid, k_nslices


def _check_events(events: pd.DataFrame, events_t: pa.Table, aid: np.ndarray,
                  kid: np.ndarray, fe: str, fk: str) -> _Events:
    """seq dense, ops known, references to allocations and kernels resolved, range
    operands present and in range, arguments known."""
    n_ev = len(events)
    seq = events["seq"].to_numpy(np.uint64)
    gap = seq != np.arange(n_ev, dtype=np.uint64)
    if gap.any():
        r = _first(gap)
        raise TraceFormatError(f"seq is {seq[r]}, expected {r} (0, 1, 2, ... with no gaps)",
                               file=fe, column="seq", row=r)
    op = _codes(events["op"], OP_CODE, fe, "op").astype(np.int8)
    ev_alloc, ev_kernel, k_event, k_pos = _event_refs(events, op, aid, kid, fe, fk)
    addr, esize = _event_ranges(events, events_t, op, fe)
    return _Events(op, ev_alloc, ev_kernel, k_event, k_pos, addr, esize,
                   _event_args(events, op, fe))


def _event_refs(events: pd.DataFrame, op: np.ndarray, aid: np.ndarray, kid: np.ndarray,
                fe: str, fk: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The allocation row of each alloc/free event and the kernel of each kernel event
    (each kernel in exactly one)."""
    n_ev = len(events)
    is_af = (op == OP_CODE["alloc"]) | (op == OP_CODE["free"])
    ev_alloc_id = events["alloc_id"]
    miss = is_af & ev_alloc_id.isna().to_numpy()
    if miss.any():
        raise TraceFormatError(f"'{OPS[op[_first(miss)]]}' event needs alloc_id", file=fe,
                               column="alloc_id", row=_first(miss))
    a_index = pd.Index(aid)
    ev_alloc = np.full(n_ev, -1, np.int64)
    if is_af.any():
        pos = a_index.get_indexer(ev_alloc_id[is_af].astype("int64"))
        if (pos < 0).any():
            r = np.flatnonzero(is_af)[_first(pos < 0)]
            raise TraceFormatError(f"alloc_id {int(ev_alloc_id.iloc[r])} has no row in "
                                   f"{ALLOCATIONS}", file=fe, column="alloc_id", row=int(r))
        ev_alloc[is_af] = pos
    is_k = op == OP_CODE["kernel"]
    ev_kid = events["kernel_id"]
    miss = is_k & ev_kid.isna().to_numpy()
    if miss.any():
        raise TraceFormatError("'kernel' event needs kernel_id", file=fe, column="kernel_id",
                               row=_first(miss))
    k_event = np.flatnonzero(is_k).astype(np.int64)
    k_ids_in_order = ev_kid[is_k].astype("int64").to_numpy()
    k_pos = pd.Index(kid).get_indexer(k_ids_in_order)
    if (k_pos < 0).any():
        r = int(k_event[_first(k_pos < 0)])
        raise TraceFormatError(f"kernel_id {int(ev_kid.iloc[r])} has no row in {KERNELS}",
                               file=fe, column="kernel_id", row=r)
    dup = pd.Series(k_pos).duplicated().to_numpy()
    if dup.any():
        r = int(k_event[_first(dup)])
        raise TraceFormatError(f"kernel_id {int(ev_kid.iloc[r])} appears in two kernel events",
                               file=fe, column="kernel_id", row=r)
    if k_pos.size != kid.size:
        unseen = np.setdiff1d(np.arange(kid.size), k_pos)
        r = int(unseen[0])
        raise TraceFormatError(f"kernel_id {kid[r]} appears in no kernel event", file=fk,
                               column="kernel_id", row=r)
    ev_kernel = np.full(n_ev, -1, np.int64)
    ev_kernel[k_event] = np.arange(k_event.size)
    return ev_alloc, ev_kernel, k_event, k_pos


def _event_ranges(events: pd.DataFrame, events_t: pa.Table, op: np.ndarray,
                  fe: str) -> tuple[np.ndarray, np.ndarray]:
    """addr and size of range events: present, and their sum below 2**62."""
    is_range = np.isin(op, [OP_CODE[o] for o in RANGE_OPS])
    for c in ("addr", "size"):
        miss = is_range & events[c].isna().to_numpy()
        if miss.any():
            raise TraceFormatError(f"'{OPS[op[_first(miss)]]}' event needs {c}", file=fe,
                                   column=c, row=_first(miss))
    # from Arrow, not pandas: a nullable uint64 column becomes float64 in pandas and
    # would round values above 2**53
    addr = _u64(events_t.column("addr"))
    esize = _u64(events_t.column("size"))
    # each operand below 2**62 first, so their sum cannot wrap
    big = is_range & ((addr >= _ADDR_LIMIT) | (esize >= _ADDR_LIMIT))
    big |= is_range & ~big & (addr + esize > _ADDR_LIMIT)
    if big.any():
        r = _first(big)
        raise TraceFormatError("addr + size beyond 2**62 is not supported", file=fe,
                               column="addr" if addr[r] >= _ADDR_LIMIT else "size", row=r)
    is_host = op == OP_CODE["host_access"]
    zero = is_host & (esize == 0)
    if zero.any():
        raise TraceFormatError("host_access size must be > 0", file=fe, column="size",
                               row=_first(zero))
    return addr, esize


def _event_args(events: pd.DataFrame, op: np.ndarray, fe: str) -> np.ndarray:
    """The argument code of prefetch, advise and host_access events (0 elsewhere)."""
    n_ev = len(events)
    is_host = op == OP_CODE["host_access"]
    is_pf = op == OP_CODE["prefetch"]
    is_adv = op == OP_CODE["advise"]
    arg = np.zeros(n_ev, np.int8)
    if is_pf.any():
        c = events["arg"].map({a: ARG_CODE[a] for a in PREFETCH_ARGS})
        bad = is_pf & c.isna().to_numpy()
        if bad.any():
            r = _first(bad)
            raise TraceFormatError(f"prefetch destination {events['arg'].iloc[r]!r} is not "
                                   "'gpu' or 'cpu'", file=fe, column="arg", row=r)
        arg[is_pf] = c[is_pf].to_numpy(np.int8)
    if is_adv.any():
        c = events["arg"].map({a: ARG_CODE[a] for a in ADVISE_ARGS})
        bad = is_adv & c.isna().to_numpy()
        if bad.any():
            r = _first(bad)
            raise TraceFormatError(f"unknown advice {events['arg'].iloc[r]!r}", file=fe,
                                   column="arg", row=r)
        arg[is_adv] = c[is_adv].to_numpy(np.int8)
    if is_host.any():
        c = events["arg"].map({a: ARG_CODE[a] for a in HOST_ACCESS_ARGS})
        bad = is_host & c.isna().to_numpy() & events["arg"].notna().to_numpy()
        if bad.any():
            r = _first(bad)
            raise TraceFormatError(f"host_access arg {events['arg'].iloc[r]!r} is not 'read', "
                                   "'write' or null", file=fe, column="arg", row=r)
        arg[is_host] = c[is_host].fillna(0).to_numpy(np.int8)
    return arg


def _walk(ev: _Events, al: _Allocs, fe: str) -> tuple:
    """Walk the events in order (allocation lifetimes, range segments, peak blocks;
    uvmsim.trace._resolve.walk_events): its segments and peak, or the error it found."""
    op, ev_alloc, aid, base, end = ev.op, ev.ev_alloc, al.aid, al.base, al.end
    range_mask = np.zeros(len(OPS), np.bool_)
    for o in RANGE_OPS:
        range_mask[OP_CODE[o]] = True
    err, e, other, seg_start, seg_alloc, seg_first, seg_last, peak = R.walk_events(
        op, ev_alloc, ev.addr.astype(np.int64), ev.size.astype(np.int64), base, end, al.host,
        al.first_page, al.nblocks, range_mask)
    if err == R.E_DOUBLE_ALLOC:
        raise TraceFormatError(f"alloc_id {aid[ev_alloc[e]]} is allocated twice", file=fe,
                               column="alloc_id", row=int(e))
    if err == R.E_FREE_NOT_LIVE:
        raise TraceFormatError(f"alloc_id {aid[ev_alloc[e]]} is freed while not live (before "
                               "its alloc event or twice)", file=fe, column="alloc_id",
                               row=int(e))
    if err == R.E_OVERLAP:
        a = ev_alloc[e]
        raise TraceFormatError(
            f"alloc_id {aid[a]} [{base[a]:#x}, {end[a]:#x}) overlaps live alloc_id "
            f"{aid[other]} [{base[other]:#x}, {end[other]:#x})", file=fe, column="alloc_id",
            row=int(e))
    return seg_start, seg_alloc, seg_first, seg_last, peak


class _Tables(NamedTuple):
    """What a Trace keeps of its small tables and where they came from."""

    manifest: dict[str, Any]
    alloc: pd.DataFrame
    events: pd.DataFrame
    kernels: pd.DataFrame
    names: dict[str, str]
    path: Path | None


def _resolve_trace(tb: _Tables, al: _Allocs, ev: _Events, kid: np.ndarray,
                   k_nslices: np.ndarray, segs: tuple, acc: _Rows, drop: bool) -> Trace:
    """Resolve the access rows (checked against the tables) and build the Trace of the
    tables' dense arrays."""
    seg_start, seg_alloc, seg_first, seg_last, peak = segs
    op, ev_alloc, k_event, k_pos = ev.op, ev.ev_alloc, ev.k_event, ev.k_pos
    first_page, last_page, block_off = al.first_page, al.last_page, al.block_off
    kernels, has_slices, reread = tb.kernels, acc.has_slices, acc.reread
    order = np.argsort(kid, kind="stable")
    kid_sorted = kid[order]
    kid_rank = np.empty(len(kid), np.int64)
    kid_rank[k_pos] = np.arange(k_pos.size)
    kid_rank = kid_rank[order]
    plan = _RowPlan(
        fx=tb.names[ACCESSES], kid_sorted=kid_sorted, kid_rank=kid_rank, k_event=k_event,
        op=op, ev_alloc=ev_alloc, base=al.base, end=al.end, first_page=first_page,
        last_page=last_page, block0=block_off - (first_page >> 9), n_rows=acc.n_rows,
        has_slices=has_slices,
        nslices_by_rank=k_nslices[k_pos] if has_slices else np.zeros(0, np.int64),
        drop=drop, kernels=kernels, kid=kid, k_pos=k_pos)
    rs, out_page, out_flags, out_count, out_slices = _resolve_all(plan, acc.batches,
                                                                  keep=reread is None)
    # decoded batches are gone; hand their memory back instead of keeping it in the pool
    pa.default_memory_pool().release_unused()
    # segments of range events as block keys and window positions (walk_events gave each
    # segment's pages relative to its allocation's first page)
    seg_vfirst = first_page[seg_alloc] + seg_first
    seg_vlast = first_page[seg_alloc] + seg_last
    maps = _dense_maps(rs, block_off, first_page, last_page, plan.block0[seg_alloc],
                       seg_vfirst, seg_vlast, len(al.aid), tb.names[ALLOCATIONS])
    R.slot_pages_to_dense(out_page, maps.slot_page0)
    rows = None if reread is None else RowSource(
        plan, rs.slot_key[:rs.n_slots].copy(), maps.slot_page0, rs.k_row_start,
        int(rs.st[R.S_OUT]), reread)

    kernels_by_rank = kernels.iloc[k_pos].reset_index(drop=True)
    k_nslices_by_rank = np.maximum(k_nslices[k_pos], 1) if has_slices else \
        np.ones(k_pos.size, np.int64)
    arrays = TraceArrays(
        a_host=al.host, a_first_page=first_page, a_npages=maps.a_npages,
        a_page_off=maps.a_page_off, a_block_off=maps.a_block_off, a_nblocks=maps.a_nblocks,
        page_block=maps.page_block, page_pos=maps.page_pos, b_alloc=maps.b_alloc,
        b_lo=maps.b_lo, b_hi=maps.b_hi, b_page0=maps.b_page0,
        b_first_vpage=maps.b_first_vpage,
        ev_op=op, ev_alloc=ev_alloc, ev_kernel=ev.ev_kernel, ev_arg=ev.arg,
        ev_seg_start=seg_start, seg_alloc=seg_alloc, seg_first=maps.dense(seg_alloc,
                                                                           seg_vfirst),
        seg_last=maps.dense(seg_alloc, seg_vlast),
        k_row_start=rs.k_row_start,
        k_duration_ns=kernels_by_rank["duration_ns"].to_numpy(np.float64, na_value=np.nan),
        row_page=out_page, row_flags=out_flags, row_count=out_count, row_slices=out_slices,
        k_nslices=k_nslices_by_rank)
    return Trace(manifest=tb.manifest, allocations=tb.alloc, events=tb.events,
                 kernels=kernels_by_rank, arrays=arrays, peak_blocks=int(peak),
                 dropped_rows=int(rs.st[R.S_DROPPED]), path=tb.path, rows=rows)


@dataclass
class _RowPlan:
    """What resolving the access rows needs from the small tables (built by _build)."""

    fx: str
    kid_sorted: np.ndarray
    kid_rank: np.ndarray
    k_event: np.ndarray
    op: np.ndarray
    ev_alloc: np.ndarray
    base: np.ndarray
    end: np.ndarray
    first_page: np.ndarray
    last_page: np.ndarray
    block0: np.ndarray        # block key of each allocation's window 0 (see _build)
    n_rows: int
    has_slices: bool
    nslices_by_rank: np.ndarray
    drop: bool
    kernels: pd.DataFrame
    kid: np.ndarray
    k_pos: np.ndarray


def _resolve_all(plan: _RowPlan, batches: Iterator[pa.RecordBatch], keep: bool = True):
    """Validate every access row (src/uvmsim/trace/_resolve.py). Returns the RowState and the
    rows as slot pages, in arrays sized by the footer's row count and cut to the rows kept;
    with keep=False, only the state (the arrays are empty): memory then grows with one
    batch and the touched blocks, not with the rows."""
    n_rows = plan.n_rows
    rs = R.RowState(plan.base.size, plan.k_event.size)
    out = _row_buffers(n_rows if keep else 0, plan.has_slices)
    done = 0
    for batch in batches:
        # the output arrays are sized by the footer's row count, which the compiled pass
        # must never write past
        if done + batch.num_rows > n_rows:
            raise TraceFormatError(f"holds more rows than the {n_rows} its metadata says",
                                   file=plan.fx)
        if keep:
            _resolve_batch(plan, rs, batch, done, 0, *out)
        else:
            if out[0].size < batch.num_rows:
                out = _row_buffers(batch.num_rows, plan.has_slices)
            _resolve_batch(plan, rs, batch, done, int(rs.st[R.S_OUT]), *out)
        done += batch.num_rows
    if done != n_rows:
        raise TraceFormatError(f"holds {done} rows, its metadata says {n_rows}", file=plan.fx)
    R.finish_rows(rs.st, rs.k_row_start)
    n_out = int(rs.st[R.S_OUT]) if keep else 0
    page, flags, count, slices = out
    return (rs, page[:n_out], flags[:n_out], count[:n_out],
            slices[:n_out] if plan.has_slices else slices)


def _row_buffers(n: int, has_slices: bool):
    """Output arrays for n rows: page, flags, count and (v1.1, else empty) slices."""
    return (np.empty(n, np.int32), np.empty(n, np.uint8), np.empty(n, np.uint32),
            # an empty slices array means the trace has none (every row in slice 0)
            np.empty(n if has_slices else 0, np.uint64))


class RowSource:
    """The access rows of a streamed trace (load_trace(stream=True)), read again from the
    file batch by batch at replay.

    The first pass (at load) checked every row and kept only what sizing needs: the touched
    blocks, the kernels' row offsets. `fill` resolves the rows the same way again and
    checks that they are the rows the first pass saw, so a file changed in between is an
    error, never an index the compiled engine trusts.
    """

    def __init__(self, plan: _RowPlan, slot_key: np.ndarray, slot_page0: np.ndarray,
                 k_row_start: np.ndarray, n_rows: int, reread: Any):
        self._plan = plan
        self._slot_key = slot_key
        self._slot_page0 = slot_page0
        self._k_row_start = k_row_start
        self.n_rows = n_rows
        self.has_slices = plan.has_slices
        self._reread = reread

    def fill(self, page: np.ndarray, flags: np.ndarray, count: np.ndarray,
             slices: np.ndarray) -> Iterator[int]:
        """Write the rows, as dense pages, into arrays of n_rows (or their slices; the
        caller may release what it has used); yields the number of rows written so far
        after each batch."""
        plan = self._plan
        changed = "changed since it was loaded (its rows differ from the first pass)"
        rs = R.RowState(plan.base.size, plan.k_event.size)
        buf = _row_buffers(0, plan.has_slices)
        done = written = 0
        n_slots = self._slot_key.size
        for batch in self._reread():
            if done + batch.num_rows > plan.n_rows:
                raise TraceFormatError(changed, file=plan.fx)
            if buf[0].size < batch.num_rows:
                buf = _row_buffers(batch.num_rows, plan.has_slices)
            out0 = int(rs.st[R.S_OUT])
            _resolve_batch(plan, rs, batch, done, out0, *buf)
            done += batch.num_rows
            n = int(rs.st[R.S_OUT]) - out0
            # slots are numbered in first-touch order, so the same rows give the same slots;
            # any other would index outside the dense maps
            k = rs.n_slots
            if k > n_slots or not np.array_equal(rs.slot_key[:k], self._slot_key[:k]) or \
                    written + n > self.n_rows:
                raise TraceFormatError(changed, file=plan.fx)
            p = buf[0][:n]
            R.slot_pages_to_dense(p, self._slot_page0)
            page[written:written + n] = p
            flags[written:written + n] = buf[1][:n]
            count[written:written + n] = buf[2][:n]
            if plan.has_slices:
                slices[written:written + n] = buf[3][:n]
            written += n
            # kernels started so far must start where the first pass said
            q = int(rs.st[R.S_PREV_RANK]) + 1
            if not np.array_equal(rs.k_row_start[:q], self._k_row_start[:q]):
                raise TraceFormatError(changed, file=plan.fx)
            yield written
        R.finish_rows(rs.st, rs.k_row_start)
        if done != plan.n_rows or written != self.n_rows or \
                not np.array_equal(rs.k_row_start, self._k_row_start):
            raise TraceFormatError(changed, file=plan.fx)


_NO_SLICES = np.zeros(0, np.uint64)


def _resolve_batch(plan: _RowPlan, rs, batch: pa.RecordBatch, done: int, out0: int,
                   out_page, out_flags, out_count, out_slices) -> None:
    """Resolve one batch (its first row is row `done` of the file) into the outputs, which
    hold output rows from `out0` on; grows the block slots as the rows need."""
    columns = SCHEMAS[ACCESSES] + (OPTIONAL[ACCESSES] if plan.has_slices else [])
    cols = {n: _column_numpy(batch.column(n), n, t, nl, plan.fx, done) for n, t, nl in columns}
    kid, page = cols["kernel_id"], cols["page"].view(np.int64)
    flags, count, order = cols["flags"], cols["count"], cols["order"]
    slices = cols["slices"] if plan.has_slices else _NO_SLICES
    tables = R.RowTables(plan.kid_sorted, plan.kid_rank, plan.k_event, plan.op, plan.ev_alloc,
                         plan.base, plan.end, plan.first_page, plan.last_page, plan.block0,
                         plan.nslices_by_rank)
    out = R.RowOut(out_page, out_flags, out_count, out_slices)
    r0 = 0
    while True:
        batch_left = R.RowBatch(kid[r0:], page[r0:], flags[r0:], count[r0:], order[r0:],
                                slices[r0:] if slices.size else slices)
        err, r, detail = R.resolve_rows(rs.arrays(), tables, batch_left, plan.drop, out0, out)
        if err == R.E_GROW:
            rs.grow()
            r0 += int(r)
            continue
        if err != R.OK:
            r = r0 + int(r)
            _raise_row_error(err, done + r, int(detail), cols, r, plan.kernels, plan.kid,
                             plan.k_pos, plan.fx)
        return


class _DenseMaps(NamedTuple):
    """The dense numbering of the touched blocks (see _dense_maps)."""

    a_npages: np.ndarray
    a_page_off: np.ndarray
    a_block_off: np.ndarray
    a_nblocks: np.ndarray
    page_block: np.ndarray
    page_pos: np.ndarray
    b_alloc: np.ndarray
    b_lo: np.ndarray
    b_hi: np.ndarray
    b_page0: np.ndarray
    b_first_vpage: np.ndarray
    keys: np.ndarray          # block key of each dense block, ascending
    slot_page0: np.ndarray    # dense page of window position 0 of each row slot
    block0: np.ndarray        # per allocation, as in _RowPlan

    def dense(self, alloc: np.ndarray, vpage: np.ndarray) -> np.ndarray:
        """Dense pages of virtual pages of these allocations (in touched blocks)."""
        key = self.block0[alloc] + (vpage >> 9)
        b = np.searchsorted(self.keys, key)
        return (self.b_page0[b] - self.b_lo[b].astype(np.int64) + (vpage & 511)).astype(
            np.int64)


def _dense_maps(rs, block_off: np.ndarray, first_page: np.ndarray, last_page: np.ndarray,
                seg_block0: np.ndarray, seg_vfirst: np.ndarray, seg_vlast: np.ndarray,
                n_alloc: int, fa: str) -> _DenseMaps:
    """Number the touched blocks densely, in key order (allocation, then address), and
    their pages in order.

    A block is touched when an access row falls in it or a range event (memcpy, memset,
    prefetch, host access, advise) overlaps it; no other event can make a page of a block
    resident or populated (docs/semantics.md), so leaving the others out changes no count.
    Every array here is sized by touched blocks and pages.
    """
    row_keys = np.sort(rs.slot_key[:rs.n_slots])
    # range events: each segment covers the block keys [lo, hi]; merge them into disjoint
    # intervals first, so many events over one huge range cost one interval
    lo = seg_block0 + (seg_vfirst >> 9)
    hi = seg_block0 + (seg_vlast >> 9)
    if lo.size:
        o = np.argsort(lo, kind="stable")
        lo, hi = lo[o], hi[o]
        reach = np.maximum.accumulate(hi)
        new = np.ones(lo.size, np.bool_)
        new[1:] = lo[1:] > reach[:-1] + 1
        starts = np.flatnonzero(new)
        lo = lo[starts]
        hi = np.maximum.reduceat(hi, starts)
        inside = np.searchsorted(hi, row_keys)  # first interval ending at or after the key
        covered = (inside < lo.size) & (lo[np.minimum(inside, lo.size - 1)] <= row_keys)
        row_keys = row_keys[~covered]
    n_blocks = int(row_keys.size) + int((hi - lo + 1).sum(dtype=np.float64))
    if n_blocks > R.MAX_BLOCKS:
        raise TraceFormatError(_too_many_blocks(n_blocks), file=fa, column="size")
    if lo.size:
        lens = hi - lo + 1
        seg_keys = np.repeat(lo - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + \
            np.arange(int(lens.sum()), dtype=np.int64)
        keys = np.sort(np.concatenate([row_keys, seg_keys]))
    else:
        keys = row_keys
    keys = keys.astype(np.int64)
    b_alloc = (np.searchsorted(block_off, keys, side="right") - 1).astype(np.int64)
    window = (first_page[b_alloc] >> 9) + keys - block_off[b_alloc]
    b_lo = np.where(window == first_page[b_alloc] >> 9, first_page[b_alloc] & 511, 0)
    b_hi = np.where(window == last_page[b_alloc] >> 9, last_page[b_alloc] & 511, 511)
    npg = b_hi - b_lo + 1
    n_pages = int(npg.sum())  # below 2**29 (MAX_BLOCKS windows): int32 dense pages
    b_page0 = _starts(npg)
    page_block = np.empty(n_pages, np.int32)
    page_pos = np.empty(n_pages, np.int16)
    R.fill_page_maps(b_lo, b_hi, page_block, page_pos)
    a_nblocks = np.bincount(b_alloc, minlength=n_alloc).astype(np.int64)
    a_npages = np.bincount(b_alloc, weights=npg, minlength=n_alloc).astype(np.int64)
    slot_key = rs.slot_key[:rs.n_slots]
    slot_page0 = (b_page0 - b_lo)[np.searchsorted(keys, slot_key)].astype(np.int64)
    return _DenseMaps(
        a_npages=a_npages, a_page_off=_starts(a_npages), a_block_off=_starts(a_nblocks),
        a_nblocks=a_nblocks, page_block=page_block, page_pos=page_pos,
        b_alloc=b_alloc.astype(np.int32), b_lo=b_lo.astype(np.int16),
        b_hi=b_hi.astype(np.int16), b_page0=b_page0, b_first_vpage=(window << 9) + b_lo,
        keys=keys, slot_page0=slot_page0, block0=block_off - (first_page >> 9))


def _too_many_blocks(n: int | str) -> str:
    return (f"the trace touches {n} blocks of 2 MiB; at most {R.MAX_BLOCKS} (2 TiB) are "
            "supported, as each costs its 512 pages of memory")


def _starts(counts: np.ndarray) -> np.ndarray:
    """Exclusive prefix sums: where each of consecutive runs of these lengths starts."""
    out = np.zeros(counts.size, np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


def _column_numpy(col: pa.Array, name: str, target: pa.DataType, nullable: bool, file: str,
                  row_offset: int) -> np.ndarray:
    """One batch column of the access rows as NumPy: a zero-copy view when it already has
    the format's type and no nulls (the common case, and the one loading speed rests on)."""
    if col.type == target and col.null_count == 0:
        return col.to_numpy(zero_copy_only=True)
    return coerce_column(col, name, target, nullable, file, row_offset).combine_chunks() \
        .to_numpy()


def _u64(col: pa.ChunkedArray) -> np.ndarray:
    """A nullable uint64 column as NumPy, nulls as 0."""
    return pc.fill_null(col, 0).combine_chunks().to_numpy(zero_copy_only=False) \
        .astype(np.uint64, copy=False)


def _raise_row_error(err: int, row: int, detail: int, cols: dict, r: int,
                     kernels: pd.DataFrame, kid: np.ndarray, k_pos: np.ndarray, fx: str):
    k = int(cols["kernel_id"][r])
    hit = np.flatnonzero(kid == k)
    kname = f"kernel_id {k}" + (f" ({kernels['name'].iloc[hit[0]]})" if hit.size else "")
    if err == R.E_UNKNOWN_KERNEL:
        raise TraceFormatError(f"{kname} has no row in {KERNELS}", file=fx, column="kernel_id",
                               row=row)
    if err == R.E_UNSORTED_KERNEL:
        raise TraceFormatError(f"rows of {kname} are out of kernel event order or not "
                               "contiguous", file=fx, column="kernel_id", row=row)
    if err == R.E_FLAGS:
        raise TraceFormatError(f"flags {detail} invalid (1..7: read, write, atomic bits; never 0)",
                               file=fx, column="flags", row=row)
    if err == R.E_COUNT:
        raise TraceFormatError("count must be >= 1", file=fx, column="count", row=row)
    if err == R.E_UNSORTED_ROW:
        raise TraceFormatError(f"rows of {kname} not sorted by (order, page)", file=fx,
                               column="order", row=row)
    if err in (R.E_DUPLICATE, R.E_OUT_OF_RANGE):
        detail %= 1 << 64  # the page column was viewed as int64
    if err == R.E_DUPLICATE:
        raise TraceFormatError(f"page {detail:#x} appears twice for {kname}", file=fx,
                               column="page", row=row)
    if err == R.E_SLICES_ZERO:
        raise TraceFormatError(f"slices is 0 for {kname} (a touched page was touched in some "
                               "slice)", file=fx, column="slices", row=row)
    if err == R.E_NO_NSLICES:
        raise TraceFormatError(f"{kname} has access rows with slices but no n_slices in "
                               f"{KERNELS}", file=fx, column="slices", row=row)
    if err == R.E_SLICES_RANGE:
        raise TraceFormatError(f"slices sets a bit at or above n_slices = {detail} of {kname}",
                               file=fx, column="slices", row=row)
    if err == R.E_TOO_MANY_BLOCKS:
        raise TraceFormatError(_too_many_blocks(f"more than {R.MAX_BLOCKS}"), file=fx,
                               column="page", row=row)
    if err == R.E_OUT_OF_RANGE:
        raise TraceFormatError(
            f"{kname} touches address {detail << 12:#x} (page {detail:#x}) outside every "
            "allocation live when it runs (load with drop_out_of_range=True to drop such rows)",
            file=fx, column="page", row=row)
    raise TraceFormatError(f"internal validation error {err}", file=fx, row=row)


# --------------------------------------------------------------------------- public API
def load_trace(path: str | os.PathLike, *, drop_out_of_range: bool = False,
               batch_rows: int = _BATCH_ROWS, stream: bool = False,
               streams: bool = False) -> Trace:
    """Read and validate a uvmtrace v1 directory.

    Raises `TraceFormatError` naming the file, column and first offending row for anything
    that breaks the format, and an `OSError` subclass (`FileNotFoundError`,
    `NotADirectoryError`, `PermissionError`, ...) when the path is missing or unreadable.
    With `drop_out_of_range=True`, access rows outside every live allocation are dropped
    and counted in `Trace.dropped_rows` instead.

    With `stream=True` every row is checked but none is kept: the Trace holds the small
    tables, the touched blocks and each kernel's row offsets, and `simulate` reads the rows
    again from the file kernel by kernel (src/uvmsim/stream.py), so a trace whose rows do not
    fit in memory still replays, with the same counts. `batch_rows` is the rows decoded at
    a time (with stream=True, about the rows held in memory, plus one kernel's; with more
    than one CPU, runs decoded ahead in threads hold up to twice as many: `_batches`).

    v1.2 per-thread-block streams (blocks.parquet, block_accesses.parquet) are checked for
    framing and columns here; their rows are read and checked when `trace.streams` is first
    used, or here with `streams=True` (src/uvmsim/trace/streams.py).
    """
    d = Path(path)
    st = _stat(d)
    if st is None:
        raise FileNotFoundError(errno.ENOENT, "no such trace directory", str(d))
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "a uvmtrace is a directory (name ending in "
                                 ".uvmtrace)", str(d))
    if not d.name.endswith(".uvmtrace"):
        raise TraceFormatError("trace directory name must end in '.uvmtrace'", file=str(d))
    for f in REQUIRED_FILES:
        try:
            fst = _stat(d / f)
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            raise TraceFormatError("a loop of symbolic links, not a regular file",
                                   file=str(d / f)) from None
        if fst is None or not stat.S_ISREG(fst.st_mode):
            raise TraceFormatError("missing file" if fst is None else "not a regular file",
                                   file=str(d / f))
    manifest = _read_manifest(d)
    names = {f: str(d / f) for f in REQUIRED_FILES}
    files = {f: open_checked(d / f, names[f]) for f in (ALLOCATIONS, EVENTS, KERNELS,
                                                         ACCESSES)}
    small = {}
    for f in (ALLOCATIONS, EVENTS, KERNELS):
        pf = files[f]
        check_columns(pf.schema_arrow.names, f, names[f])
        cols = _spec_columns(pf.schema_arrow.names, f)
        try:
            t = pf.read(columns=cols, use_threads=True)
        except PARQUET_ERRORS as e:
            raise TraceFormatError(f"unreadable Parquet data ({_one_line(e)})",
                                   file=names[f]) from None
        small[f] = coerce_table(t, f, names[f])
    pf = files[ACCESSES]
    check_columns(pf.schema_arrow.names, ACCESSES, names[ACCESSES])
    cols = _spec_columns(pf.schema_arrow.names, ACCESSES)
    minor = manifest.get("minor", 0)
    # a feature of a later minor under an earlier manifest: a reader of that minor would
    # silently ignore it, so the trace does not mean what its manifest says
    for f, present in ((KERNELS, optional_present(small[KERNELS].column_names, KERNELS)),
                       (ACCESSES, optional_present(cols, ACCESSES))):
        late = [c for c in present if OPTIONAL_MINOR[c] > minor]
        if late:
            raise TraceFormatError(f"v1.{OPTIONAL_MINOR[late[0]]} column in a trace whose "
                                   f"manifest says minor {minor}", file=names[f],
                                   column=late[0])
    stream_present = tuple((d / f).exists() for f in STREAM_FILES)
    if minor < 2 and any(stream_present):
        f = STREAM_FILES[stream_present.index(True)]
        raise TraceFormatError(f"v1.2 file in a trace whose manifest says minor {minor}",
                               file=str(d / f))
    if minor < 1:
        ops = small[EVENTS].column("op")
        if len(ops) and pc.any(pc.is_in(ops, pa.array(sorted(V11_OPS)))).as_py():
            r = int(np.flatnonzero(pc.is_in(ops, pa.array(sorted(V11_OPS))).to_numpy(
                zero_copy_only=False))[0])
            raise TraceFormatError("v1.1 op in a trace whose manifest says minor 0",
                                   file=names[EVENTS], column="op", row=r)
    if not isinstance(batch_rows, int) or isinstance(batch_rows, bool) or batch_rows < 1:
        raise ValueError(f"batch_rows must be a positive int, got {batch_rows!r}")
    reread = None
    if stream:
        fx = d / ACCESSES
        before = _signature(fx)

        def reread() -> Iterator[pa.RecordBatch]:
            if _signature(fx) != before:
                raise TraceFormatError("changed since it was loaded", file=names[ACCESSES])
            return _batches(open_checked(fx, names[ACCESSES]), batch_rows, cols,
                            names[ACCESSES])
    from . import streams as _streams
    snames = {f: str(d / f) for f in STREAM_FILES}
    has_streams = _streams.check_presence(small[KERNELS].to_pandas(), stream_present,
                                          names[KERNELS], snames)
    if has_streams:
        for f in STREAM_FILES:
            if not (d / f).is_file():
                raise TraceFormatError("not a regular file", file=snames[f])
        _streams.open_files(d, snames)
    rows = _Rows(_batches(pf, batch_rows, cols, names[ACCESSES]), pf.metadata.num_rows,
                 "slices" in cols, reread)
    trace = _build(small, rows, names, manifest, drop_out_of_range, d)
    if has_streams:
        trace._cache["streams_source"] = _streams._Source(names=snames, path=d)
        if streams:
            _streams.load_streams(trace)
    return trace


def _stat(p: Path) -> os.stat_result | None:
    """os.stat of a path (following links), None where nothing is there; any other failure
    is raised as what it is (a loop of symbolic links is ELOOP, not a missing path, which
    Path.exists would make of it)."""
    try:
        return os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except ValueError:  # e.g. an embedded NUL: no file can have this name
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "a loop of symbolic links (too many levels), not a "
                          "trace directory", str(p)) from None
        raise


def _batches(pf: CheckedFile, batch_rows: int, cols: list[str],
             shown: str) -> Iterator[pa.RecordBatch]:
    """The access rows in batches, in order, a run of consecutive row groups of about
    batch_rows rows at a time: pyarrow's iterator over a whole file keeps each row group's
    buffers until it is done (about 5 bytes a row), so one over all of them would hold the
    file; one per row group costs a reader per group, which for many small groups (95,984
    of one row) is most of the load time.

    With more than one CPU the runs are smaller (batch_rows / threads rows, at most
    _RUN_GROUPS row groups; a larger row group is a run of its own) and decoded, in order,
    by a few threads, each with its own reader of the file, while the loading thread
    consumes the run before: at most `threads` runs wait or are decoded beside the one
    consumed, and all of them hold at most 2 * batch_rows rows (a row group larger than
    batch_rows counts as batch_rows: it is streamed by the loading thread, batch_rows at a
    time, as with one CPU). pyarrow decodes without the interpreter lock, so the threads
    overlap each other and the checks of the rows consumed."""
    rows = pf.row_group_rows
    threads = _decode_threads()
    runs = _runs(rows, max(1, batch_rows // threads), _RUN_GROUPS).tolist() \
        if threads > 1 else []
    if len(runs) < 2:
        for g0, g1, _ in _runs(rows, batch_rows, max(rows.size, 1)).tolist():
            yield from _guarded(pf.iter_batches(batch_size=batch_rows,
                                                row_groups=list(range(g0, g1)),
                                                columns=cols, use_threads=True), shown)
        return
    local = threading.local()

    def decode(g0: int, g1: int) -> list[pa.RecordBatch]:
        reader = getattr(local, "reader", None)
        if reader is None:
            reader = local.reader = pf.twin()
        return list(_guarded(reader.iter_batches(batch_size=batch_rows,
                                                 row_groups=list(range(g0, g1)),
                                                 columns=cols, use_threads=True), shown))

    pool = ThreadPoolExecutor(threads, thread_name_prefix="uvmsim-decode")
    ahead: deque = deque()  # (the run or its decoding, its rows), the first consumed next
    held = nxt = 0
    try:
        while ahead or nxt < len(runs):
            while nxt < len(runs) and (not ahead or (len(ahead) <= threads and held + min(
                    runs[nxt][2], batch_rows) <= 2 * batch_rows)):
                g0, g1, n = runs[nxt]
                nxt += 1
                # a row group larger than batch_rows is streamed here, batch_rows at a time
                run = (g0, g1) if n > batch_rows else pool.submit(decode, g0, g1)
                n = min(n, batch_rows)
                held += n
                ahead.append((run, n))
            run, n = ahead.popleft()
            if isinstance(run, tuple):
                yield from _guarded(pf.iter_batches(batch_size=batch_rows,
                                                    row_groups=list(range(*run)),
                                                    columns=cols, use_threads=True), shown)
            else:
                yield from run.result()
            del run  # its batches go once the consumer has let them go
            held -= n
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# Row groups in one threaded run: enough that a run's reader costs nothing beside its
# groups (one thread decodes 95,984 one-row groups as fast in runs of 3,000 as in one run),
# few enough that the threads share such a file evenly (benchmarks/reader_limits.py).
_RUN_GROUPS = 4096
_MAX_THREADS = 4


def _decode_threads() -> int:
    """Threads decoding access rows: the CPUs this process may run on, at most _MAX_THREADS
    (each holds a run of rows); 1 decodes in the loading thread, with no pool."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        n = os.cpu_count() or 1
    return max(1, min(n, _MAX_THREADS))


@njit(cache=True)
def _runs(rows, most_rows, most_groups):
    """Consecutive row groups [g0, g1) of at most most_rows rows and most_groups groups
    (a larger group is a run of its own), as rows of (g0, g1, their rows). Compiled: a file
    may have a row group per row."""
    out = np.empty((rows.size, 3), np.int64)
    k = 0
    g0 = 0
    while g0 < rows.size:
        g1, n = g0 + 1, rows[g0]
        while g1 < rows.size and g1 - g0 < most_groups and n + rows[g1] <= most_rows:
            n += rows[g1]
            g1 += 1
        out[k, 0] = g0
        out[k, 1] = g1
        out[k, 2] = n
        k += 1
        g0 = g1
    return out[:k]


def _signature(p: Path) -> tuple[int, int, int]:
    st = p.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


def _spec_columns(names: Iterable[str], file: str) -> list[str]:
    """The columns of `file` the reader decodes: v1's and the v1.1 optional ones present
    (extra columns are never decoded, so damage in them cannot matter)."""
    return [n for n, _, _ in SCHEMAS[file]] + list(optional_present(names, file))


def _guarded(batches: Iterator[pa.RecordBatch], shown: str) -> Iterator[pa.RecordBatch]:
    """The batches, with a decoding failure turned into a TraceFormatError."""
    it = iter(batches)
    while True:
        try:
            b = next(it)
        except StopIteration:
            return
        except PARQUET_ERRORS as e:
            raise TraceFormatError(f"unreadable Parquet data ({_one_line(e)})",
                                   file=shown) from None
        yield b


def trace_from_tables(*, allocations: TableLike, events: TableLike, kernels: TableLike,
                      accesses: TableLike, source: dict[str, Any] | None = None,
                      drop_out_of_range: bool = False, blocks: TableLike | None = None,
                      block_accesses: TableLike | None = None) -> Trace:
    """Validate in-memory tables (pandas or Arrow) as a uvmtrace, without touching disk.

    `blocks` and `block_accesses` (v1.2 streams) are checked too and kept as
    `trace.streams`."""
    tables = {f: coerce_table(t, f) for f, t in
              ((ALLOCATIONS, allocations), (EVENTS, events), (KERNELS, kernels),
               (ACCESSES, accesses))}
    stables = _stream_tables(blocks, block_accesses)
    manifest = _manifest(tables, dict(source or {}), stables is not None)
    trace = _build(tables, _table_rows(tables[ACCESSES]), {f: f for f in REQUIRED_FILES},
                   manifest, drop_out_of_range, None)
    _attach_streams(trace, tables[KERNELS], stables)
    return trace


def _table_rows(acc: pa.Table) -> _Rows:
    """The access rows of an in-memory table."""
    return _Rows(iter(acc.to_batches(max_chunksize=_BATCH_ROWS)), acc.num_rows,
                 "slices" in acc.column_names)


def retable(trace: Trace, *, allocations: TableLike, events: TableLike,
            source: dict[str, Any]) -> Trace:
    """`trace` with other allocation and event tables, the same kernels and the same access
    rows (by virtual page), validated as any trace. A streamed trace stays streamed: its
    rows are read again from its file, and the new Trace streams them too. v1.2 streams
    (by virtual page too) come along, read and checked against the new Trace on first use."""
    tables = {ALLOCATIONS: coerce_table(allocations, ALLOCATIONS),
              EVENTS: coerce_table(events, EVENTS),
              KERNELS: coerce_table(trace.kernels, KERNELS)}
    drop = trace.dropped_rows > 0
    streams = trace._cache.get("streams_source")
    if trace.rows is None:
        acc = coerce_table(_access_rows(trace), ACCESSES)
        tables[ACCESSES] = acc
        new = _build(tables, _table_rows(acc), {f: f for f in REQUIRED_FILES},
                     _manifest(tables, source, streams is not None), drop, None)
    else:
        reread = trace.rows._reread
        d = trace.path
        names = {f: str(d / f) for f in REQUIRED_FILES}
        manifest = {**trace.manifest, "source": source}
        rows = _Rows(reread(), trace.rows.n_rows + trace.dropped_rows,
                     trace.rows.has_slices, reread)
        new = _build(tables, rows, names, manifest, drop, d)
    if streams is not None:
        new._cache["streams_source"] = streams
    return new


def _access_rows(trace: Trace) -> pd.DataFrame:
    """An in-memory trace's access rows back as a table, by virtual page, in replay order."""
    a = trace.arrays
    d = a.row_page.astype(np.int64)
    # by the row's block: an allocation's dense pages cover only its touched windows, so
    # the offset from its first dense page is not the offset from its base
    blk = a.page_block[d]
    page = (a.b_first_vpage[blk].astype(np.int64) + a.page_pos[d].astype(np.int64)
            - a.b_lo[blk].astype(np.int64))
    n = np.diff(a.k_row_start)
    kid = trace.kernels["kernel_id"].to_numpy().astype(np.uint32)
    df = pd.DataFrame({
        "kernel_id": np.repeat(kid, n),
        "page": page.astype(np.uint64),
        "flags": a.row_flags,
        "count": a.row_count,
        "order": np.concatenate([np.arange(k, dtype=np.uint32) for k in n])
        if n.size else np.zeros(0, np.uint32)})
    if a.row_slices.size:
        df["slices"] = a.row_slices
    return df


def _stream_tables(blocks: TableLike | None,
                   block_accesses: TableLike | None) -> dict[str, pa.Table] | None:
    """The v1.2 stream tables cast to the spec schema, or None when neither is given."""
    if blocks is None and block_accesses is None:
        return None
    if blocks is None or block_accesses is None:
        raise ValueError("blocks and block_accesses come together (v1.2 streams)")
    return {BLOCKS: coerce_table(blocks, BLOCKS),
            BLOCK_ACCESSES: coerce_table(block_accesses, BLOCK_ACCESSES)}


def _attach_streams(trace: Trace, kernels_t: pa.Table,
                    stables: dict[str, pa.Table] | None) -> None:
    """Check the stream tables against the trace and keep them as trace.streams."""
    from . import streams as _streams
    names = {f: f for f in STREAM_FILES}
    present = (stables is not None,) * 2
    if _streams.check_presence(kernels_t.to_pandas(), present, KERNELS, names):
        src = _streams._Source(names=names, tables=stables)
        trace._cache["streams_source"] = src   # a view of the trace (retable) reads it again
        _streams.load_streams(trace, source=src)


def _manifest(tables: dict[str, pa.Table], source: dict[str, Any],
              has_streams: bool = False) -> dict[str, Any]:
    """The manifest of a trace made of these tables: the minor of the latest feature used
    (1: v1.1 columns or host_access; 2: v1.2 columns or streams), so a reader of an earlier
    minor refuses it by name rather than misreading it."""
    m = {"format": FORMAT, "version": VERSION, "page_size": PAGE_SIZE, "source": source}
    minor = max([OPTIONAL_MINOR[c] for f, t in tables.items()
                 for c in optional_present(t.column_names, f)] + [0])
    if set(tables[EVENTS].column("op").to_pylist()) & V11_OPS:
        minor = max(minor, 1)
    if has_streams:
        minor = max(minor, 2)
    if minor:
        m["minor"] = minor
    return m


def write_trace(path: str | os.PathLike, *, allocations: TableLike, events: TableLike,
                kernels: TableLike, accesses: TableLike, source: dict[str, Any] | None = None,
                overwrite: bool = False, validate: bool = True,
                blocks: TableLike | None = None,
                block_accesses: TableLike | None = None) -> Path:
    """Write a uvmtrace directory (the one writer generators and the collector share).

    Tables are pandas DataFrames or Arrow tables with the format's columns (the v1.1 optional
    columns are kept when present, other extra columns dropped, types cast losslessly); the
    manifest says the minor of the latest feature used. `blocks` and `block_accesses` are
    the v1.2 per-thread-block streams (both or neither). The trace is validated before
    anything is written and written to a temporary sibling first, so a failed write never
    leaves half a trace.
    """
    d = Path(path)
    if not d.name.endswith(".uvmtrace"):
        raise ValueError(f"{d}: a uvmtrace directory name must end in '.uvmtrace'")
    if d.exists() and not overwrite:
        raise FileExistsError(f"{d} exists (pass overwrite=True to replace it)")
    tables = {f: coerce_table(t, f) for f, t in
              ((ALLOCATIONS, allocations), (EVENTS, events), (KERNELS, kernels),
               (ACCESSES, accesses))}
    stables = _stream_tables(blocks, block_accesses)
    manifest = _manifest(tables, _jsonable(dict(source or {})), stables is not None)
    if validate:
        trace = _build(tables, _table_rows(tables[ACCESSES]),
                       {f: f for f in REQUIRED_FILES}, manifest, False, None)
        _attach_streams(trace, tables[KERNELS], stables)
        del trace
    d.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=d.name + ".", suffix=".tmp", dir=d.parent))
    try:
        for f, t in tables.items():
            pq.write_table(t, tmp / f, compression="zstd")
        if stables is not None:
            from . import streams as _streams
            _streams.write_files(tmp, stables)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        if d.exists():
            shutil.rmtree(d)
        os.replace(tmp, d)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            from .._atomic import _named
            raise _named(e, d) from e
        raise
    return d


def _jsonable(obj: Any) -> Any:
    try:
        json.dumps(obj)
        return obj
    except TypeError:
        return json.loads(json.dumps(obj, default=str))
