"""The validation suite's device step: traces and real oversubscribed runs (docs/groundtruth.md).

    python3 benchmarks/validate/validate.py [--steps trace,real] [--workloads a,b]
        [--factors 1,1.25,1.5,2,3] [--deadline-s S] [--force] [--out DIR]

Workloads come from benchmarks/validate/workloads.csv (name, kind, split, pattern, init,
timeout, command with {bin}, {py} and {managed} placeholders).

* ``trace``: ``uvmsim record`` of each workload into traces/<workload>.uvmtrace (git-ignored)
  and its managed footprint (peak live managed bytes) into results/footprints.csv. Separate
  from the real runs, so the traces can be re-recorded with another collector.
* ``reserve``: the GPU memory a CUDA context and the UVM driver take for themselves after the
  balloon (module code, local memory, ...), per kind (cuda, torch), into results/reserve.json:
  the smallest of RESERVE_CANDIDATES with which a factor-1 run of a probe workload evicts
  nothing (CUPTI DtoH bytes inside kernels <= 1 % of the footprint). The balloon then leaves
  ``footprint / F + reserve`` free, so the managed data really gets ``footprint / F``.
* ``real``: ``uvmsim run`` of each workload at each factor with the footprint of
  results/footprints.csv: a timing run without CUPTI's unified-memory counters (they slow a
  thrashing program down by up to ~1.6x, so times never come from them) gives ``real_s``; a
  second run with the counters gives faults and bytes, at the factors of --counter-factors and
  only when the timing run took less than --counter-max-s. One row per (workload, factor) in
  results/real_runs.csv and the runs' JSON in results/runs/. A row already in real_runs.csv is
  skipped (resumable) unless --force.

``--deadline-s`` stops starting work that might not finish by then (device calls are short).
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))
# children (`python -m uvmsim.record`) import the package from src/ too
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO / "src")] + [x for x in [os.environ.get("PYTHONPATH")] if x])

RESULTS = HERE / "results"
TRACES = HERE / "traces"
BIN = HERE / "build" / "uvm_workloads"
FILL = HERE / "build" / "fill_probe"
# Footprints are a property of the program, not of the card: a results folder of another
# card (--results) reads them from here when its own footprints.csv lacks the workload.
DEFAULT_RESULTS = RESULTS
MANAGED = REPO / "native_trace" / "build" / "libuvmmanaged.so"
FACTORS = (1.0, 1.25, 1.5, 2.0, 3.0)
RUN_COLUMNS = ["workload", "kind", "factor", "real_s", "censored", "timeout_s", "faults",
               "htod_bytes", "dtoh_bytes", "footprint_bytes", "free_bytes", "kernels",
               "split", "reserve_bytes", "wall_s", "exit_status", "balloon_bytes",
               "free_at_exit_bytes", "managed_peak_bytes", "counters_real_s",
               "counters_censored", "gpu_fault_records", "htod_demand_bytes",
               "htod_prefetch_bytes", "dtoh_eviction_bytes", "thrashing", "throttling", "date",
               "card", "driver_htod_bytes", "driver_dtoh_bytes", "driver_gpu_faults",
               "driver_cpu_faults", "counters_driver_htod_bytes", "counters_driver_dtoh_bytes"]
RESERVE_CANDIDATES_MIB = (0, 16, 32, 64, 128, 256, 512)
RESERVE_PROBE = {"cuda": "stream", "torch": "mlp_pca"}
FOOT_COLUMNS = ["workload", "footprint_bytes", "trace_kernels", "trace_rows", "trace_bytes",
                "record_s", "record_status", "date"]
T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def load_workloads(path: Path = HERE / "workloads.csv") -> list[dict[str, str]]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for i, r in enumerate(rows, 2):
        if r["kind"] not in ("cuda", "torch") or r["split"] not in ("fit", "holdout"):
            raise SystemExit(f"{path}:{i}: kind must be cuda|torch and split fit|holdout")
    return rows


def command(w: dict[str, str]) -> list[str]:
    line = w["command"].format(bin=BIN, fill=FILL, py=sys.executable, managed=MANAGED)
    return shlex.split(line)


def read_csv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def upsert(path: Path, columns: list[str], row: dict, key: tuple[str, ...]) -> None:
    """Replace the row with the same key (or append), keeping the file sorted by key."""
    rows = [r for r in read_csv(path) if tuple(str(r[k]) for k in key)
            != tuple(str(row[k]) for k in key)]
    rows.append({c: row.get(c, "") for c in columns})
    rows.sort(key=lambda r: tuple(str(r[k]) for k in key))
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=columns)
        wr.writeheader()
        for r in rows:
            wr.writerow({c: r.get(c, "") for c in columns})
    tmp.replace(path)


def build() -> None:
    BIN.parent.mkdir(exist_ok=True)
    for exe, src in ((BIN, HERE / "workloads.cu"), (FILL, HERE / "fill_probe.cu")):
        if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
            cc = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap",
                                 "--format=csv,noheader"], capture_output=True,
                                text=True).stdout.split()[0].replace(".", "")
            subprocess.run(["nvcc", "-O2", f"-arch=sm_{cc}", "-o", str(exe), str(src)],
                           check=True)


def trace_budget_s(w: dict[str, str]) -> float:
    """Seconds to leave for recording `w`: three times its last recording (footprints.csv,
    this card's folder first) and 20 s, between 30 and 120 s; 120 s when it was never
    recorded. (A fixed 120 s left a 200 s trace step with 14 workloads of 3-15 s each
    recording five.)"""
    for folder in (RESULTS, DEFAULT_RESULTS):
        row = {r["workload"]: r for r in read_csv(folder / "footprints.csv")}.get(w["workload"])
        try:
            took = float(row["record_s"]) if row else float("nan")
        except (TypeError, ValueError):
            took = float("nan")
        if took == took and took >= 0:
            return min(120.0, max(30.0, 3 * took + 20))
    return 120.0


def do_trace(w: dict[str, str], deadline: float) -> None:
    from uvmsim.groundtruth import peak_live_managed_bytes
    from uvmsim.trace import load_trace
    out = TRACES / f"{w['workload']}.uvmtrace"
    TRACES.mkdir(exist_ok=True)
    t = time.time()
    cmd = [sys.executable, "-m", "uvmsim.record", "-o", str(out), "--overwrite",
           "--notes", f"validation workload {w['workload']} ({w['pattern']}, init {w['init']})",
           "--"] + command(w)
    log(f"trace {w['workload']}: {shlex.join(cmd)}")
    try:
        rc = subprocess.run(cmd, timeout=max(30.0, deadline - (time.time() - T0))).returncode
    except subprocess.TimeoutExpired:
        rc = 124
    took = time.time() - t
    row = {"workload": w["workload"], "record_s": f"{took:.1f}", "record_status": rc,
           "date": time.strftime("%Y-%m-%dT%H:%M:%S")}
    if rc == 0 and (out / "manifest.json").exists():
        tr = load_trace(out)
        row.update(footprint_bytes=peak_live_managed_bytes(tr), trace_kernels=tr.n_kernels,
                   trace_rows=tr.n_accesses,
                   trace_bytes=sum(p.stat().st_size for p in out.iterdir()))
    log(f"trace {w['workload']}: rc={rc} {took:.1f}s {row}")
    upsert(RESULTS / "footprints.csv", FOOT_COLUMNS, row, ("workload",))


def footprint_of(w: dict[str, str]) -> int:
    fp = ({r["workload"]: r for r in read_csv(RESULTS / "footprints.csv")}.get(w["workload"])
          or {r["workload"]: r for r in read_csv(DEFAULT_RESULTS / "footprints.csv")}
          .get(w["workload"]))
    if not fp or not fp.get("footprint_bytes"):
        raise SystemExit(f"{w['workload']}: no footprint in results/footprints.csv: "
                         "run the trace step first")
    return int(fp["footprint_bytes"])


def do_reserve(ws_all: list[dict[str, str]], kinds: set[str]) -> None:
    from uvmsim.groundtruth import run
    path = RESULTS / "reserve.json"
    found = json.loads(path.read_text()) if path.exists() else {}
    byname = {w["workload"]: w for w in ws_all}
    for kind in sorted(kinds):
        w = byname[RESERVE_PROBE[kind]]
        fp = footprint_of(w)
        tried = []
        for mib in RESERVE_CANDIDATES_MIB:
            r = run(command(w), factor=1.0, footprint=fp, timeout_s=60, reserve=mib << 20)
            ev = r["in_kernels"]["dtoh_bytes"]
            tried.append({"reserve_mib": mib, "dtoh_in_kernels": ev, "real_s": r["real_s"],
                          "free_bytes": r["free_bytes"],
                          "free_at_exit_bytes": r["free_at_exit_bytes"]})
            log(f"reserve {kind} ({w['workload']}): {mib} MiB -> DtoH in kernels "
                f"{ev / 2**20:.1f} MiB, real_s {r['real_s']:.4f}, free at exit "
                f"{r['free_at_exit_bytes']}")
            if ev <= fp // 100:
                found[kind] = {"reserve_bytes": mib << 20, "probe": w["workload"],
                               "tried": tried}
                break
        else:
            raise SystemExit(f"reserve {kind}: even {RESERVE_CANDIDATES_MIB[-1]} MiB left "
                             f"{w['workload']} evicting at factor 1: {tried}")
    path.write_text(json.dumps(found, indent=1) + "\n")


def reserve_of(kind: str) -> int:
    path = RESULTS / "reserve.json"
    found = json.loads(path.read_text()) if path.exists() else {}
    if kind not in found:
        raise SystemExit(f"no reserve for {kind} in {path}: run the reserve step first")
    return int(found[kind]["reserve_bytes"])


def run_row(w: dict[str, str], r: dict, c: dict | None) -> dict:
    """The real_runs.csv row of a timing run `r` and its counter run `c` (or None). A run that
    failed (neither exit 0 nor censored) has no real_s: see exit_status and its JSON."""
    failed = r["exit_status"] != 0 and not r["censored"]
    row = {"workload": w["workload"], "kind": w["kind"], "factor": f"{r['factor']:g}",
           "real_s": "" if failed else f"{r['real_s']:.6f}",
           "censored": str(r["censored"]).lower(),
           "timeout_s": f"{r['timeout_s']:g}", "footprint_bytes": r["footprint_bytes"],
           "free_bytes": r["free_bytes"], "kernels": r["kernels_n"], "split": w["split"],
           "reserve_bytes": r["reserve_bytes"], "wall_s": f"{r['wall_s']:.3f}",
           "exit_status": r["exit_status"], "balloon_bytes": r["balloon_bytes"],
           "free_at_exit_bytes": r["free_at_exit_bytes"],
           "managed_peak_bytes": r["managed_peak_bytes"], "date": r["date"],
           "card": r.get("gpu", "")}
    # the driver's lossless totals (groundtruth.py): of the timing run at every factor, and
    # of the counter run, the same run as CUPTI's records (so their difference is CUPTI's loss)
    from uvmsim.groundtruth import driver_totals
    for prefix, run in (("driver_", r), ("counters_driver_", c)):
        row.update({prefix + k: v for k, v in driver_totals(run).items()
                    if prefix + k in RUN_COLUMNS})
    if c is not None:
        t = c["totals"]
        row.update(faults=t["gpu_page_faults"], htod_bytes=t["htod_bytes"],
                   dtoh_bytes=t["dtoh_bytes"], counters_real_s=f"{c['real_s']:.6f}",
                   counters_censored=str(c["censored"]).lower(),
                   gpu_fault_records=t["gpu_fault_records"],
                   htod_demand_bytes=t["htod_demand_bytes"],
                   htod_prefetch_bytes=t["htod_prefetch_bytes"],
                   dtoh_eviction_bytes=t["dtoh_eviction_bytes"], thrashing=t["thrashing"],
                   throttling=t["throttling"])
    return row


def rebuild() -> None:
    """real_runs.csv again from the run JSONs in results/runs/ (after a change of columns)."""
    byname = {w["workload"]: w for w in load_workloads()}
    path = RESULTS / "real_runs.csv"
    path.unlink(missing_ok=True)
    for p in sorted((RESULTS / "runs").glob("*.json.gz")):
        if p.name.endswith("__counters.json.gz"):
            continue
        r = json.load(gzip.open(p))
        cp = p.with_name(p.name.replace(".json.gz", "__counters.json.gz"))
        c = json.load(gzip.open(cp)) if cp.exists() else None
        r.setdefault("kernels_incomplete", 0)
        upsert(path, RUN_COLUMNS, run_row(byname[r["workload"]], r, c), ("workload", "factor"))


MAX_TIMEOUT_S = float("inf")


def timeout_of(w: dict[str, str]) -> float:
    """The workload's timeout, capped by --max-timeout-s (a shorter device call)."""
    return min(float(w["timeout_s"]), MAX_TIMEOUT_S)


def do_real(w: dict[str, str], factor: float, counter_factors: set[float],
            counter_max_s: float) -> None:
    from uvmsim.groundtruth import run
    fp, reserve = footprint_of(w), reserve_of(w["kind"])
    name = f"{w['workload']}__f{factor:g}"
    (RESULTS / "runs").mkdir(parents=True, exist_ok=True)
    kw = dict(factor=factor, footprint=fp, timeout_s=timeout_of(w), reserve=reserve)
    r = run(command(w), counters=False, **kw)
    c = None
    if factor in counter_factors and not r["censored"] and r["wall_s"] < counter_max_s:
        c = run(command(w), counters=True, **kw)
    for x, tag in ((r, ""), (c, "__counters")):
        if x is not None:
            x["workload"], x["kind"], x["split"] = w["workload"], w["kind"], w["split"]
            with gzip.open(RESULTS / "runs" / f"{name}{tag}.json.gz", "wt") as f:
                json.dump(x, f)
    row = run_row(w, r, c)
    upsert(RESULTS / "real_runs.csv", RUN_COLUMNS, row, ("workload", "factor"))
    log(f"real {name}: real_s={row['real_s']} censored={row['censored']} "
        f"faults={row.get('faults', '-')} htod={row.get('htod_bytes', '-')} "
        f"dtoh={row.get('dtoh_bytes', '-')} counters_real_s={row.get('counters_real_s', '-')} "
        f"free={r['free_bytes']} exit={r['exit_status']}")


def pack(out: Path, traced: list[dict[str, str]], max_tar: int = 15 << 20) -> None:
    """results.tgz (CSVs and run JSONs) and the traces in tarballs of at most `max_tar` bytes
    each (the device returns at most 16 MiB per file)."""
    out.mkdir(parents=True, exist_ok=True)
    items = [n for n in ("real_runs.csv", "footprints.csv", "reserve.json", "runs")
             if (RESULTS / n).exists()]
    if items:
        subprocess.run(["tar", "czf", str(out / "results.tgz"), "-C", str(RESULTS)] + items)
    # first fit, largest first: the device returns at most 8 files, so the traces (about
    # 80 MB for the H100 folder's 14 workloads) must fill as few tarballs as they can
    sizes = {}
    for w in traced:
        d = TRACES / f"{w['workload']}.uvmtrace"
        if not d.exists():
            continue
        n = sum(p.stat().st_size for p in d.iterdir())
        if n > max_tar:
            log(f"trace {d.name} is {n / 2**20:.1f} MiB: too large to bring back, kept on device")
            continue
        sizes[d.name] = n
    groups: list[list[str]] = []
    room: list[int] = []
    for name in sorted(sizes, key=lambda k: -sizes[k]):
        i = next((i for i, r in enumerate(room) if r >= sizes[name]), len(groups))
        if i == len(groups):
            groups.append([])
            room.append(max_tar)
        groups[i].append(name)
        room[i] -= sizes[name]
    for i, g in enumerate(groups, 1):
        subprocess.run(["tar", "cf", str(out / f"traces_{i}.tar"), "-C", str(TRACES)] + g)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", default="trace,real")
    ap.add_argument("--workloads", default="", help="comma-separated names (default: all)")
    ap.add_argument("--factors", default=",".join(f"{f:g}" for f in FACTORS))
    ap.add_argument("--counter-factors", default="1,1.5,2",
                    help="factors at which a second run collects CUPTI's UVM counters")
    ap.add_argument("--counter-max-s", type=float, default=20.0,
                    help="no counter run after a timing run longer than this (wall seconds)")
    ap.add_argument("--deadline-s", type=float, default=540.0,
                    help="start no step that could end after this many seconds")
    ap.add_argument("--force", action="store_true", help="redo runs already in real_runs.csv")
    ap.add_argument("--results", default=os.environ.get("VALIDATE_RESULTS"),
                    help="results folder (default benchmarks/validate/results; one per card, "
                         "e.g. results/h100: runs compare only on the card they came from)")
    ap.add_argument("--max-timeout-s", type=float, default=float("inf"),
                    help="cap every workload's timeout (a censored run then bounds a cliff "
                         "by this many seconds)")
    ap.add_argument("--rebuild", action="store_true",
                    help="only rewrite real_runs.csv from results/runs/*.json.gz")
    ap.add_argument("--out", default=os.environ.get("OUT"),
                    help="write results.tgz (CSVs, run JSONs) and traces_N.tar here")
    a = ap.parse_args()
    global RESULTS, MAX_TIMEOUT_S
    if a.results:
        RESULTS = Path(a.results).resolve()
    if not a.max_timeout_s > 0:
        raise SystemExit(f"--max-timeout-s: expected a positive number, got {a.max_timeout_s}")
    MAX_TIMEOUT_S = a.max_timeout_s
    if a.rebuild:
        rebuild()
        return 0
    steps = {s.strip() for s in a.steps.split(",") if s.strip()}
    if steps - {"trace", "reserve", "real"}:
        raise SystemExit(f"--steps {a.steps!r}: expected trace, reserve and/or real")
    factors = [float(x) for x in a.factors.split(",") if x.strip()]
    counter_factors = {float(x) for x in a.counter_factors.split(",") if x.strip()}
    ws = ws_all = load_workloads()
    if a.workloads:
        want = [x.strip() for x in a.workloads.split(",") if x.strip()]
        unknown = set(want) - {w["workload"] for w in ws}
        if unknown:
            raise SystemExit(f"--workloads: unknown {sorted(unknown)}")
        ws = [w for w in ws if w["workload"] in want]
    RESULTS.mkdir(parents=True, exist_ok=True)
    build()
    done = {(r["workload"], float(r["factor"])) for r in read_csv(RESULTS / "real_runs.csv")}
    left: list[str] = []
    if "trace" in steps:
        for w in ws:
            if time.time() - T0 + trace_budget_s(w) > a.deadline_s:
                left.append(f"trace {w['workload']}")
            else:
                do_trace(w, a.deadline_s)
    if "reserve" in steps:
        do_reserve(ws_all, {w["kind"] for w in ws})
    for w in ws:
        if "real" in steps:
            for f in factors:
                if (w["workload"], f) in done and not a.force:
                    continue
                if time.time() - T0 + timeout_of(w) + 30 > a.deadline_s:
                    left.append(f"real {w['workload']} f={f:g}")
                    continue
                do_real(w, f, counter_factors, a.counter_max_s)
    log("not done (deadline): " + (", ".join(left) if left else "nothing"))
    if a.out:
        pack(Path(a.out), ws if "trace" in steps else [])
    return 0


if __name__ == "__main__":
    sys.exit(main())
