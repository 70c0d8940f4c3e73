"""Front-end `progress` in the reference model: thread blocks progress through their own v1.2
streams in resident slots, stall on their faults and resume when the driver has serviced
them (the engine's engine/parts/frontends/progress.py; docs/semantics.md, "Progress").

A kernel with a stream is its own SimPy run on a clock that starts at 0 with the kernel:
one process per thread block, holding a slot of a `simpy.Resource(slots)` for its run (the
resource grants slots in request order, so blocks are dispatched in id order), and one
driver process that takes the queued faults in arrival order (with fault_order age: by the
faulting block's age rank on its SM, then arrival), services them as a batch
(Driver.service_batch) and wakes the stalled blocks when the service ends. Events at equal
times go in the engine's order: a service's end, then the blocks by id, then the driver's
start (their SimPy priorities below). Kernels without a stream replay their page set.
"""
from __future__ import annotations

import heapq
from collections import deque

import numpy as np
import simpy

from ...engine.state import (C_FAULTS, C_FAULTS_READ, C_FAULTS_WRITE, MAX_ROW_FAULTS,
                             PEND_FLIGHT, PEND_NONE, PEND_QUEUED, RES, T_STALL, T_TRANSFER)
from ...trace.format import FLAGS_LOAD, FLAGS_WRITE

# SimPy priorities of a kernel's events at one time (lower first; SimPy's own grants and
# wake-ups, NORMAL = 1, only pass control and come first)
P_SERVICE_END = 2
P_BLOCK = 3                # + the block's index in the kernel
P_DRIVER = 3 + (1 << 40)


class At(simpy.events.Event):
    """An event at exactly time t (not now + a rounded delay) with a given priority."""

    def __init__(self, env: simpy.Environment, t: float, priority: int) -> None:
        super().__init__(env)
        self._ok = True
        self._value = None
        delay = t - env.now
        for _ in range(8):
            got = env.now + delay
            if got == t:
                break
            delay = float(np.nextafter(delay, np.inf if got < t else -np.inf))
        else:
            raise AssertionError(f"no delay reaches time {t!r} from {env.now!r}")
        env.schedule(self, priority, delay)


class _Run:
    """One kernel's run: its clock, slots, fault queue, stalled blocks and driver."""

    def __init__(self, k: int, t0: float, b0: int, s: float, lat: float, slots: int,
                 store_ahead: int, by_age: bool, sms: int, pool: int) -> None:
        self.env = simpy.Environment()
        self.slots = simpy.Resource(self.env, capacity=slots)
        self.k, self.t0, self.b0, self.s, self.lat = k, t0, b0, s, lat
        self.store_ahead = store_ahead
        self.by_age, self.sms = by_age, sms
        self.n_slots, self.pool = slots, pool  # sm_store_pool (rule 4b)
        self.sm: dict[int, int] = {}          # block -> the SM it runs on
        self.smout = [0] * max(1, min(sms, slots))  # outstanding stores of an SM's blocks
        self.free_sms: deque = deque()        # SMs of freed slots, in the order freed
        self.stores: dict[int, list[int]] = {}  # block -> access rows of outstanding stores
        self.refault: dict[int, int] = {}       # block -> times it faulted without passing
        self.queue: deque = deque()          # (access row, arrival, key) of pending faults
        self.stalled: list = []              # (block, its wake-up event)
        self.work = None                     # the idle driver's wake-up event
        self.flight = False
        self.flight_done = None
        self.last = 0.0
        self.tick = 0


class Progress:
    """Kernels with a stream replay their thread blocks; the others their page set."""

    def run_kernel(self, k: int, t0: float):
        if self.S.fe_slots[k] > 0:
            return self.progress_kernel(k, t0)
        return super().run_kernel(k, t0)

    def progress_kernel(self, k: int, t0: float):
        """Run kernel k's blocks on their own clock; the kernel ends at t0 + duration_ns +
        the stall (the run's end past duration_ns)."""
        S, T = self.S, self.T
        dur = float(T.k_duration_ns[k])
        if not dur > 0.0:
            dur = 0.0
        last = self.run_blocks(k, t0, dur)
        stall = last - dur if last > dur else 0.0
        S.times[k, T_STALL] += stall
        end = t0 + dur + stall
        if end > self.env.now:
            yield self.env.timeout(end - self.env.now)
        return end

    def run_blocks(self, k: int, t0: float, dur: float) -> float:
        S, T = self.S, self.T
        b0 = int(S.fe_bstart[k])
        n_blk = int(S.fe_bstart[k + 1]) - b0
        slots = min(int(S.fe_slots[k]), n_blk)
        # the fault-free makespan in the instrumented clock: blocks in id order on the slots
        free = [0] * slots
        m = 0
        for j in range(n_blk):
            e = heapq.heappop(free) + int(S.fe_bdur[b0 + j])
            m = max(m, e)
            heapq.heappush(free, e)
        R = _Run(k, t0, b0, dur / m, float(S.frontend[0].fault_latency_ns), slots,
                 int(S.frontend[0].store_ahead), int(S.frontend[0].fault_order) == 1,
                 int(S.fe_sms[k]), int(S.frontend[0].sm_store_pool))
        env = R.env
        blocks = [env.process(self.block(R, j)) for j in range(n_blk)]
        env.process(self.progress_driver(R))

        def kernel():
            yield env.all_of(blocks)
            if R.flight:
                R.flight_done = env.event()
                yield R.flight_done

        env.run(until=env.process(kernel()))
        for a, *_ in R.queue:  # not needed any more: every block has run
            S.fe_pend[T.row_page[a]] = PEND_NONE
        return R.last

    def block(self, R: _Run, j: int):
        """Thread block j: take a slot, then its rows in order, stalling on faults."""
        S, T, env = self.S, self.T, R.env
        rt = S.fe_rt
        with R.slots.request() as req:
            yield req
            # the first wave goes to the SMs in turn; a later block takes the freed slot's
            sm = R.sm[j] = j % R.sms if j < R.n_slots else R.free_sms.popleft()
            r = int(S.fe_rstart[R.b0 + j])
            e = int(S.fe_rstart[R.b0 + j + 1])
            t = env.now + int(rt[r]) * R.s
            yield At(env, t, P_BLOCK + j)
            R.refault[j] = 0
            stores = R.stores[j] = []  # its outstanding stores (store_ahead, rule 4a)
            while True:
                if R.pool and R.smout[sm] >= R.pool:
                    # rule 4b: the SM's pool of faulting stores is full: wait for a service end
                    wake = env.event()
                    R.stalled.append((j, wake))
                    t = yield wake
                    yield At(env, t, P_BLOCK + j)
                    continue
                missing, queued, loads = self.check_row(R, j, r, t)
                if missing and R.store_ahead and not loads and \
                        len(stores) + missing <= R.store_ahead and \
                        (not R.pool or R.smout[sm] + missing <= R.pool):
                    stores += self.pending_rows(r)
                    R.smout[sm] += missing
                    missing = 0
                if missing:
                    if queued:
                        R.refault[j] += 1
                        if R.refault[j] > MAX_ROW_FAULTS:
                            raise RuntimeError("progress: a thread block's row keeps faulting "
                                               "(it needs more memory than the GPU holds)")
                    wake = env.event()
                    R.stalled.append((j, wake))
                    t = yield wake
                    yield At(env, t, P_BLOCK + j)
                    continue
                R.refault[j] = 0
                self.pass_row(r)
                if r + 1 < e:
                    t = t + (int(rt[r + 1]) - int(rt[r])) * R.s
                    r += 1
                    yield At(env, t, P_BLOCK + j)
                else:
                    t = t + (int(S.fe_bdur[R.b0 + j]) - int(rt[r])) * R.s
                    yield At(env, t, P_BLOCK + j)
                    break
            # its stores land before it ends
            while stores:
                wake = env.event()
                R.stalled.append((j, wake))
                t = yield wake
                yield At(env, t, P_BLOCK + j)
            R.last = max(R.last, t)
            R.free_sms.append(sm)

    def check_row(self, R: _Run, j: int, r: int, t: float) -> tuple[int, int, int]:
        """Row r of block j: its pages (not usable yet, newly queued as faults, of the not
        usable ones those the kernel reads or updates)."""
        S, T = self.S, self.T
        missing = queued = loads = 0
        for i in range(int(S.fe_rlo[r]), int(S.fe_rhi[r])):
            a = int(S.fe_acc[i])
            d = int(T.row_page[a])
            if T.a_host[T.b_alloc[T.page_block[d]]]:
                continue
            pe = S.fe_pend[d]
            if pe != PEND_FLIGHT and S.pstate[d] & RES:
                continue
            missing += 1
            loads += bool(T.row_flags[a] & FLAGS_LOAD)
            if pe == PEND_NONE:
                if R.work is not None and not R.work.triggered:
                    R.work.succeed()
                self.queue_fault(R, j, a, d, t)
                queued += 1
        return missing, queued, loads

    def queue_fault(self, R: _Run, j: int, a: int, d: int, t: float) -> None:
        """Access row a (page d) of block j faults at time t: it joins the queue with its
        order key (with fault_order age, block j's age rank on its SM, as blocks go to the
        SMs in turn; else 0, arrival order)."""
        R.queue.append((a, t, j // R.sms if R.by_age else 0))
        self.S.fe_pend[d] = PEND_QUEUED

    def usable(self, d: int) -> bool:
        """Page d is resident and not in a batch being serviced."""
        return bool(self.S.fe_pend[d] != PEND_FLIGHT and self.S.pstate[d] & RES)

    def pending_rows(self, r: int) -> list[int]:
        """Row r's access rows whose page is missing (not usable), in the row's order."""
        S, T = self.S, self.T
        out = []
        for i in range(int(S.fe_rlo[r]), int(S.fe_rhi[r])):
            a = int(S.fe_acc[i])
            d = int(T.row_page[a])
            if not T.a_host[T.b_alloc[T.page_block[d]]] and not self.usable(d):
                out.append(a)
        return out

    def settle_stores(self, R: _Run, j: int, t: float) -> None:
        """At a service's end, block j's outstanding stores settle (rule 4a): a usable page
        takes its store; a pending fault waits; a page evicted before the store landed faults
        again, queued at t."""
        S, T = self.S, self.T
        keep, again = [], 0
        held = len(R.stores[j])
        for a in R.stores[j]:
            d = int(T.row_page[a])
            pe = S.fe_pend[d]
            if self.usable(d):
                continue
            if pe == PEND_NONE:
                self.queue_fault(R, j, a, d, t)
                again += 1
            keep.append(a)
        R.stores[j][:] = keep
        R.smout[R.sm[j]] -= held - len(keep)
        if again:
            R.refault[j] += 1
            if R.refault[j] > MAX_ROW_FAULTS:
                raise RuntimeError("progress: a thread block's stores keep faulting (it "
                                   "needs more memory than the GPU holds)")

    def pass_row(self, r: int) -> None:
        """A block passes row r: the eviction policy hears of a hit on each of its pages
        that is usable (with store_ahead, the others are its outstanding stores)."""
        S, T = self.S, self.T
        if self.EV_ON_HIT is None:
            return
        for i in range(int(S.fe_rlo[r]), int(S.fe_rhi[r])):
            a = int(S.fe_acc[i])
            d = int(T.row_page[a])
            blk = int(T.page_block[d])
            if not T.a_host[T.b_alloc[blk]] and self.usable(d):
                self.EV_ON_HIT(self.est, S, T, S.b_chunk[blk], blk, T.page_pos[d], a)

    def progress_driver(self, R: _Run):
        """The driver: when faults are queued, take up to a batch of them in arrival order
        or by age (rule 5a; those made resident meanwhile are dropped), service them, wake the stalled blocks
        at the service's end."""
        S, T, env = self.S, self.T, R.env
        while True:
            if not R.queue:
                R.work = env.event()
                yield R.work
                R.work = None
            start = max(env.now, R.queue[0][1] + R.lat)
            yield At(env, start, P_DRIVER)
            if R.by_age:  # rule 5a: stable, so arrival order within a key
                R.queue = deque(sorted(R.queue, key=lambda e: e[2]))
            batch = []
            while R.queue and len(batch) < self.batch_size:
                a, *_ = R.queue.popleft()
                d = int(T.row_page[a])
                if S.pstate[d] & RES:
                    S.fe_pend[d] = PEND_NONE
                    continue
                S.fe_pend[d] = PEND_FLIGHT
                batch.append(a)
                R.tick = a
                S.counts[R.k, C_FAULTS] += 1
                S.counts[R.k, C_FAULTS_WRITE if T.row_flags[a] & FLAGS_WRITE
                         else C_FAULTS_READ] += 1
                self.faults.add(d)
            if not batch:
                continue
            nb = len(batch)
            S.driver[0].step_ns = 0.0
            host0 = self.host_bytes_in(R.k)
            self.service_batch(nb, R.k, R.tick)
            cost = self.batch_cost(R.k, nb, host0)
            S.times[R.k, T_TRANSFER] += S.driver[0].step_ns
            end = start + cost
            R.flight = True
            yield At(env, end, P_SERVICE_END)
            R.flight = False
            for a in batch:
                S.fe_pend[T.row_page[a]] = PEND_NONE
            for j in sorted(R.stores):
                if R.stores[j]:
                    self.settle_stores(R, j, end)
            R.last = max(R.last, end)
            stalled, R.stalled = R.stalled, []
            for _, wake in stalled:
                wake.succeed(end)
            if R.flight_done is not None:
                R.flight_done.succeed()
