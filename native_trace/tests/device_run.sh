#!/bin/bash
# Runs the collector's GPU work on the device machine in one go (build + chosen steps), with
# every log under $OUT (or ./device_out). Usage: bash native_trace/tests/device_run.sh STEP...
#   info build smoke tests um bench tf32 resnet_notf32 traces bench12 traces12
# uvmtrace v1.2 (per-thread-block streams), under 8 minutes on one H100/H200:
#   PATCH_ARCHS=native bash native_trace/tests/device_run.sh build tests traces12 bench12
# PATCH_ARCHS=native builds the device patch for this GPU only (the default is every SM).
# BUDGET_S (default 420; with the kill grace periods the call stays under 8 minutes): every
# step's timeouts are cut to the time left and a step that starts with less than 20 s left is
# skipped, so the call ends within the budget. Every program runs under `timeout`.
# What comes back (all small): SUMMARY.md (read this first: each step's status and time, the
# GPU tests that failed and why, the v1.2 captures against the bundled v1.1 traces, the page
# pass's cost against plain runs), steps.tsv, gpu.txt, build.log, gpu_tests.{log,xml,csv},
# traces12.{csv,json,log}, traces12_summary.log, trace12_<name>.tar (captures up to 8 MiB),
# bench12_<model>[_managed].csv, overhead12_<model>[_managed].json, bench12.log.
set -u
BUDGET_S=${BUDGET_S:-420}
left() { local l=$((BUDGET_S - SECONDS)); [ $l -lt 1 ] && l=1; [ $l -gt $1 ] && l=$1; echo $l; }  # never 0: timeout 0 waits forever
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/device_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
B=native_trace/build
timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
for step in "$@"; do
  echo "=== $step $(date +%T)" | tee -a "$OUT/steps.log"
  if [ $((BUDGET_S - SECONDS)) -lt 20 ]; then printf '%s\tSKIPPED\t0\n' "$step" >> "$OUT/steps.tsv"; continue; fi
  t_step=$SECONDS
  case $step in
    info)
      { timeout 30 nvidia-smi; timeout 30 nvcc --version | tail -2; ls /usr/local/cuda/compute-sanitizer | head;
        timeout 60 python3 -c "import torch, torchvision, numba, pyarrow, pandas; print(torch.__version__, torchvision.__version__)"; } 2>&1 | tee "$OUT/info.log" ;;
    build)
      SMCC=$(timeout 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
      PA=${PATCH_ARCHS:-}; [ "$PA" = native ] && PA=$SMCC
      { timeout $(left 60) cmake -S native_trace -B $B -DUVMT_TEST_ARCH=$SMCC ${PA:+-DUVMTRACE_PATCH_ARCHS=$PA} && timeout $(left 240) cmake --build $B -j 16; } > "$OUT/build.log" 2>&1
      rc=$?; echo "build rc=$rc"; tail -5 "$OUT/build.log"; (exit $rc) ;;
    smoke)
      rm -rf /tmp/smoke; timeout 120 python3 -m uvmsim.record -o /tmp/smoke/p.uvmtrace --keep-raw /tmp/smoke/raw -- $B/uvmt_testprog all 2>&1 | tee "$OUT/smoke.log"
      { grep -h -v '"alloc"\|"free"' /tmp/smoke/raw/pages/pages.*.jsonl | cut -c1-400; grep -h -v '"kact"' /tmp/smoke/raw/timing/*.jsonl; } | tee -a "$OUT/smoke.log" | grep -i 'graph\|"end"' 
      timeout 60 python3 -c "import json;m=json.load(open('/tmp/smoke/p.uvmtrace/manifest.json'));print(json.dumps(m['source'],indent=1)[:4000])" ;;
    tests)  # JUnit report for device_summary.py; SIGINT first so pytest still writes it
      PT=(); timeout 30 python3 -c "import pytest_timeout" 2>/dev/null && PT=(--timeout 120)
      UVMTRACE_BUILD_DIR=$B timeout -s INT -k 15 $(left 200) python3 -m pytest -m gpu tests/gpu -v -rA -p no:cacheprovider \
        "${PT[@]}" --junitxml="$OUT/gpu_tests.xml" 2>&1 | tee "$OUT/gpu_tests.log" | tail -60; (exit ${PIPESTATUS[0]}) ;;
    um)
      rm -rf /tmp/um; timeout 120 python3 -m uvmsim.record -o /tmp/um/u.uvmtrace --pass timing --uvm-counters --keep-raw /tmp/um/raw -- $B/uvmt_testprog all > "$OUT/um.log" 2>&1
      grep -h '"um' /tmp/um/raw/timing/*.jsonl | head -20 | tee -a "$OUT/um.log" ;;
    bench)
      timeout 420 python3 benchmarks/trace_overhead.py --json "$OUT/overhead.json" 2>&1 | tee "$OUT/bench.log" | grep -v '^ ' ;;
    tf32)  # do the Hopper TMA kernels (no pages) go away without TF32?
      for f in tf32 notf32; do rm -rf /tmp/x_$f.uvmtrace; fl=""; [ $f = notf32 ] && fl=--no-tf32
        timeout 200 python3 -m uvmsim.record -o /tmp/x_$f.uvmtrace -- python3 native_trace/tests/torch_train.py --model resnet50 --batch 4 --image 128 --steps 1 $fl > /dev/null 2>&1
      done
      timeout 60 python3 -c "
import json
for f in ('tf32', 'notf32'):
    s = json.load(open(f'/tmp/x_{f}.uvmtrace/manifest.json'))['source']
    print(f'{f}: missing={s[\"kernels_without_pages\"]} kernels={s[\"kernels\"]} rows={s[\"access_rows\"]} join={s[\"join\"][\"status\"]} by_name={s[\"kernels_without_pages_by_name\"]}')
" 2>&1 | tee "$OUT/tf32.log" ;;
    resnet_notf32)  # re-capture the ResNet-50 traces without TF32 if that leaves no kernel without pages
      if grep -q '^notf32: missing=0 ' "$OUT/tf32.log"; then
        RESNET_FLAGS=--no-tf32 ONLY="resnet50_pca resnet50_nopca" timeout 600 bash native_trace/tests/make_traces.sh 2>&1 | tee -a "$OUT/traces.log"
        timeout 120 python3 native_trace/tests/trace_summary.py traces/resnet50_*.uvmtrace 2>&1 | tee -a "$OUT/traces.log"
        for n in resnet50_pca resnet50_nopca; do tar cf "$OUT/trace_$n.tar" traces/$n.uvmtrace; done
      else echo "no-tf32 does not remove the kernels without pages: keeping the TF32 captures" | tee -a "$OUT/traces.log"; fi ;;
    bench12)  # page pass cost against plain runs, v1.2 and as v1.1 recorded, per-launch breakdown
      rc=0
      for spec in "mobilenet_v2:plain,pages,pages-v11:" "gpt2:plain,pages:" "mobilenet_v2:plain,pages:--managed"; do
        IFS=: read -r models modes flags <<< "$spec"; t=$(left 150); [ $t -lt 20 ] && { echo "bench12 $flags: skipped (budget)"; continue; }
        timeout $t python3 benchmarks/trace_overhead.py --model $models --batch 8 --steps 3 --image 128 --layers 3 $flags \
          --modes $modes --json "$OUT/overhead12_$models${flags:+_managed}.json" --csv "$OUT/bench12_$models${flags:+_managed}.csv" 2>&1 \
          | tee -a "$OUT/bench12.log" | grep -v '^ \|^[{}]'; r=${PIPESTATUS[0]}; [ $r -ne 0 ] && rc=$r
      done; (exit $rc) ;;
    traces12)  # v1.2 captures of the bundled traces: sizes and page-pass wall against traces/
      t=$(left 170)
      rm -rf /tmp/t12; MAX_KIB=0 TRACES_DIR=/tmp/t12 RESNET_FLAGS=--no-tf32 ONLY="${TRACES12:-microbench gpt2_small resnet50_pca}" \
        timeout $t bash native_trace/tests/make_traces.sh 2>&1 | tail -20 | tee "$OUT/traces12.log"; rc=${PIPESTATUS[0]}
      timeout $(( $(left 60) + 10 )) python3 native_trace/tests/streams_summary.py /tmp/t12 traces --json "$OUT/traces12.json" --csv "$OUT/traces12.csv" > "$OUT/traces12_summary.log" 2>&1
      cat "$OUT/traces12.csv"
      for t in /tmp/t12/*.uvmtrace; do n=$(basename $t .uvmtrace); k=$(du -sk $t | cut -f1)
        if [ "$k" -le 8192 ]; then tar cf "$OUT/trace12_$n.tar" -C /tmp/t12 $n.uvmtrace; else echo "$n: ${k} KiB, over 8 MiB: not kept" | tee -a "$OUT/traces12.log"; fi
      done; (exit $rc) ;;
    traces)
      timeout 900 bash native_trace/tests/make_traces.sh 2>&1 | tee -a "$OUT/traces.log"
      timeout 120 python3 native_trace/tests/trace_summary.py traces/*.uvmtrace 2>&1 | tee -a "$OUT/traces.log"
      for t in traces/*.uvmtrace; do n=$(basename $t .uvmtrace); tar cf "$OUT/trace_$n.tar" $t; done; ls -la "$OUT" ;;
    *) echo "unknown step $step"; false ;;
  esac
  printf '%s\t%s\t%s\n' "$step" "$?" $((SECONDS - t_step)) >> "$OUT/steps.tsv"
done
timeout 60 python3 native_trace/tests/device_summary.py "$OUT" || echo "device_summary.py failed: see the files in $OUT"
