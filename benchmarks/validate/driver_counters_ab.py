"""Do the driver's counters slow a real run? The same runs with and without them, alternating.

    python benchmarks/validate/driver_counters_ab.py --workloads stream,pipeline \
        --factors 1,1.25 --repeats 3 --csv OUT.csv [--deadline-s 200]

Each (workload, factor) is run `--repeats` times with the counters off and on, in turn
(off, on, off, on, ...), under `uvmsim run` with the validation's footprint, reserve and
capacity (benchmarks/validate/validate.py) and CUPTI's counters off. A counters tracker makes
the UVM driver call the tools' fault and migration callbacks on every fault and migration
(native_trace/src/driver_counters.cpp), which could cost time in the very services a real
run measures; this measures it. Needs the GPU. Prints, per row, the median real time of each
arm and their ratio; the CSV has every run.
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _validate():
    spec = importlib.util.spec_from_file_location("validate", HERE / "validate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


COLUMNS = ["workload", "factor", "repeat", "driver_counters", "real_s", "censored", "wall_s",
           "free_bytes", "driver_htod_bytes", "driver_dtoh_bytes", "driver_gpu_faults", "card"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", required=True, help="comma-separated names of workloads.csv")
    ap.add_argument("--factors", default="1,1.25")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--deadline-s", type=float, default=float("inf"),
                    help="start no pair of runs after this many seconds")
    a = ap.parse_args(argv)
    if a.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {a.repeats}")
    v = _validate()
    from uvmsim.groundtruth import driver_totals, run
    byname = {w["workload"]: w for w in v.load_workloads()}
    names = [x.strip() for x in a.workloads.split(",") if x.strip()]
    unknown = [n for n in names if n not in byname]
    if unknown:
        ap.error(f"--workloads: unknown {unknown}")
    factors = [float(x) for x in a.factors.split(",") if x.strip()]
    v.build()
    t0 = time.time()
    rows: list[dict] = []
    with open(a.csv, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=COLUMNS)
        wr.writeheader()
        for name in names:
            w = byname[name]
            kw = dict(footprint=v.footprint_of(w), reserve=v.reserve_of(w["kind"]),
                      timeout_s=v.timeout_of(w), counters=False)
            for factor in factors:
                for rep in range(a.repeats):
                    if time.time() - t0 > a.deadline_s:
                        print(f"deadline: stopped before {name} f{factor:g} repeat {rep}")
                        break
                    for on in (0, 1):
                        r = run(v.command(w), factor=factor, driver_counters=bool(on), **kw)
                        row = {"workload": name, "factor": f"{factor:g}", "repeat": rep,
                               "driver_counters": on, "real_s": f"{r['real_s']:.6f}",
                               "censored": r["censored"], "wall_s": f"{r['wall_s']:.3f}",
                               "free_bytes": r["free_bytes"], "card": r.get("gpu", "")}
                        row.update({f"driver_{k}": v for k, v in driver_totals(r).items()
                                    if f"driver_{k}" in COLUMNS})
                        wr.writerow(row)
                        f.flush()
                        rows.append(row)
    print("workload factor  off_median_s  on_median_s  on/off")
    for name in names:
        for factor in factors:
            arm = {on: [float(r["real_s"]) for r in rows if r["workload"] == name
                        and r["factor"] == f"{factor:g}" and r["driver_counters"] == on]
                   for on in (0, 1)}
            if arm[0] and arm[1]:
                off, on = statistics.median(arm[0]), statistics.median(arm[1])
                print(f"{name} {factor:g} {off:.4f} {on:.4f} {on / off:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
