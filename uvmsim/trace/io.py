"""Read, validate and write uvmtrace v1 / v1.1 directories (docs/trace-format.md).

Nothing here knows about simulation: it checks the contract and turns a trace into the
dense arrays of `TraceArrays` once, streaming the access rows so a large trace never sits in
memory twice.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import TraceFormatError
from . import _resolve as R
from ._parquet import PARQUET_ERRORS, _one_line, open_checked
from .format import (ACCESSES, ADVISE_ARGS, ALLOCATIONS, ARG_CODE, EVENTS, FORMAT,
                     HOST_ACCESS_ARGS, KERNELS, KIND_HOST, KINDS, MANIFEST, MAX_SLICES, MINOR,
                     OP_CODE, OPS, OPTIONAL, PAGE_SIZE, PREFETCH_ARGS, RANGE_OPS,
                     REQUIRED_FILES, SCHEMAS, V11_OPS, VERSION, arrow_schema)
from .model import Trace, TraceArrays

TableLike = Any  # pandas.DataFrame | pyarrow.Table
_BATCH_ROWS = 1 << 20
_ADDR_LIMIT = 1 << 62  # addresses are handled as int64 internally


# --------------------------------------------------------------------------- columns
def _is_int_type(t: pa.DataType) -> bool:
    return pa.types.is_integer(t)


def _first_bad_cast_row(col: pa.ChunkedArray, target: pa.DataType) -> int | None:
    vals = col.to_pandas()
    info = np.iinfo(target.to_pandas_dtype())
    num = pd.to_numeric(vals, errors="coerce")
    bad = vals.notna() & (num.isna() | (num < info.min) | (num > info.max) | (num != np.floor(num)))
    idx = np.flatnonzero(bad.to_numpy())
    return int(idx[0]) if idx.size else None


def _coerce_column(col: pa.ChunkedArray | pa.Array, name: str, target: pa.DataType,
                   nullable: bool, file: str, row_offset: int = 0) -> pa.ChunkedArray:
    if isinstance(col, pa.Array):
        col = pa.chunked_array([col], type=col.type)
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = col.type
    if not nullable and col.null_count:
        first = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise TraceFormatError("null value in a non-nullable column", file=file, column=name,
                               row=row_offset + first)
    if pa.types.is_null(t) or (nullable and col.null_count == len(col)):
        return pa.chunked_array([pa.nulls(len(col), target)], type=target)
    if pa.types.is_string(target):
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            _check_utf8(col, name, file, row_offset)
            return col.cast(target)
        raise TraceFormatError(f"type {t} cannot be read as string", file=file, column=name)
    if t == target:
        return col
    if not (_is_int_type(t) or pa.types.is_floating(t)):
        raise TraceFormatError(f"type {t} cannot be cast losslessly to {target}", file=file,
                               column=name)
    try:
        return pc.cast(col, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        row = _first_bad_cast_row(col, target)
        raise TraceFormatError(f"value cannot be cast losslessly to {target}", file=file,
                               column=name, row=None if row is None else row_offset + row)


def _check_utf8(col: pa.ChunkedArray, name: str, file: str, row_offset: int) -> None:
    """Parquet does not check that strings are UTF-8; damaged bytes would surface later as
    a UnicodeDecodeError far from the file."""
    try:
        col.validate(full=True)
        return
    except pa.ArrowInvalid:
        pass
    for i, v in enumerate(col.cast(pa.large_binary()).to_pylist()):
        if v is not None:
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                raise TraceFormatError("string is not valid UTF-8", file=file, column=name,
                                       row=row_offset + i) from None
    raise TraceFormatError("string column is malformed", file=file, column=name)


def _check_columns(names: Iterable[str], file: str, shown: str) -> None:
    have = set(names)
    for name, _, _ in SCHEMAS[file]:
        if name not in have:
            raise TraceFormatError("missing column", file=shown, column=name)


def _optional_present(names: Iterable[str], file: str) -> tuple[str, ...]:
    have = set(names)
    return tuple(n for n, _, _ in OPTIONAL[file] if n in have)


def _coerce_table(table: TableLike, file: str, shown: str | None = None) -> pa.Table:
    """Cast a user's table to the spec schema, keeping only spec columns (v1 columns and
    the v1.1 optional ones that are present).

    `file` picks the schema; `shown` is the name errors use (the full path when read).
    """
    shown = shown or file
    if isinstance(table, pd.DataFrame):
        table = _from_pandas(table, shown)
    elif not isinstance(table, pa.Table):
        raise TypeError(f"{file}: expected a pandas DataFrame or pyarrow Table, got "
                        f"{type(table).__name__}")
    seen: set[str] = set()
    for n in table.column_names:
        if n in seen:
            raise TraceFormatError("column appears twice", file=shown, column=n)
        seen.add(n)
    _check_columns(table.column_names, file, shown)
    opt = _optional_present(table.column_names, file)
    schema = arrow_schema(file, opt)
    cols = [_coerce_column(table.column(f.name), f.name, f.type, f.nullable, shown)
            for f in schema]
    return pa.Table.from_arrays(cols, schema=schema)


def _from_pandas(df: pd.DataFrame, shown: str) -> pa.Table:
    names = [str(c) for c in df.columns]
    if len(set(names)) != len(names):
        dup = next(n for i, n in enumerate(names) if n in names[:i])
        raise TraceFormatError("column appears twice", file=shown, column=dup)
    arrays = []
    for i, n in enumerate(names):
        try:
            arrays.append(pa.array(df.iloc[:, i], from_pandas=True))
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
            raise TraceFormatError(f"values cannot be read as one Arrow type ({_one_line(e)})",
                                   file=shown, column=n) from None
    return pa.Table.from_arrays(arrays, names=names)


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


def _build(alloc_t: pa.Table, events_t: pa.Table, kernels_t: pa.Table,
           batches: Iterator[pa.RecordBatch], n_rows: int, names: dict[str, str],
           manifest: dict[str, Any], drop_out_of_range: bool, path: Path | None,
           has_slices: bool = False) -> Trace:
    fa, fe, fk, fx = names[ALLOCATIONS], names[EVENTS], names[KERNELS], names[ACCESSES]
    alloc = alloc_t.to_pandas()
    events = events_t.to_pandas()
    kernels = kernels_t.to_pandas()

    # allocations
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
    npages = last_page - first_page + 1
    nblocks = (last_page >> 9) - (first_page >> 9) + 1
    # each allocation spans < 2**50 pages and there are < 2**32 of them, so the sum fits
    # uint64 even before the check; the dense page index is int32 in the engine
    n_pages = int(npages.astype(np.uint64).sum())
    if n_pages >= 2**31:
        raise TraceFormatError(f"allocations span {n_pages} pages; at most 2**31 supported",
                               file=fa, column="size")
    page_off = np.concatenate([[0], np.cumsum(npages)[:-1]]).astype(np.int64)
    block_off = np.concatenate([[0], np.cumsum(nblocks)[:-1]]).astype(np.int64)
    n_blocks = int(nblocks.sum())
    host = kind == KIND_HOST

    # kernels
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

    # events
    n_ev = len(events)
    seq = events["seq"].to_numpy(np.uint64)
    gap = seq != np.arange(n_ev, dtype=np.uint64)
    if gap.any():
        r = _first(gap)
        raise TraceFormatError(f"seq is {seq[r]}, expected {r} (0, 1, 2, ... with no gaps)",
                               file=fe, column="seq", row=r)
    op = _codes(events["op"], OP_CODE, fe, "op").astype(np.int8)
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
    if k_pos.size != len(kernels):
        unseen = np.setdiff1d(np.arange(len(kernels)), k_pos)
        r = int(unseen[0])
        raise TraceFormatError(f"kernel_id {kid[r]} appears in no kernel event", file=fk,
                               column="kernel_id", row=r)
    ev_kernel = np.full(n_ev, -1, np.int64)
    ev_kernel[k_event] = np.arange(k_event.size)
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

    range_mask = np.zeros(len(OPS), np.bool_)
    for o in RANGE_OPS:
        range_mask[OP_CODE[o]] = True
    err, e, other, seg_start, seg_alloc, seg_first, seg_last, peak = R.walk_events(
        op, ev_alloc, addr.astype(np.int64), esize.astype(np.int64), base, end, host,
        first_page, page_off, nblocks, range_mask)
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

    # dense page and block maps
    page_alloc = np.repeat(np.arange(len(aid), dtype=np.int64), npages)
    vpage = first_page[page_alloc] + (np.arange(n_pages, dtype=np.int64) - page_off[page_alloc])
    page_block = (block_off[page_alloc] + (vpage >> 9) - (first_page[page_alloc] >> 9)
                  ).astype(np.int32)
    page_pos = (vpage & 511).astype(np.int16)
    del page_alloc, vpage
    b_alloc = np.repeat(np.arange(len(aid), dtype=np.int64), nblocks)
    window = (first_page[b_alloc] >> 9) + (np.arange(n_blocks, dtype=np.int64) - block_off[b_alloc])
    b_lo = np.where(window == first_page[b_alloc] >> 9, first_page[b_alloc] & 511, 0)
    b_hi = np.where(window == last_page[b_alloc] >> 9, last_page[b_alloc] & 511, 511)
    b_first_vpage = (window << 9) + b_lo
    b_page0 = page_off[b_alloc] + b_first_vpage - first_page[b_alloc]

    # access rows
    order = np.argsort(kid, kind="stable")
    kid_sorted = kid[order]
    kid_rank = np.empty(len(kid), np.int64)
    kid_rank[k_pos] = np.arange(k_pos.size)
    kid_rank = kid_rank[order]
    st, live, seen, k_row_start = R.new_row_state(len(aid), n_pages, k_event.size)
    out_page = np.empty(n_rows, np.int32)
    out_flags = np.empty(n_rows, np.uint8)
    out_count = np.empty(n_rows, np.uint32)
    # v1.1 slices: kept only when the column is there (an empty array means one slice each)
    out_slices = np.empty(n_rows if has_slices else 0, np.uint64)
    nslices_by_rank = k_nslices[k_pos] if has_slices else np.zeros(0, np.int64)
    no_slices = np.zeros(0, np.uint64)
    columns = SCHEMAS[ACCESSES] + (OPTIONAL[ACCESSES] if has_slices else [])
    done = 0
    for batch in batches:
        # the output arrays are sized by the footer's row count, which the compiled pass
        # must never write past
        if done + batch.num_rows > n_rows:
            raise TraceFormatError(f"holds more rows than the {n_rows} its metadata says",
                                   file=fx)
        cols = {n: _column_numpy(batch.column(n), n, t, nl, fx, done) for n, t, nl in columns}
        err, r, detail = R.resolve_rows(
            st, live, seen, k_row_start, kid_sorted, kid_rank, k_event, op, ev_alloc, base,
            end, first_page, last_page, page_off, cols["kernel_id"],
            cols["page"].view(np.int64), cols["flags"], cols["count"], cols["order"],
            cols["slices"] if has_slices else no_slices, nslices_by_rank,
            drop_out_of_range, out_page, out_flags, out_count, out_slices)
        if err != R.OK:
            _raise_row_error(err, done + int(r), int(detail), cols, int(r), kernels, kid,
                             k_pos, fx)
        done += batch.num_rows
    if done != n_rows:
        raise TraceFormatError(f"holds {done} rows, its metadata says {n_rows}", file=fx)
    R.finish_rows(st, k_row_start)
    n_out = int(st[R.S_OUT])
    del seen, live
    # decoded batches are gone; hand their memory back instead of keeping it in the pool
    pa.default_memory_pool().release_unused()

    kernels_by_rank = kernels.iloc[k_pos].reset_index(drop=True)
    k_nslices_by_rank = np.maximum(k_nslices[k_pos], 1) if has_slices else \
        np.ones(k_pos.size, np.int64)
    arrays = TraceArrays(
        a_host=host, a_first_page=first_page, a_npages=npages, a_page_off=page_off,
        a_block_off=block_off, a_nblocks=nblocks, page_block=page_block, page_pos=page_pos,
        b_alloc=b_alloc.astype(np.int32), b_lo=b_lo.astype(np.int16),
        b_hi=b_hi.astype(np.int16), b_page0=b_page0, b_first_vpage=b_first_vpage,
        ev_op=op, ev_alloc=ev_alloc, ev_kernel=ev_kernel, ev_arg=arg,
        ev_seg_start=seg_start, seg_alloc=seg_alloc, seg_first=seg_first, seg_last=seg_last,
        k_row_start=k_row_start,
        k_duration_ns=kernels_by_rank["duration_ns"].to_numpy(np.float64, na_value=np.nan),
        row_page=out_page[:n_out], row_flags=out_flags[:n_out], row_count=out_count[:n_out],
        row_slices=out_slices[:n_out] if has_slices else out_slices,
        k_nslices=k_nslices_by_rank)
    return Trace(manifest=manifest, allocations=alloc, events=events, kernels=kernels_by_rank,
                 arrays=arrays, peak_blocks=int(peak), dropped_rows=int(st[R.S_DROPPED]),
                 path=path)


def _column_numpy(col: pa.Array, name: str, target: pa.DataType, nullable: bool, file: str,
                  row_offset: int) -> np.ndarray:
    """One batch column of the access rows as NumPy: a zero-copy view when it already has
    the spec's type and no nulls (the common case, and the one loading speed rests on)."""
    if col.type == target and col.null_count == 0:
        return col.to_numpy(zero_copy_only=True)
    return _coerce_column(col, name, target, nullable, file, row_offset).combine_chunks() \
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
    if err == R.E_OUT_OF_RANGE:
        raise TraceFormatError(
            f"{kname} touches address {detail << 12:#x} (page {detail:#x}) outside every "
            "allocation live when it runs (load with drop_out_of_range=True to drop such rows)",
            file=fx, column="page", row=row)
    raise TraceFormatError(f"internal validation error {err}", file=fx, row=row)


# --------------------------------------------------------------------------- public API
def load_trace(path: str | os.PathLike, *, drop_out_of_range: bool = False,
               batch_rows: int = _BATCH_ROWS) -> Trace:
    """Read and validate a uvmtrace v1 directory.

    Raises `TraceFormatError` naming the file, column and first offending row for anything
    that breaks the format, and an `OSError` subclass (`FileNotFoundError`,
    `NotADirectoryError`, `PermissionError`, ...) when the path is missing or unreadable.
    With `drop_out_of_range=True`, access rows outside every live allocation are dropped
    and counted in `Trace.dropped_rows` instead.
    """
    d = Path(path)
    try:
        exists = d.exists()
    except ValueError:  # e.g. an embedded NUL: no file can have this name
        exists = False
    if not exists:
        raise FileNotFoundError(errno.ENOENT, "no such trace directory", str(d))
    if not d.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "a uvmtrace is a directory (name ending in "
                                 ".uvmtrace)", str(d))
    if not d.name.endswith(".uvmtrace"):
        raise TraceFormatError("trace directory name must end in '.uvmtrace'", file=str(d))
    for f in REQUIRED_FILES:
        if not (d / f).is_file():
            raise TraceFormatError("missing file" if not (d / f).exists() else
                                   "not a regular file", file=str(d / f))
    manifest = _read_manifest(d)
    names = {f: str(d / f) for f in REQUIRED_FILES}
    files = {f: open_checked(d / f, names[f]) for f in (ALLOCATIONS, EVENTS, KERNELS,
                                                         ACCESSES)}
    small = {}
    for f in (ALLOCATIONS, EVENTS, KERNELS):
        pf = files[f]
        _check_columns(pf.schema_arrow.names, f, names[f])
        cols = _spec_columns(pf.schema_arrow.names, f)
        try:
            t = pf.read(columns=cols, use_threads=True)
        except PARQUET_ERRORS as e:
            raise TraceFormatError(f"unreadable Parquet data ({_one_line(e)})",
                                   file=names[f]) from None
        small[f] = _coerce_table(t, f, names[f])
    pf = files[ACCESSES]
    _check_columns(pf.schema_arrow.names, ACCESSES, names[ACCESSES])
    cols = _spec_columns(pf.schema_arrow.names, ACCESSES)
    if manifest.get("minor", 0) < 1:
        # a v1.1 feature under a v1 manifest: a v1 reader would silently ignore the
        # columns, so the trace does not mean what its manifest says
        for f, present in ((KERNELS, _optional_present(small[KERNELS].column_names, KERNELS)),
                           (ACCESSES, _optional_present(cols, ACCESSES))):
            if present:
                raise TraceFormatError("v1.1 column in a trace whose manifest says minor 0",
                                       file=names[f], column=present[0])
        ops = small[EVENTS].column("op")
        if len(ops) and pc.any(pc.is_in(ops, pa.array(sorted(V11_OPS)))).as_py():
            r = int(np.flatnonzero(pc.is_in(ops, pa.array(sorted(V11_OPS))).to_numpy(
                zero_copy_only=False))[0])
            raise TraceFormatError("v1.1 op in a trace whose manifest says minor 0",
                                   file=names[EVENTS], column="op", row=r)
    return _build(small[ALLOCATIONS], small[EVENTS], small[KERNELS],
                  _guarded(pf.iter_batches(batch_size=batch_rows, columns=cols,
                                           use_threads=True), names[ACCESSES]),
                  pf.metadata.num_rows, names, manifest, drop_out_of_range, d,
                  has_slices="slices" in cols)


def _spec_columns(names: Iterable[str], file: str) -> list[str]:
    """The columns of `file` the reader decodes: v1's and the v1.1 optional ones present
    (extra columns are never decoded, so damage in them cannot matter)."""
    return [n for n, _, _ in SCHEMAS[file]] + list(_optional_present(names, file))


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
                      drop_out_of_range: bool = False) -> Trace:
    """Validate in-memory tables (pandas or Arrow) as a uvmtrace, without touching disk."""
    tables = {f: _coerce_table(t, f) for f, t in
              ((ALLOCATIONS, allocations), (EVENTS, events), (KERNELS, kernels),
               (ACCESSES, accesses))}
    manifest = _manifest(tables, dict(source or {}))
    acc = tables[ACCESSES]
    return _build(tables[ALLOCATIONS], tables[EVENTS], tables[KERNELS],
                  iter(acc.to_batches(max_chunksize=_BATCH_ROWS)), acc.num_rows,
                  {f: f for f in REQUIRED_FILES}, manifest, drop_out_of_range, None,
                  has_slices="slices" in acc.column_names)


def _manifest(tables: dict[str, pa.Table], source: dict[str, Any]) -> dict[str, Any]:
    """The manifest of a trace made of these tables: minor 1 when a v1.1 feature is used,
    so a v1-only reader refuses it by name rather than misreading it."""
    m = {"format": FORMAT, "version": VERSION, "page_size": PAGE_SIZE, "source": source}
    uses_v11 = any(_optional_present(t.column_names, f) for f, t in tables.items()) or \
        bool(set(tables[EVENTS].column("op").to_pylist()) & V11_OPS)
    if uses_v11:
        m["minor"] = MINOR
    return m


def write_trace(path: str | os.PathLike, *, allocations: TableLike, events: TableLike,
                kernels: TableLike, accesses: TableLike, source: dict[str, Any] | None = None,
                overwrite: bool = False, validate: bool = True) -> Path:
    """Write a uvmtrace directory (the one writer generators and the collector share).

    Tables are pandas DataFrames or Arrow tables with the spec's columns (the v1.1 optional
    columns are kept when present, other extra columns dropped, types cast losslessly); the
    manifest says minor 1 when a v1.1 column or event is used. The trace is validated before anything is written and
    written to a temporary sibling first, so a failed write never leaves half a trace.
    """
    d = Path(path)
    if not d.name.endswith(".uvmtrace"):
        raise ValueError(f"{d}: a uvmtrace directory name must end in '.uvmtrace'")
    if d.exists() and not overwrite:
        raise FileExistsError(f"{d} exists (pass overwrite=True to replace it)")
    tables = {f: _coerce_table(t, f) for f, t in
              ((ALLOCATIONS, allocations), (EVENTS, events), (KERNELS, kernels),
               (ACCESSES, accesses))}
    manifest = _manifest(tables, _jsonable(dict(source or {})))
    if validate:
        acc = tables[ACCESSES]
        _build(tables[ALLOCATIONS], tables[EVENTS], tables[KERNELS],
               iter(acc.to_batches(max_chunksize=_BATCH_ROWS)), acc.num_rows,
               {f: f for f in REQUIRED_FILES}, manifest, False, None,
               has_slices="slices" in acc.column_names)
    d.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=d.name + ".", suffix=".tmp", dir=d.parent))
    try:
        for f, t in tables.items():
            pq.write_table(t, tmp / f, compression="zstd")
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        if d.exists():
            shutil.rmtree(d)
        os.replace(tmp, d)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return d


def _jsonable(obj: Any) -> Any:
    try:
        json.dumps(obj)
        return obj
    except TypeError:
        return json.loads(json.dumps(obj, default=str))
