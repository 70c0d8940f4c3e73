"""Summary errors of validation CSVs (fit.py predict --csv), side by side:

    python benchmarks/validate/compare.py NAME=FILE.csv [NAME=FILE.csv ...]

Per file: the median factor-1 time error and the median slowdown error (uncensored runs at
factor > 1) on the fit split and the holdout, each error max(p/r, r/p); the holdout's runs
within 2x; and how many uncensored real cliffs (slowdown >= 20x) are predicted at >= 10x.
"""
import sys

import numpy as np
import pandas as pd


def err(x: pd.Series) -> np.ndarray:
    return np.exp(np.abs(np.log(x.to_numpy(float))))


def row(name: str, path: str) -> str:
    d = pd.read_csv(path)
    cells = [name]
    for split in ("fit", "holdout"):
        s = d[d["split"] == split]
        f1 = s[s["factor"] == 1]
        un = s[(s["factor"] > 1) & ~s["real_censored"].astype(bool)]
        cells.append(f"x{np.median(err(f1['ratio'])):.2f}")
        cells.append(f"x{np.median(err(un['slowdown_ratio'])):.2f}")
        if split == "holdout":
            cells.append(f"{int((err(un['slowdown_ratio']) <= 2).sum())} of {len(un)}")
    un = d[(d["factor"] > 1) & ~d["real_censored"].astype(bool)]
    cl = un[un["real_slowdown"] >= 20]
    cells.append(f"{int((cl['predicted_slowdown'] >= 10).sum())} of {len(cl)}")
    return "| " + " | ".join(cells) + " |"


if __name__ == "__main__":
    print("| model | factor-1 fit | slowdown fit | factor-1 holdout | slowdown holdout | "
          "holdout within 2x | cliffs at >= 10x |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for arg in sys.argv[1:]:
        name, path = arg.split("=", 1)
        print(row(name, path))
