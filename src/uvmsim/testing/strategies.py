"""Hypothesis strategies for small uvmtrace programs, replay settings and translations.

`programs()` draws a uvmsim.testing.Program: allocations (some host, some not 2 MiB
aligned, some not whole pages) and events that re-touch them: kernels with read, write and
atomic rows (counts, durations, v1.1 time slices), streams over page ranges, copies,
memsets, prefetches to the GPU and the CPU, advises, host accesses (v1.1), syncs and frees.
`program.build()` is its Trace; printed, it is the table of its events.
"""
from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from ..config import Translation
from .program import Alloc, Free, Kernel, Program, Range, Sync

#: The events `programs` draws, a name repeated to weigh it ("stream": a kernel over a
#: range of pages; "pf_gpu"/"pf_cpu": prefetches; "host_access" only with v11).
OPS = ("kernel", "kernel", "kernel", "stream", "memcpy_htod", "memset", "pf_gpu", "pf_cpu",
       "free", "memcpy_dtoh", "memcpy_dtod", "advise", "sync")
OPS_V11 = ("host_access", "host_access", "kernel", "stream")
#: Events for checking a policy: mostly kernels that fault and re-touch, every way pages
#: come and go besides.
POLICY_OPS = ("kernel", "kernel", "kernel", "kernel", "stream", "memcpy_htod", "memset",
              "pf_gpu", "pf_cpu", "host_access", "free", "advise")


@st.composite
def allocs(draw, max_pages: int = 1100) -> Alloc:
    """One allocation: 1..max_pages pages (often a few whole windows' worth), starting
    0..520 pages into its 2 MiB window."""
    sizes = [n for n in (512, 700, 1100) if n <= max_pages]
    npages = draw(st.one_of(st.integers(1, max_pages), *([st.sampled_from(sizes)] if sizes
                                                         else [])))
    tail = draw(st.sampled_from([0, 0, 0, 1024, 3072])) if npages > 1 else 0
    return Alloc(npages, draw(st.integers(0, 520)), tail,
                 draw(st.sampled_from(["managed", "managed", "managed", "device", "pool",
                                       "host"])))


@st.composite
def programs(draw, max_allocs: int = 3, max_ops: int = 8, v11: bool = False,
             max_pages: int = 1100, min_allocs: int = 1, min_ops: int = 1,
             ops: tuple[str, ...] | None = None,
             packed: bool = False) -> Program:
    """A Program of min_allocs..max_allocs allocations and min_ops..max_ops events on live
    allocations, drawn from `ops` (default OPS, with v11 also OPS_V11). With v11, kernels
    run in 1..5 time slices (rows with random slice masks) and host_access events may come.
    With `packed`, allocations of 1..300 pages follow each other 0..3 pages apart, so small
    ones share 2 MiB windows (Program.packed; the shared_windows option)."""
    names = list(ops) if ops is not None else list(OPS) + (list(OPS_V11) if v11 else [])
    if not v11:
        names = [n for n in names if n != "host_access"]
    al = tuple(draw(allocs(min(max_pages, 300) if packed else max_pages))
               for _ in range(draw(st.integers(min_allocs, max_allocs))))
    if packed:
        al = tuple(dataclasses.replace(a, offset=draw(st.integers(0, 3))) for a in al)
    live = list(range(len(al)))
    ops = []
    for _ in range(draw(st.integers(min_ops, max_ops))):
        if not live:
            break
        op = draw(st.sampled_from(names))
        a = draw(st.sampled_from(live))
        n = al[a].npages
        if op in ("kernel", "stream"):
            rows: dict[tuple[int, int], tuple[int, int]] = {}
            if op == "stream":
                lo = draw(st.integers(0, n - 1))
                hi = draw(st.integers(lo, min(n, lo + 700)))
                fl = draw(st.sampled_from([1, 2, 3, 4]))
                for p in range(lo, hi):
                    rows.setdefault((a, p), (fl, 1))
            for aj, p, fl, c in draw(st.lists(st.tuples(
                    st.sampled_from(live), st.integers(0, 1099), st.sampled_from([1, 2, 3, 4, 5]),
                    st.sampled_from([1, 1, 1, 2, 7])), max_size=40)):
                rows.setdefault((aj, p % al[aj].npages), (fl, c))
            dur = draw(st.sampled_from([1000, 1000, None, 0, 12345, 200_000]))
            n_slices = draw(st.integers(1, 5)) if v11 else 1
            masks = (draw(st.lists(st.integers(1, (1 << n_slices) - 1), min_size=len(rows),
                                   max_size=len(rows))) if n_slices > 1 else [1] * len(rows))
            ops.append(Kernel(tuple((aa, p, fl, c, m) for ((aa, p), (fl, c)), m
                                    in zip(rows.items(), masks)), dur, n_slices))
        elif op == "free":
            ops.append(Free(a))
            live.remove(a)
        elif op == "sync":
            ops.append(Sync())
        else:
            lo = draw(st.integers(0, n - 1))
            cnt = draw(st.integers(1, n - lo))
            if op in ("pf_gpu", "pf_cpu"):
                ops.append(Range("prefetch", a, lo, cnt, "gpu" if op == "pf_gpu" else "cpu"))
            elif op == "host_access":
                ops.append(Range(op, a, lo, cnt, draw(st.sampled_from([None, "read",
                                                                        "write"]))))
            elif op == "advise":
                ops.append(Range(op, a, lo, cnt, "set_read_mostly"))
            else:
                ops.append(Range(op, a, lo, cnt))
    return Program(al, tuple(ops), packed=packed)


#: A uvmsim.config.Translation (a small TLB, 1..4 walkers) or None.
translations = st.one_of(st.none(), st.builds(
    lambda ways, sets, ps, walkers, walk: Translation(tlb_entries=ways * sets, ways=ways,
                                                      page_size=ps, walkers=walkers,
                                                      walk_ns=walk),
    st.integers(1, 4), st.integers(1, 8), st.sampled_from([4096, 65536, 2 << 20]),
    st.integers(1, 4), st.sampled_from([1.0, 67.52, 250.0, 5000.0])))

#: Replay options a policy check varies (host accesses always apply): the v1.1 time
#: slices (ticks restart per pass), memory counted in pages (small_blocks: several victims
#: per chunk needed) and read-mostly hints (read duplicates).
replay_options = st.sampled_from([{}, {}, {"slices": True}, {"small_blocks": True},
                                  {"advise": True}])


@st.composite
def replays(draw, capacities=(1, 4), batch_sizes=(1, 3, 256)) -> dict:
    """simulate() keyword arguments a policy check varies: a capacity in chunks, a fault
    batch size, replay options (host accesses always apply) and a seed."""
    return dict(capacity_chunks=draw(st.integers(*capacities)),
                fault_batch_size=draw(st.sampled_from(list(batch_sizes))), host_access=True,
                seed=draw(st.integers(0, 3)), **draw(replay_options))
