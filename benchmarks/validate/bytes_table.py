"""Replayed traffic against the UVM driver's own counts, where CUPTI's records fall short.

    python benchmarks/validate/bytes_table.py
        [--runs results/remeasured/h200_driver/real_runs.csv] [--validation results/validation.csv]
        [--base results/real_runs.csv] [--csv OUT.csv]

`validation.csv` holds the replay's HtoD/DtoH bytes of every run and CUPTI's counts, which
are lower bounds (docs/model.md, "CUPTI's counters are lower bounds"). `--runs` is a
real_runs.csv whose runs also read the driver's own totals (native_trace/src/driver_counters.cpp):
`counters_driver_*` in the counter run, beside CUPTI's records of that same run, and
`driver_*` in the timing run where it had them. The two files' runs are different runs of
the same program at the same capacity: this script refuses a run whose free memory differs
from that of the run validation.csv replayed (`--base`, the real_runs.csv it was made from),
so the replay's bytes apply to both.

Prints, per run: CUPTI's bytes, the driver's in the same run, the driver's in the timing
run, the replay's, and whether the replay is within 2x of the driver's count where that
exceeds 64 MiB (issue's byte goal, against a count that loses nothing); then the counts of
runs within 2x, against CUPTI (as docs/validation.md compared before) and against the
driver. Needs no GPU.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
MIN_BYTES = 64 << 20
#: the suite's runs made again with the driver's own counts
DRIVER_RUNS = HERE / "results" / "remeasured" / "h200_driver" / "real_runs.csv"


def table(runs: pd.DataFrame, val: pd.DataFrame, base: pd.DataFrame) -> pd.DataFrame:
    """One row per run in both files; raises ValueError when a run's free memory or card
    differs from the base run's (the one validation.csv replayed)."""
    keep = ["workload", "factor", "predicted_htod_bytes", "predicted_dtoh_bytes"]
    m = runs.merge(val[keep], on=["workload", "factor"], how="inner")
    m = m.merge(base[["workload", "factor", "free_bytes", "card"]], on=["workload", "factor"],
                how="left", suffixes=("", "_base"))
    # the replay's capacity follows the real run's free memory: the same balloon must have
    # left the same free memory, on the same card, for the replay's bytes to apply
    bad = m[~((m["free_bytes"] - m["free_bytes_base"]).abs() <= (2 << 20))
            | (m["card"].astype(str) != m["card_base"].astype(str))]
    if len(bad):
        raise ValueError("free memory or card differs from the base run's for "
                         f"{list(zip(bad.workload, bad.factor))}")
    out = pd.DataFrame({"workload": m["workload"], "factor": m["factor"]})
    for d in ("htod", "dtoh"):
        out[f"cupti_{d}"] = m[f"{d}_bytes"]
        out[f"driver_{d}"] = m.get(f"counters_driver_{d}_bytes")
        out[f"timing_driver_{d}"] = m.get(f"driver_{d}_bytes")
        out[f"replay_{d}"] = m[f"predicted_{d}_bytes"]
    return out.sort_values(["workload", "factor"]).reset_index(drop=True)


def within(rep: pd.Series, real: pd.Series) -> tuple[int, int]:
    """Runs with real > 64 MiB, and of them those whose replay is within 2x."""
    ok = real.notna() & (real > MIN_BYTES)
    r = np.maximum(rep[ok], 1.0) / real[ok]
    return int(((r <= 2) & (r >= 0.5)).sum()), int(ok.sum())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=str(DRIVER_RUNS))
    ap.add_argument("--validation", default=str(HERE / "results" / "validation.csv"))
    ap.add_argument("--base", default=str(HERE / "results" / "real_runs.csv"),
                    help="the real runs validation.csv was made from")
    ap.add_argument("--csv", help="also write the table here")
    a = ap.parse_args(argv)
    for p in (a.runs, a.validation, a.base):
        if not Path(p).is_file():
            print(f"bytes_table.py: no such file: {p}", file=sys.stderr)
            return 2
    try:
        t = table(pd.read_csv(a.runs), pd.read_csv(a.validation), pd.read_csv(a.base))
    except (ValueError, KeyError) as e:
        print(f"bytes_table.py: {a.runs} against {a.validation}: {e}", file=sys.stderr)
        return 2
    if a.csv:
        t.to_csv(a.csv, index=False)
    mb = t.copy()
    for c in mb.columns[2:]:
        mb[c] = (mb[c] / 1e6).round(1)
    print("| workload | factor | HtoD CUPTI | HtoD driver | HtoD driver (timing run) | HtoD replay "
          "| DtoH CUPTI | DtoH driver | DtoH driver (timing run) | DtoH replay |")
    print("| --- " * 10 + "|")
    fmt = lambda x: "" if pd.isna(x) else f"{x:,.1f}"  # noqa: E731
    for _, r in mb.iterrows():
        if pd.isna(r["driver_htod"]) and pd.isna(r["timing_driver_htod"]):
            continue
        print(f"| {r.workload} | {r.factor:g} | " + " | ".join(fmt(r[c]) for c in (
            "cupti_htod", "driver_htod", "timing_driver_htod", "replay_htod", "cupti_dtoh",
            "driver_dtoh", "timing_driver_dtoh", "replay_dtoh")) + " |")
    print("\n(MB; driver: the driver's totals in the counter run, beside CUPTI's records of "
          "that run; timing run: where it read them)\n")
    print("| replay within 2x, where the count exceeds 64 MiB | HtoD | DtoH |")
    print("| --- | --- | --- |")
    counted = t["driver_htod"].notna()
    for label, col in (("of CUPTI's records", "cupti"), ("of the driver's count", "driver")):
        h = within(t.loc[counted, "replay_htod"], t.loc[counted, f"{col}_htod"])
        d = within(t.loc[counted, "replay_dtoh"], t.loc[counted, f"{col}_dtoh"])
        print(f"| {label} (same {int(counted.sum())} counter runs) | {h[0]} of {h[1]} | "
              f"{d[0]} of {d[1]} |")
    lost = t.loc[counted & (t["driver_htod"] > 0)]
    if len(lost):
        share = 1 - (lost["cupti_htod"] + lost["cupti_dtoh"]) / (lost["driver_htod"]
                                                                + lost["driver_dtoh"])
        print(f"\nCUPTI's share lost (1 - CUPTI / driver, HtoD+DtoH, same run): median "
              f"{share.median():.0%}, max {share.max():.0%} over {len(lost)} counter runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
