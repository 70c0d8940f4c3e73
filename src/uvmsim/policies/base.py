"""Policy descriptors and the registry the engine and reference model pick hooks from.

A prefetch policy is one njit function plus an `init`; an eviction policy is four njit
hooks plus an `init`. Signatures (S: uvmsim.engine.state.EngineState, T: TraceArrays,
both read-only to policies; `st` is the state the policy's `init` returned, a namedtuple
of arrays):

    prefetch(st, S, T, blk, lo, hi)
        Block `blk` is being serviced. S.fbits holds its faulted window positions and
        S.rbits its resident ones, one bit per position (8 x uint64: position p is bit
        p & 63 of word p >> 6; helpers in uvmsim.engine.bits); set the bits of S.pbits
        (zeroed before the call) for the positions to prefetch. Positions outside lo..hi,
        faulted or resident are ignored.

    on_fill(st, S, T, chunk, blk, first, last, n_new, tick)
        Pages were made resident in `chunk` (migration, zero-fill, copy or prefetch);
        first..last spans the n_new newly resident positions (-1 when n_new == 0).
    on_hit(st, S, T, chunk, blk, pos, tick)
        An access row hit a resident page (the driver cannot see these).
    on_release(st, S, T, chunk, blk)
        The chunk went back to the free pool (evicted, freed, or emptied by a prefetch).
    victim(st, S, T, tick)
        Choose what to evict: S.victim[:] = (chunk, first_pos, last_pos). The engine copies
        the chunk's resident pages in that window range back and frees the chunk once it
        holds no resident page; it calls victim again until a chunk is free. The chunk must
        pass `may_evict(S, chunk)`: with several tenants a memory component may restrict an
        eviction to one tenant's chunks (uvmsim.components.memory).

`tick` is the index of the current access row (monotonic over the replay).
`init(ctx)` runs in Python once per replay and returns the policy's state: a namedtuple of
NumPy arrays the hooks read by field name (st.prev, st.freq; a plain tuple works too).
"""
from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from numba.core.dispatcher import Dispatcher

# the hook interface's helpers, for policies to import from here: no_hit (an on_hit that does
# nothing), may_evict (a victim hook's tenant check), EmptyState (the state of a policy that
# needs none)
from ..engine.hooks import EmptyState, empty_state, may_evict, no_hit  # noqa: F401
from ..errors import ConfigError


@dataclass(frozen=True)
class PolicyContext:
    """What `init` may use to size and seed its state."""

    n_chunks: int
    n_blocks: int
    n_pages: int
    trace: Any            # uvmsim.trace.TraceArrays
    params: dict[str, float]
    seed: int = 0


@dataclass(frozen=True)
class PrefetchPolicy:
    HOOKS: ClassVar[tuple[str, ...]] = ("prefetch",)  # compiled into the engine
    name: str
    prefetch: Any
    init: Callable[[PolicyContext], tuple] | None = None
    params: dict[str, float] = field(default_factory=dict)
    doc: str = ""
    source: str = ""


@dataclass(frozen=True)
class EvictPolicy:
    HOOKS: ClassVar[tuple[str, ...]] = ("victim", "on_fill", "on_release", "on_hit")
    name: str
    victim: Any
    on_fill: Any
    on_release: Any
    on_hit: Any = None
    init: Callable[[PolicyContext], tuple] | None = None
    params: dict[str, float] = field(default_factory=dict)
    doc: str = ""
    source: str = ""
    # True if the policy works with the partial_blocks option's shared root chunks
    # (docs/policies.md): its victim names a shared root as any chunk and evicts it whole
    # (the range it names is ignored), reads no block of a chunk (S.chunk_block is SHARED,
    # -2, for a shared root), and its on_release takes blk -1 and on_fill n_new 0 (a unit
    # allocated in the root); on_hit is not called with a real chunk for a partial block
    shared_roots: bool = False


PREFETCH: dict[str, PrefetchPolicy] = {}
EVICT: dict[str, EvictPolicy] = {}


def check_hooks(obj: Any, what: str) -> None:
    """Every hook of `obj` the engine calls must be a Numba-compiled function (@njit): a
    plain Python function would fail only when the engine compiles, in a page of Numba's
    output. A ConfigError names the hook and the policy instead. The hooks are the class's
    HOOKS; None (an optional hook) passes."""
    for hook in getattr(type(obj), "HOOKS", ()):
        fn = getattr(obj, hook, None)
        if fn is None or isinstance(fn, Dispatcher) or getattr(fn, "reference_only", False):
            # reference_only: uvmsim.testing's watching wrappers, which only the reference
            # model (plain Python) calls
            continue
        kind = f"the {type(fn).__name__} {getattr(fn, '__name__', repr(fn))!r}"
        raise ConfigError(f"{what} {obj.name!r}: hook {hook} is {kind}, not compiled with "
                          "Numba; decorate it with @numba.njit (docs/policies.md)")


def register_prefetch(policy: PrefetchPolicy, *, replace: bool = False) -> PrefetchPolicy:
    """Make a prefetch policy available by name to simulate() and the CLI; `replace=True`
    replaces a policy of the same name (re-running a notebook cell)."""
    return register(policy, PREFETCH, "prefetch policy", replace=replace)


def register_evict(policy: EvictPolicy, *, replace: bool = False) -> EvictPolicy:
    """Make an eviction policy available by name to simulate() and the CLI; `replace=True`
    replaces a policy of the same name (re-running a notebook cell)."""
    return register(policy, EVICT, "eviction policy", replace=replace)


def lookup(spec: Any, table: dict, kind: type, what: str):
    """`spec` as a `kind`: the object itself, a name registered in `table`, or a
    'module:object' path. `what` names the kind in errors ("prefetch policy", "scheduler").
    Policies and the tenant components (uvmsim.components) resolve the same way."""
    if isinstance(spec, kind):
        check_hooks(spec, what)
        return spec
    if not isinstance(spec, str):
        raise ConfigError(f"{what} must be a name or a {kind.__name__}, got {spec!r}")
    if spec in table:
        return table[spec]
    if ":" in spec:
        mod, _, obj = spec.partition(":")
        # `python -m uvmsim` and notebooks have the current folder on the import path, the
        # `uvmsim` script does not: put it last, so `pkg.mod:obj` resolves the same from both
        # (last: an installed package of the same name still wins)
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.append(os.getcwd())
        try:
            found = getattr(importlib.import_module(mod), obj)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"cannot load {what} {spec!r}: {e}") from None
        if not isinstance(found, kind):
            raise ConfigError(f"{spec!r} is a {type(found).__name__}, not a {kind.__name__}")
        check_hooks(found, what)
        return found
    raise ConfigError(f"unknown {what} {spec!r}; known: {', '.join(sorted(table))} "
                      "(or 'package.module:object')")


def register(obj: Any, table: dict, what: str, *, replace: bool = False) -> Any:
    """Put `obj` into `table` under its name; another object of that name is an error unless
    `replace`."""
    check_hooks(obj, what)
    if obj.name in table and not replace and table[obj.name] is not obj:
        raise ConfigError(f"{what} {obj.name!r} is already registered (replace=True "
                          "replaces it)")
    table[obj.name] = obj
    return obj


def get_prefetch(spec: Any) -> PrefetchPolicy:
    """A registered name, a 'module:object' path, or a PrefetchPolicy."""
    return lookup(spec, PREFETCH, PrefetchPolicy, "prefetch policy")


def get_evict(spec: Any) -> EvictPolicy:
    """A registered name, a 'module:object' path, or an EvictPolicy."""
    return lookup(spec, EVICT, EvictPolicy, "eviction policy")


def resolve_params(defaults: dict[str, float], given: dict[str, float] | None,
                   policy: str) -> dict[str, float]:
    """Defaults overridden by `given`; unknown names are an error."""
    out = dict(defaults)
    for k, v in (given or {}).items():
        if k not in defaults:
            raise ConfigError(f"policy {policy!r} has no parameter {k!r}; it takes "
                              f"{sorted(defaults) or 'none'}")
        out[k] = float(v)
    return out
