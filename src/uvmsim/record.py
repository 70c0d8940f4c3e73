"""`uvmsim record`: run a CUDA program under the native collector and write a uvmtrace v1.1.

    uvmsim record -o OUT.uvmtrace [--pass pages|timing|both] -- CMD ARGS...

The collector (native_trace/, libuvmtrace.so) is injected with CUDA_INJECTION64_PATH and runs
in one of two passes, because CUPTI and the Compute Sanitizer API cannot share a process:

* pages  - Compute Sanitizer patches every global memory access; per kernel, the 4 KiB pages it
           read / wrote / touched atomically, with counts, first-touch order and the time
           slices of the kernel's run in which each was touched; plus allocations, frees,
           copies, memsets, prefetches, advice, synchronizations and the ranges of managed
           memory the CPU touched between GPU operations (host accesses).
* timing - CUPTI activity records: every kernel's uninstrumented duration.

This module runs the passes, reads their raw files (``<pass>.<pid>.jsonl`` lines and, for the
page pass, ``pages.<pid>.bin`` records of ``REC_DTYPE``), joins them by launch order (a launch
sequence that differs between the passes raises `LaunchMismatchError`; it is never joined
silently) and writes the trace with `uvmsim.trace.write_trace`. See docs/collector.md.
"""
from __future__ import annotations

import argparse
import bisect
import datetime as _dt
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from .errors import UserError, parse_env, run_command

__all__ = ["REC_DTYPE", "LaunchMismatchError", "RawPass", "RecordError", "build_tables",
           "configure_parser", "find_library", "join_launches", "read_raw_pass", "record",
           "run_from_args"]

COLLECTOR_VERSION = "0.1.0"
REPO_ROOT = Path(__file__).resolve().parents[1]
NATIVE_DIR = REPO_ROOT / "native_trace"
DEFAULT_BUILD_DIR = NATIVE_DIR / "build"
LIB_NAME = "libuvmtrace.so"

#: one touched page of one kernel, as the page pass writes it (native_trace/src/uvmt_layout.h);
#: `slices` is the mask of time slices, already folded to the kernel's width
REC_DTYPE = np.dtype([("page", "<u8"), ("count", "<u4"), ("flags", "<u4"), ("slices", "<u8")])

_ADVICE_OK = frozenset({"set_preferred_location_gpu", "set_preferred_location_cpu",
                        "set_accessed_by_gpu", "set_read_mostly", "unset_preferred_location_gpu",
                        "unset_preferred_location_cpu", "unset_accessed_by_gpu",
                        "unset_read_mostly"})
_EVENT_COLUMNS = ["seq", "op", "alloc_id", "kernel_id", "addr", "size", "arg", "stream",
                  "t_start_ns", "t_end_ns"]


class RecordError(UserError, RuntimeError):
    """The recording could not be made (missing library, unreadable raw files, ...)."""


class LaunchMismatchError(RecordError):
    """The page pass and the timing pass saw different kernel launch sequences."""

    def __init__(self, message: str, *, index: int, pages_side: str | None,
                 timing_side: str | None, n_pages: int, n_timing: int) -> None:
        super().__init__(message)
        self.index = index
        self.pages_side = pages_side
        self.timing_side = timing_side
        self.n_pages = n_pages
        self.n_timing = n_timing

    def as_dict(self) -> dict[str, Any]:
        return {"status": "mismatch", "message": str(self), "first_difference": self.index,
                "pages_side": self.pages_side, "timing_side": self.timing_side,
                "kernels_pages_pass": self.n_pages, "kernels_timing_pass": self.n_timing}


# --------------------------------------------------------------------------- raw files
@dataclass
class RawPass:
    """The raw output of one pass of one process."""

    pass_name: str
    pid: int
    lines: list[dict[str, Any]]
    bin_path: Path | None = None
    bad_lines: int = 0  # lines that were not JSON (a crash can cut the last one short)

    @property
    def complete(self) -> bool:
        """True when the process reached its exit handler (an ``end`` line exists)."""
        return any(r.get("t") == "end" for r in self.lines)

    @property
    def end(self) -> dict[str, Any]:
        for r in reversed(self.lines):
            if r.get("t") == "end":
                return r
        return {}

    def of(self, t: str) -> list[dict[str, Any]]:
        return [r for r in self.lines if r.get("t") == t]


def read_raw_pass(raw_dir: str | os.PathLike, pass_name: str) -> list[RawPass]:
    """Read every ``<pass_name>.<pid>.jsonl`` under `raw_dir` (one per traced CUDA process)."""
    d = Path(raw_dir)
    out = []
    for p in sorted(d.glob(f"{pass_name}.*.jsonl")):
        m = re.fullmatch(rf"{re.escape(pass_name)}\.(\d+)\.jsonl", p.name)
        if not m:
            continue
        lines, bad = [], 0
        with open(p, "r", encoding="utf-8", errors="replace") as f:
            for ln in f:
                ln = ln.strip()
                if not ln:
                    continue
                try:
                    lines.append(json.loads(ln))
                except json.JSONDecodeError:
                    bad += 1
        b = p.with_suffix(".bin")
        out.append(RawPass(pass_name, int(m.group(1)), lines, b if b.exists() else None, bad))
    return out


def _pick_process(passes: list[RawPass], notes: list[str]) -> RawPass | None:
    """The process that launched the most kernels; the others are reported, not merged."""
    if not passes:
        return None

    def n_kernels(rp: RawPass) -> int:
        return sum(1 for r in rp.lines if r.get("t") in ("kernel", "kact"))

    best = max(passes, key=n_kernels)
    others = [rp for rp in passes if rp is not best and n_kernels(rp) > 0]
    if others:
        notes.append(f"{best.pass_name} pass: {len(passes)} CUDA processes; kept pid {best.pid} "
                     f"({n_kernels(best)} kernels), ignored "
                     + ", ".join(f"pid {o.pid} ({n_kernels(o)} kernels)" for o in others))
    return best


# --------------------------------------------------------------------------- join
def _groups(kernels: Sequence[dict[str, Any]], key: str) -> list[list[int]]:
    """Launch groups: one per ordinary launch, one per graph launch (its nodes may run in any
    order, so they are matched as a multiset)."""
    groups: list[list[int]] = []
    last = None
    for i, k in enumerate(kernels):
        g = k.get(key)
        if g is not None and g == last:
            groups[-1].append(i)
        else:
            groups.append([i])
        last = g
    return groups


def _sig(k: dict[str, Any]) -> str:
    return f"{k.get('name')} grid={k.get('grid')} block={k.get('block')}"


def timing_order(kact: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kernel activity records in launch order: by correlation id (one per API call), then
    start time within a graph launch (whose nodes share one correlation id)."""
    return sorted(kact, key=lambda r: (r.get("corr", 0), r.get("start", 0), r.get("graph_node", 0)))


def join_launches(pages: Sequence[dict[str, Any]], timing: Sequence[dict[str, Any]]) -> list[int]:
    """Match each page-pass kernel to its timing-pass record; returns timing indices.

    `pages` are the page pass's kernel lines in order (``graph_launch`` set for graph nodes);
    `timing` are timing records in `timing_order` (``graph`` non-zero for graph nodes, which
    share ``corr``). Kernels match on demangled name, grid and block. Raises
    `LaunchMismatchError` at the first difference.
    """
    pg = _groups(pages, "graph_launch")
    tkey = [dict(r, _g=(r.get("corr") if r.get("graph") else None)) for r in timing]
    tg = _groups(tkey, "_g")
    n_p, n_t = len(pages), len(timing)

    def fail(idx: int, msg: str, p: str | None, t: str | None) -> LaunchMismatchError:
        return LaunchMismatchError(
            f"launch sequences differ between the passes at kernel {idx}: {msg} "
            f"(page pass: {p!r}; timing pass: {t!r}; {n_p} vs {n_t} kernels)",
            index=idx, pages_side=p, timing_side=t, n_pages=n_p, n_timing=n_t)

    out = [-1] * n_p
    for gi in range(max(len(pg), len(tg))):
        if gi >= len(pg) or gi >= len(tg):
            idx = pg[gi][0] if gi < len(pg) else n_p
            p = _sig(pages[pg[gi][0]]) if gi < len(pg) else None
            t = _sig(timing[tg[gi][0]]) if gi < len(tg) else None
            raise fail(idx, "one pass has more launches", p, t)
        a, b = pg[gi], tg[gi]
        if len(a) == 1 and len(b) == 1:
            if _sig(pages[a[0]]) != _sig(timing[b[0]]):
                raise fail(a[0], "different kernels", _sig(pages[a[0]]), _sig(timing[b[0]]))
            out[a[0]] = b[0]
            continue
        sa = Counter(_sig(pages[i]) for i in a)
        sb = Counter(_sig(timing[i]) for i in b)
        if sa != sb:
            diff = (sa - sb) or (sb - sa)
            raise fail(a[0], f"graph launch with different kernel nodes ({dict(diff)})",
                       _sig(pages[a[0]]), _sig(timing[b[0]]))
        queues: dict[str, list[int]] = defaultdict(list)
        for i in b:
            queues[_sig(timing[i])].append(i)
        for i in a:
            out[i] = queues[_sig(pages[i])].pop(0)
    return out


# --------------------------------------------------------------------------- tables
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
        k = pd.DataFrame({
            "kernel_id": np.arange(len(kact), dtype=np.uint32),
            "name": [r["name"] for r in kact],
            "duration_ns": pd.array([r["end"] - r["start"] for r in kact], dtype="Int64"),
            "grid": [r["grid"] for r in kact], "block": [r["block"] for r in kact]})
        tables["kernels"] = k
        tables["events"] = _events_frame([
            {"op": "kernel", "kernel_id": i, "t_start_ns": r["start"], "t_end_ns": r["end"]}
            for i, r in enumerate(kact)])
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

    live = _Live()
    allocs: list[tuple[int, int, int, str, str | None]] = []
    events: list[dict[str, Any]] = []
    kernels: list[dict[str, Any]] = []
    acc_parts: list[pd.DataFrame] = []
    out_of_range = 0
    out_of_range_kernels: list[str] = []
    kernel_errors: list[str] = []
    dropped_accesses = 0
    unknown_pages = 0
    skipped: Counter = stats["skipped"]
    no_pages: Counter = Counter()  # kernels that touched no global page (or whose accesses
    merged_nodes = 0               # the patch cannot see, e.g. TMA tensor copies)
    with_slices = 0                # kernels whose line gives n_slices (page pass with slices)
    host_pages = 0
    ki = 0
    for r in pages.lines:
        t = r.get("t")
        if t == "alloc":
            base, size = int(r["base"]), int(r["size"])
            if size <= 0:
                skipped["alloc of size 0"] += 1
                continue
            if live.overlapping(base, base + size) >= 0:
                # e.g. a suballocation reported inside a range already tracked: its pages
                # are covered by the outer allocation
                skipped["alloc overlapping a live allocation"] += 1
                continue
            aid = len(allocs)
            allocs.append((aid, base, size, r.get("kind", "device"), r.get("name") or None))
            live.add(base, base + size, aid)
            events.append({"op": "alloc", "alloc_id": aid})
        elif t == "free":
            i = live.find(int(r["base"]))
            if i < 0 or live.bases[i] != int(r["base"]):
                skipped["free of an untracked address"] += 1
                continue
            events.append({"op": "free", "alloc_id": live.remove(i)})
        elif t == "kernel":
            kid = len(kernels)
            j = join[ki] if join is not None else -1
            ki += 1
            tr = kact[j] if j >= 0 else None
            kernels.append({"kernel_id": kid, "name": r["name"],
                            "duration_ns": (tr["end"] - tr["start"]) if tr else None,
                            "grid": r.get("grid"), "block": r.get("block"),
                            "n_slices": r.get("n_slices"), "slice_ns": r.get("slice_ns")})
            if r.get("n_slices") is not None:
                with_slices += 1
            events.append({"op": "kernel", "kernel_id": kid, "stream": r.get("stream"),
                           "t_start_ns": tr["start"] if tr else None,
                           "t_end_ns": tr["end"] if tr else None})
            if r.get("error"):
                kernel_errors.append(f"kernel {kid} {r['name']}: {r['error']}")
            if int(r.get("merged", 1)) > 1:
                merged_nodes += 1
            if int(r.get("n", 0)) == 0 and not r.get("error"):
                no_pages[r["name"]] += 1
            dropped_accesses += int(r.get("dropped", 0))
            unknown_pages += int(r.get("unknown", 0))
            n, off = int(r.get("n", 0)), int(r.get("off", 0))
            if n == 0:
                continue
            start = off // REC_DTYPE.itemsize
            if off % REC_DTYPE.itemsize or start + n > recs.shape[0]:
                raise RecordError(f"{pages.bin_path}: kernel {kid} ({r['name']}) names records "
                                  f"[{start}, {start + n}) beyond the file's {recs.shape[0]}")
            block = np.asarray(recs[start:start + n])
            page = block["page"].astype(np.uint64)
            ok = live.page_mask(page)
            bad = int((~ok).sum())
            if bad:
                out_of_range += bad
                if len(out_of_range_kernels) < 20:
                    out_of_range_kernels.append(f"kernel {kid} {r['name']}: {bad} pages")
            order = np.arange(n, dtype=np.uint32)
            flags = (block["flags"] & 7).astype(np.uint8)
            sl = block["slices"].astype(np.uint64)
            if r.get("n_slices") is not None:
                _check_slices(sl, int(r["n_slices"]), kid, r["name"], pages.bin_path)
            acc_parts.append(pd.DataFrame({
                "kernel_id": np.full(int(ok.sum()), kid, np.uint32), "page": page[ok],
                "flags": flags[ok], "count": block["count"][ok].astype(np.uint32),
                # ranks stay dense after dropping rows: order within the kept pages
                "order": np.arange(int(ok.sum()), dtype=np.uint32) if bad else order,
                "slices": sl[ok]}))
        elif t == "memcpy":
            d = r.get("dir")
            src, dst = int(r["src"]), int(r["dst"])
            if d == "unknown":
                ds, ss = live.find(dst) >= 0, live.find(src) >= 0
                d = "dtod" if ds and ss else "htod" if ds else "dtoh" if ss else "htoh"
            if d == "htoh":
                skipped["host-to-host copy"] += 1
                continue
            events.append({"op": f"memcpy_{d}", "addr": src if d == "dtoh" else dst,
                           "size": int(r["size"]), "stream": r.get("stream")})
        elif t == "memset":
            events.append({"op": "memset", "addr": int(r["addr"]), "size": int(r["size"]),
                           "stream": r.get("stream")})
        elif t == "prefetch":
            if int(r.get("rc", 0)) != 0:
                skipped["failed prefetch call"] += 1
                continue
            events.append({"op": "prefetch", "addr": int(r["addr"]), "size": int(r["size"]),
                           "arg": r["dst"], "stream": r.get("stream")})
        elif t == "advise":
            if int(r.get("rc", 0)) != 0:
                skipped["failed advise call"] += 1
                continue
            if r["advice"] not in _ADVICE_OK:
                skipped[f"advice {r['advice']} (not in uvmtrace v1)"] += 1
                continue
            events.append({"op": "advise", "addr": int(r["addr"]), "size": int(r["size"]),
                           "arg": r["advice"]})
        elif t == "sync":
            events.append({"op": "sync", "stream": r.get("stream")})
        elif t == "host_access":
            addr, size = int(r["addr"]), int(r["size"])
            i = live.find(addr)
            if size <= 0 or i < 0:
                skipped["host access outside live allocations"] += 1
                continue
            size = min(addr + size, live.ends[i]) - addr
            host_pages += (((addr + size - 1) >> 12) - (addr >> 12)) + 1
            events.append({"op": "host_access", "addr": addr, "size": size, "arg": None})
        elif t == "host_scan_error":
            kernel_errors.append(f"host accesses: {r.get('error')}")
        elif t == "module_error":
            kernel_errors.append(f"module patching: {r.get('errors')}")

    if allocs:
        a = np.array([x[:3] for x in allocs], dtype=np.uint64)
        tables["allocations"] = pd.DataFrame({
            "alloc_id": a[:, 0].astype(np.uint32), "base": a[:, 1], "size": a[:, 2],
            "kind": [x[3] for x in allocs], "name": [x[4] for x in allocs]})
    if events:
        tables["events"] = _events_frame(events)
    slices = with_slices > 0
    if with_slices and with_slices != len(kernels):
        raise RecordError(f"{pages.bin_path}: {len(kernels) - with_slices} of {len(kernels)} "
                          "kernel lines give no n_slices (raw files of two collector versions?)")
    if kernels:
        k = pd.DataFrame(kernels)
        k["kernel_id"] = k["kernel_id"].astype(np.uint32)
        k["duration_ns"] = pd.array(k["duration_ns"].tolist(), dtype="Int64")
        tables["kernels"] = k
    if acc_parts:
        tables["accesses"] = pd.concat(acc_parts, ignore_index=True)
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
        "kernels": len(kernels), "allocations": len(allocs), "events": len(events),
        "access_rows": int(sum(len(p) for p in acc_parts)),
        "dropped_accesses_device": dropped_accesses,
        "pages_outside_allocations_device": unknown_pages,
        "access_rows_dropped_outside_live_allocations": out_of_range,
        "kernels_with_dropped_rows": out_of_range_kernels,
        "errors": kernel_errors[:50],
        "kernels_without_pages": int(sum(no_pages.values())),
        "kernels_without_pages_by_name": dict(no_pages.most_common(20)),
        "graph_kernels_with_merged_pages": merged_nodes,
        "slices": slices,
        "host_access_events": sum(1 for e in events if e["op"] == "host_access"),
        "host_access_pages": host_pages,
    })
    stats["skipped"] = dict(skipped)
    return tables, stats


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


# --------------------------------------------------------------------------- library
def _read_build_info(build_dir: Path) -> dict[str, Any]:
    p = build_dir / "uvmtrace_build.json"
    return json.loads(p.read_text()) if p.exists() else {}


def build_library(build_dir: str | os.PathLike = DEFAULT_BUILD_DIR, *,
                  sanitizer_root: str | None = None, quiet: bool = False) -> Path:
    """Configure and build native_trace with CMake; returns the library's path."""
    if shutil.which("cmake") is None:
        raise RecordError("cmake is not on PATH: it is needed to build native_trace/")
    b = Path(build_dir)
    cfg = ["cmake", "-S", str(NATIVE_DIR), "-B", str(b), "-DCMAKE_BUILD_TYPE=Release"]
    if sanitizer_root:
        cfg.append(f"-DUVMTRACE_SANITIZER_ROOT={sanitizer_root}")
    out = subprocess.DEVNULL if quiet else sys.stderr
    for cmd in (cfg, ["cmake", "--build", str(b), "-j", str(os.cpu_count() or 2)]):
        rc = subprocess.call(cmd, stdout=out, stderr=out)
        if rc != 0:
            raise RecordError(f"building native_trace failed ({shlex.join(cmd)} exited {rc})")
    lib = b / LIB_NAME
    if not lib.exists():
        raise RecordError(f"the build of native_trace produced no {lib}")
    return lib


def find_library(lib: str | os.PathLike | None = None, *, build: bool = True) -> Path:
    """The collector library: `lib`, $UVMTRACE_LIB, native_trace/build/, or a fresh build."""
    for cand, what in ((lib, "--lib"), (os.environ.get("UVMTRACE_LIB"), "UVMTRACE_LIB")):
        if cand:
            p = Path(cand)
            if not p.is_file():
                raise RecordError(f"{what}={cand}: no such file")
            return p.resolve()
    p = DEFAULT_BUILD_DIR / LIB_NAME
    if p.is_file():
        return p
    if not build:
        raise RecordError(f"{p} does not exist; build it with: cmake -S {NATIVE_DIR} -B "
                          f"{DEFAULT_BUILD_DIR} && cmake --build {DEFAULT_BUILD_DIR}")
    return build_library()


def _library_has_pages(lib: Path) -> bool | None:
    info = _read_build_info(lib.parent)
    return info.get("page_pass") if info else None


# --------------------------------------------------------------------------- running
def _exit_status(rc: int) -> int:
    """Shell convention: a program killed by signal N exits 128 + N."""
    return 128 - rc if rc < 0 else rc


def _run_pass(pass_name: str, cmd: Sequence[str], lib: Path, raw_dir: Path, *, inject: str,
              extra_env: dict[str, str]) -> int:
    env = dict(os.environ)
    env.update(extra_env)
    env["UVMTRACE_PASS"] = pass_name
    env["UVMTRACE_OUT"] = str(raw_dir)
    if inject == "preload":
        env.pop("CUDA_INJECTION64_PATH", None)
        env["UVMTRACE_PRELOAD"] = "1"
        env["LD_PRELOAD"] = f"{lib}:{env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else str(lib)
    else:
        env["CUDA_INJECTION64_PATH"] = str(lib)
    try:
        proc = subprocess.Popen(list(cmd), env=env)
    except OSError as e:
        raise RecordError(f"cannot run {cmd[0]!r}: {e.strerror}") from e
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        return proc.wait()


def _gpu_info() -> dict[str, Any]:
    info: dict[str, Any] = {}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        if q.returncode == 0 and q.stdout.strip():
            name, drv, mem = [s.strip() for s in q.stdout.strip().splitlines()[0].split(",")]
            info.update(gpu=name, driver=drv, gpu_memory=mem)
        h = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30)
        m = re.search(r"CUDA Version:\s*([\d.]+)", h.stdout)
        if m:
            info["cuda_driver_api"] = m.group(1)
    except (OSError, subprocess.SubprocessError):
        pass
    info.update(_build_cuda_info())
    return info


def _build_cuda_info() -> dict[str, Any]:
    try:
        v = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=30)
        m = re.search(r"release ([\d.]+)", v.stdout)
        return {"cuda_toolkit": m.group(1)} if m else {}
    except (OSError, subprocess.SubprocessError):
        return {}


def _write_uvm_events(trace: Path, timing: RawPass | None) -> int:
    """CUPTI unified-memory counter records, if any arrived, to uvm_events.parquet.

    `value` is CUPTI's: bytes for transfers, the fault count for GPU page faults (and, per
    CUPTI, a program counter for CPU page faults). Times are CUPTI's GPU timestamps (ns).
    """
    rows = timing.of("um") if timing is not None else []
    if not rows:
        return 0
    import pyarrow as pa
    import pyarrow.parquet as pq
    # CUpti_ActivityUnifiedMemoryCounterKind
    names = {1: "bytes_htod", 2: "bytes_dtoh", 3: "cpu_page_fault", 4: "gpu_page_fault",
             5: "thrashing", 6: "throttling", 7: "remote_map", 8: "bytes_dtod"}
    t = pa.table({
        "counter": [names.get(r["counter"], str(r["counter"])) for r in rows],
        "value": pa.array([r["value"] for r in rows], pa.uint64()),
        "start_ns": pa.array([r["start"] for r in rows], pa.int64()),
        "end_ns": pa.array([r["end"] for r in rows], pa.int64()),
        "address": pa.array([r["address"] for r in rows], pa.uint64()),
        "src": pa.array([r["src"] for r in rows], pa.uint32()),
        "dst": pa.array([r["dst"] for r in rows], pa.uint32()),
        "flags": pa.array([r["flags"] for r in rows], pa.uint32())})
    from ._atomic import write_atomic
    write_atomic(trace / "uvm_events.parquet",
                 lambda tmp: pq.write_table(t, tmp, compression="zstd"))
    return len(rows)


def record(out: str | os.PathLike, cmd: Sequence[str], passes: str = "both", *,
           lib: str | os.PathLike | None = None, keep_raw: str | os.PathLike | None = None,
           prefetch_managed: bool = True, uvm_counters: bool = False, strict: bool = False,
           inject: str = "env", overwrite: bool = False, notes: str | None = None,
           extra_env: dict[str, str] | None = None) -> int:
    """Trace `cmd` into the uvmtrace `out`; returns the program's exit status.

    `passes` is ``pages``, ``timing`` or ``both`` (pages first). The trace is written even
    when the program fails or crashes, with ``source.complete`` false when a pass did not
    reach its exit handler. `uvm_counters` adds a run with CUPTI unified-memory counters
    (written to ``uvm_events.parquet``); `extra_env` is set for the program in every run;
    `keep_raw` keeps the raw pass files in that folder. Raises `RecordError` for problems of
    the collector itself (and, with `strict`, `LaunchMismatchError` when the passes' launch
    sequences differ).
    """
    if passes not in ("pages", "timing", "both"):
        raise RecordError(f"--pass {passes!r}: expected pages, timing or both")
    if inject not in ("env", "preload"):
        raise RecordError(f"--inject {inject!r}: expected env or preload")
    if not cmd:
        raise RecordError("no command to trace (give it after --)")
    out_p = Path(out)
    if not out_p.name.endswith(".uvmtrace"):
        raise RecordError(f"{out_p}: the output name must end in '.uvmtrace'")
    if out_p.exists() and not overwrite:
        raise RecordError(f"{out_p} exists (use --overwrite to replace it)")
    library = find_library(lib)
    run = ["pages", "timing"] if passes == "both" else [passes]
    # the counters need the program's own UVM behaviour, so they get a run of their own
    # without the timing pass's prefetching (durations stay fault-free)
    extra = ["uvm"] if uvm_counters else []
    if "pages" in run and _library_has_pages(library) is False:
        raise RecordError(f"{library} was built without the Compute Sanitizer API, so it has "
                          "no page pass (rebuild with UVMTRACE_SANITIZER_ROOT set, or use "
                          "--pass timing)")

    raw_root = Path(keep_raw) if keep_raw else Path(tempfile.mkdtemp(prefix="uvmtrace-raw-"))
    raw_root.mkdir(parents=True, exist_ok=True)
    env = dict(extra_env or {})
    env["UVMTRACE_PREFETCH_MANAGED"] = "1" if prefetch_managed else "0"
    env["UVMTRACE_UM_COUNTERS"] = "0"
    statuses: dict[str, int] = {}
    wall: dict[str, float] = {}
    pass_notes: list[str] = []
    try:
        for p in run:
            d = raw_root / p
            if d.exists():
                shutil.rmtree(d)
            d.mkdir(parents=True)
            t0 = _dt.datetime.now()
            statuses[p] = _exit_status(_run_pass(p, cmd, library, d, inject=inject,
                                                 extra_env=env))
            wall[p] = (_dt.datetime.now() - t0).total_seconds()
        uvm_raw = None
        for p in extra:  # the "uvm" run is the timing pass with counters, no prefetching
            d = raw_root / p
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            t0 = _dt.datetime.now()
            statuses[p] = _exit_status(_run_pass(
                "timing", cmd, library, d, inject=inject,
                extra_env=dict(env, UVMTRACE_PREFETCH_MANAGED="0", UVMTRACE_UM_COUNTERS="1")))
            wall[p] = (_dt.datetime.now() - t0).total_seconds()
            uvm_raw = _pick_process(read_raw_pass(d, "timing"), pass_notes)
        raw = {p: _pick_process(read_raw_pass(raw_root / p, p), pass_notes) for p in run}
        complete = True
        reasons = []
        for p in run:
            rp = raw[p]
            if rp is None:
                complete = False
                reasons.append(f"{p} pass: no raw output (did the program use CUDA? was "
                               f"{library} loaded?)")
            elif not rp.complete:
                complete = False
                reasons.append(f"{p} pass: process {rp.pid} ended without reaching its exit "
                               f"handler (status {statuses[p]})")
        tables, stats = build_tables(raw.get("pages"), raw.get("timing"), strict=strict)
        first = run[0]
        source: dict[str, Any] = {
            "tool": "uvmsim record (native_trace/libuvmtrace.so)",
            "collector_version": COLLECTOR_VERSION,
            "command": list(cmd), "command_line": shlex.join(cmd),
            "cwd": os.getcwd(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "passes": run, "inject": inject, "exit_status": statuses[first],
            "pass_exit_status": statuses, "pass_wall_s": wall,
            "complete": complete, "incomplete_reasons": reasons,
            "prefetch_managed_in_timing_pass": prefetch_managed,
            "library": str(library),
        }
        source.update(_gpu_info())
        source.update(stats)
        if extra_env:
            source["env"] = dict(extra_env)
        for k in ("PYTORCH_NO_CUDA_MEMORY_CACHING", "PYTORCH_CUDA_ALLOC_CONF",
                  "NVIDIA_TF32_OVERRIDE", "CUDA_MODULE_LOADING"):
            if k in os.environ:  # settings that change what the program does on the GPU
                source.setdefault("env_inherited", {})[k] = os.environ[k]
        if pass_notes:
            source["notes_processes"] = pass_notes
        if notes:
            source["notes"] = notes
        for p in run:
            rp = raw[p]
            if rp is not None:
                source[f"{p}_pass_end"] = rp.end
                if rp.bad_lines:
                    source[f"{p}_pass_unreadable_lines"] = rp.bad_lines
        if uvm_counters:
            source["uvm_counter_attempts"] = uvm_raw.of("um_attempt") if uvm_raw else []
            source["uvm_counter_records"] = len(uvm_raw.of("um")) if uvm_raw else 0
        if len(set(statuses.values())) > 1:
            print(f"uvmsim record: warning: the passes exited differently: {statuses}",
                  file=sys.stderr)
        join = stats.get("join", {})
        if join.get("status") == "mismatch":
            print(f"uvmsim record: warning: {join['message']}; durations left empty",
                  file=sys.stderr)
        for what in ("dropped_accesses_device", "access_rows_dropped_outside_live_allocations"):
            if stats.get(what):
                print(f"uvmsim record: warning: {what.replace('_', ' ')}: {stats[what]}",
                      file=sys.stderr)
        if not complete:
            print("uvmsim record: warning: trace is incomplete: " + "; ".join(reasons),
                  file=sys.stderr)

        from .trace import write_trace  # late: keeps `record --help` light
        write_trace(out_p, allocations=tables["allocations"], events=tables["events"],
                    kernels=tables["kernels"], accesses=tables["accesses"], source=source,
                    overwrite=overwrite)
        n_um = _write_uvm_events(out_p, uvm_raw)
        if n_um:
            m = json.loads((out_p / "manifest.json").read_text())
            m["source"]["uvm_events_rows"] = n_um
            from ._atomic import write_atomic
            text = json.dumps(m, indent=2, sort_keys=True) + "\n"
            write_atomic(out_p / "manifest.json", lambda tmp: tmp.write_text(text))
        print(f"uvmsim record: wrote {out_p} ({stats.get('kernels', len(tables['kernels']))} "
              f"kernels, {len(tables['accesses'])} page rows; program exit status "
              f"{statuses[first]})", file=sys.stderr)
        return statuses[first]
    finally:
        if not keep_raw:
            shutil.rmtree(raw_root, ignore_errors=True)


# --------------------------------------------------------------------------- CLI
def configure_parser(p: argparse.ArgumentParser) -> None:
    """Add the options of ``uvmsim record`` to `p`."""
    p.add_argument("-o", "--output", required=True, metavar="OUT.uvmtrace",
                   help="trace directory to write (name must end in .uvmtrace)")
    p.add_argument("--pass", dest="passes", choices=("pages", "timing", "both"), default="both",
                   help="pages: accessed pages (Compute Sanitizer); timing: kernel durations "
                        "(CUPTI); both (default): run the program twice and join by launch order")
    p.add_argument("--lib", help="collector library (default: $UVMTRACE_LIB, "
                                 "native_trace/build/libuvmtrace.so, else build it)")
    p.add_argument("--keep-raw", metavar="DIR", help="keep the raw per-pass files in DIR")
    p.add_argument("--no-prefetch-managed", action="store_true",
                   help="timing pass: do not prefetch managed memory before each launch "
                        "(durations then include UVM faults)")
    p.add_argument("--uvm-counters", action="store_true",
                   help="one more run with CUPTI unified-memory counters (GPU page faults, "
                        "transfers) and no prefetching; its records go to uvm_events.parquet")
    p.add_argument("--strict", action="store_true",
                   help="fail (exit 2, no trace) when the passes' launch sequences differ "
                        "instead of writing the trace without durations")
    p.add_argument("--inject", choices=("env", "preload"), default="env",
                   help="load the collector with CUDA_INJECTION64_PATH (default) or LD_PRELOAD")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    p.add_argument("--notes", help="free text stored in the manifest's source.notes")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="set an environment variable for the traced program in every pass "
                        "(repeatable); recorded in the manifest")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...: the program to trace")


def run_from_args(args: argparse.Namespace) -> int:
    """Run ``uvmsim record`` from parsed arguments; returns the exit status to use. Errors
    raise RecordError (a UserError: one line and status 2 through src/uvmsim/errors.py:run_command)."""
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    return record(args.output, cmd, args.passes, lib=args.lib, keep_raw=args.keep_raw,
                  prefetch_managed=not args.no_prefetch_managed,
                  uvm_counters=args.uvm_counters, strict=args.strict, inject=args.inject,
                  overwrite=args.overwrite, notes=args.notes,
                  extra_env=parse_env(getattr(args, "env", None)))


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry: ``python -m uvmsim.record -o X.uvmtrace -- CMD``."""
    p = argparse.ArgumentParser(prog="uvmsim record", description=__doc__.splitlines()[0])
    configure_parser(p)
    a = p.parse_args(argv)
    return run_command("record", lambda: run_from_args(a))


if __name__ == "__main__":
    sys.exit(main())
