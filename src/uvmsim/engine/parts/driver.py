# Part of the replay engine: the DRIVER. Fault batches and their service, range events
# (memcpy, memset, prefetch), proactive reclamation, and the path of a GPU miss through the
# driver's mechanisms (engine/parts/mechanisms/).
#
# A template part (see memory.py's header).
#
# Owns: S.batch_page, S.batch_key, S.b_rank, S.rank_block, S.fbits, S.rbits, S.pbits,
# S.driver[0] (with the mechanisms' settings and clock), S.t_remote.
# Offers to a front-end: add_fault (a page into the open batch), service_now and
# service_clocked (service the batch; the stall it adds), gpu_miss (a miss through the
# mechanisms when any is on), mechanisms_end_kernel (their stall and clock at a kernel's
# end). To the program: range_event, range_event_clocked, reclaim. To memory: on_evicted.
# Calls: the prefetch policy (PF_PREFETCH), the scheduler's start hook (SC_START), memory
# (ensure_chunk, fill_positions, is_partial, make_resident_partial, make_range_resident,
# prefetch_to_cpu, evict_one) and the mechanisms. Never a front-end or the program.
#
# A driver mechanism (an option such as thrashing or remote mapping) is a file of
# engine/parts/mechanisms/: its settings and scalars are fields of the DRIVER record
# (uvmsim.engine.state), its per-page arrays fields of the state, and it joins the driver
# where it acts: gpu_miss (where a miss goes), mechanisms_prefetch (what a batch may
# prefetch), on_evicted, or a range event.


@_jit
def add_fault(S, T, k, r, d, ps, nb):
    """Step 2 of a kernel: put page d in the fault batch as a read or write fault
    (FaultBuffer.add in the reference model)."""
    S.pstate[d] = ps | INB
    S.batch_page[nb] = d
    S.counts[k, C_FAULTS] += 1
    # C_FAULTS_WRITE is C_FAULTS_READ + 1: no branch on the row's (random) access kind
    S.counts[k, C_FAULTS_READ + np.int64((T.row_flags[r] & FLAGS_WRITE) != 0)] += 1
    return nb + 1


@_jit
def host_bytes_in(S, k):
    """Bytes row k's faults have migrated from the host so far (demand and prefetch)."""
    return S.counts[k, C_HTOD_DEMAND] + S.counts[k, C_HTOD_PREFETCH]


@_jit
def batch_cost(S, k, nb, host0):
    """A serviced batch's cost: zero_batch_ns if it migrated no page from the host (row k's
    host bytes still host0), else batch_ns; plus fault_ns per fault and its transfers
    (docs/semantics.md, "Time")."""
    fixed = S.hw[0].zero_batch_ns if host_bytes_in(S, k) == host0 else S.hw[0].batch_ns
    return fixed + S.hw[0].fault_ns * nb + S.driver[0].step_ns


@_jit
def service_now(pst, est, S, T, nb, k, tick):
    """Service kernel k's open fault batch (unclocked); returns the stall it adds."""
    S.driver[0].step_ns = 0.0
    host0 = host_bytes_in(S, k)
    service_batch(pst, est, S, T, nb, k, tick)
    S.times[k, T_TRANSFER] += S.driver[0].step_ns
    return batch_cost(S, k, nb, host0)


@_jit
def service_clocked(pst, est, S, T, nb, k, tick, t):
    """service_batch once the (shared) driver is free; returns the stall it adds."""
    start = max(t, S.driver[0].free_at)
    S.driver[0].step_ns = 0.0
    host0 = host_bytes_in(S, k)
    service_batch(pst, est, S, T, nb, k, tick)
    cost = batch_cost(S, k, nb, host0)
    S.times[k, T_TRANSFER] += S.driver[0].step_ns
    S.times[k, T_DRV_WAIT] += start - t
    S.driver[0].free_at = start + cost
    return (start - t) + cost


@_jit
def service_batch(pst, est, S, T, nb, out_row, tick):
    """Service the open fault batch: blocks in order, prefetch, make resident.

    Per block: its faulted positions become S.fbits, its resident ones S.rbits (8 words
    copied from S.bres), the policy writes S.pbits; the work is the batch's pages, the
    pages moved and a few word operations per block."""
    keys = S.batch_key[:nb]
    S.driver[0].n_batch = nb
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
        if S.driver[0].mechanisms != 0:
            mechanisms_prefetch(S, T, blk, lo, hi)
        # positions outside lo..hi are not pages of this block: a policy's bits there
        # are ignored, as are faulted or resident ones
        for w in range(8):
            S.wbits[w] = (S.fbits[w] | S.pbits[w]) & word_mask(w, lo, hi)
        # make_resident, spelled out: a call passing the policy and engine state costs
        # more than this block's share of a batch of random faults (see make_resident)
        if is_partial(S, blk):
            make_resident_partial(est, S, T, blk, True, CAUSE_DEMAND, CAUSE_PREFETCH,
                                  out_row, tick)
            i = j
            continue
        c = S.b_chunk[blk]
        if c < 0:
            c = ensure_chunk(est, S, T, blk, out_row, tick)
        n_new, new_first, new_last = fill_positions(S, blk, T.b_page0[blk] - lo, True,
                                                    CAUSE_DEMAND, CAUSE_PREFETCH, out_row)
        EV_ON_FILL(est, S, T, c, blk, new_first, new_last, n_new, tick)
        i = j
    S.counts[out_row, C_BATCHES] += 1
    S.driver[0].n_batch = 0


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
def gpu_miss(S, T, k, r, d, now):
    """A GPU miss on page d (row r): where does it go, in the driver's destination order.

    Read duplication (read-mostly) first, then preferred location CPU (stay, map remotely),
    a thrashing pin, an accessed-by mapping (remote until an access counter notifies), then
    UVMSmart's delayed migration of reads, then thrashing detection. True: served remotely.
    """
    d = np.int64(d)  # a row's page is int32, a host access's int64 (thrash_record): one type
    write = T.row_flags[r] & FLAGS_WRITE
    adv = 0
    if S.driver[0].advise != 0:
        adv = S.pg_adv[d]
        if adv & ADV_READ_MOSTLY:
            if not write:
                S.pstate[d] |= DUP
            return False
        if adv & ADV_PREF_CPU:
            remote_access(S, T, k, r, d)
            return True
    if S.t_remote[S.b_tenant[T.page_block[d]]]:
        # a scheduler component's hint for the whole tenant: map remotely, do not migrate
        remote_access(S, T, k, r, d)
        return True
    if S.driver[0].thrashing != 0 and S.pg_pin[d] > now:
        remote_access(S, T, k, r, d)
        return True
    if adv & ADV_ACCESSED_BY and not (adv & ADV_PREF_GPU) and S.pstate[d] & POP:
        if not (S.driver[0].remote == REMOTE_DRIVER and counter_driver(S, T, k, r, d)):
            remote_access(S, T, k, r, d)
            return True
    elif S.driver[0].remote == REMOTE_UVMSMART and not write:
        if not counter_uvmsmart(S, T, k, r, d):
            remote_access(S, T, k, r, d)
            return True
    if S.driver[0].thrashing != 0:
        return thrash_fault(S, T, k, r, d, now)
    return False


@_jit
def mechanisms_prefetch(S, T, blk, lo, hi):
    """The driver's rules on a batch's prefetch set (uvm_perf_prefetch.c), after the policy
    chose S.pbits for block blk: the hints' (advise_prefetch), then thrashing's
    (thrash_prefetch)."""
    if S.driver[0].advise != 0:
        advise_prefetch(S, T, blk, lo, hi)
    if S.driver[0].thrashing != 0:
        thrash_prefetch(S, T, blk, lo, hi)


@_jit
def on_evicted(S, blk, first, last):
    """Memory evicted positions first..last of block blk: the mechanisms that count round
    trips hear of it."""
    if S.driver[0].remote == REMOTE_UVMSMART:
        counter_round_trip(S, blk, first, last)


@_jit
def mechanisms_end_kernel(S, dur, stall):
    """A kernel of compute time `dur` ends with `stall` so far: add the mechanisms' stall to
    it and move their clock to the kernel's end (the same sum the clocked replay makes:
    start + compute + stall)."""
    stall += S.driver[0].pend_ns
    S.driver[0].pend_ns = 0.0
    S.driver[0].clock = S.driver[0].clock + dur + stall
    return stall


@_jit
def range_event(pst, est, S, T, e, out_row, tick):
    """memcpy_htod, memset, prefetch and (option device_copies) memcpy_dtod: clipped to
    live non-host allocations, by block."""
    op = T.ev_op[e]
    S.driver[0].step_ns = 0.0
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
            elif op == OP_DTOD:
                # the copy engine's faults on its destination are serviced as a GPU
                # fault's (docs/model.md, item 10)
                cause = CAUSE_DEMAND
            make_range_resident(est, S, T, blk, lo, hi, cause, out_row, tick)
    S.times[out_row, T_TRANSFER] += S.driver[0].step_ns
    S.times[out_row, T_STALL] += S.driver[0].step_ns


@_jit
def range_event_clocked(pst, est, S, T, e, out_row, tick, t):
    """range_event (or host_access_event) once the (shared) driver and its copy engine are
    free; returns its end."""
    start = max(t, S.driver[0].free_at)
    if T.ev_op[e] == OP_HOST_ACCESS:
        S.driver[0].clock = start
        host_access_event(est, S, T, e, out_row)
    else:
        range_event(pst, est, S, T, e, out_row, tick)
    S.times[out_row, T_STALL] += start - t
    S.times[out_row, T_DRV_WAIT] += start - t
    S.driver[0].free_at = start + S.driver[0].step_ns
    return start + S.driver[0].step_ns


@_jit
def for_each_block(T, seg):
    """First/last block of a segment (helper for range events)."""
    return T.page_block[T.seg_first[seg]], T.page_block[T.seg_last[seg]]


@_jit
def reclaim(est, sst, S, T, ten, k, tick, t):
    """Kernel k of tenant ten starts at t: the scheduler component (SC_START) may name
    tenants to take chunks back from first (proactive reclamation). Each names one
    eviction of that tenant's chunks by the policy (pool.victim_tenant), done by the driver from when it
    is free (counted in kernel k's row); the kernel does not wait for them, but its own
    batches queue behind them."""
    j = SC_START(sst, S, T, ten, k, S.t_live)
    if j < 0:
        return
    start = max(t, S.driver[0].free_at)
    S.driver[0].step_ns = 0.0
    while j >= 0:
        if j >= S.t_chunks.size or S.t_chunks[j] <= 0:
            raise RuntimeError("scheduler asked to reclaim from a tenant holding no chunk")
        S.pool[0].victim_tenant = j
        evict_one(est, S, T, k, tick)
        S.pool[0].victim_tenant = -1
        j = SC_START(sst, S, T, ten, k, S.t_live)
    S.times[k, T_TRANSFER] += S.driver[0].step_ns
    S.driver[0].free_at = start + S.driver[0].step_ns
