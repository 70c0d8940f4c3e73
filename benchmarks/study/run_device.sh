#!/bin/bash
# The DL oversubscription study on the GPU machine, in one command (docs/study-dl-oversubscription.md):
# builds native_trace, records the twelve traces (six models, PCA on and off), replays them
# (the simulated sweep and its scaling over dask workers) and makes the real runs in rounds
# (benchmarks/study/study.py --plan). Resumable: finished traces and real runs are skipped, so
# repeated calls of a few minutes each complete the study.
#
#   bash benchmarks/study/run_device.sh                      # traces, then real runs
#   STEPS=real PLAN=t2,t3 MODELS=alexnet bash benchmarks/study/run_device.sh
#   STEPS=trace,scaling,real PLAN=t4 bash benchmarks/study/run_device.sh
#
# Steps (STEPS, comma-separated, run in this order): trace, sim (simulate.py on a process pool of
# every core), scaling (benchmarks/sweep_scaling.py: dask LocalCluster of SCALING_WORKERS workers,
# default 8,4,1; its first run's table becomes results/sim_runs.csv), real.
# Env: MODELS, PCA (on,off), PLAN, TIMEOUT_S (per real run, 20), BUDGET_S (the whole call,
# 570), TRACE_S (seconds for the trace step; default 45 % of what is left), JOBS (records at
# a time), SIM_ARGS (more arguments of simulate.py, e.g. "--models h200,h200-progress
# --prefetch density --table FILE --out DIR").
# dask is installed from .whl/ (wheels carried along) where the machine lacks it.
# Results: benchmarks/study/results/ (real_runs.csv, sim_runs.csv, sweep_scaling.csv,
# detail/footprints.csv, runs/*.json.gz); traces: benchmarks/study/traces/ (git-ignored).
# With $OUT set, results.tgz and traces_N.tar go there.
set -u
T0=$(date +%s)
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
STEPS=",${STEPS:-trace,real},"
S=benchmarks/study
left() { echo $(( ${BUDGET_S:-570} - ($(date +%s) - T0) )); }
B=native_trace/build
SMCC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
if [ ! -f $B/libuvmtrace.so ] || [ ! -f $B/libuvmmanaged.so ]; then
  cmake -S native_trace -B $B -DUVMTRACE_PATCH_ARCHS=$SMCC -DUVMT_TEST_ARCH=$SMCC > /tmp/uvmt_build.log 2>&1 \
    && cmake --build $B -j "$(nproc)" >> /tmp/uvmt_build.log 2>&1 || { tail -30 /tmp/uvmt_build.log; exit 1; }
fi
echo "native_trace built; $(left) s left"
ARGS=(--models "${MODELS:-alexnet,resnet50,resnet101,gpt2,bert,whisper}" --pca "${PCA:-on,off}"
      --timeout-s "${TIMEOUT_S:-20}" --jobs "${JOBS:-3}")
if [[ $STEPS == *,trace,* ]]; then
  python3 $S/study.py --steps trace "${ARGS[@]}" --out "" \
    --trace-deadline-s "${TRACE_S:-$(( $(left) * 45 / 100 ))}"   # packed once, at the end
  echo "traces done; $(left) s left"
fi
if [[ $STEPS == *,sim,* || $STEPS == *,scaling,* ]] && ! python3 -c "import distributed" 2>/dev/null \
    && ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
export UVMSIM_CACHE_DIR=${UVMSIM_CACHE_DIR:-/tmp/uvmsim-cache}
if [[ $STEPS == *,sim,* ]]; then
  timeout "$(( $(left) - 30 ))" python3 $S/simulate.py --jobs "$(nproc)" ${SIM_ARGS:-}
  echo "sim done; $(left) s left"
fi
if [[ $STEPS == *,scaling,* ]]; then
  python3 benchmarks/sweep_scaling.py --executor dask --workers "${SCALING_WORKERS:-8,4,1}" \
    --deadline-s "$(( $(left) - ${SCALING_SPARE_S:-60} ))" --csv $S/results/sweep_scaling.csv \
    --table $S/results/sim_runs.csv --no-progress
  echo "scaling done; $(left) s left"
fi
REAL=none
[[ $STEPS == *,real,* ]] && REAL=real
LEFT=$(left)
exec python3 $S/study.py --steps $REAL "${ARGS[@]}" ${PLAN:+--plan "$PLAN"} \
  --deadline-s "$(( LEFT - 25 ))" ${OUT:+--out "$OUT"}
