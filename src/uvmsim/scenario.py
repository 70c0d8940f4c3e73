"""`Scenario`: everything that defines a replay except the trace(s).

    s = uvmsim.Scenario(model="h200", oversub=1.5, prefetch="density", evict="lru2m",
                        options={"thrashing": True})
    uvmsim.simulate(trace, s)              # one trace
    uvmsim.simulate_multi([a, b], s)       # tenants of one GPU (walkers, scheduler, memory)
    uvmsim.reference.simulate(trace, s)    # the SimPy reference model
    uvmsim.sweep.sweep(traces, [s, s.replace(oversub=2.0)])
    s.to_json(); uvmsim.Scenario.from_json(text)

A Scenario is frozen, hashable and validated when made: an error names the field. Keyword
arguments of `simulate` and the others build one (`Scenario.from_kwargs`): the Scenario fields
by name, and the Model fields a model's options override (uvmsim.config.OPTION_NAMES: slices,
thrashing, hardware, ...) collected into `options`.

Each field's metadata says how the command line gives it (uvmsim.config.setting), so
`uvmsim replay`, `sweep` and `multi` offer every setting: a new field needs its flag, and
tests/test_scenario.py fails until it has one. That is also where a later setting goes: one
field here, with its metadata, its check in `__post_init__` and its entry in
`to_dict`/`from_dict` (as `plan` has).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from .config import (CHUNK_BYTES, DEFAULT_MODEL, MODELS, OPTION_NAMES, Hardware, Model,
                     Translation, get_model, get_translation, model_overrides, set_via,
                     setting)
from .errors import ConfigError

__all__ = ["CAPACITY_FIELDS", "COMPONENT_FIELDS", "Scenario", "as_scenario"]

#: the three ways to give the GPU's capacity; a scenario holds at most one
CAPACITY_FIELDS = ("oversub", "capacity_bytes", "capacity_chunks")
#: the tenant components (uvmsim.components); a one-trace replay uses their defaults
COMPONENT_FIELDS = ("walkers", "scheduler", "memory")
_PAIRS = ("prefetch_params", "evict_params", "options")


@dataclass(frozen=True, repr=False)
class Scenario:
    """What a replay models, with which policies, on how much memory: all but the trace.

    `model`: a preset name (uvmsim.config.MODELS) or a uvmsim.config.Model. `options`: Model
    fields overriding the model's (slices, host_access, thrashing, small_blocks, partial_blocks, remote,
    advise, access_counter_threshold, access_counter_penalty, remote_access_ns, hardware,
    fault_batch_size); `thrashing` may be a dict of THRASHING_DEFAULTS overrides.
    Capacity: at most one of `oversub` (factor f: floor(peak_blocks / f) chunks, at least
    1), `capacity_bytes` or `capacity_chunks`; none means factor 1. `prefetch`/`evict`:
    registered names, 'module:object' paths or policy objects, with `*_params` overriding
    their parameters. `translation`: None (off), True (the defaults), a dict of
    uvmsim.config.Translation fields or a Translation. `walkers`, `scheduler`, `memory`: the
    tenant components of `simulate_multi` (uvmsim.components). `seed`: seeds the policies
    that draw random numbers. `plan`: None, a uvmsim.plans.Plan or the path of a plan file
    (read when the replay is prepared), whose entries run as prefetch events before their
    kernels (docs/semantics.md, "Prefetch plans"); a plan is for one trace, not tenants.

    Mappings are kept as sorted tuples of (name, value) pairs, as Model.thrashing_params is,
    so that a Scenario is hashable; `to_dict` gives them back as dicts.
    """

    model: str | Model = field(default=DEFAULT_MODEL, metadata=setting(
        "--model", "choice", "model preset: its options, batch size and hardware (default: "
        f"{DEFAULT_MODEL}, the spec's counts; see `uvmsim models`); the options below "
        "override it", choices=lambda: sorted(MODELS)))
    oversub: float | None = field(default=None, metadata=setting(
        "--oversub", "float+", "oversubscription factor: capacity = floor(peak_blocks / F) "
        "chunks (tenants: over the sum of their peak blocks)", metavar="F"))
    capacity_bytes: int | None = field(default=None, metadata=setting(
        "--capacity", "bytes", "GPU memory for managed data, e.g. 8GiB", metavar="BYTES"))
    capacity_chunks: int | None = field(default=None, metadata=setting(
        "--capacity-chunks", "int+", "GPU memory for managed data in 2 MiB chunks",
        metavar="N"))
    prefetch: Any = field(default="density", metadata=setting(
        "--prefetch", "name", "prefetch policy: a name (see `uvmsim policies`) or "
        "package.module:object (default: density)"))
    prefetch_params: tuple[tuple[str, float], ...] = field(default=(), metadata=setting(
        "--prefetch-param", "params", "prefetch policy parameter, e.g. threshold=60 "
        "(repeatable)"))
    evict: Any = field(default="lru2m", metadata=setting(
        "--evict", "name", "eviction policy: a name or package.module:object (default: "
        "lru2m)"))
    evict_params: tuple[tuple[str, float], ...] = field(default=(), metadata=setting(
        "--evict-param", "params", "eviction policy parameter (repeatable)"))
    translation: Translation | None = field(default=None, metadata=setting(
        "--translation", "switch", "model the TLB and page-table walkers; bare for the "
        "defaults, or NAME=VALUE of uvmsim.Translation (tlb_entries, page_size, walkers, "
        "walk_ns, ways), repeatable"))
    plan: Any = field(default=None, metadata=setting(
        "--plan", "path", "a prefetch plan file (uvmsim plan ... -o FILE): its entries run "
        "as prefetch events before their kernels (docs/semantics.md)", metavar="FILE",
        alone=True))
    options: tuple[tuple[str, Any], ...] = field(default=(), metadata=set_via("Model"))
    walkers: Any = field(default="shared", metadata=setting(
        "--walkers", "name", "page-table walker component: shared, partitioned, dws or "
        "package.module:object (default: shared; needs --translation)", tenants=True))
    scheduler: Any = field(default="interleave", metadata=setting(
        "--scheduler", "name", "kernel scheduling among tenants: interleave, mfit, amfit, "
        "madvise or package.module:object (default: interleave)", tenants=True))
    memory: Any = field(default="shared", metadata=setting(
        "--memory", "name", "how tenants share the GPU's chunks: shared, partitioned, fair "
        "or package.module:object (default: shared)", tenants=True))
    seed: int = field(default=0, metadata=setting(
        "--seed", "int", "seed of the policies that draw random numbers (default 0)",
        metavar="N"))

    # ------------------------------------------------------------------ checks
    def __post_init__(self) -> None:
        self._check_model()
        self._check_capacity()
        for kind in ("prefetch", "evict"):
            self._check_policy(kind)
        try:
            tr = get_translation(self.translation)
        except ConfigError as e:
            raise ConfigError(f"Scenario.translation: {e}") from None
        object.__setattr__(self, "translation", tr)
        self._check_plan()
        for name in COMPONENT_FIELDS:
            self._check_component(name)
        seed = self.seed
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
            raise ConfigError(f"Scenario.seed: must be an integer, got {seed!r}")
        object.__setattr__(self, "seed", int(seed))

    def _check_model(self) -> None:
        m = self.model
        if not (isinstance(m, Model) or (isinstance(m, str) and m in MODELS)):
            raise ConfigError(f"Scenario.model: unknown model {m!r}; presets: "
                              f"{', '.join(sorted(MODELS))} (or a uvmsim.config.Model)")
        try:
            opts = model_overrides(_as_dict(self.options, "options"))
        except ConfigError as e:
            raise ConfigError(f"Scenario.options: {e}; options are the model settings "
                              f"{', '.join(OPTION_NAMES)}") from None
        object.__setattr__(self, "options", _pairs(opts))
        try:
            get_model(m, **opts)
        except ConfigError as e:
            raise ConfigError(f"Scenario.options: {e}") from None

    def _check_capacity(self) -> None:
        given = [k for k in CAPACITY_FIELDS if getattr(self, k) is not None]
        if len(given) > 1:
            raise ConfigError(f"Scenario: give at most one of {', '.join(CAPACITY_FIELDS)} "
                              f"(got {' and '.join(given)})")
        f = self.oversub
        if f is not None:
            if isinstance(f, bool) or not isinstance(f, (int, float, np.number)) \
                    or not math.isfinite(f) or not f > 0:
                raise ConfigError(f"Scenario.oversub: the factor must be a finite number > 0, "
                                  f"got {f!r}")
            object.__setattr__(self, "oversub", float(f))
        for k, low in (("capacity_bytes", CHUNK_BYTES), ("capacity_chunks", 1)):
            v = getattr(self, k)
            if v is None:
                continue
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                what = "one 2 MiB chunk" if k == "capacity_bytes" else "one chunk"
                raise ConfigError(f"Scenario.{k}: must be an integer >= {low} ({what}), "
                                  f"got {v!r}")
            object.__setattr__(self, k, int(v))

    def _check_policy(self, kind: str) -> None:
        from .policies import get_evict, get_prefetch
        from .policies.base import resolve_params
        try:
            pol = (get_prefetch if kind == "prefetch" else get_evict)(getattr(self, kind))
        except ConfigError as e:
            raise ConfigError(f"Scenario.{kind}: {e}") from None
        params = _as_dict(getattr(self, f"{kind}_params"), f"{kind}_params")
        try:
            resolve_params(pol.params, params, pol.name)
            given = {k: float(v) for k, v in params.items()}
        except (ConfigError, TypeError, ValueError) as e:
            raise ConfigError(f"Scenario.{kind}_params: {e}") from None
        object.__setattr__(self, f"{kind}_params", _pairs(given))

    def _check_plan(self) -> None:
        """A Plan is kept as given; a path as its text (hashable, JSON), read when the replay
        is prepared (`uvmsim.trace.plan_apply.as_plan`), so a plan file may be written after
        the scenario is made."""
        from .trace.plan import Plan
        p = self.plan
        if p is None or isinstance(p, Plan):
            return
        if isinstance(p, Mapping):
            raise ConfigError(f"Scenario.plan: {dict(p)!r} is how to_dict records a Plan "
                              "object (by its content id), not the plan: save the plan "
                              "(Plan.save) and give its path")
        if not isinstance(p, (str, os.PathLike)):
            raise ConfigError(f"Scenario.plan: must be a uvmsim.plans.Plan or the path of a "
                              f"plan file, got {type(p).__name__}")
        text = os.fspath(p)
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"Scenario.plan: empty path {p!r}")
        object.__setattr__(self, "plan", text)

    def plan_id(self) -> str | None:
        """The content id of the plan (uvmsim.plans.Plan.content_id; a path's file is read):
        what identifies it in a sweep's cell ids; None without a plan."""
        from .trace.plan_apply import as_plan
        p = as_plan(self.plan)
        return None if p is None else p.content_id

    def _check_component(self, name: str) -> None:
        try:
            _component(name, getattr(self, name))
        except ConfigError as e:
            raise ConfigError(f"Scenario.{name}: {e}") from None

    # ------------------------------------------------------------------ resolved parts
    def resolved_model(self) -> Model:
        """The model with this scenario's options applied."""
        return get_model(self.model, **dict(self.options))

    def policies(self) -> tuple[Any, Any, dict[str, float], dict[str, float]]:
        """The prefetch and eviction policy objects and their full parameters."""
        from .policies import get_evict, get_prefetch
        from .policies.base import resolve_params
        pf, ev = get_prefetch(self.prefetch), get_evict(self.evict)
        return (pf, ev, resolve_params(pf.params, dict(self.prefetch_params), pf.name),
                resolve_params(ev.params, dict(self.evict_params), ev.name))

    def components(self) -> tuple[Any, Any, Any]:
        """The walkers, scheduler and memory component objects."""
        return tuple(_component(n, getattr(self, n)) for n in COMPONENT_FIELDS)  # type: ignore[return-value]

    def default_components(self) -> bool:
        """True when the tenant components are the defaults (what one trace alone uses)."""
        return all(_name(getattr(self, f.name)) == f.default
                   for f in dataclasses.fields(self) if f.name in COMPONENT_FIELDS)

    def capacity(self, peak_blocks: int) -> int:
        """GPU memory in 2 MiB chunks for a footprint of `peak_blocks` VA blocks."""
        from .config import capacity_chunks
        return capacity_chunks(peak_blocks, oversub=self.oversub,
                               capacity_bytes=self.capacity_bytes,
                               capacity_chunks=self.capacity_chunks)

    # ------------------------------------------------------------------ building
    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> "Scenario":
        """A Scenario from keyword arguments as `simulate` takes them (see `replace`)."""
        return cls().replace(**kwargs)

    def replace(self, **changes: Any) -> "Scenario":
        """A copy with `changes`: Scenario fields by name, or Model settings (OPTION_NAMES,
        merged into `options`; None drops an override, so the model's value holds). Giving
        one capacity field clears the other two. An unknown name is an error naming it."""
        fields = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - fields - set(OPTION_NAMES))
        if unknown:
            raise ConfigError(f"unknown setting {unknown[0]!r}; a scenario takes "
                              f"{', '.join(sorted(fields - {'options'}))} and the model "
                              f"settings {', '.join(OPTION_NAMES)}")
        new = {k: v for k, v in changes.items() if k in fields and k != "options"}
        opts = dict(self.options)
        if "options" in changes:
            opts = _as_dict(changes["options"], "options")
        for k in OPTION_NAMES:
            if k in changes:
                if changes[k] is None:
                    opts.pop(k, None)
                    if k == "thrashing":
                        opts.pop("thrashing_params", None)
                else:
                    opts[k] = changes[k]
        if any(k in new for k in CAPACITY_FIELDS):
            for k in CAPACITY_FIELDS:
                new.setdefault(k, None)
        return dataclasses.replace(self, options=opts, **new)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ dict / JSON
    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON-able values; `from_dict` gives the Scenario back.

        A Model, Hardware or Translation becomes the dict of its fields; a policy or
        component given as an object becomes its name (register it, or give it as
        'module:object', for the dict to name it again). A plan given as a path stays that
        path (`from_dict` reads the file when the replay is prepared); a Plan object becomes
        {"id": its content id, "name": ..., "entries": ...}, a record of which plan it was
        that `from_dict` refuses (save the plan and give its path to rebuild the scenario).
        """
        d: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "model":
                v = v.to_dict() if isinstance(v, Model) else v
            elif f.name == "translation":
                v = None if v is None else {k: x for k, x in v.to_dict().items()
                                            if k != "sources"}
            elif f.name in _PAIRS:
                v = {k: _plain(x) for k, x in v}
            elif f.name in ("prefetch", "evict", *COMPONENT_FIELDS):
                v = _name(v)
            elif f.name == "plan" and v is not None and not isinstance(v, str):
                v = {"id": v.content_id, "name": v.name, "entries": len(v)}
            d[f.name] = v
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Scenario":
        """A Scenario from `to_dict`'s form; fields left out take their defaults."""
        if not isinstance(d, Mapping):
            raise ConfigError(f"a scenario must be a mapping of its fields, got "
                              f"{type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(d) - known)
        if bad:
            raise ConfigError(f"Scenario has no field {bad[0]!r}; fields: "
                              f"{', '.join(sorted(known))}")
        kw = dict(d)
        if isinstance(kw.get("model"), Mapping):
            kw["model"] = Model.from_dict(kw["model"])
        opts = dict(kw.get("options") or {})
        if isinstance(opts.get("hardware"), Mapping):
            opts["hardware"] = Hardware.from_dict(opts["hardware"])
        if isinstance(opts.get("thrashing_params"), Mapping):
            opts["thrashing_params"] = tuple(sorted(opts["thrashing_params"].items()))
        kw["options"] = opts
        return cls(**kw)

    def to_json(self) -> str:
        """`to_dict` as JSON text (keys sorted)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Scenario":
        """The inverse of `to_json`."""
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"a scenario must be JSON: {e}") from None
        return cls.from_dict(d)

    # ------------------------------------------------------------------ identity
    def _key(self) -> tuple:
        return tuple(_hashable(getattr(self, f.name)) for f in dataclasses.fields(self))

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v == f.default and not (f.name in _PAIRS and v):
                continue
            if f.name in _PAIRS:
                text = repr(dict(v))
            elif f.name == "model" and isinstance(v, Model):
                text = f"<Model {v.name!r}>"
            elif f.name in ("prefetch", "evict", *COMPONENT_FIELDS) and not isinstance(v, str):
                text = f"<{type(v).__name__} {_name(v)!r}>"
            else:
                text = repr(v)
            parts.append(f"{f.name}={text}")
        return f"Scenario({', '.join(parts)})"


def as_scenario(scenario: Scenario | None, kwargs: dict[str, Any]) -> Scenario:
    """The Scenario a call means: `scenario` (default: all defaults) with the keyword
    settings `kwargs` applied (`Scenario.replace`)."""
    if scenario is None:
        return Scenario.from_kwargs(**kwargs)
    if not isinstance(scenario, Scenario):
        raise ConfigError(f"scenario must be a uvmsim.Scenario, got {type(scenario).__name__} "
                          "(give keyword settings as keywords)")
    return scenario.replace(**kwargs) if kwargs else scenario


# ---------------------------------------------------------------------- helpers
def _component(name: str, spec: Any) -> Any:
    if name == "walkers":
        from .components.walkers import get_walkers
        return get_walkers(spec)
    if name == "scheduler":
        from .components.sched import get_scheduler
        return get_scheduler(spec)
    from .components.memory import get_memory
    return get_memory(spec)


def _name(v: Any) -> Any:
    """A policy or component: its name when given as an object."""
    return v if isinstance(v, str) else getattr(v, "name", repr(v))


def _as_dict(v: Any, what: str) -> dict[str, Any]:
    if v is None:
        return {}
    if isinstance(v, Mapping):
        return dict(v)
    try:
        return dict(v)
    except (TypeError, ValueError):
        raise ConfigError(f"Scenario.{what}: must be a mapping of names to values, "
                          f"got {v!r}") from None


def _pairs(d: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(d.items()))


def _plain(v: Any) -> Any:
    """An option's value as JSON: a Hardware as its dict, pairs as a dict."""
    if isinstance(v, Hardware):
        return v.to_dict()
    if isinstance(v, tuple):
        return dict(v)
    return v


def _hashable(v: Any) -> Any:
    try:
        hash(v)
        return v
    except TypeError:  # a policy object (its parameters are a dict): by type and name
        return (type(v).__name__, _name(v))
