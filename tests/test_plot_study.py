"""The study's figures: each draws exactly the numbers of its table (real next to simulated)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from uvmsim import plot as P  # noqa: E402
from uvmsim.sweep import sweep  # noqa: E402
from uvmsim.trace.builder import TraceBuilder  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt
    plt.close("all")


REAL = pd.DataFrame({
    "model": ["net"] * 6, "pca": ["on", "on", "on", "off", "off", "off"],
    "factor": [1, 1.5, 2, 1, 1.5, 2], "iter_s": [0.1, 0.4, 2.0, 0.5, 0.6, 0.9],
    "censored": ["false", "false", "true", "false", "false", "false"],
    "faults": [10, 400, "", 20, 900, ""], "htod_bytes": [4096, 8192, "", 4096, 40960, ""],
    "dtoh_bytes": [0, 4096, "", 0, 8192, ""], "footprint_bytes": [8192] * 6})


def net(n_pages: int):
    b = TraceBuilder()
    x = b.alloc(12 << 20)
    y = b.alloc(4 << 20)
    for _ in range(2):
        b.kernel("spin_kernel", reads=[])
        b.kernel("fwd", reads=b.pages(x, 0, n_pages), writes=b.pages(y, 0, 100))
        b.kernel("bwd", reads=b.pages(y, 0, 100), writes=b.pages(x, 0, n_pages))
    return b.build()


@pytest.fixture(scope="module")
def sim():
    return sweep({"net_on": net(2000), "net_off": net(2600)}, oversub=[1.0, 1.5, 2.0],
                 prefetch=["none"], executor="serial", progress=False, segment="spin_kernel")


def lines(ax):
    return {l.get_label(): (list(l.get_xdata()), list(l.get_ydata())) for l in ax.lines}


def test_slowdown_table_and_figure(sim):
    t = P.slowdown_table(REAL, sim, model=None, prefetch=None)
    real_on = t[(t["source"] == "real") & (t["pca"] == "on")]
    assert list(real_on["slowdown"]) == pytest.approx([1.0, 4.0, 20.0])
    assert list(real_on["censored"]) == [False, False, True]
    s = sim[sim["trace"] == "net_off"].set_index("oversub")["iter_sim_ns"]
    sim_off = t[(t["source"] == "sim") & (t["pca"] == "off")].set_index("factor")["slowdown"]
    assert sim_off[2.0] == pytest.approx(s[2.0] / s[1.0]) and sim_off[2.0] > 1.0
    fig = P.plot_slowdown(REAL, sim, model=None, prefetch=None)
    got = lines(fig.axes[0])
    assert got["real PCA on"][1] == pytest.approx([1.0, 4.0, 20.0])
    assert got["real PCA on (> censored)"] == ([2.0], [pytest.approx(20.0)])
    assert got["sim PCA off"][1] == pytest.approx(list(sim_off))
    assert fig.axes[0].get_yscale() == "log"


def test_pca_ratio(sim):
    t = P.pca_ratio_table(REAL, sim, model=None, prefetch=None)
    real = t[t["source"] == "real"].set_index("factor")["ratio"]
    assert real.to_dict() == pytest.approx({1.0: 5.0, 1.5: 1.5, 2.0: 0.45})
    assert t[(t["source"] == "real") & (t["factor"] == 2.0)]["censored"].item()
    sim_t = sim.set_index(["trace", "oversub"])["iter_sim_ns"]
    simr = t[t["source"] == "sim"].set_index("factor")["ratio"]
    assert simr[1.5] == pytest.approx(sim_t[("net_off", 1.5)] / sim_t[("net_on", 1.5)])
    fig = P.plot_pca_ratio(REAL, sim, model=None, prefetch=None)
    got = lines(fig.axes[0])
    assert got["net (real)"][1] == pytest.approx([5.0, 1.5, 0.45])
    assert got["net (sim)"][1] == pytest.approx(list(simr))


def test_counts_faults_read_share_and_migrations(sim):
    t = P.counts_table(REAL, sim, model=None, prefetch=None)
    real = t[t["source"] == "real"]
    assert list(real["factor"]) == [1.0, 1.5, 1.0, 1.5]  # only runs with counters
    r = real[(real["pca"] == "off") & (real["factor"] == 1.5)].iloc[0]
    assert r["migrated_pages"] == 12 and r["volume_over_footprint"] == pytest.approx(6.0)
    s = t[(t["source"] == "sim") & (t["pca"] == "on") & (t["factor"] == 2.0)].iloc[0]
    row = sim[(sim["trace"] == "net_on") & (sim["oversub"] == 2.0)].iloc[0]
    assert s["faults"] == row["faults"]
    assert s["read_share"] == pytest.approx(row["faults_read"] / row["faults"])
    assert s["migrated_pages"] == (row["htod_bytes"] + row["dtoh_bytes_evict"]) / 4096
    assert s["volume_over_footprint"] == pytest.approx(   # the real runs' footprint
        (row["htod_bytes"] + row["dtoh_bytes_evict"]) / 8192)
    alone = P.counts_table(None, sim, model=None, prefetch=None)
    assert (alone["footprint_bytes"] == row["peak_blocks"] * (2 << 20)).all()
    fig = P.plot_faults(REAL, sim, model=None, prefetch=None)
    assert lines(fig.axes[0])["real PCA off"] == ([1.0, 1.5], [20.0, 900.0])
    fig = P.plot_fault_kinds(sim, model=None, prefetch=None)
    sim_on = t[(t["source"] == "sim") & (t["pca"] == "on")]
    assert lines(fig.axes[0])["sim PCA on"][1] == pytest.approx(list(sim_on["read_share"]))
    fig = P.plot_migrations(REAL, sim, model=None, prefetch=None)
    vol = lines(fig.axes[1])["real PCA off"]
    assert vol == ([1.0, 1.5], [pytest.approx(0.5), pytest.approx(6.0)])


def test_working_set_per_kernel():
    tr = net(1000)
    t = P.working_set_table({"net": tr})
    assert list(t["working_set_bytes"]) == [0, 1100 * 4096, 1100 * 4096] * 2
    assert (t["footprint_bytes"] == 16 << 20).all()
    fig = P.plot_working_set({"net": tr})
    ax = fig.axes[0]
    y = ax.lines[0].get_ydata()
    assert np.allclose(y, np.array([0, 1100, 1100, 0, 1100, 1100]) * 4096 / 2**20)
    assert ax.lines[1].get_ydata()[0] == 16      # the footprint line, MiB
    # a stored table (results/working_sets.csv.gz) draws the same figure without the trace
    stored = P.plot_working_set(t.iloc[:3].assign(working_set_bytes=[4096, 8192, 0]))
    assert np.allclose(stored.axes[0].lines[0].get_ydata(), np.array([1, 2, 0]) * 4096 / 2**20)


def test_several_rows_per_point_need_a_choice(sim):
    both = pd.concat([sim, sim.assign(model="other")])
    with pytest.raises(ValueError, match="choose model"):
        P.slowdown_table(None, both, model=None, prefetch=None)
    assert len(P.slowdown_table(None, both, model="other", prefetch=None)) == 6


# ---------------------------------------------------------------- layout of the figures
WORKLOADS = ["alexnet", "bert", "gpt2", "resnet101", "resnet50", "whisper", "vgg"]


@pytest.fixture(scope="module")
def seven():
    """Stored-results shaped tables for seven workloads (real with counters at 1 and 1.5)."""
    real, sim = [], []
    for i, w in enumerate(WORKLOADS):
        for pca in ("on", "off"):
            for f in (1.0, 1.5, 2.0):
                k = (i + 1) * (2 if pca == "off" else 1)
                real.append({"model": w, "pca": pca, "factor": f, "iter_s": k * f,
                             "censored": f == 2.0 and pca == "on",
                             "faults": 100 * k * f if f < 2 else "",
                             "htod_bytes": 4096 * 10 * k * f if f < 2 else "",
                             "dtoh_bytes": 4096 * k * (f - 1) if f < 2 else "",
                             "footprint_bytes": 1 << 30})
                sim.append({"trace": f"{w}_{pca}", "model": "h200", "prefetch": "density",
                            "oversub": f, "faults": 200 * k * f, "faults_read": 50 * k * f,
                            "faults_write": 150 * k * f, "htod_bytes": 4096 * 12 * k * f,
                            "dtoh_bytes_evict": 4096 * 3 * k * (f - 1),
                            "peak_blocks": 512, "sim_time_ns": 1e6 * k * f * f})
    return pd.DataFrame(real), pd.DataFrame(sim)


FIGURES = {"slowdown": lambda r, s: P.plot_slowdown(r, s),
           "pca_ratio": lambda r, s: P.plot_pca_ratio(r, s),
           "faults": lambda r, s: P.plot_faults(r, s),
           "read_share": lambda r, s: P.plot_fault_kinds(s),
           "migrations": lambda r, s: P.plot_migrations(r, s)}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_one_legend_outside_every_panel(seven, name):
    fig = FIGURES[name](*seven)
    assert all(ax.get_legend() is None for ax in fig.axes)
    assert len(fig.legends) == 1
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(labels) == len(set(labels)) > 0          # each label once
    fig.canvas.draw()
    lb = fig.legends[0].get_window_extent()
    for ax in fig.axes:
        if ax.get_visible():
            assert not lb.overlaps(ax.get_window_extent()), (name, ax.get_title())


def test_migrations_wrap_instead_of_one_row(seven):
    fig = P.plot_migrations(*seven)
    fig.canvas.draw()                                      # constrained layout places panels
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == 14                               # two panels per workload
    cols = {round(ax.get_position().x0, 3) for ax in shown}
    assert len(cols) == P.STUDY_COLS
    w, h = fig.get_size_inches() * 110                     # pixels as figures.py saves
    assert w <= 1400 and h > w / 2
    titles = [ax.get_title() for ax in shown if ax.get_title()]
    assert sorted(titles) == sorted(WORKLOADS)
    # each workload's two panels are one above the other: pages, then volume / footprint
    for ax in shown:
        if ax.get_title():
            below = [b for b in shown if b.get_ylabel() == "volume / footprint"
                     and abs(b.get_position().x0 - ax.get_position().x0) < 1e-3
                     and b.get_position().y1 < ax.get_position().y0]
            assert below


def test_log_panels_leave_out_zero_counts(seven):
    real, sim = seven
    real = real.copy()
    real.loc[(real["model"] == "alexnet") & (real["pca"] == "on") & (real["factor"] == 1.0),
             ["htod_bytes", "dtoh_bytes"]] = 0
    fig = P.plot_migrations(real, sim)
    pages = lines(fig.axes[0])["real PCA on"]
    assert pages[0] == [1.5] and all(y > 0 for y in pages[1])


def test_the_presets_table_reads_the_stored_study_rows():
    # docs/study-dl-oversubscription.md quotes this table ("The presets of 2026-11-29")
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "benchmarks/study/presets_table.py"
    spec = importlib.util.spec_from_file_location("study_presets_table", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    t = mod.table().set_index(["workload", "factor"])
    assert len(t) == 50 and set(t.index.get_level_values(0)) == {
        "alexnet_off", "alexnet_on", "bert_off", "bert_on", "gpt2_off", "gpt2_on",
        "resnet50_on", "resnet50_off", "resnet101_on", "resnet101_off"}
    # a ResNet was replayed by the first call only: no h200-progress at 30 us
    assert list(t.loc[("resnet50_on", "4")]) == ["77.1", "16.5", "16.7", "-", "20.9"]
    # AlexNet without PCA by both calls: h200 from the second, each h200-progress its own
    assert list(t.loc[("alexnet_off", "4")]) == [">119", "3.42", "3.32", "3.99", "3.46"]
    assert list(t.loc[("gpt2_on", "2")]) == ["5.08", "32.3", "33.7", "47.1", "-"]
