# The fast replay engine, as a template.
#
# This file is not imported. uvmsim.engine.build prepends a header that binds the policy
# hooks and `_jit`, writes the result to the engine cache and imports that, so every
# (prefetch, eviction) pair gets its own compiled and disk-cached engine in which the hooks
# are direct calls LLVM can inline. The engine names no policy: it only calls
#   PF_PREFETCH(pst, S, T, blk, lo, hi)                       -> writes S.pbits
#   EV_ON_FILL(est, S, T, chunk, blk, first, last, n_new, tick)
#   EV_ON_HIT(est, S, T, chunk, blk, pos, tick)
#   EV_ON_RELEASE(est, S, T, chunk, blk)
#   EV_VICTIM(est, S, T, tick)                                -> writes S.victim
#   WK_PICK(wst, S, ten, t)            -> the page-table walker that takes a walk
#   SC_ADMIT(sst, S, T, ten, k, live)  -> may tenant ten start kernel k now
#   SC_START(sst, S, T, ten, k, live)  -> kernel k starts: a tenant to reclaim a chunk from
#   MEM_RESERVE(S.mem, S, T, ten)      -> before tenant ten takes a chunk: -1, or the tenant
#                                         one of whose chunks must be evicted first
# Step names match uvmsim.reference, which models the same steps in SimPy.
# Semantics: docs/model.md and the spec's driver-model.md.

OP_ALLOC, OP_FREE, OP_KERNEL, OP_HTOD, OP_DTOH, OP_DTOD, OP_MEMSET, OP_PREFETCH = range(8)
ARG_GPU, ARG_CPU = 1, 2


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
    if S.scal[S_VTEN] >= 0 and S.b_tenant[blk] != S.scal[S_VTEN]:
        raise RuntimeError("eviction policy named a chunk of another tenant than asked")
    lo = T.b_lo[blk]
    p0 = T.b_page0[blk] - lo
    first = max(S.victim[1], lo)
    last = min(S.victim[2], T.b_hi[blk])
    if S.xli[XL_ON]:
        tlb_shootdown(S, blk, first, last)
    n = 0
    ndup = 0
    run = 0
    run_end = -2
    off = blk * 8
    # read duplicates exist only with the advise option; without them every resident page
    # is copied, so each run of adjacent set bits is cleared in one tight loop
    runs_only = S.fcfg[F_ADVISE] == 0.0
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
                    S.tacc[0] += S.xfer[1, run]
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
                    S.tacc[0] += S.xfer[1, run]
                    run = 0
                if ps & DUP:
                    # a read duplicate (read-mostly hint): the CPU copy is current, drop it
                    S.pstate[d] = ps & ~(RES | DUP)
                    ndup += 1
                    if run:
                        S.tacc[0] += S.xfer[1, run]
                        run = 0
                else:
                    S.pstate[d] = ps & ~RES
                    n += 1
                    run += 1
                    run_end = pos
    if run:
        S.tacc[0] += S.xfer[1, run]
    if n + ndup == 0:
        raise RuntimeError("eviction policy named a range with no resident page")
    S.counts[out_row, C_DTOH_EVICT] += n * 4096
    S.b_nres[blk] -= n + ndup
    if S.fcfg[F_REMOTE] == REMOTE_UVMSMART:
        ft_round_trip(S, blk, first, last)
    if S.b_nres[blk] == 0:
        release_chunk(est, S, T, blk)
        S.counts[out_row, C_EVICTED] += 1
        S.tacc[0] += S.hw[HW_EVICT_NS]


@_jit
def release_chunk(est, S, T, blk):
    """Return a block's chunk to the free pool (its pages are already not resident)."""
    c = S.b_chunk[blk]
    S.b_chunk[blk] = -1
    S.chunk_block[c] = -1
    S.free_stack[S.scal[S_NFREE]] = c
    S.scal[S_NFREE] += 1
    if S.fcfg[F_SMALL] != 0.0:
        S.scal[S_FREEPG] += block_pages(T, blk)
    S.t_chunks[S.b_tenant[blk]] -= 1
    EV_ON_RELEASE(est, S, T, c, blk)


@_jit
def block_pages(T, blk):
    """GPU memory a block's chunk takes with the small_blocks option, in 4 KiB pages: its
    own pages (512 for a whole 2 MiB block), as the driver backs a VA block smaller than
    2 MiB with 64 KiB and 4 KiB chunks, not a root chunk (docs/semantics.md)."""
    return np.int64(T.b_hi[blk]) - np.int64(T.b_lo[blk]) + 1


@_jit
def ensure_chunk(est, S, T, blk, out_row, tick):
    """Step 1: the block takes a free chunk, evicting the policy's victims until one is free
    (with small_blocks: until its own pages of GPU memory are free).

    The memory component (MEM_RESERVE) may first demand evictions from one tenant's chunks
    (a quota): the policy's victim is then restricted to that tenant (S_VTEN)."""
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
        S.scal[S_VTEN] = j
        evict_one(est, S, T, out_row, tick)
        S.scal[S_VTEN] = -1
    while S.scal[S_NFREE] == 0:
        evict_one(est, S, T, out_row, tick)
    if S.fcfg[F_SMALL] != 0.0:
        # capacity in pages: evict until the block's own pages fit (the pool then holds a
        # chunk for every block, so a free chunk id never runs out first)
        need = block_pages(T, blk)
        while S.scal[S_FREEPG] < need:
            evict_one(est, S, T, out_row, tick)
        S.scal[S_FREEPG] -= need
    S.scal[S_NFREE] -= 1
    c = S.free_stack[S.scal[S_NFREE]]
    S.chunk_block[c] = blk
    S.b_chunk[blk] = c
    S.t_chunks[ten] += 1
    return c


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
                S.tacc[0] += S.xfer[0, run]
                run = 0
            if cause == CAUSE_MEMSET or (cause != CAUSE_MEMCPY and not (ps & POP)):
                n_zero += 1
                S.tacc[0] += S.hw[HW_ZERO_NS]
                if run:
                    S.tacc[0] += S.xfer[0, run]
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
        S.tacc[0] += S.xfer[0, run]
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
def sort_keys(keys, limit):
    """Sort the batch's keys (each below `limit`); a batch from a sequential scan arrives
    sorted already."""
    for i in range(1, keys.size):
        if keys[i] < keys[i - 1]:
            radix_sort(keys, limit)
            return


@_jit
def radix_sort(keys, limit):
    """Sort non-negative keys below `limit` in place: least significant byte first, one
    counting pass per byte the keys use. A batch of random faults sorts this way in about
    a third of the time of a comparison sort."""
    n = keys.size
    src = keys
    dst = np.empty(n, np.int64)
    cnt = np.empty(256, np.int64)
    shift = 0
    odd = False
    while (limit - 1) >> shift:
        cnt[:] = 0
        for i in range(n):
            cnt[(src[i] >> shift) & 255] += 1
        t = 0
        for b in range(256):
            c = cnt[b]
            cnt[b] = t
            t += c
        for i in range(n):
            v = src[i]
            b = (v >> shift) & 255
            dst[cnt[b]] = v
            cnt[b] += 1
        src, dst = dst, src
        shift += 8
        odd = not odd
    if odd:
        keys[:] = src


@_jit
def service_batch(pst, est, S, T, nb, out_row, tick):
    """Service the open fault batch: blocks in order, prefetch, make resident.

    Per block: its faulted positions become S.fbits, its resident ones S.rbits (8 words
    copied from S.bres), the policy writes S.pbits; the work is the batch's pages, the
    pages moved and a few word operations per block."""
    keys = S.batch_key[:nb]
    S.scal[S_NBATCH] = nb
    for i in range(nb):
        d = S.batch_page[i]
        keys[i] = S.b_rank[T.page_block[d]] * 512 + T.page_pos[d]
    sort_keys(keys, S.b_rank.size * 512)
    i = 0
    while i < nb:
        rk = keys[i] >> 9
        blk = S.rank_block[rk]
        lo = T.b_lo[blk]
        hi = T.b_hi[blk]
        off = blk * 8
        for w in range(8):
            S.fbits[w] = 0
            S.pbits[w] = 0
            S.rbits[w] = S.bres[off + w]
        j = i
        while j < nb and (keys[j] >> 9) == rk:
            set_bit(S.fbits, 0, keys[j] & 511)
            j += 1
        PF_PREFETCH(pst, S, T, blk, lo, hi)
        if S.fcfg[F_ON] != 0:
            ft_prefetch(S, T, blk, lo, hi)
        # positions outside lo..hi are not pages of this block: a policy's bits there
        # are ignored, as are faulted or resident ones
        for w in range(8):
            S.wbits[w] = (S.fbits[w] | S.pbits[w]) & word_mask(w, lo, hi)
        # make_resident, spelled out: a call passing the policy and engine state costs
        # more than this block's share of a batch of random faults (see make_resident)
        c = S.b_chunk[blk]
        if c < 0:
            c = ensure_chunk(est, S, T, blk, out_row, tick)
        n_new, new_first, new_last = fill_positions(S, blk, T.b_page0[blk] - lo, True,
                                                    CAUSE_DEMAND, CAUSE_PREFETCH, out_row)
        EV_ON_FILL(est, S, T, c, blk, new_first, new_last, n_new, tick)
        i = j
    S.counts[out_row, C_BATCHES] += 1
    S.scal[S_NBATCH] = 0


@_jit
def add_fault(S, T, k, r, d, ps, nb):
    """Step 2 of a kernel: put page d in the fault batch as a read or write fault
    (FaultBuffer.add in the reference model)."""
    S.pstate[d] = ps | INB
    S.batch_page[nb] = d
    S.counts[k, C_FAULTS] += 1
    # C_FAULTS_WRITE is C_FAULTS_READ + 1: no branch on the row's (random) access kind
    S.counts[k, C_FAULTS_READ + np.int64((T.row_flags[r] & 6) != 0)] += 1
    return nb + 1


@_jit
def service_now(pst, est, S, T, nb, k, tick):
    """Service kernel k's open fault batch (unclocked); returns the stall it adds."""
    S.tacc[0] = 0.0
    service_batch(pst, est, S, T, nb, k, tick)
    S.times[k, T_TRANSFER] += S.tacc[0]
    return S.hw[HW_BATCH_NS] + S.hw[HW_FAULT_NS] * nb + S.tacc[0]


@_jit
def kernel_passes(S, T, k):
    """Passes of kernel k's rows: its n_slices with the slices option on (docs/semantics.md),
    else 1."""
    if S.fcfg[F_SLICES] != 0 and T.row_slices.size:
        return T.k_nslices[k]
    return 1


@_jit
def pass_rows(T, r0, r1, bit):
    """Rows of a kernel in the pass whose slice bit is `bit`."""
    m = 0
    for r in range(r0, r1):
        if T.row_slices[r] & bit:
            m += 1
    return m


@_jit
def compute_ns(T, k):
    """Kernel k's traced compute time; 0 when unknown."""
    dur = T.k_duration_ns[k]
    return dur if dur > 0.0 else 0.0


@_jit
def run_kernel(pst, est, wst, S, T, k, batch_size, t0):
    """Replay one kernel's access rows with fault batching from time t0; returns when the
    kernel ends: t0 + its compute + its stalls, or its last page walk if that is later.

    One pass, or (slices option) one pass per time slice over the rows touched in it; the
    open batch carries across passes. Pass s issues its rows evenly over [s/n, (s+1)/n) of
    the kernel's compute time, shifted by the stalls so far (the mechanisms' clock, read
    only when they are on). The clocked replay passes its walker component's state `wst`:
    then each non-host row is translated (if translation is on) at its time and fault
    batches wait for the (shared) driver. The unclocked replay passes None: Numba prunes
    every `wst is None` branch while compiling, so that specialization is the plain loop,
    with no clock per row.
    """
    r0 = T.k_row_start[k]
    r1 = T.k_row_start[k + 1]
    nb = np.int64(0)  # typed: a literal would specialize service_now on it
    stall = 0.0
    ft = S.fcfg[F_ON] != 0
    if ft:
        S.fcfg[F_CLOCK] = t0
    xl = S.xli[XL_ON] != 0
    last = t0
    dur = compute_ns(T, k)
    n_pass = kernel_passes(S, T, k)
    sliced = n_pass > 1
    width = dur / n_pass
    for s in range(n_pass):
        bit = np.uint64(1) << np.uint64(s)
        m = pass_rows(T, r0, r1, bit) if sliced else r1 - r0
        gap = dur / (n_pass * m) if m > 0 else 0.0
        base = t0 + s * width
        j = -1
        for r in range(r0, r1):
            # one pass (the hot loop): `sliced` is False and no slice bit is read
            if sliced and not (T.row_slices[r] & bit):
                continue
            j += 1
            d = T.row_page[r]
            t = 0.0
            if wst is not None:
                # host pages are not translated (the unclocked replay checks them on a miss)
                if T.a_host[T.b_alloc[T.page_block[d]]]:
                    continue
                t = base + j * gap + stall
                if ft:
                    t += S.fcfg[F_PEND_NS]
                if xl:
                    ready = translate(wst, S, T, d, t, k)
                    if ready > last:
                        last = ready
            ps = S.pstate[d]
            if ps & RES:
                if ps & DUP and T.row_flags[r] & 6:
                    ft_write_dup(S, d)
                blk = T.page_block[d]
                EV_ON_HIT(est, S, T, S.b_chunk[blk], blk, T.page_pos[d], r)
                continue
            if ps & INB:
                continue
            if wst is None:
                if T.a_host[T.b_alloc[T.page_block[d]]]:
                    continue
            if ft:
                if wst is None:
                    t = base + j * gap + stall + S.fcfg[F_PEND_NS]
                # thrashing, remote mapping, hints: True when the access is served remotely
                if ft_miss(S, T, k, r, d, t):
                    continue
                ps = S.pstate[d]
            nb = add_fault(S, T, k, r, d, ps, nb)
            if nb == batch_size:
                if wst is None:
                    stall += service_now(pst, est, S, T, nb, k, r)
                else:
                    stall += service_clocked(pst, est, S, T, nb, k, r, t)
                nb = np.int64(0)
    if nb:
        if wst is None:
            stall += service_now(pst, est, S, T, nb, k, r1)
        else:
            t = t0 + dur + stall
            if ft:
                t += S.fcfg[F_PEND_NS]
            stall += service_clocked(pst, est, S, T, nb, k, r1, t)
    if ft:
        stall = ft_end_kernel(S, T, k, stall)
    end = t0 + dur + stall
    S.times[k, T_STALL] += stall
    if last > end:
        S.times[k, T_XLATE] += last - end
        S.times[k, T_STALL] += last - end
        end = last
    return end


@_jit
def for_each_block(T, seg):
    """First/last block of a segment (helper for range events)."""
    return T.page_block[T.seg_first[seg]], T.page_block[T.seg_last[seg]]


@_jit
def range_event(pst, est, S, T, e, out_row, tick):
    """memcpy_htod, memset and prefetch: clipped to live non-host allocations, by block."""
    op = T.ev_op[e]
    S.tacc[0] = 0.0
    for seg in range(T.ev_seg_start[e], T.ev_seg_start[e + 1]):
        if T.a_host[T.seg_alloc[seg]]:
            continue
        b_first, b_last = for_each_block(T, seg)
        for blk in range(b_first, b_last + 1):
            lo = T.page_pos[T.seg_first[seg]] if blk == b_first else T.b_lo[blk]
            hi = T.page_pos[T.seg_last[seg]] if blk == b_last else T.b_hi[blk]
            if op == OP_PREFETCH and T.ev_arg[e] != ARG_GPU:
                prefetch_to_cpu(est, S, T, blk, lo, hi, out_row, np.int64(C_DTOH_API))
                continue
            cause = CAUSE_API
            if op == OP_HTOD:
                cause = CAUSE_MEMCPY
            elif op == OP_MEMSET:
                cause = CAUSE_MEMSET
            make_range_resident(est, S, T, blk, lo, hi, cause, out_row, tick)
    S.times[out_row, T_TRANSFER] += S.tacc[0]
    S.times[out_row, T_STALL] += S.tacc[0]


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
                S.tacc[0] += S.xfer[1, run]
                run = 0
            d = p0 + pos
            S.pstate[d] &= ~(RES | DUP)
            n += 1
            run += 1
            run_end = pos
    if run:
        S.tacc[0] += S.xfer[1, run]
    S.counts[out_row, col] += n * 4096
    if n and S.xli[XL_ON]:
        tlb_shootdown(S, blk, np.int64(lo), np.int64(hi))
    S.b_nres[blk] -= n
    if n and S.b_nres[blk] == 0:
        release_chunk(est, S, T, blk)
    return n


@_jit
def host_access_event(est, S, T, e, out_row):
    """host_access (v1.1, option): the CPU touched the event's range (clipped to live
    non-host allocations). GPU-resident pages are copied back (dtoh_bytes_host) and stay
    populated, an emptied chunk returns to the pool; unpopulated pages become populated
    with no transfer (host_populated_pages). Each such page costs HW_HOST_FAULT_NS on top
    of the copies. Leaves the event's time in S.tacc."""
    S.tacc[0] = 0.0
    moved = 0
    thrash = S.fcfg[F_THRASH] != 0
    for seg in range(T.ev_seg_start[e], T.ev_seg_start[e + 1]):
        if T.a_host[T.seg_alloc[seg]]:
            continue
        b_first, b_last = for_each_block(T, seg)
        for blk in range(b_first, b_last + 1):
            lo = T.page_pos[T.seg_first[seg]] if blk == b_first else T.b_lo[blk]
            hi = T.page_pos[T.seg_last[seg]] if blk == b_last else T.b_hi[blk]
            p0 = T.b_page0[blk] - T.b_lo[blk]
            for pos in range(lo, hi + 1):
                d = p0 + pos
                ps = S.pstate[d]
                if ps & RES:
                    if thrash:
                        # a CPU fault migrating the page back is a migration event
                        ft_thrash_event(S, d, S.fcfg[F_CLOCK])
                elif not (ps & POP):
                    S.pstate[d] = ps | POP
                    S.counts[out_row, C_HOST_POP] += 1
                    moved += 1
            moved += prefetch_to_cpu(est, S, T, blk, lo, hi, out_row, np.int64(C_DTOH_HOST))
    S.times[out_row, T_TRANSFER] += S.tacc[0]
    S.tacc[0] += moved * S.hw[HW_HOST_FAULT_NS]
    S.times[out_row, T_STALL] += S.tacc[0]


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
            if S.xli[XL_ON]:
                tlb_shootdown(S, blk, np.int64(T.b_lo[blk]), np.int64(T.b_hi[blk]))
            release_chunk(est, S, T, blk)


@_jit
def replay(pst, est, S, T, batch_size):
    """Replay every event in program order; counts and times accumulate in S."""
    # typed zeros: a literal argument is its own type to Numba, so `0` here would compile
    # a second copy of every function it reaches besides the streamed replay's int64 one
    return replay_span(pst, est, S, T, batch_size, np.int64(0), T.ev_op.size, np.int64(0))


@_jit
def replay_span(pst, est, S, T, batch_size, e0, e1, tick):
    """Replay events e0..e1-1; `tick` is the row count of the kernels before e0. Every state
    lives in S and the policies' tuples, so consecutive spans replay like one `replay` (a
    streamed trace is replayed span by span, src/uvmsim/stream.py)."""
    n_k = T.k_row_start.size - 1
    outside = n_k
    for e in range(e0, e1):
        op = T.ev_op[e]
        if op == OP_KERNEL:
            k = T.ev_kernel[e]
            run_kernel(pst, est, None, S, T, k, batch_size, S.fcfg[F_CLOCK])
            tick = T.k_row_start[k + 1]
        elif op == OP_FREE:
            free_alloc(est, S, T, T.ev_alloc[e])
        elif op == OP_HTOD or op == OP_MEMSET or op == OP_PREFETCH:
            range_event(pst, est, S, T, e, outside, tick)
            if S.fcfg[F_ON] != 0:
                S.fcfg[F_CLOCK] = S.fcfg[F_CLOCK] + S.tacc[0]
        elif op == OP_HOST_ACCESS and S.fcfg[F_HOST_ACCESS] != 0:
            host_access_event(est, S, T, e, outside)
            if S.fcfg[F_ON] != 0:
                S.fcfg[F_CLOCK] = S.fcfg[F_CLOCK] + S.tacc[0]
        elif op == OP_ADVISE and S.fcfg[F_ADVISE] != 0:
            ft_advise(S, T, e)
    return 0


# ---------------------------------------------------------------------------------------
# The clocked replay: address translation and tenants sharing one GPU.
# Used only when translation is on or several tenants run; it shares run_kernel with
# `replay` above (a walker state selects the clocked steps, None compiles them out). The
# reference model mirrors these by name too.


@_jit
def tlb_shootdown(S, blk, lo, hi):
    """Pages lo..hi of a block left the GPU: drop the TLB entries that translate them."""
    sh = S.xli[XL_SHIFT]
    ways = S.xli[XL_WAYS]
    ten = S.b_tenant[blk]
    for vt in range((S.b_vbase[blk] + lo) >> sh, ((S.b_vbase[blk] + hi) >> sh) + 1):
        tag = vt * S.t_chunks.size + ten
        base = tlb_set_base(S, ten, vt)
        for w in range(base, base + ways):
            if S.tlb_tag[w] == tag:
                S.tlb_tag[w] = -1
                break


@_jit
def tlb_set_base(S, ten, vt):
    """First way of the TLB set that holds tenant ten's virtual page vt (of translation
    size). With the TLB sliced among tenants (S.xli[XL_TLB_SLICES] = their number) a
    tenant's pages map only into its own equal share of the sets. Tenants' pages are spread
    by TLB_TENANT_SPREAD (uvmsim.engine.state); ten < MAX_TENANTS and vt < 2^50 keep the
    sum below 2^63."""
    h = (ten << (TLB_TENANT_SPREAD - S.xli[XL_SHIFT])) + vt
    nsets = S.xli[XL_SETS]
    n = S.xli[XL_TLB_SLICES]
    if n > 0:
        per = nsets // n
        return ((ten % n) * per + h % per) * S.xli[XL_WAYS]
    return (h % nsets) * S.xli[XL_WAYS]


@_jit
def translate(wst, S, T, d, t, row):
    """TLB lookup for dense page d at time t; a miss walks on the walker the walker
    component picks. Returns when the translation is ready (t on a hit)."""
    blk = T.page_block[d]
    ten = S.b_tenant[blk]
    vt = (S.b_vbase[blk] + T.page_pos[d]) >> S.xli[XL_SHIFT]
    tag = vt * S.t_chunks.size + ten  # tenants' pages never share a tag (MAX_TENANTS)
    ways = S.xli[XL_WAYS]
    base = tlb_set_base(S, ten, vt)
    S.xli[XL_TICK] += 1
    slot = -1
    for w in range(base, base + ways):
        if S.tlb_tag[w] == tag:
            S.tlb_used[w] = S.xli[XL_TICK]
            if S.tlb_ready[w] > t:
                # its walk is still in flight: wait for it instead of walking again
                S.counts[row, C_TLB_MISSES] += 1
                return S.tlb_ready[w]
            return t
        # replacement: the first empty way, else the least recently used
        if slot < 0 or (S.tlb_tag[slot] >= 0 and
                        (S.tlb_tag[w] < 0 or S.tlb_used[w] < S.tlb_used[slot])):
            slot = w
    S.counts[row, C_TLB_MISSES] += 1
    S.counts[row, C_PAGE_WALKS] += 1
    wk = WK_PICK(wst, S, ten, t)
    if wk < 0 or wk >= S.walk_free.size:
        raise RuntimeError("walker component picked a walker that does not exist")
    start = max(t, S.walk_free[wk])
    done = start + S.xlf[XF_WALK_NS]
    S.walk_free[wk] = done
    S.times[row, T_WALKQ] += start - t
    if S.pstate[d] & RES:
        # only a valid PTE is cached; a walk that ends in a fault leaves no entry
        S.tlb_tag[slot] = tag
        S.tlb_ready[slot] = done
        S.tlb_used[slot] = S.xli[XL_TICK]
    return done


@_jit
def service_clocked(pst, est, S, T, nb, k, tick, t):
    """service_batch once the (shared) driver is free; returns the stall it adds."""
    start = max(t, S.xlf[XF_DRIVER_FREE])
    S.tacc[0] = 0.0
    service_batch(pst, est, S, T, nb, k, tick)
    cost = S.hw[HW_BATCH_NS] + S.hw[HW_FAULT_NS] * nb + S.tacc[0]
    S.times[k, T_TRANSFER] += S.tacc[0]
    S.times[k, T_DRV_WAIT] += start - t
    S.xlf[XF_DRIVER_FREE] = start + cost
    return (start - t) + cost


@_jit
def range_event_clocked(pst, est, S, T, e, out_row, tick, t):
    """range_event (or host_access_event) once the (shared) driver and its copy engine are
    free; returns its end."""
    start = max(t, S.xlf[XF_DRIVER_FREE])
    if T.ev_op[e] == OP_HOST_ACCESS:
        S.fcfg[F_CLOCK] = start
        host_access_event(est, S, T, e, out_row)
    else:
        range_event(pst, est, S, T, e, out_row, tick)
    S.times[out_row, T_STALL] += start - t
    S.times[out_row, T_DRV_WAIT] += start - t
    S.xlf[XF_DRIVER_FREE] = start + S.tacc[0]
    return start + S.tacc[0]


@_jit
def reclaim(est, sst, S, T, ten, k, tick, t):
    """Kernel k of tenant ten starts at t: the scheduler component (SC_START) may name
    tenants to take chunks back from first (proactive reclamation). Each names one
    eviction of that tenant's chunks by the policy (S_VTEN), done by the driver from when it
    is free (counted in kernel k's row); the kernel does not wait for them, but its own
    batches queue behind them."""
    j = SC_START(sst, S, T, ten, k, S.t_live)
    if j < 0:
        return
    start = max(t, S.xlf[XF_DRIVER_FREE])
    S.tacc[0] = 0.0
    while j >= 0:
        if j >= S.t_chunks.size or S.t_chunks[j] <= 0:
            raise RuntimeError("scheduler asked to reclaim from a tenant holding no chunk")
        S.scal[S_VTEN] = j
        evict_one(est, S, T, k, tick)
        S.scal[S_VTEN] = -1
        j = SC_START(sst, S, T, ten, k, S.t_live)
    S.times[k, T_TRANSFER] += S.tacc[0]
    S.xlf[XF_DRIVER_FREE] = start + S.tacc[0]


@_jit
def replay_clocked(pst, est, wst, sst, S, T, batch_size, ten_ev, ten_out, clock, waited):
    """Replay tenants' events on one clock; one tenant is a plain clocked replay.

    Tenant i owns events ten_ev[i]..ten_ev[i+1]-1, collects what happens outside its
    kernels in row ten_out[i], and clock[i] is its time (updated in place). The tenant
    whose clock is earliest (ties: lowest index) among those not waiting runs its next
    event whole. A kernel the scheduler component does not admit waits: its tenant asks
    again once another tenant's event ends, its clock moved to that end (the time is added
    to waited[i] and to its outside row's stall). When every tenant with events left is
    waiting, the earliest runs anyway. Before a kernel starts the scheduler may reclaim
    chunks (reclaim). S.t_live[i] is 1 while tenant i has events left.
    """
    n_t = ten_ev.size - 1
    cur = ten_ev[:n_t].copy()
    tick = ten_ev[:n_t].copy()
    wait = np.zeros(n_t, np.uint8)
    live = S.t_live
    for i in range(n_t):
        tick[i] = 0
        live[i] = 1 if cur[i] < ten_ev[i + 1] else 0
    while True:
        i = np.int64(-1)  # typed: a literal -1 would specialize the scheduler hooks on it
        for j in range(n_t):
            if live[j] and not wait[j] and (i < 0 or clock[j] < clock[i]):
                i = j
        forced = i < 0
        if forced:
            for j in range(n_t):
                if live[j] and (i < 0 or clock[j] < clock[i]):
                    i = j
        if i < 0:
            break
        e = cur[i]
        op = T.ev_op[e]
        if op == OP_KERNEL and not forced and not SC_ADMIT(sst, S, T, i, T.ev_kernel[e],
                                                            live):
            wait[i] = 1
            continue
        cur[i] += 1
        if op == OP_KERNEL:
            k = T.ev_kernel[e]
            reclaim(est, sst, S, T, i, k, tick[i], clock[i])
            clock[i] = run_kernel(pst, est, wst, S, T, k, batch_size, clock[i])
            tick[i] = T.k_row_start[k + 1]
        elif op == OP_FREE:
            free_alloc(est, S, T, T.ev_alloc[e])
        elif (op == OP_HTOD or op == OP_MEMSET or op == OP_PREFETCH or
              (op == OP_HOST_ACCESS and S.fcfg[F_HOST_ACCESS] != 0)):
            clock[i] = range_event_clocked(pst, est, S, T, e, ten_out[i], tick[i], clock[i])
        elif op == OP_ADVISE and S.fcfg[F_ADVISE] != 0:
            ft_advise(S, T, e)
        if cur[i] == ten_ev[i + 1]:
            live[i] = 0
        for j in range(n_t):
            if wait[j]:
                wait[j] = 0
                if clock[i] > clock[j]:
                    waited[j] += clock[i] - clock[j]
                    S.times[ten_out[j], T_STALL] += clock[i] - clock[j]
                    clock[j] = clock[i]
    return 0


# ---------------------------------------------------------------------------------------
# Thrashing mitigation, remote mapping with access counters, and cudaMemAdvise hints
# (docs/policies.md). Off unless simulate() turns them on (S.fcfg[F_ON]); then a
# GPU miss goes through ft_miss before it may fault. Times are on a feature clock: kernel
# compute spread evenly over its rows (over the slice, per pass) plus the stalls so far
# (F_CLOCK, F_PEND_NS); it advances by the time of copies and host accesses between kernels.


@_jit
def ft_end_kernel(S, T, k, stall):
    """Add the mechanisms' stall to the kernel's and move the clock to the kernel's end
    (the same sum the clocked replay makes: start + compute + stall)."""
    stall += S.fcfg[F_PEND_NS]
    S.fcfg[F_PEND_NS] = 0.0
    S.fcfg[F_CLOCK] = S.fcfg[F_CLOCK] + compute_ns(T, k) + stall
    return stall


@_jit
def ft_remote(S, T, k, r, d):
    """Row r is served over the link from CPU memory: `count` remote accesses, no fault."""
    n = T.row_count[r]
    S.counts[k, C_REMOTE] += n
    S.fcfg[F_PEND_NS] += n * S.fcfg[F_REMOTE_NS]
    # a page first touched remotely is populated in CPU memory
    S.pstate[d] |= POP


@_jit
def ft_counter_driver(S, T, k, r, d):
    """The driver's access counters: one per 2 MiB block; True when it notifies (migrate)."""
    blk = T.page_block[d]
    S.ac_count[blk] += T.row_count[r]
    if S.ac_count[blk] >= S.fcfg[F_AC_THRESH]:
        S.ac_count[blk] = 0
        S.counts[k, C_COUNTER_MIG] += 1
        return True
    return False


@_jit
def ft_counter_uvmsmart(S, T, k, r, d):
    """UVMSmart's adaptive delayed migration, per 64 KiB leaf; True when it migrates."""
    g = T.page_block[d] * 32 + (T.page_pos[d] >> 4)
    S.ac_count[g] += T.row_count[r]
    # chunks in use against the GPU's capacity (the pool may hold fewer: S_CAP)
    used = S.free_stack.size - S.scal[S_NFREE]
    cap = S.scal[S_CAP]
    if used >= cap:
        S.fcfg[F_OVERSUB] = 1.0  # sticky, as UVMSmart's over_sub
    if S.fcfg[F_OVERSUB] != 0.0:
        thr = S.fcfg[F_AC_THRESH] * S.fcfg[F_AC_PENALTY] * (S.ac_trips[g] + 1)
    else:
        thr = 1.0 + S.fcfg[F_AC_THRESH] * used / cap
    if S.ac_count[g] >= thr:
        S.counts[k, C_COUNTER_MIG] += 1
        return True
    return False


@_jit
def ft_round_trip(S, blk, first, last):
    """Leaves first..last of a block were evicted: one more round trip, counters restart."""
    for leaf in range(first >> 4, (last >> 4) + 1):
        S.ac_trips[blk * 32 + leaf] += 1
        S.ac_count[blk * 32 + leaf] = 0


@_jit
def ft_thrash(S, T, k, r, d, now):
    """The driver's thrashing detection on a fault of page d at `now`: throttle or pin.

    A migration within the lapse of the page's previous one is a thrashing event; at
    F_THRESH consecutive events the page is thrashing and its next fault is throttled (the
    kernel naps F_NAP_NS, then the fault is serviced), or, after F_PIN_THRESH throttles,
    pinned: mapped remotely for F_PIN_NS. Returns True when the access is served remotely.
    """
    last = ft_thrash_epoch(S, d, now)
    t = now
    if last >= 0.0 and S.pg_thr[d] >= S.fcfg[F_THRESH] and t - last <= S.fcfg[F_LAPSE_NS]:
        if S.pg_throt[d] >= S.fcfg[F_PIN_THRESH]:
            S.pg_pin[d] = t + S.fcfg[F_PIN_NS]
            S.pg_thr[d] = 0
            S.pg_throt[d] = 0
            S.counts[k, C_PINS] += 1
            ft_remote(S, T, k, r, d)
            return True
        if S.pg_throt[d] < 255:
            S.pg_throt[d] += 1
        S.counts[k, C_THROTTLED] += 1
        S.fcfg[F_PEND_NS] += S.fcfg[F_NAP_NS]
        t += S.fcfg[F_NAP_NS]
    ft_thrash_record(S, d, last, t)
    return False


@_jit
def ft_thrash_epoch(S, d, t):
    """A page idle for F_EPOCH_NS forgets its thrashing history; returns its last event."""
    last = S.pg_last[d]
    if last >= 0.0 and t - last > S.fcfg[F_EPOCH_NS]:
        S.pg_thr[d] = 0
        S.pg_throt[d] = 0
    return last


@_jit
def ft_thrash_record(S, d, last, t):
    """Record a migration of page d at t: a thrashing event if within the lapse of `last`."""
    if last >= 0.0:
        if t - last <= S.fcfg[F_LAPSE_NS]:
            if S.pg_thr[d] < 255:
                S.pg_thr[d] += 1
        else:
            S.pg_thr[d] = 0
    S.pg_last[d] = t


@_jit
def ft_thrash_event(S, d, t):
    """A migration of page d at t that is not a GPU fault (a host access copying it back)."""
    ft_thrash_record(S, d, ft_thrash_epoch(S, d, t), t)


@_jit
def ft_miss(S, T, k, r, d, now):
    """A GPU miss on page d (row r): where does it go, in the driver's destination order.

    Read duplication (read-mostly) first, then preferred location CPU (stay, map remotely),
    a thrashing pin, an accessed-by mapping (remote until an access counter notifies), then
    UVMSmart's delayed migration of reads, then thrashing detection. True: served remotely.
    """
    d = np.int64(d)  # a row's page is int32, a host access's int64 (ft_thrash_event): one type
    write = T.row_flags[r] & 6
    adv = 0
    if S.fcfg[F_ADVISE] != 0.0:
        adv = S.pg_adv[d]
        if adv & ADV_READ_MOSTLY:
            if not write:
                S.pstate[d] |= DUP
            return False
        if adv & ADV_PREF_CPU:
            ft_remote(S, T, k, r, d)
            return True
    if S.t_remote[S.b_tenant[T.page_block[d]]]:
        # a scheduler component's hint for the whole tenant: map remotely, do not migrate
        ft_remote(S, T, k, r, d)
        return True
    if S.fcfg[F_THRASH] != 0.0 and S.pg_pin[d] > now:
        ft_remote(S, T, k, r, d)
        return True
    if adv & ADV_ACCESSED_BY and not (adv & ADV_PREF_GPU) and S.pstate[d] & POP:
        if not (S.fcfg[F_REMOTE] == REMOTE_DRIVER and ft_counter_driver(S, T, k, r, d)):
            ft_remote(S, T, k, r, d)
            return True
    elif S.fcfg[F_REMOTE] == REMOTE_UVMSMART and not write:
        if not ft_counter_uvmsmart(S, T, k, r, d):
            ft_remote(S, T, k, r, d)
            return True
    if S.fcfg[F_THRASH] != 0.0:
        return ft_thrash(S, T, k, r, d, now)
    return False


@_jit
def ft_write_dup(S, d):
    """A write hit a read duplicate: the driver collapses the copies (a revocation fault)."""
    S.pstate[d] &= ~DUP
    S.fcfg[F_PEND_NS] += S.hw[HW_BATCH_NS] + S.hw[HW_FAULT_NS]


@_jit
def ft_prefetch(S, T, blk, lo, hi):
    """The driver's hint rules on the prefetch set (uvm_perf_prefetch.c).

    A fault on a page whose preferred location is the GPU, in a block resident nowhere,
    takes the whole block; pages preferring the CPU are not prefetched to the GPU; pinned
    (thrashing) pages are never prefetched.
    """
    p0 = T.b_page0[blk] - lo
    if S.fcfg[F_ADVISE] != 0.0:
        pref = False
        nowhere = True
        for pos in range(lo, hi + 1):
            if test(S.fbits, 0, pos) and S.pg_adv[p0 + pos] & ADV_PREF_GPU:
                pref = True
            if S.pstate[p0 + pos] & (POP | RES):
                nowhere = False
        for pos in range(lo, hi + 1):
            if pref and nowhere:
                set_bit(S.pbits, 0, pos)
            if S.pg_adv[p0 + pos] & ADV_PREF_CPU:
                clear_bit(S.pbits, 0, pos)
    if S.fcfg[F_THRASH] != 0.0:
        for pos in range(lo, hi + 1):
            if S.pg_pin[p0 + pos] > S.fcfg[F_CLOCK]:
                clear_bit(S.pbits, 0, pos)


@_jit
def ft_advise(S, T, e):
    """cudaMemAdvise on the event's range (clipped to live non-host allocations)."""
    arg = T.ev_arg[e]
    for seg in range(T.ev_seg_start[e], T.ev_seg_start[e + 1]):
        if T.a_host[T.seg_alloc[seg]]:
            continue
        for d in range(T.seg_first[seg], T.seg_last[seg] + 1):
            a = S.pg_adv[d]
            if arg == ARG_SET_PREF_GPU:
                a = (a | ADV_PREF_GPU) & ~ADV_PREF_CPU
            elif arg == ARG_SET_PREF_CPU:
                a = (a | ADV_PREF_CPU) & ~ADV_PREF_GPU
            elif arg == ARG_SET_ACCESSED_BY:
                a = a | ADV_ACCESSED_BY
            elif arg == ARG_SET_READ_MOSTLY:
                a = a | ADV_READ_MOSTLY
            elif arg == ARG_UNSET_PREF_GPU or arg == ARG_UNSET_PREF_CPU:
                a = a & ~(ADV_PREF_GPU | ADV_PREF_CPU)
            elif arg == ARG_UNSET_ACCESSED_BY:
                a = a & ~ADV_ACCESSED_BY
            elif arg == ARG_UNSET_READ_MOSTLY:
                a = a & ~ADV_READ_MOSTLY
                S.pstate[d] &= ~DUP
            S.pg_adv[d] = a
