"""Calibrate uvmsim's time layer against the real UVM driver (docs/calibration.md).

Two steps:

  # on the GPU machine (repo root): build the collector and uvm_calib, run it plain and
  # under `uvmsim record --uvm-counters`; everything lands in OUT
  python3 benchmarks/calibrate/calibrate.py device --out "$OUT"

  # anywhere (needs uvmsim's dependencies): fit the constants, replay the trace, compare
  python3 benchmarks/calibrate/calibrate.py analyze benchmarks/calibrate/results

`device` writes: info.txt, plain.jsonl (uvm_calib's own cudaEvent timings, no tool loaded),
record.log, trace.tar (the uvmtrace with uvm_events.parquet), uvm_kact.jsonl (kernel start/end
of the --uvm-counters run, in CUPTI's clock), steps.log.

`analyze` reads those (trace.tar unpacked there as cal.uvmtrace) and writes fit.json and
compare.csv next to them.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# children (`python -m uvmsim.record`) import the package from src/
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO / "src")] + [x for x in [os.environ.get("PYTHONPATH")] if x])
REPS = 2


# ----------------------------------------------------------------------------- device step

def _sh(cmd, log, timeout, **kw):
    t0 = time.time()
    with open(log, "a") as f:
        f.write(f"\n$ {cmd if isinstance(cmd, str) else ' '.join(map(str, cmd))}\n")
        f.flush()
        try:
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                               shell=isinstance(cmd, str), **kw)
            rc = r.returncode
        except subprocess.TimeoutExpired:
            rc = 124
        f.write(f"[rc={rc} {time.time() - t0:.1f}s]\n")
    print(f"[{time.strftime('%T')}] rc={rc} {time.time() - t0:.1f}s: "
          f"{cmd if isinstance(cmd, str) else ' '.join(map(str, cmd))}", flush=True)
    return rc


def device(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    steps = out / "steps.log"
    os.chdir(REPO)
    _sh("nvidia-smi; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,"
        "pcie.link.gen.current,pcie.link.width.max,pcie.link.width.current,memory.total,"
        "memory.used --format=csv; nvcc --version | tail -2; uname -r",
        out / "info.txt", 60)
    bdir = HERE / "build"
    bdir.mkdir(exist_ok=True)
    rc = _sh(["nvcc", "-O2", "-arch=sm_90", "-o", str(bdir / "uvm_calib"),
              str(HERE / "uvm_calib.cu")], steps, 300)
    if rc:
        return rc
    exe = str(bdir / "uvm_calib")
    # 1. plain run: the program's own cudaEvent timings, no tool loaded
    with open(out / "plain.jsonl", "w") as f:
        r = subprocess.run([exe, str(REPS)], stdout=f, stderr=subprocess.PIPE, text=True,
                           timeout=300)
    print(f"[{time.strftime('%T')}] plain run rc={r.returncode} {r.stderr[-500:]}", flush=True)
    # 2. the collector (timing + page passes, and a run with the UVM counters)
    nb = REPO / "native_trace" / "build"
    env = dict(os.environ, UVMTRACE_PATCH_ARCHS="90")
    rc = _sh(f"cmake -S native_trace -B {nb} -DUVMTRACE_PATCH_ARCHS=90 -DUVMT_TEST_ARCH=90 "
             f"&& cmake --build {nb} -j 16", out / "build.log", 400, env=env)
    if rc:
        return rc
    trace = Path("/tmp/cal.uvmtrace")
    raw = Path("/tmp/calraw")
    shutil.rmtree(trace, ignore_errors=True)
    shutil.rmtree(raw, ignore_errors=True)
    rc = _sh([sys.executable, "-m", "uvmsim.record", "-o", str(trace), "--uvm-counters",
              "--keep-raw", str(raw), "--", exe, str(REPS)], out / "record.log", 420)
    with tarfile.open(out / "trace.tar", "w") as t:
        t.add(trace, arcname="cal.uvmtrace")
    with open(out / "uvm_kact.jsonl", "w") as f:
        for p in sorted(glob.glob(str(raw / "uvm" / "timing.*.jsonl"))):
            for line in open(p):
                if '"t":"um"' not in line:
                    f.write(line)
    return rc


# ----------------------------------------------------------------------------- analyze step

def analyze(res: Path) -> int:
    from analyze import run_analysis  # benchmarks/calibrate/analyze.py
    return run_analysis(res)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("device", help="build and run on the GPU machine")
    d.add_argument("--out", default=os.environ.get("OUT", "device_out"))
    a = sub.add_parser("analyze", help="fit and compare from the device step's files")
    a.add_argument("results", nargs="?", default=str(HERE / "results"))
    args = p.parse_args(argv)
    if args.cmd == "device":
        return device(Path(args.out))
    sys.path.insert(0, str(HERE))
    sys.path.insert(1, str(REPO / "src"))
    return analyze(Path(args.results))


if __name__ == "__main__":
    sys.exit(main())
