"""Tenant-level components of a GPU shared by several tenants (uvmsim.simulate_multi).

Like the prefetch and eviction policies (uvmsim.policies), each component is one small file
that registers itself by name: njit hooks the compiled engine calls, an `init` that builds
the hooks' named state for a replay (a namedtuple of arrays), and, where the SimPy
reference model models the mechanism its own way, a pure-Python mirror it runs. The engine
names no component. Kinds:

- `walkers` (uvmsim.components.walkers): which page-table walker serves a TLB miss, and
  whether the TLB is sliced among tenants: `shared`, `partitioned`, `dws`.
- `sched` (uvmsim.components.sched): when a tenant's next kernel may start, and what is
  reclaimed or hinted when it does: `interleave`, `mfit`, `amfit`, `madvise`.
- `memory` (uvmsim.components.memory): whose chunks a tenant's new chunk may cost:
  `shared`, `partitioned`, `fair`.
"""
