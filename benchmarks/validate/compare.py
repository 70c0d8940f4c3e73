"""Summary errors of validation CSVs (fit.py predict --csv), side by side:

    python benchmarks/validate/compare.py [--loss] NAME=FILE.csv [NAME=FILE.csv ...]
    python benchmarks/validate/compare.py --goals NAME=FILE.csv [...]
    python benchmarks/validate/compare.py --where kind=torch --where pattern!=probe NAME=FILE.csv

`--where COLUMN=V1,V2` keeps only the rows whose COLUMN is one of the values, `COLUMN!=V1,V2`
drops them (repeatable; every file alike): e.g. the PyTorch rows (`kind=torch`), or the
suite's rows of a file that also holds the driver probes' (`pattern!=probe`).

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
import argparse

import numpy as np
import pandas as pd

#: --where filters, (column, values, keep) each; set once by main
WHERE: list[tuple[str, list[str], bool]] = []


def load(path: str) -> pd.DataFrame:
    """One validation CSV, its rows filtered by --where."""
    d = pd.read_csv(path)
    for col, values, keep in WHERE:
        if col not in d.columns:
            raise ValueError(f"--where {col}: {path} has no column {col!r}")
        d = d[d[col].astype(str).isin(values) == keep]
    return d


def err(x: pd.Series) -> np.ndarray:
    return np.exp(np.abs(np.log(x.to_numpy(float))))


def median_err(x: pd.Series) -> str:
    return f"x{np.median(err(x)):.2f}" if len(x) else "-"


def row(name: str, path: str, loss: bool) -> str:
    d = load(path)
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
    d = load(path)
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


def named_file(arg: str) -> tuple[str, str]:
    name, eq, path = arg.partition("=")
    if not eq or not name or not path:
        raise argparse.ArgumentTypeError(f"{arg!r}: want NAME=FILE.csv")
    return name, path


def where(arg: str) -> tuple[str, list[str], bool]:
    col, op, values = arg.partition("!=")
    if not op:
        col, op, values = arg.partition("=")
    if not op or not col or not values:
        raise argparse.ArgumentTypeError(f"{arg!r}: want COLUMN=V1,V2 or COLUMN!=V1,V2")
    return col, values.split(","), op == "="


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=named_file, metavar="NAME=FILE.csv")
    ap.add_argument("--loss", action="store_true", help="also the fit split's loss")
    ap.add_argument("--goals", action="store_true", help="the time base's goals instead")
    ap.add_argument("--where", action="append", default=[], type=where,
                    metavar="COLUMN=V1,V2|COLUMN!=V1,V2", help="keep (=) or drop (!=) rows")
    a = ap.parse_args()
    WHERE[:] = a.where
    for _, path in a.files:
        try:
            open(path).close()
        except OSError as e:
            ap.error(f"{path}: {e.strerror}")
    # every row first: a file that cannot be read stops the table before its header
    try:
        rows = [goals_row(name, path) if a.goals else row(name, path, a.loss)
                for name, path in a.files]
    except ValueError as e:  # pandas' parse errors are ValueErrors too
        ap.error(str(e))
    except KeyError as e:
        ap.error(f"a file lacks the column {e}: want fit.py predict --csv's columns")
    if a.goals:
        print("| model | factor-1 time, median (all) | evicts at f 1 where real did not | "
              "f <= 1.5 uncensored beyond 2x | HtoD within 2x | DtoH within 2x |")
        print("| --- | --- | --- | --- | --- | --- |")
    else:
        print("| model | factor-1 fit | slowdown fit | factor-1 holdout | slowdown holdout | "
              "holdout within 2x | cliffs at >= 10x |" + (" fit loss |" if a.loss else ""))
        print("| --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if a.loss else ""))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
