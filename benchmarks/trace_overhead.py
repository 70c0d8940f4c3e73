"""Collector overhead (GPU machine): ResNet-50 training, plain vs under each pass.

    python3 benchmarks/trace_overhead.py [--batch 32] [--steps 3]
                                         [--modes plain,timing,pages,pages-noslices]
                                         [--json OUT.json] [--lib native_trace/build/libuvmtrace.so]

torchvision ResNet-50 with random weights, batch 32, 3 training iterations
(native_trace/tests/torch_train.py). For each mode it reports the whole process's wall time
(Python start, CUDA init, model build, the steps, exit) and the wall time of the training steps
alone as the script measures it (``train_wall_s``). Traced runs go through `uvmsim.record.record`
with one pass each; the time to join and write the trace is reported separately. Goal: page pass
<= 10x plain on the training steps (docs/performance.md). Mode ``pages-noslices`` is the page pass with the time slices
switched off (UVMTRACE_SLICES=0), to show what the slices cost.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from uvmsim.record import find_library, record  # noqa: E402

SCRIPT = REPO / "native_trace" / "tests" / "torch_train.py"


def _train_wall(text: str) -> float | None:
    for ln in text.splitlines():
        if ln.startswith("train_wall_s "):
            return float(ln.split()[1])
    return None


def _losses(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("step ")]


def run_mode(mode: str, args: list[str], lib: Path, tmp: Path) -> dict:
    """One run; returns wall times, losses and (for passes) trace figures."""
    if mode == "plain":
        t0 = time.perf_counter()
        r = subprocess.run(args, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(f"plain run failed ({r.returncode}): {r.stderr[-2000:]}")
        return {"process_wall_s": wall, "train_wall_s": _train_wall(r.stdout),
                "losses": _losses(r.stdout)}
    out = tmp / f"{mode}.uvmtrace"
    raw = tmp / f"raw_{mode}"
    cmd = ["sh", "-c", "exec " + " ".join(f'"{a}"' for a in args) + ' > "$UVMTRACE_OUT/stdout.txt"']
    pass_name, env = mode, {}
    if mode == "pages-noslices":
        pass_name, env = "pages", {"UVMTRACE_SLICES": "0"}
    t0 = time.perf_counter()
    st = record(out, cmd, pass_name, lib=lib, keep_raw=raw, overwrite=True, extra_env=env)
    total = time.perf_counter() - t0
    if st != 0:
        raise RuntimeError(f"{mode} pass: program exited {st}")
    src = json.loads((out / "manifest.json").read_text())["source"]
    text = (raw / pass_name / "stdout.txt").read_text()
    size = sum(f.stat().st_size for f in out.iterdir())
    raw_size = sum(f.stat().st_size for f in (raw / pass_name).iterdir())
    return {"process_wall_s": src["pass_wall_s"][pass_name], "train_wall_s": _train_wall(text),
            "losses": _losses(text), "record_total_s": total,
            "join_and_write_s": total - src["pass_wall_s"][pass_name],
            "kernels": src.get("kernels"), "access_rows": src.get("access_rows"),
            "trace_bytes": size, "raw_bytes": raw_size,
            "dropped_accesses_device": src.get("dropped_accesses_device")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--modes", default="plain,timing,pages")
    ap.add_argument("--lib", default=None)
    ap.add_argument("--json", default=None, help="also write the results here")
    a = ap.parse_args()
    lib = find_library(a.lib)
    args = [sys.executable, str(SCRIPT), "--model", a.model, "--batch", str(a.batch),
            "--steps", str(a.steps)]
    res: dict = {"model": a.model, "batch": a.batch, "steps": a.steps, "modes": {}}
    try:
        import torch
        res["gpu"] = torch.cuda.get_device_name(0)
        res["torch"] = torch.__version__
    except Exception as e:  # noqa: BLE001 - informational only
        res["gpu"] = f"unknown ({e})"
    with tempfile.TemporaryDirectory(prefix="uvmt-bench-") as td:
        for mode in a.modes.split(","):
            r = run_mode(mode, args, lib, Path(td))
            res["modes"][mode] = r
            print(f"{mode:14s} process {r['process_wall_s']:8.2f} s  train steps "
                  f"{r['train_wall_s'] if r['train_wall_s'] is not None else float('nan'):8.2f} s"
                  + (f"  join+write {r['join_and_write_s']:.1f} s, {r['access_rows']} rows"
                     if mode != "plain" else ""), flush=True)
    plain = res["modes"].get("plain")
    if plain:
        for mode, r in res["modes"].items():
            if mode == "plain":
                continue
            r["slowdown_process"] = r["process_wall_s"] / plain["process_wall_s"]
            if r["train_wall_s"] and plain["train_wall_s"]:
                r["slowdown_train_steps"] = r["train_wall_s"] / plain["train_wall_s"]
            r["losses_equal_plain"] = r["losses"] == plain["losses"]
            print(f"{mode}: {r['slowdown_process']:.2f}x process wall, "
                  f"{r.get('slowdown_train_steps', float('nan')):.2f}x training steps, "
                  f"losses equal to plain: {r['losses_equal_plain']}", flush=True)
    out = json.dumps(res, indent=2)
    if a.json:
        Path(a.json).write_text(out + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
