"""Hypothesis strategies for small random programs, and their conversion to traces."""
from __future__ import annotations

from hypothesis import strategies as st

from uvmsim.trace.builder import TraceBuilder

PAGE = 4096
MiB = 1 << 20

alloc_spec = st.tuples(
    st.integers(1, 5 * MiB // PAGE),                      # size in pages
    st.integers(0, 3),                                    # sub-page tail bytes / 1024
    st.sampled_from([0, 0, 0, 24 * 1024, 1 * MiB + 8192]),  # start offset in its window
    st.sampled_from(["managed", "managed", "device", "pool", "host"]),
)

row = st.tuples(st.integers(0, 2), st.floats(0, 1, allow_nan=False), st.sampled_from([1, 2, 3, 4, 5]))

op = st.one_of(
    st.tuples(st.just("kernel"), st.lists(row, min_size=0, max_size=60)),
    st.tuples(st.just("memcpy_htod"), st.integers(0, 2), st.floats(0, 1), st.floats(0, 0.5)),
    st.tuples(st.just("memset"), st.integers(0, 2), st.floats(0, 1), st.floats(0, 0.5)),
    st.tuples(st.just("prefetch_gpu"), st.integers(0, 2), st.floats(0, 1), st.floats(0, 1)),
    st.tuples(st.just("prefetch_cpu"), st.integers(0, 2), st.floats(0, 1), st.floats(0, 1)),
    st.tuples(st.just("free"), st.integers(0, 2)),
    st.tuples(st.just("sync"),),
)

programs = st.tuples(st.lists(alloc_spec, min_size=1, max_size=3),
                     st.lists(op, min_size=1, max_size=12))


def build(program, upto: int | None = None) -> TraceBuilder:
    """A TraceBuilder for the program (its first `upto` ops)."""
    allocs, ops = program
    b = TraceBuilder()
    ids = []
    for i, (npages, tail_k, offset, kind) in enumerate(allocs):
        base = 0x7F0000000000 + i * (16 * MiB) + offset
        ids.append(b.alloc(npages * PAGE - (tail_k * 1024 if npages > 1 else 0), base=base,
                           kind=kind))
    live = set(range(len(ids)))
    for o in ops[:upto]:
        kind = o[0]
        if kind == "kernel":
            rows, seen = [], set()
            for a, frac, fl in o[1]:
                if a >= len(ids) or a not in live:
                    continue
                pages = b.pages(ids[a])
                p = int(pages[min(int(frac * len(pages)), len(pages) - 1)])
                if p not in seen:
                    seen.add(p)
                    rows.append((p, fl))
            b.kernel("k", rows=rows)
        elif kind == "free":
            a = o[1]
            if a < len(ids) and a in live:
                b.free(ids[a])
                live.discard(a)
        elif kind == "sync":
            b.sync()
        else:
            a, start, length = o[1], o[2], o[3]
            if a >= len(ids):
                continue
            size = b._allocs[ids[a]]["size"]
            addr = b.base(ids[a]) + int(start * size)
            n = max(1, int(length * size))
            if kind == "memcpy_htod":
                b.memcpy_htod(addr, n)
            elif kind == "memset":
                b.memset(addr, n)
            elif kind == "prefetch_gpu":
                b.prefetch(addr, n, "gpu")
            else:
                b.prefetch(addr, n, "cpu")
    return b


def n_ops(program) -> int:
    return len(program[1])
