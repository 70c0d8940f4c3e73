# FRONT-END `page_sets`: what the GPU touches is each kernel's set of access rows, replayed
# in order (docs/semantics.md).
#
# A template part (see memory.py's header). uvmsim.engine.build joins exactly one front-end
# (engine/parts/frontends/<name>.py) into an engine. A front-end defines
#   run_kernel(pst, est, wst, S, T, k, batch_size, t0) -> when kernel k ends
# which the program (program.py) calls for each kernel event, with wst the walker
# component's state in the clocked replay and None in the unclocked one. Of the other parts
# it may call only what build.FRONTEND_USES lists (the driver's add_fault, service_now,
# service_clocked, gpu_miss, mechanisms_end_kernel; advise's collapse_duplicate;
# translation's translate; the eviction policy's EV_ON_HIT): so a second front-end is one
# new file here, and the driver, memory and link stay as they are.
#
# Another front-end may build on this one (build.FRONTEND_BASES): it is then joined without
# its run_kernel, and page_set_kernel replays the kernels the other does not.
#
# Owns: S.frontend[0] (the slices option). Reads S.pstate (RES, INB, DUP) to tell hits,
# pages already in the open batch and misses apart.


@_jit
def run_kernel(pst, est, wst, S, T, k, batch_size, t0):
    """The front-end's entry: kernel k replays its page set (page_set_kernel)."""
    return page_set_kernel(pst, est, wst, S, T, k, batch_size, t0)


@_jit
def page_set_kernel(pst, est, wst, S, T, k, batch_size, t0):
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
    ft = S.driver[0].mechanisms != 0
    if ft:
        S.driver[0].clock = t0
    xl = S.translation[0].on != 0
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
                    t += S.driver[0].pend_ns
                if xl:
                    ready = translate(wst, S, T, d, t, k)
                    if ready > last:
                        last = ready
            ps = S.pstate[d]
            if ps & RES:
                if ps & DUP and T.row_flags[r] & FLAGS_WRITE:
                    collapse_duplicate(S, d)
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
                    t = base + j * gap + stall + S.driver[0].pend_ns
                # thrashing, remote mapping, hints: True when the access is served remotely
                if gpu_miss(S, T, k, r, d, t):
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
                t += S.driver[0].pend_ns
            stall += service_clocked(pst, est, S, T, nb, k, r1, t)
    if ft:
        stall = mechanisms_end_kernel(S, dur, stall)
    end = t0 + dur + stall
    S.times[k, T_STALL] += stall
    if last > end:
        S.times[k, T_XLATE] += last - end
        S.times[k, T_STALL] += last - end
        end = last
    return end


@_jit
def kernel_passes(S, T, k):
    """Passes of kernel k's rows: its n_slices with the slices option on (docs/semantics.md),
    else 1."""
    if S.frontend[0].slices != 0 and T.row_slices.size:
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
