# Part of the replay engine: the PROGRAM. The trace's events in program order, and tenants
# sharing one GPU on one clock.
#
# A template part (see memory.py's header). The entry points of a generated engine:
# replay (every event), replay_span (a span of events: a streamed trace, src/uvmsim/stream.py)
# and replay_clocked (translation on, or several tenants).
# Calls: the front-end's run_kernel for kernel events; the driver's range_event,
# range_event_clocked and reclaim; memory's free_alloc; the mechanisms' advise_event and
# host_access_event; the scheduler component's SC_ADMIT.


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
            run_kernel(pst, est, None, S, T, k, batch_size, S.driver[0].clock)
            tick = T.k_row_start[k + 1]
        elif op == OP_FREE:
            free_alloc(est, S, T, T.ev_alloc[e])
        elif (op == OP_HTOD or op == OP_MEMSET or op == OP_PREFETCH or
              (op == OP_DTOD and S.driver[0].device_copies != 0)):
            range_event(pst, est, S, T, e, outside, tick)
            if S.driver[0].mechanisms != 0:
                S.driver[0].clock = S.driver[0].clock + S.driver[0].step_ns
        elif op == OP_HOST_ACCESS and S.driver[0].host_access != 0:
            host_access_event(est, S, T, e, outside)
            if S.driver[0].mechanisms != 0:
                S.driver[0].clock = S.driver[0].clock + S.driver[0].step_ns
        elif op == OP_ADVISE and S.driver[0].advise != 0:
            advise_event(S, T, e)
    return 0


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
              (op == OP_DTOD and S.driver[0].device_copies != 0) or
              (op == OP_HOST_ACCESS and S.driver[0].host_access != 0)):
            clock[i] = range_event_clocked(pst, est, S, T, e, ten_out[i], tick[i], clock[i])
        elif op == OP_ADVISE and S.driver[0].advise != 0:
            advise_event(S, T, e)
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
