"""An independent, deliberately plain reading of docs/trace-format.md: is this trace valid?

The fuzzer asks it about every case whose tables pyarrow can decode, so a rule the reader
forgets (or enforces wrongly) shows up as a disagreement. Row by row in Python: slow, but the
fuzz traces are small. It shares nothing with uvmsim.trace.io except the vocabularies.
"""
from __future__ import annotations

import pyarrow as pa

from uvmsim.trace.format import (ADVISE_ARGS, HOST_ACCESS_ARGS, KINDS, MAX_SLICES, OPS,
                                 OPTIONAL, PREFETCH_ARGS, SCHEMAS)

LIMIT = 1 << 62
FILES = {"allocations": "allocations.parquet", "events": "events.parquet",
         "kernels": "kernels.parquet", "accesses": "accesses.parquet"}
RANGE = {"memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memset", "prefetch", "advise",
         "host_access"}


class Invalid(Exception):
    pass


def _int_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_unsigned_integer(t):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _column(table: pa.Table, name: str, target: pa.DataType, nullable: bool) -> list:
    col = table.column(name)
    t = col.type
    if pa.types.is_dictionary(t):
        t = t.value_type
    vals = col.to_pylist()
    if not nullable and any(v is None for v in vals):
        raise Invalid(f"null in {name}")
    if all(v is None for v in vals):
        return vals
    if pa.types.is_string(target):
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise Invalid(f"{name} is not a string column")
        return vals
    lo, hi = _int_range(target)
    out = []
    for v in vals:
        if v is None:
            out.append(None)
            continue
        if pa.types.is_integer(t):
            iv = v
        elif pa.types.is_floating(t):
            if v != v or v in (float("inf"), float("-inf")) or not float(v).is_integer():
                raise Invalid(f"{name}: {v} is not an integer")
            iv = int(v)
        else:
            raise Invalid(f"{name} has type {t}")
        if not lo <= iv <= hi:
            raise Invalid(f"{name}: {iv} out of range for {target}")
        out.append(iv)
    return out


def _rows(table: pa.Table, key: str) -> tuple[list[dict], set[str]]:
    names = table.column_names
    if len(set(names)) != len(names):
        raise Invalid("duplicate column")
    spec = SCHEMAS[FILES[key]]
    opt = [c for c in OPTIONAL[FILES[key]] if c[0] in names]
    cols = {}
    for n, t, nl in spec + opt:
        if n not in names:
            raise Invalid(f"missing {n}")
        cols[n] = _column(table, n, t, nl)
    n = table.num_rows
    return [{k: v[i] for k, v in cols.items()} for i in range(n)], {c[0] for c in opt}


def check(tables: dict[str, pa.Table], drop_out_of_range: bool = False) -> int:
    """Raise Invalid if the trace breaks the format; else return the rows a reader drops
    (pages outside every live allocation, when dropping is asked for)."""
    allocs, _ = _rows(tables["allocations"], "allocations")
    events, _ = _rows(tables["events"], "events")
    kernels, kopt = _rows(tables["kernels"], "kernels")
    acc, xopt = _rows(tables["accesses"], "accesses")

    amap = {}
    for a in allocs:
        if a["alloc_id"] in amap:
            raise Invalid("duplicate alloc_id")
        if a["size"] == 0 or a["base"] >= LIMIT or a["size"] >= LIMIT or \
                a["base"] + a["size"] >= LIMIT:
            raise Invalid("allocation size/base")
        if a["kind"] not in KINDS:
            raise Invalid("kind")
        amap[a["alloc_id"]] = a
    if sum((a["base"] + a["size"] - 1) // 2**21 - a["base"] // 2**21 + 1 for a in allocs) >= 2**62:
        raise Invalid("too many reserved blocks")
    kmap = {}
    for k in kernels:
        if k["kernel_id"] in kmap:
            raise Invalid("duplicate kernel_id")
        if k["duration_ns"] is not None and k["duration_ns"] < 0:
            raise Invalid("duration")
        ns = k.get("n_slices")
        if ns is not None and not 1 <= ns <= MAX_SLICES:
            raise Invalid("n_slices")
        kmap[k["kernel_id"]] = k

    live: dict[int, tuple[int, int]] = {}
    # (alloc_id, first, last 2 MiB window) reached by a range event or an access row
    touched: list[tuple[int, int, int]] = []
    state: dict[int, str] = {}
    seen_kernels: list[int] = []
    live_at_kernel: dict[int, list[tuple[int, int]]] = {}
    for i, e in enumerate(events):
        if e["seq"] != i:
            raise Invalid("seq")
        op = e["op"]
        if op not in OPS:
            raise Invalid("op")
        if op in ("alloc", "free"):
            aid = e["alloc_id"]
            if aid is None or aid not in amap:
                raise Invalid("alloc_id")
            if op == "alloc":
                if aid in state:
                    raise Invalid("double alloc")
                a = amap[aid]
                lo, hi = a["base"], a["base"] + a["size"]
                for b, t in live.values():
                    if b < hi and lo < t:
                        raise Invalid("overlap")
                live[aid] = (lo, hi)
                state[aid] = "live"
            else:
                if state.get(aid) != "live":
                    raise Invalid("free not live")
                del live[aid]
                state[aid] = "freed"
        elif op == "kernel":
            kid = e["kernel_id"]
            if kid is None or kid not in kmap or kid in live_at_kernel:
                raise Invalid("kernel event")
            seen_kernels.append(kid)
            live_at_kernel[kid] = sorted((b, t, aid) for aid, (b, t) in live.items())
        elif op in RANGE:
            if e["addr"] is None or e["size"] is None:
                raise Invalid("range needs addr/size")
            if e["addr"] + e["size"] > LIMIT or e["addr"] >= LIMIT or e["size"] >= LIMIT:
                raise Invalid("range beyond 2**62")
            arg = e["arg"]
            if op == "prefetch" and arg not in PREFETCH_ARGS:
                raise Invalid("prefetch arg")
            if op == "advise" and arg not in ADVISE_ARGS:
                raise Invalid("advise arg")
            if op == "host_access" and (e["size"] == 0 or
                                        (arg is not None and arg not in HOST_ACCESS_ARGS)):
                raise Invalid("host_access")
            lo, hi = e["addr"], e["addr"] + e["size"]
            for aid, (b, t) in live.items():
                if b < hi and lo < t and lo < hi:
                    touched.append((aid, max(lo, b) // 2**21, (min(hi, t) - 1) // 2**21))
    if set(seen_kernels) != set(kmap):
        raise Invalid("kernel without event")

    rank = {k: r for r, k in enumerate(seen_kernels)}
    sliced = "slices" in xopt
    dropped = 0
    prev_rank, prev_key = -1, None
    pages_seen: set[tuple[int, int]] = set()
    for x in acc:
        kid = x["kernel_id"]
        if kid not in rank:
            raise Invalid("unknown kernel")
        r = rank[kid]
        if r < prev_rank:
            raise Invalid("kernels out of order")
        if r != prev_rank:
            prev_rank, prev_key = r, None
        if not 1 <= x["flags"] <= 7 or x["count"] < 1:
            raise Invalid("flags/count")
        if sliced:
            ns = kmap[kid].get("n_slices") if "n_slices" in kopt else None
            if x["slices"] == 0 or ns is None or x["slices"] >> ns:
                raise Invalid("slices")
        page = x["page"]
        key = (x["order"], page)
        if prev_key is not None and key <= prev_key:
            raise Invalid("rows unsorted or duplicate")
        prev_key = key
        owner = [aid for b, t, aid in live_at_kernel[kid] if b < (page + 1) * 4096 and
                 page * 4096 < t]
        if not owner:
            if drop_out_of_range:
                dropped += 1
                continue
            raise Invalid("page out of range")
        if (r, page) in pages_seen:
            raise Invalid("duplicate page")
        pages_seen.add((r, page))
        touched.append((owner[0], page // 512, page // 512))  # the lowest-base owner
    if _touched_windows(touched) > 2**20:
        raise Invalid("too many touched windows")
    return dropped


def _touched_windows(touched: list[tuple[int, int, int]]) -> int:
    """2 MiB windows of each allocation that are reached (at most 2**20 are supported)."""
    windows = 0
    for aid in {t[0] for t in touched}:
        spans = sorted((w0, w1) for x, w0, w1 in touched if x == aid)
        merged: list[list[int]] = []
        for w0, w1 in spans:
            if merged and w0 <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], w1)
            else:
                merged.append([w0, w1])
        for w0, w1 in merged:
            windows += w1 - w0 + 1
    return windows
