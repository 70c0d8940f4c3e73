"""Size of the v1.2 stream tables on synthetic traces (no GPU): rows and bytes against the
trace's v1.1 part, and what the Parquet layout of uvmsim.trace.streams buys.

    PYTHONPATH=src python benchmarks/stream_sizes.py [--json OUT.json]

For each generator of uvmsim.trace.synth with streams, the trace is written with
`write_trace` and its files measured; the stream tables are also written the plain way
(zstd, dictionary, no column encodings) to compare. Figures are in docs/performance.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from uvmsim import load_trace, write_trace  # noqa: E402
from uvmsim.trace import synth  # noqa: E402

MiB = 1 << 20
CASES = [
    ("grid_stride_fill", dict(footprint_bytes=256 * MiB, grid=1024, block=256)),
    # the same with every time off by up to half a step, as a noisy clock would have it
    ("grid_stride_fill", dict(footprint_bytes=256 * MiB, grid=1024, block=256, noise=0.5)),
    ("grid_stride_fill", dict(footprint_bytes=256 * MiB, grid=8192, block=256)),
    ("block_slice_fill", dict(footprint_bytes=256 * MiB, grid=1024, block=256)),
    ("gemm", dict(m=2048, n=2048, k=2048, tile=128, sm_count=132, max_blocks_per_sm=2)),
    ("gemm", dict(m=1024, n=1024, k=1024, tile=64, sm_count=16, max_blocks_per_sm=2)),
]


def _add_noise(tabs: dict, frac: float, seed: int = 1) -> None:
    """Shift every row's time by up to `frac` of its block's mean step (rows re-sorted, block
    ends raised to cover them): the regular synthetic clock made as noisy as a real one."""
    import numpy as np
    rng = np.random.default_rng(seed)
    a, b = tabs["block_accesses"].copy(), tabs["blocks"].copy()
    n = a.groupby("block")["t"].transform("size").to_numpy()
    span = a.groupby("block")["t"].transform("max").to_numpy()
    step = np.maximum(span // np.maximum(n - 1, 1), 1)
    t = a["t"].to_numpy(np.int64) + (rng.random(len(a)) * frac * step).astype(np.int64)
    t[a.groupby("block").cumcount().to_numpy() == 0] = 0  # a block starts at its first touch
    a["t"] = t.astype(np.uint32)
    a = a.sort_values(["kernel_id", "block", "t", "page"], kind="stable").reset_index(drop=True)
    top = a.groupby("block")["t"].max()
    b["t_end"] = np.maximum(b["t_end"].to_numpy(np.int64),
                            b["t_start"].to_numpy(np.int64) + top.reindex(b["block"]).to_numpy())
    tabs["block_accesses"], tabs["blocks"] = a, b.astype({"t_end": "uint32"})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    a = ap.parse_args()
    out = []
    with tempfile.TemporaryDirectory() as td:
        for kind, kw in CASES:
            kw = dict(kw)
            noise = kw.pop("noise", 0.0)
            tabs = synth.tables(kind, **kw)
            if noise:
                _add_noise(tabs, noise)
                kw["noise"] = noise
            p = Path(td) / f"{kind}.uvmtrace"
            t0 = time.perf_counter()
            write_trace(p, **tabs, source={"generator": kind, "params": kw}, overwrite=True)
            w = time.perf_counter() - t0
            t0 = time.perf_counter()
            tr = load_trace(p, streams=True)
            ld = time.perf_counter() - t0
            size = {f.name: f.stat().st_size for f in p.iterdir()}
            stream = size["blocks.parquet"] + size["block_accesses.parquet"]
            plain = 0
            for f in ("blocks", "block_accesses"):
                q = Path(td) / f"{f}.plain.parquet"
                pq.write_table(pa.Table.from_pandas(tabs[f], preserve_index=False), q,
                               compression="zstd")
                plain += q.stat().st_size
            s = tr.streams
            r = {"kind": kind, "params": kw, "unit": sorted({int(u) for u in s.k_unit if u}),
                 "access_rows": tr.n_accesses, "stream_rows": s.n_rows,
                 "blocks": int(s.blk_id.size),
                 "rows_ratio": s.n_rows / tr.n_accesses,
                 "v11_bytes": sum(v for k, v in size.items() if k not in
                                  ("blocks.parquet", "block_accesses.parquet")),
                 "accesses_bytes": size["accesses.parquet"], "stream_bytes": stream,
                 "stream_bytes_per_row": stream / max(s.n_rows, 1),
                 "stream_bytes_plain_zstd": plain, "write_s": w, "load_with_streams_s": ld}
            out.append(r)
            print(f"{kind:17s} {json.dumps(kw)}: unit {r['unit']}, {r['access_rows']} access "
                  f"rows, {r['stream_rows']} stream rows ({r['rows_ratio']:.2f}x), "
                  f"v1.1 {r['v11_bytes'] / 1024:.0f} KiB, streams {stream / 1024:.0f} KiB "
                  f"({r['stream_bytes_per_row']:.2f} B/row; plain zstd {plain / 1024:.0f} KiB)",
                  flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
