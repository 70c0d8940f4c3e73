"""The `uvmsim` command line: replay, sweep, multi, plan, info, synth, record, run, policies,
hardware, models.

User errors (bad arguments, malformed traces, missing or unreadable paths, not enough
memory) print one line on stderr and exit with status 2; an internal error prints one line
and exits with status 1; nothing prints a traceback unless UVMSIM_DEBUG=1.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from .argtypes import (Parser, factors, kv, names, nonnegative_float, parse_bytes, path,
                       positive_float, positive_int, switch, whole)
from .errors import UserError, run_command

#: how each kind of setting (uvmsim.config.setting) is read from the command line
_SETTING_KINDS: dict[str, dict[str, Any]] = {
    "bool": {"action": argparse.BooleanOptionalAction},
    "name": {"metavar": "NAME"},
    "choice": {},
    "int": {"type": whole},
    "int+": {"type": positive_int},
    "float+": {"type": positive_float},
    "float0+": {"type": nonnegative_float},
    "bytes": {"type": parse_bytes},
    "path": {"type": path},
    "params": {"action": "append", "metavar": "NAME=VALUE"},
    "switch": {"action": "append", "nargs": "?", "const": "on", "metavar": "NAME=VALUE"},
}
#: the settings that are the axes of `uvmsim sweep`'s grid (lists there), or that it has
#: no use for (a sweep gives capacity as factors)
_SWEEP_OWN = ("model", "oversub", "capacity_bytes", "capacity_chunks", "prefetch", "evict")


def setting_fields(*, tenants: bool) -> list[dataclasses.Field]:
    """The fields that are command-line settings, in the order of their flags: the
    Scenario's (its tenant components only with `tenants`, its settings of one trace alone
    only without), then the Model's that a scenario's options override."""
    from .config import OPTION_NAMES, Model
    from .scenario import Scenario
    out = [f for f in dataclasses.fields(Scenario) if "flag" in f.metadata["cli"]
           and not f.metadata["cli"].get("alone" if tenants else "tenants")]
    return out + [f for f in dataclasses.fields(Model)
                  if f.name in OPTION_NAMES and "flag" in f.metadata["cli"]]


def _add_settings(p: argparse.ArgumentParser, *, tenants: bool,
                  skip: Sequence[str] = ()) -> None:
    """--scenario and one flag per setting (uvmsim.config.setting), none with a default of
    its own: what is not given keeps the scenario's value (`_scenario`)."""
    from .config import OPTION_NAMES
    p.add_argument("--scenario", metavar="FILE",
                   help="start from the Scenario in this JSON file (uvmsim.Scenario.to_json; "
                        "inline JSON works too); the flags below change it")
    opts = p.add_argument_group("model settings (default: the model's; docs/model.md, "
                                "docs/policies.md)")
    given = [f for f in setting_fields(tenants=tenants) if f.name not in skip]
    p.set_defaults(_settings=tuple(f.name for f in given))
    for f in given:
        m = f.metadata["cli"]
        kw = dict(_SETTING_KINDS[m["kind"]], dest=f.name, default=argparse.SUPPRESS,
                  help=m["help"])
        if "choices" in m:
            kw["choices"] = list(m["choices"]() if callable(m["choices"]) else m["choices"])
        if "metavar" in m:
            kw["metavar"] = m["metavar"]
        (opts if f.name in OPTION_NAMES else p).add_argument(m["flag"], **kw)


def _settings(a: argparse.Namespace) -> dict[str, Any]:
    """The settings given on the command line, as Scenario.replace takes them (only the
    command's own: `_add_settings` names them)."""
    out: dict[str, Any] = {}
    for f in {f.name: f for t in (False, True) for f in setting_fields(tenants=t)}.values():
        if f.name not in a._settings or not hasattr(a, f.name):
            continue
        v = getattr(a, f.name)
        kind = f.metadata["cli"]["kind"]
        out[f.name] = kv(v) if kind == "params" else switch(v) if kind == "switch" else v
    return out


def _read_json(spec: str, what: str) -> Any:
    """JSON from a file, or inline when `spec` starts with { or [."""
    text = spec if spec.lstrip()[:1] in ("{", "[") else None
    if text is None:
        try:
            text = Path(spec).read_text()
        except OSError as e:
            raise UserError(f"{what} {spec}: {e.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{what} {spec}: not JSON ({e})") from None


def _scenario(a: argparse.Namespace) -> Any:
    """The Scenario of a command: --scenario's (default: every default), changed by the
    settings given."""
    from .scenario import Scenario, as_scenario
    base = Scenario.from_dict(_read_json(a.scenario, "--scenario")) if a.scenario else None
    return as_scenario(base, _settings(a))


def _add_trace_args(p: argparse.ArgumentParser, *, stream: bool = True) -> None:
    p.add_argument("--drop-out-of-range", action="store_true",
                   help="drop (and count) access rows outside live allocations instead of "
                        "rejecting the trace")
    if stream:
        p.add_argument("--stream", action="store_true",
                       help="keep the access rows on disk: read them again kernel by kernel "
                            "while replaying (same counts; for traces larger than memory; "
                            "docs/performance.md)")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    ap = Parser(prog="uvmsim", description="Replay GPU memory traces under CUDA Unified "
                                           "Memory oversubscription.")
    ap.add_argument("--version", action="version", version=f"uvmsim {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("replay", help="replay one trace under one scenario")
    p.add_argument("trace", help="a .uvmtrace directory")
    _add_settings(p, tenants=False)
    _add_trace_args(p)
    p.add_argument("--json", action="store_true",
                   help="print the summary as one JSON object on stdout, nothing else")
    p.add_argument("--kernels-out", metavar="FILE", type=path,
                   help="also write the per-kernel table (.parquet or .csv)")

    p = sub.add_parser("sweep", help="replay traces over scenarios (a grid of models, "
                                     "policies and factors, or a file of scenarios); table, "
                                     "resumable Parquet dataset, plot")
    p.add_argument("trace", nargs="+", help="one or more .uvmtrace directories")
    p.add_argument("--scenarios", metavar="FILE",
                   help="sweep these scenarios (a JSON list of uvmsim.Scenario.to_dict; "
                        "inline JSON works too) instead of the grid below; the other "
                        "settings change every one")
    p.add_argument("--oversub", type=factors, default=argparse.SUPPRESS,
                   help="comma-separated factors (default: 1,1.25,1.5,2,2.5,3)")
    p.add_argument("--prefetch", type=names, default=argparse.SUPPRESS,
                   help="comma-separated prefetch policies (default: none,64k,2m,density)")
    p.add_argument("--evict", type=names, default=argparse.SUPPRESS,
                   help="comma-separated eviction policies (default: lru2m)")
    p.add_argument("--model", "--models", dest="models", type=names, metavar="A,B",
                   default=argparse.SUPPRESS,
                   help="comma-separated model presets (default: contract; see `uvmsim "
                        "models`)")
    _add_settings(p, tenants=False, skip=_SWEEP_OWN)
    _add_trace_args(p, stream=False)
    p.add_argument("--dataset", metavar="DIR", type=path,
                   help="write each finished cell to DIR/cell-<id>.parquet as it finishes; "
                        "cells already there are read back, not replayed (resume)")
    p.add_argument("--segment", metavar="NAME",
                   help="kernel-name substring marking iterations (e.g. spin_kernel): adds "
                        "iter_* columns for the kernels after its last occurrence")
    p.add_argument("-o", "--out", metavar="FILE", type=path,
                   help="write the table (.parquet or .csv)")
    p.add_argument("--plot", metavar="PNG", type=path, help="write a plot of the sweep")
    p.add_argument("--jobs", type=positive_int, help="worker processes (default: CPUs)")
    p.add_argument("--executor", "--backend", dest="executor",
                   choices=["process", "dask", "serial"], default="process",
                   help="where cells run: a local process pool (default), a dask cluster "
                        "(--scheduler) or this process")
    p.add_argument("--scheduler", metavar="ADDR",
                   help="dask scheduler address, e.g. tcp://host:8786 (with --executor dask; "
                        "without it a local cluster of --jobs workers is started)")
    p.add_argument("--json", action="store_true", help="print the table as JSON records")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = sub.add_parser("multi", help="replay traces as tenants sharing one GPU; per-tenant "
                                     "slowdown and system STP/ANTT/fairness")
    p.add_argument("traces", nargs="+", help=".uvmtrace directories, one per tenant")
    _add_settings(p, tenants=True)
    _add_trace_args(p, stream=False)
    p.add_argument("--json", action="store_true",
                   help="print {'tenants': [rows], 'system': {...}} as JSON, nothing else")
    p.add_argument("-o", "--out", metavar="FILE", type=path,
                   help="write the tenant table (.parquet or .csv)")

    p = sub.add_parser("plan", help="build a prefetch plan: call a predictor before each "
                                    "kernel, write the plan file (docs/policies.md, Plans)")
    p.add_argument("trace", help="a .uvmtrace directory")
    p.add_argument("--predictor", required=True,
                   help="oracle, correlation, stride, or package.module:object")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="predictor parameter, e.g. lookahead=2 (repeatable)")
    p.add_argument("--allow-future", action="store_true",
                   help="let a predictor that sees the future (the oracle) build its plan")
    # the scenario of the replay that gives the predictor feedback (and Plan.result);
    # --plan is no setting here: build makes the plan
    _add_settings(p, tenants=False, skip=("plan",))
    _add_trace_args(p, stream=False)
    p.add_argument("-o", "--out", required=True, metavar="FILE.parquet", type=path,
                   help="the plan file to write")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--json", action="store_true",
                   help="print the plan's summary and the build replay's summary as JSON")

    p = sub.add_parser("info", help="describe a trace")
    p.add_argument("trace")
    p.add_argument("--json", action="store_true")
    p.add_argument("--drop-out-of-range", action="store_true")

    from .trace.synth import GENERATORS
    p = sub.add_parser("synth", help="write a synthetic trace")
    p.add_argument("kind", choices=sorted(GENERATORS))
    p.add_argument("-o", "--out", required=True, metavar="OUT.uvmtrace", type=path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--footprint", type=parse_bytes, metavar="BYTES",
                   help="buffer size (sequential, strided, random, zipf)")
    p.add_argument("--kernels", type=positive_int, help="kernel count (not training)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="any other generator argument (see uvmsim.trace.synth), repeatable")
    p.add_argument("--overwrite", action="store_true")

    p = sub.add_parser("record", help="record a CUDA program into a uvmtrace (needs a GPU)")
    try:
        from . import record as _record
        _record.configure_parser(p)
        p.set_defaults(_record=_record)
    except ImportError as e:  # pragma: no cover - only when the module is broken
        p.set_defaults(_record_error=str(e))

    p = sub.add_parser("run", help="run a CUDA program really oversubscribed (needs a GPU): "
                                   "real kernel times, faults and migrations")
    from . import groundtruth as _gt
    _gt.configure_parser(p)

    p = sub.add_parser("policies", help="list registered policies")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("hardware", help="list hardware presets and their sources")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("models", help="list model presets (options, batch size, hardware)")
    p.add_argument("--json", action="store_true")
    return ap


def _fmt_table(rows: list[tuple[str, Any]]) -> str:
    w = max(len(k) for k, _ in rows)
    out = []
    for k, v in rows:
        if isinstance(v, float):
            v = f"{v:,.1f}"
        elif isinstance(v, int):
            v = f"{v:,}"
        out.append(f"{k:<{w}}  {v}")
    return "\n".join(out)


def _check_writable(where_to: str, what: str, suffixes: Sequence[str] = (), *,
                    folder: bool = False) -> None:
    """Fail now, before any replay, if `where_to` cannot be written: a wrong suffix, a
    folder in a file's place, a parent that cannot be made, or a parent where no file can
    be created (with `folder`, `where_to` is a folder to write files into)."""
    p = Path(where_to)
    if suffixes and p.suffix not in suffixes:
        names = (" or ".join(suffixes) if len(suffixes) < 3
                 else "one of " + ", ".join(suffixes))
        raise UserError(f"{what} {where_to}: must end in {names}")
    if p.is_dir() and not folder:
        raise UserError(f"{what} {where_to}: is a directory")
    where = p if folder else p.parent
    up = where
    while not up.exists() and up != up.parent:
        up = up.parent
    if not up.is_dir():
        raise UserError(f"{what} {where_to}: {up} is a file, not a folder")
    try:
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=where, prefix=".uvmsim-probe-"):
            pass
        if p.exists() and not os.access(p, os.W_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as e:
        raise UserError(f"{what} {where_to}: cannot write there ({e.strerror or e})") from None


TABLE_SUFFIXES = (".parquet", ".csv")


def _write_table(df, out: str) -> None:
    from ._atomic import write_atomic
    p = Path(out)
    if p.suffix == ".csv":
        write_atomic(p, lambda tmp: df.to_csv(tmp, index=False))
    elif p.suffix == ".parquet":
        write_atomic(p, lambda tmp: df.to_parquet(tmp, index=False))
    else:
        raise UserError(f"{out}: table output must end in .parquet or .csv")


def _plot_suffixes() -> tuple[str, ...]:
    from matplotlib.backend_bases import FigureCanvasBase
    return tuple(f".{k}" for k in FigureCanvasBase.get_supported_filetypes())


def cmd_replay(a: argparse.Namespace) -> int:
    from .simulate import simulate
    from .trace import load_trace
    sc = _scenario(a)
    if a.kernels_out:
        _check_writable(a.kernels_out, "--kernels-out", TABLE_SUFFIXES)
    tr = load_trace(a.trace, drop_out_of_range=a.drop_out_of_range, stream=a.stream)
    r = simulate(tr, sc)
    if a.kernels_out:
        _write_table(r.kernels, a.kernels_out)
    if a.json:
        print(json.dumps(r.summary))
        return 0
    print(f"{a.trace}: model={r.config['model']} prefetch={r.config['prefetch']} "
          f"evict={r.config['evict']} hardware={r.config['hardware']}" +
          (f" plan={sc.plan}" if isinstance(sc.plan, str) else ""))
    extra = [(k, v) for k, v in r.extra.items() if v]
    print(_fmt_table(list(r.summary.items()) + extra))
    if tr.dropped_rows:
        print(f"(dropped {tr.dropped_rows:,} out-of-range access rows)")
    return 0


def _sweep_scenarios(a: argparse.Namespace) -> list:
    """--scenarios with the settings given applied, or the grid of --model, --prefetch,
    --evict and --oversub on --scenario and the settings."""
    from .scenario import Scenario
    from .sweep import grid
    if not a.scenarios:
        base = _scenario(a)
        return grid(base, model=getattr(a, "models", [base.model]),
                    prefetch=getattr(a, "prefetch", ["none", "64k", "2m", "density"]),
                    evict=getattr(a, "evict", [base.evict]),
                    oversub=getattr(a, "oversub", [1.0, 1.25, 1.5, 2.0, 2.5, 3.0]))
    axes = [f for f in ("oversub", "prefetch", "evict", "models") if hasattr(a, f)]
    if axes or a.scenario:
        raise UserError(f"--{(axes or ['scenario'])[0]} does not go with --scenarios: give "
                        "it in each scenario")
    listed = _read_json(a.scenarios, "--scenarios")
    settings = _settings(a)
    return [Scenario.from_dict(d).replace(**settings)
            for d in (listed if isinstance(listed, list) else [listed])]


def cmd_sweep(a: argparse.Namespace) -> int:
    from .sweep import sweep
    from .trace import load_trace
    if a.scheduler and a.executor != "dask":
        raise UserError("--scheduler needs --executor dask")
    scenarios = _sweep_scenarios(a)
    # everything that can fail before the replays: the outputs, then the traces
    if a.out:
        _check_writable(a.out, "-o", TABLE_SUFFIXES)
    if a.plot:
        _check_writable(a.plot, "--plot", _plot_suffixes())
    if a.dataset:
        _check_writable(a.dataset, "--dataset", folder=True)
    for t in a.trace:
        load_trace(t, drop_out_of_range=a.drop_out_of_range)  # fail fast, one clear message
    traces = {Path(t).name.removesuffix(".uvmtrace"): t for t in a.trace}
    if len(traces) != len(a.trace):
        traces = list(a.trace)
    df = sweep(traces, scenarios, jobs=a.jobs, executor=a.executor, scheduler=a.scheduler,
               out=a.dataset, segment=a.segment, progress=not (a.no_progress or a.json),
               drop_out_of_range=a.drop_out_of_range)
    # the table is printed before anything is written: a write that fails after the checks
    # above (a full disk) must not lose the results
    if a.json:
        print(df.to_json(orient="records"), flush=True)
    else:
        _print_sweep(df)
        if a.dataset:
            print(f"dataset: {a.dataset} ({df.attrs['computed']} cells computed, "
                  f"{df.attrs['reused']} reused)")
    done = []
    try:
        if a.out:
            _write_table(df, a.out)
            done.append(f"table: {a.out}")
        if a.plot:
            from .plot import plot_sweep
            plot_sweep(df, title=", ".join(Path(t).name for t in a.trace), path=a.plot)
            done.append(f"plot: {a.plot}")
    except (OSError, UserError) as e:
        where = "above" if not a.json else "on stdout"
        raise UserError(f"{e} (the table is printed {where})") from None
    finally:
        if not a.json and done:
            print("\n".join(done))
    return 0


def _print_sweep(df) -> None:
    import pandas as pd
    cols = ["trace", "model", "prefetch", "evict", "oversub", "capacity_chunks", "faults",
            "fault_batches", "htod_bytes", "evicted_chunks", "dtoh_bytes_evict",
            "sim_time_ns", "slowdown"]
    if df["trace"].nunique() == 1:
        cols.remove("trace")
    if df["model"].nunique() == 1:
        cols.remove("model")
    show = df[cols].copy()
    show["htod_MiB"] = show.pop("htod_bytes") / 2**20
    show["evict_MiB"] = show.pop("dtoh_bytes_evict") / 2**20
    show["sim_ms"] = show.pop("sim_time_ns") / 1e6
    with pd.option_context("display.max_rows", 500, "display.width", 160,
                           "display.float_format", "{:,.2f}".format):
        print(show.to_string(index=False), flush=True)


def cmd_multi(a: argparse.Namespace) -> int:
    import pandas as pd

    from .multi import simulate_multi
    from .trace import load_trace
    sc = _scenario(a)
    if a.out:
        _check_writable(a.out, "-o", TABLE_SUFFIXES)
    ts = [load_trace(t, drop_out_of_range=a.drop_out_of_range) for t in a.traces]
    mr = simulate_multi(ts, sc)
    if a.out:
        _write_table(mr.table, a.out)
    if a.json:
        print(json.dumps({"tenants": json.loads(mr.table.to_json(orient="records")),
                          "system": mr.system}))
        return 0
    c = mr.config
    print(f"{len(ts)} tenants: model={c['model']} prefetch={c['prefetch']} evict={c['evict']} "
          f"walkers={c['walkers']} scheduler={c['scheduler']} memory={c['memory']} "
          f"capacity_chunks={c['capacity_chunks']}")
    show = mr.table.copy()
    show.insert(1, "trace", [Path(t).name for t in a.traces])
    with pd.option_context("display.max_columns", 50, "display.width", 200,
                           "display.float_format", "{:,.3f}".format):
        print(show.to_string(index=False))
    print("system: " + "  ".join(f"{k.upper()}={v:.4f}" for k, v in mr.system.items()))
    if a.out:
        print(f"table: {a.out}")
    return 0


def cmd_plan(a: argparse.Namespace) -> int:
    from .plans import build, predictors
    from .trace import load_trace
    params: dict[str, Any] = {k: int(v) if float(v).is_integer() else v
                              for k, v in kv(a.param).items()}
    pred = predictors.get(a.predictor, params)
    sc = _scenario(a)
    tr = load_trace(a.trace, drop_out_of_range=a.drop_out_of_range)
    plan = build(tr, pred, allow_future=a.allow_future, scenario=sc)
    saved = plan.save(a.out, overwrite=a.overwrite)
    if a.json:
        print(json.dumps({"plan": plan.summary(), "build_s": plan.build_s,
                          "replay": plan.result.summary if plan.result else None}))
        return 0
    print(f"{saved}: {plan!r}")
    print(f"built in {plan.build_s:.2f} s")
    if plan.result is not None:
        print(_fmt_table(list(plan.result.summary.items())))
    return 0


def cmd_info(a: argparse.Namespace) -> int:
    from .trace import load_trace
    # info reads (and so checks) every table, the v1.2 streams included
    tr = load_trace(a.trace, drop_out_of_range=a.drop_out_of_range, streams=True)
    info = tr.info()
    if a.json:
        print(json.dumps(info, default=str))
        return 0
    src = info.pop("source")
    print(_fmt_table([(k, v) for k, v in info.items() if v is not None]))
    for k, v in src.items():
        print(f"source.{k}: {v}")
    return 0


def cmd_synth(a: argparse.Namespace) -> int:
    from .trace import synth
    kw: dict[str, Any] = {"seed": a.seed}
    if a.footprint is not None:
        if a.kind == "training":
            raise UserError("--footprint does not apply to 'training' (use --param "
                            "weight_bytes=... / activation_bytes=...)")
        kw["footprint_bytes"] = a.footprint
    if a.kernels is not None:
        if a.kind == "training":
            raise UserError("--kernels does not apply to 'training' (use --param layers=N, "
                            "steps=N)")
        kw["kernels"] = a.kernels
    for k, v in kv(a.param).items():
        kw[k] = int(v) if float(v).is_integer() else v
    import inspect
    allowed = inspect.signature(synth.GENERATORS[a.kind]).parameters
    bad = [k for k in kw if k not in allowed]
    if bad:
        raise UserError(f"'{a.kind}' takes no parameter {bad[0]!r}; it takes "
                        f"{', '.join(allowed)}")
    if Path(a.out).exists() and not a.overwrite:
        raise UserError(f"{a.out} exists (use --overwrite to replace it)")
    print(synth.write(a.kind, a.out, overwrite=a.overwrite, **kw))
    return 0


def cmd_policies(a: argparse.Namespace) -> int:
    from .policies import EVICT, PREFETCH
    rows = [{"kind": "prefetch", "name": n, "params": p.params, "doc": p.doc}
            for n, p in sorted(PREFETCH.items())]
    rows += [{"kind": "evict", "name": n, "params": p.params, "doc": p.doc}
             for n, p in sorted(EVICT.items())]
    # tenant components of `uvmsim multi` (docs/policies.md, "Tenant components")
    from .components.memory import MEMORY
    from .components.sched import SCHEDULERS
    from .components.walkers import WALKERS
    rows += [{"kind": "walkers", "name": n, "params": {}, "doc": c.doc}
             for n, c in sorted(WALKERS.items())]
    rows += [{"kind": "scheduler", "name": n, "params": {}, "doc": c.doc}
             for n, c in sorted(SCHEDULERS.items())]
    rows += [{"kind": "memory", "name": n, "params": {}, "doc": c.doc}
             for n, c in sorted(MEMORY.items())]
    if a.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        params = ", ".join(f"{k}={v:g}" for k, v in r["params"].items())
        print(f"{r['kind']:<9} {r['name']:<14} {r['doc']}" + (f" [{params}]" if params else ""))
    return 0


def cmd_hardware(a: argparse.Namespace) -> int:
    from .config import PRESETS
    if a.json:
        print(json.dumps({n: h.to_dict() for n, h in PRESETS.items()}))
        return 0
    for n, h in PRESETS.items():
        d = h.to_dict()
        src = d.pop("sources")
        print(n)
        for k, v in d.items():
            if k != "name":  # an unset zero_batch_ns is batch_ns (config.Hardware)
                val = "batch_ns" if v is None else f"{v:g}"
                print(f"  {k:<20} {val:<12} {src.get(k, '')}")
    return 0


def cmd_run(a: argparse.Namespace) -> int:
    from .groundtruth import run_from_args
    return run_from_args(a)


def cmd_models(a: argparse.Namespace) -> int:
    from .config import MODELS
    if a.json:
        print(json.dumps({n: m.to_dict() for n, m in MODELS.items()}, default=str))
        return 0
    for n, m in MODELS.items():
        d = m.to_dict()
        src = d.pop("sources")
        print(f"{n}: {d.pop('doc')}")
        d["hardware"] = m.hardware.name
        for k, v in d.items():
            if k != "name":
                print(f"  {k:<24} {str(v):<12} {src.get(k, '')}")
    return 0


def cmd_record(a: argparse.Namespace) -> int:
    if getattr(a, "_record_error", None):
        raise UserError(f"record is unavailable: {a._record_error}")
    return int(a._record.run_from_args(a))


COMMANDS = {"replay": cmd_replay, "sweep": cmd_sweep, "multi": cmd_multi, "plan": cmd_plan,
            "info": cmd_info, "synth": cmd_synth,
            "policies": cmd_policies, "hardware": cmd_hardware, "models": cmd_models,
            "record": cmd_record, "run": cmd_run}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `uvmsim` script; returns the exit status (src/uvmsim/errors.py:run_command)."""
    a = build_parser().parse_args(argv)
    return run_command(a.command, lambda: COMMANDS[a.command](a))


if __name__ == "__main__":
    sys.exit(main())
