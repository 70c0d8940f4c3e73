"""The in-memory trace: small tables as pandas, access rows as flat NumPy arrays."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd


class TraceArrays(NamedTuple):
    """Dense arrays the engine and reference model replay (built once at load).

    Allocations are indexed by their row in allocations.parquet; pages by a dense index
    (each allocation's pages are contiguous); VA blocks by a dense index (each allocation's
    2 MiB windows are contiguous); kernels by their rank in event order.
    """

    a_host: np.ndarray        # bool[n_alloc]
    a_first_page: np.ndarray  # int64[n_alloc] virtual page number of the first page
    a_npages: np.ndarray      # int64[n_alloc]
    a_page_off: np.ndarray    # int64[n_alloc] dense index of the first page
    a_block_off: np.ndarray   # int64[n_alloc] dense index of the first block
    a_nblocks: np.ndarray     # int64[n_alloc]
    page_block: np.ndarray    # int32[n_pages] block of each dense page
    page_pos: np.ndarray      # int16[n_pages] window position (0..511) of each dense page
    b_alloc: np.ndarray       # int32[n_blocks]
    b_lo: np.ndarray          # int16[n_blocks] first window position of in(K)
    b_hi: np.ndarray          # int16[n_blocks] last window position of in(K), inclusive
    b_page0: np.ndarray       # int64[n_blocks] dense page at window position b_lo
    b_first_vpage: np.ndarray # int64[n_blocks] virtual page of window position b_lo
    ev_op: np.ndarray         # int8[n_events] op code (format.OPS)
    ev_alloc: np.ndarray      # int64[n_events] allocation index or -1
    ev_kernel: np.ndarray     # int64[n_events] kernel rank or -1
    ev_arg: np.ndarray        # int8[n_events] format.ARG_CODE or 0
    ev_seg_start: np.ndarray  # int64[n_events+1] CSR into seg_* for range events
    seg_alloc: np.ndarray     # int64[n_seg]
    seg_first: np.ndarray     # int64[n_seg] dense page, inclusive
    seg_last: np.ndarray      # int64[n_seg] dense page, inclusive
    k_row_start: np.ndarray   # int64[n_kernels+1] rows of kernel rank k: [start[k], start[k+1])
    k_duration_ns: np.ndarray # float64[n_kernels] NaN where unknown
    row_page: np.ndarray      # int32[n_rows] dense page
    row_flags: np.ndarray     # uint8[n_rows]
    row_count: np.ndarray     # uint32[n_rows]
    # v1.1 (docs/trace-format.md): bit s of row_slices = the page was touched in slice s of
    # its kernel; an empty array means the trace has no slices (every row in slice 0)
    row_slices: np.ndarray    # uint64[n_rows] or uint64[0]
    k_nslices: np.ndarray     # int64[n_kernels] slices of each kernel's run (1 without)


@dataclass
class Trace:
    """A validated uvmtrace.

    `allocations`, `events` and `kernels` are the trace's tables (kernels in event order);
    the access rows live only as dense arrays in `arrays` to keep memory per row small, or
    stay in the file (`rows`) when the trace is streamed.
    """

    manifest: dict[str, Any]
    allocations: pd.DataFrame
    events: pd.DataFrame
    kernels: pd.DataFrame
    arrays: TraceArrays
    peak_blocks: int
    dropped_rows: int = 0
    path: Path | None = None
    # a streamed trace (load_trace(stream=True)): its access rows stay in the file, and the
    # row arrays of `arrays` are empty (uvmsim.trace.io.RowSource)
    rows: Any = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_kernels(self) -> int:
        return int(self.arrays.k_row_start.size - 1)

    @property
    def n_accesses(self) -> int:
        return int(self.rows.n_rows if self.rows is not None else self.arrays.row_page.size)

    @property
    def streams(self):
        """The v1.2 per-thread-block access streams (`uvmsim.trace.streams.Streams`), read
        and checked on first use; None when the trace has none."""
        from .streams import get
        return get(self)

    @property
    def launch(self):
        """The v1.2 launch columns by kernel rank (`uvmsim.trace.streams.LaunchArrays`)."""
        from .streams import launch_arrays
        return launch_arrays(self)

    @property
    def footprint_bytes(self) -> int:
        """Bytes of all non-host allocations (sum of sizes)."""
        a = self.allocations
        return int(a.loc[a["kind"] != "host", "size"].sum())

    def info(self) -> dict[str, Any]:
        """Headline facts, as `uvmsim info` prints them (with the v1.2 streams' when they
        have been read)."""
        out = {
            "path": str(self.path) if self.path else None,
            "kernels": self.n_kernels,
            "accesses": self.n_accesses,
            "allocations": int(len(self.allocations)),
            "events": int(len(self.events)),
            "footprint_bytes": self.footprint_bytes,
            "peak_blocks": int(self.peak_blocks),
            "dropped_rows": int(self.dropped_rows),
        }
        s = self._cache.get("streams")
        if s is not None:
            out.update(stream_kernels=int((s.k_unit != 0).sum()), stream_blocks=int(s.blk_id.size),
                       stream_rows=s.n_rows)
        out["source"] = self.manifest.get("source", {})
        return out

    def __repr__(self) -> str:
        where = f" {self.path}" if self.path else ""
        return (f"<Trace{where}: {self.n_kernels} kernels, {self.n_accesses} access rows, "
                f"{len(self.allocations)} allocations, peak_blocks={self.peak_blocks}>")
