"""`uvmsim run`: run an unmodified CUDA program really oversubscribed, as ground truth.

    uvmsim run --oversub F (--footprint BYTES | --trace T) [--timeout S] [-o result.json] -- CMD

The program runs under the collector's timing pass (native_trace/libuvmtrace.so) with three
changes (docs/groundtruth.md):

* a **balloon**: once the program's CUDA context exists, and before its first managed
  allocation, the library takes GPU memory with plain ``cuMemAlloc`` so that only
  ``footprint / F`` bytes stay free (never more than is free; the run is refused when the
  footprint itself does not fit in the free memory);
* no prefetching, so kernel durations (CUPTI activity) hold the real faults and migrations;
* CUPTI's **unified-memory counters** (GPU page faults, HtoD/DtoH bytes and, where the driver
  gives them, thrashing and throttling), attributed to kernels by timestamp;
* the **UVM driver's own totals** of the process (HtoD/DtoH bytes, GPU and CPU page faults:
  ``driver_counters``), which, unlike CUPTI's records, no queue can drop
  (native_trace/src/driver_counters.cpp).

Every run has a timeout. A run that times out is kept: it is reported as censored, with
``real_s`` equal to the timeout (the real time is "> T").
"""
from __future__ import annotations

import argparse
import datetime as _dt
import functools
import json
import os
import shlex
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from . import gpucheck
from .errors import UserError, parse_env, run_command

__all__ = ["CAUSE_COLUMNS", "UM_DTYPE", "RunError", "attribute_records", "configure_parser",
           "counts_by_kernel", "driver_counters_text", "driver_totals", "free_target_bytes",
           "peak_live_managed_bytes", "footprint_from_trace", "run", "run_from_args",
           "summarize_raw"]

#: one unified-memory counter record as the timing pass writes it (native_trace/src/common.h)
UM_DTYPE = np.dtype([("counter", "<u4"), ("flags", "<u4"), ("value", "<u8"), ("start", "<u8"),
                     ("end", "<u8"), ("address", "<u8"), ("src", "<u4"), ("dst", "<u4")])
# CUpti_ActivityUnifiedMemoryCounterKind
HTOD, DTOH, CPU_FAULT, GPU_FAULT, THRASHING, THROTTLING, REMOTE_MAP = 1, 2, 3, 4, 5, 6, 7
# CUpti_ActivityUnifiedMemoryMigrationCause (flags of transfer records)
CAUSES = {0: "unknown", 1: "user", 2: "coherence", 3: "prefetch", 4: "eviction",
          5: "access_counters"}
# the causes of demand migrations, the driver's prefetches and evictions
MIG_COHERENCE, MIG_PREFETCH, MIG_EVICTION = 2, 3, 4
#: the transfer bytes by (direction, cause) beyond the three named above (demand = HtoD
#: coherence, prefetch = HtoD prefetch, eviction = DtoH eviction): every cause CUPTI gives
CAUSE_COLUMNS = {f"{d}_{name}_bytes": (counter, cause)
                 for d, counter in (("htod", HTOD), ("dtoh", DTOH))
                 for cause, name in CAUSES.items()
                 if (counter, cause) not in ((HTOD, MIG_COHERENCE), (HTOD, MIG_PREFETCH),
                                             (DTOH, MIG_EVICTION))}
EXIT_REFUSED = 87   # the library refused: footprint > free memory (native_trace/src/balloon.cpp)
EXIT_TIMEOUT = 124  # the library's watchdog ended the run (as timeout(1) does)
#: the watchdog's flush of CUPTI can block; its alarm then ends the process (128 + SIGALRM)
EXIT_TIMEOUT_ALARM = 128 + int(signal.SIGALRM)
#: seconds the outer kill waits beyond the timeout: the library's deadline starts at the
#: balloon, after the program's own start-up (Python imports, ...)
STARTUP_GRACE_S = 60.0


class RunError(UserError, RuntimeError):
    """The run could not be made or was refused (bad arguments, footprint too large, ...)."""


# --------------------------------------------------------------------------- arithmetic
def free_target_bytes(footprint: int, factor: float) -> int:
    """GPU memory left free for a managed footprint oversubscribed `factor` times."""
    if not isinstance(footprint, (int, np.integer)) or footprint <= 0:
        raise RunError(f"footprint must be a positive number of bytes, got {footprint!r}")
    if not (isinstance(factor, (int, float)) and np.isfinite(factor) and factor > 0):
        raise RunError(f"--oversub must be a positive number, got {factor!r}")
    return int(footprint / factor)


def peak_live_managed_bytes(trace: Any) -> int:
    """Largest sum of live managed allocation sizes over the trace's alloc/free events."""
    a = trace.allocations
    size = dict(zip(a["alloc_id"].astype(int), a["size"].astype(int)))
    managed = set(a.loc[a["kind"] == "managed", "alloc_id"].astype(int))
    ev = trace.events
    live = peak = 0
    for op, aid in zip(ev["op"], ev["alloc_id"]):
        if op not in ("alloc", "free") or aid != aid or int(aid) not in managed:
            continue
        live += size[int(aid)] if op == "alloc" else -size[int(aid)]
        peak = max(peak, live)
    return peak


def footprint_from_trace(path: str | os.PathLike) -> int:
    """The managed footprint of a recorded program: its trace's peak live managed bytes."""
    from .trace import load_trace
    fp = peak_live_managed_bytes(load_trace(path))
    if fp <= 0:
        raise RunError(f"{path}: the trace has no managed allocation, so it gives no footprint "
                       "(give --footprint BYTES)")
    return fp


# --------------------------------------------------------------------------- required traffic
def trace_bounds(trace: Any) -> "Any":
    """Per kernel of a trace, in 4 KiB pages: U (distinct pages it touches), H (of those,
    pages whose data is on the host at its start) and G (on the GPU), in the view of a GPU
    with unlimited memory: host accesses and prefetches to the CPU move pages to the host;
    kernels, host-to-device and device-to-device copies (their destinations: the copy
    engine's faults, docs/model.md item 10), memsets and prefetches to the GPU move them to
    the GPU; frees drop them. A DataFrame with columns k, U, H, G, one row per kernel."""
    import pandas as pd

    from .trace.format import (ARG_CPU, OP_DTOD, OP_FREE, OP_HOST_ACCESS, OP_HTOD, OP_KERNEL,
                               OP_MEMSET, OP_PREFETCH)
    a = trace.arrays
    state = np.zeros(int(a.page_block.size), np.int8)     # 0 unpopulated, 1 host, 2 GPU
    rows = []
    for e in range(a.ev_op.size):
        op = int(a.ev_op[e])
        segs = [(int(a.seg_first[s]), int(a.seg_last[s]) + 1)
                for s in range(int(a.ev_seg_start[e]), int(a.ev_seg_start[e + 1]))]
        if op == OP_KERNEL:
            k = int(a.ev_kernel[e])
            pg = np.unique(a.row_page[a.k_row_start[k]:a.k_row_start[k + 1]])
            st = state[pg]
            rows.append((k, int(pg.size), int((st == 1).sum()), int((st == 2).sum())))
            state[pg] = 2
        elif op == OP_HOST_ACCESS:
            for lo, hi in segs:
                state[lo:hi] = 1
        elif (op in (OP_HTOD, OP_DTOD, OP_MEMSET)
              or (op == OP_PREFETCH and int(a.ev_arg[e]) != ARG_CPU)):
            for lo, hi in segs:
                state[lo:hi] = 2
        elif op == OP_PREFETCH:
            for lo, hi in segs:
                state[lo:hi] = np.where(state[lo:hi] == 2, 1, state[lo:hi])
        elif op == OP_FREE and int(a.ev_alloc[e]) >= 0:
            al = int(a.ev_alloc[e])
            off = int(a.a_page_off[al])
            state[off:off + int(a.a_npages[al])] = 0
    return pd.DataFrame(rows, columns=["k", "U", "H", "G"])


def required_traffic(bounds: Any, free_bytes: int) -> tuple[int, int]:
    """(host-to-device, device-to-host) bytes every real run of the traced program must have
    moved with at most `free_bytes` of GPU memory, whatever a profiler recorded.

    With C pages of memory, kernel k found at most C of its G pages resident at its start,
    so at least H + max(0, G - C) of the pages it touched came in (a GPU touch of
    non-resident managed data migrates it: docs/model.md, "What the driver does", 1), and
    at least max(0, U - C) of them left during it (what it touched does not all fit), each
    copied back (eviction copies every resident page, same page, 2). `bounds` is
    trace_bounds' table. Records below these numbers were lost (docs/groundtruth.md)."""
    c = int(free_bytes) // 4096
    h = np.asarray(bounds["H"], np.int64) + np.maximum(np.asarray(bounds["G"], np.int64) - c, 0)
    d = np.maximum(np.asarray(bounds["U"], np.int64) - c, 0)
    return int(h.sum()) * 4096, int(d.sum()) * 4096


# --------------------------------------------------------------------------- attribution
def attribute_records(k_start: np.ndarray, k_end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the kernel running at each time in `t`, or -1 when none ran.

    Kernels are [start, end] intervals (CUPTI's clock, shared with the counter records). When
    kernels overlap (several streams), the one that started last wins.
    """
    k_start = np.asarray(k_start, np.int64)
    k_end = np.asarray(k_end, np.int64)
    t = np.asarray(t, np.int64)
    out = np.full(t.shape, -1, np.int64)
    if k_start.size == 0 or t.size == 0:
        return out
    order = np.argsort(k_start, kind="stable")
    s, e = k_start[order], k_end[order]
    i = np.searchsorted(s, t, side="right") - 1
    has = i >= 0
    inside = np.zeros(t.shape, bool)
    inside[has] = t[has] <= e[i[has]]
    out[inside] = order[i[inside]]
    # not inside the last kernel started before t, but maybe inside an earlier, longer one
    run_max = np.maximum.accumulate(e)
    maybe = np.flatnonzero(has & ~inside)
    maybe = maybe[run_max[i[maybe]] >= t[maybe]]
    for r in maybe:
        for j in range(i[r] - 1, -1, -1):
            if s[j] <= t[r] <= e[j]:
                out[r] = order[j]
                break
    return out


def _sum_by(idx: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per-kernel sums of `values` (idx -1 excluded)."""
    ok = idx >= 0
    return np.bincount(idx[ok], weights=values[ok].astype(np.float64),
                       minlength=n).astype(np.int64)


def counts_by_kernel(k_start: np.ndarray, k_end: np.ndarray,
                     um: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Per-kernel counter sums, and the totals of records that fell outside every kernel.

    Per kernel: ``gpu_page_faults`` (sum of GPU_PAGE_FAULT values: CUPTI's count of fault
    groups per faulting page), ``gpu_fault_records``, ``htod_bytes``, ``dtoh_bytes``,
    ``htod_demand_bytes`` (cause coherence), ``htod_prefetch_bytes`` (driver prefetch),
    ``dtoh_eviction_bytes``, the bytes of every other (direction, cause) pair as
    ``{htod|dtoh}_{cause}_bytes`` (`CAUSE_COLUMNS`), ``thrashing`` and ``throttling``
    records, ``remote_map_records`` and ``remote_map_bytes`` (mappings of memory left where it
    is), and ``cpu_page_faults`` (CPU fault records). A record belongs to the kernel running
    at its start; `outside` sums the records that fell outside every kernel.
    """
    n = len(k_start)
    um = np.asarray(um, UM_DTYPE)
    idx = attribute_records(k_start, k_end, um["start"].astype(np.int64))
    c, f, v = um["counter"], um["flags"], um["value"]
    one = np.ones(len(um), np.int64)
    sel = {
        "gpu_page_faults": (c == GPU_FAULT, v),
        "gpu_fault_records": (c == GPU_FAULT, one),
        "htod_bytes": (c == HTOD, v),
        "dtoh_bytes": (c == DTOH, v),
        "htod_demand_bytes": ((c == HTOD) & (f == MIG_COHERENCE), v),
        "htod_prefetch_bytes": ((c == HTOD) & (f == MIG_PREFETCH), v),
        "dtoh_eviction_bytes": ((c == DTOH) & (f == MIG_EVICTION), v),
        "thrashing": (c == THRASHING, one),
        "throttling": (c == THROTTLING, one),
        "remote_map_records": (c == REMOTE_MAP, one),
        "remote_map_bytes": (c == REMOTE_MAP, v),
        "cpu_page_faults": (c == CPU_FAULT, one),
    }
    for name, (counter, cause) in CAUSE_COLUMNS.items():
        sel[name] = ((c == counter) & (f == cause), v)
    per: dict[str, np.ndarray] = {}
    outside: dict[str, int] = {}
    for name, (m, val) in sel.items():
        w = np.where(m, val, 0)
        per[name] = _sum_by(idx, w, n)
        outside[name] = int(w[idx < 0].sum())
    return per, outside


# --------------------------------------------------------------------------- raw files
def summarize_raw(raw_dir: str | os.PathLike) -> dict[str, Any]:
    """Kernels, counters, balloon and end lines of a run's raw files (the busiest process)."""
    from .record import pick_process, read_raw_pass, timing_order
    notes: list[str] = []
    rp = pick_process(read_raw_pass(raw_dir, "timing"), notes)
    if rp is None:
        return {"raw": None, "notes": notes}
    # a kernel still running when the watchdog flushed comes back with no end time
    all_k = rp.of("kact")
    kact = timing_order([r for r in all_k if 0 < r.get("start", 0) < r.get("end", 0)])
    um = np.empty(0, UM_DTYPE)
    if rp.bin_path is not None and rp.bin_path.stat().st_size:
        nbytes = rp.bin_path.stat().st_size
        um = np.fromfile(rp.bin_path, dtype=UM_DTYPE, count=nbytes // UM_DTYPE.itemsize)
    balloon = rp.of("balloon")
    return {"raw": rp, "kact": kact, "incomplete_kernels": len(all_k) - len(kact), "um": um, "balloon": balloon[-1] if balloon else None,
            "end": rp.end, "timeout": bool(rp.of("timeout")), "attempts": rp.of("um_attempt"),
            "notes": notes, "meta": (rp.of("meta") or [{}])[0]}


def _kernel_table(kact: list[dict[str, Any]], um: np.ndarray) -> tuple[dict[str, Any],
                                                                     dict[str, int],
                                                                     dict[str, int]]:
    start = np.array([r["start"] for r in kact], np.int64)
    end = np.array([r["end"] for r in kact], np.int64)
    per, outside = counts_by_kernel(start, end, um)
    names: list[str] = []
    where: dict[str, int] = {}
    name_id = [where.setdefault(r["name"], len(where)) for r in kact]
    names = list(where)
    t0 = int(start.min()) if start.size else 0
    table: dict[str, Any] = {"names": names, "name_id": name_id,
                             "start_ns": (start - t0).tolist(),
                             "duration_ns": (end - start).tolist()}
    table.update({k: v.tolist() for k, v in per.items()})
    totals = {k: int(v.sum()) + outside[k] for k, v in per.items()}
    in_kernels = {k: int(v.sum()) for k, v in per.items()}
    return table, totals, {"outside_kernels": outside, "in_kernels": in_kernels}


# --------------------------------------------------------------------------- running
@functools.lru_cache(maxsize=1)
def _gpu_info() -> tuple[tuple[str, Any], ...]:
    """The GPU, driver and toolkit (nvidia-smi, twice), asked once per process: a series of
    runs (benchmarks/probes) would otherwise spend a fraction of a second on it each."""
    from .record.collector import gpu_info
    return tuple(gpu_info().items())


def run(cmd: Sequence[str], *, factor: float, footprint: int | None = None,
        trace: str | os.PathLike | None = None, timeout_s: float = 300.0,
        lib: str | os.PathLike | None = None, counters: bool = True,
        driver_counters: bool | None = None, keep_raw: str | os.PathLike | None = None,
        extra_env: dict[str, str] | None = None, out: str | os.PathLike | None = None,
        reserve: int = 0, grace_s: float = STARTUP_GRACE_S) -> dict[str, Any]:
    """Run `cmd` with its managed footprint oversubscribed `factor` times; returns the result.

    The footprint is `footprint` bytes, or the peak live managed bytes of `trace`; the balloon
    leaves ``footprint / factor + reserve`` bytes free (`reserve`: memory the context and the
    driver take for themselves after the balloon, see docs/groundtruth.md). The result
    (also written to `out` as JSON) holds per-kernel durations and counters, totals, the
    balloon, the free memory left and whether the run was censored by `timeout_s`.
    `driver_counters` (default: as `counters`) reads the driver's own totals; like CUPTI's
    records they cost the driver time in every fault service (docs/groundtruth.md), so a run
    that measures time has neither.
    The library stops the program `timeout_s` after the balloon; should it not, the program's
    process group is killed `grace_s` later. Raises `RunError` when the run cannot be made or
    the library refused it.
    """
    if not cmd:
        raise RunError("no command to run (give it after --)")
    if (footprint is None) == (trace is None):
        raise RunError("give exactly one of --footprint BYTES and --trace T")
    if not (isinstance(timeout_s, (int, float)) and np.isfinite(timeout_s) and timeout_s > 0):
        raise RunError(f"--timeout must be a positive number of seconds, got {timeout_s!r}")
    if trace is not None:
        footprint = footprint_from_trace(trace)
    assert footprint is not None
    if not isinstance(reserve, (int, np.integer)) or reserve < 0:
        raise RunError(f"--reserve must be a non-negative number of bytes, got {reserve!r}")
    target = free_target_bytes(footprint, factor) + int(reserve)
    # before building the collector: without a GPU there is no balloon and no counter
    gpucheck.require_gpu("run")
    from .record.collector import collector_env, find_library, run_program
    library = find_library(lib)

    raw = Path(keep_raw) if keep_raw else Path(tempfile.mkdtemp(prefix="uvmsim-run-"))
    raw.mkdir(parents=True, exist_ok=True)
    for p in raw.glob("timing.*"):
        p.unlink()
    env = collector_env("timing", library, raw, user_env=extra_env, settings={
        "UVMTRACE_PREFETCH_MANAGED": "0",
        "UVMTRACE_UM_COUNTERS": "1" if counters else "0",
        "UVMTRACE_DRIVER_COUNTERS": "1" if (counters if driver_counters is None
                                            else driver_counters) else "0",
        "UVMTRACE_UM_BINARY": "1",
        "UVMTRACE_BALLOON_FOOTPRINT": str(int(footprint)),
        "UVMTRACE_BALLOON_FREE_TARGET": str(int(target)),
        "UVMTRACE_DEADLINE_S": repr(float(timeout_s))})
    t0 = time.perf_counter()
    # the library's watchdog ends the run at the timeout; should it not, the whole process
    # group is killed grace_s later
    ended = run_program(cmd, env, deadline_s=timeout_s + grace_s, error=RunError)
    killed, status = ended.killed, ended.status
    wall = time.perf_counter() - t0
    try:
        s = summarize_raw(raw)
    finally:
        if not keep_raw:
            import shutil
            shutil.rmtree(raw, ignore_errors=True)
    balloon = s.get("balloon")
    if status == EXIT_REFUSED and balloon and balloon.get("status") == "refused":
        raise RunError(f"refused: the managed footprint ({footprint:,} bytes) exceeds the GPU's "
                       f"free memory ({balloon['free_before']:,} bytes)")
    censored = (killed or s.get("timeout", False)
                or status in (EXIT_TIMEOUT, EXIT_TIMEOUT_ALARM))
    kact = s.get("kact") or []
    um = s.get("um") if s.get("um") is not None else np.empty(0, UM_DTYPE)
    table, totals, split = _kernel_table(kact, um)
    kernel_s = float(np.sum(table["duration_ns"])) / 1e9 if kact else 0.0
    end = s.get("end") or {}
    result: dict[str, Any] = {
        "command": list(cmd), "command_line": shlex.join(cmd),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "factor": float(factor), "footprint_bytes": int(footprint), "trace": str(trace) if trace else None,
        "free_target_bytes": target, "timeout_s": float(timeout_s),
        "censored": bool(censored),
        # the real GPU time: kernels' sum; a censored run only says "more than the timeout"
        "real_s": float(timeout_s) if censored else kernel_s,
        "kernel_s": kernel_s, "wall_s": wall, "exit_status": status,
        "killed_by_runner": killed,
        "balloon_made": bool(balloon and balloon.get("status") == "ok"),
        "balloon_bytes": int(balloon.get("balloon", 0)) if balloon else 0,
        "free_before_bytes": int(balloon["free_before"]) if balloon else None,
        "free_bytes": int(balloon["free_after"]) if balloon and "free_after" in balloon else None,
        "reserve_bytes": int(reserve),
        "free_at_exit_bytes": end.get("free_at_exit"),
        "gpu_total_bytes": int(balloon["total"]) if balloon else None,
        "gpu_phase_wall_s": ((end["t_ns"] - balloon["t_ns"]) / 1e9
                             if balloon and "t_ns" in end else None),
        "counters_enabled": any(a.get("enable") == 0 for a in s.get("attempts") or []),
        "counter_attempts": s.get("attempts") or [],
        "counter_records": int(len(um)), "dropped_counter_records": end.get("dropped_records"),
        "kernels_n": len(kact), "kernels_incomplete": s.get("incomplete_kernels", 0),
        # the program's own peak of live managed bytes, seen by the library (cross-check of
        # the footprint)
        "managed_peak_bytes": end.get("managed_peak"),
        # the driver's lossless totals for the whole process: {"status": "ok", "htod_bytes",
        # "dtoh_bytes", "gpu_faults", "cpu_faults"}, or a status saying why there are none
        "driver_counters": end.get("driver_counters"),
        "totals": totals, **split, "kernels": table,
        "raw_complete": bool(end), "notes": s.get("notes") or [],
    }
    result.update(_gpu_info())
    if out is not None:
        from ._atomic import write_atomic
        text = json.dumps(result) + "\n"
        write_atomic(out, lambda tmp: tmp.write_text(text))
    return result


# --------------------------------------------------------------------------- CLI
def configure_parser(p: argparse.ArgumentParser) -> None:
    """Add the options of ``uvmsim run`` to `p`."""
    from .argtypes import parse_bytes, positive_float
    p.add_argument("--oversub", type=positive_float, required=True, metavar="F",
                   help="oversubscription factor: leave footprint / F of GPU memory free")
    fp = p.add_mutually_exclusive_group(required=True)
    fp.add_argument("--footprint", type=parse_bytes, metavar="BYTES",
                    help="the program's managed footprint, e.g. 1GiB")
    fp.add_argument("--trace", metavar="T.uvmtrace",
                    help="take the footprint from this trace of the program (peak live "
                         "managed bytes)")
    p.add_argument("--timeout", type=positive_float, default=300.0, metavar="S",
                   help="seconds the program may run after the balloon (default 300); a run "
                        "that takes longer is stopped and reported as censored (> S)")
    p.add_argument("--reserve", type=parse_bytes, default=0, metavar="BYTES",
                   help="leave this much more free, for what the CUDA context and the driver "
                        "take after the balloon (default 0; docs/groundtruth.md)")
    p.add_argument("-o", "--output", metavar="RESULT.json", help="write the result as JSON")
    p.add_argument("--no-counters", action="store_true",
                   help="kernel times only, without CUPTI's unified-memory counters (and, "
                        "unless --driver-counters, without the driver's totals)")
    p.add_argument("--driver-counters", action=argparse.BooleanOptionalAction, default=None,
                   help="read the UVM driver's own totals of HtoD/DtoH bytes and faults, "
                        "which CUPTI's records undercount (default: with the counters)")
    p.add_argument("--lib", help="collector library (default: $UVMTRACE_LIB or "
                                 "native_trace/build/libuvmtrace.so)")
    p.add_argument("--keep-raw", metavar="DIR", help="keep the raw files in DIR")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="set an environment variable for the program (repeatable)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...: the program to run")


def run_from_args(a: argparse.Namespace) -> int:
    """``uvmsim run`` from parsed arguments; returns the program's exit status (124 when the
    run was censored). A refused or impossible run raises RunError or RecordError, which the
    CLI prints as one line with exit status 2 (src/uvmsim/errors.py:run_command)."""
    cmd = list(a.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    r = run(cmd, factor=a.oversub, footprint=a.footprint, trace=a.trace,
            timeout_s=a.timeout, lib=a.lib, counters=not a.no_counters,
            driver_counters=a.driver_counters,
            keep_raw=a.keep_raw, extra_env=parse_env(a.env), out=a.output, reserve=a.reserve)
    t = r["totals"]
    real = f"> {r['real_s']:.1f} s (censored)" if r["censored"] else f"{r['real_s']:.4f} s"
    free = r["free_bytes"]
    print(f"uvmsim run: factor {r['factor']:g}, footprint {r['footprint_bytes'] / 2**20:,.1f} MiB, "
          f"free {free / 2**20 if free is not None else float('nan'):,.1f} MiB, balloon "
          f"{r['balloon_bytes'] / 2**30:,.2f} GiB: real {real}, {r['kernels_n']} kernels, "
          f"{t['gpu_page_faults']:,} GPU faults, HtoD {t['htod_bytes'] / 2**20:,.1f} MiB, "
          f"DtoH {t['dtoh_bytes'] / 2**20:,.1f} MiB, wall {r['wall_s']:.2f} s "
          f"(exit {r['exit_status']}); {driver_counters_text(r.get('driver_counters'))}",
          file=sys.stderr)
    return EXIT_TIMEOUT if r["censored"] else int(r["exit_status"])


DRIVER_COUNTER_KEYS = ("htod_bytes", "dtoh_bytes", "gpu_faults", "cpu_faults")


def driver_totals(result: dict[str, Any] | None) -> dict[str, int]:
    """A run result's driver totals ({key: count} over DRIVER_COUNTER_KEYS), or {} where the
    run has none (no result, counters off, or the driver refused: see its status)."""
    dc = (result or {}).get("driver_counters") or {}
    if not isinstance(dc, dict) or dc.get("status") != "ok":
        return {}
    vals = {k: dc.get(k) for k in DRIVER_COUNTER_KEYS}
    # the end line is the collector's; a cut or edited one is no count at all
    ok = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in vals.values())
    return vals if ok else {}


def driver_counters_text(dc: dict[str, Any] | None) -> str:
    """The driver's totals of a run, for a person: what CUPTI's records may have dropped."""
    if not dc:
        return "driver counters: none (a collector without them, or no end line)"
    if not isinstance(dc, dict) or dc.get("status") != "ok":
        return f"driver counters: not read ({dc.get('status') if isinstance(dc, dict) else dc})"
    t = driver_totals({"driver_counters": dc})
    if not t:
        return "driver counters: malformed in the end line"
    return (f"driver counters: HtoD {t['htod_bytes'] / 2**20:,.1f} MiB, DtoH "
            f"{t['dtoh_bytes'] / 2**20:,.1f} MiB, {t['gpu_faults']:,} GPU faults, "
            f"{t['cpu_faults']:,} CPU faults")


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry: ``python -m uvmsim.groundtruth --oversub 2 --footprint 1GiB -- CMD``."""
    from .argtypes import Parser  # one-line argument errors, as in `uvmsim run`
    p = Parser(prog="uvmsim run", description=__doc__.splitlines()[0])
    configure_parser(p)
    a = p.parse_args(argv)
    return run_command("run", lambda: run_from_args(a))


if __name__ == "__main__":
    sys.exit(main())
