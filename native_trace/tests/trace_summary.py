"""Prints what a capture holds: counts, join status, size, and what the collector reported."""
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from uvmsim import load_trace  # noqa: E402

for d in map(Path, sys.argv[1:]):
    src = json.loads((d / "manifest.json").read_text())["source"]
    n = {f: pq.ParquetFile(d / f"{f}.parquet").metadata.num_rows
         for f in ("allocations", "events", "kernels", "accesses")}
    size = sum(f.stat().st_size for f in d.iterdir())
    load_trace(d)  # raises if the trace breaks the format
    keys = ("complete", "exit_status", "join", "kernels_without_pages",
            "kernels_without_pages_by_name", "dropped_accesses_device",
            "access_rows_dropped_outside_live_allocations", "skipped", "pass_wall_s", "gpu")
    print(json.dumps({"trace": str(d), "bytes": size, "rows": n,
                      **{k: src.get(k) for k in keys}}, indent=1))
