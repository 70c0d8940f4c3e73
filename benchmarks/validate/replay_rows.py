"""Replay the validation rows of one card one by one, with block_progress off and on, writing
each row as it finishes (fit.py's load_runs and replay), so that a slow replay shows itself:

    PYTHONPATH=src python benchmarks/validate/replay_rows.py MODEL OUT.csv [WORKLOAD@F,...]

reads results/h100 and traces_h100; the optional list skips block_progress for those rows."""
import sys, time, csv
from pathlib import Path
sys.path.insert(0, "benchmarks/validate")
import fit
from uvmsim.config import get_model
fit.RESULTS = Path("benchmarks/validate/results/h100").resolve()
fit.TRACES = Path("benchmarks/validate/traces_h100").resolve()
runs = fit.load_runs()
runs = runs.sort_values(["factor", "workload"]).reset_index(drop=True)
base = sys.argv[1]
out = open(sys.argv[2], "w", newline="")
w = csv.writer(out); w.writerow(["workload", "factor", "split", "real_s", "censored", "mode", "predicted_s", "faults", "wall_s"])
skip = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else set()
for _, r in runs.iterrows():
    for mode in ("off", "on"):
        if mode == "on" and f"{r['workload']}@{r['factor']:g}" in skip:
            continue
        m = get_model(base, block_progress=(mode == "on"))
        t = time.time()
        p = fit.replay(r["workload"], r["capacity_bytes"], m, r["card"])
        w.writerow([r["workload"], r["factor"], r["split"], r["real_s"], r["censored"], mode,
                    p["predicted_s"], p["predicted_faults"], round(time.time() - t, 2)])
        out.flush()
        print(r["workload"], r["factor"], mode, p["predicted_s"], round(time.time() - t, 1), flush=True)
