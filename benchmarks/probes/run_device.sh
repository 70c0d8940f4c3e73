#!/bin/bash
# The driver probes (benchmarks/probes/README.md) on the GPU machine, in one call: records
# the machine (GPU, driver, nvidia_uvm module parameters), builds native_trace (if not built)
# and benchmarks/probes/probes.cu, records each probe's trace with `uvmsim record`, runs every
# probe at factors 1, 1.25, 1.5 and 2 under `uvmsim run` with the CUPTI counters on, and
# writes compact results to $OUT. Everything logs to $OUT/run_device.log; the last lines
# printed are a summary table.
#
#   OUT=... bash benchmarks/probes/run_device.sh           # the probes (about 3.5 min)
#   CALIBRATE=1 ...                                         # then benchmarks/calibrate too
#   CALIBRATE=only ...                                      # only the calibration
#   PROBES=evict_order,partial_16k FACTORS=1.25 ...         # a subset
#   RECORD_ONLY=1 ...                                       # the traces only (no runs)
#   NO_COUNTERS=1 NO_RECORD=1 ...                           # runs without CUPTI's counters
#   DRY_RUN=1 [PYTHON=...] bash benchmarks/probes/run_device.sh   # no GPU: checks the logic
#
# Env: DEADLINE_S (default 230: no probe run is started that could end later, counted from
# this script's start; a second call resumes), FACTORS, PROBES, NO_RECORD=1, PYTHON.
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-benchmarks/out/probes_out}
mkdir -p "$OUT"

if [ "${DRY_RUN:-0}" = 1 ]; then
  bash -n "$0" || exit 1
  $PY -m py_compile benchmarks/probes/probes.py benchmarks/probes/analyze.py || exit 1
  exec $PY benchmarks/probes/probes.py dry --out "$OUT"
fi

exec > >(tee -a "$OUT/run_device.log") 2>&1
echo "== run_device.sh $(date -u +%FT%TZ) OUT=$OUT"

# ---- the machine
{
  nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free,pcie.link.gen.max,pcie.link.gen.current,pcie.link.width.current,compute_cap --format=csv
  cat /proc/driver/nvidia/version 2>/dev/null
  echo "== /sys/module/nvidia_uvm/parameters"
  for f in /sys/module/nvidia_uvm/parameters/*; do echo "$(basename "$f")=$(cat "$f" 2>/dev/null)"; done
  echo "== kernel, toolkit, CPU, memory"
  uname -a; nvcc --version | tail -2; lscpu | head -20; free -g
} > "$OUT/machine.txt" 2>&1
grep -E "uvm_perf_(map_remote|access_counter|thrashing_enable|fault_(max_batches|replay_policy|coalesce))" "$OUT/machine.txt"

SMCC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
B=native_trace/build
PB=benchmarks/probes/build
mkdir -p $PB

if [ "${CALIBRATE:-0}" != only ]; then
  # ---- build: the probes in the background while native_trace builds
  t=$(date +%s)
  NVCC=
  if [ ! -x $PB/uvm_probes ] || [ benchmarks/probes/probes.cu -nt $PB/uvm_probes ]; then
    nvcc -O2 -arch=sm_$SMCC -o $PB/uvm_probes benchmarks/probes/probes.cu > $PB/nvcc.log 2>&1 &
    NVCC=$!
  fi
  if [ ! -f $B/libuvmtrace.so ]; then
    cmake -S native_trace -B $B -DUVMTRACE_PATCH_ARCHS=$SMCC -DUVMT_TEST_ARCH=$SMCC > $OUT/build.log 2>&1 \
      && cmake --build $B -j "$(nproc)" >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; echo "native_trace build failed"; }
  fi
  [ -z "$NVCC" ] || wait $NVCC || { cat $PB/nvcc.log; echo "probes.cu build failed"; exit 1; }
  echo "build $(( $(date +%s) - t )) s"

  # ---- the probes (each run has its own timeout; a failing probe does not stop the others)
  $PY benchmarks/probes/probes.py device --out "$OUT" --started-at "$T0" \
    --deadline-s "${DEADLINE_S:-230}" \
    --factors "$([ "${RECORD_ONLY:-0}" = 1 ] || echo "${FACTORS:-1,1.25,1.5,2}")" \
    --probes "${PROBES:-}" --bin $PB/uvm_probes ${NO_RECORD:+--no-record} \
    ${NO_COUNTERS:+--no-counters}
  echo "probes done at $(( $(date +%s) - T0 )) s"
fi

# ---- optional: the H100/H200 time-layer calibration (docs/calibration.md)
if [ "${CALIBRATE:-0}" = 1 ] || [ "${CALIBRATE:-0}" = only ]; then
  t=$(date +%s)
  timeout 420 $PY benchmarks/calibrate/calibrate.py device --out "$OUT/calibrate"
  echo "calibrate rc=$? $(( $(date +%s) - t )) s"
fi

ls -la "$OUT" | tail -n +2
echo "total $(( $(date +%s) - T0 )) s"
[ "${CALIBRATE:-0}" != only ] && $PY benchmarks/probes/probes.py summary "$OUT"
exit 0
