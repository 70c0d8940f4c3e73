"""Reading the collector's raw files: ``<pass>.<pid>.jsonl`` lines and, for the page pass,
``pages.<pid>.bin`` records of `REC_DTYPE` (native_trace/src/uvmt_layout.h)."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["REC_DTYPE", "SBLK_DTYPE", "SROW_DTYPE", "RawPass", "pick_process", "read_raw_pass"]

#: one touched page of one kernel, as the page pass writes it (native_trace/src/uvmt_layout.h);
#: `slices` is the mask of time slices, already folded to the kernel's width
REC_DTYPE = np.dtype([("page", "<u8"), ("count", "<u4"), ("flags", "<u4"), ("slices", "<u8")])
#: the per-thread-block streams, in ``pages.<pid>.streams.bin`` (native_trace/src/streams_host.h):
#: a kernel's blocks (each with its number of rows, times in the kernel's ticks), then its rows
#: (each block's in order)
SBLK_DTYPE = np.dtype([("block", "<u4"), ("n_rows", "<u4"), ("t_start", "<u4"), ("t_end", "<u4")])
SROW_DTYPE = np.dtype([("page", "<u8"), ("t", "<u4"), ("flags", "<u4")])


@dataclass
class RawPass:
    """The raw output of one pass of one process."""

    pass_name: str
    pid: int
    lines: list[dict[str, Any]]
    bin_path: Path | None = None
    bad_lines: int = 0  # lines that were not JSON (a crash can cut the last one short)
    streams_path: Path | None = None  # the page pass's stream records (uvmtrace v1.2)

    @property
    def complete(self) -> bool:
        """True when the process reached its exit handler (an ``end`` line exists)."""
        return any(r.get("t") == "end" for r in self.lines)

    @property
    def end(self) -> dict[str, Any]:
        for r in reversed(self.lines):
            if r.get("t") == "end":
                return r
        return {}

    def of(self, t: str) -> list[dict[str, Any]]:
        return [r for r in self.lines if r.get("t") == t]


def read_raw_pass(raw_dir: str | os.PathLike, pass_name: str) -> list[RawPass]:
    """Read every ``<pass_name>.<pid>.jsonl`` under `raw_dir` (one per traced CUDA process)."""
    d = Path(raw_dir)
    out = []
    for p in sorted(d.glob(f"{pass_name}.*.jsonl")):
        m = re.fullmatch(rf"{re.escape(pass_name)}\.(\d+)\.jsonl", p.name)
        if not m:
            continue
        lines, bad = [], 0
        with open(p, "r", encoding="utf-8", errors="replace") as f:
            for ln in f:
                ln = ln.strip()
                if not ln:
                    continue
                try:
                    lines.append(json.loads(ln))
                except json.JSONDecodeError:
                    bad += 1
        b = p.with_suffix(".bin")
        sb = p.with_name(f"{pass_name}.{m.group(1)}.streams.bin")
        out.append(RawPass(pass_name, int(m.group(1)), lines, b if b.exists() else None, bad,
                           sb if sb.exists() else None))
    return out


def pick_process(passes: list[RawPass], notes: list[str]) -> RawPass | None:
    """The process that launched the most kernels; the others are reported in `notes`, not
    merged."""
    if not passes:
        return None

    def n_kernels(rp: RawPass) -> int:
        return sum(1 for r in rp.lines if r.get("t") in ("kernel", "kact"))

    best = max(passes, key=n_kernels)
    others = [rp for rp in passes if rp is not best and n_kernels(rp) > 0]
    if others:
        notes.append(f"{best.pass_name} pass: {len(passes)} CUDA processes; kept pid {best.pid} "
                     f"({n_kernels(best)} kernels), ignored "
                     + ", ".join(f"pid {o.pid} ({n_kernels(o)} kernels)" for o in others))
    return best
