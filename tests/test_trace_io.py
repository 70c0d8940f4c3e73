"""uvmtrace v1 reading, validation and writing: every rule of trace-format.md."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import uvmsim
from uvmsim import TraceFormatError, load_trace, write_trace
from uvmsim.trace.builder import TraceBuilder

MiB = 1 << 20


def small_builder():
    b = TraceBuilder()
    x = b.alloc(4 * MiB, name="x")
    y = b.alloc(1 * MiB, kind="host")
    b.memcpy_htod(b.base(x), 8192)
    b.kernel("k0", reads=b.pages(x, 0, 5), writes=b.pages(x, 600, 610))
    b.prefetch(b.base(x), 1 * MiB, "gpu")
    b.advise(b.base(x), 1 * MiB, "set_read_mostly")
    b.kernel("k1", reads=b.pages(y, 0, 3))
    b.free(x)
    b.sync()
    return b


@pytest.fixture
def tdir(tmp_path):
    return small_builder().write(tmp_path / "t.uvmtrace")


def rewrite(tdir, file, fn):
    t = pq.read_table(tdir / file).to_pandas()
    t = fn(t)
    if isinstance(t, pd.DataFrame):
        t = pa.Table.from_pandas(t, preserve_index=False)
    pq.write_table(t, tdir / file)


def expect(tdir, match, column=None, row=None, file=None, **kw):
    with pytest.raises(TraceFormatError, match=match) as e:
        load_trace(tdir, **kw)
    if column is not None:
        assert e.value.column == column
    if row is not None:
        assert e.value.row == row
    if file is not None:
        assert e.value.file.endswith(file)
    return e.value


def test_round_trip(tdir):
    t = load_trace(tdir)
    assert t.n_kernels == 2 and t.n_accesses == 18
    assert t.manifest["format"] == "uvmtrace" and t.manifest["version"] == 1
    assert t.manifest["page_size"] == 4096
    assert list(t.kernels["name"]) == ["k0", "k1"]
    assert t.peak_blocks == 2
    assert isinstance(TraceFormatError("x"), ValueError)
    same = small_builder().build()
    assert np.array_equal(same.arrays.row_page, t.arrays.row_page)
    assert uvmsim.simulate(same).summary == uvmsim.simulate(t).summary


def test_extra_columns_and_files_are_ignored(tdir):
    rewrite(tdir, "kernels.parquet", lambda d: d.assign(extra=1))
    (tdir / "notes.txt").write_text("hi")
    assert load_trace(tdir).n_kernels == 2


def test_directory_problems(tmp_path, tdir):
    # a missing or unreadable path is an OSError (the trace is not broken, it is not there)
    with pytest.raises(FileNotFoundError, match="no such trace directory") as e:
        load_trace(tmp_path / "nope.uvmtrace")
    assert e.value.filename == str(tmp_path / "nope.uvmtrace")
    f = tmp_path / "f.uvmtrace"
    f.write_text("")
    with pytest.raises(NotADirectoryError, match="is a directory"):
        load_trace(f)
    other = tmp_path / "t2"
    shutil.copytree(tdir, other)
    expect(other, "must end in '.uvmtrace'")
    (tdir / "kernels.parquet").unlink()
    expect(tdir, "missing file", file="kernels.parquet")


@pytest.mark.parametrize("manifest,match", [
    ("{not json", "not valid JSON"),
    ('{"format": "other", "version": 1}', "format is 'other'"),
    ('{"format": "uvmtrace", "version": 2}', "unknown version 2"),
    ('{"format": "uvmtrace", "version": 1, "page_size": 65536}', "page_size 65536"),
    ('[1, 2]', "JSON object"),
])
def test_manifest_problems(tdir, manifest, match):
    (tdir / "manifest.json").write_text(manifest)
    expect(tdir, match, file="manifest.json")


def test_missing_column(tdir):
    rewrite(tdir, "events.parquet", lambda d: d.drop(columns=["arg"]))
    expect(tdir, "missing column", column="arg", file="events.parquet")


def test_type_that_cannot_be_cast(tdir):
    rewrite(tdir, "kernels.parquet", lambda d: d.assign(kernel_id=d["kernel_id"].astype(str)))
    expect(tdir, "cannot be cast", column="kernel_id")


def test_lossy_cast_names_the_row(tdir):
    def neg(d):
        d = d.astype({"base": "int64"})
        d.loc[1, "base"] = -4096
        return d
    rewrite(tdir, "allocations.parquet", neg)
    expect(tdir, "cast losslessly", column="base", row=1)


def test_lossless_cast_from_wider_type_is_accepted(tdir):
    rewrite(tdir, "accesses.parquet", lambda d: d.astype({"kernel_id": "int64",
                                                           "flags": "int32"}))
    assert load_trace(tdir).n_accesses == 18


def test_null_in_non_nullable_column(tdir):
    def f(d):
        d = d.astype({"name": object})
        d.loc[1, "name"] = None
        return d
    rewrite(tdir, "kernels.parquet", f)
    expect(tdir, "null", column="name", row=1)


@pytest.mark.parametrize("mutate,match,column,row", [
    (lambda d: d.assign(alloc_id=[0, 0]), "not unique", "alloc_id", 1),
    (lambda d: d.assign(size=[4 * MiB, 0]), "size must be > 0", "size", 1),
    (lambda d: d.assign(kind=["managed", "gpu"]), "unknown value 'gpu'", "kind", 1),
])
def test_allocation_rules(tdir, mutate, match, column, row):
    rewrite(tdir, "allocations.parquet", mutate)
    expect(tdir, match, column=column, row=row, file="allocations.parquet")


def test_overlapping_live_allocations(tmp_path):
    b = TraceBuilder()
    b.alloc(8192, base=0x10000)
    b.alloc(8192, base=0x11000)
    with pytest.raises(TraceFormatError, match="overlaps live alloc_id 0") as e:
        b.build()
    assert e.value.row == 1 and e.value.column == "alloc_id"


def test_address_reuse_after_free_is_fine():
    b = TraceBuilder()
    a = b.alloc(8192, base=0x10000)
    b.free(a)
    c = b.alloc(8192, base=0x10000)
    b.kernel("k", reads=b.pages(c))
    assert b.build().n_accesses == 2


def _ev(tdir, fn):
    rewrite(tdir, "events.parquet", fn)


def test_seq_gap(tdir):
    _ev(tdir, lambda d: d.assign(seq=[0, 1, 2, 3, 4, 5, 6, 8, 9][:len(d)]))
    expect(tdir, "seq is 8, expected 7", column="seq", row=7)


def test_unknown_op(tdir):
    def f(d):
        d.loc[8, "op"] = "launch"
        return d
    _ev(tdir, f)
    expect(tdir, "unknown value 'launch'", column="op", row=8)


def test_event_rules():
    # each case: a builder mutation and the expected message
    b = TraceBuilder()
    x = b.alloc(MiB)
    b.free(x)
    b.free(x)
    with pytest.raises(TraceFormatError, match="freed while not live") as e:
        b.build()
    assert e.value.row == 2

    b = TraceBuilder()
    x = b.alloc(MiB)
    b._events.insert(0, dict(seq=0, op="free", alloc_id=x))
    for i, ev in enumerate(b._events):
        ev["seq"] = i
    with pytest.raises(TraceFormatError, match="freed while not live"):
        b.build()

    b = TraceBuilder()
    x = b.alloc(MiB)
    b._event("alloc", alloc_id=x)
    with pytest.raises(TraceFormatError, match="allocated twice"):
        b.build()

    b = TraceBuilder()
    b._event("alloc", alloc_id=None)
    with pytest.raises(TraceFormatError, match="needs alloc_id"):
        b.build()

    b = TraceBuilder()
    b._event("alloc", alloc_id=7)
    with pytest.raises(TraceFormatError, match="alloc_id 7 has no row"):
        b.build()


def test_kernel_event_rules():
    b = TraceBuilder()
    b.kernel("k")
    b._event("kernel", kernel_id=0)
    with pytest.raises(TraceFormatError, match="appears in two kernel events"):
        b.build()

    b = TraceBuilder()
    b.kernel("k")
    b._kernels.append(dict(kernel_id=5, name="orphan", duration_ns=1, grid=None, block=None))
    with pytest.raises(TraceFormatError, match="kernel_id 5 appears in no kernel event") as e:
        b.build()
    assert e.value.file == "kernels.parquet"

    b = TraceBuilder()
    b._event("kernel", kernel_id=3)
    with pytest.raises(TraceFormatError, match="kernel_id 3 has no row"):
        b.build()

    b = TraceBuilder()
    b._event("kernel")
    with pytest.raises(TraceFormatError, match="needs kernel_id"):
        b.build()


def test_range_event_rules():
    b = TraceBuilder()
    b._event("memcpy_htod", addr=0)
    with pytest.raises(TraceFormatError, match="needs size"):
        b.build()
    b = TraceBuilder()
    b.prefetch(0, 10, "host")
    with pytest.raises(TraceFormatError, match="'host' is not 'gpu' or 'cpu'"):
        b.build()
    b = TraceBuilder()
    b.advise(0, 10, "set_pinned")
    with pytest.raises(TraceFormatError, match="unknown advice 'set_pinned'"):
        b.build()
    b = TraceBuilder()
    b.prefetch(0, 10)
    b.advise(0, 10, "unset_accessed_by_gpu")
    assert b.build().n_kernels == 0     # out-of-allocation ranges are simply clipped away


def _acc(tdir, fn):
    rewrite(tdir, "accesses.parquet", fn)


@pytest.mark.parametrize("mutate,match,column,row", [
    (lambda d: d.assign(flags=[0] + list(d["flags"][1:])), "flags 0 invalid", "flags", 0),
    (lambda d: d.assign(flags=[8] + list(d["flags"][1:])), "flags 8 invalid", "flags", 0),
    (lambda d: d.assign(count=[1, 0] + list(d["count"][2:])), "count must be >= 1", "count", 1),
    (lambda d: d.assign(order=[1, 0] + list(d["order"][2:])), "not sorted", "order", 1),
    (lambda d: d.assign(page=[d["page"][0]] * 2 + list(d["page"][2:])), "appears twice",
     "page", 1),
    (lambda d: pd.concat([d.iloc[15:], d.iloc[:15]]).reset_index(drop=True),
     "out of kernel event order", "kernel_id", 3),
    (lambda d: d.assign(kernel_id=[9] + list(d["kernel_id"][1:])), "kernel_id 9 has no row",
     "kernel_id", 0),
])
def test_access_rules(tdir, mutate, match, column, row):
    _acc(tdir, mutate)
    expect(tdir, match, column=column, row=row, file="accesses.parquet")


def test_duplicate_page_with_different_order_is_rejected(tdir):
    def f(d):
        d.loc[2, "page"] = d.loc[0, "page"]
        return d
    _acc(tdir, f)
    expect(tdir, "appears twice", row=2)


def test_out_of_range_page_names_kernel_and_address(tdir):
    def f(d):
        d.loc[0, "page"] = 0x1234
        return d
    _acc(tdir, f)
    e = expect(tdir, "kernel_id 0 \\(k0\\) touches address 0x1234000", column="page", row=0)
    assert "drop_out_of_range" in str(e)
    t = load_trace(tdir, drop_out_of_range=True)
    assert t.dropped_rows == 1 and t.n_accesses == 17


def test_access_after_free_is_out_of_range():
    b = TraceBuilder()
    x = b.alloc(MiB)
    p = b.pages(x)
    b.free(x)
    b.kernel("late", reads=p[:2])
    with pytest.raises(TraceFormatError, match="late"):
        b.build()
    t = b.build(drop_out_of_range=True)
    assert t.dropped_rows == 2 and t.n_accesses == 0


def test_writer_refuses_bad_tables_and_leaves_nothing(tmp_path):
    b = small_builder()
    tables = b.tables()
    tables["accesses"].loc[0, "flags"] = 0
    out = tmp_path / "bad.uvmtrace"
    with pytest.raises(TraceFormatError, match="flags"):
        write_trace(out, **tables)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_writer_needs_overwrite_and_suffix(tmp_path):
    b = small_builder()
    p = b.write(tmp_path / "a.uvmtrace")
    with pytest.raises(FileExistsError):
        b.write(p)
    b.write(p, overwrite=True)
    with pytest.raises(ValueError, match="must end in"):
        b.write(tmp_path / "a.trace")


def test_manifest_keeps_source(tmp_path):
    p = small_builder().write(tmp_path / "s.uvmtrace", source={"gpu": "H100", "n": 3})
    m = json.loads((p / "manifest.json").read_text())
    assert m["source"] == {"gpu": "H100", "n": 3}
    assert load_trace(p).info()["source"]["gpu"] == "H100"
