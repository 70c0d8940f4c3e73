"""Warps' progress in a grid-stride fill under oversubscription, on the GPU (docs/validation.md,
"Warps' progress in a thrashing fill").

    python benchmarks/validate/progress_probe.py --out DIR [--factors 1,1.5,2] [--mib 512]
        [--grid 2048] [--block 256] [--timeout-s 40] [--modes store,readback]

Builds progress_probe.cu, runs it with `uvmsim run` (counters off, the cuda reserve of
results/h100/reserve.json) in each mode at each factor, and summarises each warp log on the spot (the logs
are 16 MiB each): DIR/progress_probe.csv has, per mode, factor and time bin, how many warps are
running and done, the spread of the iterations the running warps are at (an iteration of this
fill is one 2 MiB window of the array at grid 2048 x 256), how many distinct windows they are
in, the spread inside thread blocks, and how much of the spread is between SMs (the share of
the variance of the running warps' iterations that SM means explain, that block means
explain, and the rank correlation of an SM's mean iteration with its number and with its
rank 20 bins earlier); DIR/progress_sm.csv the mean iteration of each SM's running warps at
every tenth bin; DIR/progress_blocks.csv each thread block's SM, start, finish, number of
iterations longer than 100 us and mean iteration at every twentieth bin;
DIR/progress_probe.json the runs and per-factor totals.
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))
BINS = 200


def build(name: str = "progress_probe") -> Path:
    """Compile HERE/<name>.cu for this machine's GPU into HERE/build/<name>."""
    exe = HERE / "build" / name
    exe.parent.mkdir(exist_ok=True)
    cc = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                        capture_output=True, text=True, check=True).stdout.split()[0]
    subprocess.run(["nvcc", "-O2", f"-arch=sm_{cc.replace('.', '')}", "-o", str(exe),
                    str(HERE / f"{name}.cu")], check=True)
    return exe


def gpu_name() -> str:
    """The GPU and driver, for the results' provenance."""
    return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                           "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()


def load(path: Path) -> tuple[np.ndarray, np.ndarray, int, int]:
    raw = np.fromfile(path, np.uint32)
    warps, iters, grid, block = (int(x) for x in raw[:4])
    words = warps * iters
    if raw.size != 4 + words + warps:
        raise SystemExit(f"{path}: {raw.size} words, expected {4 + words + warps}")
    log = raw[4:4 + words].reshape(warps, iters).astype(np.int64)
    return log, raw[4 + words:].astype(np.int64), grid, block


def share_between(x: np.ndarray, group: np.ndarray) -> float:
    """The share of x's variance that the means of its groups explain (0: groups do not
    matter, 1: every member of a group is at its group's mean)."""
    if x.size < 2 or x.var() == 0:
        return 0.0
    _, inv, n = np.unique(group, return_inverse=True, return_counts=True)
    mean = np.bincount(inv, weights=x) / n
    return float(((mean[inv] - x.mean()) ** 2).sum() / ((x - x.mean()) ** 2).sum())


def rank_corr(a: np.ndarray, b: np.ndarray) -> float | None:
    if a.size < 3 or a.std() == 0 or b.std() == 0:
        return None
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def summarise(log: np.ndarray, sm: np.ndarray, block: int
              ) -> tuple[list[dict], list[dict], list[dict], dict]:
    """Per time bin: the running warps' iterations (a warp at time t is at the first
    iteration it has not passed yet), the distinct windows they are in, and how they group
    by SM and by thread block."""
    reached = log > 0
    # the log holds %globaltimer >> 10 in 32 bits, which wraps every 73 minutes: times are
    # differences modulo 2^32 from a reached value, then shifted to start at 0
    ref = int(log[reached][0])
    d = ((log - ref + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    t0 = int(d[reached].min())
    rel = np.where(reached, d - t0, -1)
    end = int(rel.max())
    start = np.where(reached[:, 0], rel[:, 0], end + 1)
    finish = np.where(reached.all(axis=1), rel.max(axis=1), end + 1)
    warps, iters = log.shape
    rows, per_sm = [], []
    wpb = block // 32
    nblk = warps // wpb
    blocks = [{"block": b, "sm": int(sm[b * wpb]),
               "start_us": int(start[b * wpb:(b + 1) * wpb].min()),
               "finish_us": int(finish[b * wpb:(b + 1) * wpb].max())} for b in range(nblk)]
    long_ = ((np.diff(rel, axis=1) > 100) & reached[:, 1:] & reached[:, :-1]).sum(axis=1)
    for b, n in enumerate(long_.reshape(nblk, wpb).sum(axis=1)):
        blocks[b]["long_iterations"] = int(n)
    nsm = int(sm.max()) + 1
    history: list[np.ndarray] = []
    for k, t in enumerate(np.linspace(0, end, BINS + 1)[1:]):
        passed = ((rel >= 0) & (rel <= t)).sum(axis=1)  # iterations passed by time t
        running = (start <= t) & (finish > t)
        at = passed[running]
        row = {"t_us": round(float(t), 1), "running": int(running.sum()),
               "done": int((finish <= t).sum())}
        if at.size:
            q = np.percentile(at, [0, 10, 50, 90, 100])
            row.update(it_min=int(q[0]), it_p10=float(q[1]), it_p50=float(q[2]),
                       it_p90=float(q[3]), it_max=int(q[4]),
                       windows=int(np.unique(at).size))
            b = passed.reshape(-1, wpb)
            r = running.reshape(-1, wpb).all(axis=1)
            spread = (b.max(axis=1) - b.min(axis=1))[r]
            row["in_block_spread_p90"] = float(np.percentile(spread, 90)) if spread.size else 0.0
            row["sm_share"] = round(share_between(at.astype(float), sm[running]), 3)
            blk = np.arange(warps) // wpb
            row["block_share"] = round(share_between(at.astype(float), blk[running]), 3)
            cnt = np.bincount(sm[running], minlength=nsm)
            mean = np.bincount(sm[running], weights=at, minlength=nsm) / np.maximum(cnt, 1)
            live = cnt > 0
            row["sm_rank_vs_smid"] = rank_corr(mean[live], np.arange(nsm)[live])
            history.append(np.where(live, mean, np.nan))
            if len(history) > 20:
                old = history[-21]
                both = live & ~np.isnan(old)
                row["sm_rank_vs_20_bins_before"] = rank_corr(mean[both], old[both])
            if k % 20 == 19:
                mean_b = passed.reshape(nblk, wpb).mean(axis=1)
                for b in range(nblk):
                    blocks[b][f"it_at_{k + 1}"] = round(float(mean_b[b]), 2)
            if k % 10 == 9:
                per_sm += [{"t_us": row["t_us"], "sm": int(i), "warps": int(cnt[i]),
                            "mean_it": round(float(mean[i]), 2)} for i in np.flatnonzero(live)]
        rows.append(row)
    gaps = np.diff(rel, axis=1)
    ok = reached[:, 1:] & reached[:, :-1]
    tot = {"warps": warps, "iters": iters, "span_us": end,
           "warps_done": int(reached.all(axis=1).sum()),
           "iteration_us_p50": float(np.median(gaps[ok])) if ok.any() else None,
           "iteration_us_p99": float(np.percentile(gaps[ok], 99)) if ok.any() else None}
    return rows, per_sm, blocks, tot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--factors", default="1,1.5,2")
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--grid", type=int, default=2048)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--timeout-s", type=float, default=40.0)
    ap.add_argument("--modes", default="store,readback",
                    help="store: go on after each store (fill_probe.cu's kernel); readback: "
                         "read each element back first")
    a = ap.parse_args()
    from uvmsim.groundtruth import run
    exe = build()
    reserve = json.loads((HERE / "results" / "h100" / "reserve.json").read_text())["cuda"]
    a.out.mkdir(parents=True, exist_ok=True)
    table, sm_table, block_table, runs = [], [], [], []
    cases = [(m, float(f)) for m in a.modes.split(",") for f in a.factors.split(",")]
    for mode, f in cases:
        logf = Path(f"/tmp/progress_probe_{mode}_f{f:g}.bin")
        logf.unlink(missing_ok=True)
        r = run([str(exe), str(a.mib), str(a.grid), str(a.block), str(logf), mode], factor=f,
                footprint=a.mib << 20, timeout_s=a.timeout_s, counters=False,
                reserve=int(reserve["reserve_bytes"]))
        info = {"mode": mode, "factor": f, "real_s": r["real_s"], "censored": r["censored"],
                "exit_status": r["exit_status"], "free_bytes": r["free_bytes"]}
        if logf.exists():
            log, sm, grid, block = load(logf)
            rows, per_sm, blocks, tot = summarise(log, sm, block)
            info.update(tot)
            table += [dict(mode=mode, factor=f, **x) for x in rows]
            sm_table += [dict(mode=mode, factor=f, **x) for x in per_sm]
            block_table += [dict(mode=mode, factor=f, **x) for x in blocks]
        runs.append(info)
        print(json.dumps(info), flush=True)
    for name, rows in (("progress_probe.csv", table), ("progress_sm.csv", sm_table),
                       ("progress_blocks.csv", block_table)):
        keys = list(dict.fromkeys(k for row in rows for k in row))
        with open(a.out / name, "w", newline="") as fh:
            w = csv.DictWriter(fh, keys)
            w.writeheader()
            w.writerows(rows)
    gpu = gpu_name()
    (a.out / "progress_probe.json").write_text(json.dumps(
        {"gpu": gpu, "mib": a.mib, "grid": a.grid, "block": a.block, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
