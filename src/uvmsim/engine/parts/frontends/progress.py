# FRONT-END `progress`: thread blocks progress through their own v1.2 streams in resident
# slots, stall on their faults and resume when the driver has serviced them
# (docs/semantics.md, "Progress"; docs/model.md). Kernels without a stream replay their page
# set: this front-end builds on page_sets (build.FRONTEND_BASES) and calls page_set_kernel.
#
# A template part (see memory.py's header and page_sets.py's). Of the other parts it calls
# only what build.FRONTEND_USES lists: the driver's add_fault, service_now and
# service_clocked, the eviction policy's EV_ON_HIT, and page_set_kernel.
#
# Owns: the fe_* fields of the state (uvmsim.engine.state; inputs built by
# uvmsim.engine.blocks) and S.frontend[0].fault_latency_ns. Reads S.pstate (RES) and
# S.b_chunk. A kernel's run is one event loop on its own clock (0 at the kernel's start):
#   0  a fault batch's service ends: its pages stop being pending; every stalled block
#      retries its row at that time (a kind-1 event)
#   1  a running block reaches its next row (or the end of its run), ties by block id
#   2  the driver starts a service: up to batch_size pending faults in arrival order, or
#      with fault_order age by the faulting block's age rank on its SM, then arrival
# At equal times kind 0 goes first, then 1, then 2; the reference model
# (uvmsim/reference/frontends/progress.py) orders its SimPy events the same way.


@_jit
def run_kernel(pst, est, wst, S, T, k, batch_size, t0):
    """Kernel k replays its stream (progress_kernel) if it has one, else its page set."""
    if S.fe_slots[k] > 0:
        return progress_kernel(pst, est, wst, S, T, k, batch_size, t0)
    return page_set_kernel(pst, est, wst, S, T, k, batch_size, t0)


@_jit
def tree_build(S, n):
    """The tournament of n slots (leaves n..2n-1 of S.fe_tree_t/_b; node i of 1..n-1 holds
    the lesser (t, b) of nodes 2i and 2i+1, so node 1 holds the least of all) from its
    leaves."""
    tt = S.fe_tree_t
    tb = S.fe_tree_b
    for i in range(n - 1, 0, -1):
        c = 2 * i
        t0 = tt[c]
        t1 = tt[c + 1]
        b0 = tb[c]
        b1 = tb[c + 1]
        m = np.int64((t1 < t0) | ((t1 == t0) & (b1 < b0)))
        tt[i] = min(t0, t1)
        tb[i] = b0 + (b1 - b0) * m


@_jit
def tree_set(S, n, leaf, t, b):
    """Slot `leaf` of the tournament of n slots now holds (t, b) (t = inf: no event); the
    path to node 1 is played again.

    Which of two nodes is less is a coin toss, so the pick is without a branch: the time is
    their min (no time is NaN or -0.0: the clock starts at +0.0 and only adds, so two equal
    times have the same bits) and the block an integer blend. A path is always the whole
    depth, log2(n), each level one sibling to load (docs/performance.md, "Block progress").
    """
    tt = S.fe_tree_t
    tb = S.fe_tree_b
    i = leaf + n
    tt[i] = t
    tb[i] = b
    while i > 1:
        st = tt[i ^ 1]
        sb = tb[i ^ 1]
        m = np.int64((st < t) | ((st == t) & (sb < b)))
        t = min(st, t)
        b += (sb - b) * m
        i >>= 1
        tt[i] = t
        tb[i] = b


@_jit
def fault_free_makespan(S, b0, n_blk, slots):
    """The kernel's run without faults in the instrumented clock: blocks dispatched in id
    order onto `slots` slots, each taking its own run (fe_bdur), onto the slot free first
    (ties: the lower id of its last block)."""
    tt = S.fe_tree_t
    tb = S.fe_tree_b
    for j in range(slots):
        tt[slots + j] = 0.0
        tb[slots + j] = j
        S.fe_slot[j] = j
    tree_build(S, slots)
    m = 0.0
    for j in range(n_blk):
        leaf = S.fe_slot[tb[1]]
        e = tt[1] + S.fe_bdur[b0 + j]
        if e > m:
            m = e
        S.fe_slot[j] = leaf
        tree_set(S, slots, leaf, e, j)
    return m


@_jit
def still_queued(S, T, r):
    """Whether every page of row r is queued and not resident (a retry would change
    nothing)."""
    for i in range(S.fe_rlo[r], S.fe_rhi[r]):
        d = T.row_page[S.fe_acc[i]]
        if T.a_host[T.b_alloc[T.page_block[d]]]:
            continue
        if S.fe_pend[d] != PEND_QUEUED or S.pstate[d] & RES:
            return False
    return True


@_jit
def dispatch(S, j, b0, t, s):
    """Block j (of the kernel's blocks from b0) takes a slot at time t: returns when its
    first row comes, after its first row's offset scaled by s."""
    r = S.fe_rstart[b0 + j]
    S.fe_cur[j] = r
    S.fe_refault[j] = 0
    S.fe_scnt[j] = 0
    return t + S.fe_rt[r] * s


@_jit
def queue_fault(S, qh, qn, a, d, tt, key):
    """Access row a (page d) faults at time tt: it joins the fault queue (the ring from qh
    of qn entries) with its order key. Returns the queue's new length."""
    q = qh + qn
    if q >= S.fe_q_row.size:
        q -= S.fe_q_row.size
    S.fe_q_row[q] = a
    S.fe_q_t[q] = tt
    S.fe_q_key[q] = key
    S.fe_pend[d] = PEND_QUEUED
    return qn + 1


@_jit
def order_by_key(S, qh, qn):
    """Rule 5a (fault_order age): the queue's qn entries from qh in (key, arrival) order,
    in place; a queue already in order is left as it is."""
    cap = S.fe_q_row.size
    keys = np.empty(qn, np.int64)
    ordered = True
    for i in range(qn):
        q = qh + i
        if q >= cap:
            q -= cap
        keys[i] = S.fe_q_key[q]
        if i and keys[i] < keys[i - 1]:
            ordered = False
    if ordered:
        return
    o = np.argsort(keys, kind="mergesort")  # stable: arrival order within a key
    rows = np.empty(qn, np.int64)
    ts = np.empty(qn)
    for i in range(qn):
        q = qh + o[i]
        if q >= cap:
            q -= cap
        rows[i] = S.fe_q_row[q]
        ts[i] = S.fe_q_t[q]
    for i in range(qn):
        q = qh + i
        if q >= cap:
            q -= cap
        S.fe_q_row[q] = rows[i]
        S.fe_q_t[q] = ts[i]
        S.fe_q_key[q] = keys[o[i]]


@_jit
def settle_stores(S, T, j, sa, tt, qh, qn, key):
    """At a service's end, block j's outstanding stores (access rows in its sa slots) settle:
    one whose page is usable lands (leaves the slots); one whose fault is still pending
    stays; one whose page was evicted before it landed (fault serviced, page gone) faults
    again, queued at tt with the block's order key. Returns the queue's new length and how
    many faulted again."""
    base = j * sa
    keep = 0
    again = 0
    for i in range(S.fe_scnt[j]):
        a = S.fe_sbuf[base + i]
        d = T.row_page[a]
        pe = S.fe_pend[d]
        if pe != PEND_FLIGHT and S.pstate[d] & RES:
            continue
        if pe == PEND_NONE:
            qn = queue_fault(S, qh, qn, a, d, tt, key)
            again += 1
        S.fe_sbuf[base + keep] = a
        keep += 1
    S.fe_scnt[j] = keep
    return qn, again


@_jit
def progress_kernel(pst, est, wst, S, T, k, batch_size, t0):
    """Replay kernel k's thread blocks from time t0; returns when the kernel ends.

    Compute between a block's rows is their instrumented gap times s = duration_ns / the
    fault-free makespan, so without faults the kernel takes its uninstrumented time. A
    block reaching a row whose pages are all resident passes it (the eviction policy hears
    of a hit on each); otherwise each non-resident page not yet pending becomes a fault in
    the queue and the block stalls until a service end lets it retry. The kernel ends when
    every block has run and no service is in flight, never before t0 + duration_ns.
    """
    b0 = S.fe_bstart[k]
    n_blk = S.fe_bstart[k + 1] - b0
    slots = min(S.fe_slots[k], n_blk)
    dur = compute_ns(T, k)
    s = dur / fault_free_makespan(S, b0, n_blk, slots)
    lat = S.frontend[0].fault_latency_ns
    sa = S.frontend[0].store_ahead
    # fault_order age: a fault's key is its block's age rank on its SM (blocks go to the SMs
    # in turn, so block j is the (j // sms)-th on its SM); arrival: every key is 0
    by_age = S.frontend[0].fault_order == 1
    sms = S.fe_sms[k]
    # sm_store_pool (rule 4b): the outstanding stores of each SM's blocks, S.fe_smout
    pool = S.frontend[0].sm_store_pool
    S.fe_smout[:] = 0
    cap = S.fe_q_row.size
    # the running blocks' next events: a tournament over the slots (tree_set), block j in
    # slot S.fe_slot[j]; a slot without a running block holds (inf, its last block)
    tree_t = S.fe_tree_t
    tree_b = S.fe_tree_b
    for j in range(slots):
        S.fe_bsm[j] = j % sms  # the first wave goes to the SMs in turn
        S.fe_slot[j] = j
        tree_t[slots + j] = dispatch(S, j, b0, 0.0, s)
        tree_b[slots + j] = j
    tree_build(S, slots)
    nxt = slots
    n_done = 0
    n_st = 0
    qh = 0          # the fault queue: S.fe_q_row[qh], qn entries (a ring of cap)
    qn = 0
    flight = False  # a service in flight, ending at svc_end, of n_fl faults
    svc_end = 0.0
    n_fl = 0
    pending = False  # the driver's next start, at drv_t
    drv_t = 0.0
    last = 0.0
    tick = T.k_row_start[k]
    while True:
        kind = -1
        tt = 0.0
        if flight:
            kind = 0
            tt = svc_end
        # a running block's next event is finite; a slot without one holds inf
        if tree_t[1] < np.inf and (kind < 0 or tree_t[1] < tt):
            kind = 1
            tt = tree_t[1]
        if pending and n_done < n_blk and (kind < 0 or drv_t < tt):
            kind = 2
            tt = drv_t
        if kind < 0:
            break
        if kind == 0:
            flight = False
            for i in range(n_fl):
                S.fe_pend[T.row_page[S.fe_flight[i]]] = PEND_NONE
            if tt > last:
                last = tt
            # blocks with stores outstanding settle them, in id order (rule 4a)
            if sa > 0:
                for j in range(nxt):
                    if S.fe_scnt[j] > 0:
                        held = S.fe_scnt[j]
                        qn, again = settle_stores(S, T, j, sa, tt, qh, qn,
                                                  j // sms if by_age else 0)
                        S.fe_smout[S.fe_bsm[j]] -= held - S.fe_scnt[j]
                        if again:
                            S.fe_refault[j] += 1
                            if S.fe_refault[j] > MAX_ROW_FAULTS:
                                raise RuntimeError("progress: a thread block's stores keep "
                                                   "faulting (it needs more memory than the "
                                                   "GPU holds)")
            # a stalled block whose pages are all still queued would only stall again
            # (no fault, no hit): it is not woken, which changes nothing but the work; with
            # store_ahead a retry may pass once the block's own stores are done, so all wake
            keep = 0
            for i in range(n_st):
                j = S.fe_stalled[i]
                if sa == 0 and still_queued(S, T, S.fe_cur[j]):
                    S.fe_stalled[keep] = j
                    keep += 1
                else:
                    tree_set(S, slots, S.fe_slot[j], tt, j)
            n_st = keep
            if qn > 0:
                pending = True
                drv_t = max(tt, S.fe_q_t[qh] + lat)
        elif kind == 2:
            pending = False
            if by_age and qn > 1:
                order_by_key(S, qh, qn)
            nb = np.int64(0)  # typed: a literal would specialize service_now on it
            while qn > 0 and nb < batch_size:
                a = S.fe_q_row[qh]
                qh += 1
                if qh == cap:
                    qh = 0
                qn -= 1
                d = T.row_page[a]
                ps = S.pstate[d]
                if ps & RES:  # made resident (a prefetch) while it waited: no fault
                    S.fe_pend[d] = PEND_NONE
                    continue
                S.fe_pend[d] = PEND_FLIGHT
                S.fe_flight[nb] = a
                tick = a
                nb = add_fault(S, T, k, a, d, ps, nb)
            if nb > 0:
                if wst is None:
                    cost = service_now(pst, est, S, T, nb, k, tick)
                else:
                    cost = service_clocked(pst, est, S, T, nb, k, tick, t0 + tt)
                n_fl = nb
                flight = True
                svc_end = tt + cost
        else:
            j = tree_b[1]
            leaf = S.fe_slot[j]
            r = S.fe_cur[j]
            e = S.fe_rstart[b0 + j + 1]
            if r == e:  # the end of its run: the slot goes to the next block
                if S.fe_scnt[j] > 0:
                    S.fe_stalled[n_st] = j  # its stores land first
                    n_st += 1
                    tree_set(S, slots, leaf, np.inf, j)
                    continue
                n_done += 1
                if tt > last:
                    last = tt
                if nxt < n_blk:
                    S.fe_bsm[nxt] = S.fe_bsm[j]  # the next block takes the freed slot's SM
                    S.fe_slot[nxt] = leaf
                    tree_set(S, slots, leaf, dispatch(S, nxt, b0, tt, s), nxt)
                    nxt += 1
                else:
                    tree_set(S, slots, leaf, np.inf, j)
                continue
            if pool > 0 and S.fe_smout[S.fe_bsm[j]] >= pool:
                # rule 4b: the SM's pool of faulting stores is full; no block on it passes
                # a row until a service end frees some (every stalled block retries then)
                S.fe_stalled[n_st] = j
                n_st += 1
                tree_set(S, slots, leaf, np.inf, j)
                continue
            lo = S.fe_rlo[r]
            hi = S.fe_rhi[r]
            missing = 0
            queued = 0
            loads = 0  # missing pages the kernel reads or updates (their warps wait)
            for i in range(lo, hi):
                a = S.fe_acc[i]
                d = T.row_page[a]
                if T.a_host[T.b_alloc[T.page_block[d]]]:
                    continue
                pe = S.fe_pend[d]
                if pe != PEND_FLIGHT and S.pstate[d] & RES:
                    continue
                missing += 1
                if T.row_flags[a] & FLAGS_LOAD:
                    loads += 1
                if pe == PEND_FLIGHT:
                    continue
                if pe == PEND_NONE:
                    if qn == 0 and not flight:
                        pending = True
                        drv_t = max(tt, tt + lat)
                    qn = queue_fault(S, qh, qn, a, d, tt, j // sms if by_age else 0)
                    queued += 1
            # with store_ahead, a row whose missing pages are all stores passes while the
            # block's outstanding stores fit its sa slots; the stores wait in them
            ahead = False
            if missing and sa > 0 and loads == 0:
                n_out = S.fe_scnt[j]
                sm = S.fe_bsm[j]
                if n_out + missing <= sa and (pool == 0 or S.fe_smout[sm] + missing <= pool):
                    ahead = True
                    S.fe_smout[sm] += missing
                    for i in range(lo, hi):  # the row's missing pages, as counted above
                        a = S.fe_acc[i]
                        d = T.row_page[a]
                        if T.a_host[T.b_alloc[T.page_block[d]]]:
                            continue
                        if S.fe_pend[d] == PEND_FLIGHT or not S.pstate[d] & RES:
                            S.fe_sbuf[j * sa + n_out] = a
                            n_out += 1
                    S.fe_scnt[j] = n_out
            if missing and not ahead:
                if queued:
                    S.fe_refault[j] += 1
                    if S.fe_refault[j] > MAX_ROW_FAULTS:
                        raise RuntimeError("progress: a thread block's row keeps faulting "
                                           "(it needs more memory than the GPU holds)")
                S.fe_stalled[n_st] = j
                n_st += 1
                tree_set(S, slots, leaf, np.inf, j)
                continue
            for i in range(lo, hi):
                a = S.fe_acc[i]
                d = T.row_page[a]
                blk = T.page_block[d]
                # every page is usable, but with store_ahead the missing ones (in service
                # or not resident) are the block's outstanding stores: no hit on them
                if not T.a_host[T.b_alloc[blk]] and S.fe_pend[d] != PEND_FLIGHT and \
                        S.pstate[d] & RES:
                    EV_ON_HIT(est, S, T, S.b_chunk[blk], blk, T.page_pos[d], a)
            S.fe_refault[j] = 0
            if r + 1 < e:
                S.fe_cur[j] = r + 1
                tree_set(S, slots, leaf, tt + (S.fe_rt[r + 1] - S.fe_rt[r]) * s, j)
            else:
                S.fe_cur[j] = e
                tree_set(S, slots, leaf, tt + (S.fe_bdur[b0 + j] - S.fe_rt[r]) * s, j)
    if n_done < n_blk:  # a block left waiting with nothing to wake it: a rule is broken
        raise RuntimeError("progress: the event loop ran dry with thread blocks unfinished")
    # faults left in the queue once every block has run are not needed any more
    while qn > 0:
        S.fe_pend[T.row_page[S.fe_q_row[qh]]] = PEND_NONE
        qh += 1
        if qh == cap:
            qh = 0
        qn -= 1
    stall = last - dur if last > dur else 0.0
    S.times[k, T_STALL] += stall
    return t0 + dur + stall
