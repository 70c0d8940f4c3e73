#!/bin/bash
# benchmarks/before_after.py on a many-core machine in one call (docs/performance.md, "Before
# and after"): compile every engine of both trees in parallel first (one process per policy
# pair), then run several before_after.py processes, each pinned to its own core.
#
#   BEFORE=<old tree> AFTER=<new tree> OUT=<dir> bash benchmarks/before_after_parallel.sh
#
# BEFORE and AFTER are plain copies of two checkouts (git archive), OUT gets ba_<core>.md
# (the tables) and the logs. CORES (default "2 4 6 8"), ROUNDS (default 3) and DEADLINE_S (default
# 330: no round starts after it) may be set.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "$BEFORE" && pwd); A=$(cd "$AFTER" && pwd); T0=$SECONDS
lscpu | grep -E 'Model name|^CPU\(s\)'; uptime
srcof() { if [ -d "$1/src/uvmsim" ]; then echo "$1/src"; else echo "$1"; fi; }
# both trees replay the same trace files (built by the before tree's benchmark)
mkdir -p "$B/benchmarks/out"; ln -sfn "$B/benchmarks/out" "$A/benchmarks/out"
(cd "$B" && PYTHONPATH=$(srcof "$B") UVMSIM_CACHE_DIR=/tmp/ba_gen timeout 200 python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); from replay_throughput import ensure_trace
print(ensure_trace('training'), ensure_trace('fault-heavy'))") > "$OUT/gen.txt" 2>&1 &
for tree in before after; do
  dir=$B; [ $tree = after ] && dir=$A
  src=$(srcof "$dir")
  for pair in $(PYTHONPATH=$src python3 "$HERE/prewarm_engines.py" --pairs); do
    (cd /tmp && PYTHONPATH=$src UVMSIM_CACHE_DIR=/tmp/ba_cache/$tree timeout 240 \
      python3 "$HERE/prewarm_engines.py" "$pair" >> "$OUT/prewarm_$tree.txt" 2>&1) &
  done
done
wait; echo "engines and traces ready at $((SECONDS-T0)) s"; uptime
for c in ${CORES:-2 4 6 8}; do
  taskset -c "$c" timeout $((580-SECONDS+T0)) python3 "$A/benchmarks/before_after.py" \
    --before "$B" --after "$A" --rounds "${ROUNDS:-3}" --deadline-s $((${DEADLINE_S:-330}-SECONDS+T0)) \
    --cache-dir /tmp/ba_cache --table "$OUT/ba_$c.md" > "$OUT/ba_$c.log" 2>&1 &
done
wait; echo "done at $((SECONDS-T0)) s"; uptime
