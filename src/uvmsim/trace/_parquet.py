"""Open a trace's Parquet files only after their footer and metadata are consistent.

pyarrow trusts a file's footer: a footer length beyond the file, a row count that disagrees
with the row groups, or a column chunk that points outside the file can make it fail with an
unrelated error, allocate without bound, or loop, and some malformed footers make it abort
the process. So the reader checks the framing bytes and decodes the footer's Thrift itself
(bounded by the footer's length), then lets pyarrow parse the footer and cross-checks every
number the data readers will trust before a single data page is decoded.

The footer grows with the row groups (about 400 bytes per row group of five columns), so it
is walked by compiled code, once where its facts fit the arrays sized for it, and they are
checked by compiled passes over those arrays, not field by field in Python: 95,984 one-row
row groups make a 37 MB footer, whose Python decoding took most of the tens of seconds such
a file once took to load (benchmarks/reader_limits.py).
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numba import njit

from ..errors import TraceFormatError

MAGIC = b"PAR1"
# A trace's footers are a few KiB; the limit only stops a corrupt length from making the
# parser allocate gigabytes.
MAX_FOOTER = 64 << 20
# The largest uncompressed size a column chunk can legally claim (its footer's
# total_uncompressed_size: page headers plus decompressed page data) follows from two facts
# of the format; a claim above either is damage, whatever pyarrow would make of it.
#
# 1. The codec. Page headers are never compressed and page data grows at most by its codec's
#    largest expansion, so the chunk's uncompressed size is at most that factor times its
#    compressed size: 1 without compression; snappy 64 bytes per 3-byte copy (22); deflate
#    (gzip) 258 bytes per two bits (1032); LZ4 255 bytes per length byte (256); zstd a 128
#    KiB block per 4 bytes, an RLE block (32768); brotli at most 16 MiB per meta-block,
#    whose header takes bytes (2**24). Codecs not listed (LZO) are not bounded this way;
#    pyarrow cannot decode them anyway.
_MAX_EXPANSION = {"UNCOMPRESSED": 1, "SNAPPY": 22, "GZIP": 1032, "LZ4": 256, "LZ4_RAW": 256,
                  "ZSTD": 32768, "BROTLI": 1 << 24}
# 2. The values. A chunk of n values has at most one dictionary page and n data pages (a
#    page holds at least one value; pyarrow's data_page_size=1 writes exactly that). For a
#    physical type of fixed width w (bytes), each value costs at most itself, its dictionary
#    entry, its dictionary index written as a run of its own (9 bytes) and its definition
#    and repetition levels likewise (4 bytes); each page at most a Thrift header (for these
#    types, statistics included, under 256 bytes) and the framing of its encoding (level
#    lengths, a delta-encoding header and the padding of its last miniblock: under 256).
#    A page of any other type holds at most 2**31 - 1 bytes of data (its size is a Thrift
#    i32) and a header whose statistics hold at most four such values.
_FIXED = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8}
# the footer's enums (parquet.thrift Type and CompressionCodec)
_TYPES = ("BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
          "FIXED_LEN_BYTE_ARRAY")
_CODECS = ("UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW")
_PER_VALUE = 9 + 4
_PER_PAGE = 512
_PER_PAGE_ANY = 6 << 31

# What pyarrow raises for a damaged file (its OSError is an ArrowIOError for a thrift or
# decompression failure, never a missing file: the file was opened before it got there).
PARQUET_ERRORS = (pa.ArrowException, OSError, ValueError, EOFError)


class CheckedFile(pq.ParquetFile):
    """A ParquetFile whose footer open_checked has checked; `row_group_rows` holds each row
    group's row count as an array (pyarrow's metadata API costs a call per row group)."""

    row_group_rows: np.ndarray
    source: pa.NativeFile  # the file, opened once: every reader of it reads the same bytes

    def twin(self) -> pq.ParquetFile:
        """Another reader of the same open file with the same checked metadata (its footer
        is not parsed again), for a second thread: the file reads at offsets, so readers
        may share it, but a reader is one thread's (src/uvmsim/trace/io.py, _batches)."""
        return pq.ParquetFile(self.source, metadata=self.metadata)


def open_checked(path: Path, shown: str) -> CheckedFile:
    """A ParquetFile for `path` whose metadata has been checked against the file.

    Raises `TraceFormatError` (naming `shown`) for anything inconsistent; an `OSError` only
    when the file cannot be opened or read at all.
    """
    size = os.stat(path).st_size
    with open(path, "rb") as f:
        if size < 12:
            raise TraceFormatError(f"{size} bytes is too short to be a Parquet file", file=shown)
        head = f.read(4)
        f.seek(size - 8)
        tail = f.read(8)
    footer_len, magic = struct.unpack("<I4s", tail)
    if head != MAGIC or magic != MAGIC:
        what = "encrypted Parquet is not supported" if magic == b"PARE" else \
            "not a Parquet file (no PAR1 magic at both ends)"
        raise TraceFormatError(what, file=shown)
    if footer_len == 0 or footer_len > size - 12 or footer_len > MAX_FOOTER:
        raise TraceFormatError(f"Parquet footer length {footer_len} does not fit a file of "
                               f"{size} bytes", file=shown)
    with open(path, "rb") as f:
        f.seek(size - 8 - footer_len)
        footer = f.read(footer_len)
    ft = _check_footer_bytes(footer, shown)
    try:
        source = pa.OSFile(str(path))
        pf = CheckedFile(source)
        pf.source = source
        md = pf.metadata
        arrow_names = pf.schema_arrow.names
    except PARQUET_ERRORS as e:
        raise TraceFormatError(f"unreadable Parquet footer ({_one_line(e)})", file=shown)
    try:
        _check_metadata(md, arrow_names, ft, size - 8 - footer_len, shown)
    except TraceFormatError:
        raise
    except PARQUET_ERRORS as e:  # e.g. a column path that is not UTF-8
        raise TraceFormatError(f"unreadable Parquet footer ({_one_line(e)})", file=shown)
    pf.row_group_rows = ft.rg_rows
    return pf


def _check_metadata(md: pq.FileMetaData, arrow_names: list[str], ft: "_Footer",
                    data_end: int, shown: str) -> None:
    """Cross-check pyarrow's reading of the footer with the facts walked from its bytes,
    then check every row group (as arrays) and column chunk (in one compiled pass) against
    the file."""
    schema = md.schema
    n_cols = md.num_columns
    if len(schema) != n_cols:
        raise TraceFormatError(f"footer lists {n_cols} columns but its schema has "
                               f"{len(schema)}", file=shown)
    # the same footer, read twice: pyarrow must see what the walk saw
    if n_cols != ft.leaf_type.size or md.num_row_groups != ft.rg_rows.size or \
            md.num_rows != ft.num_rows:
        raise TraceFormatError("unreadable Parquet footer (pyarrow reads it differently)",
                               file=shown)
    # the format's columns are flat; a nested or repeated extra column is allowed (and never read)
    names = [schema.column(i).path for i in range(n_cols)]
    for group in (arrow_names, names):  # top-level columns, then leaf paths
        seen: set[str] = set()
        for n in group:
            if n in seen:
                raise TraceFormatError("column appears twice", file=shown, column=n)
            seen.add(n)
    rows = ft.rg_rows
    ck = ft.chunks
    bad_rg = (rows < 0) | (ft.rg_ncols != n_cols)
    first_rg = np.flatnonzero(bad_rg)
    k = _first_out_of_bounds(ck, rows, ft.leaf_rep, data_end)
    if first_rg.size or k >= 0:
        gr = int(first_rg[0]) if first_rg.size else rows.size
        gc = int(ck[k, _K_RG]) if k >= 0 else rows.size
        if gr <= gc:
            if rows[gr] < 0:
                raise TraceFormatError(f"row group {gr} has {rows[gr]} rows", file=shown)
            raise TraceFormatError(f"row group {gr} has {ft.rg_ncols[gr]} column chunks, the "
                                   f"schema {n_cols}", file=shown)
        r = int(rows[gc])
        flat = bool(ft.leaf_rep[ck[k, _K_COL]] == 0)
        _, outside, most, ratio = _chunk_bounds(ck[k], r, flat, data_end)
        _chunk_error(ck[k], names[ck[k, _K_COL]], flat, r, outside, int(most), int(ratio),
                     shown)
    total = sum(rows.tolist())  # exact: hostile counts may overflow int64
    if total != md.num_rows:
        raise TraceFormatError(f"footer says {md.num_rows} rows but its row groups hold "
                               f"{total}", file=shown)


@njit(cache=True)
def _chunk_bounds(c, r, flat, data_end):
    """Whether column chunk c (a row of _Footer.chunks, in a row group of r rows) breaks a
    bound of the module's head or the file's, whether it lies outside the file's data,
    the most uncompressed bytes its values can take and its codec's most expansion (0: not
    bounded). Sizes are int64 up to 2**63: the products in floats."""
    n, comp, unc = c[_K_NVAL], c[_K_COMP], c[_K_UNC]
    dpo, dico = c[_K_DPO], c[_K_DICT]
    # an empty row group's chunk may have no data page (offset 0) but a dictionary page
    has_dpo = r > 0 or dpo != 0
    has_dict = dico != _MISSING
    lo = 0
    if has_dpo and has_dict:
        lo = min(dpo, dico)
    elif has_dpo:
        lo = dpo
    elif has_dict:
        lo = dico
    outside = comp < 0 or (has_dpo and (dpo < 4 or dpo >= data_end)) or \
        (has_dict and (dico < 4 or dico >= data_end)) or \
        ((has_dpo or has_dict) and comp > data_end - lo)
    t = c[_K_TYPE]
    width = np.float64(_WIDTH[t]) if 0 <= t < _WIDTH.size else 0.0
    nn = np.float64(max(n, 0))
    if width > 0:
        most = (nn + 1) * _PER_PAGE + nn * (2 * width + _PER_VALUE)
    else:
        most = (nn + 1) * np.float64(_PER_PAGE_ANY)
    codec = c[_K_CODEC]
    ratio = _RATIO[codec] if 0 <= codec < _RATIO.size else 0
    # unc > ratio * comp, in integers: (unc - 1) // ratio >= comp
    over = ratio > 0 and unc > 0 and (unc - 1) // max(ratio, 1) >= comp
    bad = c[_K_FPATH] != 0 or (flat and n != r) or outside or (r > 0 and comp == 0) or \
        unc > most or over
    return bad, outside, most, ratio


@njit(cache=True)
def _first_out_of_bounds(chunks, rows, leaf_rep, data_end):
    """The first column chunk that _chunk_bounds finds bad, or -1 (one pass over the
    chunks' rows, as _first_bad_chunk)."""
    for k in range(chunks.shape[0]):
        r = rows[chunks[k, _K_RG]]
        if _chunk_bounds(chunks[k], r, leaf_rep[chunks[k, _K_COL]] == 0, data_end)[0]:
            return k
    return -1


def _chunk_error(c: np.ndarray, name: str, flat: bool, rows: int, outside: bool, most: int,
                 ratio: int, shown: str) -> None:
    """Raise the first problem of one column chunk (the one _check_metadata found first)."""
    g = int(c[_K_RG])

    def bad(what: str) -> TraceFormatError:
        return TraceFormatError(f"row group {g}: {what}", file=shown, column=name)

    if c[_K_FPATH]:
        raise bad("column chunk refers to another file")
    if flat and c[_K_NVAL] != rows:  # one value (or null) per row
        raise bad(f"column chunk has {c[_K_NVAL]} values for {rows} rows")
    if outside:
        raise bad("column chunk lies outside the file's data")
    if rows > 0 and c[_K_COMP] == 0:
        raise bad("column chunk is empty")
    claim, n = int(c[_K_UNC]), max(int(c[_K_NVAL]), 0)
    t = int(c[_K_TYPE])
    tname = _TYPES[t] if 0 <= t < len(_TYPES) else f"type-{t}"
    if claim > most:
        raise bad(f"column chunk claims {claim} uncompressed bytes, more than {n} {tname} "
                  "values can take")
    codec = int(c[_K_CODEC])
    cname = _CODECS[codec] if 0 <= codec < len(_CODECS) else f"codec-{codec}"
    raise bad(f"column chunk claims {claim} uncompressed bytes from {int(c[_K_COMP])} "
              f"compressed with {cname} (at most {ratio}x)")


# bytes per value of each physical type (0: not of fixed width), most expansion per codec
# (0: not bounded), indexed by the footer's enums
_WIDTH = np.array([_FIXED.get(t, 0) for t in _TYPES], np.int64)
_RATIO = np.array([_MAX_EXPANSION.get(c, 0) for c in _CODECS], np.int64)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


# --------------------------------------------------------------------------- footer bytes
# pyarrow aborts the whole process (std::terminate, not an exception) on some footers, e.g.
# a size-statistics histogram whose length disagrees with the column's levels. So the
# footer's Thrift (compact protocol) is walked here first, with bounds on every length, and
# the facts pyarrow relies on are checked before it sees the file. The walk is compiled:
# it reads every byte of the footer, which has hundreds of bytes per row group.

_T_STOP, _T_TRUE, _T_FALSE, _T_I8, _T_I16, _T_I32, _T_I64, _T_DOUBLE, _T_BINARY, _T_LIST, \
    _T_SET, _T_MAP, _T_STRUCT = range(13)
_MAX_DEPTH = 32
_MISSING = np.iinfo(np.int64).min  # a field the footer does not hold

# the structs of parquet.thrift the walk interprets (any other is walked, not read)
_R_OTHER, _R_ROOT, _R_SCHEMA, _R_RG, _R_CHUNK, _R_META, _R_SIZE = range(7)
# a column chunk's facts (rows of Footer.chunks): row group, position in it, physical type,
# codec, num_values, total uncompressed and compressed size, data and dictionary page
# offsets, whether it has column metadata (ColumnMetaData), a file_path, crypto metadata, the
# lengths of its repetition and definition level histograms, where its path list starts in
# the footer, its length and its element type
_K_RG, _K_COL, _K_TYPE, _K_CODEC, _K_NVAL, _K_UNC, _K_COMP, _K_DPO, _K_DICT, _K_META, \
    _K_FPATH, _K_CRYPTO, _K_REPH, _K_DEFH, _K_PATH, _K_PATHN, _K_PATHT = range(17)
_NK = 17
# a schema element's facts: type, repetition, name (offset and length in the footer),
# num_children, whether it is a struct at all
_S_TYPE, _S_REP, _S_NAME, _S_NAMELEN, _S_KIDS, _S_OK = range(6)
_NS = 6
# the file's facts: num_rows, schema and row groups present (their lists' element types),
# encrypted
_F_ROWS, _F_SCHEMA, _F_RGS, _F_ENCRYPTED = range(4)
_NF = 4
# walk errors (and which field a wrong type was found in: role * 256 + field id)
_E_OK, _E_END, _E_VARINT, _E_LEN, _E_DEPTH, _E_LIST, _E_MAP, _E_TYPE, _E_WRONG = range(9)
_WALK_ERRORS = {_E_END: "footer ends inside a value", _E_VARINT: "varint longer than 10 bytes",
                _E_LEN: "a length runs past the footer", _E_DEPTH: "nested too deeply",
                _E_LIST: "a list longer than the footer", _E_MAP: "a map longer than the footer",
                _E_TYPE: "unknown Thrift type"}
# field (role, id) -> its name, for a wrong-type message
_FIELDS = {(_R_ROOT, 2): "schema", (_R_ROOT, 3): "num_rows", (_R_ROOT, 4): "row groups",
           (_R_SCHEMA, 1): "physical type", (_R_SCHEMA, 3): "repetition type",
           (_R_SCHEMA, 4): "schema element name", (_R_SCHEMA, 5): "num_children",
           (_R_RG, 1): "row group columns", (_R_RG, 3): "row group num_rows",
           (_R_CHUNK, 3): "column metadata", (_R_META, 1): "physical type",
           (_R_META, 3): "path", (_R_META, 4): "codec", (_R_META, 5): "num_values",
           (_R_META, 6): "uncompressed size", (_R_META, 7): "compressed size",
           (_R_META, 9): "data page offset", (_R_META, 11): "dictionary page offset",
           (_R_META, 16): "size statistics", (_R_SIZE, 2): "repetition level histogram",
           (_R_SIZE, 3): "definition level histogram"}


@njit(cache=True)
def _varint(b, i):
    """(value, next position, error) of the unsigned varint at b[i]."""
    v = np.uint64(0)
    shift = np.uint64(0)
    while True:
        if i >= b.size:
            return v, i, _E_END
        c = np.uint64(b[i])
        i += 1
        v |= (c & np.uint64(0x7F)) << shift
        if not c & np.uint64(0x80):
            return v, i, _E_OK
        shift += np.uint64(7)
        if shift > np.uint64(63):
            return v, i, _E_VARINT


@njit(cache=True)
def _zigzag(v):
    return np.int64(v >> np.uint64(1)) ^ -np.int64(v & np.uint64(1))


@njit(cache=True)
def _is_int(t):
    return t == _T_I8 or t == _T_I16 or t == _T_I32 or t == _T_I64


@njit(cache=True)
def _expect(r, f, t):
    """Whether a value of wire type t may stand in field f of a struct of role r (the
    fields the checks read; any other field may hold anything)."""
    if r == _R_ROOT:
        if f == 3:
            return _is_int(t)
        if f == 2 or f == 4:
            return t == _T_LIST or t == _T_SET
    elif r == _R_SCHEMA:
        if f == 1 or f == 3 or f == 5:
            return _is_int(t)
        if f == 4:
            return t == _T_BINARY
    elif r == _R_RG:
        if f == 1:
            return t == _T_LIST or t == _T_SET
        if f == 3:
            return _is_int(t)
    elif r == _R_CHUNK:
        if f == 3:
            return t == _T_STRUCT
    elif r == _R_META:
        if f == 1 or f == 4 or f == 5 or f == 6 or f == 7 or f == 9 or f == 11:
            return _is_int(t)
        if f == 3:
            return t == _T_LIST or t == _T_SET
        if f == 16:
            return t == _T_STRUCT
    elif r == _R_SIZE:
        if f == 2 or f == 3:
            return t == _T_LIST or t == _T_SET
    return True


@njit(cache=True)
def _walk(b, fil, schema, rgs, chunks):
    """Walk the footer (a FileMetaData in Thrift's compact protocol) with an explicit stack,
    bounding every length by the bytes left. Returns (error, position, field, schema
    elements, row groups, column chunks, whether they all fit). Their facts go to the
    arrays (and fil) until one is full; from then on they are only counted (fill is
    off), and the caller walks again with arrays of the sizes counted. Arrays are never
    reallocated and the loop has one exit, so it runs without reference counting."""
    n = b.size
    fill = True
    ns = nc = ng = 0
    err = _E_OK
    what = 0
    depth = _MAX_DEPTH + 2
    kind = np.zeros(depth, np.int64)    # 0 struct, 1 list, 2 map
    role = np.zeros(depth, np.int64)    # struct: its role; list: its elements' role
    fid = np.zeros(depth, np.int64)     # struct: last field id; list: the list's field id
    left = np.zeros(depth, np.int64)    # list, map: values left
    et = np.zeros(depth, np.int64)      # list: element type; map: key type
    vt = np.zeros(depth, np.int64)      # map: value type
    role[0] = _R_ROOT
    d = 1
    i = 0
    while d > 0:
        top = d - 1
        elem = kind[top] != 0
        if kind[top] == 0:
            if i >= n:
                err, what = _E_END, 0
                break
            h = np.int64(b[i])
            i += 1
            t = h & 15
            if t == _T_STOP:
                d -= 1
                continue
            if h >> 4:
                f = fid[top] + (h >> 4)
            else:
                v, i, e = _varint(b, i)
                if e:
                    err, what = e, 0
                    break
                f = _zigzag(v)
            fid[top] = f
            r = role[top]
            if not _expect(r, f, t):
                err, what = _E_WRONG, r * 256 + f
                break
        else:
            if left[top] == 0:
                d -= 1
                continue
            left[top] -= 1
            r = role[top]
            f = fid[top]
            if kind[top] == 1:
                t = et[top]
            else:
                t = et[top] if left[top] % 2 == 1 else vt[top]
            if t == _T_TRUE or t == _T_FALSE:
                # a bool inside a list or map is a byte of its own
                if i >= n:
                    err, what = _E_END, 0
                    break
                i += 1
                continue
        # one value of type t: field f of a struct of role r, or an element of such a list
        val = _MISSING
        if t == _T_TRUE or t == _T_FALSE:
            val = 1 if t == _T_TRUE else 0
        elif t == _T_I8:
            if i >= n:
                err, what = _E_END, 0
                break
            val = np.int64(b[i])
            i += 1
        elif t == _T_I16 or t == _T_I32 or t == _T_I64:
            v, i, e = _varint(b, i)
            if e:
                err, what = e, 0
                break
            val = _zigzag(v)
        elif t == _T_DOUBLE:
            if i + 8 > n:
                err, what = _E_LEN, 0
                break
            i += 8
        elif t == _T_BINARY:
            v, i, e = _varint(b, i)
            if e:
                err, what = e, 0
                break
            if v > np.uint64(n - i):
                err, what = _E_LEN, 0
                break
            if fill and not elem and r == _R_SCHEMA and f == 4:
                schema[ns - 1, _S_NAME] = i
                schema[ns - 1, _S_NAMELEN] = np.int64(v)
            elif fill and not elem and r == _R_CHUNK and f == 1:
                chunks[nc - 1, _K_FPATH] = 1
            i += np.int64(v)
        elif t == _T_LIST or t == _T_SET:
            if i >= n:
                err, what = _E_END, 0
                break
            h = np.int64(b[i])
            i += 1
            size = h >> 4
            if size == 15:
                v, i, e = _varint(b, i)
                if e:
                    err, what = e, 0
                    break
                if v > np.uint64(n - i):
                    err, what = _E_LIST, 0
                    break
                size = np.int64(v)
            elif size > n - i:  # every element takes at least one byte
                err, what = _E_LIST, 0
                break
            if d >= depth - 1:
                err, what = _E_DEPTH, 0
                break
            er = _R_OTHER
            if not elem:
                if r == _R_ROOT and f == 2:
                    er = _R_SCHEMA
                    fil[_F_SCHEMA] = h & 15
                elif r == _R_ROOT and f == 4:
                    er = _R_RG
                    fil[_F_RGS] = h & 15
                elif r == _R_RG and f == 1:
                    er = _R_CHUNK
                    if fill:
                        rgs[ng - 1, 1] = size if (h & 15) == _T_STRUCT else -1
                elif not fill:
                    pass
                elif r == _R_META and f == 3:
                    chunks[nc - 1, _K_PATH] = i
                    chunks[nc - 1, _K_PATHN] = size
                    chunks[nc - 1, _K_PATHT] = h & 15
                elif r == _R_SIZE and f == 2:
                    chunks[nc - 1, _K_REPH] = size
                elif r == _R_SIZE and f == 3:
                    chunks[nc - 1, _K_DEFH] = size
            kind[d] = 1
            role[d] = er
            fid[d] = 0
            left[d] = size
            et[d] = h & 15
            d += 1
        elif t == _T_MAP:
            v, i, e = _varint(b, i)
            if e:
                err, what = e, 0
                break
            if v > np.uint64((n - i) // 2):
                err, what = _E_MAP, 0
                break
            if v:  # an empty map has no type byte
                if i >= n:
                    err, what = _E_END, 0
                    break
                h = np.int64(b[i])
                i += 1
                if d >= depth - 1:
                    err, what = _E_DEPTH, 0
                    break
                kind[d] = 2
                role[d] = _R_OTHER
                left[d] = 2 * np.int64(v)
                et[d] = h >> 4
                vt[d] = h & 15
                d += 1
        elif t == _T_STRUCT:
            if d >= depth - 1:
                err, what = _E_DEPTH, 0
                break
            sr = _R_OTHER
            if elem and r == _R_SCHEMA:
                sr = _R_SCHEMA
                if ns >= schema.shape[0]:
                    fill = False
                if fill:
                    schema[ns] = _MISSING
                    schema[ns, _S_OK] = 1
                ns += 1
            elif elem and r == _R_RG:
                sr = _R_RG
                if ng >= rgs.shape[0]:
                    fill = False
                if fill:
                    rgs[ng] = _MISSING
                ng += 1
            elif elem and r == _R_CHUNK:
                sr = _R_CHUNK
                if nc >= chunks.shape[0]:
                    fill = False
                if fill:
                    chunks[nc] = _MISSING
                    chunks[nc, _K_RG] = ng - 1
                    chunks[nc, _K_COL] = rgs[ng - 1, 1] - left[top] - 1
                    chunks[nc, _K_META] = 0
                    chunks[nc, _K_FPATH] = 0
                    chunks[nc, _K_CRYPTO] = 0
                    chunks[nc, _K_REPH] = -1
                    chunks[nc, _K_DEFH] = -1
                nc += 1
            elif not elem and r == _R_CHUNK and f == 3:
                sr = _R_META
                if fill:
                    chunks[nc - 1, _K_META] = 1
            elif not elem and r == _R_META and f == 16:
                sr = _R_SIZE
            kind[d] = 0
            role[d] = sr
            fid[d] = 0
            d += 1
        else:
            err, what = _E_TYPE, t
            break
        if not elem:
            # a field present: presence flags, then the integers the checks read
            if r == _R_ROOT and (f == 8 or f == 9):
                fil[_F_ENCRYPTED] = 1
            elif not fill:
                if r == _R_ROOT and f == 3 and (val != _MISSING or _is_int(t)):
                    fil[_F_ROWS] = val
            elif r == _R_CHUNK and (f == 8 or f == 9):
                chunks[nc - 1, _K_CRYPTO] = 1
            elif val != _MISSING or _is_int(t):
                if r == _R_ROOT and f == 3:
                    fil[_F_ROWS] = val
                elif r == _R_SCHEMA:
                    if f == 1:
                        schema[ns - 1, _S_TYPE] = val
                    elif f == 3:
                        schema[ns - 1, _S_REP] = val
                    elif f == 5:
                        schema[ns - 1, _S_KIDS] = val
                elif r == _R_RG and f == 3:
                    rgs[ng - 1, 0] = val
                elif r == _R_META:
                    if f == 1:
                        chunks[nc - 1, _K_TYPE] = val
                    elif f == 4:
                        chunks[nc - 1, _K_CODEC] = val
                    elif f == 5:
                        chunks[nc - 1, _K_NVAL] = val
                    elif f == 6:
                        chunks[nc - 1, _K_UNC] = val
                    elif f == 7:
                        chunks[nc - 1, _K_COMP] = val
                    elif f == 9:
                        chunks[nc - 1, _K_DPO] = val
                    elif f == 11:
                        chunks[nc - 1, _K_DICT] = val
        elif r == _R_SCHEMA and t != _T_STRUCT:
            # a schema list element that is not a struct
            if ns >= schema.shape[0]:
                fill = False
            if fill:
                schema[ns] = _MISSING
                schema[ns, _S_OK] = 0
            ns += 1
    return err, i, what, ns, ng, nc, fill


@njit(cache=True)
def _leaves(schema):
    """Walk the schema's element tree (depth first, as its list is ordered): (error, the
    element it concerns, leaves as rows (element, physical type, max definition level, max
    repetition level, path start), path elements). Errors: 1 empty schema, 2 fewer elements
    than the groups say, 3 an element malformed, 4 name missing, 5 repetition missing,
    6 repetition not 0..2, 7 negative num_children, 8 nested too deeply, 9 physical type
    missing, 10 more elements than the groups hold."""
    n = schema.shape[0]
    leaves = np.zeros((n, 5), np.int64)
    path = np.zeros(n + 1, np.int64)
    if n == 0 or not schema[0, _S_OK]:
        return 1, 0, leaves[:0], path[:0]
    root = schema[0, _S_KIDS]
    if root == _MISSING:
        return 3, 0, leaves[:0], path[:0]
    if root < 0:
        return 7, 0, leaves[:0], path[:0]
    lft = np.zeros(_MAX_DEPTH + 2, np.int64)
    dl = np.zeros(_MAX_DEPTH + 2, np.int64)
    rl = np.zeros(_MAX_DEPTH + 2, np.int64)
    el = np.zeros(_MAX_DEPTH + 2, np.int64)
    lft[0] = root
    sd = 1
    pos = 1
    nl = 0
    npath = 0
    while sd > 0:
        if lft[sd - 1] == 0:
            sd -= 1
            continue
        lft[sd - 1] -= 1
        if pos >= n:
            return 2, pos, leaves[:nl], path[:npath]
        e = pos
        pos += 1
        if not schema[e, _S_OK]:
            return 3, e, leaves[:nl], path[:npath]
        if schema[e, _S_NAME] == _MISSING:
            return 4, e, leaves[:nl], path[:npath]
        rep = schema[e, _S_REP]
        if rep == _MISSING:
            return 5, e, leaves[:nl], path[:npath]
        if rep < 0 or rep > 2:
            return 6, e, leaves[:nl], path[:npath]
        d2 = dl[sd - 1] + (1 if rep != 0 else 0)
        r2 = rl[sd - 1] + (1 if rep == 2 else 0)
        kids = schema[e, _S_KIDS]
        if kids != _MISSING and kids != 0:
            if kids < 0:
                return 7, e, leaves[:nl], path[:npath]
            if sd > _MAX_DEPTH:
                return 8, e, leaves[:nl], path[:npath]
            lft[sd] = kids
            dl[sd] = d2
            rl[sd] = r2
            el[sd] = e
            sd += 1
        else:
            if schema[e, _S_TYPE] == _MISSING:
                return 9, e, leaves[:nl], path[:npath]
            leaves[nl, 0] = e
            leaves[nl, 1] = schema[e, _S_TYPE]
            leaves[nl, 2] = d2
            leaves[nl, 3] = r2
            leaves[nl, 4] = npath
            if npath + sd > path.size:
                grown = np.zeros(2 * path.size + sd, np.int64)
                grown[:npath] = path[:npath]
                path = grown
            for k in range(1, sd):
                path[npath] = el[k]
                npath += 1
            path[npath] = e
            npath += 1
            nl += 1
    if pos != n:
        return 10, pos, leaves[:nl], path[:npath]
    return 0, 0, leaves[:nl], path[:npath]


@njit(cache=True)
def _first_bad_path(b, chunks, schema, leaves, path):
    """The first column chunk whose path_in_schema is not its column's leaf path (each
    element compared byte for byte with the schema's names), or -1."""
    nl = leaves.shape[0]
    for c in range(chunks.shape[0]):
        j = chunks[c, _K_COL]
        if j < 0 or j >= nl or chunks[c, _K_META] == 0:
            continue  # reported by other checks
        p0 = leaves[j, 4]
        p1 = leaves[j + 1, 4] if j + 1 < nl else path.size
        if chunks[c, _K_PATH] == _MISSING or chunks[c, _K_PATHN] != p1 - p0:
            return c
        if chunks[c, _K_PATHN] and chunks[c, _K_PATHT] != _T_BINARY:
            return c
        i = chunks[c, _K_PATH]
        for q in range(p0, p1):
            v, i, e = _varint(b, i)  # within the footer: the walk read these bytes
            ln = np.int64(v)
            s = path[q]
            if e or ln != schema[s, _S_NAMELEN]:
                return c
            o = schema[s, _S_NAME]
            for x in range(ln):
                if b[i + x] != b[o + x]:
                    return c
            i += ln
    return -1


# what a column chunk must hold, in the order _first_bad_chunk checks it ("path": the
# message names the path wanted)
_CHUNK_CHECKS = ["column chunk unreadable or encrypted", "column metadata missing", "path",
                 "column chunk type differs from the schema"] + \
    [m.format(what) for what in ("num_values", "uncompressed size", "compressed size",
                                 "data page offset") for m in ("{} missing", "negative {}")] + \
    [f"{what} level histogram does not fit the column" for what in ("repetition", "definition")]


@njit(cache=True)
def _first_bad_chunk(chunks, leaves, bad_path):
    """(the first column chunk failing a check of _CHUNK_CHECKS, the first check it fails),
    or (-1, 0); bad_path is the first chunk whose path is wrong (-1: none). One pass: the
    chunks' facts are rows, so checking them column by column read each row 18 times."""
    for c in range(chunks.shape[0]):
        j = chunks[c, _K_COL]
        if chunks[c, _K_CRYPTO] != 0:
            return c, 0
        if chunks[c, _K_META] == 0:
            return c, 1
        if c == bad_path:
            return c, 2
        if chunks[c, _K_TYPE] != leaves[j, 1]:
            return c, 3
        k = 4
        for f in (_K_NVAL, _K_UNC, _K_COMP, _K_DPO):
            if chunks[c, f] == _MISSING:
                return c, k
            if chunks[c, f] < 0:
                return c, k + 1
            k += 2
        # an empty histogram means "not written"
        h = chunks[c, _K_REPH]
        if h > 0 and h != leaves[j, 3] + 1:
            return c, 12
        h = chunks[c, _K_DEFH]
        if h > 0 and h != leaves[j, 2] + 1:
            return c, 13
    return -1, 0


_LEAF_ERRORS = {1: "empty schema", 2: "schema has fewer elements than its groups say",
                3: "schema element malformed", 4: "schema element name missing",
                5: "repetition type missing", 6: "repetition type out of range",
                7: "negative num_children", 8: "schema nested too deeply",
                9: "physical type missing", 10: "schema has more elements than its groups hold"}


class _Footer:
    """What the walk of a footer found, checked (see _check_footer_bytes)."""

    def __init__(self, num_rows: int, rg_rows: np.ndarray, rg_ncols: np.ndarray,
                 chunks: np.ndarray, leaf_type: np.ndarray, leaf_rep: np.ndarray) -> None:
        self.num_rows = num_rows
        self.rg_rows = rg_rows
        self.rg_ncols = rg_ncols
        self.chunks = chunks
        self.leaf_type = leaf_type
        self.leaf_rep = leaf_rep


def _check_footer_bytes(footer: bytes, shown: str) -> _Footer:
    b = np.frombuffer(footer, np.uint8)
    fil = np.full(_NF, _MISSING, np.int64)
    # Sized for any footer a Parquet writer makes, so one walk fills them; a footer with
    # more is walked again into arrays of the sizes counted. The walk sets every row it
    # counts before reading it, so the arrays start empty: pages never written cost nothing.
    ns, ng, nc = _room(b.size)
    schema = np.empty((ns, _NS), np.int64)
    rgs = np.empty((ng, 2), np.int64)
    chunks = np.empty((nc, _NK), np.int64)
    err, pos, what, ns, ng, nc, fit = _walk(b, fil, schema, rgs, chunks)
    if not err and not fit:
        fil[:] = _MISSING
        schema = np.empty((ns, _NS), np.int64)
        rgs = np.empty((ng, 2), np.int64)
        chunks = np.empty((nc, _NK), np.int64)
        err, pos, what, ns, ng, nc, fit = _walk(b, fil, schema, rgs, chunks)
    schema, rgs, chunks = schema[:ns], rgs[:ng], chunks[:nc]
    try:
        if err == _E_WRONG:
            name = _FIELDS.get((what // 256, what % 256), f"field {what % 256}")
            raise _Bad(f"{name} has the wrong type")
        if err:
            raise _Bad(_WALK_ERRORS.get(err, f"error {err}"))
        return _check_footer(b, fil, schema, rgs, chunks)
    except _Bad as e:
        raise TraceFormatError(f"bad Parquet footer ({e})", file=shown) from None


def _room(n: int) -> tuple[int, int, int]:
    """The schema elements, row groups and column chunks the first walk of a footer of n
    bytes has room for: a trace has a few columns, and a row group or column chunk takes
    over 32 bytes (a chunk's metadata has nine required fields and a path; the one-row
    groups of benchmarks/reader_limits.py take 77 bytes a chunk)."""
    return min(n, 1024), n // 32 + 64, n // 32 + 64


class _Bad(Exception):
    pass


def _check_footer(b: np.ndarray, fil: np.ndarray, schema: np.ndarray, rgs: np.ndarray,
                  chunks: np.ndarray) -> _Footer:
    if fil[_F_ENCRYPTED] != _MISSING:
        raise _Bad("encrypted columns are not supported")
    if fil[_F_SCHEMA] == _MISSING:
        raise _Bad("schema missing")
    if fil[_F_ROWS] == _MISSING:
        raise _Bad("num_rows missing")
    if fil[_F_RGS] == _MISSING:
        raise _Bad("row groups missing")
    if rgs.shape[0] and fil[_F_RGS] != _T_STRUCT:
        raise _Bad("row group 0 malformed")
    err, el, leaves, path = _leaves(schema)
    if err:
        raise _Bad(_LEAF_ERRORS[err])
    nl = leaves.shape[0]
    bad_cols = np.flatnonzero(rgs[:, 1] != nl)
    if bad_cols.size:
        g = int(bad_cols[0])
        got = rgs[g, 1]
        raise _Bad(f"row group {g} has " + ("no readable column chunks" if got < 0 else
                                            f"{got} column chunks") + f" for {nl} columns")
    if (rgs[:, 0] == _MISSING).any():
        raise _Bad(f"row group {int(np.flatnonzero(rgs[:, 0] == _MISSING)[0])}: num_rows "
                   "missing")
    c = chunks
    # one chunk per column of each row group, in order (a columns list given twice would
    # leave more, and pyarrow would read only the last)
    if c.shape[0] != nl * rgs.shape[0] or (c.shape[0] and not np.array_equal(
            c[:, _K_COL], np.tile(np.arange(nl), rgs.shape[0]))):
        raise _Bad("row groups list their column chunks more than once")
    if not nl:
        return _Footer(int(fil[_F_ROWS]), rgs[:, 0].copy(), rgs[:, 1].copy(), c,
                       leaves[:, 1].copy(), leaves[:, 3].copy())
    first, check = _first_bad_chunk(c, leaves, _first_bad_path(b, c, schema, leaves, path))
    if first >= 0:
        g = int(c[first, _K_RG])
        msg = _CHUNK_CHECKS[check]
        if msg == "path":
            j = int(c[first, _K_COL])
            want = [bytes(b[schema[s, _S_NAME]:schema[s, _S_NAME] + schema[s, _S_NAMELEN]])
                    for s in path[leaves[j, 4]:(leaves[j + 1, 4] if j + 1 < nl else None)]]
            msg = f"column chunk path is not {want!r}"
        raise _Bad(f"row group {g}: {msg}")
    return _Footer(int(fil[_F_ROWS]), rgs[:, 0].copy(), rgs[:, 1].copy(), c,
                   leaves[:, 1].copy(), leaves[:, 3].copy())
