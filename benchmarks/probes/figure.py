"""Predicted against measured on the driver probes: each run's kernel time (left) and each
run's slowdown over its probe's factor-1 run (right), fit split and holdout apart.

    python3 benchmarks/probes/figure.py [--runs results/timefit_migrate_runs.csv]
        [--out results/predicted_vs_measured.png]

Reads the runs timefit.py wrote (its best fit: constants fitted on the fit split only) and
prints the holdout's errors, the figures the title shows. No replay, no GPU. The default
runs are the `h100` preset's fit:

    python3 benchmarks/probes/timefit.py --free zero_fill_ns,migrate_page_ns,evict_ns \
        --batches 64 --out benchmarks/probes/results/timefit_migrate.json
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent


def with_slowdowns(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run with its probe's factor-1 times and the real and predicted slowdowns."""
    for c in ("real_ms", "predicted_ms"):
        bad = runs.loc[~(runs[c] > 0), "probe"].tolist()
        if bad:
            raise SystemExit(f"{c}: runs without a time > 0: {bad}")
    one = runs[runs["factor"] == 1].set_index("probe")
    missing = sorted(set(runs["probe"]) - set(one.index))
    if missing:
        raise SystemExit(f"no factor-1 run for {missing}")
    df = runs.copy()
    df["real_slowdown"] = df["real_ms"] / df["probe"].map(one["real_ms"])
    df["predicted_slowdown"] = df["predicted_ms"] / df["probe"].map(one["predicted_ms"])
    return df


def errors(df: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per split: median factor of the factor-1 times and of the slowdowns (f > 1), and the
    share of slowdowns within 2x."""
    out = {}
    for split, g in df.groupby("split"):
        one, more = g[g["factor"] == 1], g[g["factor"] > 1]
        e1 = np.abs(np.log(one["predicted_ms"] / one["real_ms"]))
        es = np.abs(np.log(more["predicted_slowdown"] / more["real_slowdown"]))
        out[split] = {"f1_runs": len(one), "f1_median_x": math.exp(float(np.median(e1))),
                      "slowdown_runs": len(more),
                      "slowdown_median_x": math.exp(float(np.median(es))),
                      "slowdown_within_2x": float(np.mean(es <= math.log(2)))}
    return out


def plot(df: pd.DataFrame, err: dict, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    for ax, (x, y, label) in zip(axes, (("real_ms", "predicted_ms", "kernel time (ms)"),
                                        ("real_slowdown", "predicted_slowdown",
                                         "slowdown over factor 1"))):
        sub = df if x == "real_ms" else df[df["factor"] > 1]
        for split, marker in (("fit", "o"), ("holdout", "s")):
            g = sub[sub["split"] == split]
            sc = ax.scatter(g[x], g[y], c=g["factor"], cmap="viridis", vmin=1, vmax=2,
                            marker=marker, edgecolors="k", linewidths=0.4,
                            label=f"{split} ({len(g)} runs)")
        lo = min(sub[x].min(), sub[y].min()) / 1.5
        hi = max(sub[x].max(), sub[y].max()) * 1.5
        t = np.array([lo, hi])
        ax.plot(t, t, "k-", lw=0.8)
        ax.plot(t, 2 * t, "k:", lw=0.8)
        ax.plot(t, t / 2, "k:", lw=0.8, label="2x")
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
               xlabel=f"measured {label}", ylabel=f"replayed {label}")
        ax.legend(loc="upper left", fontsize=8)
    fig.colorbar(sc, ax=axes, label="factor")
    h = err.get("holdout", {})
    nan = float("nan")
    fig.suptitle("driver probes on an H100, replayed with `h100` (constants fitted on the fit "
                 f"split); holdout: factor-1 time median x{h.get('f1_median_x', nan):.2f}, "
                 f"slowdown median x{h.get('slowdown_median_x', nan):.2f}, "
                 f"{100 * h.get('slowdown_within_2x', nan):.0f} % within 2x",
                 fontsize=9)
    fig.savefig(out, dpi=120)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=HERE / "results" / "timefit_migrate_runs.csv")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "predicted_vs_measured.png")
    a = ap.parse_args(argv)
    if not a.runs.exists():
        raise SystemExit(f"{a.runs}: no such file (run timefit.py first)")
    df = with_slowdowns(pd.read_csv(a.runs))
    err = errors(df)
    for split, e in err.items():
        print(f"{split}: factor-1 time median x{e['f1_median_x']:.2f} ({e['f1_runs']} runs), "
              f"slowdown median x{e['slowdown_median_x']:.2f}, "
              f"{100 * e['slowdown_within_2x']:.0f} % within 2x ({e['slowdown_runs']} runs)")
    plot(df, err, a.out)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
