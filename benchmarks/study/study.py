"""The study's device step: traces and real oversubscribed runs of the six DL models, PCA on and
off (docs/study-dl-oversubscription.md). It reuses the validation suite's machinery
(benchmarks/validate/validate.py: commands, `uvmsim record`, footprints, the measured reserve).

    python3 benchmarks/study/study.py [--steps trace,real] [--models alexnet,gpt2] [--pca on,off]
        [--plan t1,t1.5,c1.5,...] [--deadline-s S] [--out DIR] [--rebuild]

* ``trace``: `uvmsim record` of each workload (``<model>_<pca>``) into benchmarks/study/traces/
  (git-ignored; large), ``--jobs`` at a time, the longest first, its footprint into
  results/detail/footprints.csv, and the per-kernel working sets of all traces present into
  results/working_sets.csv.gz.
* ``real``: `uvmsim run` of each workload in the rounds of ``--plan``: ``t<F>`` is a timing run
  (without CUPTI's counters, which slow thrashing programs down) of every workload at factor F,
  ``c<F>`` a counter run (faults and bytes) of every workload whose timing run at F finished in
  less than --counter-max-s, so that a short device call covers the low factors of all models
  first. The run JSONs go to results/runs/ and one row per (model, pca, factor) to
  results/real_runs.csv. A factor is skipped once a lower one of the same workload was censored
  (it could only be slower). Rows already there are skipped (resumable).

``iter_s`` is the kernel time of the last training step: the kernels after the last
``spin_kernel`` marker that models.py launches before each step. A censored run's ``iter_s`` is
the lower bound ``(T - kernel time before the first step) / steps`` (T = the timeout), shown
as "> iter_s" in the plots and docs. ``faults`` is the CUPTI GPU page-fault count of the
counter run (empty where there was none).
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
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks" / "validate"))
import validate as V  # noqa: E402  (the validation suite's machinery)

RESULTS = HERE / "results"
MODELS = ("alexnet", "resnet50", "resnet101", "gpt2", "bert", "whisper")
STEPS = 2
#: the rounds of real runs: low factors of every workload first (device calls are short)
PLAN = "t1,t1.5,c1.5,t2,c1,t1.25,t3,c2,t4,t6,t10"
COLUMNS = ["model", "pca", "factor", "iter_s", "censored", "faults", "htod_bytes", "dtoh_bytes",
           "timeout_s", "real_s", "footprint_bytes", "free_bytes", "kernels", "exit_status",
           "counters_iter_s", "gpu_fault_records", "htod_demand_bytes", "dtoh_eviction_bytes",
           "date"]
MARKER = "spin_kernel"

# the validation suite's functions write their files under its RESULTS/TRACES: point them here
V.RESULTS, V.TRACES = RESULTS / "detail", HERE / "traces"
_lock = threading.Lock()
_upsert = V.upsert


def _locked_upsert(*a, **k):
    with _lock:
        _upsert(*a, **k)


V.upsert = _locked_upsert   # do_trace runs in threads


def workloads(models=MODELS, pcas=("on", "off"), timeout_s: float = 30.0) -> list[dict]:
    out = []
    for m in models:
        for p in pcas:
            env = "" if p == "on" else "PYTORCH_NO_CUDA_MEMORY_CACHING=1 "
            out.append({"workload": f"{m}_{p}", "model": m, "pca": p, "kind": "torch",
                        "split": "study", "pattern": "dl-training", "init": "copy",
                        "timeout_s": str(timeout_s),
                        "command": f"env LD_PRELOAD={{managed}} {env}{{py}} "
                                   f"benchmarks/study/models.py --model {m} --steps {STEPS}"})
    return out


def torch_reserve() -> int:
    """The PyTorch reserve measured by the validation suite (results/reserve.json)."""
    p = REPO / "benchmarks" / "validate" / "results" / "reserve.json"
    return int(json.loads(p.read_text())["torch"]["reserve_bytes"])


def iter_seconds(r: dict) -> tuple[float | None, float]:
    """(kernel time of the last step or None when no step finished, kernel time before the
    first step) from a run result's per-kernel columns."""
    k = r.get("kernels") or {}
    names, ids, dur = k.get("names", []), k.get("name_id", []), k.get("duration_ns", [])
    marks = [i for i, n in enumerate(ids) if MARKER in names[n]]
    if not marks:
        return None, sum(dur) / 1e9
    setup = sum(dur[: marks[0]]) / 1e9
    if len(marks) < STEPS or r["censored"] or r["exit_status"] != 0:
        return None, setup
    return sum(dur[marks[-1] + 1:]) / 1e9, setup


def row_of(w: dict, r: dict, c: dict | None) -> dict:
    it, setup = iter_seconds(r)
    if r["censored"]:
        it = max(0.0, r["timeout_s"] - setup) / STEPS
    row = {"model": w["model"], "pca": w["pca"], "factor": f"{r['factor']:g}",
           "iter_s": "" if it is None else f"{it:.6f}",
           "censored": str(bool(r["censored"])).lower(), "timeout_s": f"{r['timeout_s']:g}",
           "real_s": "" if r["real_s"] is None else f"{r['real_s']:.6f}",
           "footprint_bytes": r["footprint_bytes"], "free_bytes": r["free_bytes"],
           "kernels": r["kernels_n"], "exit_status": r["exit_status"], "date": r["date"]}
    if c is not None:
        t = c["totals"]
        ci, _ = iter_seconds(c)
        row.update(faults=t["gpu_page_faults"], htod_bytes=t["htod_bytes"],
                   dtoh_bytes=t["dtoh_bytes"], gpu_fault_records=t["gpu_fault_records"],
                   htod_demand_bytes=t["htod_demand_bytes"],
                   dtoh_eviction_bytes=t["dtoh_eviction_bytes"],
                   counters_iter_s="" if ci is None else f"{ci:.6f}")
    return row


def working_sets() -> None:
    """results/working_sets.csv.gz: the per-kernel working sets of the traces present
    (uvmsim.plot.working_set_table), replacing those traces' rows and keeping the others', so
    the figure needs no traces."""
    import pandas as pd
    from uvmsim.plot import working_set_table
    traces = {p.name.removesuffix(".uvmtrace"): p for p in sorted(V.TRACES.glob("*.uvmtrace"))
              if (p / "manifest.json").exists()}
    if not traces:
        return
    path = RESULTS / "working_sets.csv.gz"
    new = working_set_table(traces)
    if path.exists():
        old = pd.read_csv(path)
        new = pd.concat([old[~old["trace"].isin(list(traces))], new], ignore_index=True)
    new.sort_values(["trace", "kernel"], kind="stable").to_csv(path, index=False)
    V.log(f"working sets of {len(traces)} traces")


def rebuild() -> None:
    """results/real_runs.csv again from the run JSONs (after a change of columns)."""
    path = RESULTS / "real_runs.csv"
    path.unlink(missing_ok=True)
    byname = {w["workload"]: w for w in workloads()}
    for p in sorted((RESULTS / "runs").glob("*.json.gz")):
        if p.name.endswith("__counters.json.gz"):
            continue
        r = json.load(gzip.open(p))
        cp = p.with_name(p.name.replace(".json.gz", "__counters.json.gz"))
        c = json.load(gzip.open(cp)) if cp.exists() else None
        V.upsert(path, COLUMNS, row_of(byname[r["workload"]], r, c), ("model", "pca", "factor"))


def do_real(w: dict, factor: float, counters: bool) -> dict:
    """One run of `w` at `factor`: the timing run, or (`counters`) the counter run that joins
    the timing run already stored. Writes its JSON and the workload's row."""
    from uvmsim.groundtruth import run
    (RESULTS / "runs").mkdir(parents=True, exist_ok=True)
    name = f"{w['workload']}__f{factor:g}"
    tpath = RESULTS / "runs" / f"{name}.json.gz"
    cpath = RESULTS / "runs" / f"{name}__counters.json.gz"
    x = run(V.command(w), counters=counters, factor=factor, footprint=V.footprint_of(w),
            timeout_s=float(w["timeout_s"]), reserve=torch_reserve(), grace_s=20.0)
    x.update(workload=w["workload"], model=w["model"], pca=w["pca"])
    with gzip.open(cpath if counters else tpath, "wt") as f:
        json.dump(x, f)
    r = json.load(gzip.open(tpath))
    c = json.load(gzip.open(cpath)) if cpath.exists() else None
    row = row_of(w, r, c)
    V.upsert(RESULTS / "real_runs.csv", COLUMNS, row, ("model", "pca", "factor"))
    V.log(f"real {name}{' counters' if counters else ''}: iter_s={row['iter_s']} "
          f"censored={row['censored']} faults={row.get('faults', '-')} "
          f"htod={row.get('htod_bytes', '-')} dtoh={row.get('dtoh_bytes', '-')} "
          f"exit={x['exit_status']} wall={x['wall_s']:.1f}")
    return row


def pack(out: Path, ws: list[dict], budget: int) -> None:
    """results.tgz, then the traces (smallest first) in tars of at most 15.5 MiB, up to
    `budget` bytes in all (the device returns at most 8 files, 64 MiB)."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "czf", str(out / "results.tgz"), "-C", str(RESULTS), "."])
    sizes = []
    for w in ws:
        d = V.TRACES / f"{w['workload']}.uvmtrace"
        if d.exists():
            sizes.append((sum(p.stat().st_size for p in d.iterdir()), d.name))
    sizes.sort()
    cap, groups, used, size = int(15.5 * 2**20), [], 0, 1 << 62
    for n, name in sizes:
        if n > cap or used + n > budget or (size + n > cap and len(groups) >= 6):
            V.log(f"pack: {name} ({n / 2**20:.1f} MiB) left on the device")
            continue
        if size + n > cap:
            groups.append([])
            size = 0
        groups[-1].append(name)
        size += n
        used += n
    for i, g in enumerate(groups, 1):
        subprocess.run(["tar", "cf", str(out / f"traces_{i}.tar"), "-C", str(V.TRACES)] + g)
    V.log(f"pack: {sum(len(g) for g in groups)} traces, {used / 2**20:.1f} MiB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", default="trace,real")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--pca", default="on,off")
    ap.add_argument("--plan", default=PLAN,
                    help="rounds: t<F> timing runs, c<F> counter runs of every workload at F")
    ap.add_argument("--counter-max-s", type=float, default=10.0,
                    help="no counter run after a timing run whose real_s is longer")
    ap.add_argument("--timeout-s", type=float, default=20.0, help="per real run")
    ap.add_argument("--jobs", type=int, default=3, help="records at a time")
    ap.add_argument("--trace-deadline-s", type=float, default=300.0)
    ap.add_argument("--deadline-s", type=float, default=540.0)
    ap.add_argument("--pack-budget-mib", type=float, default=56.0)
    ap.add_argument("--out", default=os.environ.get("OUT"))
    ap.add_argument("--rebuild", action="store_true")
    a = ap.parse_args()
    if a.rebuild:
        rebuild()
        return 0
    steps = {s for s in a.steps.split(",") if s}
    ws = workloads([m for m in a.models.split(",") if m], [p for p in a.pca.split(",") if p],
                   a.timeout_s)
    RESULTS.mkdir(exist_ok=True)
    V.RESULTS.mkdir(parents=True, exist_ok=True)
    left: list[str] = []
    if "trace" in steps:
        have = {r["workload"] for r in V.read_csv(V.RESULTS / "footprints.csv")
                if r.get("footprint_bytes")}
        took = {r["workload"]: float(r.get("record_s") or 0)
                for r in V.read_csv(V.RESULTS / "footprints.csv")}
        todo = [w for w in ws if w["workload"] not in have
                or not (V.TRACES / f"{w['workload']}.uvmtrace").exists()]
        todo.sort(key=lambda w: -took.get(w["workload"], 0.0))   # the longest first

        def one(w):
            if time.time() - V.T0 + 60 > a.trace_deadline_s:
                left.append(f"trace {w['workload']}")
                return
            V.do_trace(w, a.trace_deadline_s)
        with ThreadPoolExecutor(a.jobs) as ex:
            list(ex.map(one, todo))
        working_sets()
    if "real" in steps:
        rows = V.read_csv(RESULTS / "real_runs.csv")
        have = {r["workload"] for r in V.read_csv(V.RESULTS / "footprints.csv")
                if r.get("footprint_bytes")}
        for item in [x.strip() for x in a.plan.split(",") if x.strip()]:
            counters, f = item[0] == "c", float(item[1:])
            if item[0] not in "tc":
                raise SystemExit(f"--plan {item!r}: expected t<factor> or c<factor>")
            for w in ws:
                key = (w["model"], w["pca"])
                byf = {float(r["factor"]): r for r in rows if (r["model"], r["pca"]) == key}
                if w["workload"] not in have:
                    continue
                if counters:   # after a timing run that finished quickly, once
                    r = byf.get(f)
                    if (not r or r["censored"] == "true" or r["faults"] != ""
                            or r["exit_status"] != "0"
                            or float(r["real_s"] or 1e9) > a.counter_max_s):
                        continue
                elif f in byf or any(g < f and r["censored"] == "true" for g, r in byf.items()):
                    continue   # done, or a lower factor was already censored
                if time.time() - V.T0 + a.timeout_s + 40 > a.deadline_s:
                    left.append(f"real {w['workload']} {item}")
                    continue
                do_real(w, f, counters)
                rows = V.read_csv(RESULTS / "real_runs.csv")
    V.log("not done (deadline): " + (", ".join(left) if left else "nothing"))
    if a.out:
        pack(Path(a.out), ws, int(a.pack_budget_mib * 2**20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
