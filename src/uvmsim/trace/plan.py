"""A prefetch plan: before each kernel launch, page ranges to move to the GPU or back to the
host, applied in a given order. Saved and loaded as one Arrow file: Parquet, or Arrow IPC
(Feather v2) for names ending in .arrow, .feather or .ipc (docs/semantics.md, "Prefetch
plans", has the rule that replays it).

Columns (one row per entry):

    kernel_id  uint32   the kernel the entry runs before (the trace's kernel_id)
    page       uint64   first virtual page (address >> 12) of the range
    n_pages    uint64   pages in the range, >= 1
    to         string   'gpu' (like cudaMemPrefetchAsync to the device) or 'cpu' (back to
                        the host, like cudaMemPrefetchAsync to cudaCpuDeviceId)
    order      int64    entries of one kernel run in ascending order, ties in row order

The schema's metadata holds the plan's provenance (`uvmplan` key, JSON): format and version,
the predictor's name and parameters, whether it saw the future, and the trace it was built on.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import TraceFormatError
from .format import ARG_CPU, ARG_GPU, PREFETCH_ARGS

FORMAT = "uvmplan"
VERSION = 1
META_KEY = b"uvmplan"
# pages at or above this are beyond every address a trace may hold (uvmtrace stops at 2**62)
PAGE_LIMIT = 1 << 50
TO_CODE = {"gpu": ARG_GPU, "cpu": ARG_CPU}
# file names saved and read as Arrow IPC (Feather v2); any other name is Parquet
ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")
TO_NAME = {ARG_GPU: "gpu", ARG_CPU: "cpu"}

# (column, arrow type): what save writes and load casts to
SCHEMA = [("kernel_id", pa.uint32()), ("page", pa.uint64()), ("n_pages", pa.uint64()),
          ("to", pa.string()), ("order", pa.int64())]


class PlanError(TraceFormatError):
    """A plan breaks the format above; the message names the file, column and row."""


@dataclass(frozen=True, eq=False)
class Plan:
    """A validated plan: one entry per row of five read-only arrays (see the module doc).

    `meta` is provenance (predictor, parameters, `sees_future`, the trace it was built on).
    `result` is the Result of replaying the plan under the settings `uvmsim.plans.build`
    built it with (for a predictor with feedback, the build's own replay: the same
    counts), or None; it is not saved. `build_s` is the build's wall time without that
    final replay.
    """

    kernel_id: np.ndarray   # int64
    page: np.ndarray        # int64
    n_pages: np.ndarray     # int64
    to: np.ndarray          # int8: TO_CODE values
    order: np.ndarray       # int64
    meta: dict[str, Any] = field(default_factory=dict)
    result: Any = field(default=None, repr=False)
    source: str = "plan"    # what errors name: the file it was read from, or 'plan'
    build_s: float | None = field(default=None, repr=False)  # build's wall time, not saved

    def __post_init__(self) -> None:
        # a Plan made directly, not through from_table/load, is checked too: its values
        # reach compiled code (shifts, indices) once it is replayed
        n = self.page.size if isinstance(self.page, np.ndarray) else -1
        for name, dt in (("page", np.int64), ("kernel_id", np.int64), ("n_pages", np.int64),
                         ("to", np.int8), ("order", np.int64)):
            a = getattr(self, name)
            if not isinstance(a, np.ndarray) or a.dtype != dt or a.ndim != 1 or a.size != n:
                raise PlanError(f"must be a 1-D {np.dtype(dt)} array, as long as 'page'",
                                file=self.source, column=name)
            a.setflags(write=False)
        checks = (("kernel_id", (self.kernel_id < 0) | (self.kernel_id > 2**32 - 1),
                   "out of range for uint32"),
                  ("page", (self.page < 0) | (self.page >= PAGE_LIMIT), "not a page number"),
                  ("n_pages", (self.n_pages < 1) | (self.n_pages > PAGE_LIMIT - self.page),
                   "n_pages must be >= 1 and page + n_pages <= 2**50"),
                  ("to", (self.to != ARG_GPU) & (self.to != ARG_CPU), "not gpu or cpu"))
        for name, bad, msg in checks:
            if n and bad.any():
                raise PlanError(msg, file=self.source, column=name,
                                row=int(np.flatnonzero(bad)[0]))

    # ------------------------------------------------------------------ views
    def __len__(self) -> int:
        return int(self.page.size)

    @property
    def name(self) -> str:
        return str(self.meta.get("predictor", "plan"))

    @property
    def sees_future(self) -> bool:
        return bool(self.meta.get("sees_future", False))

    @property
    def table(self) -> pd.DataFrame:
        """The entries as a DataFrame, in the columns of the file."""
        return pd.DataFrame({
            "kernel_id": self.kernel_id.astype(np.uint32), "page": self.page.astype(np.uint64),
            "n_pages": self.n_pages.astype(np.uint64),
            "to": np.where(self.to == ARG_GPU, "gpu", "cpu"), "order": self.order})

    def pages(self, to: str = "gpu") -> int:
        """Pages the plan asks to move to `to` ('gpu' or 'cpu'), before clipping to live
        allocations."""
        return int(self.n_pages[self.to == TO_CODE[to]].sum())

    @property
    def content_id(self) -> str:
        """A hash of the entries and provenance: equal plans have equal ids (sweeps key
        their cells by it)."""
        h = hashlib.sha256()
        for a in (self.kernel_id, self.page, self.n_pages, self.to, self.order):
            h.update(np.ascontiguousarray(a).tobytes())
        h.update(json.dumps(self.meta, sort_keys=True, default=str).encode())
        return h.hexdigest()[:20]

    def summary(self) -> dict[str, Any]:
        """What a Result's config records about the plan it replayed."""
        return {"name": self.name, "entries": len(self), "pages_gpu": self.pages("gpu"),
                "pages_cpu": self.pages("cpu"), "sees_future": self.sees_future,
                "id": self.content_id}

    def __repr__(self) -> str:
        future = " (sees the future)" if self.sees_future else ""
        return (f"<Plan {self.name}{future}: {len(self)} entries, {self.pages('gpu')} pages "
                f"to gpu, {self.pages('cpu')} to cpu, id={self.content_id}>")

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the plan as one file, written to a temporary name, then renamed: Arrow IPC
        (Feather v2) when the name ends in .arrow, .feather or .ipc, else Parquet. Both keep
        the columns and the provenance; `load` reads either."""
        p = Path(path)
        if p.exists() and not overwrite:
            raise FileExistsError(f"{p} exists (pass overwrite=True to replace it)")
        cols = [pa.array(self.kernel_id, pa.uint32()), pa.array(self.page, pa.uint64()),
                pa.array(self.n_pages, pa.uint64()),
                pa.array(np.where(self.to == ARG_GPU, "gpu", "cpu"), pa.string()),
                pa.array(self.order, pa.int64())]
        meta = {"format": FORMAT, "version": VERSION, **self.meta}
        schema = pa.schema([pa.field(n, t, nullable=False) for n, t in SCHEMA],
                           metadata={META_KEY: json.dumps(meta, default=str).encode()})
        table = pa.Table.from_arrays(cols, schema=schema)
        from .._atomic import write_atomic

        def write(tmp: Path) -> None:
            if p.suffix in ARROW_SUFFIXES:
                import pyarrow.feather as feather
                feather.write_feather(table, tmp, compression="zstd")
            else:
                pq.write_table(table, tmp, compression="zstd")
        # whole or not at all; a failed write names the plan's file
        return write_atomic(p, write)


def from_table(table: Any, *, meta: dict[str, Any] | None = None,
               source: str = "plan") -> Plan:
    """A Plan from a pandas DataFrame or Arrow table with the columns of the module doc
    (`order` may be left out: row order). Errors name `source`, the column and the row."""
    if isinstance(table, pd.DataFrame):
        try:
            table = pa.Table.from_pandas(table, preserve_index=False)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise PlanError(f"not readable as an Arrow table ({e})", file=source) from None
    if not isinstance(table, pa.Table):
        raise PlanError(f"expected a DataFrame or Arrow table, got {type(table).__name__}",
                        file=source)
    names = table.column_names
    for n in names:
        if names.count(n) > 1:
            raise PlanError("column appears twice", file=source, column=n)
    n = table.num_rows
    cols: dict[str, np.ndarray] = {}
    for name, typ in SCHEMA:
        if name not in names:
            if name == "order":
                cols[name] = np.arange(n, dtype=np.int64)
                continue
            raise PlanError("missing column", file=source, column=name)
        col = table.column(name)
        if col.null_count:
            row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise PlanError("null value", file=source, column=name, row=row)
        if name == "to":
            if len(col) == 0:
                cols[name] = np.zeros(0, np.int8)
                continue
            vals = np.asarray(col.to_pylist(), dtype=object)
            code = np.array([TO_CODE.get(v, 0) if isinstance(v, str) else 0 for v in vals],
                            np.int8)
            bad = np.flatnonzero(code == 0)
            if bad.size:
                raise PlanError(f"{vals[bad[0]]!r} is not one of {list(PREFETCH_ARGS)}",
                                file=source, column=name, row=int(bad[0]))
            cols[name] = code
            continue
        cols[name] = _integers(col, name, typ, source)
    bad = np.flatnonzero(cols["n_pages"] < 1)
    if bad.size:
        raise PlanError("n_pages must be >= 1", file=source, column="n_pages", row=int(bad[0]))
    # each operand is below 2**63 here, and page + n_pages is checked without wrapping
    bad = np.flatnonzero((cols["page"] >= PAGE_LIMIT) | (cols["n_pages"] > PAGE_LIMIT - cols["page"]))
    if bad.size:
        raise PlanError("page + n_pages beyond 2**50 pages (addresses stop at 2**62)",
                        file=source, column="page", row=int(bad[0]))
    return Plan(cols["kernel_id"], cols["page"], cols["n_pages"], cols["to"], cols["order"],
                dict(meta or {}), source=source)


def _integers(col: pa.ChunkedArray, name: str, typ: pa.DataType, source: str) -> np.ndarray:
    """A column as int64, after checking every value fits `typ` (the file's type)."""
    if len(col) == 0:
        return np.zeros(0, np.int64)
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        raise PlanError(f"type {col.type} is not an integer", file=source, column=name)
    vals = col.to_numpy() if isinstance(col, pa.Array) else \
        col.combine_chunks().to_numpy(zero_copy_only=False)
    if vals.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(vals) | (vals != np.floor(vals)))
        if bad.size:
            raise PlanError(f"{vals[bad[0]]!r} is not an integer", file=source, column=name,
                            row=int(bad[0]))
    lo, hi = (0, np.iinfo(np.uint32).max) if typ == pa.uint32() else \
        (0, PAGE_LIMIT) if typ == pa.uint64() else (np.iinfo(np.int64).min,
                                                     np.iinfo(np.int64).max)
    if vals.dtype == np.uint64:
        bad = np.flatnonzero(vals > np.uint64(hi))
    else:
        bad = np.flatnonzero((vals < lo) | (vals > hi))
    if bad.size:
        raise PlanError(f"{vals[bad[0]]} is out of range for {typ}" +
                        (" (pages stop at 2**50)" if typ == pa.uint64() else ""),
                        file=source, column=name, row=int(bad[0]))
    return vals.astype(np.int64)


def load(path: str | os.PathLike) -> Plan:
    """Read and validate a plan file written by `Plan.save` (or by anything that writes the
    columns of the module doc as Parquet or Feather/Arrow IPC). Errors name the file, the
    column and the first bad row."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(2, "no such plan file", str(p))
    if p.is_dir():
        raise PlanError("is a directory; a plan is one file", file=str(p))
    try:
        if p.suffix in ARROW_SUFFIXES:
            import pyarrow.feather as feather
            table = feather.read_table(p)
        else:
            table = pq.read_table(p)
    except (pa.ArrowException, OSError) as e:
        if isinstance(e, (FileNotFoundError, PermissionError)):
            raise
        msg = " ".join(str(e).split())
        raise PlanError(f"unreadable ({msg})", file=str(p)) from None
    meta: dict[str, Any] = {}
    raw = (table.schema.metadata or {}).get(META_KEY)
    if raw is not None:
        try:
            meta = json.loads(raw)
        except ValueError:
            raise PlanError("the uvmplan metadata is not JSON", file=str(p)) from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise PlanError("the uvmplan metadata does not say format 'uvmplan'", file=str(p))
        if meta.get("version") != VERSION:
            raise PlanError(f"unknown plan version {meta.get('version')!r} (this reader knows "
                            f"{VERSION})", file=str(p))
        meta = {k: v for k, v in meta.items() if k not in ("format", "version")}
    return from_table(table, meta=meta, source=str(p))


def empty(meta: dict[str, Any] | None = None) -> Plan:
    """A plan with no entry (replays exactly as no plan)."""
    z = np.zeros(0, np.int64)
    return Plan(z, z.copy(), z.copy(), np.zeros(0, np.int8), z.copy(), dict(meta or {}))
