# Driver mechanism: cudaMemAdvise HINTS (option `advise`; docs/policies.md).
#
# A template part (see memory.py's header). Preferred location, accessed-by and read-mostly
# hints of advise events; a read-mostly page read by the GPU is a read duplicate (DUP), which
# an eviction drops instead of copying and a write collapses.
#
# Owns: S.pg_adv; the DUP bit of S.pstate.
# Offers: advise_event (the program), advise_prefetch (the driver's hint rules on a batch's
# prefetch set), collapse_duplicate (a front-end: a write hit a read duplicate).


@_jit
def advise_event(S, T, e):
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


@_jit
def collapse_duplicate(S, d):
    """A write hit a read duplicate: the driver collapses the copies (a revocation fault)."""
    S.pstate[d] &= ~DUP
    S.driver[0].pend_ns += S.hw[0].batch_ns + S.hw[0].fault_ns


@_jit
def advise_prefetch(S, T, blk, lo, hi):
    """A fault on a page whose preferred location is the GPU, in a block resident nowhere,
    takes the whole block; pages preferring the CPU are not prefetched to the GPU."""
    p0 = T.b_page0[blk] - lo
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
