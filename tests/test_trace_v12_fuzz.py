"""Robustness of the v1.2 stream tables: random corruptions of valid tables must be rejected
with a TraceFormatError exactly when an independent, plainly written checker of
docs/trace-format.md ("v1.2") finds a broken rule, and what is accepted must come back as
arrays that say the same as the tables. Damaged stream files, read in a child process, must
give a TraceFormatError or a valid trace, never a crash or a hang.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import uvmsim
from uvmsim import TraceFormatError
from uvmsim.trace import synth
from uvmsim.trace.builder import TraceBuilder

MiB = 1 << 20
U32, U64 = (1 << 32) - 1, (1 << 64) - 1


def _bases():
    b = TraceBuilder()
    x = b.alloc(4 * MiB, name="x")
    y = b.alloc(MiB, name="y")
    P = [int(p) for p in b.pages(x, 0, 10)]
    Q = [int(p) for p in b.pages(y, 0, 3)]
    touches = [(blk, p, 100 * i + 7 * blk, 1 + (i + blk) % 3)
               for blk in range(5) for i, p in enumerate(P[blk:blk + 4] + Q[blk % 3:blk % 3 + 1])]
    b.kernel("k0", rows=[(p, 3) for p in P[:8] + Q], touches=touches,
             launch=dict(threads_per_block=64, sm_count=2, max_blocks_per_sm=3))
    b.kernel("k1", reads=P[:3])
    b.free(y)
    b.kernel("k2", writes=P[4:9], stream_blocks=[(1, 0, 40), (3, 5, 9)],
             stream_rows=[(1, P[4], 0, 2), (1, P[6], 30, 2), (1, P[7], 40, 2),
                          (3, P[5], 0, 2), (3, P[8], 4, 2)], stream_tick_ns=8,
             launch=dict(n_blocks=4))
    g = synth.tables("gemm", m=256, n=256, k=256, tile=64, sm_count=2, max_blocks_per_sm=2)
    return {"builder": b.tables(), "gemm": g}


BASES = _bases()


# --------------------------------------------------------------------------- the checker
def _int(v, lo, hi):
    return v is not None and not (isinstance(v, float) and np.isnan(v)) and \
        float(v) == int(v) and lo <= int(v) <= hi


def rules_broken(t: dict) -> str | None:
    """The first v1.2 rule the tables break (None: none), written as plainly as possible."""
    k, acc, ev = t["kernels"], t["accesses"], t["events"]
    rank = {int(x): i for i, x in enumerate(ev.loc[ev.op == "kernel", "kernel_id"])}
    kcols = {int(r["kernel_id"]): r for _, r in k.iterrows()}
    unit, nblk, tick = {}, {}, {}
    for kid, r in kcols.items():
        for c in ("n_blocks", "threads_per_block", "cluster_blocks", "sm_count"):
            v = r.get(c)
            if v is not None and not pd.isna(v) and not _int(v, 1, U64 if c == "n_blocks" else U32):
                return f"{c} of kernel {kid}"
        u = r.get("stream_unit")
        if u is None or pd.isna(u):
            continue
        if not _int(u, 12, 30):
            return f"stream_unit of kernel {kid}"
        if not _int(r.get("stream_tick_ns"), 1, 1 << 31):
            return f"stream_tick_ns of kernel {kid}"
        if not _int(r.get("n_blocks"), 1, 1 << 32):
            return f"n_blocks of kernel {kid} (stream)"
        unit[kid], nblk[kid], tick[kid] = int(u), int(r["n_blocks"]), int(r["stream_tick_ns"])
    B, A = t["blocks"], t["block_accesses"]
    for df, cols in ((B, {"kernel_id": U32, "block": U32, "t_start": U32, "t_end": U32}),
                     (A, {"kernel_id": U32, "block": U32, "page": U64, "t": U32, "flags": 255})):
        for c, hi in cols.items():
            if c not in df:
                return f"missing column {c}"
            for v in df[c]:
                if not _int(v, 0, hi):
                    return f"value {v!r} in {c}"
    pages = {}  # kernel -> {page: flags}
    for kid_, p_, f_ in zip(acc.kernel_id, acc.page, acc["flags"]):
        pages.setdefault(int(kid_), {})[int(p_)] = int(f_)
    blocks = []  # (rank, kid, block, t0, t1) in file order
    for kid, blk, t0, t1 in zip(B.kernel_id, B.block, B.t_start, B.t_end):
        kid = int(kid)
        if kid not in rank or kid not in unit:
            return "blocks: kernel unknown or without a stream"
        if blocks and (rank[kid] < blocks[-1][0] or
                       (rank[kid] == blocks[-1][0] and int(blk) <= blocks[-1][2])):
            return "blocks: order"
        if int(blk) >= nblk[kid] or int(t0) > int(t1):
            return "blocks: range"
        blocks.append((rank[kid], kid, int(blk), int(t0), int(t1)))
    groups = []  # [kid, block, [(page, t, flags)]] in file order
    for kid, blk, p, tt, f in zip(A.kernel_id, A.block, A.page, A.t, A["flags"]):
        kid = int(kid)
        if kid not in rank or kid not in unit:
            return "rows: kernel unknown or without a stream"
        if groups and rank[kid] < rank[groups[-1][0]]:
            return "rows: kernel order"
        if not groups or groups[-1][0] != kid or groups[-1][1] != int(blk):
            groups.append([kid, int(blk), []])
        groups[-1][2].append((int(p), int(tt), int(f)))
    if [(g[0], g[1]) for g in groups] != [(b[1], b[2]) for b in blocks]:
        return "rows not grouped as the blocks"
    for (kid, blk, rows), b in zip(groups, blocks):
        sh = unit[kid] - 12
        if len({p >> sh for p, _, _ in rows}) != len(rows):
            return "two rows in one unit"
        if [(tt, p) for p, tt, _ in rows] != sorted({(tt, p) for p, tt, _ in rows}):
            return "rows not sorted"
        for p, tt, f in rows:
            if not 1 <= f <= 7 or tt > b[4] - b[3]:
                return "row flags or t"
            if p not in pages.get(kid, {}):
                return "row page not accessed"
            if unit[kid] == 12 and f & ~pages[kid][p]:
                return "row flags not within"
    for kid, u in unit.items():
        covered = {p >> (u - 12) for g in groups if g[0] == kid for p, _, _ in g[2]}
        if any(p >> (u - 12) not in covered for p in pages.get(kid, {})):
            return "coverage"
    return None


def _same(trace, t: dict) -> None:
    """The arrays say what the tables say."""
    s, A = trace.streams, trace.arrays
    k, ev = t["kernels"], t["events"]
    order = [int(x) for x in ev.loc[ev.op == "kernel", "kernel_id"]]
    kk = k.set_index(k["kernel_id"].astype(int))
    for r, kid in enumerate(order):
        u = kk.loc[kid].get("stream_unit") if "stream_unit" in kk else None
        assert int(s.k_unit[r]) == (0 if u is None or pd.isna(u) else int(u))
    blk = t["blocks"]
    assert s.blk_id.tolist() == [int(x) for x in blk["block"]]
    rows = t["block_accesses"]
    dense = A.b_first_vpage[A.page_block[s.row_page]] + A.page_pos[s.row_page] - \
        A.b_lo[A.page_block[s.row_page]]
    assert dense.tolist() == [int(x) for x in rows["page"]]
    tick = np.repeat(np.repeat(s.k_tick_ns, np.diff(s.k_block_start)), np.diff(s.blk_row_start))
    assert (s.row_t // np.maximum(tick, 1)).tolist() == [int(x) for x in rows["t"]]


# --------------------------------------------------------------------------- corruptions
INTERESTING = [0, 1, 2, 3, 7, 8, 11, 12, 13, 16, 30, 31, 40, 255, 256, U32, U32 + 1, -1, None,
               1 << 31, (1 << 31) + 1, 1 << 32, 0.5]


def _mutate(t: dict, draw) -> None:
    what = draw(st.sampled_from(["cell", "cell", "cell", "drop", "dup", "swap", "kcell",
                                 "page_shift", "drop_col"]))
    name = draw(st.sampled_from(["blocks", "block_accesses"]))
    df = t[name].copy().astype(object)
    n = len(df)
    if what == "kcell":
        k = t["kernels"].copy().astype(object)
        col = draw(st.sampled_from(["stream_unit", "stream_tick_ns", "n_blocks",
                                    "threads_per_block", "sm_count"]))
        if col in k:
            k.loc[draw(st.integers(0, len(k) - 1)), col] = draw(st.sampled_from(INTERESTING))
        t["kernels"] = k
        return
    if n == 0:
        return
    i = draw(st.integers(0, n - 1))
    if what == "cell":
        col = draw(st.sampled_from(list(df.columns)))
        v = draw(st.one_of(st.sampled_from(INTERESTING),
                           st.integers(-2, 2).map(lambda d: df.at[i, col] + d
                                                  if df.at[i, col] is not None else d)))
        df.at[i, col] = v
    elif what == "drop":
        df = df.drop(index=i)
    elif what == "dup":
        df = pd.concat([df.iloc[:i + 1], df.iloc[i:]])
    elif what == "swap":
        j = draw(st.integers(0, n - 1))
        o = list(range(n))
        o[i], o[j] = o[j], o[i]
        df = df.iloc[o]
    elif what == "page_shift" and name == "block_accesses":
        df.at[i, "page"] = int(df.at[i, "page"]) + draw(st.sampled_from([1, -1, 16, 512, 1 << 20]))
    elif what == "drop_col":
        df = df.drop(columns=[draw(st.sampled_from(list(df.columns)))])
    t[name] = df.reset_index(drop=True)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
@given(base=st.sampled_from(sorted(BASES)), data=st.data())
def test_corrupted_stream_tables(base, data):
    t = {k: v.copy() for k, v in BASES[base].items()}
    for _ in range(data.draw(st.integers(1, 2))):
        _mutate(t, data.draw)
    want = rules_broken(t)
    try:
        trace = uvmsim.trace_from_tables(**t)
    except TraceFormatError as e:
        assert want is not None, f"rejected, but the checker finds every rule kept: {e}"
        assert e.file is not None
        return
    assert want is None, f"accepted, but the checker says: {want}"
    _same(trace, {k: v.reset_index(drop=True) for k, v in t.items()})


def test_bases_are_valid_and_checked():
    for t in BASES.values():
        assert rules_broken(t) is None
        _same(uvmsim.trace_from_tables(**t), t)


# --------------------------------------------------------------------------- damaged files
CHILD = textwrap.dedent('''
    import json, sys
    from uvmsim import TraceFormatError, load_trace
    for path in sys.argv[1:]:
        try:
            t = load_trace(path, streams=True)
            out = "ok %d" % (t.streams.n_rows if t.streams is not None else -1)
        except TraceFormatError as e:
            out = "rejected " + (e.file or "")
        print(path, out, flush=True)
''')


def test_damaged_stream_files_are_refused_not_fatal(tmp_path):
    src = uvmsim.write_trace(tmp_path / "base.uvmtrace", **BASES["gemm"])
    rng = np.random.default_rng(5)
    paths = []
    for i in range(24):
        d = tmp_path / f"d{i}.uvmtrace"
        import shutil
        shutil.copytree(src, d)
        f = d / ("block_accesses.parquet" if i % 2 else "blocks.parquet")
        data = bytearray(f.read_bytes())
        kind = i % 4
        if kind == 0:
            data = data[:int(rng.integers(0, len(data)))]
        elif kind in (1, 2):  # flip bytes in the data pages
            for _ in range(1 + int(rng.integers(0, 8))):
                data[int(rng.integers(4, max(5, len(data) - 8)))] ^= int(rng.integers(1, 256))
        else:  # damage the footer
            j = len(data) - 8 - int(rng.integers(1, 64))
            data[j] ^= 0xFF
        f.write_bytes(bytes(data))
        paths.append(str(d))
    r = subprocess.run([sys.executable, "-c", CHILD, *paths], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"the reader died: {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
    lines = r.stdout.splitlines()
    assert len(lines) == len(paths)
    outcomes = [ln.split()[1] for ln in lines]
    assert set(outcomes) <= {"ok", "rejected"}
    assert outcomes.count("rejected") >= len(paths) // 2
    for ln in lines:
        if " rejected " in ln:
            assert ln.split()[2].endswith(("blocks.parquet", "block_accesses.parquet")), ln
    print(json.dumps(outcomes))
