"""Plots from result tables (plots take tables, never simulator objects)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

DEFAULT_METRICS = ("slowdown", "faults", "htod_bytes", "evicted_chunks")
_LABELS = {"slowdown": "slowdown (x)", "faults": "GPU page faults",
           "htod_bytes": "host-to-device bytes", "evicted_chunks": "evicted 2 MiB chunks",
           "sim_time_ns": "simulated time (ns)", "dtoh_bytes_evict": "evicted bytes"}


def plot_sweep(df: pd.DataFrame, *, metrics: Sequence[str] = DEFAULT_METRICS,
               x: str = "oversub", hue: Sequence[str] = ("prefetch", "evict"),
               title: str | None = None, path: str | Path | None = None):
    """One panel per metric against the oversubscription factor, a line per policy pair.

    Returns the matplotlib Figure; writes it to `path` if given (PNG by suffix).
    """
    import matplotlib
    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    metrics = [m for m in metrics if m in df.columns]
    if not metrics:
        raise ValueError("none of the requested metrics is a column of the table")
    n = len(metrics)
    cols = min(n, 2)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.6 * rows), squeeze=False)
    hue = [h for h in hue if h in df.columns and df[h].nunique() > 1] or [hue[0]]
    for ax, m in zip(axes.flat, metrics):
        for key, g in df.groupby(hue, sort=False):
            label = " / ".join(str(k) for k in (key if isinstance(key, tuple) else (key,)))
            g = g.sort_values(x)
            ax.plot(g[x], g[m], marker="o", label=label)
        ax.set_xlabel("oversubscription factor" if x == "oversub" else x)
        ax.set_ylabel(_LABELS.get(m, m))
        ax.grid(True, alpha=0.3)
        if m in ("faults", "htod_bytes", "evicted_chunks") and (df[m] > 0).any():
            ax.set_yscale("symlog")
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=8, title=" / ".join(hue))
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
