"""Summary errors of validation CSVs (fit.py predict --csv), side by side:

    python benchmarks/validate/compare.py [--loss] NAME=FILE.csv [NAME=FILE.csv ...]

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


if __name__ == "__main__":
    args = sys.argv[1:]
    loss = "--loss" in args
    args = [a for a in args if a != "--loss"]
    print("| model | factor-1 fit | slowdown fit | factor-1 holdout | slowdown holdout | "
          "holdout within 2x | cliffs at >= 10x |" + (" fit loss |" if loss else ""))
    print("| --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if loss else ""))
    for arg in args:
        name, path = arg.split("=", 1)
        print(row(name, path, loss))
