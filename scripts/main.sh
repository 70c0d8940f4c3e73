#!/usr/bin/env bash
# The main job: replay a bundled real trace over the prefetch policies and oversubscription
# factors 1.0-3.0; print the table and write out/sweep.png and out/sweep.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
trace="${1:-$(cat traces/MAIN)}"
mkdir -p out
.venv/bin/uvmsim sweep "$trace" --oversub 1.0,1.25,1.5,2.0,2.5,3.0 \
  --prefetch none,64k,2m,density --evict lru2m -o out/sweep.csv --plot out/sweep.png
