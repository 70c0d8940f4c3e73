"""The `uvmsim` command line: replay, sweep, multi, plan, info, synth, record, run, policies,
hardware, models.

User errors (bad arguments, malformed traces, missing or unreadable paths, not enough
memory) print one line on stderr and exit with status 2; an internal error prints one line
and exits with status 1; nothing prints a traceback unless UVMSIM_DEBUG=1.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from .errors import UserError, run_command

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 10**6,
          "mib": 1 << 20, "g": 1 << 30, "gb": 10**9, "gib": 1 << 30, "t": 1 << 40,
          "tb": 10**12, "tib": 1 << 40}


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, like every other error of the command
    (src/uvmsim/errors.py): ``uvmsim COMMAND: error: MESSAGE`` and a pointer to --help, exit
    status 2, instead of the usage block first. Subcommand parsers are of this class too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see "
                     f"`{self.prog} --help`)\n")


def parse_bytes(text: str) -> int:
    """'8GiB', '512M', '1e9' -> bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a byte size: {text!r} (e.g. 8GiB, 512MiB, 1e9)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _factors(text: str) -> list[float]:
    """Comma-separated oversubscription factors, each a finite number > 0."""
    return [_positive_float(x) for x in _names(text)]


def _names(text: str) -> list[str]:
    vals = [x.strip() for x in text.split(",") if x.strip()]
    if not vals:
        raise argparse.ArgumentTypeError("empty list")
    return vals


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}")
    if not 0 < v < math.inf:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be > 0 and finite, got {text}")
    return v


def _nonneg_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}")
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return v


def _path(text: str) -> str:
    """A file or folder argument: an empty one would be ignored (`-o ""`), so it is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    return text


def _check_writable(path: str, what: str, suffixes: Sequence[str] = (), *,
                    folder: bool = False) -> None:
    """Fail now, before any replay, if `path` cannot be written: a wrong suffix, a folder in
    a file's place, a parent that cannot be made, or a parent where no file can be created
    (with `folder`, `path` is a folder to write files into)."""
    p = Path(path)
    if suffixes and p.suffix not in suffixes:
        names = (" or ".join(suffixes) if len(suffixes) < 3
                 else "one of " + ", ".join(suffixes))
        raise UserError(f"{what} {path}: must end in {names}")
    if p.is_dir() and not folder:
        raise UserError(f"{what} {path}: is a directory")
    where = p if folder else p.parent
    up = where
    while not up.exists() and up != up.parent:
        up = up.parent
    if not up.is_dir():
        raise UserError(f"{what} {path}: {up} is a file, not a folder")
    try:
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=where, prefix=".uvmsim-probe-"):
            pass
        if p.exists() and not os.access(p, os.W_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as e:
        raise UserError(f"{what} {path}: cannot write there ({e.strerror or e})") from None


def _kv(items: Sequence[str] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for it in items or ():
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise UserError(f"parameter {it!r} is not NAME=VALUE")
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise UserError(f"parameter {it!r}: value is not a number")
    return out


def _add_model_args(p: argparse.ArgumentParser, *, lists: bool) -> None:
    from .config import DEFAULT_MODEL, MODELS
    if lists:
        p.add_argument("--prefetch", type=_names, default=["none", "64k", "2m", "density"],
                       help="comma-separated prefetch policies (default: none,64k,2m,density)")
        p.add_argument("--evict", type=_names, default=["lru2m"],
                       help="comma-separated eviction policies (default: lru2m)")
    else:
        p.add_argument("--prefetch", default="density",
                       help="prefetch policy: a name (see `uvmsim policies`) or "
                            "package.module:object (default: density)")
        p.add_argument("--evict", default="lru2m",
                       help="eviction policy: a name or package.module:object (default: lru2m)")
    p.add_argument("--prefetch-param", action="append", metavar="NAME=VALUE",
                   help="prefetch policy parameter, e.g. threshold=60 (repeatable)")
    p.add_argument("--evict-param", action="append", metavar="NAME=VALUE",
                   help="eviction policy parameter (repeatable)")
    p.add_argument("--model", default=DEFAULT_MODEL, choices=sorted(MODELS),
                   help=f"model preset: its options, batch size and hardware (default: "
                        f"{DEFAULT_MODEL}, the counts of docs/semantics.md; see `uvmsim "
                        "models`); the options below override it")
    p.add_argument("--hardware",
                   help="hardware preset for the time layer (default: the model's; see "
                        "`uvmsim hardware`)")
    p.add_argument("--fault-batch-size", type=_positive_int,
                   help="faults per batch (default: the model's; 256, the driver's, in both "
                        "presets)")
    p.add_argument("--drop-out-of-range", action="store_true",
                   help="drop (and count) access rows outside live allocations instead of "
                        "rejecting the trace")
    g = p.add_argument_group("optional mechanisms (off by default; docs/policies.md, "
                             "docs/model.md)")
    g.add_argument("--translation", action="append", nargs="?", const="on",
                   metavar="NAME=VALUE",
                   help="model the TLB and page-table walkers; bare for the defaults, or "
                        "NAME=VALUE of uvmsim.Translation (tlb_entries, page_size, walkers, "
                        "walk_ns, ways), repeatable")
    g.add_argument("--thrashing", action="append", nargs="?", const="on", metavar="NAME=VALUE",
                   help="the driver's thrashing detection (throttle, pin); bare for its "
                        "defaults, or NAME=VALUE (threshold, pin_threshold, lapse_us, nap_us, "
                        "pin_us, epoch_us), repeatable")
    g.add_argument("--slices", action=argparse.BooleanOptionalAction, default=None,
                   help="replay kernels in their v1.1 time-slice passes (re-faults within "
                        "a kernel)")
    g.add_argument("--host-access", action=argparse.BooleanOptionalAction, default=None,
                   help="apply the trace's v1.1 host_access events (CPU touches)")
    g.add_argument("--small-blocks", action=argparse.BooleanOptionalAction, default=None,
                   help="charge a VA block smaller than 2 MiB only its own pages of GPU "
                        "memory (the driver's 64 KiB/4 KiB chunks)")
    g.add_argument("--shared-windows", action=argparse.BooleanOptionalAction, default=None,
                   help="allocations sharing a 2 MiB window are one VA range (the CUDA "
                        "driver's sub-allocation of small managed allocations)")
    g.add_argument("--remote", choices=["driver", "uvmsmart"],
                   help="remote mapping with access-counter delayed migration")
    g.add_argument("--access-counter-threshold", type=_positive_float, metavar="N")
    g.add_argument("--advise", action="store_const", const=True, default=None,
                   help="apply the trace's cudaMemAdvise events")
    g.add_argument("--block-progress", action=argparse.BooleanOptionalAction, default=None,
                   help="replay kernels with v1.2 per-thread-block streams as thread blocks "
                        "that stall on their faults (docs/semantics.md, Progress)")
    g.add_argument("--fault-latency-ns", type=_nonneg_float, metavar="NS",
                   help="block progress: how long a fault waits before the driver may take it")


def _options(values: Sequence[str] | None) -> Any:
    """Repeatable `--flag [NAME=VALUE]` -> None (absent), True (bare) or a dict."""
    if not values:
        return None
    items = [v for v in values if v != "on"]
    return _kv(items) if items else True


def _mechanisms(a: argparse.Namespace) -> dict[str, Any]:
    tr = _options(a.translation)
    if isinstance(tr, dict):
        tr = {k: (int(v) if k != "walk_ns" else v) for k, v in tr.items()}
    kw: dict[str, Any] = {"model": a.model, "hardware": a.hardware,
                          "fault_batch_size": a.fault_batch_size, "translation": tr or None,
                          "thrashing": _options(a.thrashing), "remote": a.remote,
                          "advise": a.advise, "slices": a.slices,
                          "host_access": a.host_access, "small_blocks": a.small_blocks,
                          "block_progress": a.block_progress, "fault_latency_ns": a.fault_latency_ns,
                          "shared_windows": a.shared_windows}
    if a.access_counter_threshold is not None:
        kw["access_counter_threshold"] = a.access_counter_threshold
    return kw


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    ap = Parser(prog="uvmsim", description="Replay GPU memory traces under CUDA Unified "
                                           "Memory oversubscription.")
    ap.add_argument("--version", action="version", version=f"uvmsim {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("replay", help="replay one trace under one configuration")
    p.add_argument("trace", help="a .uvmtrace directory")
    cap = p.add_mutually_exclusive_group()
    cap.add_argument("--oversub", type=_positive_float, metavar="F",
                     help="oversubscription factor: capacity = floor(peak_blocks / F) chunks")
    cap.add_argument("--capacity", type=parse_bytes, metavar="BYTES",
                     help="GPU memory for managed data, e.g. 8GiB")
    _add_model_args(p, lists=False)
    p.add_argument("--json", action="store_true",
                   help="print the summary as one JSON object on stdout, nothing else")
    p.add_argument("--kernels-out", metavar="FILE", type=_path,
                   help="also write the per-kernel table (.parquet or .csv)")
    p.add_argument("--stream", action="store_true",
                   help="keep the access rows on disk: read them again kernel by kernel "
                        "while replaying (same counts; for traces larger than memory; "
                        "docs/performance.md)")
    p.add_argument("--plan", metavar="FILE", type=_path,
                   help="a prefetch plan (uvmsim plan ... -o FILE): its entries run as "
                        "prefetch events before their kernels (docs/semantics.md)")

    p = sub.add_parser("sweep", help="replay traces over models, policies and factors; "
                                     "table, resumable Parquet dataset, plot")
    p.add_argument("trace", nargs="+", help="one or more .uvmtrace directories")
    p.add_argument("--oversub", type=_factors, default=[1.0, 1.25, 1.5, 2.0, 2.5, 3.0],
                   help="comma-separated factors (default: 1,1.25,1.5,2,2.5,3)")
    _add_model_args(p, lists=True)
    p.add_argument("--models", type=_names, metavar="A,B",
                   help="comma-separated model presets, a sweep dimension (overrides --model)")
    p.add_argument("--dataset", metavar="DIR", type=_path,
                   help="write each finished cell to DIR/cell-<id>.parquet as it finishes; "
                        "cells already there are read back, not replayed (resume)")
    p.add_argument("--segment", metavar="NAME",
                   help="kernel-name substring marking iterations (e.g. spin_kernel): adds "
                        "iter_* columns for the kernels after its last occurrence")
    p.add_argument("-o", "--out", metavar="FILE", type=_path,
                   help="write the table (.parquet or .csv)")
    p.add_argument("--plot", metavar="PNG", type=_path, help="write a plot of the sweep")
    p.add_argument("--plan", metavar="FILE", type=_path,
                   help="a prefetch plan every cell replays with (docs/semantics.md)")
    p.add_argument("--jobs", type=_positive_int, help="worker processes (default: CPUs)")
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
    cap = p.add_mutually_exclusive_group()
    cap.add_argument("--oversub", type=_positive_float, metavar="F",
                     help="oversubscription factor over the sum of the tenants' peak blocks")
    cap.add_argument("--capacity", type=parse_bytes, metavar="BYTES",
                     help="GPU memory for managed data, e.g. 8GiB")
    _add_model_args(p, lists=False)
    p.add_argument("--walkers", default="shared",
                   help="page-table walker component: shared, partitioned, dws or "
                        "package.module:object (default: shared; needs --translation)")
    p.add_argument("--scheduler", default="interleave",
                   help="kernel scheduling among tenants: interleave, mfit, amfit, madvise or "
                        "package.module:object (default: interleave)")
    p.add_argument("--memory", default="shared",
                   help="how tenants share the GPU's chunks: shared, partitioned, fair or "
                        "package.module:object (default: shared)")
    p.add_argument("--json", action="store_true",
                   help="print {'tenants': [rows], 'system': {...}} as JSON, nothing else")
    p.add_argument("-o", "--out", metavar="FILE", type=_path,
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
    cap = p.add_mutually_exclusive_group()
    cap.add_argument("--oversub", type=_positive_float, metavar="F",
                     help="factor of the replay that gives the predictor feedback")
    cap.add_argument("--capacity", type=parse_bytes, metavar="BYTES")
    _add_model_args(p, lists=False)
    p.add_argument("-o", "--out", required=True, metavar="FILE.parquet", type=_path,
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
    p.add_argument("-o", "--out", required=True, metavar="OUT.uvmtrace", type=_path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--footprint", type=parse_bytes, metavar="BYTES",
                   help="buffer size (sequential, strided, random, zipf)")
    p.add_argument("--kernels", type=_positive_int, help="kernel count (not training)")
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


TABLE_SUFFIXES = (".parquet", ".csv")


def _write_table(df, path: str) -> None:
    from ._atomic import write_atomic
    p = Path(path)
    if p.suffix == ".csv":
        write_atomic(p, lambda tmp: df.to_csv(tmp, index=False))
    elif p.suffix == ".parquet":
        write_atomic(p, lambda tmp: df.to_parquet(tmp, index=False))
    else:
        raise UserError(f"{path}: table output must end in .parquet or .csv")


def _plot_suffixes() -> tuple[str, ...]:
    from matplotlib.backend_bases import FigureCanvasBase
    return tuple(f".{k}" for k in FigureCanvasBase.get_supported_filetypes())


def cmd_replay(a: argparse.Namespace) -> int:
    from .simulate import simulate
    from .trace import load_trace
    if a.kernels_out:
        _check_writable(a.kernels_out, "--kernels-out", TABLE_SUFFIXES)
    tr = load_trace(a.trace, drop_out_of_range=a.drop_out_of_range, stream=a.stream)
    r = simulate(tr, oversub=a.oversub, capacity_bytes=a.capacity, prefetch=a.prefetch,
                 evict=a.evict, prefetch_params=_kv(a.prefetch_param),
                 evict_params=_kv(a.evict_param), plan=_plan(a.plan), **_mechanisms(a))
    if a.kernels_out:
        _write_table(r.kernels, a.kernels_out)
    if a.json:
        print(json.dumps(r.summary))
        return 0
    print(f"{a.trace}: model={r.config['model']} prefetch={r.config['prefetch']} "
          f"evict={r.config['evict']} hardware={r.config['hardware']}" +
          (f" plan={a.plan}" if a.plan else ""))
    extra = [(k, v) for k, v in r.extra.items() if v]
    print(_fmt_table(list(r.summary.items()) + extra))
    if tr.dropped_rows:
        print(f"(dropped {tr.dropped_rows:,} out-of-range access rows)")
    return 0


def cmd_sweep(a: argparse.Namespace) -> int:
    from .sweep import sweep
    from .trace import load_trace
    if a.prefetch_param or a.evict_param:
        raise UserError("--prefetch-param/--evict-param are for `replay`; use the Python API "
                        "to sweep parameters")
    if a.scheduler and a.executor != "dask":
        raise UserError("--scheduler needs --executor dask")
    # everything that can fail before the replays: the outputs, then the traces
    if a.out:
        _check_writable(a.out, "-o", TABLE_SUFFIXES)
    if a.plot:
        _check_writable(a.plot, "--plot", _plot_suffixes())
    if a.dataset:
        _check_writable(a.dataset, "--dataset", folder=True)
    for t in a.trace:
        load_trace(t, drop_out_of_range=a.drop_out_of_range)  # fail fast, one clear message
    kw = _mechanisms(a)
    if a.models:
        from .config import MODELS
        bad = [m for m in a.models if m not in MODELS]
        if bad:
            raise UserError(f"--models: unknown {bad}; choose from {sorted(MODELS)}")
        kw["model"] = list(a.models)
    traces = {Path(t).name.removesuffix(".uvmtrace"): t for t in a.trace}
    if len(traces) != len(a.trace):
        traces = list(a.trace)
    if a.plan:
        kw["plan"] = _plan(a.plan)
    df = sweep(traces, oversub=a.oversub, prefetch=a.prefetch, evict=a.evict, jobs=a.jobs,
               executor=a.executor, scheduler=a.scheduler, out=a.dataset, segment=a.segment,
               progress=not (a.no_progress or a.json),
               drop_out_of_range=a.drop_out_of_range, **kw)
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
    if a.out:
        _check_writable(a.out, "-o", TABLE_SUFFIXES)
    ts = [load_trace(t, drop_out_of_range=a.drop_out_of_range) for t in a.traces]
    mr = simulate_multi(ts, oversub=a.oversub, capacity_bytes=a.capacity, prefetch=a.prefetch,
                        evict=a.evict, prefetch_params=_kv(a.prefetch_param),
                        evict_params=_kv(a.evict_param), walkers=a.walkers,
                        scheduler=a.scheduler, memory=a.memory,
                        **_mechanisms(a))
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


def _plan(path: str | None):
    if path is None:
        return None
    from .plans import load
    return load(path)


def cmd_plan(a: argparse.Namespace) -> int:
    from .plans import build, predictors
    from .trace import load_trace
    params: dict[str, Any] = {k: int(v) if float(v).is_integer() else v
                              for k, v in _kv(a.param).items()}
    pred = predictors.get(a.predictor, params)
    tr = load_trace(a.trace, drop_out_of_range=a.drop_out_of_range)
    plan = build(tr, pred, allow_future=a.allow_future, oversub=a.oversub,
                 capacity_bytes=a.capacity, prefetch=a.prefetch, evict=a.evict,
                 prefetch_params=_kv(a.prefetch_param), evict_params=_kv(a.evict_param),
                 **_mechanisms(a))
    path = plan.save(a.out, overwrite=a.overwrite)
    if a.json:
        print(json.dumps({"plan": plan.summary(), "build_s": plan.build_s,
                          "replay": plan.result.summary if plan.result else None}))
        return 0
    print(f"{path}: {plan!r}")
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
    for k, v in _kv(a.param).items():
        kw[k] = int(v) if float(v).is_integer() else v
    import inspect
    allowed = inspect.signature(synth.GENERATORS[a.kind]).parameters
    bad = [k for k in kw if k not in allowed]
    if bad:
        raise UserError(f"'{a.kind}' takes no parameter {bad[0]!r}; it takes "
                        f"{', '.join(allowed)}")
    if Path(a.out).exists() and not a.overwrite:
        raise UserError(f"{a.out} exists (use --overwrite to replace it)")
    path = synth.write(a.kind, a.out, overwrite=a.overwrite, **kw)
    print(path)
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
            if k != "name":
                print(f"  {k:<20} {v:<12g} {src.get(k, '')}")
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
