"""Which thread blocks run ahead in a grid-stride fill: each block's progress against its age
rank on its SM, its id and its SM (docs/validation.md, "Which blocks run ahead").

    python benchmarks/validate/progress_ranks.py DIR [--bin 40] [--per-sm 8]

DIR holds progress_blocks.csv from `progress_probe.py` (each block's SM and mean iteration at
every twentieth of 200 time bins). A block's age rank on its SM is its place among the blocks
on that SM by block id (the GPU dispatches in id order); the first --per-sm of each SM are
the first wave (8 for the probe's 256-thread blocks: 2,048 threads per SM). Prints, per mode
and factor: the mean iteration of the blocks of each rank at bin --bin, and Spearman rank
correlations of a block's iteration with its id (all blocks; within each rank), its SM, and
its page in each 2 MiB window; then how steady the blocks' order is (bin 20 against bin 80).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd


def spearman(a, b) -> float:
    a = pd.Series(np.asarray(a, float)).rank()
    b = pd.Series(np.asarray(b, float)).rank()
    return float(a.corr(b))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--bin", type=int, default=40, help="time bin (20, 40, ... 200)")
    ap.add_argument("--per-sm", type=int, default=8, help="resident blocks per SM")
    a = ap.parse_args()
    path = a.dir / "progress_blocks.csv"
    if not path.exists():
        raise SystemExit(f"{path}: no such file (run progress_probe.py --out {a.dir})")
    d = pd.read_csv(path)
    col = f"it_at_{a.bin}"
    if col not in d.columns:
        raise SystemExit(f"{path}: no column {col}")
    for (mode, factor), x in d.groupby(["mode", "factor"]):
        x = x.sort_values("block")
        rank = x.groupby("sm")["block"].rank(method="first").astype(int) - 1
        wave = rank < a.per_sm
        y, r = x[wave], rank[wave]
        means = y.groupby(r)[col].mean()
        within = [spearman(y.loc[r == k, col], y.loc[r == k, "block"]) for k in means.index]
        print(f"{mode} f {factor:g}: {len(x)} blocks on {x['sm'].nunique()} SMs, bin {a.bin}")
        print("  mean iteration by age rank on the SM: "
              + ", ".join(f"{k}: {v:.1f}" for k, v in means.items()))
        print(f"  rank 0 / rank {means.index[-1]}: {means.iloc[0] / max(means.iloc[-1], 1e-9):.2f}")
        print(f"  Spearman with block id {spearman(y[col], y['block']):+.3f}, "
              f"with rank {spearman(y[col], r):+.3f}, with SM {spearman(y[col], y['sm']):+.3f}, "
              f"within a rank with block id (median over ranks) {np.nanmedian(within):+.3f}")
        if "it_at_20" in x.columns and "it_at_80" in x.columns:
            print(f"  order kept from bin 20 to bin 80: Spearman "
                  f"{spearman(y['it_at_20'], y['it_at_80']):+.3f}")


if __name__ == "__main__":
    main()
