"""Open a trace's Parquet files only after their footer and metadata are consistent.

pyarrow trusts a file's footer: a footer length beyond the file, a row count that disagrees
with the row groups, or a column chunk that points outside the file can make it fail with an
unrelated error, allocate without bound, or loop, and some malformed footers make it abort
the process. So the reader checks the framing bytes and decodes the footer's Thrift itself
(bounded by the footer's length), then lets pyarrow parse the footer and cross-checks every
number the data readers will trust before a single data page is decoded.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import TraceFormatError

MAGIC = b"PAR1"
# A trace's footers are a few KiB; the limit only stops a corrupt length from making the
# parser allocate gigabytes.
MAX_FOOTER = 64 << 20
# Physical types whose values have a fixed width (bytes per value, before encoding).
_FIXED = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8}
# Room for page headers, dictionary pages and level data on top of the values themselves.
_SLACK_PER_VALUE = 8
_SLACK = 1 << 20

# What pyarrow raises for a damaged file (its OSError is an ArrowIOError for a thrift or
# decompression failure, never a missing file: the file was opened before it got there).
PARQUET_ERRORS = (pa.ArrowException, OSError, ValueError, EOFError)


def open_checked(path: Path, shown: str) -> pq.ParquetFile:
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
    _check_footer_bytes(footer, size - 8 - footer_len, shown)
    try:
        pf = pq.ParquetFile(path)
        md = pf.metadata
        arrow_names = pf.schema_arrow.names
    except PARQUET_ERRORS as e:
        raise TraceFormatError(f"unreadable Parquet footer ({_one_line(e)})", file=shown)
    try:
        _check_metadata(md, arrow_names, size - 8 - footer_len, shown)
    except TraceFormatError:
        raise
    except PARQUET_ERRORS as e:  # e.g. a column path that is not UTF-8
        raise TraceFormatError(f"unreadable Parquet footer ({_one_line(e)})", file=shown)
    return pf


def _check_metadata(md: pq.FileMetaData, arrow_names: list[str], data_end: int,
                    shown: str) -> None:
    schema = md.schema
    n_cols = md.num_columns
    if len(schema) != n_cols:
        raise TraceFormatError(f"footer lists {n_cols} columns but its schema has "
                               f"{len(schema)}", file=shown)
    # the format's columns are flat; a nested or repeated extra column is allowed (and never read)
    names = [schema.column(i).path for i in range(n_cols)]
    flat = [schema.column(i).max_repetition_level == 0 for i in range(n_cols)]
    for group in (arrow_names, names):  # top-level columns, then leaf paths
        seen: set[str] = set()
        for n in group:
            if n in seen:
                raise TraceFormatError("column appears twice", file=shown, column=n)
            seen.add(n)
    total = 0
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        rows = rg.num_rows
        if rows < 0:
            raise TraceFormatError(f"row group {g} has {rows} rows", file=shown)
        total += rows
        if rg.num_columns != n_cols:
            raise TraceFormatError(f"row group {g} has {rg.num_columns} column chunks, the "
                                   f"schema {n_cols}", file=shown)
        for i in range(n_cols):
            _check_chunk(rg.column(i), names[i], flat[i], g, rows, data_end, shown)
    if total != md.num_rows:
        raise TraceFormatError(f"footer says {md.num_rows} rows but its row groups hold "
                               f"{total}", file=shown)


def _check_chunk(c: pq.ColumnChunkMetaData, name: str, flat: bool, g: int, rows: int,
                 data_end: int, shown: str) -> None:
    def bad(what: str) -> TraceFormatError:
        return TraceFormatError(f"row group {g}: {what}", file=shown, column=name)

    if c.path_in_schema != name:
        raise bad(f"column chunk is for {c.path_in_schema!r}")
    if c.file_path:
        raise bad("column chunk refers to another file")
    if flat and c.num_values != rows:  # one value (or null) per row
        raise bad(f"column chunk has {c.num_values} values for {rows} rows")
    # an empty row group's chunk may have no data page (offset 0) but a dictionary page
    offsets = [c.data_page_offset] if rows > 0 or c.data_page_offset else []
    if c.has_dictionary_page and c.dictionary_page_offset is not None:
        offsets.append(c.dictionary_page_offset)
    comp = c.total_compressed_size
    if comp < 0 or any(not 4 <= o < data_end for o in offsets) or \
            (offsets and min(offsets) + comp > data_end):
        raise bad("column chunk lies outside the file's data")
    if rows > 0 and comp == 0:
        raise bad("column chunk is empty")
    width = _FIXED.get(c.physical_type)
    if flat and width is not None and \
            c.total_uncompressed_size > rows * (width + _SLACK_PER_VALUE) + _SLACK:
        raise bad(f"column chunk claims {c.total_uncompressed_size} bytes for {rows} values")


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


# --------------------------------------------------------------------------- footer bytes
# pyarrow aborts the whole process (std::terminate, not an exception) on some footers, e.g.
# a size-statistics histogram whose length disagrees with the column's levels. So the
# footer's Thrift (compact protocol) is decoded here first, with bounds on every length,
# and the facts pyarrow relies on are checked before it sees the file.

_T_STOP, _T_TRUE, _T_FALSE, _T_I8, _T_I16, _T_I32, _T_I64, _T_DOUBLE, _T_BINARY, _T_LIST, \
    _T_SET, _T_MAP, _T_STRUCT = range(13)
_MAX_DEPTH = 32


class _Bad(Exception):
    pass


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.b = data
        self.i = 0

    def byte(self) -> int:
        if self.i >= len(self.b):
            raise _Bad("footer ends inside a value")
        v = self.b[self.i]
        self.i += 1
        return v

    def varint(self) -> int:
        v = shift = 0
        while True:
            c = self.byte()
            v |= (c & 0x7F) << shift
            if not c & 0x80:
                return v
            shift += 7
            if shift > 63:
                raise _Bad("varint longer than 10 bytes")

    def zigzag(self) -> int:
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.i + n > len(self.b):
            raise _Bad("a length runs past the footer")
        v = self.b[self.i:self.i + n]
        self.i += n
        return v

    def value(self, t: int, depth: int):
        if depth > _MAX_DEPTH:
            raise _Bad("nested too deeply")
        if t == _T_TRUE:
            return True
        if t == _T_FALSE:
            return False
        if t == _T_I8:
            return self.byte()
        if t in (_T_I16, _T_I32, _T_I64):
            return self.zigzag()
        if t == _T_DOUBLE:
            return self.take(8)
        if t == _T_BINARY:
            return self.take(self.varint())
        if t in (_T_LIST, _T_SET):
            h = self.byte()
            n, et = h >> 4, h & 0x0F
            if n == 15:
                n = self.varint()
            if n > len(self.b) - self.i:  # every element takes at least one byte
                raise _Bad("a list longer than the footer")
            if et in (_T_TRUE, _T_FALSE):
                return [self.byte() == 1 for _ in range(n)]
            return [self.value(et, depth + 1) for _ in range(n)]
        if t == _T_MAP:
            n = self.varint()
            if n == 0:
                return {}
            if 2 * n > len(self.b) - self.i:
                raise _Bad("a map longer than the footer")
            h = self.byte()
            kt, vt = h >> 4, h & 0x0F
            return {_key(self.value(kt, depth + 1)): self.value(vt, depth + 1)
                    for _ in range(n)}
        if t == _T_STRUCT:
            return self.struct(depth + 1)
        raise _Bad(f"unknown Thrift type {t}")

    def struct(self, depth: int = 0) -> dict:
        out: dict[int, object] = {}
        fid = 0
        while True:
            h = self.byte()
            t = h & 0x0F
            if t == _T_STOP:
                return out
            delta = h >> 4
            fid = fid + delta if delta else self.zigzag()
            out[fid] = self.value(t, depth)


def _key(v):
    return tuple(v) if isinstance(v, list) else v


def _check_footer_bytes(footer: bytes, data_end: int, shown: str) -> None:
    try:
        md = _Reader(footer).struct()
        _check_footer(md)
    except _Bad as e:
        raise TraceFormatError(f"bad Parquet footer ({e})", file=shown) from None


def _get(d, fid: int, typ, what: str, required: bool = True):
    v = d.get(fid) if isinstance(d, dict) else None
    if v is None:
        if required:
            raise _Bad(f"{what} missing")
        return None
    if not isinstance(v, typ) or isinstance(v, bool) and typ is int:
        raise _Bad(f"{what} has the wrong type")
    return v


def _check_footer(md: dict) -> None:
    if md.get(8) is not None or md.get(9) is not None:
        raise _Bad("encrypted columns are not supported")
    schema = _get(md, 2, list, "schema")
    _get(md, 3, int, "num_rows")
    leaves = _leaves(schema)
    for g, rg in enumerate(_get(md, 4, list, "row groups")):
        cols = _get(rg, 1, list, f"row group {g} columns")
        if len(cols) != len(leaves):
            raise _Bad(f"row group {g} has {len(cols)} column chunks for {len(leaves)} "
                       "columns")
        for cc, (path, ptype, max_def, max_rep) in zip(cols, leaves):
            if not isinstance(cc, dict) or cc.get(8) is not None or cc.get(9) is not None:
                raise _Bad(f"row group {g}: column chunk unreadable or encrypted")
            cm = _get(cc, 3, dict, f"row group {g}: column metadata")
            got = [p if isinstance(p, bytes) else b"" for p in _get(cm, 3, list, "path")]
            if got != path:
                raise _Bad(f"row group {g}: column chunk path {got!r} is not {path!r}")
            if _get(cm, 1, int, "physical type") != ptype:
                raise _Bad(f"row group {g}: column chunk type differs from the schema")
            for fid, what in ((5, "num_values"), (6, "uncompressed size"),
                              (7, "compressed size"), (9, "data page offset")):
                if _get(cm, fid, int, what) < 0:
                    raise _Bad(f"row group {g}: negative {what}")
            stats = cm.get(16)
            if stats is not None:
                if not isinstance(stats, dict):
                    raise _Bad("size statistics malformed")
                for fid, levels, what in ((2, max_rep, "repetition"),
                                          (3, max_def, "definition")):
                    h = stats.get(fid)
                    # an empty histogram means "not written"
                    if h is not None and (not isinstance(h, list) or
                                          len(h) not in (0, levels + 1)):
                        raise _Bad(f"row group {g}: {what} level histogram does not fit "
                                   "the column")


def _leaves(schema: list) -> list[tuple[list[bytes], int, int, int]]:
    """(path, physical type, max definition level, max repetition level) of each leaf."""
    if not schema or not isinstance(schema[0], dict):
        raise _Bad("empty schema")
    out: list[tuple[list[bytes], int, int, int]] = []
    pos = 1

    def walk(n_children: int, path: list[bytes], d: int, r: int, depth: int) -> None:
        nonlocal pos
        if depth > _MAX_DEPTH:
            raise _Bad("schema nested too deeply")
        for _ in range(n_children):
            if pos >= len(schema):
                raise _Bad("schema has fewer elements than its groups say")
            el = schema[pos]
            pos += 1
            if not isinstance(el, dict):
                raise _Bad("schema element malformed")
            name = _get(el, 4, bytes, "schema element name")
            rep = _get(el, 3, int, "repetition type")
            if rep not in (0, 1, 2):
                raise _Bad(f"repetition type {rep}")
            d2, r2 = d + (rep != 0), r + (rep == 2)
            kids = _get(el, 5, int, "num_children", required=False)
            if kids:
                if kids < 0:
                    raise _Bad("negative num_children")
                walk(kids, path + [name], d2, r2, depth + 1)
            else:
                out.append((path + [name], _get(el, 1, int, "physical type"), d2, r2))

    root_kids = _get(schema[0], 5, int, "root num_children")
    if root_kids < 0:
        raise _Bad("negative num_children")
    walk(root_kids, [], 0, 0, 0)
    if pos != len(schema):
        raise _Bad("schema has more elements than its groups hold")
    return out
