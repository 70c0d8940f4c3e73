"""The study's slowdowns, real against replayed with the presets of 2026-11-29.

    python3 benchmarks/study/presets_table.py

Reads stored results only: results/real_runs.csv (the real H200 runs), results/sim_runs.csv
(`h200` as it was on 2026-11-23, density prefetch) and results/sim_runs_presets_2026-11-29.csv
and results/sim_runs_presets_2026-11-29b.csv (`h200` with device copies and `h200-progress`,
from traces recorded again with v1.2 streams: the first file's `h200-progress` charged a
zero-fill batch 80 us, the second's 30 us; docs/study-dl-oversubscription.md, "The presets
of 2026-11-29"). Prints one row per
workload and factor: per-step slowdowns, `>` before a censored real run's bound.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))  # as figures.py: runs from a clone

from uvmsim.plot import slowdown_table  # noqa: E402

RES = HERE / "results"


def table() -> pd.DataFrame:
    real = pd.read_csv(RES / "real_runs.csv")
    old = pd.read_csv(RES / "sim_runs.csv")
    first = pd.read_csv(RES / "sim_runs_presets_2026-11-29.csv")
    # the second call's h200-progress prices zero-fill batches apart (zero_batch_ns): the
    # first call's is kept as a column of its own; its h200 rows are taken where the second
    # call has none (same preset, another recording)
    first["model"] = first["model"].replace("h200-progress", "h200-progress, 80 us")
    second = pd.read_csv(RES / "sim_runs_presets_2026-11-29b.csv")
    new = pd.concat([first, second], ignore_index=True).drop_duplicates(
        ["trace", "model", "prefetch", "oversub"], keep="last")
    cols = {"real": slowdown_table(real, None),
            "h200 (2026-11-23)": slowdown_table(None, old, model="h200"),
            "h200": slowdown_table(None, new, model="h200"),
            "h200-progress": slowdown_table(None, new, model="h200-progress"),
            "h200-progress, 80 us": slowdown_table(None, new, model="h200-progress, 80 us")}
    rows = []
    for tr in sorted(new["trace"].unique()):
        w, pca = tr.rsplit("_", 1)
        for f in sorted(new.loc[new["trace"] == tr, "oversub"].unique()):
            if f == 1:
                continue
            row = {"workload": tr, "factor": f"{f:g}"}
            for name, sd in cols.items():
                x = sd[(sd["workload"] == w) & (sd["pca"] == pca) & (sd["factor"] == f)]
                row[name] = "-" if x.empty else \
                    (">" if x["censored"].iloc[0] else "") + f"{x['slowdown'].iloc[0]:.3g}"
            rows.append(row)
    return pd.DataFrame(rows)


def main() -> int:
    df = table()
    print("| " + " | ".join(df.columns) + " |")
    print("|" + " --- |" * len(df.columns))
    for r in df.itertuples(index=False):
        print("| " + " | ".join(str(v) for v in r) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
