"""Which time constants explain the probes' kernel times: fit on the fit split of the
probes' traces (split.csv), report on the holdout.

    python3 benchmarks/probes/timefit.py [--free batch_ns,fault_ns,...] [--batches 256,64,32]
        [--capacity free|balloon] [--out results/timefit.json]

The H100 probes (results/) are replayed with the `h100` model's options on the H100's
calibrated link (benchmarks/calibrate/results_h100/fit.json) at the capacity the driver
really had (free_bytes - 4 MiB, analyze.CONTEXT_BYTES). With the counts fixed the time layer
is linear in its constants (docs/model.md), so each run is replayed once per constant with
that constant at 1 and the others at 0, and the search runs on those components
(benchmarks/validate/fit.py does the same for the suite). One more component needs no
replay: `migrate_page_ns`, a cost per page a fault migrates from the host beyond its copy
(the replay's demand and prefetch bytes / 4 KiB).

The loss is the validation's: the sum of |ln(predicted / real)| of each probe's factor-1
kernel time and of its slowdowns at f > 1. Runs are the probes' runs of status ok.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))
sys.path.insert(0, str(HERE))

from analyze import CONTEXT_BYTES  # noqa: E402
from uvmsim import simulate  # noqa: E402
from uvmsim.config import Hardware, get_model, model_from_constants  # noqa: E402
from uvmsim.trace import load_trace  # noqa: E402

RESULTS = HERE / "results"
CALIB = HERE.parents[1] / "benchmarks" / "calibrate" / "results_h100" / "fit.json"
# constants the engine charges (one unit replay each) and the one computed from counts
REPLAYED = ("batch_ns", "fault_ns", "transfer_latency_ns", "inv_bw", "evict_ns",
            "zero_fill_ns")
LINEAR = REPLAYED + ("migrate_page_ns",)
BOUNDS = {"batch_ns": (1e3, 1e6), "fault_ns": (0.1, 1e4), "transfer_latency_ns": (1e2, 1e5),
          "evict_ns": (1.0, 1e6), "zero_fill_ns": (1.0, 1e4), "migrate_page_ns": (1.0, 1e4)}


def h100_hardware() -> Hardware:
    f = json.loads(CALIB.read_text())["fitted"]
    return Hardware(name="h100-calibrated", batch_ns=f["batch_ns"], fault_ns=f["fault_ns"],
                    transfer_latency_ns=f["transfer_latency_ns"],
                    bw_peak_gbps=f["bw_peak_gbps"], bw_b=f["bw_b"])


def unit_model(base, which: str):
    c = {k: 0.0 for k in REPLAYED if k != "inv_bw"}
    c.update(bw_peak_gbps=1e12, dtoh_bw_gbps=0.0, host_fault_ns=0.0)
    if which == "inv_bw":
        c["bw_peak_gbps"] = 1.0
    elif which != "compute":
        c[which] = 1.0
    return model_from_constants(c, base=base, source="unit component of the fit")


def components(runs: pd.DataFrame, base, capacity: str) -> np.ndarray:
    """[compute, one column per LINEAR constant] per run, in ns per unit."""
    traces: dict[str, object] = {}
    out = np.zeros((len(runs), 1 + len(LINEAR)))
    for i, (_, r) in enumerate(runs.iterrows()):
        if r["trace"] not in traces:
            traces[r["trace"]] = load_trace(HERE / "traces" / f"{r['trace']}.uvmtrace")
        cap = (int(r["free_bytes"]) - CONTEXT_BYTES if capacity == "free"
               else int(r["capacity_bytes"]))
        for j, which in enumerate(("compute",) + REPLAYED):
            res = simulate(traces[r["trace"]], model=unit_model(base, which), capacity_bytes=cap)
            out[i, j] = float(res.kernels["sim_ns"].sum())
            if which == "compute":
                s = res.summary
                out[i, -1] = (int(s["htod_bytes_demand"]) + int(s["htod_bytes_prefetch"])) / 4096
    out[:, 1:len(REPLAYED) + 1] -= out[:, :1]
    return out


def loss_terms(theta: np.ndarray, comp: np.ndarray, real: np.ndarray, base: np.ndarray
               ) -> np.ndarray:
    """ln(predicted / real) of the factor-1 time (base[i] == i) and of the slowdown else."""
    pred = comp[:, 0] + comp[:, 1:] @ theta
    return np.log(pred / real) - np.where(base == np.arange(len(base)), 0.0,
                                          np.log(pred[base] / real[base]))


def search(comp, real, base, start: dict, free: tuple[str, ...]) -> dict:
    """Coordinate descent on a log grid inside BOUNDS (as benchmarks/validate/fit.py)."""
    theta = np.array([start[k] for k in LINEAR])
    for step in (2.0, 1.25, 1.05):
        for _ in range(40):
            moved = False
            for j, k in enumerate(LINEAR):
                if k not in free:
                    continue
                lo, hi = BOUNDS[k]
                best = np.abs(loss_terms(theta, comp, real, base)).sum()
                for f in (step, 1 / step):
                    t = theta.copy()
                    t[j] = min(max(t[j] * f, lo), hi)
                    v = np.abs(loss_terms(t, comp, real, base)).sum()
                    if v < best - 1e-12:
                        best, theta, moved = v, t, True
            if not moved:
                break
    return dict(zip(LINEAR, theta))


def summary(terms: np.ndarray, base: np.ndarray) -> dict:
    one = base == np.arange(len(base))
    a1, ao = np.abs(terms[one]), np.abs(terms[~one])
    return {"f1_runs": int(one.sum()), "f1_median_x": math.exp(float(np.median(a1))),
            "f1_worst_x": math.exp(float(a1.max())),
            "slowdown_runs": int((~one).sum()),
            "slowdown_median_x": math.exp(float(np.median(ao))),
            "slowdown_within_2x": float(np.mean(ao <= math.log(2)))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--free", default="zero_fill_ns,evict_ns",
                    help="constants searched; the others keep the calibration's value (0 "
                         "for migrate_page_ns, zero_fill_ns and evict_ns)")
    ap.add_argument("--batches", default="256,64,32")
    ap.add_argument("--capacity", default="free", choices=("free", "balloon"))
    ap.add_argument("--model", default="h100",
                    help="the options' model (its hardware is replaced by the H100's "
                         "calibration, its batch size by each of --batches)")
    ap.add_argument("--option", action="append", default=[], metavar="NAME=on|off",
                    help="switch a model option (small_blocks, slices, host_access, ...)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="start a constant at this value (with --free '' the run only scores "
                         "these constants: how a preset fitted elsewhere does on the probes)")
    ap.add_argument("--out", type=Path, default=RESULTS / "timefit.json",
                    help="also writes OUT_runs.csv: every run, real against predicted")
    a = ap.parse_args(argv)
    free = tuple(x for x in a.free.split(",") if x)
    bad = sorted(set(free) - set(BOUNDS))
    if bad:
        ap.error(f"--free: unknown constant {bad[0]}; known: {', '.join(BOUNDS)}")
    options = {k: v == "on" for k, v in (o.split("=", 1) for o in a.option)}
    split = pd.read_csv(HERE / "split.csv").set_index("trace")["split"]
    runs = pd.read_csv(RESULTS / "probes.csv")
    runs = runs[runs["status"] == "ok"].reset_index(drop=True)
    runs["split"] = runs["trace"].map(split)
    if runs["split"].isna().any():
        raise SystemExit(f"split.csv misses {sorted(set(runs.loc[runs.split.isna(), 'trace']))}")
    first = {p: i for i, (p, f) in enumerate(zip(runs["probe"], runs["factor"])) if f == 1}
    base_idx = np.array([first[p] for p in runs["probe"]])
    real = runs["real_s"].to_numpy() * 1e9
    hw = h100_hardware()
    start = {"batch_ns": hw.batch_ns, "fault_ns": hw.fault_ns,
             "transfer_latency_ns": hw.transfer_latency_ns, "inv_bw": 1 / hw.bw_peak_gbps,
             "evict_ns": 0.0, "zero_fill_ns": 0.0, "migrate_page_ns": 0.0}
    for k in free:
        start[k] = max(start[k], BOUNDS[k][0] * 10)
    for k, v in (x.split("=", 1) for x in a.set):
        if k not in start:
            ap.error(f"--set: unknown constant {k}; known: {', '.join(start)}")
        start[k] = float(v)
    fit = (runs["split"] == "fit").to_numpy()

    def local(mask: np.ndarray) -> np.ndarray:
        """base_idx within the runs of `mask` (a probe's runs share its split)."""
        pos = {old: new for new, old in enumerate(np.flatnonzero(mask))}
        return np.array([pos[b] for b in base_idx[mask]])

    # the calibration alone: its constants, and 0 for the ones it did not measure
    calib = np.array([{"batch_ns": hw.batch_ns, "fault_ns": hw.fault_ns,
                       "transfer_latency_ns": hw.transfer_latency_ns,
                       "inv_bw": 1 / hw.bw_peak_gbps}.get(k, 0.0) for k in LINEAR])
    results = []
    for batch in [int(x) for x in a.batches.split(",")]:
        model = get_model(a.model, hardware=hw, fault_batch_size=batch, **options)
        comp = components(runs, model, a.capacity)
        theta = search(comp[fit], real[fit], local(fit), start, free)
        th = np.array([theta[k] for k in LINEAR])
        terms = loss_terms(th, comp, real, base_idx)
        terms0 = loss_terms(calib, comp, real, base_idx)
        res = {"fault_batch_size": batch,
               "constants": {k: round(float(theta[k]), 1) for k in free},
               "fit_loss": float(np.abs(terms[fit]).sum()),
               "fit": summary(terms[fit], local(fit)),
               "holdout": summary(terms[~fit], local(~fit)),
               "calibration_only": {"fit": summary(terms0[fit], local(fit)),
                                    "holdout": summary(terms0[~fit], local(~fit))}}
        res["_runs"] = pd.DataFrame({
            "probe": runs["probe"], "factor": runs["factor"], "split": runs["split"],
            "real_ms": real / 1e6, "predicted_ms": (comp[:, 0] + comp[:, 1:] @ th) / 1e6,
            "calibration_only_ms": (comp[:, 0] + comp[:, 1:] @ calib) / 1e6,
            "ln_error": terms})
        results.append(res)
        print(json.dumps({k: v for k, v in res.items() if k != "_runs"}), flush=True)
    best = min(results, key=lambda r: r["fit_loss"])
    best["_runs"].to_csv(a.out.with_name(a.out.stem + "_runs.csv"), index=False,
                         float_format="%.5g")
    for r in results:
        del r["_runs"]
    out = {"capacity": a.capacity, "model_options": a.model, "options": options, "hardware": "H100 calibration "
           "(benchmarks/calibrate/results_h100/fit.json)", "free": list(free),
           "split": "split.csv", "best": best, "tried": results}
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"best: fault_batch_size {best['fault_batch_size']}: {best['constants']}")
    for s in ("fit", "holdout"):
        e = best[s]
        print(f"  {s}: factor-1 time median x{e['f1_median_x']:.2f} (worst "
              f"x{e['f1_worst_x']:.2f}, {e['f1_runs']} probes); slowdown median "
              f"x{e['slowdown_median_x']:.2f}, within 2x {e['slowdown_within_2x']:.0%} "
              f"({e['slowdown_runs']} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
