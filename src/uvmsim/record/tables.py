"""Turning raw passes into the uvmtrace tables (allocations, events, kernels, accesses, and
with uvmtrace v1.2 streams, blocks and block_accesses).

The page pass's lines are read in order; each kind of line (its ``t``) has one handler,
registered in `HANDLERS`, that adds to a `PagePassTables` under construction. Kinds without a
handler (``meta``, ``end``, ...) carry nothing for the tables. A new kind of record is one new
handler here.
"""
from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from .errors import LaunchMismatchError, RecordError
from .join import join_launches, timing_order
from .raw import REC_DTYPE, SBLK_DTYPE, SROW_DTYPE, RawPass

__all__ = ["HANDLERS", "PagePassTables", "build_tables", "timing_launch_attrs"]

_ADVICE_OK = frozenset({"set_preferred_location_gpu", "set_preferred_location_cpu",
                        "set_accessed_by_gpu", "set_read_mostly", "unset_preferred_location_gpu",
                        "unset_preferred_location_cpu", "unset_accessed_by_gpu",
                        "unset_read_mostly"})
_EVENT_COLUMNS = ["seq", "op", "alloc_id", "kernel_id", "addr", "size", "arg", "stream",
                  "t_start_ns", "t_end_ns"]


@dataclass
class _Live:
    """Live allocations, sorted by base, with page-range arrays rebuilt on change."""

    bases: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    _arrays: tuple[np.ndarray, np.ndarray] | None = None

    def find(self, addr: int) -> int:
        i = bisect.bisect_right(self.bases, addr) - 1
        return i if i >= 0 and addr < self.ends[i] else -1

    def overlapping(self, base: int, end: int) -> int:
        i = bisect.bisect_right(self.bases, end - 1) - 1
        return i if i >= 0 and self.ends[i] > base else -1

    def add(self, base: int, end: int, aid: int) -> None:
        i = bisect.bisect_right(self.bases, base)
        self.bases.insert(i, base)
        self.ends.insert(i, end)
        self.ids.insert(i, aid)
        self._arrays = None

    def remove(self, i: int) -> int:
        aid = self.ids[i]
        del self.bases[i], self.ends[i], self.ids[i]
        self._arrays = None
        return aid

    def page_mask(self, pages: np.ndarray) -> np.ndarray:
        """True for pages inside a live allocation."""
        if self._arrays is None:
            first = np.array([b >> 12 for b in self.bases], dtype=np.uint64)
            last = np.array([(e - 1) >> 12 for e in self.ends], dtype=np.uint64)
            self._arrays = (first, last)
        first, last = self._arrays
        if first.size == 0:
            return np.zeros(pages.shape, bool)
        i = np.searchsorted(first, pages, side="right") - 1
        ok = i >= 0
        ok[ok] = pages[ok] <= last[i[ok]]
        return ok


def _empty_tables() -> dict[str, pd.DataFrame]:
    return {
        "allocations": pd.DataFrame({"alloc_id": pd.Series(dtype="uint32"),
                                     "base": pd.Series(dtype="uint64"),
                                     "size": pd.Series(dtype="uint64"),
                                     "kind": pd.Series(dtype="object"),
                                     "name": pd.Series(dtype="object")}),
        "events": pd.DataFrame({c: pd.Series(dtype="object") for c in _EVENT_COLUMNS}),
        "kernels": pd.DataFrame({"kernel_id": pd.Series(dtype="uint32"),
                                 "name": pd.Series(dtype="object"),
                                 "duration_ns": pd.Series(dtype="Int64"),
                                 "grid": pd.Series(dtype="object"),
                                 "block": pd.Series(dtype="object")}),
        "accesses": pd.DataFrame({"kernel_id": pd.Series(dtype="uint32"),
                                  "page": pd.Series(dtype="uint64"),
                                  "flags": pd.Series(dtype="uint8"),
                                  "count": pd.Series(dtype="uint32"),
                                  "order": pd.Series(dtype="uint32")}),
    }


def _events_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    ev = pd.DataFrame(rows, columns=_EVENT_COLUMNS)
    for c in ("alloc_id", "kernel_id", "addr", "size", "stream", "t_start_ns", "t_end_ns"):
        ev[c] = pd.array(ev[c].tolist(), dtype="UInt64" if c in ("addr", "size") else "Int64")
    ev["seq"] = np.arange(len(ev), dtype=np.uint64)
    return ev


def _check_slices(sl: np.ndarray, n_slices: int, kid: int, name: str, path: Path | None) -> None:
    """The page pass promises masks that are non-zero and below its n_slices (1..64)."""
    if not 1 <= n_slices <= 64:
        raise RecordError(f"{path}: kernel {kid} ({name}) has n_slices {n_slices} (not 1..64)")
    if sl.size == 0:
        return
    high = sl >> np.uint64(n_slices) if n_slices < 64 else np.zeros_like(sl)
    bad = (sl == 0) | (high != 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise RecordError(f"{path}: kernel {kid} ({name}) record {i} has slices {int(sl[i]):#x}, "
                          f"not a non-zero mask of its {n_slices} slices")


# --------------------------------------------------------------------------- page pass
@dataclass
class PagePassTables:
    """The tables of one page pass while its lines are read, and the counts for the manifest.

    `recs` are the pass's page records, `kact` the timing records in launch order and `join`
    the timing index of each kernel line (None without a timing pass).
    """

    bin_path: Path | None
    recs: np.ndarray
    kact: list[dict[str, Any]]
    join: list[int] | None
    skipped: Counter
    tattrs: list[dict[str, int]] = field(default_factory=list)  # timing_launch_attrs(kact)
    live: _Live = field(default_factory=_Live)
    allocs: list[tuple[int, int, int, str, str | None]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    kernels: list[dict[str, Any]] = field(default_factory=list)
    # rows gathered as columns of numpy arrays, one part per kernel, made frames once at the
    # end (a frame per kernel cost milliseconds each, and programs launch thousands)
    acc_parts: list[dict[str, np.ndarray]] = field(default_factory=list)
    kernel_lines: int = 0          # kernel lines read so far: the index into `join`
    out_of_range: int = 0
    out_of_range_kernels: list[str] = field(default_factory=list)
    kernel_errors: list[str] = field(default_factory=list)
    dropped_accesses: int = 0
    unknown_pages: int = 0
    # kernels that touched no global page (or whose accesses the patch cannot see, e.g. TMA
    # tensor copies)
    no_pages: Counter = field(default_factory=Counter)
    merged_nodes: int = 0
    with_slices: int = 0           # kernels whose line gives n_slices (page pass with slices)
    host_pages: int = 0
    # uvmtrace v1.2: launch attributes and per-thread-block streams
    streams_path: Path | None = None
    srecs: np.ndarray | None = None        # the streams file, as 16-byte records
    last_acc: dict[str, np.ndarray] | None = None  # the access rows of the last kernel line
    with_attrs: int = 0                    # kernel lines with launch attributes
    attr_mismatches: list[str] = field(default_factory=list)
    stream_lines: int = 0
    stream_rows_outside: int = 0           # stream rows dropped with their pages
    stream_status: Counter = field(default_factory=Counter)
    sb_parts: list[dict[str, np.ndarray]] = field(default_factory=list)
    sa_parts: list[dict[str, np.ndarray]] = field(default_factory=list)

    def finish(self, tables: dict[str, pd.DataFrame], stats: dict[str, Any]) -> None:
        """Write the gathered rows into `tables` and the counts into `stats`."""
        if self.allocs:
            a = np.array([x[:3] for x in self.allocs], dtype=np.uint64)
            tables["allocations"] = pd.DataFrame({
                "alloc_id": a[:, 0].astype(np.uint32), "base": a[:, 1], "size": a[:, 2],
                "kind": [x[3] for x in self.allocs], "name": [x[4] for x in self.allocs]})
        if self.events:
            tables["events"] = _events_frame(self.events)
        slices = self.with_slices > 0
        if self.with_slices and self.with_slices != len(self.kernels):
            raise RecordError(f"{self.bin_path}: {len(self.kernels) - self.with_slices} of "
                              f"{len(self.kernels)} kernel lines give no n_slices (raw files of "
                              "two collector versions?)")
        if self.kernels:
            k = pd.DataFrame(self.kernels)
            k["kernel_id"] = k["kernel_id"].astype(np.uint32)
            k["duration_ns"] = pd.array(k["duration_ns"].tolist(), dtype="Int64")
            tables["kernels"] = k
        if self.acc_parts:
            tables["accesses"] = _frame(self.acc_parts)
        _finish_v12(self, tables)
        if slices:  # uvmtrace v1.1 time slices (docs/trace-format.md)
            k = tables["kernels"]
            k["n_slices"] = pd.array(k["n_slices"].tolist(), dtype="UInt8")
            k["slice_ns"] = pd.array(k["slice_ns"].tolist(), dtype="Int64")
            if "slices" not in tables["accesses"]:
                tables["accesses"]["slices"] = pd.Series(dtype="uint64")
        else:
            tables["kernels"] = tables["kernels"].drop(columns=["n_slices", "slice_ns"],
                                                       errors="ignore")
            tables["accesses"] = tables["accesses"].drop(columns=["slices"], errors="ignore")
        stats.update({
            "kernels": len(self.kernels), "allocations": len(self.allocs),
            "events": len(self.events),
            "access_rows": int(sum(p["kernel_id"].size for p in self.acc_parts)),
            "dropped_accesses_device": self.dropped_accesses,
            "pages_outside_allocations_device": self.unknown_pages,
            "access_rows_dropped_outside_live_allocations": self.out_of_range,
            "kernels_with_dropped_rows": self.out_of_range_kernels,
            "errors": self.kernel_errors[:50],
            "kernels_without_pages": int(sum(self.no_pages.values())),
            "kernels_without_pages_by_name": dict(self.no_pages.most_common(20)),
            "graph_kernels_with_merged_pages": self.merged_nodes,
            "slices": slices,
            "host_access_events": sum(1 for e in self.events if e["op"] == "host_access"),
            "host_access_pages": self.host_pages,
            "launch_attributes": self.with_attrs,
            "launch_attribute_mismatches": len(self.attr_mismatches),
            "launch_attribute_mismatch_examples": self.attr_mismatches[:10],
            "streams": {"kernels": self.stream_lines,
                        "with_stream": sum(1 for k in self.kernels
                                           if k.get("stream_unit") is not None),
                        "blocks": int(sum(x["kernel_id"].size for x in self.sb_parts)),
                        "rows": int(sum(x["kernel_id"].size for x in self.sa_parts)),
                        "rows_dropped_outside_live_allocations": self.stream_rows_outside,
                        "without_stream_by_reason": dict(self.stream_status)},
        })
        stats["skipped"] = dict(self.skipped)


_Handler = Callable[[PagePassTables, dict[str, Any]], None]
#: the handler of each kind of page-pass line (its ``t``)
HANDLERS: dict[str, _Handler] = {}


def _handles(kind: str) -> Callable[[_Handler], _Handler]:
    def register(fn: _Handler) -> _Handler:
        if kind in HANDLERS:
            raise ValueError(f"page-pass line kind {kind!r} has two handlers")
        HANDLERS[kind] = fn
        return fn
    return register


@_handles("alloc")
def _alloc(b: PagePassTables, r: dict[str, Any]) -> None:
    base, size = int(r["base"]), int(r["size"])
    if size <= 0:
        b.skipped["alloc of size 0"] += 1
        return
    if b.live.overlapping(base, base + size) >= 0:
        # e.g. a suballocation reported inside a range already tracked: its pages are covered
        # by the outer allocation
        b.skipped["alloc overlapping a live allocation"] += 1
        return
    aid = len(b.allocs)
    b.allocs.append((aid, base, size, r.get("kind", "device"), r.get("name") or None))
    b.live.add(base, base + size, aid)
    b.events.append({"op": "alloc", "alloc_id": aid})


@_handles("free")
def _free(b: PagePassTables, r: dict[str, Any]) -> None:
    i = b.live.find(int(r["base"]))
    if i < 0 or b.live.bases[i] != int(r["base"]):
        b.skipped["free of an untracked address"] += 1
        return
    b.events.append({"op": "free", "alloc_id": b.live.remove(i)})


@_handles("kernel")
def _kernel(b: PagePassTables, r: dict[str, Any]) -> None:
    kid = len(b.kernels)
    j = b.join[b.kernel_lines] if b.join is not None else -1
    b.kernel_lines += 1
    tr = b.kact[j] if j >= 0 else None
    b.kernels.append({"kernel_id": kid, "name": r["name"],
                      "duration_ns": (tr["end"] - tr["start"]) if tr else None,
                      "grid": r.get("grid"), "block": r.get("block"),
                      "n_slices": r.get("n_slices"), "slice_ns": r.get("slice_ns"),
                      **_launch_attrs(b, r, j, kid)})
    b.last_acc = None
    if r.get("n_slices") is not None:
        b.with_slices += 1
    b.events.append({"op": "kernel", "kernel_id": kid, "stream": r.get("stream"),
                     "t_start_ns": tr["start"] if tr else None,
                     "t_end_ns": tr["end"] if tr else None})
    if r.get("error"):
        b.kernel_errors.append(f"kernel {kid} {r['name']}: {r['error']}")
    if int(r.get("merged", 1)) > 1:
        b.merged_nodes += 1
    if int(r.get("n", 0)) == 0 and not r.get("error"):
        b.no_pages[r["name"]] += 1
    b.dropped_accesses += int(r.get("dropped", 0))
    b.unknown_pages += int(r.get("unknown", 0))
    if int(r.get("n", 0)):
        _kernel_pages(b, r, kid)


def _kernel_pages(b: PagePassTables, r: dict[str, Any], kid: int) -> None:
    """The access rows of kernel `kid`: its records in the .bin file, inside live allocations."""
    n, off = int(r.get("n", 0)), int(r.get("off", 0))
    start = off // REC_DTYPE.itemsize
    if off % REC_DTYPE.itemsize or start + n > b.recs.shape[0]:
        raise RecordError(f"{b.bin_path}: kernel {kid} ({r['name']}) names records "
                          f"[{start}, {start + n}) beyond the file's {b.recs.shape[0]}")
    block = np.asarray(b.recs[start:start + n])
    page = block["page"].astype(np.uint64)
    ok = b.live.page_mask(page)
    bad = int((~ok).sum())
    if bad:
        b.out_of_range += bad
        if len(b.out_of_range_kernels) < 20:
            b.out_of_range_kernels.append(f"kernel {kid} {r['name']}: {bad} pages")
    order = np.arange(n, dtype=np.uint32)
    flags = (block["flags"] & 7).astype(np.uint8)
    sl = block["slices"].astype(np.uint64)
    if r.get("n_slices") is not None:
        _check_slices(sl, int(r["n_slices"]), kid, r["name"], b.bin_path)
    b.acc_parts.append({
        "kernel_id": np.full(int(ok.sum()), kid, np.uint32), "page": page[ok],
        "flags": flags[ok], "count": block["count"][ok].astype(np.uint32),
        # ranks stay dense after dropping rows: order within the kept pages
        "order": np.arange(int(ok.sum()), dtype=np.uint32) if bad else order,
        "slices": sl[ok]})
    b.last_acc = b.acc_parts[-1]


@_handles("memcpy")
def _memcpy(b: PagePassTables, r: dict[str, Any]) -> None:
    d = r.get("dir")
    src, dst = int(r["src"]), int(r["dst"])
    if d == "unknown":
        ds, ss = b.live.find(dst) >= 0, b.live.find(src) >= 0
        d = "dtod" if ds and ss else "htod" if ds else "dtoh" if ss else "htoh"
    if d == "htoh":
        b.skipped["host-to-host copy"] += 1
        return
    b.events.append({"op": f"memcpy_{d}", "addr": src if d == "dtoh" else dst,
                     "size": int(r["size"]), "stream": r.get("stream")})


@_handles("memset")
def _memset(b: PagePassTables, r: dict[str, Any]) -> None:
    b.events.append({"op": "memset", "addr": int(r["addr"]), "size": int(r["size"]),
                     "stream": r.get("stream")})


@_handles("prefetch")
def _prefetch(b: PagePassTables, r: dict[str, Any]) -> None:
    if int(r.get("rc", 0)) != 0:
        b.skipped["failed prefetch call"] += 1
        return
    b.events.append({"op": "prefetch", "addr": int(r["addr"]), "size": int(r["size"]),
                     "arg": r["dst"], "stream": r.get("stream")})


@_handles("advise")
def _advise(b: PagePassTables, r: dict[str, Any]) -> None:
    if int(r.get("rc", 0)) != 0:
        b.skipped["failed advise call"] += 1
        return
    if r["advice"] not in _ADVICE_OK:
        b.skipped[f"advice {r['advice']} (not in uvmtrace v1)"] += 1
        return
    b.events.append({"op": "advise", "addr": int(r["addr"]), "size": int(r["size"]),
                     "arg": r["advice"]})


@_handles("sync")
def _sync(b: PagePassTables, r: dict[str, Any]) -> None:
    b.events.append({"op": "sync", "stream": r.get("stream")})


@_handles("host_access")
def _host_access(b: PagePassTables, r: dict[str, Any]) -> None:
    addr, size = int(r["addr"]), int(r["size"])
    i = b.live.find(addr)
    if size <= 0 or i < 0:
        b.skipped["host access outside live allocations"] += 1
        return
    size = min(addr + size, b.live.ends[i]) - addr
    b.host_pages += (((addr + size - 1) >> 12) - (addr >> 12)) + 1
    b.events.append({"op": "host_access", "addr": addr, "size": size, "arg": None})


@_handles("host_scan_error")
def _host_scan_error(b: PagePassTables, r: dict[str, Any]) -> None:
    b.kernel_errors.append(f"host accesses: {r.get('error')}")


# --------------------------------------------------------------------------- v1.2
#: kernel line field -> kernels.parquet column (docs/trace-format.md, v1.2)
_ATTRS = {"n_blocks": "n_blocks", "threads": "threads_per_block", "cluster": "cluster_blocks",
          "regs": "regs_per_thread", "smem_static": "smem_static_bytes",
          "smem_dyn": "smem_dynamic_bytes", "sm_count": "sm_count",
          "occupancy": "max_blocks_per_sm"}
#: launch attributes the timing pass measures on the uninstrumented launch: shared memory from
#: CUPTI's kernel record; registers (the function's, cuFuncGetAttribute) and occupancy from its
#: launch-call callback, so a graph node (no launch call) lacks them
_TIMING_ATTRS = ("regs", "smem_static", "smem_dyn", "occupancy")


def timing_launch_attrs(kact: list[dict[str, Any]]) -> list[dict[str, int]]:
    """The launch attributes of each timing record (`_TIMING_ATTRS` it has). A record without
    registers or occupancy (a graph node) takes them from another record of the same function
    (mangled name): its registers from any, its occupancy from one of the same block size and
    dynamic shared memory. CUPTI's own ``regs_cupti`` is never used: it is not the function's
    register count (docs/collector.md)."""
    regs: dict[str, int] = {}
    occ: dict[tuple[Any, ...], int] = {}

    def fn(r: dict[str, Any]) -> str:
        return str(r.get("mangled") or r.get("name"))

    for r in kact:
        if r.get("regs") is not None:
            regs.setdefault(fn(r), int(r["regs"]))
        if r.get("occupancy") is not None:
            occ.setdefault((fn(r), r.get("block"), r.get("smem_dyn")), int(r["occupancy"]))
    out = []
    for r in kact:
        a = {f: int(r[f]) for f in _TIMING_ATTRS if r.get(f) is not None}
        if "regs" not in a and fn(r) in regs:
            a["regs"] = regs[fn(r)]
        key = (fn(r), r.get("block"), r.get("smem_dyn"))
        if "occupancy" not in a and key in occ:
            a["occupancy"] = occ[key]
        out.append(a)
    return out


def _launch_attrs(b: PagePassTables, r: dict[str, Any], j: int, kid: int) -> dict[str, Any]:
    """The launch columns of a kernel line (`j`: its timing record, -1 for none). What the
    timing pass measured on the uninstrumented launch (`timing_launch_attrs`) replaces the page
    pass's (cuFuncGetAttribute and the occupancy calculator on the instrumented function), and
    any difference is reported."""
    if "n_blocks" not in r:
        return {}
    b.with_attrs += 1
    out = {col: r.get(f) for f, col in _ATTRS.items()}
    if j < 0:
        return out
    tr = b.tattrs[j]
    diff = [f"{f} {r.get(f)} (page pass) vs {v} (timing pass)" for f, v in tr.items()
            if r.get(f) is not None and int(r[f]) != v]
    if diff:
        b.attr_mismatches.append(f"kernel {kid} {r['name']}: " + ", ".join(diff))
    for f, v in tr.items():
        out[_ATTRS[f]] = v
    return out


@_handles("stream")
def _stream(b: PagePassTables, r: dict[str, Any]) -> None:
    """The per-thread-block stream of the kernel line just before (its records in the streams
    file). A stream that is missing, or that breaks a rule of the format once the kernel's
    pages outside live allocations are dropped, leaves the kernel without one (counted)."""
    if not b.kernels:
        return
    b.stream_lines += 1
    k = b.kernels[-1]
    status = r.get("status", "missing")
    if status != "ok":
        b.stream_status[status] += 1
        return
    unit, tick = int(r["unit"]), int(r["tick_ns"])
    n_blocks = k.get("n_blocks")
    blocks, rows = _stream_records(b, r, k)
    if n_blocks is None or not 12 <= unit <= 30 or not 1 <= tick <= 1 << 31:
        b.stream_status["bad_line"] += 1
        return
    acc = b.last_acc
    acc_page = acc["page"] if acc is not None else np.zeros(0, np.uint64)
    acc_flags = acc["flags"] if acc is not None else np.zeros(0, np.uint8)
    # rows on pages the trace drops (outside live allocations) go too, and blocks left empty
    keep = b.live.page_mask(rows["page"])
    if not keep.all():
        rows = {c: v[keep] for c, v in rows.items()}
        kb = np.isin(blocks["block"], rows["block"])
        blocks = {c: v[kb] for c, v in blocks.items()}
        b.stream_rows_outside += int((~keep).sum())
    from ..trace.streams import check_kernel_stream
    broken = check_kernel_stream(unit, int(n_blocks), blocks, rows, acc_page, acc_flags)
    if broken is not None:
        b.stream_status[f"breaks {broken}"] += 1
        return
    k["stream_unit"], k["stream_tick_ns"] = unit, tick
    kid = np.uint32(k["kernel_id"])
    b.sb_parts.append({"kernel_id": np.full(blocks["block"].size, kid, np.uint32), **blocks})
    b.sa_parts.append({"kernel_id": np.full(rows["block"].size, kid, np.uint32), **rows})


def _stream_records(b: PagePassTables, r: dict[str, Any], k: dict[str, Any]
                    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A stream line's block and row records, as columns (rows carry their block)."""
    if b.srecs is None:
        b.srecs = np.empty(0, np.uint8)
        if b.streams_path is not None and b.streams_path.stat().st_size:
            b.srecs = np.memmap(b.streams_path, dtype=np.uint8, mode="r")
    out = []
    for off, n, dt in ((int(r["b_off"]), int(r["b_n"]), SBLK_DTYPE),
                       (int(r["r_off"]), int(r["r_n"]), SROW_DTYPE)):
        if off < 0 or n < 0 or off % dt.itemsize or off + n * dt.itemsize > b.srecs.size:
            raise RecordError(f"{b.streams_path}: the stream of kernel {k['kernel_id']} "
                              f"({k['name']}) names bytes [{off}, {off + n * dt.itemsize}) "
                              f"beyond the file's {b.srecs.size}")
        out.append(np.frombuffer(b.srecs[off:off + n * dt.itemsize], dtype=dt))
    blk, row = out
    if int(blk["n_rows"].sum(dtype=np.uint64)) != row.size:
        raise RecordError(f"{b.streams_path}: the stream of kernel {k['kernel_id']} "
                          f"({k['name']}) counts {int(blk['n_rows'].sum(dtype=np.uint64))} "
                          f"rows in its blocks but has {row.size}")
    blocks = {"block": blk["block"].copy(), "t_start": blk["t_start"].copy(),
              "t_end": blk["t_end"].copy()}
    rows = {"block": np.repeat(blk["block"], blk["n_rows"]), "page": row["page"].copy(),
            "t": row["t"].copy(), "flags": row["flags"].astype(np.uint8)}
    if (row["flags"] > 255).any():
        rows["flags"][:] = 0  # out of range: the rule check refuses it
    return blocks, rows


def _frame(parts: list[dict[str, np.ndarray]], like: pd.DataFrame | None = None) -> pd.DataFrame:
    """One frame of the parts' columns (each part has every column), typed as `like`."""
    cols = list(like.columns) if like is not None else list(parts[0])
    df = pd.DataFrame({c: np.concatenate([p[c] for p in parts]) if parts else np.zeros(0)
                       for c in cols})
    return df.astype(like.dtypes.to_dict()) if like is not None else df


def _finish_v12(b: PagePassTables, tables: dict[str, pd.DataFrame]) -> None:
    """The launch columns (when the page pass gave them) and the stream tables."""
    k = tables["kernels"]
    if b.with_attrs and len(k):
        for col in list(_ATTRS.values()):
            if col not in k:
                k[col] = None
            k[col] = pd.array(k[col].tolist(), dtype="Int64")
    else:
        tables["kernels"] = k.drop(columns=list(_ATTRS.values()), errors="ignore")
    k = tables["kernels"]
    if b.stream_lines:
        for col in ("stream_unit", "stream_tick_ns"):
            k[col] = pd.array(k[col].tolist() if col in k else [None] * len(k), dtype="Int64")
        from ..trace.streams import empty_tables
        e = empty_tables()
        tables["blocks"] = _frame(b.sb_parts, e["blocks"])
        tables["block_accesses"] = _frame(b.sa_parts, e["block_accesses"])
    else:
        tables["kernels"] = k.drop(columns=["stream_unit", "stream_tick_ns"], errors="ignore")


@_handles("module_error")
def _module_error(b: PagePassTables, r: dict[str, Any]) -> None:
    b.kernel_errors.append(f"module patching: {r.get('errors')}")


# --------------------------------------------------------------------------- entry
def _timing_only(kact: list[dict[str, Any]], tables: dict[str, pd.DataFrame]) -> None:
    tables["kernels"] = pd.DataFrame({
        "kernel_id": np.arange(len(kact), dtype=np.uint32),
        "name": [r["name"] for r in kact],
        "duration_ns": pd.array([r["end"] - r["start"] for r in kact], dtype="Int64"),
        "grid": [r["grid"] for r in kact], "block": [r["block"] for r in kact]})
    tables["events"] = _events_frame([
        {"op": "kernel", "kernel_id": i, "t_start_ns": r["start"], "t_end_ns": r["end"]}
        for i, r in enumerate(kact)])


def build_tables(pages: RawPass | None, timing: RawPass | None = None, *,
                 strict: bool = False) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """Turn raw passes into the four uvmtrace tables and a stats dict for the manifest.

    With a page pass, it defines the program (events, allocations, pages) and the timing pass
    only adds durations, joined by `join_launches`. A mismatch raises when `strict`, else the
    durations are left null and the mismatch is described in ``stats['join']``. With only a
    timing pass, the trace holds the kernels and their durations, nothing else.
    """
    stats: dict[str, Any] = {"skipped": Counter()}
    tables = _empty_tables()
    kact = timing_order(timing.of("kact")) if timing is not None else []

    if pages is None:
        if timing is None:
            stats["join"] = {"status": "no pass produced output"}
            return tables, stats
        _timing_only(kact, tables)
        stats["join"] = {"status": "timing pass only: kernels and durations, no allocations "
                                   "or pages"}
        return tables, stats

    klines = pages.of("kernel")
    join: list[int] | None = None
    if timing is not None:
        try:
            join = join_launches(klines, kact)
            stats["join"] = {"status": "ok", "kernels": len(klines)}
        except LaunchMismatchError as e:
            if strict:
                raise
            stats["join"] = e.as_dict()
    else:
        stats["join"] = {"status": "page pass only: no durations"}

    for meta in pages.of("meta"):
        if meta.get("rec_bytes", REC_DTYPE.itemsize) != REC_DTYPE.itemsize:
            raise RecordError(f"{pages.bin_path}: records of {meta['rec_bytes']} bytes, this "
                              f"reader expects {REC_DTYPE.itemsize} (library and uvmsim of "
                              "different versions? rebuild native_trace)")
    recs = np.empty(0, REC_DTYPE)
    if pages.bin_path is not None and pages.bin_path.stat().st_size:
        recs = np.memmap(pages.bin_path, dtype=REC_DTYPE, mode="r")

    b = PagePassTables(pages.bin_path, recs, kact, join, stats["skipped"],
                       tattrs=timing_launch_attrs(kact), streams_path=pages.streams_path)
    for r in pages.lines:
        handler = HANDLERS.get(r.get("t"))  # type: ignore[arg-type]
        if handler is not None:
            handler(b, r)
    b.finish(tables, stats)
    stats["warnings"] = _page_pass_warnings(pages.end, b)
    return tables, stats


def _page_pass_warnings(end: dict[str, Any], b: PagePassTables) -> list[str]:
    """What the page pass's end line says went wrong for the whole run (printed by `record`
    and kept in the manifest)."""
    out = []
    if end.get("modules") == 0 and b.kernels:
        out.append(f"the page pass patched no module, so its {len(b.kernels)} kernels recorded "
                   f"no page ({sum(b.no_pages.values())} have none): was a module loaded while "
                   "the collector itself called into CUDA? (docs/collector.md, lazy loading)")
    return out
