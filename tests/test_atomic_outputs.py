"""Every output is written to a temporary file and renamed into place: a full disk (ENOSPC,
injected by making the writer fail half way) leaves the previous file whole, no partial
file and no temporary behind, and the error names the output."""
from __future__ import annotations

import errno

import pandas as pd
import pytest
from matplotlib.figure import Figure

from uvmsim import cli
from uvmsim._atomic import write_atomic
from uvmsim.trace.builder import TraceBuilder

MiB = 1 << 20


def _full_disk(real):
    """A writer that writes part of its output, then fails as a full disk does."""
    def write(self, path, *a, **kw):
        with open(path, "wb") as f:
            f.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")
    return write


@pytest.fixture
def trace(tmp_path):
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    b.kernel("k", reads=b.pages(x, 0, 600))
    return b.write(tmp_path / "t.uvmtrace")


def _sweep(trace, *extra):
    return cli.main(["sweep", str(trace), "--oversub", "1.0,2.0", "--prefetch", "none",
                     "--evict", "lru2m", "--executor", "serial", "--no-progress", *extra])


def _left(folder):
    return sorted(p.name for p in folder.iterdir())


def test_write_atomic_keeps_the_old_file_and_names_the_new_one(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")

    def half(tmp):
        tmp.write_text("{\"a\": ")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as e:
        write_atomic(out, half)
    assert e.value.errno == errno.ENOSPC and str(out) in str(e.value)
    assert out.read_text() == "old" and _left(tmp_path) == ["r.json"]
    write_atomic(out, lambda tmp: tmp.write_text("new"))
    assert out.read_text() == "new" and _left(tmp_path) == ["r.json"]
    # the mode a plain open() gives (mkstemp's temporary is the owner's only)
    plain = tmp_path / "plain"
    plain.write_text("x")
    assert out.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777


@pytest.mark.parametrize("suffix,method", [(".csv", "to_csv"), (".parquet", "to_parquet")])
def test_sweep_table_on_a_full_disk(tmp_path, trace, monkeypatch, capsys, suffix, method):
    out = tmp_path / "res" / f"out{suffix}"
    out.parent.mkdir()
    out.write_bytes(b"previous")
    monkeypatch.setattr(pd.DataFrame, method, _full_disk(getattr(pd.DataFrame, method)))
    assert _sweep(trace, "-o", str(out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(out) in err and "No space left" in err
    assert out.read_bytes() == b"previous"
    assert _left(out.parent) == [out.name]
    monkeypatch.undo()
    assert _sweep(trace, "-o", str(out)) == 0
    got = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert len(got) == 2 and _left(out.parent) == [out.name]


def test_dataset_cell_on_a_full_disk_leaves_no_partial_cell(tmp_path, trace, monkeypatch,
                                                            capsys):
    ds = tmp_path / "ds"
    monkeypatch.setattr(pd.DataFrame, "to_parquet", _full_disk(pd.DataFrame.to_parquet))
    assert _sweep(trace, "--dataset", str(ds)) == 2
    err = capsys.readouterr().err
    assert str(ds) in err and "cell-" in err and "No space left" in err
    assert _left(ds) == []  # no cell, no .cell-*.tmp
    monkeypatch.undo()
    assert _sweep(trace, "--dataset", str(ds)) == 0
    assert len(_left(ds)) == 2 and all(n.startswith("cell-") for n in _left(ds))


def test_plot_on_a_full_disk_keeps_the_previous_plot(tmp_path, trace, monkeypatch, capsys):
    png = tmp_path / "p.png"
    png.write_bytes(b"previous")
    monkeypatch.setattr(Figure, "savefig", _full_disk(Figure.savefig))
    assert _sweep(trace, "--plot", str(png)) == 2
    assert str(png) in capsys.readouterr().err
    assert png.read_bytes() == b"previous" and _left(tmp_path) == ["p.png", "t.uvmtrace"]
    monkeypatch.undo()
    assert _sweep(trace, "--plot", str(png)) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_plot_path_without_suffix_gets_the_default_format_as_savefig_gave(tmp_path):
    from uvmsim.plot import _save
    fig = Figure()
    fig.add_subplot().plot([0, 1])
    _save(fig, tmp_path / "bare")
    assert _left(tmp_path) == ["bare.png"]
    assert (tmp_path / "bare.png").read_bytes()[:4] == b"\x89PNG"
