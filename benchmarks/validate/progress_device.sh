#!/bin/bash
# The H200 suite replayed with page sets and with the progress front-end, on the GPU machine
# (docs/validation.md, "The whole H200 suite with v1.2 traces"). The traces are recorded
# there and replayed there: they are too large to bring back, the rows are not.
#
#   OUT=... bash benchmarks/validate/progress_device.sh                 # trace + predict
#   STEPS=trace,probes,grid,best OUT=... bash benchmarks/validate/progress_device.sh
#
# Steps (STEPS, comma-separated; default trace,predict):
#   trace    the suite's traces (run_device.sh STEPS=trace), every workload recorded again
#   probes   the driver probes' v1.2 traces (benchmarks/probes/run_device.sh RECORD_ONLY=1)
#   predict  every H200 row replayed with page sets and with the progress front-end at
#            PROGRESS_SETS: one process per workload and model; rows to $WORK/rows/
#   grid     fit.py grid on the fit split (the suite's and the probes'), GRID points
#   best     every row (suite and probes) at the grid's least-loss point
#   latency  every row (suite and probes) with the progress front-end at PROGRESS_SETS and
#            each fault latency of LATENCIES (ns, comma-separated): rows to rows/lat_N/
#            (LAT_PARTS=suite or probes: only those rows)
# Env: WORKLOADS (only these, comma-separated: traced and replayed), DEADLINE_S (default
# 560: no replay is started after it, counted from this script's start), TRACE_DEADLINE_S
# (default 330), JOBS (default: the cores), PROGRESS_SETS, GRID, LATENCIES, OPTIONS (more
# --option NAME=VALUE for every replay, e.g. "--option device_copies=on").
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
# engines compiled once and kept in the tree (git-ignored), so a second call on a warm
# machine compiles nothing
export UVMSIM_CACHE_DIR=${UVMSIM_CACHE_DIR:-$PWD/benchmarks/out/engine_cache}
OUT=${OUT:-benchmarks/out/progress_device}
# rows and logs are many small files: they are kept in WORK and come back as one tarball
WORK=${WORK:-benchmarks/out/progress_work}
STEPS=${STEPS:-trace,predict}
JOBS=${JOBS:-$(nproc)}
DEADLINE_S=${DEADLINE_S:-560}
mkdir -p "$OUT" "$WORK/rows" "$WORK/logs"
exec > >(tee -a "$OUT/log.txt") 2>&1
has() { [[ ",$STEPS," == *",$1,"* ]]; }
left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }
echo "== progress_device.sh $(date -u +%FT%TZ) STEPS=$STEPS JOBS=$JOBS"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free --format=csv,noheader

V=benchmarks/validate
PROBE_TRACES=benchmarks/out/probes/traces
PROBE_RUNS=benchmarks/probes/results/h200/quiet/probes.csv
PROBES="--probes $PROBE_TRACES --probe-runs $PROBE_RUNS"  # the probes' runs as workloads
# the page-set replay every row shares: small allocations share windows, partial blocks
# take fewer chunks (docs/model.md)
BASE="--card h200 --option shared_windows=on --option partial_blocks=on ${OPTIONS:-}"
PROGRESS="--option block_progress=on --option store_ahead=16 --option fault_order=age --option share_units=on"
PROGRESS_SETS=${PROGRESS_SETS:---set batch_ns=80000 --set zero_fill_ns=300 --set migrate_page_ns=128}
LATENCIES=${LATENCIES:-5000,15000,40000}
GRID=${GRID:---grid batch_ns=30000,80000,137000 --grid zero_fill_ns=131.2,300 --grid migrate_page_ns=0,128,256}

if has trace; then
  STEPS=trace DEADLINE_S=${TRACE_DEADLINE_S:-330} bash $V/run_device.sh
  cp $V/results/footprints.csv "$WORK/footprints.csv" 2>/dev/null
  du -sh $V/traces/*.uvmtrace 2>/dev/null
  echo "trace done at $(( $(date +%s) - T0 )) s"
fi
if has probes; then
  RECORD_ONLY=1 OUT=benchmarks/out/probes_out DEADLINE_S=200 bash benchmarks/probes/run_device.sh \
    > "$WORK/logs/probes_record.log" 2>&1
  tail -5 "$WORK/logs/probes_record.log"
  echo "probes done at $(( $(date +%s) - T0 )) s"
fi

# one fit.py predict per (workload, model) in parallel; a job is skipped once the deadline
# is near, and every job has its own timeout
predict_all() {  # NAME EXTRA_ARGS WORKLOADS...
  local name=$1 extra=$2; shift 2
  mkdir -p "$WORK/rows/$name"
  for w in "$@"; do echo "$w"; done | xargs -P "$JOBS" -I{} bash -c '
    [ '"$DEADLINE_S"' -gt $(( $(date +%s) - '"$T0"' + 60 )) ] || { echo "skip {} (deadline)"; exit 0; }
    t=$(date +%s)
    timeout $(( '"$DEADLINE_S"' - ($(date +%s) - '"$T0"') )) '"$PY $V/fit.py predict $BASE $extra"' \
      --workloads {} --csv '"$WORK/rows/$name"'/{}.csv > '"$WORK/logs/$name"'_{}.log 2>&1
    echo "'"$name"' {} rc=$? $(( $(date +%s) - t )) s"'
}
probe_names() {  # the probes whose runs in PROBE_RUNS ended ok
  $PY -c "import csv; print(' '.join(sorted({r['probe'] for r in csv.DictReader(open('$PROBE_RUNS')) if r['status'] == 'ok'})))"
}
suite_workloads() {
  $PY - <<'EOF'
import csv, pathlib
rows = [r for r in csv.DictReader(open("benchmarks/validate/results/real_runs.csv"))
        if r["card"] == "NVIDIA H200"]
ws = sorted({r["workload"] for r in rows})
print(" ".join(w for w in ws if (pathlib.Path("benchmarks/validate/traces") / f"{w}.uvmtrace" / "manifest.json").exists()))
EOF
}

if has predict; then
  W=${WORKLOADS:-$(suite_workloads)}
  W=${W//,/ }
  echo "predict: $W"
  # the two models' pools side by side: the page-set replays are short and fill the gaps
  ( predict_all progress "$PROGRESS $PROGRESS_SETS" $W ) & P1=$!
  ( predict_all page_sets "" $W ) & P2=$!
  wait $P1 $P2   # not a bare wait: it would wait for the log's tee too
  echo "predict done at $(( $(date +%s) - T0 )) s"
fi
if has grid; then
  t=$(date +%s)
  timeout $(left) $PY $V/fit.py grid $BASE $PROGRESS $PROBES \
    --jobs "$JOBS" $GRID --out "$WORK/grid.json" > "$WORK/logs/grid.log" 2>&1
  echo "grid rc=$? $(( $(date +%s) - t )) s"; tail -3 "$WORK/logs/grid.log"
fi
if has best; then
  # the grid's fixed --set constants and its best point: both made its loss
  SETS=$($PY -c "import json; g=json.load(open('$WORK/grid.json'))['h200']; print(' '.join(f'--set {k}={v}' for k, v in {**g['sets'], **g['best']}.items()))")
  echo "best: $SETS"
  W="${WORKLOADS:-$(suite_workloads) $(probe_names)}"
  W=${W//,/ }
  predict_all best "$PROGRESS $SETS $PROBES" $W
  echo "best done at $(( $(date +%s) - T0 )) s"
fi
if has latency; then
  W=${WORKLOADS:-$(suite_workloads)}
  W=${W//,/ }
  PW=$(probe_names)
  # the suite's rows at every latency first, then the probes' (the deadline may cut those)
  for L in ${LATENCIES//,/ }; do
    [[ "${LAT_PARTS:-suite,probes}" == *suite* ]] || break
    predict_all "lat_$L" "$PROGRESS $PROGRESS_SETS --option fault_latency_ns=$L" $W
  done
  for L in ${LATENCIES//,/ }; do
    [[ "${LAT_PARTS:-suite,probes}" == *probes* ]] || break
    predict_all "lat_$L" "$PROGRESS $PROGRESS_SETS --option fault_latency_ns=$L $PROBES" $PW
  done
  echo "latency done at $(( $(date +%s) - T0 )) s"
fi
# what comes back: the rows and logs in one tarball, and log.txt
tar czf "$OUT/rows.tgz" -C "$WORK" rows logs $(cd "$WORK" && ls footprints.csv grid.json 2>/dev/null)
echo "total $(( $(date +%s) - T0 )) s"
