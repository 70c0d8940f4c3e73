"""The study's slowdowns, real against replayed with the presets of 2026-11-29.

    python3 benchmarks/study/presets_table.py

Reads stored results only: results/real_runs.csv (the real H200 runs), results/sim_runs.csv
(`h200` as it was on 2026-11-23, density prefetch) and results/sim_runs_presets_2026-11-29.csv
(`h200` with device copies and `h200-progress`, from traces recorded again with v1.2 streams;
docs/study-dl-oversubscription.md, "The presets of 2026-11-29"). Prints one row per
workload and factor: per-step slowdowns, `>` before a censored real run's bound.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

RES = Path(__file__).resolve().parent / "results"


def table() -> pd.DataFrame:
    real = pd.read_csv(RES / "real_runs.csv")
    real["trace"] = real["model"] + "_" + real["pca"]
    base = real[real["factor"] == 1].set_index("trace")["iter_s"]
    real["slowdown"] = real["iter_s"] / real["trace"].map(base)
    old = pd.read_csv(RES / "sim_runs.csv")
    old = old[(old["model"] == "h200") & (old["prefetch"] == "density")]
    new = pd.read_csv(RES / "sim_runs_presets_2026-11-29.csv")
    rows = []
    for tr in sorted(new["trace"].unique()):
        for f in sorted(new.loc[new["trace"] == tr, "oversub"].unique()):
            if f == 1:
                continue
            r = real[(real["trace"] == tr) & (real["factor"] == f)]
            cell = "-"
            if len(r):
                cell = (">" if str(r["censored"].iloc[0]).lower() == "true" else "") + \
                    f"{r['slowdown'].iloc[0]:.3g}"

            def sim(df, model):
                x = df[(df["trace"] == tr) & (df["oversub"] == f) & (df["model"] == model)]
                return f"{x['iter_slowdown'].iloc[0]:.3g}" if len(x) else "-"
            rows.append({"workload": tr, "factor": f"{f:g}", "real": cell,
                         "h200 (2026-11-23)": sim(old, "h200"), "h200": sim(new, "h200"),
                         "h200-progress": sim(new, "h200-progress")})
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
