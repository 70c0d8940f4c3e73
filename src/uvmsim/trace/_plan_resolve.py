"""A plan written into a trace's event arrays in one compiled pass (`with_plan`,
src/uvmsim/trace/plan_apply.py).

The plan's entries, sorted by kernel rank, are merged into the trace's events in one walk:
before each kernel's event its entries become `prefetch` events, each clipped to the
allocations live there by the loader's rule for range events (`walk_events`,
src/uvmsim/trace/_resolve.py: one segment per live allocation the range overlaps, in
ascending base order) and its pages numbered densely; every other event is copied with its
segments. Done in numpy, the same work was some forty passes over arrays of a few thousand
values, each paying numpy's per-call cost: 1-2 ms on plans whose replay takes 12-21 ms
(docs/performance.md, "Prefetch plans").

The live allocations are a Fenwick tree of counts over every allocation sorted by base, so
an alloc or free and each step of a range's search cost O(log allocations). The loader's
sorted list of live allocations costs O(live) per alloc or free, 1.2 ms over
resnet50_nopca's 2,167 (up to 661 live); scanning all allocations by base, as
_plan_clip.py does, passes the dead ones a reused address leaves behind. Live allocations
never overlap (the loader rejects a trace where they do), so ordered by base they are
ordered by end too: a range [lo, hi) overlaps the last live one with base <= lo if that
one ends past lo, then every live one with base in (lo, hi).

Every index these functions take from their inputs is checked before use and a bad one is
an error code, as in _resolve.py: the arrays of a `Trace` are public, and a bad index in
compiled code is a crash, not an error.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ._search import lower_bound, upper_bound
from .format import OP_ALLOC, OP_FREE, OP_PREFETCH

OK = 0
E_FULL = 1          # not an error: the output segment arrays are too small
E_MISSING = 2       # a segment reaches a 2 MiB block the trace gives no state
E_BAD_ALLOC = 3     # an alloc/free event names no allocation, or breaks alloc/free order
E_BAD_SEGMENTS = 4  # ev_seg_start is not rising starts into the trace's segments
E_UNPLACED = 5      # an entry's rank is out of order or names no kernel event
E_BAD_BLOCKS = 6    # an allocation's dense blocks lie outside the block arrays


@njit(cache=True)
def kernel_ranks(ids, by_id, kernel_id, order, rank):
    """rank[i] = the rank of kernel kernel_id[i] (`ids` ascending, `by_id` their ranks).
    Returns (the first row naming no kernel or -1, whether the rows are already in (rank,
    order) order, so that sorting them by kernel, then order, then row moves none)."""
    n = ids.size
    in_order = True
    for i in range(kernel_id.size):
        k = kernel_id[i]
        lo = lower_bound(ids, 0, n, k)
        if lo == n or ids[lo] != k:
            return i, False
        r = by_id[lo]
        rank[i] = r
        if i and (r < rank[i - 1] or (r == rank[i - 1] and order[i] < order[i - 1])):
            in_order = False
    return -1, in_order


@njit(cache=True)
def _block(keys, off, n, key):
    """The dense block with this key among an allocation's, keys[off:off + n] (ascending),
    or -1 when the block has no state. Where the allocation's blocks up to this one all
    have state, it is at its distance from the first; else a binary search finds it."""
    if n == 0:
        return -1
    i = off + (key - keys[off])
    if off <= i < off + n and keys[i] == key:
        return i
    lo = lower_bound(keys, off, off + n, key)
    return lo if lo < off + n and keys[lo] == key else -1


@njit(cache=True)
def _add(tree, p, d):
    """Add d to the count at position p of the Fenwick tree (1-based inside)."""
    i = p + 1
    while i < tree.size:
        tree[i] += d
        i += i & -i


@njit(cache=True)
def _before(tree, p):
    """Sum of the counts at positions < p."""
    c = 0
    while p > 0:
        c += tree[p]
        p -= p & -p
    return c


@njit(cache=True)
def _kth(tree, top, k):
    """Position of the k-th live allocation (k from 1; the caller keeps k <= live)."""
    pos = 0
    step = top
    while step:
        if pos + step < tree.size and tree[pos + step] < k:
            pos += step
            k -= tree[pos]
        step >>= 1
    return pos


@njit(cache=True)
def merge(ev, seg, blk, al, plan, out):
    """The trace's events with the plan's entries as prefetch events before their kernels.

    ev: (op, alloc, kernel, arg, seg_start, k_event) of the trace's events, k_event the
    event of each kernel rank; seg: (alloc, first, last) of its segments (dense pages);
    blk: (key, page0, lo) of its dense blocks, keys ascending (`Layout`); al: (base, end,
    block0, order, block_off, nblocks) of each allocation: bytes, the key of its window 0,
    the allocations by ascending base, and its dense blocks (TraceArrays); plan: (rank, page, n_pages, to) of the entries sorted by rank; out:
    (op, alloc, kernel, arg, seg_start, seg alloc, first, last), the event arrays sized for
    every event and the segment arrays for as many as they hold. Returns (code, segments
    written, the event at fault).
    """
    ev_op, ev_alloc, ev_kernel, ev_arg, ss, k_event = ev
    seg_alloc, seg_first, seg_last = seg
    keys, page0, b_lo = blk
    a_base, a_end, block0, order, b_off, b_n = al
    rank, page, n_pages, to = plan
    o_op, o_alloc, o_kernel, o_arg, o_ss, o_sa, o_sf, o_sl = out
    n_ev, m, n_alloc = ev_op.size, page.size, a_base.size
    n_old, cap = seg_alloc.size, o_sa.size
    for a in range(n_alloc):
        if b_off[a] < 0 or b_n[a] < 0 or b_off[a] + b_n[a] > keys.size:
            return E_BAD_BLOCKS, 0, -1
    pos = np.full(n_alloc, -1, np.int64)    # position of each allocation in `order`
    sbase = np.empty(n_alloc, np.int64)     # base by position
    for q in range(n_alloc):
        a = order[q]
        if a < 0 or a >= n_alloc or pos[a] >= 0:    # not a permutation
            return E_BAD_ALLOC, 0, -1
        pos[a] = q
        sbase[q] = a_base[a]
    # the live allocations: counts by position (a Fenwick tree) and a list by position
    # (next and previous live position; n_alloc after the last, -1 before the first)
    tree = np.zeros(n_alloc + 1, np.int64)
    nxt = np.empty(n_alloc, np.int64)
    prv = np.empty(n_alloc, np.int64)
    head = n_alloc
    top = 1
    while top * 2 <= n_alloc:
        top *= 2
    state = np.zeros(n_alloc, np.int8)      # 0 never allocated, 1 live, 2 freed
    j = 0          # next entry
    n = 0          # next event written
    s = 0          # next segment written
    for e in range(n_ev):
        while j < m and rank[j] >= 0 and rank[j] < k_event.size and k_event[rank[j]] == e:
            o_op[n] = OP_PREFETCH
            o_alloc[n] = -1
            o_kernel[n] = -1
            o_arg[n] = to[j]
            o_ss[n] = s
            lo = page[j] << 12
            hi = (page[j] + n_pages[j]) << 12
            # from the last live allocation at or below lo if it reaches past lo, else the
            # first live one above; then along the live ones to hi
            k = _before(tree, upper_bound(sbase, lo))
            q = head
            if k:
                q = _kth(tree, top, k)
                if a_end[order[q]] <= lo:
                    q = nxt[q]
            while q < n_alloc and sbase[q] < hi:
                a = order[q]
                q = nxt[q]
                vf = max(lo, a_base[a]) >> 12
                vl = (min(hi, a_end[a]) - 1) >> 12
                bf = _block(keys, b_off[a], b_n[a], block0[a] + (vf >> 9))
                bl = _block(keys, b_off[a], b_n[a], block0[a] + (vl >> 9))
                if bf < 0 or bl < 0 or bl - bf != (vl >> 9) - (vf >> 9):
                    return E_MISSING, s, e
                if s == cap:
                    return E_FULL, s, e
                o_sa[s] = a
                o_sf[s] = page0[bf] - b_lo[bf] + (vf & 511)
                o_sl[s] = page0[bl] - b_lo[bl] + (vl & 511)
                s += 1
            n += 1
            j += 1
        op = ev_op[e]
        if op == OP_ALLOC or op == OP_FREE:
            a = ev_alloc[e]
            if a < 0 or a >= n_alloc or state[a] != (1 if op == OP_FREE else 0):
                return E_BAD_ALLOC, s, e
            p = pos[a]
            if op == OP_ALLOC:     # link it after the last live one below it
                k = _before(tree, p)
                b = _kth(tree, top, k) if k else -1
                c = nxt[b] if k else head
                nxt[p], prv[p] = c, b
                if k:
                    nxt[b] = p
                else:
                    head = p
                if c < n_alloc:
                    prv[c] = p
                _add(tree, p, 1)
                state[a] = 1
            else:
                b, c = prv[p], nxt[p]
                if b >= 0:
                    nxt[b] = c
                else:
                    head = c
                if c < n_alloc:
                    prv[c] = b
                _add(tree, p, -1)
                state[a] = 2
        o_op[n] = op
        o_alloc[n] = ev_alloc[e]
        o_kernel[n] = ev_kernel[e]
        o_arg[n] = ev_arg[e]
        o_ss[n] = s
        s0, s1 = ss[e], ss[e + 1]
        if s0 < 0 or s1 < s0 or s1 > n_old:
            return E_BAD_SEGMENTS, s, e
        if s + s1 - s0 > cap:
            return E_FULL, s, e
        for t in range(s0, s1):
            o_sa[s] = seg_alloc[t]
            o_sf[s] = seg_first[t]
            o_sl[s] = seg_last[t]
            s += 1
        n += 1
    if j < m:      # an entry out of rank order, or of no kernel: it was never reached
        return E_UNPLACED, s, -1
    o_ss[n] = s
    return OK, s, -1
