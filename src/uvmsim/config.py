"""Hardware presets for the time layer.

Every constant names its source: a measurement on a named GPU or a cited paper or code.
Constants nobody has measured for that system say "uncalibrated".
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

import numpy as np

from .engine.state import HARDWARE, record
from .errors import ConfigError

CHUNK_BYTES = 2 << 20


def setting(flag: str, kind: str, help: str, **more) -> dict:
    """Field metadata: how a setting of a Scenario or a Model is given on the command line.

    `kind` says how the flag's text becomes the value (src/uvmsim/cli.py, `_SETTING_KINDS`):
    ``bool`` (--x / --no-x), ``name``, ``choice`` (`choices`), ``int``, ``int+``, ``float+``,
    ``float0+`` (>= 0), ``bytes``, ``path`` (a file; an empty one is refused), ``params``
    (repeatable NAME=VALUE) or ``switch`` (bare, or repeatable NAME=VALUE). `tenants=True`:
    a setting of `uvmsim multi` only; `alone=True`: of one trace alone, not `multi`. A field
    set through another field's flag has ``via``; one that is no setting (provenance text)
    has ``none``: the CLI test holds every field to one of them.
    """
    return {"cli": {"flag": flag, "kind": kind, "help": help, **more}}


def set_via(other: str) -> dict:
    """Field metadata: this field is set by the flag of field `other` (see `setting`)."""
    return {"cli": {"via": other}}


def no_setting(why: str) -> dict:
    """Field metadata: this field is no setting (see `setting`); `why` says what it is."""
    return {"cli": {"none": why}}


@dataclass(frozen=True)
class Hardware:
    """Time constants of one GPU + link. Frozen and hashable; `sources` says where each
    value came from."""

    name: str
    batch_ns: float          # fixed cost of servicing one fault batch
    fault_ns: float          # cost per fault in a batch
    transfer_latency_ns: float  # per transfer (a contiguous run of pages in one block)
    bw_peak_gbps: float      # a in bw(KiB) = 2a/pi * atan(b * KiB) GB/s
    bw_b: float              # b of that curve
    zero_fill_ns: float = 0.0   # per zero-filled page
    evict_ns: float = 0.0       # fixed cost per evicted chunk, on top of its copies
    dtoh_bw_gbps: float = 0.0   # peak of the device-to-host curve; 0: same as bw_peak_gbps
    host_fault_ns: float = 0.0  # per page a host_access moves back or populates (CPU fault)
    # per page a fault (demand or prefetch) migrates from the host, on top of its copy: the
    # driver's per-page work there (unmapping the CPU's copy, docs/model.md "The time base")
    migrate_page_ns: float = 0.0
    # fixed cost of a fault batch that migrates no page from the host (its faults are
    # zero-fills or pages already on the GPU); None: batch_ns. A first touch's services cost
    # a fraction of a migrating batch's (docs/validation.md, "How many services a first
    # touch takes")
    zero_batch_ns: float | None = None
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        for k in ("batch_ns", "fault_ns", "transfer_latency_ns", "zero_fill_ns", "evict_ns",
                  "dtoh_bw_gbps", "host_fault_ns", "migrate_page_ns"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and v >= 0):
                raise ConfigError(f"hardware {self.name!r}: {k} must be a number >= 0, got {v!r}")
        z = self.zero_batch_ns
        if z is not None and not (isinstance(z, (int, float)) and not isinstance(z, bool)
                                  and z >= 0):
            raise ConfigError(f"hardware {self.name!r}: zero_batch_ns must be None or a number "
                              f">= 0, got {z!r}")
        for k in ("bw_peak_gbps", "bw_b"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and v > 0):
                raise ConfigError(f"hardware {self.name!r}: {k} must be a number > 0, got {v!r}")

    def record(self) -> np.ndarray:
        """The engine's HARDWARE record of these constants (same field names; zero_batch_ns
        is batch_ns where None)."""
        v = {n: getattr(self, n) for n in HARDWARE.names}
        if v["zero_batch_ns"] is None:
            v["zero_batch_ns"] = self.batch_ns
        return record(HARDWARE, **{n: float(x) for n, x in v.items()})

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["sources"] = dict(self.sources)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "Hardware":
        """The inverse of `to_dict`."""
        d = dict(d)
        d["sources"] = tuple(dict(d.get("sources") or {}).items())
        try:
            return cls(**d)
        except TypeError as e:
            raise ConfigError(f"bad hardware settings: {e}") from None


_UVMSMART = ("DebashisGanguly/gpgpu-sim_UVMSmart src/gpgpu-sim/gpu-sim.cc: bandwidth "
             "2a/pi*atan(b*KB), b = 0.07292")

# the constants the oversubscription fit will set (docs/calibration.md); until then 0, which
# keeps every preset's times what they were before the constants existed
_EVICT_UNCAL = ("uncalibrated: 0 until fitted; a 64 MiB prefetch back to the CPU measured "
                "~178 us per 2 MiB block against ~53 us charged (docs/calibration.md)")
_DTOH_UNCAL = ("uncalibrated: 0 = the host-to-device curve; device-to-host was not measured "
               "under eviction (docs/calibration.md)")
_HOST_FAULT_UNCAL = "uncalibrated: 0 until fitted (CPU page-fault cost was not measured)"

A100_PCIE4 = Hardware(
    name="a100-pcie4",
    batch_ns=45_000.0, fault_ns=500.0, transfer_latency_ns=1_000.0,
    bw_peak_gbps=24.0, bw_b=0.07292, zero_fill_ns=0.0,
    sources=(
        ("batch_ns", "UVMSmart far-fault latency 66,645 cycles at 1,481 MHz = 45 us "
                     "(docs/model.md, Sources), charged once per batch; uncalibrated for "
                     "A100"),
        ("fault_ns", "uncalibrated estimate"),
        ("transfer_latency_ns", "uncalibrated estimate"),
        ("bw_peak_gbps", "UVMSmart a = 24 for a 32 GB/s (PCIe 4 x16) link; " + _UVMSMART),
        ("bw_b", _UVMSMART),
        ("zero_fill_ns", "uncalibrated: GPU-side zero-fill taken as free"),
        ("evict_ns", _EVICT_UNCAL),
        ("dtoh_bw_gbps", _DTOH_UNCAL),
        ("host_fault_ns", _HOST_FAULT_UNCAL),
    ))

_CALIB_H100 = ("measured on an NVIDIA H100 80GB HBM3 (PCIe 5 x16, driver 580.159.04, CUDA "
               "13.0), 2026-11-25, by benchmarks/calibrate (docs/calibration.md, H100; "
               "benchmarks/calibrate/results_h100)")

H100_PCIE5 = Hardware(
    name="h100-pcie5",
    batch_ns=169_600.0, fault_ns=247.0, transfer_latency_ns=18_400.0,
    bw_peak_gbps=49.8, bw_b=100.0, zero_fill_ns=0.0,
    sources=(
        ("batch_ns", "least-squares fit of 50 faulting kernels' stalls to the model's counts; "
                     "median relative error 0.16; " + _CALIB_H100),
        ("fault_ns", "same fit; " + _CALIB_H100),
        ("transfer_latency_ns", "same fit; effective: includes per-block driver work "
                                "(CUPTI's pure copy latency is 2,630 ns); " + _CALIB_H100),
        ("bw_peak_gbps", "fit to CUPTI host-to-device migration records, 4 KiB-1 MiB, 1.8 % "
                         "rms; " + _CALIB_H100),
        ("bw_b", "bandwidth is flat from 4 KiB up; the fit hit its bound; " + _CALIB_H100),
        ("zero_fill_ns", "not fitted (about 73 ns per page unexplained); " + _CALIB_H100),
        ("evict_ns", _EVICT_UNCAL),
        ("dtoh_bw_gbps", _DTOH_UNCAL),
        ("host_fault_ns", _HOST_FAULT_UNCAL),
    ))

_PROBES = ("fitted on the fit split of the driver probes run on an NVIDIA H100 "
           "(benchmarks/probes/split.csv, timefit.py; docs/model.md)")
_SUITE_H100 = ("fitted on the fit split of the validation suite's H100 runs (stream, "
               "stencil3d, mv_row, gather; traces re-recorded 2026-11-28) with "
               "partial_blocks and shared_windows on: benchmarks/validate/fit.py fit --card "
               "h100 --results benchmarks/validate/results/h100 --option partial_blocks=on "
               "--free zero_fill_ns,evict_ns,migrate_page_ns (results/h100/fit.json; "
               "docs/validation.md)")

# The measured H100 link with the constants the suite's H100 fit split identifies: the cost
# of a zero-filled page, the driver's work per page a fault migrates from the host and per
# evicted chunk. The driver probes' fit split preferred batch 64 and migrate 256 ns with
# evict 0 (benchmarks/probes/results/timefit_migrate.json); the two sets of programs
# disagree (docs/validation.md), and the suite is the validation.
def _refit(base: Hardware, name: str, fitted: dict[str, tuple[float, str]]) -> Hardware:
    """`base` with the constants a fit set: {constant: (value, its source)}; the base's
    other constants and their sources are kept."""
    return dataclasses.replace(
        base, name=name, **{k: v for k, (v, _) in fitted.items()},
        sources=(*(kv for kv in base.sources if kv[0] not in fitted),
                 *((k, src) for k, (_, src) in fitted.items())))


H100_PCIE5_FIT = _refit(H100_PCIE5, "h100-pcie5-fit", {
    "zero_fill_ns": (232.2, _SUITE_H100 + "; the search kept the probes' value (" + _PROBES
                     + ")"),
    "migrate_page_ns": (128.0, _SUITE_H100 + " (the probes: 256 ns at batch 64)"),
    "evict_ns": (8400.0, _SUITE_H100 + " (the probes did not identify it)")})

_CALIB = ("measured on an NVIDIA H200 (PCIe 5 x16, driver 580.159.04, CUDA 13.0), "
          "2026-11-22, by benchmarks/calibrate (docs/calibration.md)")

H200_PCIE5 = Hardware(
    name="h200-pcie5",
    batch_ns=137_000.0, fault_ns=150.0, transfer_latency_ns=13_600.0,
    bw_peak_gbps=53.5, bw_b=100.0, zero_fill_ns=0.0,
    sources=(
        ("batch_ns", "least-squares fit of 50 faulting kernels' stalls to the model's counts; "
                     "median relative error 0.14; " + _CALIB),
        ("fault_ns", "same fit; " + _CALIB),
        ("transfer_latency_ns", "same fit; effective: includes ~14 us of per-block driver work "
                                "(CUPTI's pure copy latency is 2,690 ns); " + _CALIB),
        ("bw_peak_gbps", "fit to 94,000 CUPTI host-to-device migration records, 4 KiB-1 MiB, "
                         "3.7 % rms; " + _CALIB),
        ("bw_b", "bandwidth is flat from 4 KiB up; the fit hit its bound (any b >= ~10 fits "
                 "equally); " + _CALIB),
        ("zero_fill_ns", "not fitted (about 80 ns per page unexplained); " + _CALIB),
        ("evict_ns", _EVICT_UNCAL),
        ("dtoh_bw_gbps", _DTOH_UNCAL),
        ("host_fault_ns", _HOST_FAULT_UNCAL),
    ))

_FIT = ("fitted to 35 real oversubscribed runs of the fit split (factors 1-3) on an NVIDIA "
        "H200, by benchmarks/validate/fit.py (docs/validation.md)")

# The measured link with the two constants the factor-1 calibration could not see, fitted on
# oversubscribed runs: the cost of an eviction beyond its copy, and of a zero-filled page
# (docs/validation.md). The measured constants are kept: refitting them too lowered the fit
# split's loss by 3 % and made factor-1 predictions worse.
H200_PCIE5_FIT = _refit(H200_PCIE5, "h200-pcie5-fit", {
    "evict_ns": (13_440.0, _FIT), "zero_fill_ns": (131.2, _FIT),
    "host_fault_ns": (0.0, "not identified by the fit split (no run's time depends on it): "
                           "0, uncalibrated")})

_GRID = ("the least-loss point of a grid on the fit split of the H200 suite and the driver "
         "probes (75 runs; batch_ns 30/80/137 us, zero_fill_ns 131.2/200/300 ns, "
         "migrate_page_ns 0/128/256 ns), replayed with the progress front-end and "
         "device_copies, 2026-11-29 (benchmarks/validate/results/h200_copies/grid.json; "
         "docs/validation.md)")

# The progress front-end's time base: its services are the driver's batches as the blocks'
# stalls form them, so the constants of page sets do not carry over; refitted by a grid
# (docs/validation.md, "Device-to-device copies, and a progress preset").
# A batch that migrates nothing from the host (zero-filled pages only) is cheaper than one
# that copies: the first-touch probe bounds it at 29 us all in (docs/validation.md, "How many
# services a first touch takes"). Within that bound the grid chose 30 us over 10 us; with no
# bound its least loss keeps batch_ns (docs/validation.md, "Zero-fill batches in the
# progress preset").
_ZERO_BATCH = ("30 us: at most 29 us all in, measured by the first-touch probe on an H200 "
               "(docs/validation.md, 'How many services a first touch takes'); of the values "
               "that bound allows the fit split's grid chose 30 over 10 us (loss 36.84 "
               "against 37.27; batch_ns itself, 80 us, 36.31), 2026-11-29 "
               "(benchmarks/validate/results/h200_zero_batch/grid.json; docs/validation.md)")
# The link's latency per copy: the factor-1 calibration's 13.6 us includes per-block driver
# work and was measured with page sets; by the driver's byte counts the real runs move their
# traffic faster than it charges (docs/validation.md, "How fast the real runs move their
# bytes"). With the PyTorch rows at the memory their programs really left for managed data,
# the fit split's grid chose 8 us (docs/validation.md, "The memory PyTorch keeps for itself").
_GRID_CTX = ("8 us: the least-loss point of a grid on the fit split of the H200 suite and the "
             "driver probes (75 runs; transfer_latency_ns 2.69/5/8/13.6 us x batch_ns 30/80 us "
             "x zero_fill_ns 131.2/300 ns; loss 29.15 against 30.00 at the calibrated 13.6 us), "
             "the PyTorch rows at free memory less 228 MiB, 2026-11-29 "
             "(benchmarks/validate/results/h200_context/grid.json; docs/validation.md); "
             "bounded below by CUPTI's pure copy latency, 2,690 ns")
H200_PCIE5_PROGRESS = _refit(H200_PCIE5_FIT, "h200-pcie5-progress", {
    "batch_ns": (80_000.0, _GRID + "; the same point in the grid of 2026-11-29 at 228 MiB "
                 "for PyTorch (results/h200_context/grid.json)"),
    "zero_fill_ns": (300.0, _GRID + "; the same point in the grid of 2026-11-29 at 228 MiB "
                     "for PyTorch (results/h200_context/grid.json)"),
    "migrate_page_ns": (128.0, _GRID), "zero_batch_ns": (30_000.0, _ZERO_BATCH),
    "transfer_latency_ns": (8_000.0, _GRID_CTX)})

PRESETS: dict[str, Hardware] = {h.name: h for h in (H200_PCIE5, H200_PCIE5_FIT,
                                                     H200_PCIE5_PROGRESS, H100_PCIE5,
                                                     H100_PCIE5_FIT,
                                                     A100_PCIE4)}
# the one preset whose constants were measured (the shipped traces were captured on it too)
DEFAULT_HARDWARE = "h200-pcie5"


@dataclass(frozen=True)
class Translation:
    """Opt-in address translation: one GPU-wide TLB and a pool of page-table walkers.

    Every access row of a non-host page looks its translation up in a set-associative LRU
    TLB of `tlb_entries` entries (`ways` per set) over pages of `page_size` bytes. A miss
    takes a walker for `walk_ns` (FIFO, `walkers` of them); a miss on a translation whose
    walk is still in flight merges with it (counted as a TLB miss, not a page walk). Walks
    overlap the kernel's compute: a kernel ends when its compute and its last walk are done.
    The TLB is filled only for resident pages and shot down when pages leave the GPU.
    """

    tlb_entries: int = 4096     # UVMSmart: 4,096 TLB entries (per SM there; one shared here)
    page_size: int = 4096       # translation granularity: 4 KiB, 64 KiB or 2 MiB
    walkers: int = 32           # gem5-gpu: 32 page-table walkers (UVMSmart: unlimited)
    walk_ns: float = 100 / 1.481  # UVMSmart: 100 cycles at 1,481 MHz = 67.5 ns
    ways: int = 16              # uncalibrated: associativity of the modelled TLB
    sources: tuple[tuple[str, str], ...] = field(default=(
        ("tlb_entries", "UVMSmart (gpgpu-sim_UVMSmart) TLB 4096 entries per SM; docs/model.md"),
        ("walkers", "gem5-gpu: 32 page walkers; docs/model.md"),
        ("walk_ns", "UVMSmart page walk 100 cycles at its 1,481 MHz core clock; docs/model.md"),
        ("page_size", "uncalibrated choice: the driver's 4 KiB migration granularity"),
        ("ways", "uncalibrated assumption")), compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.page_size not in (4096, 65536, 2 << 20):
            raise ConfigError(f"page_size must be 4096, 65536 or 2097152, got {self.page_size}")
        if self.ways < 1 or self.tlb_entries < self.ways or self.tlb_entries % self.ways:
            raise ConfigError(f"tlb_entries ({self.tlb_entries}) must be a positive multiple "
                              f"of ways ({self.ways})")
        if self.walkers < 1:
            raise ConfigError(f"walkers must be >= 1, got {self.walkers}")
        if not self.walk_ns > 0:
            raise ConfigError(f"walk_ns must be > 0, got {self.walk_ns}")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["sources"] = dict(self.sources)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Translation":
        """Translation fields by name (as `to_dict` gives them; `sources` may be left out).
        Whole-number values of the integer fields may come as floats (from JSON or the
        command line)."""
        d = dict(d)
        if "sources" in d:
            d["sources"] = tuple(dict(d["sources"]).items())
        known = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(d) - known)
        if bad:
            raise ConfigError(f"bad translation settings: no setting {bad[0]!r}; known: "
                              f"{', '.join(sorted(known - {'sources'}))}")
        for k in ("tlb_entries", "page_size", "walkers", "ways"):
            v = d.get(k)
            if isinstance(v, float):
                if not v.is_integer():
                    raise ConfigError(f"translation {k} must be a whole number, got {v}")
                d[k] = int(v)
        return cls(**d)


def get_translation(tr: "Translation | dict | bool | None") -> "Translation | None":
    """None/False: off; True: the defaults; a dict of Translation fields; or a Translation."""
    if tr is None or tr is False:
        return None
    if tr is True:
        return Translation()
    if isinstance(tr, Translation):
        return tr
    if isinstance(tr, dict):
        return Translation.from_dict(tr)
    raise ConfigError(f"translation must be a Translation, dict, bool or None, got {tr!r}")


def get_hardware(hw: str | Hardware | None) -> Hardware:
    """A preset name or a Hardware."""
    if hw is None:
        return PRESETS[DEFAULT_HARDWARE]
    if isinstance(hw, Hardware):
        return hw
    if hw in PRESETS:
        return PRESETS[hw]
    raise ConfigError(f"unknown hardware {hw!r}; presets: {', '.join(sorted(PRESETS))}")


# ---------------------------------------------------------------------------------------
# Model: the replay mechanisms and constants, bundled and named

THRASHING_DEFAULTS = {
    # uvm_perf_thrashing.c defaults: threshold 3, pin after 10 throttles, lapse 500 us,
    # nap 1 lapse, pin 300 lapses (150 ms), epoch 2000 lapses (1 s)
    "threshold": 3.0, "pin_threshold": 10.0, "lapse_us": 500.0, "nap_us": 500.0,
    "pin_us": 150_000.0, "epoch_us": 1_000_000.0,
}
REMOTE_MODES = ("driver", "uvmsmart")
#: the order in which the progress front-end's driver takes queued faults into a batch
#: (docs/semantics.md, "Progress", rule 5a): `arrival`, or `age` (the oldest resident thread
#: blocks of each SM first, as the GPU was measured to serve them: docs/validation.md)
FAULT_ORDERS = ("arrival", "age")
# access-counter threshold per mode: the driver's uvm_perf_access_counter_threshold (256,
# per 2 MiB); UVMSmart's migrate_threshold option default (10, per 64 KiB)
AC_THRESHOLD_DEFAULTS = {"driver": 256.0, "uvmsmart": 10.0}


@dataclass(frozen=True)
class Model:
    """What a replay models besides its policies and capacity: mechanisms and constants.

    One frozen, hashable bundle that `simulate`, `sweep`, `simulate_multi`, the CLI
    (`--model`) and the reference model all take, as a registered name (`MODELS`) or a
    Model. "contract" (the default) has every option off: exactly docs/semantics.md's counts.
    Keyword arguments of `simulate` that name a field override it (`get_model`).

    Options (docs/semantics.md has their exact rules): `slices` replays kernels in v1.1
    time-slice passes; `host_access` applies v1.1 host_access events; `device_copies`
    makes a memcpy_dtod's destination resident as the copy engine's faults do; `thrashing`
    the driver's throttle/pin (`thrashing_params` override THRASHING_DEFAULTS); `small_blocks`
    charges a VA block smaller than 2 MiB only its own pages of GPU memory; `partial_blocks`
    gives such a block the driver's 64 KiB / 4 KiB units of root chunks it shares with others,
    evicted a root chunk at a time (docs/semantics.md, "Partial blocks");
    `shared_windows` makes allocations that share a 2 MiB window one VA range (the CUDA
    driver's sub-allocation; uvmsim.trace.windows); `remote`,
    `advise` and the access-counter settings as in docs/policies.md. `block_progress` replays
    kernels that have v1.2 per-thread-block streams with the progress front-end (thread
    blocks in resident slots that stall on their faults; `fault_latency_ns` is how long a
    fault waits in the buffer before the driver may take it; `store_ahead` how many faults
    of plain writes a block may leave outstanding and run on; `share_units` gives a stream
    row coarser than a page its block's share of the unit's pages instead of all of them).
    """

    name: str = field(default="contract", metadata=set_via("model"))
    hardware: Hardware | str = field(default=DEFAULT_HARDWARE, metadata=setting(
        "--hardware", "name", "hardware preset for the time layer (default: the model's; "
        "see `uvmsim hardware`)"))
    fault_batch_size: int = field(default=256, metadata=setting(
        "--fault-batch-size", "int+", "faults per batch (default: the model's: 256, the "
        "driver's, in contract and h200, 64 in h100)", metavar="N"))
    slices: bool = field(default=False, metadata=setting(
        "--slices", "bool", "replay kernels in their v1.1 time-slice passes (re-faults "
        "within a kernel)"))
    host_access: bool = field(default=False, metadata=setting(
        "--host-access", "bool", "apply the trace's v1.1 host_access events (CPU touches)"))
    device_copies: bool = field(default=False, metadata=setting(
        "--device-copies", "bool", "a device-to-device copy makes its destination resident "
        "(the copy engine's faults, serviced as a GPU fault's; docs/semantics.md)"))
    thrashing: bool = field(default=False, metadata=setting(
        "--thrashing", "switch", "the driver's thrashing detection (throttle, pin); bare for "
        "its defaults, or NAME=VALUE (threshold, pin_threshold, lapse_us, nap_us, pin_us, "
        "epoch_us), repeatable"))
    thrashing_params: tuple[tuple[str, float], ...] = field(default=(),
                                                            metadata=set_via("thrashing"))
    small_blocks: bool = field(default=False, metadata=setting(
        "--small-blocks", "bool", "charge a VA block smaller than 2 MiB only its own pages "
        "of GPU memory (the driver's 64 KiB/4 KiB chunks)"))
    partial_blocks: bool = field(default=False, metadata=setting(
        "--partial-blocks", "bool", "a VA block smaller than 2 MiB takes 64 KiB/4 KiB units of "
        "root chunks shared with other such blocks, evicted a root chunk at a time (the "
        "driver's rule; needs an eviction policy that handles shared roots)"))
    shared_windows: bool = field(default=False, metadata=setting(
        "--shared-windows", "bool", "allocations sharing a 2 MiB window are one VA range (the "
        "CUDA driver's sub-allocation of small managed allocations)"))
    remote: str | None = field(default=None, metadata=setting(
        "--remote", "choice", "remote mapping with access-counter delayed migration",
        choices=REMOTE_MODES))
    advise: bool = field(default=False, metadata=setting(
        "--advise", "bool", "apply the trace's cudaMemAdvise events"))
    access_counter_threshold: float | None = field(default=None, metadata=setting(
        "--access-counter-threshold", "float+", "accesses to a remotely mapped region that "
        "migrate it (default per --remote mode: driver 256 per 2 MiB, uvmsmart 10 per "
        "64 KiB)", metavar="N"))
    access_counter_penalty: float = field(default=2.0, metadata=setting(
        "--access-counter-penalty", "float0+", "uvmsmart: once oversubscribed, the "
        "threshold is multiplied by this and by the region's round trips + 1 (default 2)",
        metavar="X"))
    remote_access_ns: float = field(default=200.0, metadata=setting(
        "--remote-access-ns", "float0+", "cost of one access to a remotely mapped page "
        "(default 200)", metavar="NS"))
    block_progress: bool = field(default=False, metadata=setting(
        "--block-progress", "bool", "replay kernels with v1.2 per-thread-block streams as "
        "thread blocks that stall on their faults (docs/semantics.md, Progress)"))
    fault_latency_ns: float = field(default=0.0, metadata=setting(
        "--fault-latency-ns", "float0+", "block progress: how long a fault waits before the "
        "driver may take it (default 0)", metavar="NS"))
    store_ahead: int = field(default=0, metadata=setting(
        "--store-ahead", "int", "block progress: a thread block passes rows whose missing "
        "pages it only writes, with up to N such faults outstanding (default 0: every fault "
        "stalls its block; docs/semantics.md)", metavar="N"))
    sm_store_pool: int = field(default=0, metadata=setting(
        "--sm-store-pool", "int", "block progress with store_ahead: faulting stores an SM "
        "holds at once for all its blocks; while they fill it no block on the SM passes a "
        "row (default 0: no limit; docs/semantics.md)", metavar="N"))
    fault_order: str = field(default="arrival", metadata=setting(
        "--fault-order", "choice", "block progress: which queued faults a batch takes first: "
        "arrival (default) or age (the faults of the blocks dispatched earliest on their SM "
        "first; docs/semantics.md)", choices=FAULT_ORDERS))
    share_units: bool = field(default=False, metadata=setting(
        "--share-units", "bool", "block progress: a stream row coarser than a page stands "
        "for its thread block's share of the unit's pages (from the page it names up to the "
        "next page another block's row names) instead of all of them (docs/semantics.md)"))
    doc: str = field(default="", compare=False, metadata=no_setting("a preset's description"))
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False,
                                                 metadata=no_setting("provenance of values"))

    def __post_init__(self) -> None:
        # a preset name becomes its Hardware, so a Model always carries its constants
        object.__setattr__(self, "hardware", get_hardware(self.hardware))
        fbs = self.fault_batch_size
        if isinstance(fbs, bool) or not isinstance(fbs, (int, np.integer)) or fbs < 1:
            raise ConfigError(f"model {self.name!r}: fault_batch_size must be an integer "
                              f">= 1, got {fbs!r}")
        object.__setattr__(self, "fault_batch_size", int(fbs))
        for k in ("slices", "host_access", "device_copies", "thrashing", "advise",
                  "small_blocks", "partial_blocks", "block_progress", "shared_windows",
                  "share_units"):
            if not isinstance(getattr(self, k), (bool, np.bool_)):
                raise ConfigError(f"model {self.name!r}: {k} must be True or False, "
                                  f"got {getattr(self, k)!r}")
            object.__setattr__(self, k, bool(getattr(self, k)))
        params = dict(self.thrashing_params)
        bad = sorted(set(params) - set(THRASHING_DEFAULTS))
        if bad:
            raise ConfigError(f"unknown thrashing parameter {bad[0]!r}; known: "
                              f"{', '.join(THRASHING_DEFAULTS)}")
        for k, v in params.items():
            if not (isinstance(v, (int, float)) and v >= 0):
                raise ConfigError(f"thrashing parameter {k} must be a number >= 0, got {v!r}")
        object.__setattr__(self, "thrashing_params",
                           tuple(sorted((k, float(v)) for k, v in params.items())))
        if self.small_blocks and self.remote is not None:
            raise ConfigError(f"model {self.name!r}: small_blocks and remote cannot be "
                              "combined (UVMSmart's migration threshold counts whole chunks)")
        if self.partial_blocks and (self.small_blocks or self.remote is not None):
            raise ConfigError(f"model {self.name!r}: partial_blocks cannot be combined with "
                              "small_blocks (two rules for the same blocks) or remote "
                              "(UVMSmart's migration threshold counts whole chunks)")
        if self.remote is not None and self.remote not in REMOTE_MODES:
            raise ConfigError(f"remote must be None or one of {list(REMOTE_MODES)}, "
                              f"got {self.remote!r}")
        if self.block_progress and (self.thrashing or self.remote is not None or self.advise):
            raise ConfigError(f"model {self.name!r}: block_progress cannot be combined "
                              "with thrashing, remote or advise yet (docs/semantics.md, Progress)")
        for k in ("store_ahead", "sm_store_pool"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ConfigError(f"model {self.name!r}: {k} must be an integer >= 0, "
                                  f"got {v!r}")
            object.__setattr__(self, k, int(v))
        if self.store_ahead and not self.block_progress:
            raise ConfigError(f"model {self.name!r}: store_ahead is a rule of block_progress; "
                              "switch that on too")
        if self.share_units and not self.block_progress:
            raise ConfigError(f"model {self.name!r}: share_units is a rule of block_progress; "
                              "switch that on too")
        if self.sm_store_pool and not self.store_ahead:
            raise ConfigError(f"model {self.name!r}: sm_store_pool limits the stores of "
                              "store_ahead; set that too")
        if self.fault_order not in FAULT_ORDERS:
            raise ConfigError(f"model {self.name!r}: fault_order must be one of "
                              f"{list(FAULT_ORDERS)}, got {self.fault_order!r}")
        if self.fault_order != "arrival" and not self.block_progress:
            raise ConfigError(f"model {self.name!r}: fault_order is a rule of block_progress; "
                              "switch that on too")
        for k in ("access_counter_penalty", "remote_access_ns", "fault_latency_ns"):
            if not float(getattr(self, k)) >= 0.0:
                raise ConfigError(f"{k} must be >= 0, got {getattr(self, k)}")
        if self.access_counter_threshold is not None and not self.access_counter_threshold > 0:
            raise ConfigError(f"access_counter_threshold must be > 0, got "
                              f"{self.access_counter_threshold}")

    def thrashing_settings(self) -> dict[str, float]:
        """THRASHING_DEFAULTS with this model's overrides."""
        return {**THRASHING_DEFAULTS, **dict(self.thrashing_params)}

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["hardware"] = self.hardware.to_dict()
        d["thrashing_params"] = dict(self.thrashing_params)
        d["sources"] = dict(self.sources)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Model":
        """The inverse of `to_dict` (`hardware` may also be a preset name)."""
        d = dict(d)
        known = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(d) - known)
        if bad:
            raise ConfigError(f"a model has no setting {bad[0]!r}")
        if isinstance(d.get("hardware"), dict):
            d["hardware"] = Hardware.from_dict(d["hardware"])
        d["thrashing_params"] = tuple(dict(d.get("thrashing_params") or {}).items())
        d["sources"] = tuple(dict(d.get("sources") or {}).items())
        return cls(**d)


CONTRACT = Model(
    name="contract",
    doc="the counting contract (docs/semantics.md): every option off, the default",
    sources=(("hardware", "h200-pcie5, measured (docs/calibration.md)"),
             ("fault_batch_size", "256: the contract's batch, the driver's "
                                  "uvm_perf_fault_batch_count (docs/semantics.md)")))

_COPIES = ("on: a device-to-device copy leaves its destination on the GPU (the copy engine's "
           "faults; docs/model.md, item 10, probe dtod_read); the fit split's PyTorch rows, "
           "loss 9.09 off against 8.79 on (its CUDA programs make no such copy; "
           "docs/validation.md)")

_SHARED = ("on: the CUDA driver sub-allocates small managed allocations from 2 MiB VA "
           "ranges, whose windows are the UVM driver's blocks (probe small_allocs: 1,000 "
           "allocations in 125 ranges; docs/model.md)")

H200 = Model(
    name="h200",
    hardware=H200_PCIE5_FIT,
    fault_batch_size=256,
    slices=False,
    host_access=True,
    device_copies=True,
    thrashing=False,
    doc="predicting a real H200 under oversubscription: host accesses and device copies "
        "on, constants fitted to real oversubscribed runs (docs/validation.md)",
    sources=(
        ("hardware", "h200-pcie5-fit: " + _FIT),
        ("fault_batch_size", "256: the fit tried 256, 64 and 32 and 256 fitted best "
                             "(docs/validation.md)"),
        ("slices", "off: on the fit split the time-slice passes did not improve the fit "
                   "(docs/validation.md); switch on with slices=True"),
        ("host_access", "on: v1.1 traces carry CPU touches of managed memory between "
                        "events; off, the fit split's error grows (docs/validation.md)"),
        ("device_copies", _COPIES),
        ("shared_windows", "off until the suite's refit: its constants and every published "
                           "h200 result were made without it, though the driver does share "
                           "windows (docs/model.md, probe small_allocs)"),
        ("thrashing", "off: uvm_perf_thrashing.c tracks a block's pages only once two "
                      "consecutive migrations of it go to different processors, and skips "
                      "eviction migrations, so one GPU refaulting after evictions is never "
                      "throttled (docs/model.md)")))

H100 = Model(
    name="h100",
    hardware=H100_PCIE5_FIT,
    fault_batch_size=256,
    slices=False,
    host_access=True,
    thrashing=False,
    shared_windows=True,
    partial_blocks=True,
    doc="predicting a real H100 under oversubscription: the H100's calibrated link, host "
        "accesses, shared windows and partial blocks on, per-page and per-eviction costs "
        "fitted to the validation suite's H100 runs (docs/validation.md)",
    sources=(
        ("hardware", "h100-pcie5-fit: " + _CALIB_H100 + "; zero_fill_ns, migrate_page_ns and "
                     "evict_ns " + _SUITE_H100),
        ("fault_batch_size", "256: the suite's H100 fit split (loss 17.45 at 256, 18.14 at "
                             "128, 18.73 at 64, 19.30 at 32); the driver probes preferred 64 "
                             "(" + _PROBES + "; docs/validation.md has the disagreement)"),
        ("slices", "off, as h200 (docs/validation.md)"),
        ("host_access", "on, as h200: the probes' host-written data migrates on every GPU "
                        "touch (docs/model.md, H1)"),
        ("device_copies", "off until the H100 suite's rows are replayed with it: the driver's "
                          "rule (docs/model.md, item 10), chosen for h200 on the H200 suite "
                          "(docs/validation.md); no H100 was lent since"),
        ("shared_windows", _SHARED),
        ("partial_blocks", "on: the driver's rule for blocks smaller than 2 MiB "
                           "(docs/model.md, item 4: the probe partial_16k evicts nothing at "
                           "factor 1); the suite's H100 fit split, loss 17.446 on against "
                           "17.453 off, each with its own fitted constants"),
        ("thrashing", "off, as h200 (docs/model.md)")))

H200_PROGRESS = Model(
    name="h200-progress",
    hardware=H200_PCIE5_PROGRESS,
    fault_batch_size=256,
    host_access=True,
    device_copies=True,
    shared_windows=True,
    partial_blocks=True,
    block_progress=True,
    store_ahead=16,
    fault_order="age",
    share_units=True,
    doc="predicting a real H200 from v1.2 traces: h200 with the progress front-end (thread "
        "blocks that stall on their faults), shared windows and partial blocks, its time "
        "constants refitted (docs/validation.md); kernels without v1.2 streams replay as "
        "page sets at these constants",
    sources=(
        ("hardware", "h200-pcie5-progress: batch_ns, zero_fill_ns, migrate_page_ns " + _GRID
                     + "; zero_batch_ns 30 us, the first-touch probe's bound (its source); "
                     "the rest as h200-pcie5-fit"),
        ("fault_batch_size", "256, as h200"),
        ("host_access", "on, as h200"),
        ("device_copies", _COPIES.replace("loss 9.09 off against 8.79 on",
                                          "loss 10.67 off against 9.61 on with this front-end")),
        ("shared_windows", _SHARED),
        ("partial_blocks", "on: the driver's rule for blocks smaller than 2 MiB (docs/model.md, "
                           "item 4)"),
        ("block_progress", "on: the H200 suite's fit split, loss 19.28 against 22.52 for page "
                           "sets with the same options (docs/validation.md, 'Device-to-device "
                           "copies, and a progress preset'); the holdout's median slowdown "
                           "error x1.33 against x1.37"),
        ("store_ahead", "16: stores a block leaves outstanding (docs/validation.md, the "
                        "progress front-end's choices on the H100 rows)"),
        ("fault_order", "age: the blocks dispatched earliest on their SM first, as the GPU "
                        "was measured to serve them (docs/validation.md)"),
        ("share_units", "on: a coarse stream row stands for its block's share of the unit "
                        "(docs/semantics.md)")))

MODELS: dict[str, Model] = {m.name: m for m in (CONTRACT, H200, H100, H200_PROGRESS)}
DEFAULT_MODEL = "contract"


def get_model(model: "str | Model | None" = None, **overrides) -> Model:
    """A registered name (None: the default) or a Model, with the given fields replaced.

    Overrides that are None keep the model's value; `thrashing` may be a bool or a dict of
    THRASHING_DEFAULTS overrides (which turns it on); `hardware` a preset name or Hardware.
    """
    if model is None:
        base = MODELS[DEFAULT_MODEL]
    elif isinstance(model, Model):
        base = model
    elif isinstance(model, str) and model in MODELS:
        base = MODELS[model]
    else:
        raise ConfigError(f"unknown model {model!r}; presets: {', '.join(sorted(MODELS))}")
    ch = model_overrides(overrides)
    if not ch:
        return base
    return dataclasses.replace(base, **ch)


#: the Model fields a scenario's options (and simulate's keyword arguments) may override
OPTION_NAMES = tuple(f.name for f in dataclasses.fields(Model)
                     if f.name not in ("name", "doc", "sources"))


def model_overrides(overrides: dict) -> dict:
    """Overrides of Model fields in their canonical form: None values left out, `thrashing`
    given as a dict of THRASHING_DEFAULTS overrides turned into ``thrashing=True`` and
    `thrashing_params`. An unknown name is an error."""
    ch = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(ch) - set(OPTION_NAMES))
    if unknown:
        raise ConfigError(f"a model has no setting {unknown[0]!r}")
    if "thrashing" in ch:
        t = ch["thrashing"]
        if isinstance(t, dict):
            ch["thrashing"] = True
            ch["thrashing_params"] = tuple(sorted(t.items()))
        elif isinstance(t, (bool, np.bool_)):
            ch["thrashing"] = bool(t)
        else:
            raise ConfigError(f"thrashing must be True, False or a dict of parameters, "
                              f"got {t!r}")
    if isinstance(ch.get("thrashing_params"), dict):
        ch["thrashing_params"] = tuple(sorted(ch["thrashing_params"].items()))
    return ch


FITTED = "fitted: see docs/validation.md"


def model_from_constants(constants: dict, *, base: "str | Model" = "h200",
                         name: str | None = None, source: str = FITTED) -> Model:
    """The fitting hook: `base` with the given constants set, each one's source `source`.

    Keys are Hardware time constants (batch_ns, fault_ns, transfer_latency_ns, bw_peak_gbps,
    bw_b, zero_fill_ns, evict_ns, dtoh_bw_gbps, host_fault_ns, migrate_page_ns,
    zero_batch_ns),
    `fault_batch_size`, or thrashing parameters (THRASHING_DEFAULTS; they do not switch
    thrashing on). A fit writes
    its result as e.g. `MODELS["h200"] = model_from_constants(fit)`.
    """
    m = get_model(base)
    hw_keys = {f.name for f in dataclasses.fields(Hardware)} - {"name", "sources"}
    known = hw_keys | {"fault_batch_size"} | set(THRASHING_DEFAULTS)
    unknown = sorted(set(constants) - known)
    if unknown:
        raise ConfigError(f"model_from_constants: unknown constant {unknown[0]!r}; known: "
                          f"{', '.join(sorted(known))}")
    hw_ch = {k: float(v) for k, v in constants.items() if k in hw_keys}
    hw = m.hardware
    if hw_ch:
        hsrc = dict(hw.sources)
        hsrc.update({k: source for k in hw_ch})
        hw = dataclasses.replace(hw, name=f"{name or m.name}-fitted", sources=tuple(hsrc.items()),
                                 **hw_ch)
    ch: dict = {"hardware": hw}
    src = dict(m.sources)
    if hw_ch:
        src["hardware"] = f"{hw.name}: {', '.join(sorted(hw_ch))} {source}"
    if "fault_batch_size" in constants:
        ch["fault_batch_size"] = int(constants["fault_batch_size"])
        src["fault_batch_size"] = source
    th = {k: float(v) for k, v in constants.items() if k in THRASHING_DEFAULTS}
    if th:
        ch["thrashing_params"] = tuple({**dict(m.thrashing_params), **th}.items())
        src.update({f"thrashing.{k}": source for k in th})
    return dataclasses.replace(m, name=name or m.name, sources=tuple(src.items()), **ch)


def capacity_chunks(peak_blocks: int, *, oversub: float | None = None,
                    capacity_bytes: int | None = None,
                    capacity_chunks: int | None = None) -> int:
    """GPU memory in 2 MiB chunks from exactly one of the three ways to give it.

    With none given, factor 1 (the peak number of live VA blocks: nothing is evicted).
    """
    given = [x is not None for x in (oversub, capacity_bytes, capacity_chunks)]
    if sum(given) > 1:
        raise ConfigError("give at most one of oversub, capacity_bytes, capacity_chunks")
    if capacity_chunks is not None:
        if int(capacity_chunks) < 1:
            raise ConfigError(f"capacity_chunks must be >= 1, got {capacity_chunks}")
        return int(capacity_chunks)
    if capacity_bytes is not None:
        if int(capacity_bytes) < CHUNK_BYTES:
            raise ConfigError(f"capacity_bytes must be >= {CHUNK_BYTES} (one 2 MiB chunk), "
                              f"got {capacity_bytes}")
        return int(capacity_bytes) // CHUNK_BYTES
    f = 1.0 if oversub is None else float(oversub)
    if not 0 < f < np.inf:  # NaN fails too; infinity would mean one chunk, silently
        raise ConfigError(f"oversubscription factor must be a finite number > 0, got {oversub}")
    return max(1, int(np.floor(peak_blocks / f)))
