#!/bin/bash
# The device runs behind docs/validation.md, "How many services a first touch takes": the
# validation's GPU-initialised programs at factor 1 (and two at 1.25) under `uvmsim run`
# with the counters and their raw records kept; benchmarks/validate/service_rounds.py
# summarises each run's fault services into $OUT/service_rounds.jsonl.
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
OUT=${OUT:-benchmarks/out/service_rounds}  # service_rounds.jsonl, gpu.txt, runs/
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader > "$OUT/gpu.txt"
source benchmarks/validate/build_probes.sh  # SMCC, P (fill_probe), W (workloads)
RES=$OUT/runs  # one result JSON per run (`uvmsim run -o`)
mkdir -p "$RES"
run() {  # label factor footprint_bytes (results/h100/footprints.csv) timeout_s command...
  local l=$1 f=$2 fp=$3 to=$4
  shift 4
  rm -rf /tmp/raw_$l
  timeout $((to + 60)) python3 -m uvmsim.groundtruth --oversub $f --footprint $fp \
    --timeout $to --reserve 16777216 --keep-raw /tmp/raw_$l -o "$RES/$l.json" -- "$@" > /tmp/log_$l 2>&1
  echo "$l rc=$?"
  timeout 60 python3 benchmarks/validate/service_rounds.py /tmp/raw_$l $l "$OUT"
  rm -rf /tmp/raw_$l
}
quiet() {  # the same without the counters: kernel times as the validation's real runs
  local l=$1 f=$2 fp=$3 to=$4
  shift 4
  timeout $((to + 60)) python3 -m uvmsim.groundtruth --oversub $f --footprint $fp --no-counters \
    --timeout $to --reserve 16777216 -o "$RES/quiet_$l.json" -- "$@" > /tmp/log_q$l 2>&1
  echo "quiet $l rc=$?"
}
# the fill probes as in workloads.csv (512 MiB, 2,048 blocks of 256 threads, 2 passes)
for p in chunk stride rw hash hostread; do run fill_${p}_f1 1 536875008 30 $P 512 2048 256 $p 2; done
run stream_f1 1 805306368 30 $W stream --mib 768 --init gpu
run stencil3d_f1 1 719323136 30 $W stencil3d --mib 768 --init gpu
run gather_f1 1 536870912 30 $W gather --mib 512 --init gpu
run mv_row_f1 1 253822976 30 $W mv_row --mib 256 --init host
run fill_stride_f1.25 1.25 536875008 30 $P 512 2048 256 stride 2
run stream_f1.25 1.25 805306368 30 $W stream --mib 768 --init gpu
# the same 512 MiB zero-filled by fewer thread blocks (one pass): fewer faults in flight at
# once, so more services for the same pages; the slope of time over services is a service's
# cost, the intercept the pages'
for g in 2048 528 132 32 8; do run fill_stride_g${g}_f1 1 536875008 30 $P 512 $g 256 stride 1; done
for p in chunk stride hash; do quiet fill_${p}_f1 1 536875008 30 $P 512 2048 256 $p 2; done
for g in 2048 528 132 32 8; do quiet fill_stride_g${g}_f1 1 536875008 30 $P 512 $g 256 stride 1; done
quiet stream_f1 1 805306368 30 $W stream --mib 768 --init gpu
