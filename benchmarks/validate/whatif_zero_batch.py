"""What-if, not a fit: the H100 rows' factor-1 times if a batch that migrates nothing from
the host cost Z instead of `batch_ns` (docs/validation.md, "How many services a first
touch takes").

    python benchmarks/validate/whatif_zero_batch.py [Z_NS ...]   # default 30000

Uses fit.py's per-run components (one replay per constant, cached in benchmarks/out/) of
the H100 rows with `h100`: a row whose factor-1 replay moves no byte from the host (its
bandwidth component is 0) has only zero-fill batches, so its batch component is charged Z.
Rows that migrate keep `batch_ns` (an approximation: their zero-fill batches are not split
out). Needs the H100 traces in benchmarks/validate/traces/ (fit.py says how to make them).
"""
from __future__ import annotations

import sys

import numpy as np

import fit  # this folder's

from uvmsim.config import get_model


def main() -> None:
    zs = [float(z) for z in sys.argv[1:]] or [30000.0]
    runs = fit.load_runs()
    runs = runs[(runs["card"] == "h100") & (runs["factor"] == 1)].reset_index(drop=True)
    base = get_model("h100")
    comp = fit.components(runs, base)
    h = base.hardware
    theta = np.array([h.batch_ns, h.fault_ns, h.transfer_latency_ns, 1 / h.bw_peak_gbps,
                      h.evict_ns, h.zero_fill_ns, h.host_fault_ns, h.migrate_page_ns])
    pred = comp[:, 0] + comp[:, 1:] @ theta
    zero = comp[:, 1 + fit.LINEAR.index("inv_bw")] == 0
    real = runs["real_s"].to_numpy()
    print("| batch cost without host migration | factor-1 median error | per workload |")
    print("|---|---|---|")
    for z in [h.batch_ns] + zs:
        p = pred - np.where(zero, comp[:, 1] * (h.batch_ns - z), 0.0)
        r = p / real
        per = ", ".join(f"{w} x{x:.2f}" for w, x in zip(runs["workload"], r))
        print(f"| {z / 1e3:g} us | x{np.exp(np.median(np.abs(np.log(r)))):.2f} | {per} |")


if __name__ == "__main__":
    main()
