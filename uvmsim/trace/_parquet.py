"""Open a trace's Parquet files only after their footer and metadata are consistent.

pyarrow trusts a file's footer: a footer length beyond the file, a row count that disagrees
with the row groups, or a column chunk that points outside the file can make it fail with an
unrelated error, allocate without bound, or loop. So the reader checks the framing bytes
itself, then lets pyarrow parse the footer (that parser is bounded) and cross-checks every
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
    # spec columns are flat; a nested or repeated extra column is allowed (and never read)
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
