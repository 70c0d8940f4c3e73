"""A user's or a file's table cast to the format's schema (docs/trace-format.md), column by
column, with errors that name the file, column and row.

Below both the reader (uvmsim.trace.io) and the v1.2 streams (uvmsim.trace.streams), which
check and cast their tables the same way; it knows the schemas and nothing else of a trace.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import TraceFormatError
from ._parquet import _one_line
from .format import OPTIONAL, SCHEMAS, arrow_schema

__all__ = ["TableLike", "check_columns", "coerce_column", "coerce_table", "from_pandas",
           "optional_present"]

TableLike = Any  # pandas.DataFrame | pyarrow.Table


def _is_int_type(t: pa.DataType) -> bool:
    return pa.types.is_integer(t)


def _first_bad_cast_row(col: pa.ChunkedArray, target: pa.DataType) -> int | None:
    vals = col.to_pandas()
    info = np.iinfo(target.to_pandas_dtype())
    num = pd.to_numeric(vals, errors="coerce")
    bad = vals.notna() & (num.isna() | (num < info.min) | (num > info.max) | (num != np.floor(num)))
    idx = np.flatnonzero(bad.to_numpy())
    return int(idx[0]) if idx.size else None


def coerce_column(col: pa.ChunkedArray | pa.Array, name: str, target: pa.DataType,
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


def check_columns(names: Iterable[str], file: str, shown: str) -> None:
    have = set(names)
    for name, _, _ in SCHEMAS[file]:
        if name not in have:
            raise TraceFormatError("missing column", file=shown, column=name)


def optional_present(names: Iterable[str], file: str) -> tuple[str, ...]:
    have = set(names)
    return tuple(n for n, _, _ in OPTIONAL[file] if n in have)


def coerce_table(table: TableLike, file: str, shown: str | None = None) -> pa.Table:
    """Cast a user's table to the format's schema, keeping only its columns (v1 columns and
    the v1.1 optional ones that are present).

    `file` picks the schema; `shown` is the name errors use (the full path when read).
    """
    shown = shown or file
    if isinstance(table, pd.DataFrame):
        table = from_pandas(table, shown)
    elif not isinstance(table, pa.Table):
        raise TypeError(f"{file}: expected a pandas DataFrame or pyarrow Table, got "
                        f"{type(table).__name__}")
    seen: set[str] = set()
    for n in table.column_names:
        if n in seen:
            raise TraceFormatError("column appears twice", file=shown, column=n)
        seen.add(n)
    check_columns(table.column_names, file, shown)
    opt = optional_present(table.column_names, file)
    schema = arrow_schema(file, opt)
    cols = [coerce_column(table.column(f.name), f.name, f.type, f.nullable, shown)
            for f in schema]
    return pa.Table.from_arrays(cols, schema=schema)


def from_pandas(df: pd.DataFrame, shown: str) -> pa.Table:
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
