"""Collector overhead (GPU machine): PyTorch training, plain vs under each pass.

    python3 benchmarks/trace_overhead.py [--model resnet50[,mobilenet_v2,...]] [--batch 32]
                                         [--steps 3] [--image 224] [--layers 2] [--managed]
                                         [--modes plain,timing,pages,pages-nostreams]
                                         [--json OUT.json] [--csv OUT.csv]
                                         [--lib native_trace/build/libuvmtrace.so]

Each model (native_trace/tests/torch_train.py: resnet50, mobilenet_v2, densenet121 from
torchvision with random weights, gpt2 a small decoder with --layers, mlp) runs once per mode,
each a fresh process. Reported: the whole process's wall time, the training steps' wall time as
the script measures it (``train_wall_s``), their ratio to the plain run, and for page passes
the collector's own time per launch by phase (the `end` line's timers: preparing the launch's
state, waiting for the instrumented kernel, reading back, processing, writing, launch
attributes, host-access scans), the rows, the streams and the trace's size. Modes:

* ``pages``            the page pass as `uvmsim record` runs it (v1.2: slices, streams, launch
                       attributes, host-access scans);
* ``pages-nostreams``  the same without per-thread-block streams (UVMTRACE_STREAMS=0);
* ``pages-v11``        streams and launch attributes off: what the v1.1 collector recorded;
* ``pages-noslices``   time slices off (UVMTRACE_SLICES=0);
* ``timing``, ``plain``.

The JSON and CSV (one row per model and mode) are rewritten after every run, so a run cut
short by a timeout keeps what it measured; a mode that fails is recorded with its error and
the others go on. Each pass's row also says how many kernels recorded no page and how many
modules the page pass patched: a page pass that loses pages is cheap for the wrong reason.

``--managed`` puts PyTorch on managed memory (LD_PRELOAD=native_trace/build/libuvmmanaged.so,
caching allocator on), where every GPU operation also scans the page table. Goals
(docs/performance.md): page pass <= 15x plain on the training steps of small scripts.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from uvmsim.record import find_library, record  # noqa: E402

SCRIPT = REPO / "native_trace" / "tests" / "torch_train.py"
MODES = {  # mode -> (pass, environment)
    "timing": ("timing", {}),
    "pages": ("pages", {}),
    "pages-nostreams": ("pages", {"UVMTRACE_STREAMS": "0"}),
    "pages-v11": ("pages", {"UVMTRACE_STREAMS": "0", "UVMTRACE_LAUNCH_ATTRS": "0"}),
    "pages-noslices": ("pages", {"UVMTRACE_SLICES": "0"}),
}
PHASES = ("prepare_ns", "wait_ns", "readback_ns", "process_ns", "write_ns", "attrs_ns")


def _train_wall(text: str) -> float | None:
    for ln in text.splitlines():
        if ln.startswith("train_wall_s "):
            return float(ln.split()[1])
    return None


def _losses(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("step ")]


def run_mode(mode: str, args: list[str], lib: Path, tmp: Path, env: dict[str, str]) -> dict:
    """One run; returns wall times, losses and (for passes) trace figures."""
    if mode == "plain":
        t0 = time.perf_counter()
        r = subprocess.run(args, capture_output=True, text=True, env={**os.environ, **env})
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(f"plain run failed ({r.returncode}): {r.stderr[-2000:]}")
        return {"process_wall_s": wall, "train_wall_s": _train_wall(r.stdout),
                "losses": _losses(r.stdout)}
    out = tmp / f"{mode}.uvmtrace"
    raw = tmp / f"raw_{mode}"
    cmd = ["sh", "-c", "exec " + " ".join(f'"{a}"' for a in args) + ' > "$UVMTRACE_OUT/stdout.txt"']
    pass_name, menv = MODES[mode]
    t0 = time.perf_counter()
    st = record(out, cmd, pass_name, lib=lib, keep_raw=raw, overwrite=True,
                extra_env={**env, **menv})
    total = time.perf_counter() - t0
    if st != 0:
        raise RuntimeError(f"{mode} pass: program exited {st}")
    src = json.loads((out / "manifest.json").read_text())["source"]
    text = (raw / pass_name / "stdout.txt").read_text()
    sizes = {f.name: f.stat().st_size for f in out.iterdir()}
    res = {"process_wall_s": src["pass_wall_s"][pass_name], "train_wall_s": _train_wall(text),
           "losses": _losses(text), "record_total_s": total,
           "join_and_write_s": total - src["pass_wall_s"][pass_name],
           "kernels": src.get("kernels"), "access_rows": src.get("access_rows"),
           "kernels_without_pages": src.get("kernels_without_pages"),
           "modules_patched": (src.get("pages_pass_end") or {}).get("modules"),
           "warnings": src.get("warnings") or [],
           "trace_bytes": sum(sizes.values()), "file_bytes": sizes,
           "raw_bytes": sum(f.stat().st_size for f in (raw / pass_name).iterdir()),
           "dropped_accesses_device": src.get("dropped_accesses_device")}
    end = src.get("pages_pass_end") or {}
    tm = end.get("timers")
    if tm and tm.get("launches"):
        n = tm["launches"]
        res["per_launch_us"] = {k[:-3]: tm[k] / n / 1e3 for k in PHASES if k in tm}
        res["per_launch_us"]["host_scan"] = end.get("host_scan_ns", 0) / n / 1e3
        res["per_launch_copies"] = tm.get("copies", 0) / n
        res["per_launch_readback_bytes"] = tm.get("readback_bytes", 0) / n
        res["launches"] = n
        res["instrumented_kernel_span_s"] = end.get("kernel_span_ns", 0) / 1e9
        res["host_scans"] = {k: end.get(k) for k in ("host_scans", "host_scan_ns",
                                                     "pagemap_scan_fast",
                                                     "pagemap_scan_checked", "pagemap_scan_off")}
    if "streams" in src:
        res["streams"] = src["streams"]
        res["stream_rows_per_access_row"] = (src["streams"]["rows"] / src["access_rows"]
                                             if src.get("access_rows") else None)
    return res


CSV_COLUMNS = ("model", "mode", "managed", "error", "process_wall_s", "train_wall_s",
               "slowdown_process", "slowdown_train_steps", "losses_equal_plain", "kernels",
               "kernels_without_pages", "modules_patched", "access_rows", "stream_rows",
               "stream_rows_per_access_row", "trace_bytes", "join_and_write_s", "launches",
               "us_prepare", "us_wait", "us_readback", "us_process", "us_write", "us_attrs",
               "us_host_scan", "copies_per_launch", "warnings")


def _csv_row(model: str, mode: str, managed: bool, r: dict) -> list:
    pl = r.get("per_launch_us") or {}
    row = {"model": model, "mode": mode, "managed": managed,
           "stream_rows": (r.get("streams") or {}).get("rows"),
           "copies_per_launch": r.get("per_launch_copies"),
           "warnings": " | ".join(r.get("warnings") or []),
           **{f"us_{k}": v for k, v in pl.items()}}
    out = []
    for c in CSV_COLUMNS:
        v = row[c] if c in row else r.get(c)
        out.append(f"{v:.4g}" if isinstance(v, float) else "" if v is None else v)
    return out


def _save(res: dict, a: argparse.Namespace) -> None:
    """Writes what was measured so far (JSON and CSV)."""
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")
    if a.csv:
        import csv
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(CSV_COLUMNS)
            for model, modes in res["models"].items():
                for mode, r in modes.items():
                    w.writerow(_csv_row(model, mode, res["managed"], r))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", help="one or more, comma-separated")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--layers", type=int, default=2, help="gpt2 layers")
    ap.add_argument("--tf32", action="store_true",
                    help="keep PyTorch's TF32 default (on Hopper its cuDNN kernels load through "
                         "TMA, which the page pass cannot see); default: --no-tf32")
    ap.add_argument("--managed", action="store_true",
                    help="PyTorch on managed memory (libuvmmanaged.so in LD_PRELOAD)")
    ap.add_argument("--modes", default="plain,timing,pages")
    ap.add_argument("--lib", default=None)
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--csv", default=None, help="and one row per model and mode here")
    a = ap.parse_args()
    lib = find_library(a.lib)
    env: dict[str, str] = {"UVMTRACE_TIMERS": "1"}
    if a.managed:
        mlib = lib.parent / "libuvmmanaged.so"
        if not mlib.is_file():
            raise SystemExit(f"--managed: {mlib} not found (build native_trace)")
        env["LD_PRELOAD"] = str(mlib)
    res: dict = {"batch": a.batch, "steps": a.steps, "image": a.image, "managed": a.managed,
                 "tf32": a.tf32, "models": {}}
    try:
        import torch
        res["gpu"] = torch.cuda.get_device_name(0)
        res["torch"] = torch.__version__
    except Exception as e:  # noqa: BLE001 - informational only
        res["gpu"] = f"unknown ({e})"
    for model in a.model.split(","):
        args = [sys.executable, str(SCRIPT), "--model", model, "--batch", str(a.batch),
                "--steps", str(a.steps), "--image", str(a.image), "--layers", str(a.layers)]
        if not a.tf32:
            args.append("--no-tf32")
        modes: dict = {}
        res["models"][model] = modes
        with tempfile.TemporaryDirectory(prefix="uvmt-bench-") as td:
            for mode in a.modes.split(","):
                try:
                    r = run_mode(mode, args, lib, Path(td), env)
                except Exception as e:  # noqa: BLE001 - recorded; the other modes go on
                    modes[mode] = {"error": str(e)[:500]}
                    print(f"{model:13s} {mode:16s} FAILED: {str(e)[:300]}", flush=True)
                    _save(res, a)
                    continue
                modes[mode] = r
                extra = ""
                if mode != "plain":
                    extra = f"  join+write {r['join_and_write_s']:.1f} s, {r['access_rows']} rows"
                if "per_launch_us" in r:
                    pl = r["per_launch_us"]
                    extra += (f"; {r['launches']} launches, tool us/launch: "
                              + " ".join(f"{k} {v:.0f}" for k, v in pl.items())
                              + f", {r['per_launch_copies']:.1f} copies")
                if r.get("streams"):
                    extra += (f"; stream rows {r['streams']['rows']} "
                              f"({r['stream_rows_per_access_row']:.2f}x access rows), "
                              f"without stream: {r['streams']['without_stream_by_reason']}")
                tw = r["train_wall_s"] if r["train_wall_s"] is not None else float("nan")
                print(f"{model:13s} {mode:16s} process {r['process_wall_s']:8.2f} s  train steps "
                      f"{tw:8.2f} s{extra}", flush=True)
                if r.get("kernels_without_pages"):
                    print(f"{model:13s} {mode:16s} WARNING: {r['kernels_without_pages']} of "
                          f"{r['kernels']} kernels recorded no page ({r['modules_patched']} "
                          "modules patched)", flush=True)
                _save(res, a)
        plain = modes.get("plain")
        if plain and "error" not in plain:
            for mode, r in modes.items():
                if mode == "plain" or "error" in r:
                    continue
                r["slowdown_process"] = r["process_wall_s"] / plain["process_wall_s"]
                if r["train_wall_s"] and plain["train_wall_s"]:
                    r["slowdown_train_steps"] = r["train_wall_s"] / plain["train_wall_s"]
                r["losses_equal_plain"] = r["losses"] == plain["losses"]
                print(f"{model:13s} {mode}: {r['slowdown_process']:.2f}x process wall, "
                      f"{r.get('slowdown_train_steps', float('nan')):.2f}x training steps, "
                      f"losses equal to plain: {r['losses_equal_plain']}", flush=True)
        _save(res, a)
    out = json.dumps(res, indent=2)
    print(out if len(out) < 20000 else out[:20000] + "...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
