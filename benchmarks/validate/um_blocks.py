"""Per-kernel unified-memory traffic of one real run, by 2 MiB block (docs/validation.md).

    python benchmarks/validate/um_blocks.py RAW_DIR LABEL OUT_DIR

RAW_DIR is the --keep-raw folder of `uvmsim run` with the counters on. For each kernel this
appends one JSON line to OUT_DIR/summary.jsonl: its duration; per counter (HtoD, DtoH, GPU
fault) the records, their bytes or values, and per-block record counts (min, median, p90,
max over the blocks touched); the HtoD record sizes; the time from a block's eviction to
its next HtoD; and, in 40 equal windows of the kernel, the faulting blocks (records, min,
p10, median, p90, max, distinct). Block numbers count 2 MiB from the lowest address of any
record, so they are comparable within a run.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from uvmsim.groundtruth import DTOH, GPU_FAULT, HTOD, summarize_raw  # noqa: E402

BLOCK = 2 << 20


def raw_records(raw: str) -> tuple[np.ndarray, list[dict]]:
    """The unified-memory records and the finished kernels of a --keep-raw folder; exits
    naming the folder when it holds no timing pass."""
    s = summarize_raw(raw)
    if s.get("raw") is None:
        why = "; ".join(s.get("notes") or []) or "no timing-pass files"
        raise SystemExit(f"{raw}: not a `uvmsim run --keep-raw` folder with counters ({why})")
    return s["um"], s["kact"]


def per_block(blk: np.ndarray) -> list[int]:
    c = np.bincount(blk)
    c = c[c > 0]
    return [int(np.percentile(c, q)) for q in (0, 50, 90, 100)]


def kernel_summary(i: int, k: dict, um: np.ndarray, base: int) -> dict:
    m = (um["start"] >= k["start"]) & (um["start"] <= k["end"])
    u = um[m]
    dur = k["end"] - k["start"]
    d: dict = {"k": i, "name": k["name"].split("(")[0], "dur_ms": dur / 1e6}
    blk = (u["address"].astype(np.int64) - base) // BLOCK
    for name, c in (("htod", HTOD), ("dtoh", DTOH), ("fault", GPU_FAULT)):
        s = u["counter"] == c
        d[f"{name}_n"] = int(s.sum())
        d[f"{name}_bytes_or_value"] = int(u["value"][s].sum())
        if s.any():
            d[f"{name}_per_block"] = per_block(blk[s])
            d[f"{name}_blocks"] = int(len(np.unique(blk[s])))
    h, e = u["counter"] == HTOD, u["counter"] == DTOH
    if h.any():
        sz, n = np.unique(u["value"][h] // 4096 * 4096, return_counts=True)
        d["htod_size_hist"] = {str(int(a)): int(b) for a, b in zip(sz, n)}
    if h.any() and e.any():
        gaps = []
        for b in np.unique(blk[h]):
            ht = np.sort(u["start"][h][blk[h] == b])
            for t in np.sort(u["start"][e][blk[e] == b]):
                j = np.searchsorted(ht, t)
                if j < len(ht):
                    gaps.append(ht[j] - t)
        if gaps:
            d["evict_to_reload_us_p10_50_90"] = [round(float(np.percentile(gaps, q)) / 1e3, 1)
                                                 for q in (10, 50, 90)]
    f = u["counter"] == GPU_FAULT
    if f.sum() > 20:
        t = (u["start"][f] - k["start"]).astype(np.int64)
        b = blk[f]
        edges = np.linspace(0, dur, 41)
        win = []
        for j in range(40):
            w = (t >= edges[j]) & (t < edges[j + 1])
            if w.any():
                bw = b[w]
                win.append([round(edges[j] / 1e6, 2), int(w.sum()), int(bw.min()),
                            *(int(np.percentile(bw, q)) for q in (10, 50, 90)), int(bw.max()),
                            int(len(np.unique(bw)))])
        d["fault_windows_ms_n_min_p10_p50_p90_max_distinct"] = win
    return d


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    raw, label, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    um, kact = raw_records(raw)
    addr = um["address"][um["address"] > 0] if len(um) else um["address"]
    base = int(addr.min()) if len(addr) else 0
    res = {"label": label,
           "kernels": [kernel_summary(i, k, um, base) for i, k in enumerate(kact)]}
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "summary.jsonl", "a") as fo:
        fo.write(json.dumps(res) + "\n")
    for d in res["kernels"]:
        print(label, d["name"], f"{d['dur_ms']:.1f} ms", "htod", d.get("htod_bytes_or_value"),
              "dtoh", d.get("dtoh_bytes_or_value"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
