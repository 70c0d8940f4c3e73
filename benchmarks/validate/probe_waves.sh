#!/bin/bash
# The same first-touch fill, k_stride over 512 MiB (fill_probe.cu), in one wave of thread
# blocks and in two, at one factor, N times each, on the GPU machine (docs/validation.md,
# "The memory PyTorch keeps for itself", the kernel tables): `fill_probe ... rw 1` launches it
# with 1,024 blocks (all resident at once on an H200: 132 SMs x 8) before a k_rw, `... stride
# 1` alone with 2,048 (two waves). Prints one line per run (kernel times, the driver's byte
# counts); the runs' JSON go to $OUT/runs.tgz.
#
#   OUT=... N=8 FACTOR=1.5 bash benchmarks/validate/probe_waves.sh
#   for F in 1.25 2 3; do OUT=$OUT/f$F N=3 FACTOR=$F bash benchmarks/validate/probe_waves.sh; done
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-benchmarks/out/probe_waves}
mkdir -p "$OUT"
source benchmarks/validate/build_probes.sh
for i in $(seq 1 "${N:-8}"); do
  for mode in "stride 1" "rw 1"; do
    m=${mode// /_}
    # the suite's fill runs: the trace's footprint (512 MiB + the 4 KiB output), the CUDA reserve
    timeout 60 python3 -m uvmsim run --oversub "${FACTOR:-1.5}" --footprint 536875008 --reserve 16MiB \
      --timeout 10 --no-counters --driver-counters -o "$OUT/r_${m}_$i.json" -- $P 512 2048 256 $mode \
      > "$OUT/r_${m}_$i.log" 2>&1
    python3 - "$OUT/r_${m}_$i.json" "$i" "$mode" <<'PY'
import json, sys
from uvmsim.groundtruth import driver_totals
r = json.load(open(sys.argv[1]))
ms = [round(x / 1e6, 1) for x in r["kernels"]["duration_ns"]]
print(sys.argv[3], sys.argv[2], "free", r["free_bytes"], "censored", r["censored"],
      "kernel ms", ms, "driver", driver_totals(r))
PY
  done
done
# one file back: a device call returns at most eight
tar czf "$OUT/runs.tgz" -C "$OUT" $(cd "$OUT" && ls r_*.json r_*.log) && rm -f "$OUT"/r_*.json "$OUT"/r_*.log
