"""The study's figures and the numbers docs/study-dl-oversubscription.md quotes, from the stored
results alone (no traces, no GPU).

    python3 benchmarks/study/figures.py [--img docs/img] [--model h200] [--prefetch density]

Reads results/real_runs.csv, results/sim_runs.csv and results/working_sets.csv.gz; writes
docs/img/study_{slowdown,pca_ratio,working_set,faults,read_share,migrations}.png with
uvmsim.plot, and prints the tables behind each point of the doc.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from uvmsim import plot as P  # noqa: E402

RESULTS = HERE / "results"
PAPER_FACTORS = (1.25, 1.5, 2.0, 3.0)   # the factors every real workload has


def show(title: str, df: pd.DataFrame) -> None:
    print(f"\n## {title}")
    with pd.option_context("display.width", 200, "display.max_columns", 30,
                           "display.max_rows", 200):
        print(df)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--img", default=str(ROOT / "docs" / "img"))
    ap.add_argument("--model", default="h200")
    ap.add_argument("--prefetch", default="density")
    a = ap.parse_args()
    real = pd.read_csv(RESULTS / "real_runs.csv")
    sim = pd.read_csv(RESULTS / "sim_runs.csv")
    ws = pd.read_csv(RESULTS / "working_sets.csv.gz")
    img = Path(a.img)
    img.mkdir(parents=True, exist_ok=True)
    kw = dict(model=a.model, prefetch=a.prefetch)

    # 1. slowdown
    sd = P.slowdown_table(real, sim, **kw)
    show("1. slowdown per iteration (real, sim)",
         sd.pivot_table(index=["workload", "pca", "source"], columns="factor",
                        values="slowdown").round(2))
    cens = sd[sd["censored"]]
    if len(cens):
        show("censored real runs (slowdown is a lower bound)", cens)
    agg = sd[sd["factor"] > 1].groupby(["pca", "source", "factor"])["slowdown"]
    show("1. mean and max over workloads", agg.agg(["mean", "max", "count"]).round(2))
    both = sd[sd["factor"].isin(PAPER_FACTORS)].groupby(["pca", "source"])["slowdown"]
    show("1. over factors 1.25-3 (every workload has a real run there)",
         both.agg(["mean", "max", "count"]).round(2))
    piv = sd.pivot_table(index=["workload", "pca", "factor"], columns="source",
                         values="slowdown")
    if {"real", "sim"} <= set(piv.columns):
        piv = piv.dropna()
        piv["sim/real"] = piv["sim"] / piv["real"]
        show("1. sim / real slowdown (geometric mean per PCA setting and factor)",
             piv.groupby(["pca", "factor"])["sim/real"].apply(
                 lambda s: float(s.prod() ** (1 / len(s)))).round(2))

    # 2. PCA off / on
    pr = P.pca_ratio_table(real, sim, **kw)
    show("2. PCA off / PCA on, iteration time",
         pr.pivot_table(index=["workload", "source"], columns="factor", values="ratio").round(2))
    show("2. mean over workloads", pr.groupby(["source", "factor"])["ratio"].mean().round(2)
         .unstack(0))

    # 3-5. counts
    ct = P.counts_table(real, sim, **kw)
    ct["migrated_bytes"] = ct["htod_bytes"] + ct["dtoh_bytes"]
    on = ct[ct["pca"] == "on"].set_index(["workload", "source", "factor"])
    off = ct[ct["pca"] == "off"].set_index(["workload", "source", "factor"])
    j = on[["faults", "migrated_bytes"]].merge(off[["faults", "migrated_bytes"]],
                                              left_index=True, right_index=True,
                                              suffixes=("_on", "_off"))
    j["faults_on/off"] = j["faults_on"] / j["faults_off"]
    j["bytes_on/off"] = j["migrated_bytes_on"] / j["migrated_bytes_off"]
    show("3. PCA on / off: whole-run faults and migrated bytes (HtoD + DtoH)",
         j[["faults_on/off", "bytes_on/off"]].unstack("source").round(2))
    show("4. read-fault share (sim)", ct[ct["source"] == "sim"].pivot_table(
        index=["workload", "pca"], columns="factor", values="read_share").round(2))
    show("5. (HtoD + DtoH) / footprint", ct.pivot_table(
        index=["workload", "pca", "source"], columns="factor",
        values="volume_over_footprint").round(2))

    # 6. working sets
    g = ws.groupby("trace")
    show("6. per-kernel working sets", pd.DataFrame({
        "kernels": g.size(),
        "max_MiB": g["working_set_bytes"].max() / 2**20,
        "max_share": g["working_set_bytes"].max() / g["footprint_bytes"].first(),
        "median_MiB": g["working_set_bytes"].median() / 2**20,
        "median_share": g["working_set_bytes"].median() / g["footprint_bytes"].first(),
        "footprint_MiB": g["footprint_bytes"].first() / 2**20}).round(3))
    big = ws.loc[ws.groupby("trace")["working_set_bytes"].idxmax(), ["trace", "name"]]
    big["name"] = big["name"].str.slice(0, 90)
    show("6. largest kernel of each trace", big.reset_index(drop=True))

    P.plot_slowdown(real, sim, path=img / "study_slowdown.png", **kw)
    P.plot_pca_ratio(real, sim, path=img / "study_pca_ratio.png", **kw)
    P.plot_working_set(ws[ws["trace"].str.endswith("_on")], path=img / "study_working_set.png",
                       title="Per-kernel working set (PCA on)")
    P.plot_faults(real, sim, path=img / "study_faults.png", **kw)
    P.plot_fault_kinds(sim, path=img / "study_read_share.png", **kw)
    P.plot_migrations(real, sim, path=img / "study_migrations.png", **kw)
    print(f"\nfigures: {img}/study_*.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
