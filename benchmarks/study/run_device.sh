#!/bin/bash
# The DL oversubscription study on the GPU machine, in one command (docs/study-dl-oversubscription.md):
# builds native_trace, records the twelve traces (six models, PCA on and off) and makes the real
# runs in rounds (benchmarks/study/study.py --plan). Resumable: finished traces and runs are
# skipped, so repeated calls of a few minutes each complete the study.
#
#   bash benchmarks/study/run_device.sh                      # traces, then real runs
#   STEPS=real PLAN=t2,t3 MODELS=alexnet bash benchmarks/study/run_device.sh
#
# Env: STEPS (trace,real), MODELS, PCA (on,off), PLAN, TIMEOUT_S (per real run, 20),
# BUDGET_S (the whole call, 570: real runs stop early enough to pack), JOBS (records at a time).
# Results: benchmarks/study/results/ (real_runs.csv, detail/footprints.csv, runs/*.json.gz);
# traces: benchmarks/study/traces/ (git-ignored). With $OUT set, results.tgz and traces_N.tar
# go there.
set -u
T0=$(date +%s)
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
B=native_trace/build
SMCC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
if [ ! -f $B/libuvmtrace.so ] || [ ! -f $B/libuvmmanaged.so ]; then
  cmake -S native_trace -B $B -DUVMTRACE_PATCH_ARCHS=$SMCC -DUVMT_TEST_ARCH=$SMCC > /tmp/uvmt_build.log 2>&1 \
    && cmake --build $B -j "$(nproc)" >> /tmp/uvmt_build.log 2>&1 || { tail -30 /tmp/uvmt_build.log; exit 1; }
fi
LEFT=$(( ${BUDGET_S:-570} - ($(date +%s) - T0) ))
echo "native_trace built; $LEFT s left"
exec python3 benchmarks/study/study.py --steps "${STEPS:-trace,real}" \
  --models "${MODELS:-alexnet,resnet50,resnet101,gpt2,bert,whisper}" --pca "${PCA:-on,off}" \
  ${PLAN:+--plan "$PLAN"} --timeout-s "${TIMEOUT_S:-20}" --jobs "${JOBS:-3}" \
  --trace-deadline-s "$(( LEFT * 45 / 100 ))" --deadline-s "$(( LEFT - 25 ))" ${OUT:+--out "$OUT"}
