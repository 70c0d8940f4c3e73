"""Compiled checks of the v1.2 stream tables (blocks.parquet, block_accesses.parquet) and
their conversion to the flat arrays of `uvmsim.trace.streams.Streams`.

Kept apart from streams.py as _resolve.py is from io.py: the Python there is the contract,
this file the mechanics. Every function returns an error code and the offending row instead
of raising, because raising inside njit loses the row numbers the caller's message needs.
"""
from __future__ import annotations

import numpy as np
from numba import njit

OK = 0
# blocks.parquet
B_UNKNOWN_KERNEL = 1
B_NO_STREAM = 2
B_KERNEL_ORDER = 3
B_BLOCK_ORDER = 4
B_BLOCK_RANGE = 5
B_TIME = 6
B_NO_ROWS = 7
# block_accesses.parquet
R_UNKNOWN_KERNEL = 20
R_NO_STREAM = 21
R_KERNEL_ORDER = 22
R_NO_BLOCK = 23
R_ORDER = 24
R_FLAGS = 25
R_T_RANGE = 26
R_NOT_ACCESSED = 27
R_FLAGS_SUBSET = 28
R_DUP_UNIT = 29
R_UNCOVERED = 30


@njit(cache=True)
def _rank_of(kid_sorted, kid_rank, k):
    """Rank (event order) of kernel id k, or -1 when no kernel row has that id."""
    i = np.searchsorted(kid_sorted, k)
    if i < kid_sorted.size and kid_sorted[i] == k:
        return kid_rank[i]
    return -1


@njit(cache=True)
def check_blocks(kid_sorted, kid_rank, k_unit, k_nblocks, b_kid, b_block, b_t0, b_t1,
                 k_block_start):
    """Check blocks.parquet's rows; fill k_block_start (CSR by kernel rank) and return
    (err, row, detail). Rows must be in kernel event order, each kernel's blocks strictly
    ascending (so unique) and below its n_blocks, with t_start <= t_end."""
    n = b_kid.size
    n_k = k_unit.size
    prev = -1
    for i in range(n):
        r = _rank_of(kid_sorted, kid_rank, np.int64(b_kid[i]))
        if r < 0:
            return B_UNKNOWN_KERNEL, i, np.int64(b_kid[i])
        if k_unit[r] == 0:
            return B_NO_STREAM, i, np.int64(b_kid[i])
        if r < prev:
            return B_KERNEL_ORDER, i, np.int64(b_kid[i])
        if r == prev and b_block[i] <= b_block[i - 1]:
            return B_BLOCK_ORDER, i, np.int64(b_block[i])
        if np.int64(b_block[i]) >= k_nblocks[r]:
            return B_BLOCK_RANGE, i, k_nblocks[r]
        if b_t0[i] > b_t1[i]:
            return B_TIME, i, 0
        k_block_start[r + 1] += 1
        prev = r
    for r in range(n_k):
        k_block_start[r + 1] += k_block_start[r]
    return OK, -1, 0


@njit(cache=True)
def _sort_units_dup(buf, m):
    """True when two of buf[:m] are equal (sorts buf[:m])."""
    s = np.sort(buf[:m])
    for i in range(1, m):
        if s[i] == s[i - 1]:
            return True
    return False


@njit(cache=True)
def check_rows(kid_sorted, kid_rank, k_unit, k_block_start, b_block, b_t0, b_t1,
               acc_start, acc_vpage, acc_flags, acc_dense, r_kid, r_block, r_page, r_t,
               r_flags, blk_row_start, out_dense):
    """Check block_accesses.parquet's rows against the blocks and the kernels' access rows.

    acc_* are each kernel's access rows sorted by virtual page (CSR acc_start by rank).
    Fills blk_row_start (CSR of rows by block) and out_dense (dense page of each row).
    Returns (err, row, detail); err R_UNCOVERED names in `row` the kernel rank and in
    `detail` the access page no row's unit covers.
    """
    n = r_kid.size
    n_k = k_unit.size
    prev = -1
    bi = -1        # block (row of blocks.parquet) of the current group
    g0 = 0         # first row of the current group
    units = np.empty(64, np.int64)
    for i in range(n + 1):
        r = -1
        if i < n:
            r = _rank_of(kid_sorted, kid_rank, np.int64(r_kid[i]))
            if r < 0:
                return R_UNKNOWN_KERNEL, i, np.int64(r_kid[i])
            if k_unit[r] == 0:
                return R_NO_STREAM, i, np.int64(r_kid[i])
            if r < prev:
                return R_KERNEL_ORDER, i, np.int64(r_kid[i])
        new_group = i == n or r != prev or r_block[i] != r_block[i - 1]
        if new_group and i > g0:
            # close the group [g0, i): no two rows of a block in one unit
            sh = k_unit[prev] - 12
            m = i - g0
            if units.size < m:
                units = np.empty(2 * m, np.int64)
            for j in range(m):
                units[j] = r_page[g0 + j] >> sh
            if _sort_units_dup(units, m):
                return R_DUP_UNIT, g0, 0
            blk_row_start[bi + 1] = i
        if i == n:
            break
        if r != prev:
            # the previous kernel's blocks must all have had rows
            if prev >= 0 and bi + 1 != k_block_start[prev + 1]:
                return B_NO_ROWS, bi + 1, 0
            # kernels skipped between prev and r must have no blocks
            for q in range(prev + 1, r):
                if k_block_start[q + 1] != k_block_start[q]:
                    return B_NO_ROWS, k_block_start[q], 0
            bi = k_block_start[r] - 1
            prev = r
        if new_group:
            bi += 1
            g0 = i
            if bi >= k_block_start[r + 1] or b_block[bi] != r_block[i]:
                return R_NO_BLOCK, i, np.int64(r_block[i])
            blk_row_start[bi] = i
        elif r_t[i] < r_t[i - 1] or (r_t[i] == r_t[i - 1] and r_page[i] <= r_page[i - 1]):
            return R_ORDER, i, 0
        f = r_flags[i]
        if f == 0 or f > 7:
            return R_FLAGS, i, np.int64(f)
        if np.int64(r_t[i]) > np.int64(b_t1[bi]) - np.int64(b_t0[bi]):
            return R_T_RANGE, i, np.int64(b_t1[bi]) - np.int64(b_t0[bi])
        # the page must be one of the kernel's access rows
        lo, hi = acc_start[r], acc_start[r + 1]
        j = lo + np.searchsorted(acc_vpage[lo:hi], r_page[i])
        if j >= hi or acc_vpage[j] != r_page[i]:
            return R_NOT_ACCESSED, i, r_page[i]
        if k_unit[r] == 12 and (f & ~acc_flags[j]) != 0:
            return R_FLAGS_SUBSET, i, np.int64(acc_flags[j])
        out_dense[i] = acc_dense[j]
    if prev >= 0 and bi + 1 != k_block_start[prev + 1]:
        return B_NO_ROWS, bi + 1, 0
    for q in range(prev + 1, n_k):
        if k_block_start[q + 1] != k_block_start[q]:
            return B_NO_ROWS, k_block_start[q], 0
    return OK, -1, 0


@njit(cache=True)
def check_coverage(k_unit, acc_start, acc_vpage, k_block_start, blk_row_start, r_page):
    """Every access page of a kernel with a stream lies in the unit of some stream row of
    that kernel. Returns (err, kernel rank, page)."""
    n_k = k_unit.size
    buf = np.empty(64, np.int64)
    for r in range(n_k):
        if k_unit[r] == 0 or acc_start[r + 1] == acc_start[r]:
            continue
        sh = k_unit[r] - 12
        b0, b1 = k_block_start[r], k_block_start[r + 1]
        lo = blk_row_start[b0] if b1 > b0 else 0
        hi = blk_row_start[b1] if b1 > b0 else 0
        m = hi - lo
        if buf.size < m:
            buf = np.empty(2 * m, np.int64)
        for j in range(m):
            buf[j] = r_page[lo + j] >> sh
        u = np.sort(buf[:m])
        k = 0
        for a in range(acc_start[r], acc_start[r + 1]):  # access pages ascending
            want = acc_vpage[a] >> sh
            while k < m and u[k] < want:
                k += 1
            if k >= m or u[k] != want:
                return R_UNCOVERED, r, acc_vpage[a]
    return OK, -1, 0
