#!/bin/bash
# The device runs behind docs/validation.md, "What the GPU does when a fill thrashes":
# the validation's mv_col and mv_row, gemm at factor 3 and controlled kernels
# (fill_probe.cu) under `uvmsim run` with the counters and their raw records kept;
# benchmarks/validate/um_blocks.py summarises each run into $OUT/summary.jsonl.
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
OUT=${OUT:-benchmarks/out/fill_probe}
mkdir -p "$OUT"
source benchmarks/validate/build_probes.sh  # SMCC, P (fill_probe), W (workloads)
run() {  # label factor footprint_mib timeout_s command...
  local l=$1 f=$2 mib=$3 to=$4
  shift 4
  rm -rf /tmp/raw_$l
  timeout $((to + 30)) python3 -m uvmsim.groundtruth --oversub $f --footprint $((mib * 1048576 + 4096)) \
    --timeout $to --reserve 16777216 --keep-raw /tmp/raw_$l -o /tmp/res_$l.json -- "$@" > /tmp/log_$l 2>&1
  echo "$l rc=$?"
  timeout 60 python3 benchmarks/validate/um_blocks.py /tmp/raw_$l $l "$OUT"
}
run mvcol_f15 1.5 512 30 $W mv_col --mib 512 --init gpu
run mvcol_f2 2 512 30 $W mv_col --mib 512 --init gpu
run mvrow_f15 1.5 256 30 $W mv_row --mib 256 --init host
run gemm_f3 3 576 30 $W gemm --mib 576 --init host
for f in 1.5 2 3; do run st256_f$f $f 256 30 $P 256 1024 256 stride 1; done
run st256_132x256_f2 2 256 30 $P 256 132 256 stride 1
run st256_8x256_f2 2 256 30 $P 256 8 256 stride 1
run ch256_f2 2 256 30 $P 256 1024 256 chunk 1
run rw256_f2 2 256 30 $P 256 1024 256 rw 1
run rd256_f2 2 256 30 $P 256 1024 256 read 1
run hrd256_f2 2 256 30 $P 256 1024 256 hostread 1
for f in 1.5 2; do run st512_f$f $f 512 30 $P 512 1024 256 stride 1; done
run st512_132x256_f2 2 512 30 $P 512 132 256 stride 1
run st512_8x256_f2 2 512 30 $P 512 8 256 stride 1
run rw512_f2 2 512 30 $P 512 1024 256 rw 1
run st384_f2 2 384 30 $P 384 1024 256 stride 1
run st768_f2 2 768 30 $P 768 1024 256 stride 1
