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

# v1.1: kernels whose rows carry a slice mask (n_slices 1..4), and host_access events
row11 = st.tuples(st.integers(0, 2), st.floats(0, 1, allow_nan=False),
                  st.sampled_from([1, 2, 3, 4, 5]), st.integers(1, 15))
op11 = st.one_of(
    op,
    st.tuples(st.just("kernel11"), st.lists(row11, min_size=0, max_size=60),
              st.integers(1, 4)),
    st.tuples(st.just("host_access"), st.integers(0, 2), st.floats(0, 1), st.floats(0, 0.5),
              st.sampled_from([None, "read", "write"])),
)
programs_v11 = st.tuples(st.lists(alloc_spec, min_size=1, max_size=3),
                         st.lists(op11, min_size=1, max_size=12))


def build(program, upto: int | None = None, v11: bool = True) -> TraceBuilder:
    """A TraceBuilder for the program (its first `upto` ops). With v11=False the program's
    v1 content: host_access events dropped, every kernel one slice."""
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
        if kind in ("kernel", "kernel11"):
            rows, masks, seen = [], [], set()
            n_slices = o[2] if kind == "kernel11" else 1
            for a, frac, fl, *mask in o[1]:
                if a >= len(ids) or a not in live:
                    continue
                pages = b.pages(ids[a])
                p = int(pages[min(int(frac * len(pages)), len(pages) - 1)])
                if p not in seen:
                    seen.add(p)
                    rows.append((p, fl))
                    # keep only bits below n_slices; never an empty mask
                    masks.append((mask[0] if mask else 1) & ((1 << n_slices) - 1) or 1)
            if kind == "kernel11" and v11:
                b.kernel("k", rows=rows, slices=masks, n_slices=n_slices)
            else:
                b.kernel("k", rows=rows)
        elif kind == "free":
            a = o[1]
            if a < len(ids) and a in live:
                b.free(ids[a])
                live.discard(a)
        elif kind == "sync":
            b.sync()
        elif kind == "host_access":
            a, start, length, arg = o[1:]
            if a < len(ids) and v11:
                size = b._allocs[ids[a]]["size"]
                b.host_access(b.base(ids[a]) + int(start * size), max(1, int(length * size)),
                              arg)
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
