#!/bin/bash
# The validation suite on the GPU machine, in one command (benchmarks/validate/README.md):
# builds native_trace and the workloads, then records traces and/or makes the real runs.
#
#   bash benchmarks/validate/run_device.sh                 # everything (several device calls:
#                                                          # it resumes where it stopped)
#   STEPS=trace WORKLOADS=gemm,mv_row bash benchmarks/validate/run_device.sh
#   STEPS=real FACTORS=2,3 DEADLINE_S=500 bash benchmarks/validate/run_device.sh
#   COUNTER_FACTORS= STEPS=real bash ...                  # no counter runs (empty: none)
#   RESULTS_DIR=benchmarks/validate/results/h100 MAX_TIMEOUT_S=30 STEPS=reserve,real \
#     bash benchmarks/validate/run_device.sh       # another card's runs in their own folder
#
# Results: benchmarks/validate/results/{real_runs.csv,footprints.csv,runs/*.json.gz};
# traces: benchmarks/validate/traces/ (git-ignored). With $OUT set, copies of the CSVs, a
# tarball of the runs and one of the traces go there.
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
B=native_trace/build
SMCC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
if [ ! -f $B/libuvmtrace.so ] || [ ! -f $B/libuvmmanaged.so ]; then
  cmake -S native_trace -B $B -DUVMTRACE_PATCH_ARCHS=$SMCC -DUVMT_TEST_ARCH=$SMCC > /tmp/uvmt_build.log 2>&1 \
    && cmake --build $B -j "$(nproc)" >> /tmp/uvmt_build.log 2>&1 || { tail -30 /tmp/uvmt_build.log; exit 1; }
fi
exec python3 benchmarks/validate/validate.py --steps "${STEPS:-trace,reserve,real}" \
  --workloads "${WORKLOADS:-}" --factors "${FACTORS:-1,1.25,1.5,2,3}" \
  --counter-factors "${COUNTER_FACTORS-1,1.5,2}" --deadline-s "${DEADLINE_S:-540}" ${OUT:+--out "$OUT"} \
  ${RESULTS_DIR:+--results "$RESULTS_DIR"} ${MAX_TIMEOUT_S:+--max-timeout-s "$MAX_TIMEOUT_S"}
