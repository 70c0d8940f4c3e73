#!/bin/bash
# First device probes of the ground-truth harness (docs/groundtruth.md says what they found):
# the balloon and the UVM counters on a small oversubscribed run, the counters' cost, and
# PyTorch on managed memory (interposed cudaMalloc with the caching allocator on and off, the
# pluggable allocator), under `uvmsim record` and under the balloon. Logs go to $OUT.
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD/src
P=/tmp/probe; rm -rf $P; mkdir -p $P
B=native_trace/build; W=benchmarks/validate/build/uvm_workloads; T=benchmarks/validate/torch_models.py
M=$PWD/$B/libuvmmanaged.so
SMCC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
{ nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free --format=csv; nvcc --version | tail -1;
  python3 -c "import torch; print('torch', torch.__version__)"; } 2>&1
t=$(date +%s)
cmake -S native_trace -B $B -DUVMTRACE_PATCH_ARCHS=$SMCC -DUVMT_TEST_ARCH=$SMCC > $P/build.log 2>&1 && cmake --build $B -j 16 >> $P/build.log 2>&1 || { tail -30 $P/build.log; exit 1; }
mkdir -p benchmarks/validate/build && nvcc -O2 -arch=sm_$SMCC -o $W benchmarks/validate/workloads.cu || exit 1
echo "build $(( $(date +%s) - t )) s"
run() { echo "--- $*"; timeout 200 python3 -m uvmsim run "$@" 2>&1 | tail -4; }
# 1. balloon + counters on a small run; counters' cost (same run without them)
for f in 1 2; do run --oversub $f --footprint 128MiB --timeout 45 -o $P/mv_row_f$f.json -- $W mv_row --mib 128 --init host; done
run --oversub 2 --footprint 128MiB --timeout 45 --no-counters -o $P/mv_row_f2_nc.json -- $W mv_row --mib 128 --init host
run --oversub 1.5 --footprint 512MiB --timeout 20 -- $W gather --mib 512 --init gpu
# 2. PyTorch on managed memory
for mode in "LD_PRELOAD=$M" "LD_PRELOAD=$M PYTORCH_NO_CUDA_MEMORY_CACHING=1"; do
  echo "--- plain $mode"; env $mode timeout 120 python3 $T --model mlp --steps 2 2>&1 | tail -5
done
echo "--- pluggable"; timeout 120 python3 $T --model mlp --steps 2 --alloc pluggable 2>&1 | tail -5
echo "--- none"; timeout 120 python3 $T --model mlp --steps 2 --alloc none 2>&1 | tail -5
rm -rf /tmp/mlp.uvmtrace; timeout 240 python3 -m uvmsim.record -o /tmp/mlp.uvmtrace -- env LD_PRELOAD=$M python3 $T --model mlp --steps 1 2>&1 | tail -4
python3 -c "
from uvmsim import load_trace; from uvmsim.groundtruth import peak_live_managed_bytes as p
t=load_trace('/tmp/mlp.uvmtrace'); print('mlp trace', t, 'peak managed', p(t), 'join', t.manifest['source']['join'])" 2>&1 | tail -2
run --oversub 1.5 --trace /tmp/mlp.uvmtrace --timeout 60 -o $P/mlp_f1.5.json -- env LD_PRELOAD=$M python3 $T --model mlp --steps 1
# 3. GPU tests
UVMTRACE_BUILD_DIR=$B timeout 300 python3 -m pytest -m gpu tests/gpu/test_gpu_groundtruth.py -v -rA -p no:cacheprovider 2>&1 | tail -15
echo "probe total $(( $(date +%s) - t )) s"
[ -n "${OUT:-}" ] && tar czf "$OUT/probe.tgz" -C /tmp probe
