"""The program in the reference model: the trace's events in program order, tenants
interleaved on one clock (the engine's engine/parts/program.py, replay_clocked).

Tenants (one for `simulate`) are interleaved by event: the tenant whose clock is earliest
runs its next event whole. Each event is one SimPy run starting at that tenant's clock; the
driver and walkers enter it busy until the times earlier events left them
(S.driver[0].free_at, S.walk_free), so queueing carries across events and tenants.
"""
from __future__ import annotations

import numpy as np
import simpy

from ..engine.state import T_STALL
from ..trace.format import (OP_ADVISE, OP_DTOD, OP_FREE, OP_HOST_ACCESS, OP_HTOD, OP_KERNEL,
                            OP_MEMSET, OP_PREFETCH)


class Program:
    """Tenants' events on one clock, each event one SimPy run."""

    def _open(self, t: float) -> simpy.Environment:
        """A SimPy run starting at time t, with the driver and the walkers busy until the
        times earlier events (of any tenant) left them."""
        env = self.env = simpy.Environment(initial_time=t)
        self.driver = simpy.Resource(env, capacity=1)
        self.walkers = [simpy.Resource(env, capacity=len(p)) for p in self.pools]

        def busy_until(res, until):
            with res.request() as req:
                yield req
                yield env.timeout(until - env.now)

        if self.S.driver[0].free_at > t:
            env.process(busy_until(self.driver, float(self.S.driver[0].free_at)))
        if self.xl:
            for p, pool in enumerate(self.pools):
                for w in pool:
                    if self.S.walk_free[w] > t:
                        env.process(busy_until(self.walkers[p], float(self.S.walk_free[w])))
        return env

    def event(self, e: int, out_row: int, tick: int, t: float):
        """One event of a tenant starting at its clock t; returns the tenant's new clock."""
        T = self.T
        op = int(T.ev_op[e])
        if op == OP_KERNEL:
            return (yield self.env.process(self.run_kernel(int(T.ev_kernel[e]), t)))
        if op == OP_FREE:
            self.free_alloc(int(T.ev_alloc[e]))
        elif op == OP_ADVISE and self.S.driver[0].advise:
            self.advise_event(e)
        elif (op in (OP_HTOD, OP_MEMSET, OP_PREFETCH)
              or (op == OP_DTOD and self.S.driver[0].device_copies)
              or (op == OP_HOST_ACCESS and self.S.driver[0].host_access)):
            return (yield self.env.process(self.range_event_clocked(e, out_row, tick, t)))
        return t

    def replay_clocked(self, ten_ev: np.ndarray, ten_out: np.ndarray, clock: np.ndarray,
               waited: np.ndarray | None = None) -> None:
        """Replay tenants' events (tenant i: events ten_ev[i]..ten_ev[i+1]-1, outside row
        ten_out[i], time clock[i]): the earliest clock (ties: lowest index) among tenants
        not waiting goes next. A kernel the scheduler does not admit waits until another
        tenant's event ends (its clock moves there; waited[i] adds the time); when every
        tenant waits, the earliest goes anyway."""
        T, S = self.T, self.S
        n_t = len(ten_ev) - 1
        cur = [int(x) for x in ten_ev[:n_t]]
        tick = [0] * n_t
        waiting: set[int] = set()
        while True:
            live = [j for j in range(n_t) if cur[j] < ten_ev[j + 1]]
            S.t_live[:] = [j in live for j in range(n_t)]
            if not live:
                return
            ready = [j for j in live if j not in waiting] or live
            i = min(ready, key=lambda j: (clock[j], j))
            e = cur[i]
            if (self.admit is not None and int(T.ev_op[e]) == OP_KERNEL and i not in waiting
                    and not self.admit(self.sched_state, S, T, i, int(T.ev_kernel[e]),
                                       np.array([j in live for j in range(n_t)], np.uint8))):
                waiting.add(i)
                continue
            cur[i] += 1
            if int(T.ev_op[e]) == OP_KERNEL:
                self.reclaim(i, int(T.ev_kernel[e]), tick[i], float(clock[i]))
            env = self._open(float(clock[i]))
            proc = env.process(self.event(e, int(ten_out[i]), tick[i], float(clock[i])))
            clock[i] = env.run(until=proc)
            if T.ev_op[e] == OP_KERNEL:
                tick[i] = int(T.k_row_start[int(T.ev_kernel[e]) + 1])
            for j in sorted(waiting):
                if clock[i] > clock[j]:
                    if waited is not None:
                        waited[j] += clock[i] - clock[j]
                    S.times[int(ten_out[j]), T_STALL] += clock[i] - clock[j]
                    clock[j] = clock[i]
            waiting.clear()
