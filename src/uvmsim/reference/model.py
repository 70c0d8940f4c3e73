"""The reference model: the GPU, the UVM driver and the link as a SimPy simulation.

Written to be read beside the engine (src/uvmsim/engine/parts/): it has the same parts, by
the same names, one class per part in a file of the same name (memory.py, translation.py,
driver.py, mechanisms/*.py, frontends/page_sets.py, program.py), and each step method has the
engine's name and does the engine's work, on the same EngineState arrays (S) and trace
arrays (T), calling the same policy hooks. The engine joins its parts into one module;
ReferenceModel joins the part classes into one class, and holds the attributes they share.
What the engine computes in closed form (when a walker frees, how long a batch waits for the
driver) happens here as SimPy processes queueing for `simpy.Resource`s:

    GPU front end ─ kernel process ─ rows ──▶ TLB ──miss──▶ page-table walkers (Resource, N)
                         │                                   hold each walk for walk_ns
                         └─ faults ──▶ FaultBuffer ──full/kernel end──▶ driver (Resource, 1)
                                                       service_batch: prefetch, evict,
                                                       copy engine over the link
    memcpy / memset / prefetch events ───────────────────────────────▶ driver (Resource, 1)
"""
from __future__ import annotations

import numpy as np
import simpy

from ..components.walkers import WALKERS, WalkerContext
from ..engine.build import policy_key
from ..engine.hooks import no_hit
from .driver import Driver, FaultBuffer
from .frontends.page_sets import PageSets
from .mechanisms.advise import Advise
from .mechanisms.host_access import HostAccess
from .mechanisms.remote import Remote
from .mechanisms.thrashing import Thrashing
from .memory import Memory
from .program import Program
from .translation import Translation


class ReferenceModel(PageSets, Program, Driver, Thrashing, Remote, Advise, HostAccess, Memory,
                     Translation):
    """One GPU shared by tenants: memory (S), driver + copy engine, walkers and a TLB.

    The front-end is the first base (PageSets): a model with another front-end is
    `class M(OtherFrontend, ReferenceModel)`, the way the engine joins another front-end
    file."""

    def __init__(self, S, T, pf, ev, pst, est, batch_size: int, walkers=None,
                 walker_ctx: WalkerContext | None = None, scheduler=None,
                 sched_state: tuple = (), memory=None) -> None:
        self.S, self.T = S, T
        self.pst, self.est = pst, est
        # the hooks run from Python here: key their disk caches as the engine's are
        _, hooks = policy_key(pf, ev, walkers, scheduler, memory)
        # the memory component's hook and the scheduler's start hook are called as the
        # engine calls them (as policy hooks are)
        self.MEM_RESERVE = hooks["MEM_RESERVE"]
        self.SC_START = hooks["SC_START"]
        self.PF_PREFETCH = pf.prefetch
        self.EV_ON_FILL = ev.on_fill
        self.EV_ON_HIT = None if ev.on_hit in (None, no_hit) else ev.on_hit
        self.EV_ON_RELEASE = ev.on_release
        self.EV_VICTIM = ev.victim
        self.batch_size = batch_size
        self.faults = FaultBuffer(S, batch_size)
        # faulted / prefetch-chosen positions of the block being serviced
        self.fmask = np.zeros(512, np.uint8)
        self.pmask = np.zeros(512, np.uint8)
        self.xl = bool(S.translation[0].on)
        self.thrashing = bool(S.driver[0].thrashing)
        # any optional mechanism on: kernels run on the mechanisms' clock (driver.clock and
        # driver.pend_ns)
        self.ft = bool(S.driver[0].mechanisms)
        self.walk_ns = float(S.translation[0].walk_ns)
        # the walker component's FIFO pools (one simpy.Resource each) and pool choice
        self.wk = walkers if walkers is not None else WALKERS["shared"]
        self.wctx = walker_ctx or WalkerContext(1, int(S.walk_free.size),
                                                max(int(S.translation[0].sets), 1))
        self.pools = [list(p) for p in self.wk.pools(self.wctx)]
        # the scheduler component's mirror: may a tenant start its next kernel now
        self.admit = scheduler.admit_py if scheduler is not None else None
        self.sched_state = sched_state
        # TLB slot -> id of the fill whose walk has not been granted a walker yet
        self._fill_id = {}
        self._next_fill = 0
        self.env: simpy.Environment | None = None
