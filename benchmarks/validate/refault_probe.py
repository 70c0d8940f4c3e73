"""What a GPU store's refault on an evicted VA block brings back, on the GPU
(benchmarks/validate/refault_probe.cu; docs/validation.md, "What a refault brings back").

    python benchmarks/validate/refault_probe.py --out DIR [--factors 1,2] [--mib 512] [--k 32]

Builds refault_probe.cu, runs it with `uvmsim run` (CUPTI counters on, the cuda reserve of
results/h100/reserve.json) at each factor, and writes DIR/refault_probe.csv: per factor and
launch (fill, touch, rest, ctrl, again) its time and CUPTI's counts in it, and
DIR/refault_probe.json: the runs.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))
sys.path.insert(0, str(HERE))
from progress_probe import build, gpu_name  # noqa: E402  (this folder's)
LAUNCHES = ("fill", "touch", "rest", "ctrl", "again")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--factors", default="1,2")
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--k", type=int, default=32, help="2 MiB blocks touched, then read")
    ap.add_argument("--timeout-s", type=float, default=60.0)
    a = ap.parse_args()
    from uvmsim.groundtruth import run
    exe = build("refault_probe")
    reserve = json.loads((HERE / "results" / "h100" / "reserve.json").read_text())["cuda"]
    a.out.mkdir(parents=True, exist_ok=True)
    rows, runs = [], []
    for f in (float(x) for x in a.factors.split(",")):
        r = run([str(exe), str(a.mib), str(a.k)], factor=f, footprint=a.mib << 20,
                timeout_s=a.timeout_s, counters=True, reserve=int(reserve["reserve_bytes"]))
        kt = r["kernels"]
        info = {"factor": f, "real_s": r["real_s"], "censored": r["censored"],
                "exit_status": r["exit_status"], "free_bytes": r["free_bytes"],
                "launches": len(kt["duration_ns"]), "totals": r["totals"],
                "gpu": r.get("gpu_name")}
        runs.append(info)
        print(json.dumps(info), flush=True)
        counters = [k for k in kt if k not in ("names", "name_id", "start_ns", "duration_ns")]
        for i, what in enumerate(LAUNCHES[:len(kt["duration_ns"])]):
            row = {"factor": f, "launch": what, "kernel": kt["names"][kt["name_id"][i]],
                   "ms": kt["duration_ns"][i] / 1e6}
            row.update({k: kt[k][i] for k in counters})
            rows.append(row)
            print(json.dumps(row), flush=True)
    keys = list(dict.fromkeys(k for row in rows for k in row))
    with open(a.out / "refault_probe.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, keys)
        w.writeheader()
        w.writerows(rows)
    gpu = gpu_name()
    (a.out / "refault_probe.json").write_text(json.dumps(
        {"gpu": gpu, "mib": a.mib, "k": a.k, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
