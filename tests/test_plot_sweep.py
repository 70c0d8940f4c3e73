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
