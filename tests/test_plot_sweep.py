"""The sweep figure (out/sweep.png): its own data and pixels. Every line visible where lines
coincide, units as in the CLI's table, several tick labels and no mostly empty panel, one
legend naming both policies."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

from uvmsim.plot import LOG_SPAN, plot_sweep, sweep_units  # noqa: E402

FACTORS = [1.0, 1.25, 1.5, 2.0, 2.5, 3.0]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt
    plt.close("all")


def table(faults_span=8.0) -> pd.DataFrame:
    """A sweep table shaped like the main job's: four prefetch policies, one eviction
    policy; evictions and bytes the same for three of them (as on the bundled trace), zero
    at factor 1."""
    rows = []
    for i, pf in enumerate(["none", "64k", "2m", "density"]):
        for f in FACTORS:
            over = max(0.0, f - 1.25)
            rows.append({"trace": "t", "model": "contract", "prefetch": pf, "evict": "lru2m",
                         "oversub": f, "slowdown": 1 + over * (3 - i * 0.5),
                         "faults": 20_000 * (4 - i) * (1 + over * (faults_span - 1) / 1.75),
                         "htod_bytes": int(over * 200 * 2**20) + (i == 2) * int(over * 40 * 2**20),
                         "evicted_chunks": int(over * 170),
                         "sim_time_ns": 1e7 * (1 + over)})
    return pd.DataFrame(rows)


def panels(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def test_one_legend_for_the_figure_naming_both_policies():
    df = table()
    fig = plot_sweep(df)
    assert len(fig.legends) == 1
    assert all(ax.get_legend() is None for ax in fig.axes)  # no legend over a panel's data
    leg = fig.legends[0]
    assert leg.get_title().get_text() == "prefetch / evict"
    assert [t.get_text() for t in leg.get_texts()] == [
        "none / lru2m", "64k / lru2m", "2m / lru2m", "density / lru2m"]
    # the legend lies below every panel, not on one
    fig.canvas.draw()
    lb = leg.get_window_extent()
    for ax in panels(fig):
        assert lb.y1 <= ax.get_window_extent().y0 + 1


def test_several_traces_are_separate_lines():
    a, b = table(), table()
    b["trace"] = "u"
    fig = plot_sweep(pd.concat([a, b]))
    assert len(fig.axes[0].lines) == 8
    assert fig.legends[0].get_title().get_text() == "trace / prefetch / evict"


def test_units_are_those_of_the_table():
    df = table()
    fig = plot_sweep(df)
    by_label = {ax.get_ylabel(): ax for ax in panels(fig)}
    ax = by_label["host to device (MiB)"]
    got = ax.lines[2].get_ydata()   # 2m
    want = df[df["prefetch"] == "2m"].sort_values("oversub")["htod_bytes"] / 2**20
    assert np.allclose(got, want)
    assert max(got) > 100           # MiB, not bytes
    assert sweep_units("dtoh_bytes_evict") == (2**20, "written back (MiB)")
    assert sweep_units("iter_htod_bytes")[1] == "iter_htod_bytes (MiB)"
    assert sweep_units("sim_time_ns") == (1e6, "simulated time (ms)")
    assert sweep_units("faults") == (1.0, "GPU page faults")


@pytest.mark.parametrize("span", [8.0, 3 * LOG_SPAN])
def test_every_panel_has_several_tick_labels_and_is_filled_by_its_data(span):
    fig = plot_sweep(table(faults_span=span))
    fig.canvas.draw()
    for ax in panels(fig):
        lo, hi = sorted(ax.get_ylim())
        labels = [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks())
                  if lo <= v <= hi and t.get_text()]
        assert len(labels) >= 3, (ax.get_ylabel(), labels)
        ys = np.concatenate([line.get_ydata() for line in ax.lines]).astype(float)
        to_axes = ax.transData + ax.transAxes.inverted()
        frac = to_axes.transform(np.c_[np.ones_like(ys), ys])[:, 1]
        assert frac.max() - frac.min() >= 0.8, ax.get_ylabel()   # not mostly empty
    faults = next(ax for ax in panels(fig) if ax.get_ylabel() == "GPU page faults")
    assert faults.get_yscale() == ("log" if span >= LOG_SPAN else "linear")


def test_panels_wrap_in_two_columns():
    fig = plot_sweep(table(), metrics=("slowdown", "faults", "htod_bytes", "evicted_chunks",
                                       "sim_time_ns"))
    shown = panels(fig)
    assert len(shown) == 5
    xs = sorted({round(ax.get_position().x0, 3) for ax in shown})
    assert len(xs) == 2


def _pixels_of(rgba: np.ndarray, color, tol: int = 6) -> np.ndarray:
    want = np.array(to_rgb(color)) * 255
    return (np.abs(rgba[..., :3].astype(int) - want).max(axis=-1) <= tol)


def test_every_line_is_visible_where_lines_coincide():
    df = table()
    fig = plot_sweep(df)
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())
    h = img.shape[0]
    ax = next(a for a in panels(fig) if a.get_ylabel() == "evicted 2 MiB chunks")
    ys = [tuple(line.get_ydata()) for line in ax.lines]
    assert len(set(ys)) == 1        # the four lines coincide in this panel
    bb = ax.get_window_extent()
    crop = img[int(h - bb.y1):int(h - bb.y0), int(bb.x0):int(bb.x1)]
    for line in ax.lines:
        n = _pixels_of(crop, line.get_color()).sum()
        assert n >= 40, f"{line.get_label()}: {n} pixels of its colour"
    # drawn larger first, smaller on top: each earlier line shows around the later ones
    widths = [line.get_linewidth() for line in ax.lines]
    sizes = [line.get_markersize() for line in ax.lines]
    assert all(a > b for a, b in zip(widths, widths[1:]))
    assert all(a > b for a, b in zip(sizes, sizes[1:]))
    assert len({line.get_marker() for line in ax.lines}) == 4


def test_written_png(tmp_path):
    from matplotlib.image import imread
    plot_sweep(table(), title="t", path=tmp_path / "s.png")
    img = imread(tmp_path / "s.png")
    assert img.shape[1] == 1440 and img.shape[0] < 1200   # two columns at 120 dpi


# ---------------------------------------------------------------- the main job's file
ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def main_job_args() -> list[str]:
    """The `uvmsim sweep` arguments of scripts/main.sh (factors and policies), on its trace."""
    import re
    import shlex
    text = (ROOT / "scripts" / "main.sh").read_text().replace("\\\n", " ")
    cmd = shlex.split(re.search(r"uvmsim sweep (.+)", text).group(1))
    keep = []
    for flag in ("--oversub", "--prefetch", "--evict"):
        keep += [flag, cmd[cmd.index(flag) + 1]]
    return [str(ROOT / (ROOT / "traces" / "MAIN").read_text().strip()), *keep]


def png_panels(img: np.ndarray) -> list[tuple[int, int, int, int]]:
    """The panels of a written figure, from its pixels alone: (top, bottom, left, right) of
    each frame, found as the horizontal runs of dark spine pixels 200 px or longer, paired
    top and bottom within each column of panels."""
    dark = img[..., :3].max(axis=-1) < 0.35
    runs = {}
    for y in range(dark.shape[0]):
        row = np.flatnonzero(np.diff(np.r_[0, dark[y].astype(np.int8), 0]))
        for x0, x1 in zip(row[::2], row[1::2]):
            if x1 - x0 >= 200:
                runs.setdefault((x0 // 8, x1 // 8), []).append((y, x0, x1))
    out = []
    for rows in runs.values():
        ys = [r[0] for r in rows]
        edges = [g for g in np.split(np.array(ys), np.flatnonzero(np.diff(ys) > 2) + 1)]
        assert len(edges) % 2 == 0, edges        # a top and a bottom spine per panel
        for top, bot in zip(edges[::2], edges[1::2]):
            out.append((int(top.max()) + 1, int(bot.min()), int(rows[0][1]), int(rows[0][2])))
    return sorted(out, key=lambda p: (p[0], p[2]))


def test_the_main_jobs_png_read_back_from_its_pixels(tmp_path, capsys):
    """out/sweep.png as scripts/main.sh writes it (its trace, factors and policies, through
    the CLI), judged from the PNG's pixels: four panels, each filled by its data top to
    bottom (no mostly empty panel), every policy's colour visible in every panel (no line
    hidden under another), and one legend below the panels."""
    from matplotlib.image import imread

    import uvmsim.cli as C
    png = tmp_path / "out" / "sweep.png"
    assert C.main(["sweep", *main_job_args(), "--plot", str(png), "--no-progress",
                   "--executor", "serial"]) == 0
    table = capsys.readouterr().out
    n_lines = len(main_job_args()[main_job_args().index("--prefetch") + 1].split(","))
    assert n_lines == 4 and "MiB" in table        # the table's units are the figure's
    img = imread(png)
    panels = png_panels(img)
    assert len(panels) == 4, panels
    colours = [f"C{i}" for i in range(n_lines)]
    factors = [float(f) for f in main_job_args()[main_job_args().index("--oversub") + 1]
               .split(",")]
    lo, span = factors[0], factors[-1] - factors[0]
    lowest = max(p[1] for p in panels)
    for top, bot, left, right in panels:
        crop = (img[top + 3:bot - 3, left:right] * 255).astype(int)
        coloured = np.zeros(crop.shape[:2], bool)
        for c in colours:
            mine = _pixels_of(crop, c, tol=8)
            assert mine[:, 3:-3].sum() >= 30, (top, left, c)     # this line shows
            coloured |= mine
        # the markers: the pixel columns of the factors (matplotlib's 5% margins); the
        # widest empty band between them is not half the panel (a symlog axis from 0 left
        # most of its height empty: 0.7-0.8 of it on the bundled trace)
        at = np.zeros(crop.shape[0], bool)
        for f in factors:
            x = int((f - lo + 0.05 * span) / (1.1 * span) * (right - left))
            at |= coloured[:, max(x - 2, 0):x + 3].any(axis=1)
        ys = np.flatnonzero(at)
        gaps = np.diff(np.r_[0, ys, crop.shape[0] - 1]) / crop.shape[0]
        assert len(ys) and gaps.max() < 0.5, (top, left, gaps.max())
    below = (img[lowest + 40:, ..., :3] * 255).astype(int)     # past the x tick labels
    for c in colours:                                         # the legend's handles
        assert _pixels_of(below, c, tol=8).sum() >= 10, c
