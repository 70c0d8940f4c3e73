"""How many fault services a real run's kernels took, from CUPTI's GPU fault records.

    python benchmarks/validate/service_rounds.py RAW_DIR LABEL OUT_DIR
    python benchmarks/validate/service_rounds.py compare DIR   # DIR: a probe_rounds.sh $OUT

RAW_DIR is the --keep-raw folder of `uvmsim run` with the counters on. The driver reports
each serviced fault to the tools with one CPU timestamp taken when it records the fault
(`uvm_tools_record_fault` in kernel-open/nvidia-uvm/uvm_tools.c: NV_GETTIME() per fault
entry, with its batch's id, which CUPTI does not pass on); CUPTI's record keeps it as its
`end` and the GPU's fault time as its `start`. Faults serviced in one batch are recorded
within microseconds of each other, and batches are separated by their service (the
copies, the page-table updates and the replay), so clusters of `end` times separated by a
gap of more than G microseconds estimate the kernel's services. They are a lower bound
where records are lost (docs/model.md, "CUPTI's counters are lower bounds"), and two
batches serviced back to back closer than G merge: the script reports several G.

For each kernel this appends one JSON line to OUT_DIR/service_rounds.jsonl: duration; GPU
fault records and the sum of their values; distinct `end` times; for G in GAPS_US the
clusters and their median records, distinct 4 KiB pages, 64 KiB regions and 2 MiB blocks;
the percentiles of the gaps between consecutive `end` times; the HtoD records. Kernels
with no fault record are skipped.

`compare DIR` prints, for the one-pass grid-stride fills of probe_rounds.sh
(`fill_stride_g<GRID>_f1`), the real kernel time without counters (runs/quiet_*.json), the
fault records and faults with them, and the replay of the same fill (synth
grid_stride_fill, 512 MiB, that grid, `h200` at factor 1) with and without block_progress:
its stall (the synthetic trace's compute time left out) and its fault batches. docs/validation.md, "How many services a first touch
takes", shows its output.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from uvmsim.groundtruth import GPU_FAULT, HTOD  # noqa: E402
from um_blocks import raw_records  # noqa: E402  (this folder's)

GAPS_US = (2, 5, 20, 50)


def clusters(end: np.ndarray, gap_ns: float) -> np.ndarray:
    """Cluster id of each sorted end time: a new cluster after a gap above gap_ns."""
    return np.concatenate([[0], np.cumsum(np.diff(end) > gap_ns)]) if end.size else end


def kernel_rounds(k: dict, um: np.ndarray) -> dict | None:
    m = (um["start"] >= k["start"]) & (um["start"] <= k["end"])
    f = um[m & (um["counter"] == GPU_FAULT)]
    if not f.size:
        return None
    f = f[np.argsort(f["end"], kind="stable")]
    end = f["end"].astype(np.float64)
    addr = f["address"].astype(np.int64)
    d: dict = {"name": k["name"].split("(")[0], "dur_ms": (k["end"] - k["start"]) / 1e6,
               "fault_records": int(f.size), "fault_values": int(f["value"].sum()),
               "distinct_end": int(np.unique(f["end"]).size),
               "htod_records": int((m & (um["counter"] == HTOD)).sum())}
    gaps = np.diff(end) / 1e3
    if gaps.size:
        d["gap_us_p50_p90_p99_max"] = [round(float(np.percentile(gaps, q)), 2)
                                       for q in (50, 90, 99, 100)]
    for g in GAPS_US:
        c = clusters(end, g * 1e3)
        n = int(c[-1]) + 1
        per = np.bincount(c)

        def distinct(shift: int) -> float:
            key = np.unique(np.stack([c, addr >> shift]), axis=1)
            return float(np.median(np.bincount(key[0], minlength=n)))
        d[f"g{g}us"] = {"clusters": n, "records_median": float(np.median(per)),
                        "pages_median": distinct(12), "regions64k_median": distinct(16),
                        "blocks2m_median": distinct(21)}
    return d


def compare(d: Path) -> None:
    import re

    import uvmsim
    from uvmsim.trace import synth
    if not (d / "service_rounds.jsonl").is_file():
        raise SystemExit(f"{d}: no service_rounds.jsonl (the OUT folder of probe_rounds.sh)")
    recs = [json.loads(line) for line in open(d / "service_rounds.jsonl")]
    print("| grid | real ms (no counters) | fault records | faults (values) | replayed stall ms, "
          "batches: page sets | block_progress |")
    print("|---|---|---|---|---|---|")
    for r in recs:
        m = re.fullmatch(r"fill_stride_g(\d+)_f1", r["label"])
        if not m:
            continue
        g = int(m.group(1))
        quiet = json.load(open(d / "runs" / f"quiet_{r['label']}.json"))
        t = synth.make("grid_stride_fill", footprint_bytes=512 << 20, grid=g, block=256,
                       sm_count=132, max_blocks_per_sm=8)
        cells = []
        for bp in (False, True):
            res = uvmsim.simulate(t, model="h200", oversub=1.0, block_progress=bp)
            cells.append(f"{res.kernels['stall_ns'].sum() / 1e6:.1f}, "
                         f"{res.summary['fault_batches']:,}")
        print(f"| {g} | {quiet['kernels']['duration_ns'][0] / 1e6:.1f} | "
              f"{r['fault_records']:,} | {r['fault_values']:,} | {cells[0]} | {cells[1]} |")


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "compare":
        compare(Path(sys.argv[2]))
        return 0
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    raw, label, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    um, kact = raw_records(raw)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "service_rounds.jsonl", "a") as fo:
        for i, k in enumerate(kact):
            d = kernel_rounds(k, um)
            if d is None:
                continue
            d = {"label": label, "k": i, **d}
            fo.write(json.dumps(d) + "\n")
            print(label, i, d["name"], f"{d['dur_ms']:.1f} ms", d["fault_records"], "records,",
                  {g: d[f"g{g}us"]["clusters"] for g in GAPS_US}, "clusters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
