# Part of the replay engine: MEMORY. Chunks, residency and eviction.
#
# A template part: uvmsim.engine.build joins the parts into one generated module per policy
# pair (docs/architecture.md), so the names below come from the header it writes (state,
# bits, link, trace format, hooks) and from the other parts.
#
# Owns: S.pstate, S.bres, S.b_nres, S.b_chunk, S.chunk_block, S.free_stack, S.pool[0],
# S.victim, S.wbits, S.b_tenant, S.t_chunks, and for partial_blocks S.b_slot, S.slot_block,
# S.u_root, S.u_next, S.u_prev, S.r_head, S.r_room. A block holds one 2 MiB chunk while any of
# its pages is resident (with small_blocks, only its own pages count against the capacity;
# with partial_blocks, a block smaller than 2 MiB holds units of shared root chunks instead:
# docs/semantics.md, "Partial blocks").
# Offers: ensure_chunk, evict_one, release_chunk, make_resident, fill_positions,
# make_range_resident, prefetch_to_cpu (resident pages back to the host), free_alloc.
# Calls: the eviction policy (EV_VICTIM, EV_ON_FILL, EV_ON_RELEASE), the memory component
# (MEM_RESERVE), the link (htod_ns, dtoh_ns), translation's tlb_shootdown when pages leave
# the GPU, and the driver's on_evicted, which tells the mechanisms of an eviction. Never a
# front-end or the program.
# Time: each copy and each fixed cost is added to S.driver[0].step_ns, the time of the driver
# step doing the work.


@_jit
def ensure_chunk(est, S, T, blk, out_row, tick):
    """Step 1: the block takes a free chunk, evicting the policy's victims until one is free
    (with small_blocks: until its own pages of GPU memory are free).

    The memory component (MEM_RESERVE) may first demand evictions from one tenant's chunks
    (a quota): the policy's victim is then restricted to that tenant (pool.victim_tenant)."""
    c = S.b_chunk[blk]
    if c >= 0:
        return c
    ten = S.b_tenant[blk]
    while True:
        j = MEM_RESERVE(S.mem, S, T, ten)
        if j < 0:
            break
        if j >= S.t_chunks.size or S.t_chunks[j] <= 0:
            raise RuntimeError("memory component asked to evict from a tenant holding no chunk")
        S.pool[0].victim_tenant = j
        evict_one(est, S, T, out_row, tick)
        S.pool[0].victim_tenant = -1
    while S.pool[0].n_free == 0:
        evict_one(est, S, T, out_row, tick)
    if S.pool[0].small_blocks != 0:
        # capacity in pages: evict until the block's own pages fit (the pool then holds a
        # chunk for every block, so a free chunk id never runs out first)
        need = block_pages(T, blk)
        while S.pool[0].free_pages < need:
            evict_one(est, S, T, out_row, tick)
        S.pool[0].free_pages -= need
    S.pool[0].n_free -= 1
    c = S.free_stack[S.pool[0].n_free]
    S.chunk_block[c] = blk
    S.b_chunk[blk] = c
    S.t_chunks[ten] += 1
    return c


@_jit
def evict_one(est, S, T, out_row, tick):
    """Ask the policy for a victim and copy its resident pages back (no dirty bits); a
    shared root chunk (partial_blocks) is evicted with every unit in it (evict_root)."""
    EV_VICTIM(est, S, T, tick)
    c = S.victim[0]
    if c < 0 or c >= S.chunk_block.size:
        raise RuntimeError("eviction policy named a chunk that does not exist")
    blk = np.int64(S.chunk_block[c])  # int64 like release_chunk's other callers' blocks
    if blk == SHARED:
        evict_root(est, S, T, c, out_row)
        return
    if blk < 0:
        raise RuntimeError("eviction policy named a chunk that is not in use")
    if S.pool[0].victim_tenant >= 0 and S.b_tenant[blk] != S.pool[0].victim_tenant:
        raise RuntimeError("eviction policy named a chunk of another tenant than asked")
    lo = T.b_lo[blk]
    first = max(S.victim[1], lo)
    last = min(S.victim[2], T.b_hi[blk])
    if S.translation[0].on:
        tlb_shootdown(S, blk, first, last)
    n, ndup = copy_back(S, T, blk, first, last)
    if n + ndup == 0:
        raise RuntimeError("eviction policy named a range with no resident page")
    S.counts[out_row, C_DTOH_EVICT] += n * 4096
    S.b_nres[blk] -= n + ndup
    on_evicted(S, blk, first, last)
    if S.b_nres[blk] == 0:
        release_chunk(est, S, T, blk)
        S.counts[out_row, C_EVICTED] += 1
        S.driver[0].step_ns += S.hw[0].evict_ns


@_jit
def copy_back(S, T, blk, first, last):
    """An eviction's copy of a block's resident positions first..last to the host; returns
    (pages copied, read duplicates dropped).

    Walks only the resident positions (set bits of S.bres); each maximal run of adjacent
    resident positions is one copy, as in a walk over every position (a read duplicate ends
    a run: it is dropped, not copied)."""
    p0 = T.b_page0[blk] - T.b_lo[blk]
    n = 0
    ndup = 0
    run = 0
    run_end = -2
    off = blk * 8
    # read duplicates exist only with the advise option; without them every resident page
    # is copied, so each run of adjacent set bits is cleared in one tight loop
    runs_only = S.driver[0].advise == 0
    if first <= last:
        for w in range(first >> 6, (last >> 6) + 1):
            wm = word_mask(w, first, last)
            m = S.bres[off + w] & wm
            S.bres[off + w] &= ~wm
            while runs_only and m:
                r = ctz(m)
                x = m >> r
                if x == ~np.uint64(0):
                    ln = 64
                    m = np.uint64(0)
                else:
                    ln = np.int64(ctz(~x))
                    m &= ~(((np.uint64(1) << np.uint64(ln)) - np.uint64(1)) << r)
                pos = (w << 6) + np.int64(r)
                if run and run_end != pos - 1:
                    S.driver[0].step_ns += dtoh_ns(S, run)
                    run = 0
                for d in range(p0 + pos, p0 + pos + ln):
                    S.pstate[d] &= ~RES
                n += ln
                run += ln
                run_end = pos + ln - 1
            while m:
                pos = (w << 6) + np.int64(ctz(m))
                m &= m - np.uint64(1)
                d = p0 + pos
                ps = S.pstate[d]
                if run and run_end != pos - 1:
                    S.driver[0].step_ns += dtoh_ns(S, run)
                    run = 0
                if ps & DUP:
                    # a read duplicate (read-mostly hint): the CPU copy is current, drop it
                    S.pstate[d] = ps & ~(RES | DUP)
                    ndup += 1
                    if run:
                        S.driver[0].step_ns += dtoh_ns(S, run)
                        run = 0
                else:
                    S.pstate[d] = ps & ~RES
                    n += 1
                    run += 1
                    run_end = pos
    if run:
        S.driver[0].step_ns += dtoh_ns(S, run)
    return n, ndup


@_jit
def release_chunk(est, S, T, blk):
    """Return a block's chunk to the free pool (its pages are already not resident)."""
    c = S.b_chunk[blk]
    S.b_chunk[blk] = -1
    S.chunk_block[c] = -1
    S.free_stack[S.pool[0].n_free] = c
    S.pool[0].n_free += 1
    if S.pool[0].small_blocks != 0:
        S.pool[0].free_pages += block_pages(T, blk)
    S.t_chunks[S.b_tenant[blk]] -= 1
    EV_ON_RELEASE(est, S, T, c, blk)


@_jit
def block_pages(T, blk):
    """GPU memory a block's chunk takes with the small_blocks option, in 4 KiB pages: its
    own pages (512 for a whole 2 MiB block), as the driver backs a VA block smaller than
    2 MiB with 64 KiB and 4 KiB chunks, not a root chunk (docs/semantics.md)."""
    return np.int64(T.b_hi[blk]) - np.int64(T.b_lo[blk]) + 1


@_jit
def make_resident(est, S, T, blk, use_masks, cause_f, cause_p, out_row, tick):
    """Steps 1-3 for the positions set in S.wbits that are not resident yet.

    With use_masks, positions in S.fbits get cause_f and the others cause_p; otherwise
    every position gets cause_f (fill_positions). A block that holds its chunk already
    (most services of a batch) skips ensure_chunk: each call of a compiled function that
    takes the policy state and the engine state costs two atomic reference-count updates
    per array and struct it passes (docs/performance.md), more than the check."""
    if is_partial(S, blk):
        make_resident_partial(est, S, T, blk, use_masks, cause_f, cause_p, out_row, tick)
        return
    c = S.b_chunk[blk]
    if c < 0:
        c = ensure_chunk(est, S, T, blk, out_row, tick)
    n_new, new_first, new_last = fill_positions(S, blk, T.b_page0[blk] - T.b_lo[blk],
                                                use_masks, cause_f, cause_p, out_row)
    EV_ON_FILL(est, S, T, c, blk, new_first, new_last, n_new, tick)


@_jit
def fill_positions(S, blk, p0, use_masks, cause_f, cause_p, out_row):
    """Make resident the positions set in S.wbits that are not yet (the block's chunk is
    held; its dense page of position pos is p0 + pos); returns (pages made resident,
    first, last position). Walks only those positions (set bits); each maximal run of
    adjacent positions copied over the link is one transfer, in position order, exactly as
    a walk over every position of the block would add them up."""
    off = blk * 8
    run = 0
    run_end = -2
    n_new = 0
    n_zero = 0
    n_xfer_f = 0
    n_xfer_p = 0
    new_first = -1
    new_last = -1
    for w in range(8):
        m = S.wbits[w] & ~S.bres[off + w]
        if not m:
            continue
        S.bres[off + w] |= m
        fw = S.fbits[w] if use_masks else ~np.uint64(0)
        while m:
            b = ctz(m)
            pos = (w << 6) + np.int64(b)
            m &= m - np.uint64(1)
            cause = cause_f if (fw >> b) & np.uint64(1) else cause_p
            d = p0 + pos
            ps = S.pstate[d]
            if run and run_end != pos - 1:
                S.driver[0].step_ns += htod_ns(S, run)
                run = 0
            if cause == CAUSE_MEMSET or (cause != CAUSE_MEMCPY and not (ps & POP)):
                n_zero += 1
                S.driver[0].step_ns += S.hw[0].zero_fill_ns
                if run:
                    S.driver[0].step_ns += htod_ns(S, run)
                    run = 0
            else:
                if cause == cause_f:
                    n_xfer_f += 1
                else:
                    n_xfer_p += 1
                run += 1
                run_end = pos
            # a faulted page leaves the batch here (every one is made resident by its
            # block's service): no separate pass over the batch clears INB
            S.pstate[d] = (ps | RES | POP) & ~INB
            n_new += 1
            if new_first < 0:
                new_first = pos
            new_last = pos
    if run:
        S.driver[0].step_ns += htod_ns(S, run)
    # a fault's pages from the host (demand or prefetch) cost the driver's per-page work
    # beyond their copy (hw.migrate_page_ns; docs/semantics.md "Time")
    n_mig = 0
    if cause_f <= CAUSE_PREFETCH:
        n_mig += n_xfer_f
    if cause_p <= CAUSE_PREFETCH:
        n_mig += n_xfer_p
    if n_mig:
        S.driver[0].step_ns += n_mig * S.hw[0].migrate_page_ns
    S.counts[out_row, C_ZERO_FILL] += n_zero
    if n_xfer_f:
        S.counts[out_row, CAUSE_HTOD_COL[cause_f]] += n_xfer_f * 4096
    if n_xfer_p:
        S.counts[out_row, CAUSE_HTOD_COL[cause_p]] += n_xfer_p * 4096
    S.b_nres[blk] += n_new
    return n_new, new_first, new_last


@_jit
def make_range_resident(est, S, T, blk, lo, hi, cause, out_row, tick):
    """make_resident for every position lo..hi of a block with one cause (range events)."""
    for w in range(8):
        S.wbits[w] = word_mask(w, lo, hi)
    make_resident(est, S, T, blk, False, cause, cause, out_row, tick)


@_jit
def prefetch_to_cpu(est, S, T, blk, lo, hi, out_row, col):
    """Copy a block's resident pages lo..hi back to the host, counted in column `col`
    (cudaMemPrefetchAsync to the CPU, or a host access); free an emptied chunk. Returns
    the pages copied."""
    if S.b_chunk[blk] == -1:
        return 0
    p0 = T.b_page0[blk] - T.b_lo[blk]
    off = blk * 8
    n = 0
    run = 0
    run_end = -2
    for w in range(lo >> 6, (hi >> 6) + 1):
        wm = word_mask(w, lo, hi)
        m = S.bres[off + w] & wm
        S.bres[off + w] &= ~wm
        while m:
            pos = (w << 6) + np.int64(ctz(m))
            m &= m - np.uint64(1)
            if run and run_end != pos - 1:
                S.driver[0].step_ns += dtoh_ns(S, run)
                run = 0
            d = p0 + pos
            S.pstate[d] &= ~(RES | DUP)
            n += 1
            run += 1
            run_end = pos
    if run:
        S.driver[0].step_ns += dtoh_ns(S, run)
    S.counts[out_row, col] += n * 4096
    if n and S.translation[0].on:
        tlb_shootdown(S, blk, np.int64(lo), np.int64(hi))
    S.b_nres[blk] -= n
    if n and S.b_chunk[blk] == SHARED:
        free_units(est, S, T, blk, max(lo, np.int64(T.b_lo[blk])),
                   min(hi, np.int64(T.b_hi[blk])))
        if S.b_nres[blk] == 0:
            S.b_chunk[blk] = -1
    elif n and S.b_nres[blk] == 0:
        release_chunk(est, S, T, blk)
    return n


@_jit
def free_alloc(est, S, T, a):
    """cudaFree: pages become unpopulated and not resident with no transfer."""
    p0 = T.a_page_off[a]
    for d in range(p0, p0 + T.a_npages[a]):
        S.pstate[d] = 0
    b0 = T.a_block_off[a]
    for blk in range(b0, b0 + T.a_nblocks[a]):
        S.b_nres[blk] = 0
        for w in range(8):
            S.bres[blk * 8 + w] = 0
        c = S.b_chunk[blk]
        if c != -1:
            if S.translation[0].on:
                tlb_shootdown(S, blk, np.int64(T.b_lo[blk]), np.int64(T.b_hi[blk]))
            if c == SHARED:
                free_units(est, S, T, blk, np.int64(T.b_lo[blk]), np.int64(T.b_hi[blk]))
                S.b_chunk[blk] = -1
            else:
                release_chunk(est, S, T, blk)


# ---- partial_blocks (docs/semantics.md, "Partial blocks"; docs/model.md, item 4): the
# driver backs a VA block smaller than 2 MiB with 64 KiB chunks, and 4 KiB ones at its
# unaligned ends (block_gpu_chunk_size in uvm_va_block.c), split from root chunks that
# other such blocks share (alloc_chunk_with_splits in uvm_pmm_gpu.c); a root chunk is
# evicted whole, with every block's chunks in it. Here a partial block's chunks are its
# units; a root chunk holding units is a shared root (chunk_block SHARED), and the eviction
# policy sees it as any chunk: it moves to the recent end when a unit is allocated in it
# (the driver marks a root chunk used when a chunk split from it is allocated; only a
# 2 MiB block marks its root again on later migrations, block_mark_memory_used).


@_jit
def is_partial(S, blk):
    """Whether a block takes units of shared root chunks (partial_blocks on, and the block
    covers less than its 2 MiB window)."""
    return S.pool[0].partial_blocks != 0 and S.b_slot[blk] >= 0


@_jit
def unit_of(T, blk, pos):
    """The unit of a partial block holding position pos: (unit, first, last position). A
    64 KiB-aligned group of 16 positions wholly inside the block is one unit (0..31, by
    group); a position of a group the block covers in part is a unit of its own: 32 + its
    offset in the block's first group, or 48 + its offset in the block's last."""
    lo = np.int64(T.b_lo[blk])
    hi = np.int64(T.b_hi[blk])
    g = pos >> 4
    if (g << 4) >= lo and (g << 4) + 15 <= hi:
        return g, g << 4, (g << 4) + 15
    if g == (lo >> 4):
        return 32 + (pos & 15), pos, pos
    return 48 + (pos & 15), pos, pos


@_jit
def unit_range(T, blk, u):
    """First and last position of unit u of a partial block (the inverse of unit_of)."""
    if u < 32:
        return u << 4, (u << 4) + 15
    if u < 48:
        p = ((np.int64(T.b_lo[blk]) >> 4) << 4) + (u - 32)
        return p, p
    p = ((np.int64(T.b_hi[blk]) >> 4) << 4) + (u - 48)
    return p, p


@_jit
def make_resident_partial(est, S, T, blk, use_masks, cause_f, cause_p, out_row, tick):
    """make_resident for a partial block: the units of the positions in S.wbits that are
    not resident yet are allocated first (take_units), then the positions are filled."""
    take_units(est, S, T, blk, out_row, tick)
    fill_positions(S, blk, T.b_page0[blk] - T.b_lo[blk], use_masks, cause_f, cause_p,
                   out_row)
    if S.b_nres[blk] > 0:
        S.b_chunk[blk] = SHARED


@_jit
def take_units(est, S, T, blk, out_row, tick):
    """Allocate the missing units of the positions in S.wbits that are not resident, in
    position order. An allocation may evict a shared root holding units this call took
    already (or the block's resident pages): the positions are walked again until a walk
    allocates nothing. That ends: once a fresh root chunk is taken, the block's remaining
    units (at most 511 pages) all fit in it."""
    base = np.int64(S.b_slot[blk]) * UNITS
    off = blk * 8
    again = True
    while again:
        again = False
        for w in range(8):
            m = S.wbits[w] & ~S.bres[off + w]
            while m:
                pos = (w << 6) + np.int64(ctz(m))
                m &= m - np.uint64(1)
                u, ulo, uhi = unit_of(T, blk, pos)
                if S.u_root[base + u] < 0:
                    alloc_unit(est, S, T, blk, base + u, ulo, uhi, out_row, tick)
                    again = True


@_jit
def open_root(S, size):
    """The shared root chunk a unit of `size` pages goes to: the one that took the last
    unit if it has room, else the lowest-numbered one with room; -1 if none has."""
    r = S.pool[0].cur_root
    if r >= 0 and S.chunk_block[r] == SHARED and S.r_room[r] >= size:
        return r
    for c in range(S.chunk_block.size):
        if S.chunk_block[c] == SHARED and S.r_room[c] >= size:
            return c
    return -1


@_jit
def alloc_unit(est, S, T, blk, uid, ulo, uhi, out_row, tick):
    """Give unit uid (positions ulo..uhi of blk) room in a shared root chunk: an open one
    with room, else a new root chunk (a free one, or one the policy's victims free)."""
    size = uhi - ulo + 1
    r = open_root(S, size)
    if r < 0:
        while S.pool[0].n_free == 0:
            evict_one(est, S, T, out_row, tick)
        S.pool[0].n_free -= 1
        r = np.int64(S.free_stack[S.pool[0].n_free])
        S.chunk_block[r] = SHARED
        S.r_head[r] = -1
        S.r_room[r] = 512
        S.t_chunks[S.b_tenant[blk]] += 1
    h = S.r_head[r]
    S.u_prev[uid] = -1
    S.u_next[uid] = h
    if h >= 0:
        S.u_prev[h] = uid
    S.r_head[r] = uid
    S.u_root[uid] = r
    S.r_room[r] -= size
    S.pool[0].cur_root = r
    EV_ON_FILL(est, S, T, r, blk, ulo, uhi, 0, tick)


@_jit
def unlink_unit(S, uid, r):
    """Take unit uid out of root chunk r's list; it holds no room any more."""
    p = S.u_prev[uid]
    n = S.u_next[uid]
    if p >= 0:
        S.u_next[p] = n
    else:
        S.r_head[r] = n
    if n >= 0:
        S.u_prev[n] = p
    S.u_prev[uid] = -1
    S.u_next[uid] = -1
    S.u_root[uid] = -1


@_jit
def release_root(est, S, T, r, ten):
    """Return a shared root chunk that holds no unit to the free pool."""
    S.chunk_block[r] = -1
    S.r_head[r] = -1
    S.r_room[r] = 0
    S.free_stack[S.pool[0].n_free] = r
    S.pool[0].n_free += 1
    S.t_chunks[ten] -= 1
    if S.pool[0].cur_root == r:
        S.pool[0].cur_root = -1
    EV_ON_RELEASE(est, S, T, r, -1)


@_jit
def free_units(est, S, T, blk, lo, hi):
    """Return the units of a partial block among positions lo..hi that hold no resident
    page; a shared root chunk left with no unit is free."""
    base = np.int64(S.b_slot[blk]) * UNITS
    off = blk * 8
    pos = lo
    while pos <= hi:
        u, ulo, uhi = unit_of(T, blk, pos)
        r = np.int64(S.u_root[base + u])
        if r >= 0 and count_range(S.bres, off, ulo, uhi) == 0:
            unlink_unit(S, base + u, r)
            S.r_room[r] += uhi - ulo + 1
            if S.r_head[r] < 0:
                release_root(est, S, T, r, S.b_tenant[blk])
        pos = uhi + 1


@_jit
def evict_root(est, S, T, r, out_row):
    """Evict shared root chunk r: every unit in it copies its resident pages back (one
    copy per run of adjacent resident positions within the unit) and is returned; one
    evicted chunk."""
    n_all = 0
    ten = 0
    u = np.int64(S.r_head[r])
    while u >= 0:
        nxt = np.int64(S.u_next[u])
        slot = u // UNITS
        blk = np.int64(S.slot_block[slot])
        ten = S.b_tenant[blk]
        ulo, uhi = unit_range(T, blk, u - slot * UNITS)
        if S.translation[0].on:
            tlb_shootdown(S, blk, ulo, uhi)
        n, ndup = copy_back(S, T, blk, ulo, uhi)
        S.b_nres[blk] -= n + ndup
        n_all += n
        if n + ndup:
            on_evicted(S, blk, ulo, uhi)
        S.u_root[u] = -1
        S.u_next[u] = -1
        S.u_prev[u] = -1
        if S.b_nres[blk] == 0:
            S.b_chunk[blk] = -1
        u = nxt
    S.r_head[r] = -1
    S.counts[out_row, C_DTOH_EVICT] += n_all * 4096
    release_root(est, S, T, r, ten)
    S.counts[out_row, C_EVICTED] += 1
    S.driver[0].step_ns += S.hw[0].evict_ns
