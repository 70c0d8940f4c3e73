#!/bin/bash
# Runs the collector's GPU work on the device machine in one go (build + chosen steps), with
# every log under $OUT (or ./device_out). Usage: bash native_trace/tests/device_run.sh STEP...
#   info build tests um bench traces smoke
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/device_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
B=native_trace/build
for step in "$@"; do
  echo "=== $step $(date +%T)" | tee -a "$OUT/steps.log"
  case $step in
    info)
      { nvidia-smi; nvcc --version | tail -2; ls /usr/local/cuda/compute-sanitizer | head;
        python3 -c "import torch, torchvision, numba, pyarrow, pandas; print(torch.__version__, torchvision.__version__)"; } 2>&1 | tee "$OUT/info.log" ;;
    build)
      CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
      { cmake -S native_trace -B $B -DUVMT_TEST_ARCH=$CC && cmake --build $B -j 16; } > "$OUT/build.log" 2>&1
      echo "build rc=$?"; tail -5 "$OUT/build.log" ;;
    smoke)
      rm -rf /tmp/smoke; timeout 120 python3 -m uvmsim.record -o /tmp/smoke/p.uvmtrace --keep-raw /tmp/smoke/raw -- $B/uvmt_testprog all 2>&1 | tee "$OUT/smoke.log"
      head -c 3000 /tmp/smoke/raw/pages/pages.*.jsonl; grep -v '"kact"' /tmp/smoke/raw/timing/*.jsonl | head -20
      python3 -c "import json;m=json.load(open('/tmp/smoke/p.uvmtrace/manifest.json'));print(json.dumps(m['source'],indent=1)[:4000])" ;;
    tests)
      UVMTRACE_BUILD_DIR=$B timeout 420 python3 -m pytest -m gpu tests/gpu -v -rA -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -60 ;;
    um)
      rm -rf /tmp/um; timeout 120 python3 -m uvmsim.record -o /tmp/um/u.uvmtrace --pass timing --uvm-counters --keep-raw /tmp/um/raw -- $B/uvmt_testprog all > "$OUT/um.log" 2>&1
      grep -h '"um' /tmp/um/raw/timing/*.jsonl | head -20 | tee -a "$OUT/um.log" ;;
    bench)
      timeout 540 python3 benchmarks/trace_overhead.py --json "$OUT/overhead.json" 2>&1 | tee "$OUT/bench.log" | grep -v '^ ' ;;
    traces)
      bash native_trace/tests/make_traces.sh 2>&1 | tee "$OUT/traces.log"
      tar czf "$OUT/traces.tgz" traces/*.uvmtrace && ls -la "$OUT/traces.tgz" ;;
  esac
done
