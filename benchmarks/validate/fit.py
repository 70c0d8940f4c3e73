"""Replay the validation workloads against their real oversubscribed runs; fit and report.

    python benchmarks/validate/fit.py predict [--model auto|NAME] [--split all|fit|holdout]
        [--jobs N]                                         # N processes, a workload each
    python benchmarks/validate/fit.py fit [--card h200]   # fit a card's constants on the fit split
    python benchmarks/validate/fit.py grid --card h100 --option block_progress=on \
        --grid batch_ns=20000,40000 --jobs 2               # constants by replays (timed options)
    python benchmarks/validate/fit.py report              # validation.csv + figure + error table

Traces come from benchmarks/validate/traces/ (regenerate with
`STEPS=trace bash benchmarks/validate/run_device.sh`); real runs from results/real_runs.csv
and each card's results folder (results/h100/real_runs.csv, validate.py --results), one row
per workload, factor and card (its `card` column: the GPU's name). Each row is replayed with its
card's model (`--model auto`, the default: CARD_MODELS, h100 for H100 rows, h200 for H200
ones) or with the one `--model` names. A run's replay capacity is what the driver had for
managed data: free_bytes less the context (`--context`, default cuda=4,torch=228: the driver
probes measured 2-4 MiB for a CUDA program, docs/model.md; a PyTorch program's memory after
the balloon is TORCH_CONTEXT_MIB, measured at its exit; docs/groundtruth.md). Times compared
are kernel times: the real sum of kernel durations (real_s) against the replay's sum of
per-kernel sim_ns.
`--results` and `--traces` take one card's folders instead (e.g. results/h100 and the
traces recorded on that card): its runs are read and its fit.json and validation.csv written.
`--probes DIR` adds the driver probes' runs (benchmarks/probes/results/probes.csv or
`--probe-runs CSV`, runs of status ok) as workloads of their card, each named by its probe
and replaying its probe's trace from DIR, in the split benchmarks/probes/split.csv gave it
before its first fit.
docs/validation.md describes the method and shows the results.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parents[1] / "src"))
sys.path.insert(0, str(HERE))

from uvmsim import simulate  # noqa: E402
from uvmsim.config import Model, get_model, model_from_constants  # noqa: E402
from uvmsim.groundtruth import required_traffic, trace_bounds  # noqa: E402
from uvmsim.trace import load_trace  # noqa: E402
from cards import card_of  # noqa: E402  (benchmarks/validate/cards.py)

TRACES = HERE / "traces"
PROBES = HERE.parent / "probes"
#: where a trace not in TRACES is found (--probes)
TRACE_DIRS: dict[str, Path] = {}
RESULTS = HERE / "results"
CSV_COLUMNS = ["workload", "kind", "pattern", "factor", "split", "real_s", "real_censored",
               "real_base_s", "predicted_s", "predicted_base_s", "real_slowdown",
               "predicted_slowdown", "ratio", "slowdown_ratio", "real_faults", "predicted_faults",
               "real_htod_bytes", "predicted_htod_bytes", "real_dtoh_bytes",
               "predicted_dtoh_bytes", "capacity_bytes", "card", "model",
               "required_htod_bytes", "required_dtoh_bytes"]
#: the model each card's rows are replayed with under --model auto
CARD_MODELS = {"h100": "h100", "h200": "h200"}
MiB = 1 << 20
#: GPU memory a PyTorch program takes for itself after the balloon (its `device` allocations,
#: 134.5 MB in the MLPs' traces, and about 100 MiB the trace does not show), measured
#: as free_bytes - free_at_exit_bytes in the runs of programs that free all their managed
#: memory before they exit: 239,075,328 bytes in every run of mlp_nopca (fit split) at factors
#: 1.25-3 and of transformer_nopca at 1.5-3 on the H200 (results/real_runs.csv; a test checks
#: it against that file). The probed reserve (128 MiB, results/reserve.json) is too small: its
#: probe, mlp_pca, touches only 570 MB of its 673 MB footprint, so 128 MiB more than the
#: footprint held it (docs/groundtruth.md, "The context a PyTorch program takes").
TORCH_CONTEXT_MIB = 228
DEFAULT_CONTEXT = f"cuda=4,torch={TORCH_CONTEXT_MIB}"


def parse_context(spec: str) -> dict[str, int | None]:
    """'cuda=4,torch=reserve' -> {kind: context bytes, or None for the measured reserve}."""
    out: dict[str, int | None] = {}
    for part in (x.strip() for x in spec.split(",") if x.strip()):
        kind, _, v = part.partition("=")
        try:
            out[kind] = None if v == "reserve" else int(float(v) * MiB)
        except ValueError:
            raise SystemExit(f"--context {spec!r}: {part!r} is not KIND=MiB or KIND=reserve")
    return out


def load_runs(context: str = DEFAULT_CONTEXT) -> pd.DataFrame:
    """Real runs that finished or were censored (a run that failed to start has no time),
    with their card and the capacity their replay gets."""
    paths = [p for p in [RESULTS / "real_runs.csv"] + sorted(RESULTS.glob("*/real_runs.csv"))
             if p.exists()]
    runs = pd.concat([pd.read_csv(p).assign(_file=str(p)) for p in paths], ignore_index=True)
    wl = pd.read_csv(HERE / "workloads.csv")[["workload", "pattern"]]
    runs = runs.merge(wl, on="workload")
    runs["trace"] = runs["workload"]
    runs = runs[runs["real_s"].notna()].copy()
    runs["censored"] = runs["censored"].astype(str).str.lower() == "true"
    gpu = runs["card"] if "card" in runs else pd.Series("", index=runs.index)
    runs["card"] = [card_of("" if g != g else str(g)) for g in gpu]
    # each folder holds one card's runs: a run in two of them would be replayed twice and
    # its factor-1 time would be ambiguous (runs made again for another purpose belong two
    # levels down, e.g. results/remeasured/)
    dup = runs[runs.duplicated(["workload", "card", "factor"], keep=False)]
    if len(dup):
        first = dup.iloc[0]
        files = sorted(set(dup.loc[dup["workload"] == first["workload"], "_file"]))
        raise SystemExit(f"{len(dup)} real runs appear twice, e.g. {first['workload']} at "
                         f"factor {first['factor']:g} on {first['card']}, in {files}")
    runs = runs.drop(columns="_file")
    ctx = parse_context(context)
    runs["capacity_bytes"] = [
        int(f) - (int(r) if ctx.get(k) is None else ctx[k])
        for f, r, k in zip(runs["free_bytes"], runs["reserve_bytes"], runs["kind"])]
    return runs.sort_values(["workload", "card", "factor"]).reset_index(drop=True)


def probe_runs(context: str = DEFAULT_CONTEXT, path: Path | None = None) -> pd.DataFrame:
    """The driver probes' runs (benchmarks/probes) as rows of load_runs: workload = the
    probe, trace = the trace it replays, split from benchmarks/probes/split.csv (by trace),
    kernel time, CUPTI's counts and the capacity by the same context (CUDA programs)."""
    p = pd.read_csv(path or PROBES / "results" / "probes.csv")
    p = p[p["status"] == "ok"]
    split = pd.read_csv(PROBES / "split.csv").set_index("trace")["split"]
    runs = pd.DataFrame({
        "workload": p["probe"], "trace": p["trace"], "kind": "cuda", "pattern": "probe",
        "factor": p["factor"].astype(float), "real_s": p["real_s"].astype(float),
        "censored": p["censored"].astype(str).str.lower() == "true",
        "faults": p["gpu_fault_records"], "htod_bytes": p["htod_bytes"],
        "dtoh_bytes": p["dtoh_bytes"], "free_bytes": p["free_bytes"],
        "reserve_bytes": p["reserve_bytes"], "split": p["trace"].map(split),
        "card": [card_of(str(g)) for g in p["gpu"]]})
    if runs["split"].isna().any():
        raise SystemExit(f"{PROBES / 'split.csv'} misses "
                         f"{sorted(set(runs.loc[runs['split'].isna(), 'trace']))}")
    ctx = parse_context(context)
    runs["capacity_bytes"] = [int(f) - (int(r) if ctx.get("cuda") is None else ctx["cuda"])
                              for f, r in zip(runs["free_bytes"], runs["reserve_bytes"])]
    return runs.sort_values(["workload", "card", "factor"]).reset_index(drop=True)


_TRACES: dict[str, object] = {}


def trace_path(name: str) -> Path:
    """Where trace `name` is: TRACES, or the folder --probes gave for a probe's trace."""
    return TRACE_DIRS.get(name, TRACES) / f"{name}.uvmtrace"


_WARNED: set[tuple[str, str]] = set()


def trace_of(name: str, card: str | None = None):
    if name not in _TRACES:
        p = trace_path(name)
        if not p.exists():
            raise SystemExit(f"{p}: missing; record it with "
                             f"STEPS=trace WORKLOADS={name} bash benchmarks/validate/run_device.sh")
        _TRACES[name] = load_trace(p)
    t = _TRACES[name]
    src = t.manifest.get("source", {})
    # a trace whose kernel durations were taken from another recording says whose
    # (benchmarks/probes/with_durations.py): they are the replay's compute time
    traced = card_of(str(src.get("kernel_durations_gpu", src.get("gpu", ""))))
    if card is not None and traced != card and (name, card) not in _WARNED:
        # the kernels' durations (the replay's compute time) are the recording card's
        _WARNED.add((name, card))
        print(f"warning: {name} was traced on {traced}, its {card} runs replay its "
              f"{traced} kernel durations", file=sys.stderr)
    return t


def replay(name: str, capacity_bytes: int, model, card: str | None = None) -> dict:
    t = trace_of(name, card)
    if model.block_progress and (name, "streams") not in _WARNED and t.streams is None:
        # its kernels replay as page sets: a grid or fit of the front-end's constants
        # over such traces fits page sets (v1.1 traces, such as the H100 probes' in
        # benchmarks/probes/traces/, have no streams)
        _WARNED.add((name, "streams"))
        print(f"warning: {name} has no v1.2 per-thread-block streams; block_progress "
              "replays its kernels as page sets", file=sys.stderr)
    r = simulate(t, model=model, capacity_bytes=int(capacity_bytes))
    k = r.kernels
    return {"predicted_s": float(k["sim_ns"].sum()) / 1e9,
            "predicted_faults": int(r.summary["faults"]),
            "predicted_htod_bytes": int(r.summary["htod_bytes"]),
            "predicted_dtoh_bytes": int(r.summary["dtoh_bytes_evict"])
            + int(r.summary["dtoh_bytes_api_prefetch"]) + int(r.extra["dtoh_bytes_host"])}


_BOUNDS: dict[str, pd.DataFrame] = {}


def predict(runs: pd.DataFrame, model_for) -> pd.DataFrame:
    """Every run replayed with the model `model_for(card)` gives its card (model_maker)."""
    rows = []
    for _, r in runs.iterrows():
        m = model_for(r["card"])
        p = replay(r["trace"], r["capacity_bytes"], m, r["card"])
        row = {"workload": r["workload"], "kind": r["kind"], "pattern": r["pattern"],
               "factor": r["factor"], "split": r["split"], "real_s": r["real_s"],
               "real_censored": bool(r["censored"]), "real_faults": r["faults"],
               "real_htod_bytes": r["htod_bytes"], "real_dtoh_bytes": r["dtoh_bytes"],
               "capacity_bytes": int(r["capacity_bytes"]), "card": r["card"],
               "model": m.name, **p}
        if r["htod_bytes"] == r["htod_bytes"]:
            # CUPTI's counts are lower bounds (docs/model.md, 8): beside them, what the run
            # must have moved
            if r["trace"] not in _BOUNDS:
                _BOUNDS[r["trace"]] = trace_bounds(trace_of(r["trace"]))
            row["required_htod_bytes"], row["required_dtoh_bytes"] = required_traffic(
                _BOUNDS[r["trace"]], int(r["free_bytes"]))
        rows.append(row)
    df = pd.DataFrame(rows)
    for c in ("required_htod_bytes", "required_dtoh_bytes"):
        if c not in df:
            df[c] = np.nan
    base = df[df["factor"] == 1].set_index(["workload", "card"])
    key = list(zip(df["workload"], df["card"]))
    df["real_base_s"] = [base["real_s"].get(k, np.nan) for k in key]
    df["predicted_base_s"] = [base["predicted_s"].get(k, np.nan) for k in key]
    df["real_slowdown"] = df["real_s"] / df["real_base_s"]
    df["predicted_slowdown"] = df["predicted_s"] / df["predicted_base_s"]
    df["ratio"] = df["predicted_s"] / df["real_s"]
    df["slowdown_ratio"] = df["predicted_slowdown"] / df["real_slowdown"]
    return df[CSV_COLUMNS]


_PRED: dict = {}


def _predict_group(key: tuple[str, str]) -> pd.DataFrame:
    """predict() of one (workload, card)'s runs (a worker of predict_jobs)."""
    runs = _PRED["runs"]
    return predict(runs[(runs["workload"] == key[0]) & (runs["card"] == key[1])],
                   _PRED["model_for"])


def predict_jobs(runs: pd.DataFrame, model_for, jobs: int) -> pd.DataFrame:
    """predict() with `jobs` processes, one (workload, card) at a time each (so each trace
    is loaded by one worker); the rows come back in the runs' order, as predict's."""
    if jobs <= 1:
        return predict(runs, model_for)
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing as mp
    keys = list(dict.fromkeys(zip(runs["workload"], runs["card"])))
    _PRED.update(runs=runs, model_for=model_for)
    with ProcessPoolExecutor(min(jobs, len(keys)), mp_context=mp.get_context("fork")) as ex:
        parts = list(ex.map(_predict_group, keys))
    df = pd.concat(parts, ignore_index=True)
    order = {k: i for i, k in enumerate(zip(runs["workload"], runs["card"], runs["factor"]))}
    pos = [order[k] for k in zip(df["workload"], df["card"], df["factor"])]
    return df.iloc[np.argsort(pos, kind="stable")].reset_index(drop=True)


def errors(df: pd.DataFrame) -> dict:
    """The goal's measures (docs/validation.md): at factor 1 |ln(predicted / real time)|; at
    f > 1 |ln(predicted / real slowdown)| over runs that finished, and for censored runs
    (real slowdown > bound) how far below half the bound the prediction falls."""
    one = df[df["factor"] == 1]
    l1 = np.abs(np.log(one["ratio"].to_numpy()))
    over = df[(df["factor"] > 1) & ~df["real_censored"]]
    lo = np.abs(np.log(over["slowdown_ratio"].to_numpy()))
    cen = df[(df["factor"] > 1) & df["real_censored"]]
    return {"f1_n": int(len(one)), "f1_median": float(np.median(l1)) if len(l1) else math.nan,
            "n": int(len(over)), "median": float(np.median(lo)) if len(lo) else math.nan,
            "max": float(lo.max()) if len(lo) else math.nan,
            "within_2x": float(np.mean(lo <= math.log(2))) if len(lo) else math.nan,
            "censored_n": int(len(cen)),
            "censored_ok": int((cen["slowdown_ratio"] >= 0.5).sum())}


def fmt(e: dict) -> str:
    return (f"factor 1: median time error x{math.exp(e['f1_median']):.2f} ({e['f1_n']} runs); "
            f"f > 1: median slowdown error x{math.exp(e['median']):.2f}, worst "
            f"x{math.exp(e['max']):.1f}, within 2x {e['within_2x']:.0%} ({e['n']} runs); "
            f"censored >= half the bound {e['censored_ok']}/{e['censored_n']}")


# The time layer is linear in these constants once the counts are fixed (docs/model.md:
# stall = batches x batch_ns + faults x fault_ns + transfers x (latency + bytes / bw) + ...;
# the bandwidth curve is flat from 4 KiB with the calibrated b, so bytes / bw is linear in
# 1 / bw). The fit replays each run once per constant with that constant at 1 and the others
# at 0, then searches the constants on those components: no replay per trial.
LINEAR = ("batch_ns", "fault_ns", "transfer_latency_ns", "inv_bw", "evict_ns",
          "zero_fill_ns", "host_fault_ns", "migrate_page_ns", "zero_batch_ns")
# the link bandwidth was measured directly (3.7 % rms over 94,000 migrations,
# docs/calibration.md) and stays fixed; the others are searched inside physical bounds
BOUNDS = {"batch_ns": (1e3, 1e6), "fault_ns": (1.0, 1e4), "transfer_latency_ns": (1e2, 1e5),
          "evict_ns": (1.0, 1e6), "zero_fill_ns": (1.0, 1e3), "host_fault_ns": (1.0, 1e5),
          "migrate_page_ns": (1.0, 1e4), "zero_batch_ns": (1e2, 1e6)}
HUGE_BW = 1e12


def unit_model(base, which: str):
    c = {k: 0.0 for k in LINEAR if k != "inv_bw"}
    c["bw_peak_gbps"] = HUGE_BW
    c["dtoh_bw_gbps"] = 0.0
    if which == "inv_bw":
        c["bw_peak_gbps"] = 1.0
    elif which != "compute":
        c[which] = 1.0
    return model_from_constants(c, base=base, source="unit component of the fit")


def components(runs: pd.DataFrame, base) -> np.ndarray:
    """[compute, one column per LINEAR constant] per run, in seconds per unit; cached in
    benchmarks/out/ by the runs, the traces' sizes and the model."""
    import hashlib
    key = hashlib.sha256(json.dumps([runs[["workload", "card", "capacity_bytes"]].values.tolist(),
                                     [(trace_path(w) / "accesses.parquet").stat().st_size
                                      for w in runs["trace"]],
                                     base.to_dict()], default=str).encode()).hexdigest()[:16]
    cache = HERE.parents[1] / "benchmarks" / "out" / f"validate_components_{key}.npy"
    if cache.exists():
        return np.load(cache)
    out = np.zeros((len(runs), 1 + len(LINEAR)))
    for j, which in enumerate(("compute",) + LINEAR):
        m = unit_model(base, which)
        for i, (_, r) in enumerate(runs.iterrows()):
            out[i, j] = replay(r["trace"], r["capacity_bytes"], m, r["card"])["predicted_s"]
    out[:, 1:] -= out[:, :1]
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, out)
    return out


def comp_loss(theta: np.ndarray, comp: np.ndarray, real: np.ndarray, cen: np.ndarray,
              base: np.ndarray) -> float:
    """Sum of |ln(predicted / real)| of the factor-1 time (base[i] == i) and of the slowdown
    (t(f) / t(1)) at f > 1, the quantity the goal is set on (docs/validation.md); a censored
    run (real > T) counts only when predicted below its bound. Absolute, not squared: a few
    runs that no constant can fix must not drag the constants away from the many it can."""
    lr = log_errors(comp[:, 0] + comp[:, 1:] @ theta, real, base)
    return float(np.sum(np.abs(np.where(cen, np.minimum(lr, 0.0), lr))))


def log_errors(pred: np.ndarray, real: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Per run, ln(predicted / real) of the factor-1 time (base[i] == i) or of the slowdown
    (time at f over the run base[i]'s, the same workload's at factor 1)."""
    return np.log(pred / real) - np.where(base == np.arange(len(base)), 0.0,
                                          np.log(pred[base] / real[base]))


def fit_split(runs: pd.DataFrame, card: str) -> tuple[pd.DataFrame, np.ndarray]:
    """`card`'s fit-split runs in the order `grid` and `fit` replay them, and for each the
    index of its workload's factor-1 run among them (comp_loss's `base`)."""
    fitruns = runs[(runs["split"] == "fit") & (runs["card"] == card)].reset_index(drop=True)
    first = {w: i for i, (w, f) in enumerate(zip(fitruns["workload"], fitruns["factor"]))
             if f == 1}
    return fitruns, np.array([first[w] for w in fitruns["workload"]])


def search(comp: np.ndarray, real: np.ndarray, cen: np.ndarray, base: np.ndarray,
           start: dict, free: tuple[str, ...]) -> dict:
    """Coordinate descent on a log grid inside BOUNDS, refined three times."""
    theta = np.array([min(max(start[k], BOUNDS[k][0]), BOUNDS[k][1]) if k in free
                      else start[k] for k in LINEAR])
    for step in (2.0, 1.25, 1.05):
        for _ in range(30):
            moved = False
            for j, k in enumerate(LINEAR):
                if k not in free:
                    continue
                lo, hi = BOUNDS[k]
                best = comp_loss(theta, comp, real, cen, base)
                for f in (step, 1 / step):
                    t = theta.copy()
                    t[j] = min(max(t[j] * f, lo), hi)
                    v = comp_loss(t, comp, real, cen, base)
                    if v < best - 1e-12:
                        best, theta, moved = v, t, True
            if not moved:
                break
    return dict(zip(LINEAR, theta))


def fitted_constants(theta: dict, batch: int, free) -> dict:
    c = {k: round(float(v), 1) for k, v in theta.items() if k in free}
    c["fault_batch_size"] = batch
    return c


def parse_settings(option: list[str], set_: list[str]) -> tuple[dict, dict[str, float]]:
    """--option NAME=on|off|N|WORD and --set CONSTANT=VALUE as model_maker takes them."""
    options = {k: v == "on" if v in ("on", "off") else int(v) if v.lstrip("-").isdigit()
               else v for k, v in (o.split("=", 1) for o in option)}
    return options, {k: float(v) for k, v in (x.split("=", 1) for x in set_)}


def model_maker(name: str, options: dict[str, bool], sets: dict[str, float]):
    """card -> the Model its rows are replayed with: `name` (or the card's under "auto")
    with the options switched and the constants set."""
    cache: dict[str, Model] = {}

    def make(card: str) -> Model:
        if card not in cache:
            if name == "auto" and card not in CARD_MODELS:
                raise SystemExit(f"no model for card {card!r}: add it to CARD_MODELS or give "
                                 "--model")
            m = get_model(CARD_MODELS[card] if name == "auto" else name, **options)
            if sets:
                m = model_from_constants(sets, base=m, source="command line")
            cache[card] = m
        return cache[card]
    return make


def tie_zero_batch(comp: np.ndarray, free, hw) -> np.ndarray:
    """Components with the batches that migrate nothing folded into batch_ns's column when
    zero_batch_ns is unset and not searched: unset, those batches cost batch_ns, so a fit
    that moves batch_ns moves them too (the components count the two kinds apart)."""
    if "zero_batch_ns" in free or hw.zero_batch_ns is not None:
        return comp
    zb = 1 + LINEAR.index("zero_batch_ns")
    out = comp.copy()
    out[:, 1 + LINEAR.index("batch_ns")] += out[:, zb]
    out[:, zb] = 0.0
    return out


def fit_card(card: str, runs: pd.DataFrame, base_model: Model, a) -> dict:
    """The constants `--free` of one card's model, fitted on its fit-split runs."""
    timed = [o for o in ("block_progress", "thrashing") if getattr(base_model, o)]
    if timed:
        # the components assume counts that do not depend on the constants; with these
        # options a batch's cost moves the blocks' or the pins' timing, and so the counts
        raise SystemExit(f"fit: the time layer is not linear with {', '.join(timed)} on (its "
                         "counts depend on time); compare constants by replaying them with "
                         "`grid` instead")
    fitruns, base_idx = fit_split(runs, card)
    if fitruns.empty:
        raise SystemExit(f"no fit-split run on card {card!r}")
    real = fitruns["real_s"].to_numpy()
    cen = fitruns["censored"].to_numpy()
    hw = base_model.hardware
    # a constant not searched keeps the model's value; a searched one starts where the
    # search can move it (a constant at 0 would stay there on a log grid)
    start = {"batch_ns": hw.batch_ns, "fault_ns": hw.fault_ns,
             "transfer_latency_ns": hw.transfer_latency_ns, "inv_bw": 1 / hw.bw_peak_gbps,
             "evict_ns": hw.evict_ns, "zero_fill_ns": hw.zero_fill_ns,
             "host_fault_ns": hw.host_fault_ns, "migrate_page_ns": hw.migrate_page_ns,
             # unset: the batches that migrate nothing cost batch_ns, as before
             "zero_batch_ns": hw.batch_ns if hw.zero_batch_ns is None else hw.zero_batch_ns}
    floor = {"evict_ns": 1e3, "zero_fill_ns": 10.0, "host_fault_ns": 1e3,
             "migrate_page_ns": 10.0}
    start.update({k: max(start[k], floor[k]) for k in floor if k in a.free})
    best = None
    for batch in a.batches:
        t = time.time()
        base = get_model(base_model, fault_batch_size=batch)
        comp = tie_zero_batch(components(fitruns, base), a.free, hw)
        theta = search(comp, real, cen, base_idx, start, tuple(a.free))
        for j, k in enumerate(LINEAR):
            # a constant whose component is nil on every fit run is not identified by this
            # split: it stays at the model's value
            if k in a.free and not np.any(comp[:, 1 + j] > 1e-12):
                theta[k] = start[k] if k == "zero_batch_ns" else getattr(hw, k)
        v = comp_loss(np.array([theta[k] for k in LINEAR]), comp, real, cen, base_idx)
        print(f"{card} fault_batch_size {batch}: loss {v:.3f} "
              f"{fitted_constants(theta, batch, a.free)} ({time.time() - t:.0f} s)", flush=True)
        if best is None or v < best[0]:
            best = (v, batch, theta)
    v, batch, theta = best
    return {"loss": v, "split": "fit", "runs": int(len(fitruns)), "base_model": base_model.name,
            "context": a.context,
            "options": {f.name: getattr(base_model, f.name) for f in dataclasses.fields(Model)
                        if isinstance(getattr(base_model, f.name), bool)},
            "constants": fitted_constants(theta, batch, a.free)}


# `grid`: constants compared by replaying, for options whose counts depend on time
_GRID: dict = {}


def parse_grid(specs: list[str]) -> list[dict[str, float]]:
    """--grid NAME=V1,V2,... (repeatable) -> every combination, as --set dicts."""
    axes = []
    for spec in specs:
        name, _, vals = spec.partition("=")
        if name not in BOUNDS or not vals:
            raise SystemExit(f"--grid {spec!r}: want CONSTANT=V1,V2,... with CONSTANT one of "
                             f"{', '.join(BOUNDS)}")
        try:
            axes.append([(name, float(v)) for v in vals.split(",")])
        except ValueError:
            raise SystemExit(f"--grid {spec!r}: {vals!r} are not numbers")
    points: list[dict[str, float]] = [{}]
    for ax in axes:
        points = [{**p, k: v} for p in points for k, v in ax]
    return points


def _grid_point(point: dict[str, float]) -> tuple[float, list[float]]:
    """The fit-split loss (comp_loss on replayed times) of one grid point."""
    g = _GRID
    model_for = model_maker(g["model"], g["options"], {**g["sets"], **point})
    pred = np.array([replay(r["trace"], r["capacity_bytes"], model_for(r["card"]),
                            r["card"])["predicted_s"] for _, r in g["runs"].iterrows()])
    v = comp_loss(np.zeros(0), pred[:, None], g["real"], g["cen"], g["base"])
    return v, pred.tolist()


def grid_card(card: str, runs: pd.DataFrame, a) -> dict:
    """Every --grid point replayed on `card`'s fit-split runs; the one with the least loss.
    What `fit` does through linear components, for options (block_progress, thrashing)
    whose counts move with the constants, so that every point is a replay."""
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing as mp
    fitruns, base = fit_split(runs, card)
    if fitruns.empty:
        raise SystemExit(f"no fit-split run on card {card!r}")
    options, sets = parse_settings(a.option, a.set)
    _GRID.update(runs=fitruns, model=a.model, options=options, sets=sets,
                 real=fitruns["real_s"].to_numpy(), cen=fitruns["censored"].to_numpy(),
                 base=base)
    points = parse_grid(a.grid)
    t = time.time()
    if a.jobs > 1:
        with ProcessPoolExecutor(a.jobs, mp_context=mp.get_context("fork")) as ex:
            out = list(ex.map(_grid_point, points))
    else:
        out = [_grid_point(p) for p in points]
    rows = [{"point": p, "loss": v, "predicted_s": pr} for p, (v, pr) in zip(points, out)]
    for r in rows:
        print(f"{card} {r['point']}: loss {r['loss']:.3f}", flush=True)
    best = min(rows, key=lambda r: r["loss"])
    print(f"{card} best {best['point']}: loss {best['loss']:.3f} ({len(rows)} points, "
          f"{time.time() - t:.0f} s)")
    return {"split": "fit", "runs": int(len(fitruns)), "options": options, "sets": sets,
            "workloads": sorted(set(fitruns["workload"])), "best": best["point"],
            "loss": best["loss"], "points": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("predict", "fit", "grid", "report"))
    ap.add_argument("--model", default="auto",
                    help="a registered model for every row, or auto: each card's "
                         f"({', '.join(f'{c}: {m}' for c, m in CARD_MODELS.items())})")
    ap.add_argument("--split", default="all", choices=("all", "fit", "holdout"))
    ap.add_argument("--card", default=None, help="only this card's rows (h100, h200, ...)")
    ap.add_argument("--context", default=DEFAULT_CONTEXT,
                    help="GPU memory the context takes from free_bytes, per kind of workload: "
                         "KIND=MiB or KIND=reserve (the measured reserve); kinds not named "
                         f"use their reserve (default {DEFAULT_CONTEXT})")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a model constant (model_from_constants keys)")
    ap.add_argument("--option", action="append", default=[], metavar="NAME=on|off|N|WORD",
                    help="switch a model option (any boolean of uvmsim.config.Model: slices, "
                         "host_access, thrashing, small_blocks, ...) or set an integer or a "
                         "choice (store_ahead=N, fault_order=age)")
    ap.add_argument("--workloads", type=lambda v: v.split(","), default=None,
                    help="only these workloads' rows (comma-separated)")
    ap.add_argument("--free", type=lambda v: v.split(","), default=list(BOUNDS),
                    help="constants the fit searches (default: all but the bandwidth); "
                         "the others keep the model's values")
    ap.add_argument("--batches", type=lambda v: [int(x) for x in v.split(",")],
                    default=[256, 64, 32], help="fault_batch_size values the fit tries")
    ap.add_argument("--results", type=Path, default=None,
                    help="results folder of one card (default benchmarks/validate/results): "
                         "its real_runs.csv is read and its fit.json/validation.csv written")
    ap.add_argument("--traces", type=Path, default=None,
                    help="traces recorded on that card (default benchmarks/validate/traces)")
    ap.add_argument("--probes", type=Path, default=None, metavar="TRACES_DIR",
                    help="add the driver probes' runs as workloads, their traces from this "
                         "folder (benchmarks/probes/traces: v1.1; v1.2 ones for "
                         "block_progress)")
    ap.add_argument("--probe-runs", type=Path, default=None, metavar="CSV",
                    help="with --probes: the probes' runs (default "
                         "benchmarks/probes/results/probes.csv, the H100's)")
    ap.add_argument("--csv", type=Path, default=None,
                    help="predict: also write the rows (validation.csv's columns) here")
    ap.add_argument("--grid", action="append", default=[], metavar="CONSTANT=V1,V2,...",
                    help="grid: values of a constant to replay the fit split with "
                         "(repeatable: every combination)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="predict, report, grid: processes (default 1)")
    ap.add_argument("--out", type=Path, default=None,
                    help="grid: write every point's loss and predictions here (JSON)")
    a = ap.parse_args()
    global RESULTS, TRACES
    for name, val in (("--results", a.results), ("--traces", a.traces)):
        if val is not None and not val.is_dir():
            raise SystemExit(f"{name} {val}: not a folder")
    RESULTS = (a.results or RESULTS).resolve()
    TRACES = (a.traces or TRACES).resolve()
    runs = load_runs(a.context)
    if a.probe_runs is not None and a.probes is None:
        raise SystemExit("--probe-runs: give --probes TRACES_DIR too")
    if a.probes is not None:
        if not a.probes.is_dir():
            raise SystemExit(f"--probes {a.probes}: not a folder")
        if a.probe_runs is not None and not a.probe_runs.is_file():
            raise SystemExit(f"--probe-runs {a.probe_runs}: not a file")
        pr = probe_runs(a.context, a.probe_runs)
        for t in set(pr["trace"]):
            if not (a.probes / f"{t}.uvmtrace").is_dir():
                raise SystemExit(f"--probes {a.probes}: no {t}.uvmtrace")
            TRACE_DIRS[t] = a.probes.resolve()
        runs = pd.concat([runs, pr], ignore_index=True)
    if a.card is not None:
        runs = runs[runs["card"] == a.card]
    if a.workloads is not None:
        unknown = sorted(set(a.workloads) - set(runs["workload"]))
        if unknown:
            raise SystemExit(f"--workloads: no runs of {', '.join(unknown)}")
        runs = runs[runs["workload"].isin(a.workloads)]
    model_for = model_maker(a.model, *parse_settings(a.option, a.set))
    if a.jobs < 1:
        raise SystemExit(f"--jobs {a.jobs}: want 1 or more")
    if a.step == "predict":
        t = time.time()
        if a.split != "all":
            runs = runs[runs["split"] == a.split]
        df = predict_jobs(runs, model_for, a.jobs)
        pd.set_option("display.width", 250)
        print(df[["workload", "card", "factor", "split", "real_s", "predicted_s", "ratio",
                  "slowdown_ratio", "real_faults", "predicted_faults", "real_htod_bytes",
                  "predicted_htod_bytes"]].to_string(float_format=lambda v: f"{v:.4g}"))
        for s in ("fit", "holdout"):
            if (df["split"] == s).any():
                print(s, fmt(errors(df[df["split"] == s])))
        print(f"({time.time() - t:.1f} s)")
        if a.csv is not None:
            df.to_csv(a.csv, index=False, float_format="%.6g")
            print(f"wrote {a.csv}")
    elif a.step == "fit":
        cards = [a.card] if a.card else sorted(runs.loc[runs["split"] == "fit", "card"].unique())
        path = RESULTS / "fit.json"
        old = json.loads(path.read_text()) if path.exists() else {}
        # one file for every card: a call replaces only the cards it fits
        res = {"cards": {**old.get("cards", {}),
                         **{c: fit_card(c, runs, model_for(c), a) for c in cards}}}
        path.write_text(json.dumps(res, indent=1) + "\n")
        print(json.dumps(res, indent=1))
    elif a.step == "grid":
        if not a.grid:
            raise SystemExit("grid: give at least one --grid CONSTANT=V1,V2,...")
        cards = [a.card] if a.card else sorted(runs.loc[runs["split"] == "fit", "card"].unique())
        res = {c: grid_card(c, runs, a) for c in cards}
        if a.out is not None:
            a.out.write_text(json.dumps(res, indent=1) + "\n")
            print(f"wrote {a.out}")
    elif a.step == "report":
        df = predict_jobs(runs, model_for, a.jobs)
        df.to_csv(RESULTS / "validation.csv", index=False, float_format="%.6g")
        names = ", ".join(sorted(set(df["model"])))
        print(f"wrote {RESULTS / 'validation.csv'} ({len(df)} runs, models {names})")
        print(markdown_summary(df))
        print()
        print(markdown_rows(df))
        print()
        print(markdown_counters(df))
        plot(df, HERE.parents[1] / "docs" / "img" / "validation.png", names)
    return 0


def markdown_summary(df: pd.DataFrame) -> str:
    """The error table of docs/validation.md."""
    lines = ["| split | factor-1 runs | median time error at factor 1 | runs at f > 1 | "
             "median slowdown error | worst | within 2x | censored: >= half the bound |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in ("fit", "holdout"):
        e = errors(df[df["split"] == s])
        lines.append(f"| {s} | {e['f1_n']} | x{math.exp(e['f1_median']):.2f} | {e['n']} | "
                     f"x{math.exp(e['median']):.2f} | x{math.exp(e['max']):.1f} | "
                     f"{e['within_2x']:.0%} | {e['censored_ok']}/{e['censored_n']} |")
    return "\n".join(lines)


def markdown_rows(df: pd.DataFrame) -> str:
    """Every run at f > 1: real and replayed slowdown."""
    lines = ["| workload | split | factor | real slowdown | replayed | ratio |",
             "| --- | --- | --- | --- | --- | --- |"]
    for _, r in df[df["factor"] > 1].iterrows():
        gt = ">" if r["real_censored"] else ""
        lines.append(f"| {r['workload']} | {r['split']} | {r['factor']:g} | "
                     f"{gt}{r['real_slowdown']:.3g} | {r['predicted_slowdown']:.3g} | "
                     f"{'<' if gt else ''}{r['slowdown_ratio']:.2f} |")
    return "\n".join(lines)


def markdown_counters(df: pd.DataFrame) -> str:
    """Runs with CUPTI unified-memory counters: real against replayed traffic, and what the
    run must have moved (required_traffic): CUPTI below it lost records."""
    d = df[df["real_htod_bytes"].notna()]
    lines = ["| workload | card | factor | CUPTI GPU fault groups | replayed faults | CUPTI HtoD GB | "
             "required HtoD GB | replayed HtoD GB | CUPTI DtoH GB | required DtoH GB | "
             "replayed DtoH GB |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    g = lambda v: "" if v != v else f"{v / 1e9:.2f}"  # noqa: E731
    for _, r in d.iterrows():
        lines.append(f"| {r['workload']} | {r['card']} | {r['factor']:g} | {r['real_faults']:.0f} | "
                     f"{r['predicted_faults']} | {g(r['real_htod_bytes'])} | "
                     f"{g(r['required_htod_bytes'])} | {g(r['predicted_htod_bytes'])} | "
                     f"{g(r['real_dtoh_bytes'])} | {g(r['required_dtoh_bytes'])} | "
                     f"{g(r['predicted_dtoh_bytes'])} |")
    return "\n".join(lines)


def plot(df: pd.DataFrame, path: Path, name: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    for s, mk in (("fit", "o"), ("holdout", "s")):
        d = df[(df["split"] == s) & ~df["real_censored"] & (df["factor"] > 1)]
        ax.scatter(d["real_slowdown"], d["predicted_slowdown"], marker=mk, s=22,
                   c=np.log2(d["factor"]), cmap="viridis", vmin=0, vmax=np.log2(3),
                   label=f"{s} split")
        c = df[(df["split"] == s) & df["real_censored"]]
        ax.scatter(c["real_slowdown"], c["predicted_slowdown"], marker=">", s=40, c="red",
                   label=f"{s}: real run censored (> T)" if len(c) else None)
    d = df[df["factor"] > 1]
    lo = min(d["real_slowdown"].min(), d["predicted_slowdown"].min()) / 1.5
    hi = max(d["real_slowdown"].max(), d["predicted_slowdown"].max()) * 1.5
    x = np.array([lo, hi])
    ax.plot(x, x, "k-", lw=0.8)
    ax.plot(x, 2 * x, "k:", lw=0.6)
    ax.plot(x, x / 2, "k:", lw=0.6, label="2x")
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
           xlabel="real slowdown on the H200 (kernel time at f / at 1)",
           ylabel=f"replayed slowdown, model {name}",
           title="Slowdown at factors 1.25-3 (colour: log2 factor)")
    ax.legend(loc="upper left", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
