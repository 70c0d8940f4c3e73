"""Summary errors of validation CSVs (fit.py predict --csv), side by side:

    python benchmarks/validate/compare.py [--loss] NAME=FILE.csv [NAME=FILE.csv ...]
    python benchmarks/validate/compare.py --goals NAME=FILE.csv [...]

With --goals, the time-base goals instead (docs/validation.md): the median factor-1 time
error over every workload, replays that evict at factor 1 where the real run copied nothing
back, uncensored runs at factors up to 1.5 beyond 2x, and replayed HtoD and DtoH within 2x
of what the run moved (CUPTI's count, or what it must have moved where that is more:
CUPTI's are lower bounds) where that exceeds 64 MiB.

Per file: the median factor-1 time error and the median slowdown error (uncensored runs at
factor > 1) on the fit split and the holdout, each error max(p/r, r/p); the holdout's runs
within 2x; and how many uncensored real cliffs (slowdown >= 20x) are predicted at >= 10x.
With --loss, also the fit split's loss, the sum of |ln(predicted / real)| of its factor-1
times and uncensored slowdowns (what fit.py and the choices in docs/validation.md
minimise). A split a file does not hold shows "-".
"""
import sys

import numpy as np
import pandas as pd


def err(x: pd.Series) -> np.ndarray:
    return np.exp(np.abs(np.log(x.to_numpy(float))))


def median_err(x: pd.Series) -> str:
    return f"x{np.median(err(x)):.2f}" if len(x) else "-"


def row(name: str, path: str, loss: bool) -> str:
    d = pd.read_csv(path)
    cells = [name]
    for split in ("fit", "holdout"):
        s = d[d["split"] == split]
        f1 = s[s["factor"] == 1]
        un = s[(s["factor"] > 1) & ~s["real_censored"].astype(bool)]
        cells.append(median_err(f1["ratio"]))
        cells.append(median_err(un["slowdown_ratio"]))
        if split == "holdout":
            cells.append(f"{int((err(un['slowdown_ratio']) <= 2).sum())} of {len(un)}"
                         if len(un) else "-")
        if split == "fit" and loss:
            fit_loss = (np.log(err(f1["ratio"])).sum()
                        + np.log(err(un["slowdown_ratio"])).sum())
            fit_cell = f"{fit_loss:.2f}" if len(s) else "-"
    un = d[(d["factor"] > 1) & ~d["real_censored"].astype(bool)]
    cl = un[un["real_slowdown"] >= 20]
    cells.append(f"{int((cl['predicted_slowdown'] >= 10).sum())} of {len(cl)}")
    if loss:
        cells.append(fit_cell)
    return "| " + " | ".join(cells) + " |"


def goals_row(name: str, path: str) -> str:
    d = pd.read_csv(path)
    one = d[d["factor"] == 1]
    evicts = int(((one["predicted_dtoh_bytes"] > 0) & (one["real_dtoh_bytes"] == 0)).sum())
    low = d[(d["factor"] > 1) & (d["factor"] <= 1.5) & ~d["real_censored"].astype(bool)]
    beyond = int((err(low["slowdown_ratio"]) > 2).sum())
    cells = [name, median_err(one["ratio"]), f"{evicts} of {len(one)}",
             f"{beyond} of {len(low)}"]
    for way in ("htod", "dtoh"):
        moved = np.fmax(d[f"real_{way}_bytes"], d[f"required_{way}_bytes"])
        big = d[moved > 64 * (1 << 20)]
        r = big[f"predicted_{way}_bytes"] / moved[big.index]
        cells.append(f"{int(((r >= 0.5) & (r <= 2)).sum())} of {len(big)}")
    return "| " + " | ".join(cells) + " |"


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--goals" in args:
        print("| model | factor-1 time, median (all) | evicts at f 1 where real did not | "
              "f <= 1.5 uncensored beyond 2x | HtoD within 2x | DtoH within 2x |")
        print("| --- | --- | --- | --- | --- | --- |")
        for arg in (a for a in args if a != "--goals"):
            name, path = arg.split("=", 1)
            print(goals_row(name, path))
        sys.exit(0)
    loss = "--loss" in args
    args = [a for a in args if a != "--loss"]
    print("| model | factor-1 fit | slowdown fit | factor-1 holdout | slowdown holdout | "
          "holdout within 2x | cliffs at >= 10x |" + (" fit loss |" if loss else ""))
    print("| --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if loss else ""))
    for arg in args:
        name, path = arg.split("=", 1)
        print(row(name, path, loss))
