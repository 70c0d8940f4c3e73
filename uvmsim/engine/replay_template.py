# The fast replay engine, as a template.
#
# This file is not imported. uvmsim.engine.build prepends a header that binds the policy
# hooks and `_jit`, writes the result to the engine cache and imports that, so every
# (prefetch, eviction) pair gets its own compiled and disk-cached engine in which the hooks
# are direct calls LLVM can inline. The engine names no policy: it only calls
#   PF_PREFETCH(pst, S, T, blk, lo, hi)                       -> writes S.pmask
#   EV_ON_FILL(est, S, T, chunk, blk, first, last, n_new, tick)
#   EV_ON_HIT(est, S, T, chunk, blk, pos, tick)
#   EV_ON_RELEASE(est, S, T, chunk, blk)
#   EV_VICTIM(est, S, T, tick)                                -> writes S.victim
# Step names match uvmsim.reference, which models the same steps in SimPy.
# Semantics: docs/model.md and the spec's driver-model.md.

OP_ALLOC, OP_FREE, OP_KERNEL, OP_HTOD, OP_DTOH, OP_DTOD, OP_MEMSET, OP_PREFETCH = range(8)
ARG_GPU, ARG_CPU = 1, 2


@_jit
def evict_one(est, S, T, out_row, tick):
    """Ask the policy for a victim and copy its resident pages back (no dirty bits)."""
    EV_VICTIM(est, S, T, tick)
    c = S.victim[0]
    blk = S.chunk_block[c]
    if c < 0 or blk < 0:
        raise RuntimeError("eviction policy named a chunk that is not in use")
    lo = T.b_lo[blk]
    p0 = T.b_page0[blk] - lo
    first = max(S.victim[1], lo)
    last = min(S.victim[2], T.b_hi[blk])
    n = 0
    run = 0
    for pos in range(first, last + 1):
        d = p0 + pos
        if S.pstate[d] & RES:
            S.pstate[d] &= ~RES
            n += 1
            run += 1
        elif run:
            S.tacc[0] += transfer_ns(S.hw, run * 4096)
            run = 0
    if run:
        S.tacc[0] += transfer_ns(S.hw, run * 4096)
    if n == 0:
        raise RuntimeError("eviction policy named a range with no resident page")
    S.counts[out_row, C_DTOH_EVICT] += n * 4096
    S.b_nres[blk] -= n
    if S.b_nres[blk] == 0:
        release_chunk(est, S, T, blk)
        S.counts[out_row, C_EVICTED] += 1


@_jit
def release_chunk(est, S, T, blk):
    """Return a block's chunk to the free pool (its pages are already not resident)."""
    c = S.b_chunk[blk]
    S.b_chunk[blk] = -1
    S.chunk_block[c] = -1
    S.free_stack[S.scal[S_NFREE]] = c
    S.scal[S_NFREE] += 1
    EV_ON_RELEASE(est, S, T, c, blk)


@_jit
def ensure_chunk(est, S, T, blk, out_row, tick):
    """Step 1: the block takes a free chunk, evicting the policy's victims until one is free."""
    c = S.b_chunk[blk]
    if c >= 0:
        return c
    while S.scal[S_NFREE] == 0:
        evict_one(est, S, T, out_row, tick)
    S.scal[S_NFREE] -= 1
    c = S.free_stack[S.scal[S_NFREE]]
    S.chunk_block[c] = blk
    S.b_chunk[blk] = c
    return c


@_jit
def make_resident(est, S, T, blk, first, last, use_masks, cause_f, cause_p, out_row, tick):
    """Steps 1-3 for positions first..last of a block.

    With use_masks, positions with S.fmask get cause_f and those with only S.pmask get
    cause_p; otherwise every position gets cause_f.
    """
    c = ensure_chunk(est, S, T, blk, out_row, tick)
    p0 = T.b_page0[blk] - T.b_lo[blk]
    run = 0
    n_new = 0
    new_first = -1
    new_last = -1
    for pos in range(first, last + 1):
        if use_masks:
            if S.fmask[pos]:
                cause = cause_f
            elif S.pmask[pos]:
                cause = cause_p
            else:
                if run:
                    S.tacc[0] += transfer_ns(S.hw, run * 4096)
                    run = 0
                continue
        else:
            cause = cause_f
        d = p0 + pos
        ps = S.pstate[d]
        if ps & RES:
            if run:
                S.tacc[0] += transfer_ns(S.hw, run * 4096)
                run = 0
            continue
        if cause == CAUSE_MEMSET or (cause != CAUSE_MEMCPY and not (ps & POP)):
            S.counts[out_row, C_ZERO_FILL] += 1
            S.tacc[0] += S.hw[HW_ZERO_NS]
            if run:
                S.tacc[0] += transfer_ns(S.hw, run * 4096)
                run = 0
        else:
            S.counts[out_row, CAUSE_HTOD_COL[cause]] += 4096
            run += 1
        S.pstate[d] = ps | RES | POP
        n_new += 1
        if new_first < 0:
            new_first = pos
        new_last = pos
    if run:
        S.tacc[0] += transfer_ns(S.hw, run * 4096)
    S.b_nres[blk] += n_new
    EV_ON_FILL(est, S, T, c, blk, new_first, new_last, n_new, tick)


@_jit
def service_batch(pst, est, S, T, nb, out_row, tick):
    """Service the open fault batch: blocks in order, prefetch, make resident."""
    keys = S.batch_key[:nb]
    for i in range(nb):
        d = S.batch_page[i]
        S.pstate[d] &= ~INB
        keys[i] = S.b_rank[T.page_block[d]] * 512 + T.page_pos[d]
    keys.sort()
    i = 0
    while i < nb:
        blk = S.rank_block[keys[i] >> 9]
        lo = T.b_lo[blk]
        hi = T.b_hi[blk]
        j = i
        while j < nb and (keys[j] >> 9) == (keys[i] >> 9):
            S.fmask[keys[j] & 511] = 1
            j += 1
        p0 = T.b_page0[blk] - lo
        for pos in range(lo, hi + 1):
            S.rmask[pos] = 1 if S.pstate[p0 + pos] & RES else 0
            S.pmask[pos] = 0
        PF_PREFETCH(pst, S, T, blk, lo, hi)
        make_resident(est, S, T, blk, lo, hi, True, CAUSE_DEMAND, CAUSE_PREFETCH, out_row, tick)
        for pos in range(lo, hi + 1):
            S.fmask[pos] = 0
        i = j
    S.counts[out_row, C_BATCHES] += 1


@_jit
def run_kernel(pst, est, S, T, k, batch_size):
    """Replay one kernel's access rows with fault batching; returns its stall time."""
    r0 = T.k_row_start[k]
    r1 = T.k_row_start[k + 1]
    nb = 0
    stall = 0.0
    for r in range(r0, r1):
        d = T.row_page[r]
        ps = S.pstate[d]
        if ps & RES:
            blk = T.page_block[d]
            EV_ON_HIT(est, S, T, S.b_chunk[blk], blk, T.page_pos[d], r)
            continue
        if ps & INB:
            continue
        if T.a_host[T.b_alloc[T.page_block[d]]]:
            continue
        S.pstate[d] = ps | INB
        S.batch_page[nb] = d
        nb += 1
        S.counts[k, C_FAULTS] += 1
        if T.row_flags[r] & 6:
            S.counts[k, C_FAULTS_WRITE] += 1
        else:
            S.counts[k, C_FAULTS_READ] += 1
        if nb == batch_size:
            S.tacc[0] = 0.0
            service_batch(pst, est, S, T, nb, k, r)
            stall += S.hw[HW_BATCH_NS] + S.hw[HW_FAULT_NS] * nb + S.tacc[0]
            S.times[k, T_TRANSFER] += S.tacc[0]
            nb = 0
    if nb:
        S.tacc[0] = 0.0
        service_batch(pst, est, S, T, nb, k, r1)
        stall += S.hw[HW_BATCH_NS] + S.hw[HW_FAULT_NS] * nb + S.tacc[0]
        S.times[k, T_TRANSFER] += S.tacc[0]
    S.times[k, T_STALL] += stall


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
                prefetch_to_cpu(est, S, T, blk, lo, hi, out_row)
                continue
            cause = CAUSE_API
            if op == OP_HTOD:
                cause = CAUSE_MEMCPY
            elif op == OP_MEMSET:
                cause = CAUSE_MEMSET
            make_resident(est, S, T, blk, lo, hi, False, cause, cause, out_row, tick)
    S.times[out_row, T_TRANSFER] += S.tacc[0]
    S.times[out_row, T_STALL] += S.tacc[0]


@_jit
def prefetch_to_cpu(est, S, T, blk, lo, hi, out_row):
    """cudaMemPrefetchAsync to the CPU: copy resident pages back; free an emptied chunk."""
    if S.b_chunk[blk] < 0:
        return
    p0 = T.b_page0[blk] - T.b_lo[blk]
    n = 0
    run = 0
    for pos in range(lo, hi + 1):
        d = p0 + pos
        if S.pstate[d] & RES:
            S.pstate[d] &= ~RES
            n += 1
            run += 1
        elif run:
            S.tacc[0] += transfer_ns(S.hw, run * 4096)
            run = 0
    if run:
        S.tacc[0] += transfer_ns(S.hw, run * 4096)
    S.counts[out_row, C_DTOH_API] += n * 4096
    S.b_nres[blk] -= n
    if n and S.b_nres[blk] == 0:
        release_chunk(est, S, T, blk)


@_jit
def free_alloc(est, S, T, a):
    """cudaFree: pages become unpopulated and not resident with no transfer."""
    p0 = T.a_page_off[a]
    for d in range(p0, p0 + T.a_npages[a]):
        S.pstate[d] = 0
    b0 = T.a_block_off[a]
    for blk in range(b0, b0 + T.a_nblocks[a]):
        S.b_nres[blk] = 0
        if S.b_chunk[blk] >= 0:
            release_chunk(est, S, T, blk)


@_jit
def replay(pst, est, S, T, batch_size):
    """Replay every event in program order; counts and times accumulate in S."""
    n_k = T.k_row_start.size - 1
    outside = n_k
    tick = 0
    for e in range(T.ev_op.size):
        op = T.ev_op[e]
        if op == OP_KERNEL:
            k = T.ev_kernel[e]
            run_kernel(pst, est, S, T, k, batch_size)
            tick = T.k_row_start[k + 1]
        elif op == OP_FREE:
            free_alloc(est, S, T, T.ev_alloc[e])
        elif op == OP_HTOD or op == OP_MEMSET or op == OP_PREFETCH:
            range_event(pst, est, S, T, e, outside, tick)
    return 0
