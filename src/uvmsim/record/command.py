"""`uvmsim record`: run a CUDA program under the native collector and write a uvmtrace v1.2.

`record` runs the passes (collector.py), reads their raw files (raw.py), joins and tabulates
them (join.py, tables.py) and writes the trace; `configure_parser`, `run_from_args` and
`main` are its command line.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from .. import gpucheck
from ..errors import parse_env, run_command
from .collector import (collector_env, find_library, gpu_info, library_has_pages,
                        run_program)
from .errors import RecordError
from .raw import RawPass, pick_process, read_raw_pass
from .tables import build_tables

__all__ = ["COLLECTOR_VERSION", "configure_parser", "main", "record", "run_from_args"]

COLLECTOR_VERSION = "0.1.0"


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
    from .._atomic import write_atomic
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
    # before building the collector: without a GPU the passes would load nothing and
    # leave an empty trace
    gpucheck.require_gpu("record")
    library = find_library(lib)
    run = ["pages", "timing"] if passes == "both" else [passes]
    # the counters need the program's own UVM behaviour, so they get a run of their own
    # without the timing pass's prefetching (durations stay fault-free)
    extra = ["uvm"] if uvm_counters else []
    if "pages" in run and library_has_pages(library) is False:
        raise RecordError(f"{library} was built without the Compute Sanitizer API, so it has "
                          "no page pass (rebuild with UVMTRACE_SANITIZER_ROOT set, or use "
                          "--pass timing)")

    raw_root = Path(keep_raw) if keep_raw else Path(tempfile.mkdtemp(prefix="uvmtrace-raw-"))
    raw_root.mkdir(parents=True, exist_ok=True)
    settings = {"UVMTRACE_PREFETCH_MANAGED": "1" if prefetch_managed else "0",
                "UVMTRACE_UM_COUNTERS": "0"}
    statuses: dict[str, int] = {}
    wall: dict[str, float] = {}
    pass_notes: list[str] = []

    def run_pass(pass_name: str, d: Path, pass_settings: dict[str, str]) -> int:
        env = collector_env(pass_name, library, d, inject=inject, user_env=extra_env,
                            settings=pass_settings)
        return run_program(cmd, env).status

    try:
        for p in run:
            d = raw_root / p
            if d.exists():
                shutil.rmtree(d)
            d.mkdir(parents=True)
            t0 = _dt.datetime.now()
            statuses[p] = run_pass(p, d, settings)
            wall[p] = (_dt.datetime.now() - t0).total_seconds()
        uvm_raw = None
        for p in extra:  # the "uvm" run is the timing pass with counters, no prefetching
            d = raw_root / p
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            t0 = _dt.datetime.now()
            statuses[p] = run_pass("timing", d, dict(settings, UVMTRACE_PREFETCH_MANAGED="0",
                                                     UVMTRACE_UM_COUNTERS="1"))
            wall[p] = (_dt.datetime.now() - t0).total_seconds()
            uvm_raw = pick_process(read_raw_pass(d, "timing"), pass_notes)
        raw = {p: pick_process(read_raw_pass(raw_root / p, p), pass_notes) for p in run}
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
        source.update(gpu_info())
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
        for w in stats.get("warnings", []):
            print(f"uvmsim record: warning: {w}", file=sys.stderr)
        for what in ("dropped_accesses_device", "access_rows_dropped_outside_live_allocations"):
            if stats.get(what):
                print(f"uvmsim record: warning: {what.replace('_', ' ')}: {stats[what]}",
                      file=sys.stderr)
        if not complete:
            print("uvmsim record: warning: trace is incomplete: " + "; ".join(reasons),
                  file=sys.stderr)

        from ..trace import write_trace  # late: keeps `record --help` light
        write_trace(out_p, allocations=tables["allocations"], events=tables["events"],
                    kernels=tables["kernels"], accesses=tables["accesses"], source=source,
                    overwrite=overwrite, blocks=tables.get("blocks"),
                    block_accesses=tables.get("block_accesses"))
        n_um = _write_uvm_events(out_p, uvm_raw)
        if n_um:
            m = json.loads((out_p / "manifest.json").read_text())
            m["source"]["uvm_events_rows"] = n_um
            from .._atomic import write_atomic
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
    from ..argtypes import Parser  # one-line argument errors, as in `uvmsim record`
    p = Parser(prog="uvmsim record", description=__doc__.splitlines()[0])
    configure_parser(p)
    a = p.parse_args(argv)
    return run_command("record", lambda: run_from_args(a))
