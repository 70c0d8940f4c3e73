# Driver mechanism: REMOTE MAPPING with access counters (option `remote`; docs/policies.md).
#
# A template part (see memory.py's header). A remotely mapped page is read over the link
# from host memory, with no fault; an access counter decides when it migrates after all:
# the driver's, one per 2 MiB block ("driver"), or UVMSmart's adaptive delayed migration per
# 64 KiB leaf ("uvmsmart").
#
# Owns: S.ac_count, S.ac_trips; settings remote, ac_threshold, ac_penalty, remote_access_ns
# and the flag oversubscribed of S.driver[0].
# Offers: remote_access, counter_driver, counter_uvmsmart (gpu_miss), counter_round_trip
# (on_evicted: leaves that were evicted made one more round trip).


@_jit
def remote_access(S, T, k, r, d):
    """Row r is served over the link from CPU memory: `count` remote accesses, no fault."""
    n = T.row_count[r]
    S.counts[k, C_REMOTE] += n
    S.driver[0].pend_ns += n * S.driver[0].remote_access_ns
    # a page first touched remotely is populated in CPU memory
    S.pstate[d] |= POP


@_jit
def counter_driver(S, T, k, r, d):
    """The driver's access counters: one per 2 MiB block; True when it notifies (migrate)."""
    blk = T.page_block[d]
    S.ac_count[blk] += T.row_count[r]
    if S.ac_count[blk] >= S.driver[0].ac_threshold:
        S.ac_count[blk] = 0
        S.counts[k, C_COUNTER_MIG] += 1
        return True
    return False


@_jit
def counter_uvmsmart(S, T, k, r, d):
    """UVMSmart's adaptive delayed migration, per 64 KiB leaf; True when it migrates."""
    g = T.page_block[d] * 32 + (T.page_pos[d] >> 4)
    S.ac_count[g] += T.row_count[r]
    # chunks in use against the GPU's capacity (the pool may hold fewer: pool.capacity)
    used = S.free_stack.size - S.pool[0].n_free
    cap = S.pool[0].capacity
    if used >= cap:
        S.driver[0].oversubscribed = 1  # sticky, as UVMSmart's over_sub
    if S.driver[0].oversubscribed != 0:
        thr = S.driver[0].ac_threshold * S.driver[0].ac_penalty * (S.ac_trips[g] + 1)
    else:
        thr = 1.0 + S.driver[0].ac_threshold * used / cap
    if S.ac_count[g] >= thr:
        S.counts[k, C_COUNTER_MIG] += 1
        return True
    return False


@_jit
def counter_round_trip(S, blk, first, last):
    """Leaves first..last of a block were evicted: one more round trip, counters restart."""
    for leaf in range(first >> 4, (last >> 4) + 1):
        S.ac_trips[blk * 32 + leaf] += 1
        S.ac_count[blk * 32 + leaf] = 0
