"""A fit.py grid's points as a table: the fit-split loss, and the medians of the factor-1
time error and of the slowdown error on the suite's and on the probes' fit-split runs.

    python benchmarks/validate/grid_table.py GRID.json [--card h200] [--probe-runs CSV]

GRID.json is what `fit.py grid --out` wrote (its runs are the fit split of the card's real
runs, then the probes' of --probe-runs, in that order, as `fit.py grid --probes` replays
them); docs/validation.md ("Zero-fill batches in the progress preset") quotes it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import fit  # this folder's


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grid", type=Path)
    ap.add_argument("--card", default="h200")
    ap.add_argument("--probe-runs", type=Path,
                    default=fit.HERE.parent / "probes/results/h200/quiet/probes.csv")
    a = ap.parse_args()
    g = json.loads(a.grid.read_text())[a.card]
    runs = fit.load_runs()
    probes = fit.probe_runs(fit.DEFAULT_CONTEXT, a.probe_runs)
    allr = pd.concat([runs, probes], ignore_index=True)
    fr, base = fit.fit_split(allr, a.card)
    if len(fr) != g["runs"]:
        raise SystemExit(f"{a.grid}: {g['runs']} runs, but the fit split here has {len(fr)}")
    real = fr["real_s"].to_numpy()
    cen = fr["censored"].to_numpy()
    f1 = base == np.arange(len(base))
    probe = fr["workload"].isin(set(probes["workload"])).to_numpy()
    keys = list(g["points"][0]["point"])
    print("| " + " | ".join(keys) + " | fit loss | suite factor 1 | suite slowdown | "
          "probes factor 1 | probes slowdown |")
    print("|" + " --- |" * (len(keys) + 5))
    for p in sorted(g["points"], key=lambda r: r["loss"]):
        lr = fit.log_errors(np.array(p["predicted_s"]), real, base)
        cells = []
        for m in (~probe, probe):
            cells.append(f"x{np.exp(np.median(np.abs(lr[f1 & m]))):.2f}")
            cells.append(f"x{np.exp(np.median(np.abs(lr[~f1 & m & ~cen]))):.2f}")
        print("| " + " | ".join(f"{p['point'][k]:g}" for k in keys)
              + f" | {p['loss']:.2f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
