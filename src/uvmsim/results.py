"""Replay results: a summary dict and a per-kernel table."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .engine.state import (COUNT_NAMES, HTOD_COLS, T_DRV_WAIT, T_STALL, T_TRANSFER, T_WALKQ,
                           T_XLATE)

# summary keys, in the order of docs/semantics.md
PER_KERNEL_COUNTS = (*COUNT_NAMES[:8], "htod_bytes", *COUNT_NAMES[8:])
# the contract's keys, in its order: exactly what Result.summary holds
N_SPEC_COUNTS = 13
SUMMARY_KEYS = (*PER_KERNEL_COUNTS[:N_SPEC_COUNTS], "kernels", "accesses", "capacity_chunks",
                "peak_blocks", "sim_time_ns")
# counts and times of the optional mechanisms (translation, thrashing, remote access, ...):
# Result.extra, always present, zero when the mechanism is off
EXTRA_KEYS = (*PER_KERNEL_COUNTS[N_SPEC_COUNTS:], "translation_ns", "walk_queue_ns",
              "driver_wait_ns")


@dataclass
class Result:
    """What one replay produced.

    `summary`: exactly the contract's counts plus `sim_time_ns` (docs/semantics.md). `extra`:
    totals of the optional mechanisms (TLB misses, page walks, remote accesses, throttled
    faults, ...; zero when off). `kernels`: one row per kernel in event order with its counts
    (the extra ones too), `kernel_id`, `name`, `accesses`, `compute_ns`, `stall_ns`,
    `transfer_ns` and `sim_ns`. `outside_kernels`: what copies and prefetches between kernels
    did. `config`: what was simulated (policies, parameters, capacity, hardware).
    """

    summary: dict[str, int | float]
    kernels: pd.DataFrame
    extra: dict[str, int | float] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    outside_kernels: dict[str, int | float] = field(default_factory=dict)
    state: Any = field(default=None, repr=False)

    def to_row(self) -> dict[str, Any]:
        """Summary and config flattened into one dict (a row of a sweep table)."""
        row = {k: v for k, v in self.config.items() if not isinstance(v, (dict, list))}
        row.update(self.summary)
        row.update(self.extra)
        return row

    def __repr__(self) -> str:
        s = self.summary
        return (f"<Result prefetch={self.config.get('prefetch')} evict={self.config.get('evict')}"
                f" capacity_chunks={s['capacity_chunks']}: faults={s['faults']} "
                f"htod_bytes={s['htod_bytes']} evicted_chunks={s['evicted_chunks']} "
                f"sim_time_ns={s['sim_time_ns']:.0f}>")


def make_result(trace, counts: np.ndarray, times: np.ndarray, capacity: int,
                config: dict[str, Any]) -> Result:
    """Turn the engine's count and time arrays into a Result."""
    n_k = trace.n_kernels
    k_counts = counts[:n_k]
    df = pd.DataFrame(k_counts, columns=list(COUNT_NAMES))
    df.insert(8, "htod_bytes", k_counts[:, list(HTOD_COLS)].sum(axis=1))
    dur = trace.arrays.k_duration_ns
    compute = np.where(np.isnan(dur), 0.0, dur)
    df.insert(0, "kernel_id", trace.kernels["kernel_id"].to_numpy())
    df.insert(1, "name", trace.kernels["name"].to_numpy())
    df["accesses"] = np.diff(trace.arrays.k_row_start)
    df["compute_ns"] = compute
    df["stall_ns"] = times[:n_k, T_STALL]
    df["transfer_ns"] = times[:n_k, T_TRANSFER]
    # address translation / shared driver (docs/model.md); zero unless translation is on or
    # tenants share the GPU. translation_ns is already part of stall_ns.
    df["translation_ns"] = times[:n_k, T_XLATE]
    df["walk_queue_ns"] = times[:n_k, T_WALKQ]
    df["driver_wait_ns"] = times[:n_k, T_DRV_WAIT]
    df["sim_ns"] = df["compute_ns"] + df["stall_ns"]
    tot = counts.sum(axis=0)
    summary: dict[str, int | float] = {n: int(tot[i]) for i, n in enumerate(COUNT_NAMES)}
    summary["htod_bytes"] = int(tot[list(HTOD_COLS)].sum())
    summary["kernels"] = n_k
    summary["accesses"] = trace.n_accesses
    summary["capacity_chunks"] = int(capacity)
    summary["peak_blocks"] = int(trace.peak_blocks)
    summary["sim_time_ns"] = float(df["sim_ns"].sum() + times[n_k, T_STALL])
    summary["translation_ns"] = float(times[:, T_XLATE].sum())
    summary["walk_queue_ns"] = float(times[:, T_WALKQ].sum())
    summary["driver_wait_ns"] = float(times[:, T_DRV_WAIT].sum())
    extra = {k: summary[k] for k in EXTRA_KEYS}
    summary = {k: summary[k] for k in SUMMARY_KEYS}
    outside = {n: int(counts[n_k, i]) for i, n in enumerate(COUNT_NAMES)}
    outside["time_ns"] = float(times[n_k, T_STALL])
    return Result(summary=summary, kernels=df, extra=extra, config=config,
                  outside_kernels=outside)
