"""The driver probes' device step, their CSVs and a dry run (benchmarks/probes/README.md).

    python3 benchmarks/probes/probes.py device --out DIR [--factors 1,1.25,1.5,2]
        [--probes a,b] [--deadline-s S] [--started-at EPOCH] [--no-record] [--bin PATH]
    python3 benchmarks/probes/probes.py assemble WORK_DIR [--out DIR]
    python3 benchmarks/probes/probes.py summary DIR
    python3 benchmarks/probes/probes.py dry --out DIR

``device`` records each probe's trace (``uvmsim record``, v1.1), then runs every probe at
every factor under ``uvmsim run`` with the CUPTI unified-memory counters on, keeping the
program's own ``PROBE`` lines (phase times, pages still mapped on the CPU, the driver's VA
ranges, range attributes) and a per-kernel, per-2 MiB-block summary of the counter records
(benchmarks/validate/um_blocks.py). Work goes to benchmarks/out/probes/ (git-ignored; a
second call resumes: a run already there is not made again); the compact results, the
traces (tarballs of at most 12 MiB) and the logs go to --out. It stops starting runs that
could end after --deadline-s seconds from --started-at and says what it left.

``assemble`` turns the work folder into results/probes.csv (one row per run),
results/kernels.csv (one row per kernel), results/phases.csv (one row per program step and
group) and results/blocks.jsonl. ``dry`` runs the whole device step without a GPU: a fake
program stands in for the probes and the collector, and a synthetic trace for the records;
then assemble and benchmarks/probes/analyze.py run on the result.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks" / "validate"))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO / "src")] + [x for x in [os.environ.get("PYTHONPATH")] if x])

WORK = REPO / "benchmarks" / "out" / "probes"
BIN = REPO / "benchmarks" / "probes" / "build" / "uvm_probes"
FACTORS = (1.0, 1.25, 1.5, 2.0)
RESERVE = 16 << 20  # the CUDA reserve measured for the validation suite (docs/groundtruth.md)
MAX_TAR = 12 << 20  # each returned file must stay under the device's 16 MiB
#: counter records past which a run's per-block summary is skipped (it would take too long)
MAX_BLOCK_RECORDS = 300_000
T0 = time.time()


@dataclass(frozen=True)
class Probe:
    """One probe: the program's arguments, its timeout, and the trace its replay uses."""
    name: str
    args: tuple[str, ...]
    timeout_s: float = 8.0
    trace_of: str | None = None  # replay with another probe's trace (same GPU work)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def trace(self) -> str:
        return self.trace_of or self.name


PROBES = (
    Probe("host_read_stream", ("host_read_stream",)),
    Probe("host_read_rows", ("host_read_rows",), timeout_s=12.0),
    Probe("host_read_cols", ("host_read_cols",)),
    Probe("host_rw", ("host_rw",)),
    Probe("host_firstread", ("host_firstread",)),
    Probe("gpu_read", ("gpu_read",)),
    Probe("memset_read", ("memset_read",)),
    Probe("memcpy_read", ("memcpy_read",)),
    Probe("dtod_read", ("dtod_read",)),
    Probe("dtod_host_read", ("dtod_read", "--init", "host")),
    Probe("host_read_drain", ("host_read_drain",), timeout_s=10.0, trace_of="host_read_stream"),
    Probe("host_read_nocpu", ("host_read_stream",), trace_of="host_read_stream",
          env={"UVMTRACE_UM_NO_CPU_FAULTS": "1"}),
    Probe("flood_gpu_read", ("flood_gpu_read",)),
    Probe("partial_16k", ("partial", "--extra-kib", "16")),
    Probe("partial_0k", ("partial", "--extra-kib", "0")),
    Probe("small_allocs", ("small_allocs",)),
    Probe("cpu_retouch_read", ("cpu_retouch", "--touch", "read")),
    Probe("cpu_retouch_write", ("cpu_retouch", "--touch", "write")),
    Probe("evict_order", ("evict_order",)),
)
BY_NAME = {p.name: p for p in PROBES}

RUN_COLUMNS = ["probe", "args", "factor", "status", "exit_status", "censored", "timeout_s",
               "footprint_bytes", "free_bytes", "reserve_bytes", "capacity_bytes",
               "free_at_exit_bytes", "gpu_total_bytes", "balloon_bytes", "real_s", "wall_s", "kernels_n",
               "kernel_ms"]
COUNTER_COLUMNS = ["gpu_fault_records", "gpu_page_faults", "htod_bytes", "htod_demand_bytes",
                   "htod_prefetch_bytes", "htod_user_bytes", "htod_access_counters_bytes",
                   "htod_eviction_bytes", "htod_unknown_bytes", "dtoh_bytes",
                   "dtoh_eviction_bytes", "dtoh_coherence_bytes", "dtoh_prefetch_bytes",
                   "dtoh_user_bytes", "dtoh_access_counters_bytes", "dtoh_unknown_bytes",
                   "cpu_page_faults", "remote_map_records", "remote_map_bytes", "thrashing",
                   "throttling"]
TAIL_COLUMNS = ["in_kernels_htod_bytes", "in_kernels_dtoh_bytes", "counter_records",
                "dropped_counter_records", "counter_kinds", "uvm_ranges", "main_group",
                "main_ranges", "main_range_bytes", "main_ranges_2m_aligned", "allocs",
                "accessed_by", "preferred_type", "read_mostly", "cpu_mapped_end",
                "pages_end", "trace", "gpu", "driver", "date", "error", "driver_htod_bytes",
                "driver_dtoh_bytes", "driver_gpu_faults", "driver_cpu_faults"]
PROBE_COLUMNS = RUN_COLUMNS + COUNTER_COLUMNS + TAIL_COLUMNS
KERNEL_COLUMNS = ["probe", "factor", "k", "name", "start_ns", "duration_ns"] + COUNTER_COLUMNS
PHASE_COLUMNS = ["probe", "factor", "i", "phase", "ms", "group", "cpu_mapped", "pages"]


def log(msg: str) -> None:
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def key(probe: str, factor: float) -> str:
    return f"{probe}__f{factor:g}"


# --------------------------------------------------------------------------- program output
def parse_probe_lines(text: str) -> list[dict[str, Any]]:
    """The program's ``PROBE {json}`` lines (others, and malformed ones, are skipped)."""
    out = []
    for line in text.splitlines():
        if line.startswith("PROBE "):
            try:
                out.append(json.loads(line[6:]))
            except json.JSONDecodeError:
                continue
    return out


def program_facts(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """What probes.csv keeps of a program's lines: its VA ranges, attributes and the pages
    of its first (main) group still mapped on the CPU after its last step."""
    f: dict[str, Any] = {"allocs": sum(1 for x in lines if x.get("t") == "alloc")}
    main = next((x["group"] for x in lines if x.get("t") == "alloc"), None)
    f["main_group"] = main
    maps = next((x for x in lines if x.get("t") == "maps"), None)
    if maps:
        f["uvm_ranges"] = maps.get("uvm_ranges")
        g = maps.get("groups", {}).get(main, {})
        f["main_ranges"] = g.get("ranges")
        f["main_range_bytes"] = g.get("range_bytes")
        f["main_ranges_2m_aligned"] = g.get("ranges_2m_aligned")
    attr = next((x for x in lines if x.get("t") == "attr" and x.get("group") == main), None)
    if attr:
        f["accessed_by"] = " ".join(str(v) for v in attr.get("accessed_by", []))
        f["preferred_type"] = attr.get("preferred_type")
        f["read_mostly"] = attr.get("read_mostly")
    phases = [x for x in lines if x.get("t") == "phase"]
    if phases and main in phases[-1].get("cpu_mapped", {}):
        f["cpu_mapped_end"], f["pages_end"] = phases[-1]["cpu_mapped"][main]
    return f


# --------------------------------------------------------------------------- device step
def footprint(binary: Path, probe: Probe) -> int:
    out = subprocess.run([str(binary), *probe.args, "--footprint"], capture_output=True,
                         text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"{binary} {shlex.join(probe.args)} --footprint exited "
                           f"{out.returncode}: {out.stderr.strip()[-300:]}")
    return int(out.stdout.split()[0])


def record_trace(binary: Path, probe: Probe, traces: Path, timeout_s: float = 90.0) -> int:
    """``uvmsim record`` of one probe into traces/<probe>.uvmtrace; returns its status."""
    out = traces / f"{probe.name}.uvmtrace"
    cmd = [sys.executable, "-m", "uvmsim.record", "-o", str(out), "--overwrite",
           "--notes", f"benchmarks/probes {probe.name}: {shlex.join(probe.args)}", "--",
           str(binary), *probe.args]
    t = time.time()
    try:
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            timeout=timeout_s).returncode
    except subprocess.TimeoutExpired:
        rc = 124
    log(f"record {probe.name}: rc={rc} {time.time() - t:.1f}s")
    return rc


def block_summary(raw: Path, label: str, work: Path) -> None:
    """um_blocks.py's per-kernel, per-2 MiB-block summary of one run, into blocks.jsonl."""
    import um_blocks
    from uvmsim.groundtruth import summarize_raw
    s = summarize_raw(raw)
    um, kact = s.get("um"), s.get("kact") or []
    if um is None or not len(um) or len(um) > MAX_BLOCK_RECORDS:
        return
    addr = um["address"][um["address"] > 0]
    base = int(addr.min()) if len(addr) else 0
    res = {"label": label,
           "kernels": [um_blocks.kernel_summary(i, k, um, base) for i, k in enumerate(kact)]}
    with open(work / "blocks.jsonl", "a") as f:
        f.write(json.dumps(res) + "\n")


def run_one(binary: Path, probe: Probe, factor: float, work: Path, lib: str | None,
            grace_s: float, counters: bool = True) -> dict[str, Any]:
    """One `uvmsim run` of a probe; the result JSON with the probe's name, its log's facts
    and a status (ok, censored, failed, refused, error) is written to work/runs/. Without
    `counters` the run collects no CUPTI records (its kernel times are then the program's
    own: the records' collection slows fault service; docs/validation.md)."""
    from uvmsim.groundtruth import RunError, run
    name = key(probe.name, factor)
    logf = work / "logs" / f"{name}.log"
    raw = work / "raw" / name
    shutil.rmtree(raw, ignore_errors=True)
    # the program's own stdout (its PROBE lines) goes to the log; exec keeps its pid, so the
    # collector injected into it is the process `uvmsim run` reads
    cmd = ["sh", "-c", 'exec "$0" "$@" >>"$UVMPROBE_LOG" 2>&1', str(binary), *probe.args]
    env = dict(probe.env, UVMPROBE_LOG=str(logf))
    res: dict[str, Any] = {"probe": probe.name, "args": shlex.join(probe.args),
                           "factor": factor}
    t = time.time()
    try:
        fp = footprint(binary, probe)
        r = run(cmd, factor=factor, footprint=fp, timeout_s=probe.timeout_s, lib=lib,
                counters=counters, keep_raw=raw if counters else None, extra_env=env,
                reserve=RESERVE, grace_s=grace_s)
        res.update(r)  # (its "trace" is None: the footprint is given, not read from a trace)
        res["status"] = ("censored" if r["censored"] else
                         "ok" if r["exit_status"] == 0 else "failed")
    except RunError as e:
        res.update(status="refused" if "refused" in str(e) else "error", error=str(e))
    except Exception as e:  # a failing probe must not stop the others
        res.update(status="error", error=f"{type(e).__name__}: {e}")
    res["replay_trace"] = probe.trace
    res["probe_lines"] = parse_probe_lines(logf.read_text() if logf.exists() else "")
    try:
        if raw.exists():
            block_summary(raw, name, work)
    except Exception as e:
        res["block_summary_error"] = f"{type(e).__name__}: {e}"
    shutil.rmtree(raw, ignore_errors=True)
    with gzip.open(work / "runs" / f"{name}.json.gz", "wt") as f:
        json.dump(res, f)
    t_ = res.get("totals", {})
    log(f"run {name}: {res['status']} real_s={res.get('real_s', float('nan')):.4f} "
        f"htod={t_.get('htod_bytes', 0) / 2**20:.1f}MiB dtoh={t_.get('dtoh_bytes', 0) / 2**20:.1f}MiB "
        f"gpu_fault_records={t_.get('gpu_fault_records', '-')} wall={time.time() - t:.1f}s"
        + (f" error={res['error'][:200]}" if res.get("error") else ""))
    return res


def device(out: Path, factors: list[float], probes: list[Probe], deadline_s: float,
           started_at: float, record: bool, binary: Path, lib: str | None = None,
           work: Path = WORK, grace_s: float = 10.0, counters: bool = True) -> int:
    for d in ("runs", "logs", "raw", "traces"):
        (work / d).mkdir(parents=True, exist_ok=True)

    def left_s() -> float:
        return deadline_s - (time.time() - started_at)

    not_done: list[str] = []
    if record:
        for name in dict.fromkeys(p.trace for p in probes):
            if (work / "traces" / f"{name}.uvmtrace" / "manifest.json").exists():
                continue
            if left_s() < 60:
                not_done.append(f"record {name}")
                continue
            record_trace(binary, BY_NAME[name], work / "traces")
    for f in factors:
        for p in probes:
            if (work / "runs" / f"{key(p.name, f)}.json.gz").exists():
                continue
            # worst case: the timeout, then the runner's kill `grace_s` later, then the summary
            if left_s() < p.timeout_s + grace_s + 5:
                not_done.append(key(p.name, f))
                continue
            run_one(binary, p, f, work, lib, grace_s, counters)
    log("not done (deadline; call again to resume): "
        + (", ".join(not_done) if not_done else "nothing"))
    assemble(work, out)
    pack_traces(work / "traces", out)
    return 0


# --------------------------------------------------------------------------- assembly
def _runs(work: Path) -> list[dict[str, Any]]:
    return [json.load(gzip.open(p)) for p in sorted((work / "runs").glob("*.json.gz"))]


def _num(x: Any) -> Any:
    return "" if x is None else x


def probe_row(r: dict[str, Any]) -> dict[str, Any]:
    """One probes.csv row from a run result (run_one's JSON)."""
    row = {c: "" for c in PROBE_COLUMNS}
    row.update(probe=r["probe"], args=r["args"], factor=f"{r['factor']:g}",
               status=r["status"], trace=r.get("replay_trace", ""), error=r.get("error", ""))
    if "totals" in r:
        k = r.get("kernels") or {}
        fb, res = r.get("free_bytes"), r.get("reserve_bytes", 0)
        attempts = [a for a in r.get("counter_attempts", []) if a.get("enable") == 0]
        row.update(exit_status=r["exit_status"], censored=str(r["censored"]).lower(),
                   timeout_s=f"{r['timeout_s']:g}", footprint_bytes=r["footprint_bytes"],
                   free_bytes=_num(fb), reserve_bytes=res,
                   capacity_bytes="" if fb is None else fb - res,
                   free_at_exit_bytes=_num(r.get("free_at_exit_bytes")),
                   gpu_total_bytes=_num(r.get("gpu_total_bytes")),
                   balloon_bytes=r.get("balloon_bytes", 0), real_s=f"{r['real_s']:.6f}",
                   wall_s=f"{r['wall_s']:.3f}", kernels_n=r["kernels_n"],
                   kernel_ms=";".join(f"{d / 1e6:.3f}" for d in k.get("duration_ns", [])),
                   in_kernels_htod_bytes=r["in_kernels"].get("htod_bytes", 0),
                   in_kernels_dtoh_bytes=r["in_kernels"].get("dtoh_bytes", 0),
                   counter_records=r.get("counter_records", 0),
                   dropped_counter_records=_num(r.get("dropped_counter_records")),
                   counter_kinds=attempts[-1].get("kinds", "") if attempts else "",
                   gpu=r.get("gpu", r.get("gpu_name", "")), driver=r.get("driver", ""),
                   date=r.get("date", ""))
        for c in COUNTER_COLUMNS:
            row[c] = r["totals"].get(c, 0)
        # the driver's own totals of the run, which CUPTI's records undercount
        # (native_trace/src/driver_counters.cpp; with the counters on)
        from uvmsim.groundtruth import driver_totals
        row.update({f"driver_{k}": v for k, v in driver_totals(r).items()})
    row.update({k: _num(v) for k, v in program_facts(r.get("probe_lines", [])).items()})
    return row


def kernel_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    k = r.get("kernels") or {}
    names = k.get("names", [])
    rows = []
    for i, d in enumerate(k.get("duration_ns", [])):
        row = {"probe": r["probe"], "factor": f"{r['factor']:g}", "k": i,
               "name": names[k["name_id"][i]].split("(")[0], "start_ns": k["start_ns"][i],
               "duration_ns": d}
        row.update({c: k.get(c, [0] * (i + 1))[i] for c in COUNTER_COLUMNS})
        rows.append(row)
    return rows


def phase_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    phases = [x for x in r.get("probe_lines", []) if x.get("t") == "phase"]
    for i, ph in enumerate(phases):
        for g, (mapped, pages) in sorted(ph.get("cpu_mapped", {}).items()):
            rows.append({"probe": r["probe"], "factor": f"{r['factor']:g}", "i": i,
                         "phase": ph["phase"], "ms": ph["ms"], "group": g,
                         "cpu_mapped": mapped, "pages": pages})
    return rows


def _write_csv(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow(row)


def assemble(work: Path, out: Path | None = None) -> Path:
    """results/{probes,kernels,phases}.csv and blocks.jsonl from work/; copied to out/."""
    runs = _runs(work)
    res = work / "results"
    res.mkdir(exist_ok=True)
    order = {p.name: i for i, p in enumerate(PROBES)}
    runs.sort(key=lambda r: (order.get(r["probe"], 99), r["factor"]))
    _write_csv(res / "probes.csv", PROBE_COLUMNS, [probe_row(r) for r in runs])
    _write_csv(res / "kernels.csv", KERNEL_COLUMNS, [x for r in runs for x in kernel_rows(r)])
    _write_csv(res / "phases.csv", PHASE_COLUMNS, [x for r in runs for x in phase_rows(r)])
    if (work / "blocks.jsonl").exists():
        shutil.copy(work / "blocks.jsonl", res / "blocks.jsonl")
    if out is not None:
        shutil.copytree(res, out / "results", dirs_exist_ok=True)
        with tarfile.open(out / "logs.tgz", "w:gz") as t:
            t.add(work / "logs", arcname="logs")
    log(f"assembled {len(runs)} runs into {res}")
    return res


def pack_traces(traces: Path, out: Path, max_tar: int = MAX_TAR) -> list[Path]:
    """The traces into tarballs of at most `max_tar` bytes each; a larger trace is left out
    (and said so)."""
    groups: list[list[Path]] = []
    size = max_tar
    for d in sorted(traces.glob("*.uvmtrace")):
        n = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
        if n > max_tar:
            log(f"trace {d.name} is {n / 2**20:.1f} MiB: too large to bring back, left out")
            continue
        if size + n > max_tar:
            groups.append([])
            size = 0
        groups[-1].append(d)
        size += n
    tars = []
    for i, g in enumerate(groups, 1):
        p = out / f"traces_{i}.tar.gz"
        with tarfile.open(p, "w:gz") as t:
            for d in g:
                t.add(d, arcname=d.name)
        tars.append(p)
        log(f"{p.name}: {len(g)} traces, {p.stat().st_size / 2**20:.2f} MiB")
    return tars


def summary(out: Path) -> str:
    """The short table the runner prints last: per probe and factor, real ms, HtoD and DtoH
    MiB and CUPTI GPU fault records (or the status when the run did not finish)."""
    path = out / "results" / "probes.csv"
    if not path.exists():
        return f"no {path}"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    factors = sorted({float(r["factor"]) for r in rows})
    cell: dict[tuple[str, float], str] = {}
    for r in rows:
        if r["status"] in ("ok", "censored"):
            v = (f"{float(r['real_s']) * 1e3:.0f}ms {int(r['htod_bytes']) / 2**20:.0f}/"
                 f"{int(r['dtoh_bytes']) / 2**20:.0f} f{r['gpu_fault_records']}")
            if r["status"] == "censored":
                v = ">" + v
        else:
            v = r["status"]
        cell[(r["probe"], float(r["factor"]))] = v
    names = list(dict.fromkeys(r["probe"] for r in rows))
    w = max(len(n) for n in names) if names else 5
    lines = ["probe".ljust(w) + "".join(f" | f{f:<24g}" for f in factors),
             "(cells: real ms, HtoD/DtoH MiB, CUPTI GPU fault records)"]
    for n in names:
        lines.append(n.ljust(w) + "".join(f" | {cell.get((n, f), '-'):<25}" for f in factors))
    return "\n".join(lines)


# --------------------------------------------------------------------------- dry run
FAKE = textwrap.dedent('''
    # Stands in for benchmarks/probes/probes.cu and the collector in a dry run: prints the
    # footprint, or writes the raw timing files `uvmsim run` reads and PROBE lines.
    import json, os, struct, sys
    args = sys.argv[1:]
    if "--footprint" in args:
        print(256 << 20)
        sys.exit(0)
    if args[0] == "evict_order" and os.environ.get("UVMTRACE_BALLOON_FOOTPRINT"):
        sys.exit(3)  # a failing probe: the others must go on
    out, pid = os.environ["UVMTRACE_OUT"], os.getpid()
    fp, target = int(os.environ["UVMTRACE_BALLOON_FOOTPRINT"]), int(os.environ["UVMTRACE_BALLOON_FREE_TARGET"])
    lines = [{"t": "meta", "pass": "timing"},
             {"t": "um_attempt", "when": "context_created", "scope": 1, "kinds": 7, "enable": 0},
             {"t": "balloon", "status": "ok", "free_before": 80 << 30, "total": 80 << 30,
              "footprint": fp, "free_target": target, "balloon": (80 << 30) - target,
              "free_after": target, "allocs": 1, "t_ns": 1000}]
    for i, (s, e) in enumerate([(100, 150), (200, 260)]):
        lines.append({"t": "kact", "corr": i + 1, "name": f"k_read(float const*)", "start": s,
                      "end": e, "grid": "1,1,1", "block": "1,1,1"})
    end = {"t": "end", "how": "exit", "kernels": 2, "managed_peak": fp,
           "dropped_records": 0, "t_ns": 3000}
    if os.environ.get("UVMTRACE_DRIVER_COUNTERS") == "1":  # as the collector's timing pass
        end["driver_counters"] = {"status": "ok", "htod_bytes": 9 << 20, "dtoh_bytes": 5 << 20,
                                  "gpu_faults": 77, "cpu_faults": 3}
    lines.append(end)
    with open(f"{out}/timing.{pid}.jsonl", "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\\n")
    recs = [(4, 1, 3, 110, 1 << 30), (1, 2, 4096, 111, 1 << 30), (1, 3, 61440, 112, 1 << 30),
            (2, 4, 2 << 20, 210, (1 << 30) + (2 << 20)), (2, 2, 65536, 300, 1 << 30),
            (3, 0, 0, 50, 1 << 30), (7, 1, 65536, 220, 1 << 30)]
    with open(f"{out}/timing.{pid}.bin", "wb") as f:
        for counter, flags, value, start, addr in recs:
            f.write(struct.pack("<IIQQQQII", counter, flags, value, start, start + 1, addr, 0, 0))
    P = lambda d: print("PROBE " + json.dumps(d))
    P({"t": "alloc", "group": "A", "base": 1 << 30, "size": 256 << 20})
    P({"t": "maps", "uvm_ranges": 3, "groups": {"A": {"ranges": 1, "range_bytes": 256 << 20,
       "ranges_2m_aligned": 1, "first": [[1 << 30, 256 << 20]]}}, "allocs_outside_uvm_maps": {}})
    P({"t": "attr", "group": "A", "read_mostly": 0, "preferred_type": 0, "preferred_id": -9,
       "accessed_by": [-2, -2, -2, -2]})
    P({"t": "phase", "phase": "host_write", "ms": 80.0, "cpu_mapped": {"A": [65536, 65536]}})
    P({"t": "phase", "phase": "k_read", "ms": 1.5, "cpu_mapped": {"A": [1024, 65536]}})
    print("not a probe line")
''')


def dry(out: Path) -> int:
    """The device step on fake inputs (no GPU): checks the runner's logic end to end."""
    import pandas as pd
    from uvmsim.trace import synth
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    fake = out / "fake_probe.py"
    fake.write_text(FAKE)
    (out / "fake_probe").write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} "
                                    f"{shlex.quote(str(fake))} \"$@\"\n")
    (out / "fake_probe").chmod(0o755)
    lib = out / "libfake.so"  # never loaded: the fake program uses no CUDA
    lib.write_text("")
    # `uvmsim run` refuses a machine without a GPU; the fake program needs none
    os.environ["UVMSIM_SKIP_GPU_CHECK"] = "1"
    probes = [BY_NAME["host_read_stream"], BY_NAME["host_read_nocpu"], BY_NAME["evict_order"]]
    (work / "traces").mkdir(parents=True)
    synth.write("sequential", work / "traces" / "host_read_stream.uvmtrace",
                footprint_bytes=64 << 20, kernels=2)
    rc = device(out, [1.0, 2.0], probes, deadline_s=600, started_at=time.time(), record=False,
                binary=out / "fake_probe", lib=str(lib), work=work, grace_s=5)
    # the deadline: nothing is started when no time is left, and that is said
    device(out, [1.5], probes[:1], deadline_s=0, started_at=time.time(), record=False,
           binary=out / "fake_probe", lib=str(lib), work=work, grace_s=5)
    p = pd.read_csv(out / "results" / "probes.csv")
    k = pd.read_csv(out / "results" / "kernels.csv")
    ph = pd.read_csv(out / "results" / "phases.csv")
    checks = {
        "6 runs, one per probe and factor": len(p) == 6,
        "failing probe kept as failed": set(p.loc[p.probe == "evict_order", "status"]) == {"failed"},
        "others ok": set(p.loc[p.probe != "evict_order", "status"]) == {"ok"},
        "capacity = free - reserve": bool((p[p.status == "ok"].capacity_bytes
                                           == p[p.status == "ok"].free_bytes - RESERVE).all()),
        "fault records, demand, prefetch": (p.loc[0, ["gpu_fault_records", "htod_demand_bytes",
                                                      "htod_prefetch_bytes"]].tolist()
                                            == [1, 4096, 61440]),
        "DtoH by cause": (p.loc[0, ["dtoh_eviction_bytes", "dtoh_coherence_bytes"]].tolist()
                          == [2 << 20, 65536]),
        "remote map and CPU faults": (p.loc[0, ["remote_map_records", "remote_map_bytes",
                                                "cpu_page_faults"]].tolist() == [1, 65536, 1]),
        "CPU-mapped pages after the last step": (p.loc[0, ["cpu_mapped_end", "pages_end"]]
                                                 .tolist() == [1024, 65536]),
        "VA ranges": p.loc[0, "main_ranges"] == 1 and p.loc[0, "uvm_ranges"] == 3,
        "per-kernel rows": len(k) == 8 and k.loc[0, "gpu_fault_records"] == 1,
        "phase rows": len(ph) == 8,
        "traces packed": bool(list(out.glob("traces_*.tar.gz"))),
        "per-block summaries": (out / "results" / "blocks.jsonl").exists(),
    }
    print(summary(out))
    print(f"not done by deadline is reported: see '{out}'/... (log above)")
    # the analysis on the dry results: unpack the tarball, replay, write the table
    r = subprocess.run([sys.executable, str(HERE / "analyze.py"), str(out / "results"),
                        "--traces", str(out)], capture_output=True, text=True)
    checks["analyze.py runs"] = r.returncode == 0 and (out / "results" / "probe_table.md").exists()
    if checks["analyze.py runs"]:
        t = pd.read_csv(out / "results" / "probe_table.csv")
        checks["a probe replays another's trace"] = bool(
            t.loc[t.probe == "host_read_nocpu", "replay_s"].notna().all())
        checks["a failed run is not replayed"] = bool(
            t.loc[t.probe == "evict_order", "replay_s"].isna().all())
    if r.returncode:
        print(r.stdout[-2000:], r.stderr[-2000:])
    bad = [c for c, ok in checks.items() if not ok]
    for c, ok in checks.items():
        print(f"dry check: {'ok  ' if ok else 'FAIL'} {c}")
    return 1 if bad or rc else 0


# --------------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("device")
    d.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out/probes_out"))
    d.add_argument("--factors", default=",".join(f"{f:g}" for f in FACTORS))
    d.add_argument("--probes", default="", help="comma-separated names (default: all)")
    d.add_argument("--deadline-s", type=float, default=230.0)
    d.add_argument("--started-at", type=float, default=None,
                   help="epoch seconds the deadline counts from (default: now)")
    d.add_argument("--no-record", action="store_true", help="make no traces")
    d.add_argument("--bin", default=str(BIN))
    d.add_argument("--no-counters", action="store_true",
                   help="runs without CUPTI's counters: the kernel times alone (work folder "
                        "benchmarks/out/probes_quiet unless --work)")
    d.add_argument("--work", default=None, help=f"runs, logs and traces (default {WORK})")
    a = sub.add_parser("assemble")
    a.add_argument("work", nargs="?", default=str(WORK))
    a.add_argument("--out")
    s = sub.add_parser("summary")
    s.add_argument("out")
    y = sub.add_parser("dry")
    y.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out/probes_dry"))
    args = ap.parse_args(argv)
    if args.cmd == "device":
        names = [x.strip() for x in args.probes.split(",") if x.strip()]
        unknown = set(names) - set(BY_NAME)
        if unknown:
            ap.error(f"--probes: unknown {sorted(unknown)}; known: {', '.join(BY_NAME)}")
        try:
            factors = [float(x) for x in args.factors.split(",") if x.strip()]
        except ValueError:
            ap.error(f"--factors {args.factors!r}: expected numbers separated by commas")
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        work = Path(args.work) if args.work else (
            WORK.with_name("probes_quiet") if args.no_counters else WORK)
        return device(out, factors, [BY_NAME[n] for n in names] if names else list(PROBES),
                      args.deadline_s, args.started_at or time.time(), not args.no_record,
                      Path(args.bin), work=work, counters=not args.no_counters)
    if args.cmd == "assemble":
        assemble(Path(args.work), Path(args.out) if args.out else None)
        return 0
    if args.cmd == "summary":
        print(summary(Path(args.out)))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return dry(out)


if __name__ == "__main__":
    sys.exit(main())
