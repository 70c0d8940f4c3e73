"""benchmarks/validate/compare.py: the summary of validation CSVs, --where's filters (the
tables of docs/validation.md by kind of workload and without the probes' rows), and clear
errors on bad arguments."""
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "validate" / "compare.py"


def rows(path: Path) -> None:
    base = dict(split="holdout", real_censored=False, real_base_s=1.0, predicted_base_s=1.0,
                real_htod_bytes=0, required_htod_bytes=0, predicted_htod_bytes=0,
                real_dtoh_bytes=0, required_dtoh_bytes=0, predicted_dtoh_bytes=0)
    r = []
    # a CUDA workload predicted right, a PyTorch one 4x too slow at factors 1 and 1.5, a probe
    for w, kind, pattern, f1, sl in (("a", "cuda", "streaming", 1.0, 1.0),
                                     ("t", "torch", "dl-training", 4.0, 4.0),
                                     ("p", "cuda", "probe", 1.0, 1.0)):
        r.append(dict(base, workload=w, kind=kind, pattern=pattern, factor=1.0, ratio=f1,
                      slowdown_ratio=1.0, real_slowdown=1.0, predicted_slowdown=1.0))
        r.append(dict(base, workload=w, kind=kind, pattern=pattern, factor=1.5, ratio=f1 * sl,
                      slowdown_ratio=sl, real_slowdown=3.0, predicted_slowdown=3.0 * sl))
    pd.DataFrame(r).to_csv(path, index=False)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=60)


def table_row(out: str) -> list[str]:
    return [c.strip() for c in out.strip().splitlines()[-1].strip("|").split("|")]


def test_where_keeps_or_drops_rows_in_every_table(tmp_path):
    f = tmp_path / "v.csv"
    rows(f)
    every = table_row(run(f"x={f}").stdout)
    assert every[3] == "x1.00" and every[5] == "2 of 3"   # factor-1 median; within 2x
    torch = table_row(run("--where", "kind=torch", f"x={f}").stdout)
    assert torch[3] == "x4.00" and torch[5] == "0 of 1"
    suite = table_row(run("--where", "pattern!=probe", f"x={f}").stdout)
    assert suite[5] == "1 of 2"
    goals = table_row(run("--goals", "--where", "kind=cuda,torch", "--where",
                          "workload!=p", f"x={f}").stdout)
    assert goals[1] == "x2.50" and goals[3] == "1 of 2"   # median of 1 and 4; beyond 2x


def test_bad_arguments_exit_2_naming_what_is_wrong(tmp_path):
    f = tmp_path / "v.csv"
    rows(f)
    for args, says in ((["nofile"], "want NAME=FILE.csv"),
                       ([f"x={tmp_path / 'none.csv'}"], "No such file"),
                       (["--where", "kind", f"x={f}"], "want COLUMN=V1,V2"),
                       (["--where", "nope=1", f"x={f}"], "no column 'nope'")):
        p = run(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert says in p.stderr and p.stdout == "", (args, p.stderr)
    bad = tmp_path / "b.csv"
    bad.write_text("workload,factor\na,1\n")
    p = run(f"x={bad}")
    assert p.returncode == 2 and "lacks the column" in p.stderr
