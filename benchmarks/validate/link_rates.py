"""How fast the real runs move their bytes, against the rate the replay charges for them.

    python benchmarks/validate/link_rates.py [--runs results/remeasured/h200_driver/real_runs.csv]
        [--validation results/validation.csv] [--csv OUT.csv]

For each run at factor > 1 with the driver's own byte counts (the counter run's
`counters_driver_*`, lossless: docs/groundtruth.md), the real rate is those bytes, both
directions together, over the time the run took beyond its factor-1 time (the validation's
timing runs, `real_s - real_base_s`, at the same capacity: bytes_table.py checks that); the
replay's rate is its own bytes over its own extra time (`predicted_s - predicted_base_s`).
A ratio above 1 says the replay charges more time per byte than the real run took
(docs/validation.md, "How fast the real runs move their bytes": mostly the link's latency
per copy, not its direction or bandwidth). Runs whose factor-1 run itself evicted (the extra time is then not the extra
traffic's) or took no extra time are left out. Needs no GPU.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent


def rates(runs: pd.DataFrame, val: pd.DataFrame) -> pd.DataFrame:
    m = runs.merge(val, on=["workload", "factor"], suffixes=("_run", ""))
    m = m[(m["factor"] > 1) & m["counters_driver_htod_bytes"].notna()].copy()
    real_bytes = m["counters_driver_htod_bytes"] + m["counters_driver_dtoh_bytes"]
    rep_bytes = m["predicted_htod_bytes"] + m["predicted_dtoh_bytes"]
    real_extra = m["real_s"] - m["real_base_s"]
    rep_extra = m["predicted_s"] - m["predicted_base_s"]
    out = pd.DataFrame({
        "workload": m["workload"], "factor": m["factor"],
        "real_GB": real_bytes / 1e9, "real_extra_s": real_extra,
        "real_GBps": real_bytes / 1e9 / real_extra,
        "replay_GB": rep_bytes / 1e9, "replay_extra_s": rep_extra,
        "replay_GBps": rep_bytes / 1e9 / rep_extra,
        "dtoh_over_htod": m["counters_driver_dtoh_bytes"] / m["counters_driver_htod_bytes"]})
    out["rate_ratio"] = out["real_GBps"] / out["replay_GBps"]
    # a factor-1 run that already evicted makes its slowdowns' base wrong (cnn_pca: 480 MB
    # back at factor 1), and no extra time leaves no rate
    f1_evicted = set(runs.loc[(runs["factor"] == 1)
                              & (runs["counters_driver_dtoh_bytes"] > 64 << 20), "workload"])
    keep = (~out["workload"].isin(f1_evicted)) & (out["real_extra_s"] > 0) & \
        (out["replay_extra_s"] > 0)
    return out[keep].sort_values(["workload", "factor"]).reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=str(HERE / "results" / "remeasured" / "h200_driver"
                                         / "real_runs.csv"))
    ap.add_argument("--validation", default=str(HERE / "results" / "validation.csv"))
    ap.add_argument("--csv", help="also write the table here")
    a = ap.parse_args(argv)
    for p in (a.runs, a.validation):
        if not Path(p).is_file():
            print(f"link_rates.py: no such file: {p}", file=sys.stderr)
            return 2
    try:
        t = rates(pd.read_csv(a.runs), pd.read_csv(a.validation))
    except (ValueError, KeyError) as e:
        print(f"link_rates.py: {a.runs} against {a.validation}: {e}", file=sys.stderr)
        return 2
    if a.csv:
        t.to_csv(a.csv, index=False)
    print("| workload | factor | real GB, both ways | real extra s | real GB/s | replayed GB | "
          "replayed extra s | replayed GB/s | real / replayed rate | DtoH / HtoD |")
    print("| --- " * 10 + "|")
    for _, r in t.iterrows():
        print(f"| {r.workload} | {r.factor:g} | {r.real_GB:.2f} | {r.real_extra_s:.3f} | "
              f"{r.real_GBps:.1f} | {r.replay_GB:.2f} | {r.replay_extra_s:.3f} | "
              f"{r.replay_GBps:.1f} | {r.rate_ratio:.2f} | {r.dtoh_over_htod:.2f} |")
    print(f"\nmedian real / replayed rate: {t['rate_ratio'].median():.2f} over {len(t)} runs; "
          f"{int((t['rate_ratio'] > 1).sum())} of them above 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
