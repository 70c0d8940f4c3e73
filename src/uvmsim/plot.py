"""Plots from result tables (plots take tables, never simulator objects)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

DEFAULT_METRICS = ("slowdown", "faults", "htod_bytes", "evicted_chunks")
_LABELS = {"slowdown": "slowdown over factor 1 (x)", "faults": "GPU page faults",
           "htod_bytes": "host to device (MiB)", "evicted_chunks": "evicted 2 MiB chunks",
           "sim_time_ns": "simulated time (ms)", "dtoh_bytes_evict": "written back (MiB)",
           "fault_batches": "fault batches"}
#: a marker shape and line style per line: lines that coincide stay apart by shape, and
#: each later line is drawn thinner and smaller on top of the earlier ones (nested)
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
_DASHES = ("-", "--", "-.", ":")
#: positive data spanning at least this ratio gets a log axis (at least 3 decades' labels);
#: anything else, zeros included, a linear axis fitted to the data
LOG_SPAN = 100.0


def sweep_units(metric: str) -> tuple[float, str]:
    """(divisor, label) the sweep plot shows `metric` in: bytes in MiB and nanoseconds in
    milliseconds, as the CLI's table prints them."""
    if metric in _LABELS:
        label = _LABELS[metric]
    else:
        label = metric
    if metric.endswith("_bytes") or "_bytes_" in metric:
        return float(2**20), label if metric in _LABELS else f"{metric} (MiB)"
    if metric.endswith("_ns"):
        return 1e6, label if metric in _LABELS else f"{metric} (ms)"
    return 1.0, label


def _identity(df: pd.DataFrame, hue: Sequence[str]) -> list[str]:
    """The columns that tell lines apart: trace and model where they vary, then `hue`
    (both policies by default, named even when one of them is the same for every line)."""
    keys = [c for c in ("trace", "model") if c in df.columns and df[c].nunique() > 1]
    keys += [h for h in hue if h in df.columns and h not in keys]
    return keys or [df.columns[0]]


def plot_sweep(df: pd.DataFrame, *, metrics: Sequence[str] = DEFAULT_METRICS,
               x: str = "oversub", hue: Sequence[str] = ("prefetch", "evict"),
               title: str | None = None, path: str | Path | None = None):
    """One panel per metric against the oversubscription factor, a line per policy pair
    (and per trace and model where the table has several), one legend for the figure.

    Bytes are shown in MiB and times in ms (`sweep_units`). Each panel's y axis fits its
    data: linear, or logarithmic where positive data spans `LOG_SPAN` or more. Lines that
    coincide stay visible: each has its own marker shape and dash, and each later line is
    drawn thinner and with smaller markers over the earlier ones. Returns the matplotlib
    Figure; writes it to `path` if given (the format by its suffix).
    """
    import matplotlib
    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    metrics = [m for m in metrics if m in df.columns]
    if not metrics:
        raise ValueError("none of the requested metrics is a column of the table")
    keys = _identity(df, hue)
    groups = list(df.groupby(keys, sort=False))
    n, k = len(metrics), len(groups)
    cols = min(n, 2)
    rows = -(-n // cols)
    legend_rows = -(-k // min(k, 4))
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.6 * rows + 0.3 * legend_rows + 0.6),
                             squeeze=False, layout="constrained")
    xs = sorted(df[x].unique())
    for ax, m in zip(axes.flat, metrics):
        div, label = sweep_units(m)
        for i, (key, g) in enumerate(groups):
            g = g.sort_values(x)
            t = i / max(k - 1, 1)  # 0 for the first line, 1 for the last
            ax.plot(g[x], g[m] / div, marker=_MARKERS[i % len(_MARKERS)],
                    linestyle=_DASHES[i % len(_DASHES)], color=f"C{i % 10}",
                    linewidth=3.6 - 2.4 * t, markersize=12 - 7 * t,
                    markeredgecolor="white", markeredgewidth=0.8, zorder=2 + i,
                    label=" / ".join(str(v) for v in (key if isinstance(key, tuple)
                                                      else (key,))))
        y = (df[m] / div).to_numpy(dtype=float)
        y = y[y == y]
        if len(y) and (y > 0).all() and y.max() / y.min() >= LOG_SPAN:
            ax.set_yscale("log")
        else:
            ax.yaxis.set_major_locator(MaxNLocator(nbins=6, min_n_ticks=3))
            ax.yaxis.set_major_formatter(FuncFormatter(
                lambda v, _: f"{v:,.0f}" if abs(v) >= 100 else f"{v:g}"))
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{v:g}" for v in xs])
        ax.set_xlabel("oversubscription factor" if x == "oversub" else x)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(k, 4),
               title=" / ".join(keys), fontsize=9)
    if title:
        fig.suptitle(title)
    if path is not None:
        _save(fig, path, dpi=120)
    return fig


# ---------------------------------------------------------------- the DL oversubscription study
# Real runs (benchmarks/study/results/real_runs.csv: model, pca, factor, iter_s, censored,
# faults, htod_bytes, dtoh_bytes, footprint_bytes) next to sweep results of the same workloads
# (traces named <model>_<pca>, swept with segment="spin_kernel"). Each figure has a *_table
# function returning exactly the data it draws.

PAGE = 4096
_REAL_STYLE = dict(linestyle="-", marker="o")
_SIM_STYLE = dict(linestyle="--", marker="s", markerfacecolor="none")


def split_trace_names(sim: pd.DataFrame) -> pd.DataFrame:
    """`sim` with `workload` and `pca` columns parsed from trace names ``<model>_<on|off>``
    (rows of other traces are dropped)."""
    m = sim["trace"].astype(str).str.extract(r"^(?P<workload>.+)_(?P<pca>on|off)$")
    out = sim.assign(workload=m["workload"], pca=m["pca"])
    return out[out["workload"].notna()].reset_index(drop=True)


def _sim_view(sim: pd.DataFrame, model: str | None, prefetch: str | None) -> pd.DataFrame:
    s = split_trace_names(sim)
    if model is not None and "model" in s:
        s = s[s["model"] == model]
    if prefetch is not None and "prefetch" in s:
        s = s[s["prefetch"] == prefetch]
    if s.duplicated(["workload", "pca", "oversub"]).any():
        raise ValueError("several sweep rows per (workload, pca, factor): choose model= and "
                         "prefetch=")
    return s


def _time_col(s: pd.DataFrame) -> str:
    """One training step's simulated time where the sweep marked iterations, else the whole
    trace's (traces recorded without models.py's markers)."""
    if "iter_sim_ns" in s and len(s) and s["iter_sim_ns"].notna().all():
        return "iter_sim_ns"
    return "sim_time_ns"


def _real_view(real: pd.DataFrame) -> pd.DataFrame:
    r = real.copy()
    r["censored"] = r["censored"].astype(str).str.lower() == "true"
    r["factor"] = r["factor"].astype(float)
    return r


def slowdown_table(real: pd.DataFrame | None, sim: pd.DataFrame | None, *,
                   model: str | None = "h200", prefetch: str | None = "density") -> pd.DataFrame:
    """Per-iteration slowdown over factor 1: real ``iter_s(F) / iter_s(1)`` and simulated
    ``iter_sim_ns(F) / iter_sim_ns(1)``. Columns workload, pca, factor, source, slowdown,
    censored (a censored real run's slowdown is a lower bound)."""
    rows = []
    if real is not None and len(real):
        r = _real_view(real)
        for (w, p), g in r.groupby(["model", "pca"], sort=False):
            base = g.loc[g["factor"] == 1.0, "iter_s"]
            if base.empty or not base.notna().all():
                continue
            for _, x in g.iterrows():
                if x["iter_s"] == x["iter_s"]:
                    rows.append((w, p, x["factor"], "real", x["iter_s"] / base.iloc[0],
                                 bool(x["censored"])))
    if sim is not None and len(sim):
        s = _sim_view(sim, model, prefetch)
        col = _time_col(s)
        for (w, p), g in s.groupby(["workload", "pca"], sort=False):
            base = g.loc[g["oversub"] == 1.0, col]
            if base.empty:
                continue
            for _, x in g.iterrows():
                rows.append((w, p, float(x["oversub"]), "sim", x[col] / base.iloc[0], False))
    return pd.DataFrame(rows, columns=["workload", "pca", "factor", "source", "slowdown",
                                       "censored"]).sort_values(
        ["workload", "pca", "source", "factor"], kind="stable").reset_index(drop=True)


def pca_ratio_table(real: pd.DataFrame | None, sim: pd.DataFrame | None, *,
                    model: str | None = "h200", prefetch: str | None = "density") -> pd.DataFrame:
    """Iteration time with PCA off over PCA on, per workload and factor, real and simulated.
    Columns workload, factor, source, ratio, censored (either run censored)."""
    rows = []
    if real is not None and len(real):
        r = _real_view(real).set_index(["model", "factor", "pca"])
        for (w, f) in sorted({(a, b) for a, b, _ in r.index}):
            if (w, f, "on") in r.index and (w, f, "off") in r.index:
                on, off = r.loc[(w, f, "on")], r.loc[(w, f, "off")]
                if on["iter_s"] == on["iter_s"] and off["iter_s"] == off["iter_s"]:
                    rows.append((w, f, "real", off["iter_s"] / on["iter_s"],
                                 bool(on["censored"] or off["censored"])))
    if sim is not None and len(sim):
        s = _sim_view(sim, model, prefetch)
        col = _time_col(s)
        t = s.set_index(["workload", "oversub", "pca"])[col]
        for (w, f) in sorted({(a, b) for a, b, _ in t.index}):
            if (w, f, "on") in t.index and (w, f, "off") in t.index:
                rows.append((w, float(f), "sim", t[(w, f, "off")] / t[(w, f, "on")], False))
    return pd.DataFrame(rows, columns=["workload", "factor", "source", "ratio", "censored"])


def counts_table(real: pd.DataFrame | None, sim: pd.DataFrame | None, *,
                 model: str | None = "h200", prefetch: str | None = "density") -> pd.DataFrame:
    """Whole-run counts, real (CUPTI counter runs) and simulated (the whole trace): faults,
    htod_bytes, dtoh_bytes, migrated_pages ((HtoD + DtoH) / 4 KiB), footprint_bytes (the real
    runs' footprint of the same workload, else the trace's peak 2 MiB blocks) and
    volume_over_footprint ((HtoD + DtoH) / footprint); simulated runs add faults_read,
    faults_write and read_share. Real rows only where a counter run was made."""
    cols = ["workload", "pca", "factor", "source", "faults", "faults_read", "faults_write",
            "htod_bytes", "dtoh_bytes", "footprint_bytes"]
    rows = []
    if real is not None and len(real) and "faults" in real:
        r = _real_view(real)
        r = r[pd.to_numeric(r["faults"], errors="coerce").notna()]
        for _, x in r.iterrows():
            rows.append((x["model"], x["pca"], x["factor"], "real", float(x["faults"]),
                         float("nan"), float("nan"), float(x["htod_bytes"]),
                         float(x["dtoh_bytes"]), float(x.get("footprint_bytes", "nan"))))
    if sim is not None and len(sim):
        s = _sim_view(sim, model, prefetch)
        # the footprint of the real runs (the trace's peak live managed bytes) where known:
        # peak 2 MiB blocks overstate it when many small allocations each open a block
        fp = {}
        if real is not None and "footprint_bytes" in real:
            fp = {(m, p): float(v) for m, p, v in
                  zip(real["model"], real["pca"], pd.to_numeric(real["footprint_bytes"],
                                                                errors="coerce")) if v == v}
        for _, x in s.iterrows():
            rows.append((x["workload"], x["pca"], float(x["oversub"]), "sim", float(x["faults"]),
                         float(x["faults_read"]), float(x["faults_write"]),
                         float(x["htod_bytes"]), float(x["dtoh_bytes_evict"]),
                         fp.get((x["workload"], x["pca"]),
                                float(x["peak_blocks"]) * (2 << 20))))
    df = pd.DataFrame(rows, columns=cols)
    df["migrated_pages"] = (df["htod_bytes"] + df["dtoh_bytes"]) / PAGE
    df["volume_over_footprint"] = (df["htod_bytes"] + df["dtoh_bytes"]) / df["footprint_bytes"]
    df["read_share"] = df["faults_read"] / (df["faults_read"] + df["faults_write"])
    return df.sort_values(["workload", "pca", "source", "factor"],
                          kind="stable").reset_index(drop=True)


def working_set_table(traces: dict) -> pd.DataFrame:
    """Per kernel of each trace: kernel index, name, working set (distinct 4 KiB pages it
    touched, in bytes) and the trace's footprint (peak live managed bytes)."""
    from .groundtruth import peak_live_managed_bytes
    from .trace import Trace, load_trace
    out = []
    for label, t in traces.items():
        tr = t if isinstance(t, Trace) else load_trace(t)
        start = tr.arrays.k_row_start
        ws = (start[1:] - start[:-1]).astype("int64") * PAGE
        out.append(pd.DataFrame({"trace": label, "kernel": range(len(ws)),
                                 "name": tr.kernels["name"].to_numpy(), "working_set_bytes": ws,
                                 "footprint_bytes": peak_live_managed_bytes(tr)}))
    return pd.concat(out, ignore_index=True)


#: panels per row of the study's multi-panel figures (more workloads wrap to more rows)
STUDY_COLS = 3


def _grid(n: int, width: float = 4.2, height: float = 3.2):
    import matplotlib.pyplot as plt
    cols = min(n, STUDY_COLS)
    rows = -(-n // cols)
    # room below the panels for the figure's one legend
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows + 0.8),
                             squeeze=False, layout="constrained")
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)[:n]


def _fig_legend(fig, axes, loc: str = "outside lower center", ncols: int = 4) -> None:
    """One legend for the figure, outside every panel (a legend inside one covers data),
    with each label once, in the order the panels first draw it."""
    seen: dict = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc=loc, fontsize=8,
                   ncols=min(ncols, len(seen)))


def _finish(fig, title, path):
    if title:
        fig.suptitle(title)
    if path is not None:
        _save(fig, path, dpi=110)
    return fig


def _save(fig, path, **kw) -> None:
    """fig.savefig, through a temporary file renamed into place when `path` is a path (a
    file object is written directly). The format follows the path's suffix, as savefig's
    own would (the temporary name's does not)."""
    import os
    if not isinstance(path, (str, os.PathLike)):
        fig.savefig(path, **kw)
        return
    from matplotlib import rcParams
    from ._atomic import write_atomic
    p = Path(path)
    fmt = p.suffix[1:].lower()
    if not fmt:  # savefig appends the default format's extension to a bare name
        fmt = rcParams["savefig.format"]
        p = p.with_name(f"{p.name}.{fmt}")
    write_atomic(p, lambda tmp: fig.savefig(tmp, format=fmt, **kw))


def _use_agg(path) -> None:
    if path is not None:
        import matplotlib
        matplotlib.use("Agg", force=False)


def plot_slowdown(real=None, sim=None, *, model="h200", prefetch="density",
                  title="Slowdown per training iteration vs oversubscription", path=None):
    """One panel per workload: slowdown against the factor, real (solid, censored runs as
    upward triangles: lower bounds) and simulated (dashed), PCA on and off."""
    _use_agg(path)
    t = slowdown_table(real, sim, model=model, prefetch=prefetch)
    ws = list(dict.fromkeys(t["workload"]))
    if not ws:
        raise ValueError("nothing to plot: no workload with a factor-1 run")
    fig, axes = _grid(len(ws))
    colors = {"on": "C0", "off": "C3"}
    for ax, w in zip(axes, ws):
        for (p, src), g in t[t["workload"] == w].groupby(["pca", "source"], sort=False):
            style = _REAL_STYLE if src == "real" else _SIM_STYLE
            ax.plot(g["factor"], g["slowdown"], color=colors.get(p), label=f"{src} PCA {p}",
                    **style)
            c = g[g["censored"]]
            if len(c):
                ax.plot(c["factor"], c["slowdown"], "^", color=colors.get(p), markersize=9,
                        linestyle="none", label=f"{src} PCA {p} (> censored)")
        ax.set_title(w)
        ax.set_xlabel("oversubscription factor")
        ax.set_ylabel("slowdown (x)")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    _fig_legend(fig, axes, ncols=3)
    return _finish(fig, title, path)


def plot_pca_ratio(real=None, sim=None, *, model="h200", prefetch="density",
                   title="Iteration time, PCA off / PCA on", path=None):
    """The PCA-off over PCA-on ratio against the factor, a colour per workload, real solid and
    simulated dashed; 1 is drawn as a reference line."""
    import matplotlib.pyplot as plt
    _use_agg(path)
    t = pca_ratio_table(real, sim, model=model, prefetch=prefetch)
    if t.empty:
        raise ValueError("nothing to plot: no workload with both PCA settings")
    fig, ax = plt.subplots(figsize=(8.5, 4.2), layout="constrained")
    for i, w in enumerate(dict.fromkeys(t["workload"])):
        for src, g in t[t["workload"] == w].groupby("source", sort=False):
            ax.plot(g["factor"], g["ratio"], color=f"C{i}", label=f"{w} ({src})",
                    **(_REAL_STYLE if src == "real" else _SIM_STYLE))
    ax.axhline(1.0, color="k", linewidth=0.8)
    ax.set_xlabel("oversubscription factor")
    ax.set_ylabel("PCA off / PCA on")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    _fig_legend(fig, [ax], loc="outside right upper", ncols=1)
    return _finish(fig, title, path)


def plot_working_set(traces, *, title="Per-kernel working set", path=None):
    """One panel per trace: each kernel's working set (MiB) over the kernel index, and the
    footprint as a horizontal line (the paper's Figure 5). `traces`: {label: trace} or a
    table made by `working_set_table` (stored results, no traces needed)."""
    _use_agg(path)
    t = traces if isinstance(traces, pd.DataFrame) else working_set_table(traces)
    labels = list(dict.fromkeys(t["trace"]))
    fig, axes = _grid(len(labels))
    for ax, lab in zip(axes, labels):
        g = t[t["trace"] == lab]
        ax.plot(g["kernel"], g["working_set_bytes"] / 2**20, linewidth=0.8, label="kernel")
        ax.axhline(g["footprint_bytes"].iloc[0] / 2**20, color="C3", linestyle="--",
                   label="footprint")
        ax.set_title(lab)
        ax.set_xlabel("kernel index")
        ax.set_ylabel("working set (MiB)")
        ax.grid(True, alpha=0.3)
    _fig_legend(fig, axes)
    return _finish(fig, title, path)


def _per_workload_counts(t, y, ylabel, title, path, log=True):
    _use_agg(path)
    ws = list(dict.fromkeys(t["workload"]))
    if not ws:
        raise ValueError("nothing to plot")
    fig, axes = _grid(len(ws))
    colors = {"on": "C0", "off": "C3"}
    for ax, w in zip(axes, ws):
        for (p, src), g in t[t["workload"] == w].groupby(["pca", "source"], sort=False):
            # a log axis cannot show 0 (a line would drop off the panel to it)
            g = g[g[y] > 0] if log else g[g[y].notna()]
            if g.empty:
                continue
            ax.plot(g["factor"], g[y], color=colors.get(p), label=f"{src} PCA {p}",
                    **(_REAL_STYLE if src == "real" else _SIM_STYLE))
        ax.set_title(w)
        ax.set_xlabel("oversubscription factor")
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    _fig_legend(fig, axes)
    return _finish(fig, title, path)


def plot_faults(real=None, sim=None, *, model="h200", prefetch="density",
                title="GPU page faults (whole run)", path=None):
    """Page faults against the factor per workload: CUPTI's count in the real counter runs,
    the simulated count of the whole trace."""
    t = counts_table(real, sim, model=model, prefetch=prefetch)
    return _per_workload_counts(t, "faults", "GPU page faults", title, path)


def plot_fault_kinds(sim, *, model="h200", prefetch="density",
                     title="Read share of page faults (simulated)", path=None):
    """Share of read faults against the factor (simulated: CUPTI's counters do not split
    faults by access type)."""
    t = counts_table(None, sim, model=model, prefetch=prefetch)
    return _per_workload_counts(t, "read_share", "read faults / all faults", title, path,
                                log=False)


def plot_migrations(real=None, sim=None, *, model="h200", prefetch="density",
                    title="Migrations (whole run)", path=None):
    """Two panels per workload, one above the other: migrated 4 KiB pages ((HtoD + DtoH) /
    4 KiB) and the migrated volume over the footprint, real and simulated (on log axes, so
    runs that migrated nothing are left out). Workloads wrap after STUDY_COLS per row."""
    import matplotlib.pyplot as plt
    _use_agg(path)
    t = counts_table(real, sim, model=model, prefetch=prefetch)
    ws = list(dict.fromkeys(t["workload"]))
    if not ws:
        raise ValueError("nothing to plot")
    cols = min(len(ws), STUDY_COLS)
    blocks = -(-len(ws) // cols)
    fig, axes = plt.subplots(2 * blocks, cols, figsize=(4.2 * cols, 5.6 * blocks + 0.8),
                             squeeze=False, layout="constrained")
    colors = {"on": "C0", "off": "C3"}
    used = []
    for j, w in enumerate(ws):
        b, c = divmod(j, cols)
        for i, (y, lab) in enumerate((("migrated_pages", "migrated 4 KiB pages"),
                                      ("volume_over_footprint", "volume / footprint"))):
            ax = axes[2 * b + i][c]
            used.append(ax)
            for (p, src), g in t[t["workload"] == w].groupby(["pca", "source"], sort=False):
                g = g[g[y] > 0]  # log axis: a run that migrated nothing has no point
                ax.plot(g["factor"], g[y], color=colors.get(p), label=f"{src} PCA {p}",
                        **(_REAL_STYLE if src == "real" else _SIM_STYLE))
            ax.set_title(w if i == 0 else "")
            ax.set_xlabel("oversubscription factor" if i == 1 else "")
            ax.set_ylabel(lab)
            ax.set_yscale("log")
            ax.grid(True, alpha=0.3)
    for ax in axes.flat:
        if ax not in used:
            ax.set_visible(False)
    _fig_legend(fig, used)
    return _finish(fig, title, path)
