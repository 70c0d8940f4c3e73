"""Hypothesis strategies for small uvmtrace programs (shared by issue-5 tests)."""
from __future__ import annotations

from hypothesis import strategies as st

from uvmsim.config import Translation
from uvmsim.trace.builder import TraceBuilder

PAGE = 4096
_REGION = 8 << 20   # each allocation gets its own 8 MiB region: no overlaps


@st.composite
def programs(draw, max_allocs: int = 3, max_ops: int = 8, v11: bool = False,
             packed: bool = False):
    """A TraceBuilder holding allocations (some host, some not 2 MiB aligned), kernels with
    read/write/atomic rows, copies, memsets, prefetches to gpu/cpu, advises and frees. With
    v11, also kernels in 1..5 time slices (rows with random slice masks) and host_access
    events. With `packed`, allocations follow each other a few pages apart, so small ones
    share 2 MiB windows (as the CUDA driver's sub-allocation places them)."""
    b = TraceBuilder()
    allocs = []
    end = 0x7F0000000000
    for i in range(draw(st.integers(1, max_allocs))):
        npages = draw(st.integers(1, 1100))
        off = draw(st.integers(0, 520))
        kind = draw(st.sampled_from(["managed", "managed", "managed", "device", "host"]))
        if packed:
            npages = draw(st.integers(1, 300))
            base = end + draw(st.integers(0, 3)) * PAGE
            end = base + npages * PAGE
        else:
            base = 0x7F0000000000 + i * _REGION + off * PAGE
        allocs.append((b.alloc(npages * PAGE, base=base, kind=kind), npages))
    live = list(range(len(allocs)))
    for _ in range(draw(st.integers(1, max_ops))):
        if not live:
            break
        op = draw(st.sampled_from(["kernel", "kernel", "kernel", "stream", "htod", "memset",
                                   "pf_gpu", "pf_cpu", "free", "dtoh", "advise"] +
                                  (["host", "host", "kernel", "stream"] if v11 else [])))
        ai = draw(st.sampled_from(live))
        a, n = allocs[ai]
        if op in ("kernel", "stream"):
            rows: dict[int, int] = {}
            if op == "stream":
                lo = draw(st.integers(0, n - 1))
                hi = draw(st.integers(lo, min(n, lo + 700)))
                fl = draw(st.sampled_from([1, 2, 3, 4]))
                for p in b.pages(a, lo, hi):
                    rows.setdefault(int(p), fl)
            for aj, p, fl in draw(st.lists(st.tuples(st.sampled_from(live),
                                                     st.integers(0, 1099),
                                                     st.sampled_from([1, 2, 3, 4, 5])),
                                           max_size=40)):
                aa, nn = allocs[aj]
                rows.setdefault(int(b.pages(aa, p % nn, p % nn + 1)[0]), fl)
            dur = draw(st.sampled_from([None, 0, 1000, 12345, 200_000]))
            n_slices = draw(st.integers(1, 5)) if v11 else 1
            if n_slices > 1:
                masks = draw(st.lists(st.integers(1, (1 << n_slices) - 1),
                                      min_size=len(rows), max_size=len(rows)))
                b.kernel(rows=list(rows.items()), duration_ns=dur, slices=masks,
                         n_slices=n_slices)
            else:
                b.kernel(rows=list(rows.items()), duration_ns=dur)
        elif op == "free":
            b.free(a)
            live.remove(ai)
        else:
            lo = draw(st.integers(0, n - 1))
            cnt = draw(st.integers(1, n - lo))
            addr, size = b.base(a) + lo * PAGE, cnt * PAGE
            if op == "htod":
                b.memcpy_htod(addr, size)
            elif op == "dtoh":
                b.memcpy_dtoh(addr, size)
            elif op == "memset":
                b.memset(addr, size)
            elif op == "pf_gpu":
                b.prefetch(addr, size, "gpu")
            elif op == "pf_cpu":
                b.prefetch(addr, size, "cpu")
            elif op == "host":
                b.host_access(addr, size, draw(st.sampled_from([None, "read", "write"])))
            else:
                b.advise(addr, size, "set_read_mostly")
    return b


translations = st.one_of(st.none(), st.builds(
    lambda ways, sets, ps, walkers, walk: Translation(tlb_entries=ways * sets, ways=ways,
                                                      page_size=ps, walkers=walkers,
                                                      walk_ns=walk),
    st.integers(1, 4), st.integers(1, 8), st.sampled_from([4096, 65536, 2 << 20]),
    st.integers(1, 4), st.sampled_from([1.0, 67.52, 250.0, 5000.0])))
