"""Corrupt uvmtraces on purpose and check what the reader makes of each one.

A case is (base trace, Parquet layout, corruption, seed, mode). The corruption is one of
MUTATIONS: structured edits of a table (values, rows, columns, types), of the manifest and of
the directory, and byte-level damage to a Parquet file. Each declares what the format says
must happen:

- "reject": the reader must raise TraceFormatError naming the file (or an OSError for a
  missing path);
- "same": the trace must load and replay exactly like the uncorrupted one (the rule quoted
  says the change does not matter);
- "valid": the trace must load (a different, valid trace) and replay;
- "either": byte damage; a rejection is right, and an acceptance is checked: the decoded
  tables either equal the original's (then the replay must too) or pass the independent
  validator in fuzz_oracle.py.

Cases run in batches in child processes (fuzz_child.py), so a signal or a hang is an outcome,
not the end of the run; a batch that dies is re-run case by case to name the case.
"""
from __future__ import annotations

import errno
import io
import json
import os
import random
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MiB = 1 << 20
TABLES = ("allocations", "events", "kernels", "accesses")
FILE = {t: f"{t}.parquet" for t in TABLES}
OVERSUB = 1.5
PREFIX = "@@FUZZ "
# UVMSIM_FUZZ_MULTI=1: every accepted trace is also replayed as two tenants (run with
# NUMBA_BOUNDSCHECK=1 by benchmarks/fuzz.py --boundscheck and tests/fuzz/test_fuzz.py)
MULTI = bool(os.environ.get("UVMSIM_FUZZ_MULTI"))

# Parquet layouts the bases are written in; damage and the reader meet each of them.
LAYOUTS: dict[str, dict[str, Any]] = {
    "zstd": dict(compression="zstd"),
    "plain": dict(compression="none", use_dictionary=False, write_statistics=False),
    "groups": dict(compression="snappy", row_group_size=5),
    "v2gzip": dict(compression="gzip", data_page_version="2.0"),
}


# --------------------------------------------------------------------------- bases
def _base_small(sliced: bool):
    from uvmsim.trace.builder import TraceBuilder
    b = TraceBuilder()
    x = b.alloc(4 * MiB, name="x")
    y = b.alloc(1 * MiB, kind="host", name="y")
    z = b.alloc(6 * MiB + 12288, base=0x7F1000003000, name="z")  # not 2 MiB aligned
    b.memcpy_htod(b.base(x), 8192)
    sl = dict(slices=[1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3], n_slices=2) if sliced else {}
    b.kernel("k0", reads=b.pages(x, 0, 6), writes=b.pages(z, 600, 606), **sl)
    b.memset(b.base(z), 3 * MiB)
    b.prefetch(b.base(x), 1 * MiB, "gpu")
    if sliced:
        b.host_access(b.base(x), 64 << 10, "write")
    b.prefetch(b.base(x), 1 * MiB, "cpu")
    b.advise(b.base(x), 2 * MiB, "set_read_mostly")
    b.memcpy_dtoh(b.base(x), 4096)
    b.kernel("k1", reads=b.pages(y, 0, 3), writes=b.pages(x, 1000, 1010),
             **(dict(slices=[1] * 13, n_slices=1) if sliced else {}))
    b._event("memcpy_dtod", addr=b.base(z), size=4096)
    b.free(x)
    b.sync()
    w = b.alloc(2 * MiB, kind="device", name="w")
    if sliced:
        b.host_access(b.base(z), 4 * MiB, None)
    b.kernel("k2", rows=[(int(p), 1 + (i % 7)) for i, p in
                         enumerate(list(b.pages(w, 0, 20)) + list(b.pages(z, 0, 40, 3)))],
             **(dict(slices=[(i % 15) + 1 for i in range(34)], n_slices=4) if sliced else {}))
    b.free(z)
    t = b.tables()
    ev = t["events"]
    ev["stream"] = [i % 3 for i in range(len(ev))]
    ev["t_start_ns"] = [1000 * i for i in range(len(ev))]
    ev["t_end_ns"] = [1000 * i + 500 for i in range(len(ev))]
    ev["stream"] = ev["stream"].astype("Int64")
    ev["t_start_ns"] = ev["t_start_ns"].astype("Int64")
    ev["t_end_ns"] = ev["t_end_ns"].astype("Int64")
    t["kernels"]["grid"] = "64,1,1"
    return t


def _base_big():
    import numpy as np
    from uvmsim.trace.builder import TraceBuilder
    rng = np.random.default_rng(7)
    b = TraceBuilder()
    a = b.alloc(8 * MiB, name="a")
    c = b.alloc(16 * MiB, name="c")
    for k in range(6):
        pa_ = rng.choice(2048, 120, replace=False)
        pc_ = rng.choice(4096, 180, replace=False)
        rows = [(int(p), int(rng.integers(1, 8))) for p in
                np.concatenate([b.pages(a)[pa_], b.pages(c)[pc_]])]
        b.kernel(f"k{k}", rows=rows, counts=rng.integers(1, 50, len(rows)).tolist(),
                 duration_ns=int(rng.integers(1000, 100000)))
        if k == 2:
            b.free(a)
            a = b.alloc(8 * MiB, base=b.base(a), name="a2")  # address reuse after a free
    return b.tables()


BASES: dict[str, Callable[[], dict]] = {
    "small": lambda: _base_small(False),
    "v11": lambda: _base_small(True),
    "big": _base_big,
}


def base_arrow(name: str) -> dict[str, pa.Table]:
    """The base's tables as Arrow, typed as the writer writes them."""
    from uvmsim.trace.columns import coerce_table
    return {t: coerce_table(df, FILE[t]) for t, df in BASES[name]().items()}


def write_base(name: str, layout: str, d: Path) -> Path:
    from uvmsim.trace.io import write_trace
    tabs = base_arrow(name)
    write_trace(d, **tabs, source={"generator": "fuzz", "base": name}, overwrite=True)
    for t, tab in tabs.items():
        pq.write_table(tab, d / FILE[t], **LAYOUTS[layout])
    return d


# --------------------------------------------------------------------------- editable tables
class Tab:
    """A small table as Python lists, edited freely and turned back into Arrow keeping each
    column's type where the values still fit it."""

    def __init__(self, t: pa.Table) -> None:
        self.names = list(t.column_names)
        self.cols = [t.column(i).to_pylist() for i in range(t.num_columns)]
        self.types: list[pa.DataType | None] = [t.schema.field(i).type
                                                for i in range(t.num_columns)]
        self.n = t.num_rows

    def idx(self, name: str) -> int:
        return self.names.index(name)

    def get(self, name: str) -> list:
        return self.cols[self.idx(name)]

    def set(self, name: str, row: int, value: Any) -> None:
        self.cols[self.idx(name)][row] = value

    def set_col(self, name: str, values: list, typ: pa.DataType | None = None) -> None:
        if name in self.names:
            i = self.idx(name)
            self.cols[i], self.types[i] = list(values), typ or self.types[i]
        else:
            self.names.append(name)
            self.cols.append(list(values))
            self.types.append(typ)

    def drop_col(self, name: str) -> None:
        i = self.idx(name)
        del self.names[i], self.cols[i], self.types[i]

    def rows(self) -> list[dict]:
        return [dict(zip(self.names, r)) for r in zip(*self.cols)] if self.cols else []

    def drop_row(self, r: int) -> None:
        for c in self.cols:
            del c[r]
        self.n -= 1

    def insert_row(self, r: int, row: dict) -> None:
        for n, c in zip(self.names, self.cols):
            c.insert(r, row.get(n))
        self.n += 1

    def move_row(self, src: int, dst: int) -> None:
        for c in self.cols:
            c.insert(dst, c.pop(src))

    def to_arrow(self) -> pa.Table:
        arrays = []
        for vals, typ in zip(self.cols, self.types):
            arrays.append(_array(vals, typ))
        return pa.Table.from_arrays(arrays, names=self.names)


def _array(vals: list, typ: pa.DataType | None) -> pa.Array:
    if typ is not None:
        try:
            return pa.array(vals, type=typ)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            pass
    try:
        return pa.array(vals)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        pass
    for t in (pa.uint64(), pa.float64()):
        try:
            return pa.array(vals, type=t)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            pass
    return pa.array([None if v is None else str(v) for v in vals], pa.string())


# --------------------------------------------------------------------------- mutations
@dataclass
class Ctx:
    rng: random.Random
    base: str
    tabs: dict[str, Tab]
    d: Path | None = None          # the trace directory (file-level mutations)
    expected: Any = "base"         # for "same": "base" or tables the replay must equal
    dirty: set | None = None
    manifest: bytes | None = None  # replacement manifest bytes
    path: Path | None = None       # what to load, when not d
    drop: bool = False


@dataclass
class Mutation:
    name: str
    kind: str       # table | manifest | files | bytes | layout
    verdict: str    # reject | same | valid | either
    rule: str       # the sentence of docs/trace-format.md that decides the case
    fn: Callable[[Ctx], None]
    weight: int = 1
    bases: tuple[str, ...] = tuple(BASES)
    family: str = ""  # the group benchmarks/fuzz.py counts it in (default: by kind)


MUTATIONS: dict[str, Mutation] = {}
# the families of the first fuzz, by kind of corruption
KIND_FAMILY = {"table": "table values and rows", "manifest": "manifest fields",
               "files": "files and paths", "bytes": "Parquet bytes",
               "layout": "Parquet layout"}


def mutation(name: str, kind: str, verdict: str, rule: str, weight: int = 1,
             bases: tuple[str, ...] = tuple(BASES), family: str = ""):
    def deco(fn):
        MUTATIONS[name] = Mutation(name, kind, verdict, rule, fn, weight, bases,
                                   family or KIND_FAMILY[kind])
        return fn
    return deco


def _pick(c: Ctx, table: str, pred: Callable[[dict], bool] = lambda r: True) -> int:
    rows = [i for i, r in enumerate(c.tabs[table].rows()) if pred(r)]
    if not rows:
        raise LookupError(f"no row of {table} fits")
    c.dirty.add(table)
    return c.rng.choice(rows)


def _set(c: Ctx, table: str, col: str, value: Any, pred=lambda r: True) -> int:
    r = _pick(c, table, pred)
    c.tabs[table].set(col, r, value)
    return r


def _renumber(c: Ctx) -> None:
    ev = c.tabs["events"]
    ev.set_col("seq", list(range(ev.n)))
    c.dirty.add("events")


R_RANGE = "addresses and sizes at or beyond 2^62 are rejected"
R_CAST = "a column whose type cannot be cast losslessly is rejected"
R_NULL = "a null in a non-nullable column is rejected"
R_IGNORED = "fields an op does not use are ignored (docs/trace-format.md, decided cases)"
U64 = (1 << 64) - 1


def _big(c: Ctx) -> int:
    return c.rng.choice([1 << 62, (1 << 62) + 4096, 1 << 63, U64, U64 - 4095,
                         c.rng.randrange(1 << 62, 1 << 64)])


# allocations
@mutation("alloc_size_zero", "table", "reject", "size > 0")
def _(c): _set(c, "allocations", "size", 0)


@mutation("alloc_size_huge", "table", "reject", R_RANGE)
def _(c): _set(c, "allocations", "size", _big(c))


@mutation("alloc_base_huge", "table", "reject", R_RANGE)
def _(c): _set(c, "allocations", "base", _big(c))


@mutation("alloc_end_beyond_2_62", "table", "reject", R_RANGE)
def _(c):
    r = _pick(c, "allocations")
    a = c.tabs["allocations"]
    a.set("size", r, (1 << 62) - a.get("base")[r] + c.rng.choice([0, 1, 4096]))


@mutation("alloc_id_duplicate", "table", "reject", "alloc_id is unique")
def _(c):
    a = c.tabs["allocations"]
    r = _pick(c, "allocations", lambda x: True)
    a.set("alloc_id", r, a.get("alloc_id")[(r + 1) % a.n])


@mutation("alloc_kind_unknown", "table", "reject", "kind is one of managed/device/host/pool")
def _(c): _set(c, "allocations", "kind", c.rng.choice(["Managed", "", "gpu", "manag\u00e9d"]))


@mutation("alloc_null_required", "table", "reject", R_NULL)
def _(c): _set(c, "allocations", c.rng.choice(["alloc_id", "base", "size", "kind"]), None)


@mutation("alloc_row_dropped", "table", "reject", "every alloc_id in events has a row")
def _(c): c.tabs["allocations"].drop_row(_pick(c, "allocations"))


@mutation("alloc_overlap_live", "table", "reject", "live ranges must not overlap")
def _(c):
    a = c.tabs["allocations"]
    r = _pick(c, "allocations", lambda x: x["name"] == "z" or x["name"] == "c")
    o = 1 - r if r < 2 else 0
    a.set("base", r, a.get("base")[o] + c.rng.choice([0, 4096, 1 << 20]))


@mutation("alloc_base_shifted", "table", "reject",
          "a page must lie inside an allocation live when its kernel runs")
def _(c):
    a = c.tabs["allocations"]
    r = _pick(c, "allocations", lambda x: x["kind"] != "host" and x["name"] != "w")
    a.set("base", r, a.get("base")[r] + c.rng.choice([64 << 20, 1 << 40]))


@mutation("alloc_unallocated_row", "table", "same",
          "an allocation row no event allocates is never live and changes nothing")
def _(c):
    a = c.tabs["allocations"]
    c.dirty.add("allocations")
    a.insert_row(a.n, dict(alloc_id=999, base=0x100000000, size=c.rng.choice([4096, 3 * MiB]),
                           kind="managed", name="unused"))


# reservations of 1 TiB up to 2**61 bytes: memory is sized by touched blocks, so they cost
# nothing (docs/reliability.md)
@mutation("alloc_unallocated_huge", "table", "same",
          "an allocation row no event allocates is never live and changes nothing")
def _(c):
    a = c.tabs["allocations"]
    c.dirty.add("allocations")
    a.insert_row(a.n, dict(alloc_id=998, base=0x100000000000,
                           size=c.rng.choice([1 << 40, 1 << 46, 1 << 61]), kind="managed",
                           name="reserved-huge"))


@mutation("alloc_name_any_text", "table", "same", "name is a free-form label")
def _(c): _set(c, "allocations", "name", c.rng.choice([None, "", "\u00e9\u4e2d\U0001f600",
                                                       "x" * 10000, "a\x00b"]))


# events
@mutation("event_seq_gap", "table", "reject", "seq is 0, 1, 2, ... with no gaps")
def _(c):
    ev = c.tabs["events"]
    r = _pick(c, "events")
    ev.set("seq", r, c.rng.choice([ev.n, r + 1 if r + 1 < ev.n else r + 2, U64]))


@mutation("event_rows_swapped", "table", "reject", "seq is 0, 1, 2, ... (rows in order)")
def _(c):
    ev = c.tabs["events"]
    r = _pick(c, "events", lambda x: x["seq"] + 1 < ev.n)
    ev.move_row(r, r + 1)


@mutation("event_op_unknown", "table", "reject", "op is one of the listed names")
def _(c): _set(c, "events", "op", c.rng.choice(["Kernel", "", "memcpy", "malloc", None]))


@mutation("event_alloc_id_missing", "table", "reject", "alloc and free need alloc_id")
def _(c): _set(c, "events", "alloc_id", None, lambda x: x["op"] in ("alloc", "free"))


@mutation("event_alloc_id_unknown", "table", "reject", "every alloc_id in events has a row")
def _(c): _set(c, "events", "alloc_id", c.rng.choice([77, 2**32 - 1]),
               lambda x: x["op"] in ("alloc", "free"))


def _repeat_later(c, op: str) -> None:
    """Copy an event of `op` to a random later place in the program order."""
    ev = c.tabs["events"]
    r = _pick(c, "events", lambda x: x["op"] == op)
    ev.insert_row(c.rng.randrange(r + 1, ev.n + 1), ev.rows()[r])
    _renumber(c)


@mutation("event_double_alloc", "table", "reject", "allocated by exactly one alloc event")
def _(c): _repeat_later(c, "alloc")


@mutation("event_free_twice", "table", "reject", "freed by at most one free event")
def _(c): _repeat_later(c, "free")


@mutation("event_free_before_alloc", "table", "reject", "allocated before any use")
def _(c):
    ev = c.tabs["events"]
    r = _pick(c, "events", lambda x: x["op"] == "free")
    aid = ev.get("alloc_id")[r]
    a = next(i for i, x in enumerate(ev.rows()) if x["op"] == "alloc" and x["alloc_id"] == aid)
    ev.move_row(r, a)
    _renumber(c)


@mutation("event_free_before_use", "table", "reject",
          "freed after its last use (a later kernel's page is then out of range)")
def _(c):
    ev = c.tabs["events"]
    k = _pick(c, "events", lambda x: x["op"] == "kernel" and x["kernel_id"] != 1)
    frees = [i for i, x in enumerate(ev.rows()) if x["op"] == "free" and i > k]
    if not frees:
        raise LookupError("no free after the kernel")
    ev.move_row(frees[-1], k)
    _renumber(c)


@mutation("event_kernel_id_missing", "table", "reject", "kernel events need kernel_id")
def _(c): _set(c, "events", "kernel_id", None, lambda x: x["op"] == "kernel")


@mutation("event_kernel_id_unknown", "table", "reject", "kernel events name a kernel row")
def _(c): _set(c, "events", "kernel_id", c.rng.choice([55, 2**32 - 1]),
               lambda x: x["op"] == "kernel")


@mutation("event_kernel_twice", "table", "reject", "every kernel row appears in one event")
def _(c): _repeat_later(c, "kernel")


@mutation("event_kernel_dropped", "table", "reject", "every kernel row appears in one event")
def _(c):
    c.tabs["events"].drop_row(_pick(c, "events", lambda x: x["op"] == "kernel"))
    _renumber(c)


RANGE = ("memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memset", "prefetch", "advise",
         "host_access")


@mutation("event_range_null", "table", "reject", "copies, memset, prefetch, advise need "
          "addr and size")
def _(c): _set(c, "events", c.rng.choice(["addr", "size"]), None, lambda x: x["op"] in RANGE)


@mutation("event_range_size_huge", "table", "reject", R_RANGE)
def _(c): _set(c, "events", "size", _big(c), lambda x: x["op"] in RANGE)


@mutation("event_range_addr_huge", "table", "reject", R_RANGE)
def _(c): _set(c, "events", "addr", _big(c), lambda x: x["op"] in RANGE)


@mutation("event_range_end_beyond_2_62", "table", "reject", R_RANGE)
def _(c):
    ev = c.tabs["events"]
    r = _pick(c, "events", lambda x: x["op"] in RANGE)
    ev.set("size", r, (1 << 62) - ev.get("addr")[r] + c.rng.choice([1, 4096, 1 << 40]))


@mutation("event_prefetch_arg_bad", "table", "reject", "prefetch arg is gpu or cpu")
def _(c): _set(c, "events", "arg", c.rng.choice([None, "GPU", "host", ""]),
               lambda x: x["op"] == "prefetch")


@mutation("event_advise_arg_bad", "table", "reject", "advise arg is one of the listed advice")
def _(c): _set(c, "events", "arg", c.rng.choice([None, "set_read_mostly ", "gpu"]),
               lambda x: x["op"] == "advise")


@mutation("event_host_access_bad", "table", "reject", "host_access size > 0, arg read/write/null",
          bases=("v11",))
def _(c):
    col, v = c.rng.choice([("size", 0), ("arg", "rw"), ("arg", "")])
    _set(c, "events", col, v, lambda x: x["op"] == "host_access")


@mutation("event_irrelevant_fields", "table", "same", R_IGNORED, weight=3)
def _(c):
    ev = c.tabs["events"]
    unused = {"alloc": ["kernel_id", "addr", "size", "arg"],
              "free": ["kernel_id", "addr", "size", "arg"],
              "kernel": ["alloc_id", "addr", "size", "arg"],
              "sync": ["alloc_id", "kernel_id", "addr", "size", "arg"],
              "memcpy_htod": ["alloc_id", "kernel_id", "arg"],
              "memcpy_dtoh": ["alloc_id", "kernel_id", "arg"],
              "memcpy_dtod": ["alloc_id", "kernel_id", "arg"],
              "memset": ["alloc_id", "kernel_id", "arg"],
              "prefetch": ["alloc_id", "kernel_id"], "advise": ["alloc_id", "kernel_id"],
              "host_access": ["alloc_id", "kernel_id"]}
    for _i in range(c.rng.randint(1, 4)):
        r = _pick(c, "events", lambda x: x["op"] in unused)
        col = c.rng.choice(unused[ev.get("op")[r]])
        v = {"arg": c.rng.choice(["gpu", "junk", ""]),
             "alloc_id": c.rng.choice([0, 1, 2**32 - 1]),
             "kernel_id": c.rng.choice([0, 2**32 - 1])}.get(col, c.rng.choice([0, U64, 1 << 62]))
        ev.set(col, r, v)


@mutation("event_timestamps_disordered", "table", "same",
          "timestamps and streams are provenance; the program order is seq", weight=2)
def _(c):
    ev = c.tabs["events"]
    c.dirty.add("events")
    for col in ("t_start_ns", "t_end_ns", "stream"):
        vals = ev.get(col)
        c.rng.shuffle(vals)
        if c.rng.random() < 0.5:
            vals[c.rng.randrange(len(vals))] = c.rng.choice([-(1 << 63), (1 << 63) - 1, None])


@mutation("event_range_outside_live", "table", "valid",
          "a range is clipped to live allocations; outside all of them it does nothing")
def _(c): _set(c, "events", "addr", c.rng.choice([0, 4096, (1 << 62) - (1 << 30)]),
               lambda x: x["op"] in RANGE and x["op"] != "host_access")


@mutation("event_range_size_zero", "table", "valid", "a zero-byte copy/memset/hint does nothing")
def _(c): _set(c, "events", "size", 0, lambda x: x["op"] in RANGE and x["op"] != "host_access")


@mutation("event_sync_inserted", "table", "same", "sync does not change counts")
def _(c):
    ev = c.tabs["events"]
    c.dirty.add("events")
    ev.insert_row(c.rng.randrange(ev.n + 1), dict(op="sync"))
    _renumber(c)


@mutation("event_v11_op_in_v1", "table", "reject",
          "a trace that uses a v1.1 feature says minor 1", bases=("small", "big"))
def _(c):
    ev = c.tabs["events"]
    c.dirty.add("events")
    ev.insert_row(ev.n, dict(op="host_access", addr=0x7F0000000000, size=4096))
    _renumber(c)


# kernels
@mutation("kernel_id_duplicate", "table", "reject", "kernel_id is unique")
def _(c):
    k = c.tabs["kernels"]
    r = _pick(c, "kernels")
    k.set("kernel_id", r, k.get("kernel_id")[(r + 1) % k.n])


@mutation("kernel_null_required", "table", "reject", R_NULL)
def _(c): _set(c, "kernels", c.rng.choice(["kernel_id", "name"]), None)


@mutation("kernel_duration_negative", "table", "reject", "duration_ns >= 0")
def _(c): _set(c, "kernels", "duration_ns", c.rng.choice([-1, -(1 << 63)]))


@mutation("kernel_duration_extreme", "table", "valid", "duration_ns is any int64 >= 0")
def _(c): _set(c, "kernels", "duration_ns", c.rng.choice([0, (1 << 63) - 1, 1 << 53]))


@mutation("kernel_row_without_event", "table", "reject", "every kernel row appears in an event")
def _(c):
    k = c.tabs["kernels"]
    c.dirty.add("kernels")
    k.insert_row(k.n, dict(kernel_id=4242, name="ghost", duration_ns=5))


@mutation("kernel_free_text", "table", "same", "name, grid and block are free-form text")
def _(c): _set(c, "kernels", c.rng.choice(["grid", "block"]),
               c.rng.choice([None, "", "-1,-1", "\U0001f600" * 50]))


@mutation("kernel_n_slices_bad", "table", "reject", "n_slices is 1..64", bases=("v11",))
def _(c): _set(c, "kernels", "n_slices", c.rng.choice([0, 65, 255]))


@mutation("kernel_n_slices_missing", "table", "reject",
          "with slices, every kernel with rows has n_slices", bases=("v11",))
def _(c): _set(c, "kernels", "n_slices", None)


# accesses
@mutation("access_page_moved", "table", "reject",
          "a page must lie inside an allocation live when its kernel runs", weight=4)
def _(c):
    x = c.tabs["accesses"]
    r = _pick(c, "accesses")
    a = c.tabs["allocations"]
    spans = [(b // 4096, (b + n - 1) // 4096) for b, n in zip(a.get("base"), a.get("size"))
             if b is not None and n]
    # a move of 2^12 pages or more can land in another allocation (valid if it is live):
    # only moves that leave every allocation are this class
    for _ in range(8):
        page = (x.get("page")[r] + (1 << c.rng.randrange(12, 64))) % (1 << 64)
        if not any(lo <= page <= hi for lo, hi in spans):
            x.set("page", r, page)
            return
    raise LookupError("every move drawn lands in an allocation")


@mutation("access_page_moved_dropped", "table", "valid",
          "with drop_out_of_range, rows outside every live allocation are dropped and counted",
          weight=2)
def _(c):
    x = c.tabs["accesses"]
    # the last row of a kernel, so that moving it up keeps the rows sorted
    r = _pick(c, "accesses", lambda row: True)
    kids = x.get("kernel_id")
    while r + 1 < x.n and kids[r + 1] == kids[r]:
        r += 1
    x.set("page", r, (x.get("page")[r] + (1 << c.rng.randrange(40, 64))) % (1 << 64))
    c.drop = True
    exp = {t: Tab(tab.to_arrow()) for t, tab in c.tabs.items()}
    exp["accesses"].drop_row(r)
    c.expected = exp


@mutation("access_flags_bad", "table", "reject", "flags is 1..7, never 0")
def _(c): _set(c, "accesses", "flags", c.rng.choice([0, 8, 128, 255]))


@mutation("access_count_zero", "table", "reject", "count >= 1")
def _(c): _set(c, "accesses", "count", 0)


@mutation("access_kernel_unknown", "table", "reject", "every row names a kernel")
def _(c): _set(c, "accesses", "kernel_id", c.rng.choice([321, 2**32 - 1]))


@mutation("access_rows_unsorted", "table", "reject",
          "rows sorted by kernel event order, then order, then page")
def _(c):
    x = c.tabs["accesses"]
    kids = x.get("kernel_id")
    r = _pick(c, "accesses", lambda row: True)
    s = c.rng.randrange(x.n)
    if s == r:
        s = (r + 1) % x.n
    x.move_row(r, s)
    rows = x.rows()
    keyed = [(kids_rank(c, row["kernel_id"]), row["order"], row["page"]) for row in rows]
    if keyed == sorted(keyed):
        raise LookupError("still sorted")


def kids_rank(c: Ctx, kid: int) -> int:
    ev = c.tabs["events"].rows()
    order = [e["kernel_id"] for e in ev if e["op"] == "kernel"]
    return order.index(kid) if kid in order else -1


@mutation("access_row_duplicated", "table", "reject", "a (kernel_id, page) pair appears once")
def _(c):
    x = c.tabs["accesses"]
    r = _pick(c, "accesses")
    row = x.rows()[r]
    if c.rng.random() < 0.5:
        x.insert_row(r + 1, row)
    else:  # same page again later in the kernel, with a larger order
        kids = x.get("kernel_id")
        e = r
        while e + 1 < x.n and kids[e + 1] == kids[r]:
            e += 1
        row = dict(row, order=max(x.get("order")[r:e + 1]) + 1)
        x.insert_row(e + 1, row)


@mutation("access_null", "table", "reject", R_NULL)
def _(c): _set(c, "accesses", c.rng.choice(["kernel_id", "page", "flags", "count", "order"]),
               None)


@mutation("access_value_changes_valid", "table", "valid",
          "flags 1..7, count >= 1 and equal or gapped order ranks are all valid")
def _(c):
    col = c.rng.choice(["flags", "count", "order"])
    if col == "order":
        x = c.tabs["accesses"]
        c.dirty.add("accesses")
        x.set_col("order", [3 * o for o in x.get("order")])
    else:
        _set(c, "accesses", col, c.rng.choice([1, 4, 7]) if col == "flags" else
             c.rng.choice([1, 2**32 - 1]))


@mutation("access_slices_bad", "table", "reject", "slices != 0 and below n_slices",
          bases=("v11",))
def _(c): _set(c, "accesses", "slices", c.rng.choice([0, 1 << 63, 1 << 5]))


@mutation("access_kernel_rows_removed", "table", "valid", "a kernel may touch no page")
def _(c):
    x = c.tabs["accesses"]
    c.dirty.add("accesses")
    k = c.rng.choice(sorted(set(x.get("kernel_id"))))
    for r in reversed([i for i, v in enumerate(x.get("kernel_id")) if v == k]):
        x.drop_row(r)


# columns and types (any table)
def _any_table(c: Ctx) -> str:
    t = c.rng.choice(TABLES)
    c.dirty.add(t)
    return t


@mutation("column_missing", "table", "reject", "a missing column is rejected", weight=2)
def _(c):
    from uvmsim.trace.format import SCHEMAS
    t = _any_table(c)
    c.tabs[t].drop_col(c.rng.choice([n for n, _, _ in SCHEMAS[FILE[t]]]))


@mutation("column_duplicated", "table", "reject", "column names are unique", weight=2)
def _(c):
    t = _any_table(c)
    tab = c.tabs[t]
    i = c.rng.randrange(len(tab.names))
    tab.names.append(tab.names[i])
    tab.cols.append(list(tab.cols[i]))
    tab.types.append(tab.types[i])


@mutation("column_extra", "table", "same", "extra columns are allowed and ignored", weight=2)
def _(c):
    t = _any_table(c)
    tab = c.tabs[t]
    n = tab.n
    name, vals, typ = c.rng.choice([
        ("extra", [None] * n, pa.null()),
        ("note", ["\u00e9"] * n, pa.string()),
        ("nested", [[1, 2]] * n, pa.list_(pa.int64())),
        ("rec", [{"a": 1}] * n, pa.struct([("a", pa.int64())])),
        ("bits", [True] * n, pa.bool_()),
    ])
    tab.set_col(name, vals, typ)


@mutation("column_reordered", "table", "same", "columns are found by name")
def _(c):
    tab = c.tabs[_any_table(c)]
    order = list(range(len(tab.names)))
    c.rng.shuffle(order)
    tab.names = [tab.names[i] for i in order]
    tab.cols = [tab.cols[i] for i in order]
    tab.types = [tab.types[i] for i in order]


def _numeric_cols(tab: Tab) -> list[int]:
    return [i for i, t in enumerate(tab.types) if t is not None and pa.types.is_integer(t)]


@mutation("column_lossless_type", "table", "same",
          "a column cast losslessly (wider int, integral float) is accepted", weight=2)
def _(c):
    tab = c.tabs[_any_table(c)]
    i = c.rng.choice(_numeric_cols(tab))
    typ = c.rng.choice([pa.int64(), pa.uint64(), pa.float64(),
                        pa.dictionary(pa.int32(), pa.int64())])
    vals = tab.cols[i]
    if pa.types.is_floating(typ) and any(v is not None and abs(v) > 2**53 for v in vals):
        typ = pa.uint64()
    if typ == pa.int64() and any(v is not None and v >= 2**63 for v in vals):
        typ = pa.uint64()
    tab.types[i] = typ


@mutation("column_lossy_type", "table", "reject", R_CAST, weight=2)
def _(c):
    from uvmsim.trace.format import SCHEMAS
    t = _any_table(c)
    tab = c.tabs[t]
    req = {n for n, _, nl in SCHEMAS[FILE[t]] if not nl}
    i = c.rng.choice([j for j in _numeric_cols(tab) if tab.names[j] in req])
    how = c.rng.choice(["string", "bool", "fraction", "negative", "narrow"])
    vals = tab.cols[i]
    r = c.rng.randrange(len(vals))
    if how == "string":
        tab.cols[i], tab.types[i] = [None if v is None else str(v) for v in vals], pa.string()
    elif how == "bool":
        tab.cols[i], tab.types[i] = [None if v is None else bool(v % 2) for v in vals], \
            pa.bool_()
    elif how == "fraction":
        tab.cols[i] = [None if v is None else float(v) for v in vals]
        tab.cols[i][r] = (vals[r] or 0) + 0.5
        tab.types[i] = pa.float64()
    elif how == "negative":
        tab.cols[i] = list(vals)
        tab.cols[i][r] = -1
        tab.types[i] = pa.int64()
    else:  # a value that does not fit the spec type, in a wide column
        from uvmsim.trace.format import SCHEMAS as S
        target = dict((n, ty) for n, ty, _ in S[FILE[t]])[tab.names[i]]
        if target.bit_width == 64:
            raise LookupError("no wider type")
        tab.cols[i] = list(vals)
        tab.cols[i][r] = 1 << target.bit_width
        tab.types[i] = pa.int64()


@mutation("column_all_null_optional", "table", "same",
          "nullable columns may be all null (unknown)")
def _(c):
    ev = c.tabs["events"]
    c.dirty.add("events")
    col = c.rng.choice(["stream", "t_start_ns", "t_end_ns"])
    ev.set_col(col, [None] * ev.n, c.rng.choice([pa.null(), pa.int64(), pa.string()]))


# manifest
def _manifest(c: Ctx) -> dict:
    return json.loads((c.d / "manifest.json").read_text())


def _mset(c: Ctx, **kw) -> None:
    m = _manifest(c)
    for k, v in kw.items():
        if v is _DEL:
            m.pop(k, None)
        else:
            m[k] = v
    c.manifest = json.dumps(m).encode()


_DEL = object()
R_MAN = "the manifest is a UTF-8 JSON object: format 'uvmtrace', integer version 1"


@mutation("manifest_version_wrong_type", "manifest", "reject", R_MAN, weight=2)
def _(c): _mset(c, version=c.rng.choice([True, 1.0, "1", None, [1], 2, _DEL]))


@mutation("manifest_minor_wrong", "manifest", "reject", "minor is an integer 0..2", )
def _(c): _mset(c, minor=c.rng.choice([True, -1, 3, 1.0, "1"]))


@mutation("manifest_minor_0_with_v11", "manifest", "reject",
          "a trace that uses a v1.1 feature says minor 1", bases=("v11",))
def _(c): _mset(c, minor=c.rng.choice([0, _DEL]))


@mutation("manifest_minor_1_on_v1", "manifest", "same", "a reader accepts minors up to 2",
          bases=("small", "big"))
def _(c): _mset(c, minor=c.rng.choice([1, 2]))


@mutation("manifest_page_size_wrong", "manifest", "reject", "page_size is the integer 4096")
def _(c): _mset(c, page_size=c.rng.choice([4096.0, True, "4096", 8192, 0, None]))


@mutation("manifest_format_wrong", "manifest", "reject", R_MAN)
def _(c): _mset(c, format=c.rng.choice(["UVMTRACE", "", None, 1, _DEL]))


@mutation("manifest_source_not_object", "manifest", "reject", "source is a JSON object")
def _(c): _mset(c, source=c.rng.choice([[], "x", 1, None]))


@mutation("manifest_extra_keys", "manifest", "same", "extra manifest keys are ignored")
def _(c): _mset(c, extra={"a": [1, 2]}, comment="\u00e9\u4e2d")


@mutation("manifest_not_utf8", "manifest", "reject", R_MAN)
def _(c):
    raw = json.dumps(_manifest(c)).encode()
    i = raw.index(b'"source"')
    bad = c.rng.choice([b'"\xe9t\xe9": 1, ', b'"\xff": 1, ', b'"\xc3": 0, '])
    c.manifest = raw[:i] + bad + raw[i:]


@mutation("manifest_bom", "manifest", "reject", R_MAN)
def _(c): c.manifest = b"\xef\xbb\xbf" + json.dumps(_manifest(c)).encode()


@mutation("manifest_too_deep", "manifest", "reject", "manifest nesting is limited (32 levels)")
def _(c):
    depth = c.rng.choice([40, 5000, 200000])
    m = _manifest(c)
    raw = json.dumps(m)
    nest = "[" * depth + "]" * depth
    c.manifest = raw.replace('"source": {', '"deep": ' + nest + ', "source": {', 1).encode()


@mutation("manifest_too_big", "manifest", "reject", "the manifest is at most 1 MiB")
def _(c): _mset(c, source={"notes": "x" * (1 << 20)})


@mutation("manifest_not_json", "manifest", "reject", R_MAN)
def _(c):
    raw = json.dumps(_manifest(c)).encode()
    c.manifest = c.rng.choice([b"", raw[:len(raw) // 2], b"[1, 2]", b"null", b"\x00" * 16,
                               raw.replace(b"}", b", \"x\": NaN}", 1),
                               raw.replace(b"{", b"{\"format\": \"x\", ", 1)])


# directory and files
@mutation("file_missing", "files", "reject", "a directory missing a file is rejected")
def _(c): (c.d / c.rng.choice(["manifest.json"] + list(FILE.values()))).unlink()


@mutation("file_is_a_directory", "files", "reject", "each member is a regular file")
def _(c):
    f = c.d / c.rng.choice(["manifest.json"] + list(FILE.values()))
    f.unlink()
    f.mkdir()


@mutation("file_extra", "files", "same", "extra files are allowed and ignored")
def _(c):
    (c.d / "notes.txt").write_bytes(os.urandom(100))
    (c.d / "sub").mkdir()
    (c.d / "sub" / "x.parquet").write_bytes(b"PAR1")


@mutation("file_swapped", "files", "reject", "each file holds its table's columns")
def _(c):
    a, b = c.rng.sample(list(FILE.values()), 2)
    (c.d / a).rename(c.d / "tmp")
    (c.d / b).rename(c.d / a)
    (c.d / "tmp").rename(c.d / b)


@mutation("path_missing", "files", "reject", "a missing path is an OSError")
def _(c): c.path = c.d.parent / "absent.uvmtrace"


@mutation("path_wrong_name", "files", "reject", "the directory name ends in .uvmtrace")
def _(c):
    c.path = c.d.parent / "renamed"
    c.d.rename(c.path)


# byte-level damage to a Parquet file
def _pfile(c: Ctx) -> Path:
    return c.d / FILE[c.rng.choice(TABLES)]


def _footer(data: bytes) -> tuple[int, int]:
    n = struct.unpack("<I", data[-8:-4])[0]
    return len(data) - 8 - n, n


@mutation("bytes_flip_anywhere", "bytes", "either", "damage is rejected or decodes to a "
          "valid trace", weight=14)
def _(c):
    f = _pfile(c)
    data = bytearray(f.read_bytes())
    for _i in range(c.rng.choice([1, 1, 2, 8])):
        p = c.rng.randrange(len(data))
        data[p] ^= 1 << c.rng.randrange(8)
    f.write_bytes(bytes(data))


@mutation("bytes_flip_footer", "bytes", "either", "damage is rejected or decodes to a valid "
          "trace", weight=14)
def _(c):
    f = _pfile(c)
    data = bytearray(f.read_bytes())
    start, n = _footer(data)
    for _i in range(c.rng.choice([1, 1, 3])):
        p = c.rng.randrange(start, start + n)
        data[p] ^= 1 << c.rng.randrange(8)
    f.write_bytes(bytes(data))


@mutation("bytes_overwrite_range", "bytes", "either", "damage is rejected or decodes to a "
          "valid trace", weight=8)
def _(c):
    f = _pfile(c)
    data = bytearray(f.read_bytes())
    n = c.rng.choice([1, 4, 16, 64])
    p = c.rng.randrange(max(1, len(data) - n))
    fill = c.rng.choice([b"\x00", b"\xff", None])
    data[p:p + n] = (fill * n) if fill else bytes(c.rng.randrange(256) for _ in range(n))
    f.write_bytes(bytes(data[:len(data)]))


@mutation("bytes_truncated", "bytes", "reject", "a truncated Parquet file is rejected",
          weight=3)
def _(c):
    f = _pfile(c)
    data = f.read_bytes()
    f.write_bytes(data[:c.rng.randrange(len(data))])


@mutation("bytes_garbage_appended", "bytes", "reject", "the file ends in its footer",
          weight=2)
def _(c):
    f = _pfile(c)
    f.write_bytes(f.read_bytes() + bytes(c.rng.randrange(256)
                                         for _ in range(c.rng.randrange(1, 40))) + b"x")


@mutation("bytes_footer_length", "bytes", "either", "the footer length must fit the file",
          weight=4)
def _(c):
    f = _pfile(c)
    data = bytearray(f.read_bytes())
    n = struct.unpack("<I", data[-8:-4])[0]
    new = c.rng.choice([0, 1, n - 1, n + 1, n + 4, len(data), 2**32 - 1,
                        c.rng.randrange(2**32)])
    if new == n:
        new = n + 1
    data[-8:-4] = struct.pack("<I", new)
    f.write_bytes(bytes(data))


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63)


@mutation("bytes_footer_row_count", "bytes", "either",
          "row counts in the footer must agree with the row groups", weight=6)
def _(c):
    """Rewrite one thrift i64 holding a row count (the file's or a row group's)."""
    f = _pfile(c)
    data = f.read_bytes()
    start, n = _footer(data)
    md = pq.read_metadata(f)
    counts = {md.num_rows} | {md.row_group(g).num_rows for g in range(md.num_row_groups)}
    foot = data[start:start + n]
    hits = []
    for v in counts:
        pat = _varint(_zigzag(v))
        for hdr in (b"\x16", b"\x26", b"\x36"):  # i64 field header, delta 1..3
            i = foot.find(hdr + pat)
            while i >= 0:
                hits.append((i + 1, len(pat), v))
                i = foot.find(hdr + pat, i + 1)
    if not hits:
        raise LookupError("no row count found")
    i, ln, v = c.rng.choice(hits)
    new = c.rng.choice([v + 1, max(v - 1, 0), v * 2 + 7, 0, 1 << 40, (1 << 63) - 1, -1])
    rep = _varint(_zigzag(new) & ((1 << 64) - 1))
    foot = foot[:i] + rep + foot[i + ln:]
    f.write_bytes(data[:start] + foot + struct.pack("<I", len(foot)) + b"PAR1")


@mutation("bytes_magic", "bytes", "reject", "a Parquet file starts and ends with PAR1")
def _(c):
    f = _pfile(c)
    data = bytearray(f.read_bytes())
    p = c.rng.choice([0, 1, len(data) - 1, len(data) - 4])
    data[p] ^= 0x20
    f.write_bytes(bytes(data))


@mutation("bytes_empty_file", "bytes", "reject", "an empty file is not Parquet")
def _(c): _pfile(c).write_bytes(c.rng.choice([b"", b"PAR1", b"PAR1PAR1", b"PAR1" * 3]))


# layouts: the same tables written another way
@mutation("layout_rewritten", "layout", "same",
          "row groups, compression, encodings and statistics do not change the trace",
          weight=3)
def _(c):
    t = c.rng.choice(TABLES)
    tab = pq.read_table(c.d / FILE[t])
    opts = c.rng.choice([dict(row_group_size=1), dict(compression="brotli"),
                         dict(compression="lz4"), dict(use_dictionary=False),
                         dict(data_page_version="2.0", compression="zstd"),
                         dict(write_statistics=False), dict(data_page_size=64),
                         dict(use_byte_stream_split=["page"]) if t == "accesses" else {},
                         dict(column_encoding={"page": "DELTA_BINARY_PACKED"},
                              use_dictionary=False) if t == "accesses" else {}])
    pq.write_table(tab, c.d / FILE[t], **opts)


@mutation("layout_empty_row_groups", "layout", "same", "row groups may be empty")
def _(c):
    t = c.rng.choice(TABLES)
    tab = pq.read_table(c.d / FILE[t])
    with pq.ParquetWriter(c.d / FILE[t], tab.schema) as w:
        w.write_table(tab.slice(0, 0))
        w.write_table(tab)
        w.write_table(tab.slice(0, 0))


@mutation("layout_false_sorting_claim", "layout", "same",
          "footer claims (sorting, statistics) are not used")
def _(c):
    # a sorting_columns claim the data does not honour: a reader that trusted footer
    # claims to skip or merge rows would misread the table
    t = c.rng.choice(TABLES)
    f = c.d / FILE[t]
    tab = pq.read_table(f)
    pq.write_table(tab, f, sorting_columns=[pq.SortingColumn(0, descending=True)])


# --------------------------------------------------------------------------- second fuzz
# Nine families of a second, independent fuzz (docs/reliability.md): v1.1 slices, v1.1 host
# accesses, Arrow type changes, Parquet structure, directory layout, manifests, row groups,
# kernel ids and page limits. Each case's verdict is what docs/trace-format.md says.
F_SLICES, F_HOST, F_ARROW, F_PARQUET, F_DIR, F_MANIFEST, F_RG, F_KID, F_PAGES = (
    "v1.1 slices", "v1.1 host accesses", "Arrow type changes", "Parquet structure",
    "directory layout", "manifests", "row groups", "kernel ids", "page limits")


@mutation("v11_slices_every_bit", "table", "valid",
          "slices may set any bit below n_slices (1..64)", bases=("v11",), family=F_SLICES)
def _(c):
    k = c.tabs["kernels"]
    r = _pick(c, "kernels", lambda x: x["n_slices"] is not None)
    kid = k.get("kernel_id")[r]
    n = c.rng.choice([k.get("n_slices")[r], 64])
    k.set("n_slices", r, n)
    x = c.tabs["accesses"]
    c.dirty.add("accesses")
    rows = [i for i, v in enumerate(x.get("kernel_id")) if v == kid]
    if not rows:
        raise LookupError("kernel without rows")
    x.set("slices", c.rng.choice(rows), (1 << n) - 1)


@mutation("v11_slices_one_each", "table", "valid", "a row touched in one slice is valid",
          bases=("v11",), family=F_SLICES)
def _(c):
    x = c.tabs["accesses"]
    c.dirty.add("accesses")
    x.set_col("slices", [1] * x.n)


@mutation("v11_host_access_outside_live", "table", "valid",
          "a range is clipped to live allocations; outside all of them it does nothing",
          bases=("v11",), family=F_HOST)
def _(c): _set(c, "events", "addr", c.rng.choice([0, 4096, (1 << 62) - (1 << 30)]),
               lambda x: x["op"] == "host_access")


@mutation("v11_host_access_arg_null", "table", "valid",
          "host_access arg is read, write or null (unknown)", bases=("v11",), family=F_HOST)
def _(c): _set(c, "events", "arg", c.rng.choice([None, "read", "write"]),
               lambda x: x["op"] == "host_access")


@mutation("v11_host_access_everything", "table", "valid",
          "a host access is clipped to live allocations", bases=("v11",), family=F_HOST)
def _(c):
    ev = c.tabs["events"]
    r = _pick(c, "events", lambda x: x["op"] == "host_access")
    ev.set("addr", r, 0)
    ev.set("size", r, (1 << 62) - 4096)


@mutation("v11_host_access_repeated", "table", "valid",
          "host accesses may repeat anywhere in the program order", bases=("v11",),
          family=F_HOST)
def _(c): _repeat_later(c, "host_access")


def _string_col(c: Ctx) -> tuple[Tab, int]:
    from uvmsim.trace.format import SCHEMAS
    t = _any_table(c)
    tab = c.tabs[t]
    strs = [i for i, (n, ty, _) in enumerate(SCHEMAS[FILE[t]]) if pa.types.is_string(ty)
            and n in tab.names]
    if not strs:
        raise LookupError("no string column")
    return tab, tab.idx(SCHEMAS[FILE[t]][c.rng.choice(strs)][0])


@mutation("arrow_large_string", "table", "same", "a string column may be large_string",
          family=F_ARROW)
def _(c):
    tab, i = _string_col(c)
    tab.types[i] = pa.large_string()


@mutation("arrow_dictionary_string", "table", "same",
          "a dictionary-encoded column reads as its values", family=F_ARROW)
def _(c):
    tab, i = _string_col(c)
    tab.types[i] = pa.dictionary(c.rng.choice([pa.int8(), pa.int32()]), pa.string())


@mutation("arrow_binary_for_string", "table", "reject", "numbers or bytes in string columns "
          "are rejected", family=F_ARROW)
def _(c):
    tab, i = _string_col(c)
    if all(v is None for v in tab.cols[i]):
        raise LookupError("all null: any type reads as null")
    tab.cols[i] = [None if v is None else v.encode() for v in tab.cols[i]]
    tab.types[i] = pa.binary()


@mutation("arrow_narrowest_int", "table", "same",
          "an integer column of any width that holds the values is cast losslessly",
          family=F_ARROW)
def _(c):
    tab = c.tabs[_any_table(c)]
    i = c.rng.choice(_numeric_cols(tab))
    vals = [v for v in tab.cols[i] if v is not None]
    for t in (pa.int8(), pa.uint8(), pa.int16(), pa.uint16(), pa.int32(), pa.uint32(),
              pa.int64()):
        lo, hi = (0, (1 << t.bit_width) - 1) if pa.types.is_unsigned_integer(t) else \
            (-(1 << (t.bit_width - 1)), (1 << (t.bit_width - 1)) - 1)
        if all(lo <= v <= hi for v in vals):
            tab.types[i] = t
            return
    raise LookupError("needs 64 unsigned bits")


@mutation("arrow_temporal_for_int", "table", "reject", R_CAST, family=F_ARROW)
def _(c):
    from uvmsim.trace.format import SCHEMAS
    t = _any_table(c)
    tab = c.tabs[t]
    req = {n for n, _, nl in SCHEMAS[FILE[t]] if not nl}
    i = c.rng.choice([j for j in _numeric_cols(tab) if tab.names[j] in req])
    if any(v is not None and v >= 1 << 62 for v in tab.cols[i]):
        raise LookupError("too large for a timestamp")
    tab.types[i] = c.rng.choice([pa.timestamp("ns"), pa.duration("ns"), pa.date64()])


def _rewrite(c: Ctx, **opts) -> str:
    t = c.rng.choice(TABLES)
    f = c.d / FILE[t]
    pq.write_table(pq.read_table(f), f, **opts)
    return t


@mutation("parquet_one_value_per_page", "layout", "same",
          "page layout does not matter (one value per data page included)", family=F_PARQUET)
def _(c): _rewrite(c, data_page_size=1, write_batch_size=1,
                   compression=c.rng.choice(["none", "zstd", "snappy"]),
                   data_page_version=c.rng.choice(["1.0", "2.0"]))


@mutation("parquet_page_index_no_stats", "layout", "same",
          "page indexes and statistics are not used", family=F_PARQUET)
def _(c): _rewrite(c, write_page_index=True, write_statistics=c.rng.random() < 0.5,
                   compression=c.rng.choice(["brotli", "gzip", "lz4"]))


def _claim(c: Ctx, new: Callable[[Any], int]) -> None:
    """Rewrite one column chunk's total_uncompressed_size (ColumnMetaData field 6: a thrift
    i64 right before field 7, its compressed size)."""
    f = _pfile(c)
    data = f.read_bytes()
    start, n = _footer(data)
    foot = data[start:start + n]
    md = pq.read_metadata(f)
    hits = []
    for g in range(md.num_row_groups):
        for i in range(md.num_columns):
            cc = md.row_group(g).column(i)
            old = b"\x16" + _varint(_zigzag(cc.total_uncompressed_size))
            pat = old + b"\x16" + _varint(_zigzag(cc.total_compressed_size))
            if foot.count(pat) == 1:
                hits.append((foot.find(pat), len(old), cc))
    if not hits:
        raise LookupError("no chunk's claim found once")
    i, ln, cc = c.rng.choice(hits)
    foot = foot[:i] + b"\x16" + _varint(_zigzag(new(cc))) + foot[i + ln:]
    f.write_bytes(data[:start] + foot + struct.pack("<I", len(foot)) + b"PAR1")


@mutation("parquet_uncompressed_claim_huge", "bytes", "reject",
          "a column chunk claiming an uncompressed size no chunk of its values, type and "
          "compressed bytes can have is rejected", weight=2, family=F_PARQUET)
def _(c): _claim(c, lambda cc: c.rng.choice([1 << 40, 1 << 50, (1 << 63) - 1]))


@mutation("parquet_uncompressed_claim_wrong", "bytes", "either",
          "damage is rejected or decodes to a valid trace", weight=2, family=F_PARQUET)
def _(c): _claim(c, lambda cc: max(0, cc.total_uncompressed_size + c.rng.choice(
    [-1, 1, 4096, cc.total_compressed_size * 40])))


@mutation("dir_symlink_loop", "files", "reject",
          "a loop of symbolic links is an OSError (ELOOP)", family=F_DIR)
def _(c):
    c.path = c.d.parent / f"loop{c.rng.randrange(1 << 30)}.uvmtrace"
    os.symlink(c.path.name, c.path)


@mutation("dir_trace_through_symlink", "files", "same",
          "a trace reached through a symbolic link is the trace", family=F_DIR)
def _(c):
    c.path = c.d.parent / f"link{c.rng.randrange(1 << 30)}.uvmtrace"
    os.symlink(c.d, c.path)


@mutation("dir_member_symlink", "files", "same",
          "a member may be a symbolic link to a regular file", family=F_DIR)
def _(c):
    f = c.rng.choice(["manifest.json"] + list(FILE.values()))
    (c.d / "store").mkdir()
    (c.d / f).rename(c.d / "store" / f)
    os.symlink(Path("store") / f, c.d / f)


@mutation("dir_member_symlink_broken", "files", "reject",
          "a member that is a dangling link or a loop of links is missing or not a file",
          family=F_DIR)
def _(c):
    f = c.rng.choice(["manifest.json"] + list(FILE.values()))
    (c.d / f).unlink()
    os.symlink(c.rng.choice([f, "nowhere.parquet"]), c.d / f)


@mutation("manifest_lone_surrogate", "manifest", "reject",
          "a manifest string must be Unicode (no lone surrogate)", family=F_MANIFEST)
def _(c):
    esc = c.rng.choice(["\\ud800", "\\udfff", "a\\udc00b"])
    raw = json.dumps(_manifest(c))
    at = c.rng.choice(['"source": {', '{'])
    c.manifest = raw.replace(at, at + f'"k{esc}": "x", ' if c.rng.random() < 0.5
                             else at + f'"k": "{esc}", ', 1).encode()


@mutation("manifest_escapes_and_spacing", "manifest", "same",
          "the manifest is any JSON text of the object (escapes, spacing, key order)",
          family=F_MANIFEST)
def _(c):
    m = _manifest(c)
    m["note"] = "\u00e9\U0001f600\u4e2d"
    items = list(m.items())
    c.rng.shuffle(items)
    c.manifest = json.dumps(dict(items), ensure_ascii=c.rng.random() < 0.5,
                            indent=c.rng.choice([None, 1, "\t"])).encode()


@mutation("row_groups_one_row_each", "layout", "same",
          "row groups do not change the trace (one row each included)", family=F_RG)
def _(c): _rewrite(c, row_group_size=1)


@mutation("row_groups_uneven", "layout", "same", "row groups may differ in size",
          family=F_RG)
def _(c):
    t = c.rng.choice(TABLES)
    f = c.d / FILE[t]
    tab = pq.read_table(f)
    with pq.ParquetWriter(f, tab.schema) as w:
        i = 0
        while i < tab.num_rows:
            n = c.rng.choice([1, 2, 3, 7, 50])
            w.write_table(tab.slice(i, n))
            i += n


def _kernel_ids(c: Ctx, new: dict) -> None:
    for t in ("kernels", "events", "accesses"):
        tab = c.tabs[t]
        c.dirty.add(t)
        tab.set_col("kernel_id", [None if v is None else new.get(v, v)
                                  for v in tab.get("kernel_id")])


@mutation("kernel_ids_renumbered", "table", "same",
          "kernel ids are labels: any unique uint32 values", family=F_KID)
def _(c):
    ids = sorted(set(c.tabs["kernels"].get("kernel_id")))
    fresh = c.rng.sample(range(1 << 32), len(ids))
    if c.rng.random() < 0.5:
        fresh[-1] = (1 << 32) - 1
    _kernel_ids(c, dict(zip(ids, fresh)))


@mutation("kernel_rows_shuffled", "table", "same",
          "kernels are replayed in event order, whatever the table's row order", family=F_KID)
def _(c):
    k = c.tabs["kernels"]
    c.dirty.add("kernels")
    order = list(range(k.n))
    c.rng.shuffle(order)
    k.cols = [[col[i] for i in order] for col in k.cols]


def _alloc_event(c: Ctx, aid: int, base: int, size: int, name: str) -> None:
    a = c.tabs["allocations"]
    c.dirty.add("allocations")
    a.insert_row(a.n, dict(alloc_id=aid, base=base, size=size, kind="managed", name=name))
    ev = c.tabs["events"]
    ev.insert_row(0, dict(op="alloc", alloc_id=aid))
    _renumber(c)


@mutation("page_top_of_range", "table", "valid",
          "pages below 2^50 (addresses below 2^62) are valid", family=F_PAGES)
def _(c):
    # base + size stays below 2^62 and reaches into page 2^50 - 1
    size = c.rng.choice([4095, 4096, 8191, 12345, 3 << 20])
    base = (1 << 62) - 1 - size - c.rng.randrange(4095)
    _alloc_event(c, 900, base, size, "top")
    k, ev, x = c.tabs["kernels"], c.tabs["events"], c.tabs["accesses"]
    c.dirty.update({"kernels", "accesses"})
    kid = 901
    row = dict(kernel_id=kid, name="top", duration_ns=1000)
    if "n_slices" in k.names:
        row["n_slices"] = 1
    k.insert_row(k.n, row)
    ev.insert_row(ev.n, dict(op="kernel", kernel_id=kid))
    _renumber(c)
    top = (1 << 50) - 1
    pages = sorted({top, c.rng.randrange(base // 4096, top + 1)})
    for i, p in enumerate(pages):
        r = dict(kernel_id=kid, page=p, flags=c.rng.choice([1, 2, 3]), count=1, order=i)
        if "slices" in x.names:
            r["slices"] = 1
        x.insert_row(x.n, r)


def _window_prefetch(c: Ctx, windows: int) -> None:
    base = 1 << 48  # above the bases' allocations, below 2^62 even for 2^30 windows
    _alloc_event(c, 902, base, windows << 21, "windows")
    ev = c.tabs["events"]
    ev.insert_row(1, dict(op="prefetch", addr=base, size=windows << 21, arg="gpu"))
    _renumber(c)


@mutation("page_windows_over_limit", "table", "reject",
          "a trace touching more than 2^20 windows of 2 MiB is refused (a reader limit)",
          family=F_PAGES)
def _(c): _window_prefetch(c, c.rng.choice([(1 << 20) + 1, (1 << 22) - 1, 1 << 30]))


@mutation("page_windows_many", "table", "valid",
          "reserved and touched memory up to the reader's limits is valid", family=F_PAGES)
def _(c): _window_prefetch(c, c.rng.choice([1 << 10, 1 << 13]))


# --------------------------------------------------------------------------- cases
def make_cases(n: int, seed: int = 0) -> list[dict]:
    """n case specs: every mutation at least once (when n allows), then weighted draws."""
    rng = random.Random(seed)
    names = sorted(MUTATIONS)
    weighted = [m for m in names for _ in range(MUTATIONS[m].weight)]
    out = []
    for i in range(n):
        m = MUTATIONS[names[i] if i < len(names) else rng.choice(weighted)]
        base = rng.choice(m.bases)
        layout = rng.choice(list(LAYOUTS))
        modes = ["load", "load", "load", "cli"] + (["tables", "tables"] if m.kind == "table"
                                                   else [])
        out.append(dict(id=i, mut=m.name, base=base, layout=layout, seed=rng.randrange(2**32),
                        mode=rng.choice(modes)))
    return out


def run_cases(cases: list[dict], *, jobs: int = 2, batch: int = 60,
              case_timeout: float = 20.0, startup: float = 600.0,
              log: Callable[[str], None] | None = None,
              done: Callable[[int], None] | None = None) -> list[dict]:
    """Run cases in child processes; returns one result per case (in case order).
    `done(n)` is called as each batch of n cases finishes (a progress bar's update)."""
    batches = [cases[i:i + batch] for i in range(0, len(cases), batch)]
    results: dict[int, dict] = {}

    def one(b: list[dict]) -> list[dict]:
        got: dict[int, dict] = {}
        todo = b
        while todo:
            res, status = _child(todo, startup, case_timeout)
            got.update(res)
            if status == "ok":
                break
            # results stream in case order, so the case that killed the child is the first
            # one without a result: run it alone to confirm, then go on after it
            k = next((i for i, c in enumerate(todo) if c["id"] not in res), None)
            if k is None:
                break
            c = todo[k]
            alone, st = _child([c], startup, case_timeout)
            got.update(alone)
            if c["id"] not in got:
                got[c["id"]] = dict(id=c["id"], mut=c["mut"], kind=MUTATIONS[c["mut"]].kind,
                                    mode=c["mode"], outcome=st, detail=f"child {st}: {c}")
            if log:
                log(f"case {c['id']} ({c['mut']}): batch {status}, alone {st}")
            todo = todo[k + 1:]
        for c in b:
            got.setdefault(c["id"], dict(id=c["id"], mut=c["mut"], outcome="other",
                                         detail="no result"))
        return [got[c["id"]] for c in b]

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        for fut in as_completed([ex.submit(one, b) for b in batches]):
            res = fut.result()
            for r in res:
                results[r["id"]] = r
            if done:
                done(len(res))
    return [results[c["id"]] for c in cases]


def _child(batch: list[dict], startup: float, case_timeout: float
           ) -> tuple[dict[int, dict], str]:
    """Run cases in one child; a hang is no new result for case_timeout seconds (startup
    more before the child's warm-up, which compiles the engine, is done), and the child is
    then killed."""
    # the parent owns the child's work folder: a child killed for a signal or a hang
    # cannot remove its own
    with tempfile.TemporaryDirectory(prefix="uvmfuzz-") as work:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(HERE)]),
                   NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", UVMSIM_FUZZ_WORK=work)
        return _watch(batch, startup, case_timeout, env)


def _watch(batch: list[dict], startup: float, case_timeout: float, env: dict
           ) -> tuple[dict[int, dict], str]:
    p = subprocess.Popen([sys.executable, str(HERE / "fuzz_child.py")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                         cwd=str(ROOT))
    p.stdin.write(json.dumps(batch).encode())
    p.stdin.close()
    got: dict[int, dict] = {}
    fd = p.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + startup + case_timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            p.kill()
            p.wait()
            p.stdout.close()
            return got, "hang"
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.startswith(PREFIX.encode()):
                r = json.loads(line[len(PREFIX):])
                if "id" in r:  # else the child's "ready" line: its warm-up is done
                    got[r["id"]] = r
                deadline = time.monotonic() + case_timeout
    rc = p.wait()
    p.stdout.close()
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = str(-rc)
        return got, f"signal:{name}"
    return got, "ok" if rc == 0 else f"child-exit-{rc}"


FAILURES = ("accepted-forbidden", "rejected-valid", "oracle-mismatch", "unnamed-rejection",
            "catalog-error")


def is_failure(outcome: str) -> bool:
    return (outcome in FAILURES or outcome.startswith("signal") or outcome == "hang" or
            outcome.startswith("exception") or outcome.startswith("child") or
            outcome == "other")


# --------------------------------------------------------------------------- in the child
class Runner:
    """Runs cases inside one child: bases are written once per (base, layout)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.dirs: dict[tuple[str, str], Path] = {}
        self.arrow: dict[str, dict[str, pa.Table]] = {}
        self.summaries: dict[tuple, dict] = {}

    def base_dir(self, base: str, layout: str) -> Path:
        key = (base, layout)
        if key not in self.dirs:
            self.dirs[key] = write_base(base, layout, self.work / f"{base}-{layout}.uvmtrace")
        return self.dirs[key]

    def base_tables(self, base: str) -> dict[str, pa.Table]:
        if base not in self.arrow:
            self.arrow[base] = base_arrow(base)
        return self.arrow[base]

    def replay(self, tables: dict[str, pa.Table], drop: bool = False) -> dict:
        import uvmsim
        tr = uvmsim.trace_from_tables(**tables, drop_out_of_range=drop)
        return _summary(uvmsim.simulate(tr, oversub=OVERSUB, model="h200"))

    def warm(self) -> None:
        """Compile (or load) every engine the cases replay on, and the reader's compiled
        checks of Parquet files, before the first case."""
        import uvmsim
        for base in BASES:
            self.base_summary(base)
        uvmsim.load_trace(self.base_dir("small", "groups"))
        if MULTI:
            tr = uvmsim.trace_from_tables(**self.base_tables("small"))
            uvmsim.simulate_multi([tr, tr], oversub=OVERSUB, model="h200", translation=True)

    def base_summary(self, base: str) -> dict:
        key = (base,)
        if key not in self.summaries:
            self.summaries[key] = self.replay(self.base_tables(base))
        return self.summaries[key]

    def run(self, spec: dict) -> dict:
        m = MUTATIONS[spec["mut"]]
        res = dict(id=spec["id"], mut=m.name, kind=m.kind, verdict=m.verdict, mode=spec["mode"])
        try:
            outcome, detail = self._run(spec, m)
        except LookupError as e:  # the mutation does not apply to this base
            outcome, detail = "not-applicable", str(e)
        except Exception as e:  # noqa: BLE001 - reported, with where it came from
            import traceback
            outcome = f"exception:{type(e).__name__}"
            detail = f"{e} @ " + " < ".join(
                f"{Path(f.filename).name}:{f.lineno}"
                for f in reversed(traceback.extract_tb(e.__traceback__)[-4:]))
        res.update(outcome=outcome, detail=detail[:300])
        return res

    def _run(self, spec: dict, m: Mutation) -> tuple[str, str]:
        import uvmsim
        from uvmsim.errors import TraceFormatError
        rng = random.Random(spec["seed"])
        d = self.work / f"case{spec['id']}.uvmtrace"
        if d.exists():
            shutil.rmtree(d)
        shutil.copytree(self.base_dir(spec["base"], spec["layout"]), d)
        tabs = {t: Tab(tab) for t, tab in self.base_tables(spec["base"]).items()}
        c = Ctx(rng=rng, base=spec["base"], tabs=tabs, d=d, dirty=set())
        mode = spec["mode"] if m.kind == "table" else \
            ("load" if spec["mode"] == "tables" else spec["mode"])
        try:
            m.fn(c)
            arrow = {t: tab.to_arrow() for t, tab in c.tabs.items()}
            if m.kind == "table":
                for t in c.dirty:
                    pq.write_table(arrow[t], d / FILE[t], **LAYOUTS[spec["layout"]])
                if m.name == "event_v11_op_in_v1" and mode == "tables":
                    mode = "load"  # in memory the manifest follows the tables
                cat = self._catalog(m, arrow, c.drop)
                if cat:
                    return "catalog-error", cat
            if c.manifest is not None:
                (d / "manifest.json").write_bytes(c.manifest)
            path = c.path or d
            if mode == "cli":
                return self._cli(m, c, path, spec)
            try:
                if mode == "tables":
                    tr = uvmsim.trace_from_tables(**arrow, drop_out_of_range=c.drop)
                else:
                    tr = uvmsim.load_trace(path, drop_out_of_range=c.drop)
            except TraceFormatError as e:
                if not e.file or "\n" in str(e):
                    return "unnamed-rejection", str(e)
                return self._rejected(m, c, path, str(e))
            except OSError as e:
                if m.name == "path_missing" or (m.name == "dir_symlink_loop" and
                                                e.errno == errno.ELOOP):
                    return "rejected", f"{type(e).__name__}: {e}"
                return f"exception:{type(e).__name__}", str(e)
            if m.verdict == "reject":
                return "accepted-forbidden", "loaded"
            try:
                summ = _summary(uvmsim.simulate(tr, oversub=OVERSUB, model="h200"))
            except Exception as e:  # noqa: BLE001 - any failure of an accepted trace counts
                return f"exception:{type(e).__name__}", f"replay: {e}"
            return self._accepted(m, c, path, spec, summ, tr)
        finally:
            shutil.rmtree(d, ignore_errors=True)
            if c.path and c.path != d:
                if c.path.is_symlink():
                    c.path.unlink()
                elif c.path.exists():
                    shutil.rmtree(c.path, ignore_errors=True)

    def _catalog(self, m: Mutation, arrow: dict, drop: bool) -> str:
        """The declared verdict of a table mutation, checked by the independent validator."""
        import fuzz_oracle
        try:
            fuzz_oracle.check(arrow, drop)
            valid = True
        except fuzz_oracle.Invalid as e:
            valid, why = False, str(e)
        if m.verdict == "reject" and valid and m.name != "event_v11_op_in_v1":
            return "declared reject, validator says valid"
        if m.verdict in ("same", "valid") and not valid:
            return f"declared {m.verdict}, validator says invalid: {why}"
        return ""

    def _rejected(self, m: Mutation, c: Ctx, path: Path, msg: str) -> tuple[str, str]:
        if m.verdict in ("same", "valid"):
            return "rejected-valid", msg
        return "rejected", msg

    def _accepted(self, m: Mutation, c: Ctx, path: Path, spec: dict, summ: dict,
                  tr) -> tuple[str, str]:
        import fuzz_oracle
        if MULTI:
            # the trace as two tenants sharing a TLB (tags, tenants' chunk counts)
            import uvmsim
            try:
                uvmsim.simulate_multi([tr, tr], oversub=OVERSUB, model="h200",
                                      translation=True)
            except Exception as e:  # noqa: BLE001 - any failure of an accepted trace counts
                return f"exception:{type(e).__name__}", f"multi-tenant replay: {e}"
        if m.verdict == "same":
            want = self.base_summary(spec["base"]) if c.expected == "base" else \
                self.replay({t: tab.to_arrow() for t, tab in c.expected.items()})
            return ("accepted-ok", "replay equals the original") if summ == want else \
                ("oracle-mismatch", f"replay differs: {_diff(summ, want)}")
        if isinstance(c.expected, dict):
            want = self.replay({t: tab.to_arrow() for t, tab in c.expected.items()})
            if summ != want:
                return "oracle-mismatch", f"replay differs: {_diff(summ, want)}"
            if tr.dropped_rows != 1:
                return "oracle-mismatch", f"dropped_rows {tr.dropped_rows}, expected 1"
            return "accepted-ok", "replay equals the trace without the dropped row"
        # valid / either: what pyarrow itself decodes must be a valid trace
        try:
            from uvmsim.trace.io import _spec_columns
            decoded = {}
            for t in TABLES:
                names = pq.ParquetFile(path / FILE[t]).schema_arrow.names
                decoded[t] = pq.read_table(path / FILE[t],
                                           columns=_spec_columns(names, FILE[t]))
        except Exception as e:  # noqa: BLE001
            return "oracle-mismatch", f"reader accepted what pyarrow cannot read: {e}"
        base = self.base_tables(spec["base"])
        if m.verdict == "either" and all(_same_values(decoded[t], base[t], FILE[t])
                                         for t in TABLES):
            want = self.base_summary(spec["base"])
            return ("accepted-ok", "damage outside the decoded values; replay equals the "
                    "original") if summ == want else \
                ("oracle-mismatch", f"replay differs: {_diff(summ, want)}")
        try:
            fuzz_oracle.check(decoded, c.drop)
        except fuzz_oracle.Invalid as e:
            return "accepted-forbidden", f"validator: {e}"
        if summ["faults"] < 0 or summ["faults"] != summ["faults_read"] + summ["faults_write"]:
            return "oracle-mismatch", f"inconsistent counts {summ}"
        return "accepted-ok", "valid per the independent validator; replayed"

    def _cli(self, m: Mutation, c: Ctx, path: Path, spec: dict) -> tuple[str, str]:
        from uvmsim import cli
        out, err = io.StringIO(), io.StringIO()
        argv = ["replay", "--json", "--oversub", str(OVERSUB), "--model", "h200", str(path)]
        if c.drop:
            argv.append("--drop-out-of-range")
        with redirect_stdout(out), redirect_stderr(err):
            try:
                rc = cli.main(argv)
            except SystemExit as e:
                rc = e.code
            except Exception as e:  # noqa: BLE001 - the CLI must not let anything out
                return f"exception:{type(e).__name__}", f"cli raised: {e}"
        lines = err.getvalue().splitlines()
        if rc == 2:
            if len(lines) != 1 or not lines[0].startswith("uvmsim replay: error: "):
                return "unnamed-rejection", f"stderr: {err.getvalue()[:200]!r}"
            if m.verdict in ("same", "valid"):
                return "rejected-valid", lines[0]
            return "rejected", lines[0]
        if rc != 0:
            return f"exception:cli-exit-{rc}", err.getvalue()[-300:]
        if m.verdict == "reject":
            return "accepted-forbidden", "cli replayed it"
        summ = json.loads(out.getvalue())
        if m.verdict == "same" and c.expected == "base":
            want = self.base_summary(spec["base"])
            return ("accepted-ok", "cli replay equals the original") if summ == want else \
                ("oracle-mismatch", f"cli replay differs: {_diff(summ, want)}")
        # other acceptances are checked by the same checks as the API path
        import uvmsim
        return self._accepted(m, c, path, spec, summ,
                              uvmsim.load_trace(path, drop_out_of_range=c.drop))


def _summary(r) -> dict:
    return json.loads(json.dumps(r.summary))


def _diff(a: dict, b: dict) -> str:
    return ", ".join(f"{k}: {a.get(k)} vs {b.get(k)}" for k in sorted(set(a) | set(b))
                     if a.get(k) != b.get(k))[:200]


def _same_values(a: pa.Table, b: pa.Table, file: str) -> bool:
    """Does decoded table a hold exactly base table b's values (cast to the spec)?"""
    from uvmsim.trace.columns import coerce_table
    try:
        return coerce_table(a, file).equals(b)
    except Exception:  # noqa: BLE001 - not even castable: certainly not the same values
        return False


def summarize(results: list[dict]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    return counts
