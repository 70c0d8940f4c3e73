# Part of the replay engine: MEMORY. Chunks, residency and eviction.
#
# A template part: uvmsim.engine.build joins the parts into one generated module per policy
# pair (docs/architecture.md), so the names below come from the header it writes (state,
# bits, link, trace format, hooks) and from the other parts.
#
# Owns: S.pstate, S.bres, S.b_nres, S.b_chunk, S.chunk_block, S.free_stack, S.pool[0],
# S.victim, S.wbits, S.b_tenant, S.t_chunks. A block holds one 2 MiB chunk while any of its pages is
# resident (with small_blocks, only its own pages count against the capacity).
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
    """Ask the policy for a victim and copy its resident pages back (no dirty bits).

    Walks only the resident positions of the victim range (set bits of S.bres); each
    maximal run of adjacent resident positions is one copy, as in a walk over every
    position (a read duplicate ends a run: it is dropped, not copied)."""
    EV_VICTIM(est, S, T, tick)
    c = S.victim[0]
    if c < 0 or c >= S.chunk_block.size:
        raise RuntimeError("eviction policy named a chunk that does not exist")
    blk = np.int64(S.chunk_block[c])  # int64 like release_chunk's other callers' blocks
    if blk < 0:
        raise RuntimeError("eviction policy named a chunk that is not in use")
    if S.pool[0].victim_tenant >= 0 and S.b_tenant[blk] != S.pool[0].victim_tenant:
        raise RuntimeError("eviction policy named a chunk of another tenant than asked")
    lo = T.b_lo[blk]
    p0 = T.b_page0[blk] - lo
    first = max(S.victim[1], lo)
    last = min(S.victim[2], T.b_hi[blk])
    if S.translation[0].on:
        tlb_shootdown(S, blk, first, last)
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
    if S.b_chunk[blk] < 0:
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
    if n and S.b_nres[blk] == 0:
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
        if S.b_chunk[blk] >= 0:
            if S.translation[0].on:
                tlb_shootdown(S, blk, np.int64(T.b_lo[blk]), np.int64(T.b_hi[blk]))
            release_chunk(est, S, T, blk)
