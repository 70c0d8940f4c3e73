"""Compiled passes that check a trace's program order and map access rows to dense pages.

Kept apart from io.py so the Python there reads as the contract and this file as the
mechanics. Every function returns an error code instead of raising, because raising inside
njit loses the row and event numbers the caller needs for its message.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from ._search import lower_bound
from .format import OP_ALLOC, OP_FREE

# Error codes shared with io.py.
OK = 0
E_DOUBLE_ALLOC = 1
E_FREE_NOT_LIVE = 2
E_OVERLAP = 3
E_FLAGS = 10
E_COUNT = 11
E_UNSORTED_KERNEL = 12
E_UNSORTED_ROW = 13
E_DUPLICATE = 14
E_OUT_OF_RANGE = 15
E_UNKNOWN_KERNEL = 16
E_SLICES_ZERO = 17
E_NO_NSLICES = 18
E_SLICES_RANGE = 19
E_TOO_MANY_BLOCKS = 20
E_GROW = 21  # not an error: resolve_rows needs more block slots

# Pages at or above this are outside every allocation (io.py rejects addresses >= 2**62).
PAGE_LIMIT = 1 << 50
SIGN_BIT = np.int64(-(1 << 63))


@njit(cache=True)
def _live_find_end_gt(live, n_live, a_end, addr):
    """First position i in the live list (sorted by base) whose allocation ends after addr."""
    lo, hi = 0, n_live
    while lo < hi:
        mid = (lo + hi) >> 1
        if a_end[live[mid]] > addr:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True)
def _live_insert(live, n_live, a_base, a):
    """Insert allocation a; returns its position. Caller checked overlap."""
    pos = _live_find_end_gt(live, n_live, a_base, a_base[a])  # first with base > new base
    for i in range(n_live, pos, -1):
        live[i] = live[i - 1]
    live[pos] = a
    return pos


@njit(cache=True)
def _live_remove(live, n_live, a):
    j = -1
    for i in range(n_live):
        if live[i] == a:
            j = i
            break
    for i in range(j, n_live - 1):
        live[i] = live[i + 1]


@njit(cache=True)
def walk_events(ev_op, ev_alloc, ev_addr, ev_size, a_base, a_end, a_host, a_first_page,
                a_nblocks, is_range_op):
    """Check alloc/free order and overlap; clip range events to live allocations.

    Returns (err, err_event, err_other_alloc, seg_start[n_ev+1], seg_alloc, seg_first,
    seg_last, peak_blocks). Segments are page ranges, inclusive and counted from their
    allocation's first page, one per (event, allocation) overlap, in address order;
    peak_blocks counts reserved 2 MiB windows of live non-host allocations.
    """
    n_ev = ev_op.size
    n_alloc = a_base.size
    state = np.zeros(n_alloc, np.int8)  # 0 never allocated, 1 live, 2 freed
    live = np.empty(n_alloc + 1, np.int64)
    n_live = 0
    blocks = 0
    peak = 0
    cap = 16
    seg_alloc = np.empty(cap, np.int64)
    seg_first = np.empty(cap, np.int64)
    seg_last = np.empty(cap, np.int64)
    seg_start = np.zeros(n_ev + 1, np.int64)
    n_seg = 0
    for e in range(n_ev):
        op = ev_op[e]
        seg_start[e] = n_seg
        if op == OP_ALLOC:
            a = ev_alloc[e]
            if state[a] != 0:
                return E_DOUBLE_ALLOC, e, -1, seg_start, seg_alloc, seg_first, seg_last, peak
            i = _live_find_end_gt(live, n_live, a_end, a_base[a])
            if i < n_live and a_base[live[i]] < a_end[a]:
                return E_OVERLAP, e, live[i], seg_start, seg_alloc, seg_first, seg_last, peak
            _live_insert(live, n_live, a_base, a)
            n_live += 1
            state[a] = 1
            if not a_host[a]:
                blocks += a_nblocks[a]
                if blocks > peak:
                    peak = blocks
        elif op == OP_FREE:
            a = ev_alloc[e]
            if state[a] != 1:
                return E_FREE_NOT_LIVE, e, -1, seg_start, seg_alloc, seg_first, seg_last, peak
            _live_remove(live, n_live, a)
            n_live -= 1
            state[a] = 2
            if not a_host[a]:
                blocks -= a_nblocks[a]
        elif is_range_op[op]:
            lo_addr = ev_addr[e]
            hi_addr = lo_addr + ev_size[e]
            if ev_size[e] <= 0:
                continue
            i = _live_find_end_gt(live, n_live, a_end, lo_addr)
            while i < n_live and a_base[live[i]] < hi_addr:
                a = live[i]
                b = max(lo_addr, a_base[a])
                t = min(hi_addr, a_end[a])
                if n_seg == cap:
                    cap *= 2
                    seg_alloc = _grow(seg_alloc, cap)
                    seg_first = _grow(seg_first, cap)
                    seg_last = _grow(seg_last, cap)
                seg_alloc[n_seg] = a
                seg_first[n_seg] = (b >> 12) - a_first_page[a]
                seg_last[n_seg] = ((t - 1) >> 12) - a_first_page[a]
                n_seg += 1
                i += 1
    seg_start[n_ev] = n_seg
    return OK, -1, -1, seg_start, seg_alloc[:n_seg], seg_first[:n_seg], seg_last[:n_seg], peak


@njit(cache=True)
def _grow(a, cap):
    b = np.empty(cap, a.dtype)
    b[:a.size] = a
    return b


# Indices into the persistent scalar state of resolve_rows.
S_PREV_RANK, S_PREV_ORDER, S_PREV_PAGE, S_CURSOR, S_NLIVE, S_OUT, S_DROPPED, S_PREV_KID, \
    S_CACHE, S_NSLOTS, S_RANK_OF_PREV_KID = range(11)
N_STATE = 11

# Rows are numbered by block slot: a 2 MiB window of one allocation gets the next slot when
# a row first reaches it, and a row's page is written as slot * 512 + window position. The
# slots, and the tables that find them, grow with the blocks the rows touch (never with the
# bytes an allocation reserves); finish_pages renumbers them densely once every row is seen.
# A trace may touch at most MAX_BLOCKS blocks (2 TiB): each touched block costs its 512 pages
# in the dense page maps (6 bytes a page) and the engine's state (1 byte a page, more with
# options), so the largest trace accepted needs about 3.5 GiB, not more than a machine has;
# and int32 holds slot * 512 + 511.
MAX_BLOCKS = 1 << 20
_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)


class RowState:
    """State of resolve_rows between batches: scalars, the live allocations, kernel row
    starts, and the block slots (hash table from block key to slot, each slot's key, the
    kernel that last touched it, and one bit per window position: touched by that kernel)."""

    def __init__(self, n_alloc: int, n_kernels: int, slots: int = 64):
        self.st = np.zeros(N_STATE, np.int64)
        self.st[S_PREV_RANK] = -1
        self.st[S_PREV_KID] = -1
        self.st[S_CACHE] = -1
        self.live = np.empty(n_alloc + 1, np.int64)
        self.k_row_start = np.zeros(n_kernels + 1, np.int64)
        self._alloc_slots(slots)

    def _alloc_slots(self, slots: int) -> None:
        self.h_key = np.full(2 * slots, -1, np.int64)  # load factor <= 1/2
        self.h_slot = np.zeros(2 * slots, np.int64)
        self.slot_key = np.empty(slots, np.int64)
        self.slot_stamp = np.full(slots, -1, np.int64)
        self.seen = np.zeros(slots * 64, np.uint8)

    def grow(self) -> None:
        """Double the slot capacity (resolve_rows returned E_GROW)."""
        n = int(self.st[S_NSLOTS])
        key, stamp, seen = self.slot_key, self.slot_stamp, self.seen
        self._alloc_slots(2 * key.size)
        self.slot_key[:n] = key[:n]
        self.slot_stamp[:n] = stamp[:n]
        self.seen[:n * 64] = seen[:n * 64]
        _rehash(self.h_key, self.h_slot, self.slot_key, n)

    def arrays(self) -> "RowArrays":
        """The arrays resolve_rows takes (again after each `grow`, which replaces some)."""
        return RowArrays(self.st, self.live, self.k_row_start, self.h_key, self.h_slot,
                         self.slot_key, self.slot_stamp, self.seen)

    @property
    def n_slots(self) -> int:
        return int(self.st[S_NSLOTS])


@njit(cache=True)
def _hash_find(h_key, key):
    """Position of key in the open-addressing table, or of the empty entry it would take."""
    mask = h_key.size - 1
    i = np.int64((np.uint64(key) * _HASH_MUL) >> np.uint64(40)) & mask
    while h_key[i] != key and h_key[i] != -1:
        i = (i + 1) & mask
    return i


@njit(cache=True)
def _rehash(h_key, h_slot, slot_key, n):
    for s in range(n):
        i = _hash_find(h_key, slot_key[s])
        h_key[i] = slot_key[s]
        h_slot[i] = s


#: what resolve_rows reads of the small tables (built once per trace by io.py): kernel ids
#: sorted and their ranks, each kernel's event, the events' ops and allocations, the
#: allocations' byte and page ranges and block keys (a_block0), and each kernel's n_slices
RowTables = namedtuple("RowTables", "kid_sorted kid_rank k_event ev_op ev_alloc a_base a_end "
                                    "a_first_page a_last_page a_block0 nslices_by_rank")
#: one batch of access rows, as columns (slices: size 0 when the trace has none)
RowBatch = namedtuple("RowBatch", "kid page flags count order slices")
#: the arrays resolved rows go to (slices: size 0 when the trace has none)
RowOut = namedtuple("RowOut", "page flags count slices")
#: RowState's arrays, as resolve_rows takes them
RowArrays = namedtuple("RowArrays", "st live k_row_start h_key h_slot slot_key slot_stamp seen")


@njit(cache=True)
def resolve_rows(rs, tables, batch, drop, out0, out):
    """Validate one batch of access rows and append them, as slot pages (see MAX_BLOCKS),
    to the outputs.

    `rs` is a RowState's arrays (RowState.arrays), `tables` a RowTables, `batch` a RowBatch
    and `out` a RowOut. The batch's slices column has size 0 when the trace has none; then
    nslices_by_rank and out.slices are unused. Output row i (counted over the whole trace)
    goes to out.*[i - out0]: out0 is 0 when the outputs hold every row, the first row of
    the batch when they hold one batch. `a_block0[a]` is allocation a's first block key
    minus its first window, so a page's block key is a_block0[a] + (page >> 9). Returns
    (err, row_in_batch, detail): detail is the kernel rank, the row's page or the kernel's
    n_slices. E_GROW means the slots are full: the caller grows them (RowState.grow) and
    calls again from that row, which is not consumed. State lives in st and the arrays
    between batches; the caller sized the outputs for the rows (io.py checks each batch
    against them), and every index below is checked before use.
    """
    st, live, k_row_start = rs.st, rs.live, rs.k_row_start
    h_key, h_slot, slot_key, slot_stamp, seen = (rs.h_key, rs.h_slot, rs.slot_key,
                                                 rs.slot_stamp, rs.seen)
    kid_sorted, kid_rank, k_event = tables.kid_sorted, tables.kid_rank, tables.k_event
    ev_op, ev_alloc = tables.ev_op, tables.ev_alloc
    a_base, a_end, a_block0 = tables.a_base, tables.a_end, tables.a_block0
    a_first_page, a_last_page = tables.a_first_page, tables.a_last_page
    nslices_by_rank = tables.nslices_by_rank
    b_kid, b_page, b_flags, b_count, b_order, b_slices = (
        batch.kid, batch.page, batch.flags, batch.count, batch.order, batch.slices)
    out_page, out_flags, out_count, out_slices = out.page, out.flags, out.count, out.slices
    has_slices = b_slices.size > 0
    n_live = st[S_NLIVE]
    out = st[S_OUT]
    cache = st[S_CACHE]
    prev_kid = st[S_PREV_KID]
    rank = st[S_RANK_OF_PREV_KID]
    prev_rank = st[S_PREV_RANK]
    po = st[S_PREV_ORDER]
    pp = st[S_PREV_PAGE]
    cursor = st[S_CURSOR]
    dropped = st[S_DROPPED]
    n_slots = st[S_NSLOTS]
    cap = slot_key.size
    n_k = kid_sorted.size
    # the cached allocation's page range, so a hit costs two compares
    c_lo = np.int64(0)
    c_hi = np.int64(-1)
    c_b0 = np.int64(0)
    if cache >= 0:
        c_lo = a_first_page[cache]
        c_hi = a_last_page[cache]
        c_b0 = a_block0[cache]
    # the last row's block key and slot (rows of a kernel mostly stay in one block)
    last_key = np.int64(-1)
    last_slot = np.int64(0)
    err = OK
    err_row = -1
    detail = np.int64(0)
    for r in range(b_kid.size):
        kid = np.int64(b_kid[r])
        if kid != prev_kid:
            lo = lower_bound(kid_sorted, 0, n_k, kid)
            if lo == n_k or kid_sorted[lo] != kid:
                err, err_row, detail = E_UNKNOWN_KERNEL, r, kid
                break
            rank = kid_rank[lo]
            prev_kid = kid
            if rank <= prev_rank:
                err, err_row, detail = E_UNSORTED_KERNEL, r, rank
                break
            for q in range(prev_rank + 1, rank + 1):
                k_row_start[q] = out
            # replay alloc/free up to this kernel's event so the live set is the one it saw
            end = k_event[rank]
            for e in range(cursor, end):
                op = ev_op[e]
                if op == OP_ALLOC:
                    _live_insert(live, n_live, a_base, ev_alloc[e])
                    n_live += 1
                elif op == OP_FREE:
                    _live_remove(live, n_live, ev_alloc[e])
                    n_live -= 1
            cursor = end + 1
            cache = -1
            c_lo, c_hi = np.int64(0), np.int64(-1)
            last_key = -1
            prev_rank = rank
            po = -1
            pp = -1
        fl = b_flags[r]
        if fl == 0 or fl > 7:
            err, err_row, detail = E_FLAGS, r, np.int64(fl)
            break
        if b_count[r] < 1:
            err, err_row = E_COUNT, r
            break
        if has_slices:
            sl = b_slices[r]
            ns = nslices_by_rank[rank]
            if sl == 0:
                err, err_row = E_SLICES_ZERO, r
                break
            if ns == 0:
                err, err_row = E_NO_NSLICES, r
                break
            if ns < 64 and (sl >> np.uint64(ns)) != 0:
                err, err_row, detail = E_SLICES_RANGE, r, ns
                break
        page = b_page[r]  # the uint64 column viewed as int64
        # flipping the sign bit makes int64 comparison order the pages as uint64 does
        key = page ^ SIGN_BIT
        order = np.int64(b_order[r])
        if order < po or (order == po and key <= pp):
            err, err_row, detail = E_UNSORTED_ROW, r, page
            if order == po and key == pp:
                err = E_DUPLICATE
            break
        if page < 0 or page >= PAGE_LIMIT:
            # beyond every allocation (addresses stop at 2**62), and page << 12 below would
            # wrap: decide here, before any arithmetic on it
            if drop:
                po = order
                pp = key
                dropped += 1
                continue
            err, err_row, detail = E_OUT_OF_RANGE, r, page
            break
        # attribute to the lowest-base live allocation overlapping the page
        a = -1
        if c_lo < page and page <= c_hi:
            a = cache  # strictly inside: no lower-base allocation can share this page
        else:
            i = _live_find_end_gt(live, n_live, a_end, page << 12)
            if i < n_live and a_base[live[i]] < ((page + 1) << 12):
                a = live[i]
                cache = a
                c_lo = a_first_page[a]
                c_hi = a_last_page[a]
                c_b0 = a_block0[a]
        if a < 0:
            if drop:
                po = order
                pp = key
                dropped += 1
                continue
            err, err_row, detail = E_OUT_OF_RANGE, r, page
            break
        # a_first_page[a] <= page <= a_last_page[a] here, so the key names one of this
        # allocation's blocks
        bkey = c_b0 + (page >> 9)
        if bkey != last_key:
            i = _hash_find(h_key, bkey)
            if h_key[i] == bkey:
                slot = h_slot[i]
            else:
                if n_slots == cap:
                    err, err_row = (E_TOO_MANY_BLOCKS if cap >= MAX_BLOCKS else E_GROW), r
                    break
                slot = n_slots
                n_slots += 1
                h_key[i] = bkey
                h_slot[i] = slot
                slot_key[slot] = bkey
            if slot_stamp[slot] != rank:  # first row of this kernel in the block
                slot_stamp[slot] = rank
                seen[slot * 64:slot * 64 + 64] = 0
            last_key = bkey
            last_slot = slot
        d = (last_slot << 9) + (page & 511)
        bit = np.uint8(1 << (d & 7))
        if seen[d >> 3] & bit:
            err, err_row, detail = E_DUPLICATE, r, page
            break
        seen[d >> 3] |= bit
        po = order
        pp = key
        o = out - out0
        out_page[o] = d
        out_flags[o] = fl
        out_count[o] = b_count[r]
        if has_slices:
            out_slices[o] = b_slices[r]
        out += 1
    st[S_NLIVE] = n_live
    st[S_OUT] = out
    st[S_CACHE] = cache
    st[S_PREV_KID] = prev_kid
    st[S_RANK_OF_PREV_KID] = rank
    st[S_PREV_RANK] = prev_rank
    st[S_PREV_ORDER] = po
    st[S_PREV_PAGE] = pp
    st[S_CURSOR] = cursor
    st[S_DROPPED] = dropped
    st[S_NSLOTS] = n_slots
    return err, err_row, detail


@njit(cache=True)
def finish_rows(st, k_row_start):
    """Close the kernel boundaries after the last batch."""
    n_k = k_row_start.size - 1
    for q in range(st[S_PREV_RANK] + 1, n_k + 1):
        k_row_start[q] = st[S_OUT]


@njit(cache=True)
def fill_page_maps(b_lo, b_hi, page_block, page_pos):
    """The block and window position of every dense page: block b's pages are its window
    positions b_lo[b]..b_hi[b], in block order. One pass with no temporaries, so building
    the maps peaks at their own 6 bytes a page."""
    d = 0
    for b in range(b_lo.size):
        for pos in range(b_lo[b], b_hi[b] + 1):
            page_block[d] = b
            page_pos[d] = pos
            d += 1
    return d


@njit(cache=True)
def slot_pages_to_dense(pages, slot_page0):
    """Renumber slot pages (slot * 512 + window position) as dense pages: slot_page0[s] is
    the dense page of slot s's window position 0 (io.py builds it for every slot)."""
    for i in range(pages.size):
        d = pages[i]
        pages[i] = slot_page0[d >> 9] + (d & 511)
